// launch/option_spelling.h: torchrun's argparse reading of option words megatron-run knows by no exact name.
#include <catch2/catch.hpp>

#include "config/diagnostic.h"
#include "launch/option_spelling.h"
#include "launch/program.h"

using mr::launch::OptionSpelling;

namespace {

// A part of megatron-run's run command: torchrun's options in both spellings, and some of its own.
OptionSpelling spelling() {
  OptionSpelling s;
  s.long_options = {"--config",          "--nproc-per-node",     "--nproc_per_node", "--nnodes",
                    "--node-rank",       "--node_rank",          "--redirects",      "--tee",
                    "--local-ranks-filter", "--local_ranks_filter", "--standalone",   "--dry-run",
                    "--module"};
  s.short_options = {{"-r", "--redirects"}, {"-t", "--tee"}};
  s.switches = {{"-h", "--help"}, {"-m", "--module"}, {"--standalone"}, {"--dry-run"}};
  return s;
}

std::string spell(const std::string& w) { return spelling().spell(w, mr::Schema::megatron()); }

std::string refusal(const std::string& w) {
  try {
    (void)spell(w);
  } catch (const mr::UsageError& e) {
    return e.what();
  }
  return "(accepted)";
}

}  // namespace

TEST_CASE("option spelling: a short option's attached value, as argparse reads -r3 and -r=3", "[launch][spelling]") {
  CHECK(spell("-r") == "--redirects");
  CHECK(spell("-r3") == "--redirects=3");
  CHECK(spell("-r=3") == "--redirects=3");    // argparse splits at the '=' after the option string
  CHECK(spell("-r==3") == "--redirects==3");  // one '=' dropped: the value is '=3'
  CHECK(spell("-t0:3,1:1") == "--tee=0:3,1:1");
  CHECK(spell("-x3") == "-x3");  // no short option of ours: the parsers name it
  CHECK(spell("-5") == "-5");
}

TEST_CASE("option spelling: unambiguous prefixes of our long options, with or without =VALUE", "[launch][spelling]") {
  CHECK(spell("--nn") == "--nnodes");
  CHECK(spell("--nn=2") == "--nnodes=2");
  CHECK(spell("--nproc-") == "--nproc-per-node");
  CHECK(spell("--nproc_p=4") == "--nproc_per_node=4");
  CHECK(spell("--stand") == "--standalone");
  CHECK(spell("--modu") == "--module");
  CHECK(spell("--local-ranks") == "--local-ranks-filter");
  // Exact names stay as written (the two spellings are two names).
  CHECK(spell("--nnodes=2") == "--nnodes=2");
  CHECK(spell("--node_rank") == "--node_rank");
}

TEST_CASE("option spelling: Megatron's flags are never abbreviated, and a whole one is never ours", "[launch][spelling]") {
  // --local-rank is Megatron's flag and a prefix of --local-ranks-filter: torchrun would take it; here it is Megatron's.
  CHECK(spell("--local-rank") == "--local-rank");
  CHECK(spell("--local-rank=0") == "--local-rank=0");
  // A prefix of a Megatron flag only: left for Megatron's parser (allow_abbrev=False), which refuses it.
  CHECK(spell("--num-lay") == "--num-lay");
  CHECK(spell("--num-layers") == "--num-layers");
  // A prefix of one of ours that also starts a Megatron flag may be that flag cut short: refused, naming both,
  // never taken silently as ours (--local-ran would have become --local-ranks-filter).
  CHECK(refusal("--local-ran") == "ambiguous option: --local-ran could match --local-ranks-filter, --local-rank "
                                  "(Megatron's flags are never abbreviated: write the one you mean in full)");
  CHECK(refusal("--mod=x") == "ambiguous option: --mod=x could match --module, --model-parallel-size (Megatron's "
                              "flags are never abbreviated: write the one you mean in full)");
  // '_' and '-' are alike when looking for the Megatron flag a word may be: --local_rank=0 (Megatron's old spelling,
  // which torch.distributed.launch passes; torchrun 2.x reads it as --local_ranks_filter=0 and hides the other
  // ranks' output) is refused naming --local-rank first, not taken as --local_ranks_filter.
  CHECK(refusal("--local_rank=0") == "ambiguous option: --local_rank=0 could match --local_ranks_filter, --local-rank "
                                     "(--local_rank is Megatron's --local-rank spelt with '_', which Megatron's parser "
                                     "does not take; torchrun would read it as --local_ranks_filter: write the one you "
                                     "mean in full)");
  CHECK_THAT(refusal("--local_rank"), Catch::StartsWith("ambiguous option: --local_rank could match --local_ranks_filter, "
                                                        "--local-rank (--local_rank is Megatron's"));
  CHECK(refusal("--local_ran") == "ambiguous option: --local_ran could match --local_ranks_filter, --local-rank "
                                  "(Megatron's flags are never abbreviated: write the one you mean in full)");
  // A prefix of ours only, with '_' or not, is still ours; so is a whole name of ours.
  CHECK(spell("--local_ranks") == "--local_ranks_filter");
  CHECK(spell("--nproc_p=4") == "--nproc_per_node=4");
}

TEST_CASE("option spelling: an ambiguous prefix is refused naming every option string it could be", "[launch][spelling]") {
  // argparse counts option strings, not options: the two spellings of --nproc-per-node make --nproc ambiguous.
  CHECK(refusal("--nproc") == "ambiguous option: --nproc could match --nproc-per-node, --nproc_per_node");
  CHECK(refusal("--n=2") == "ambiguous option: --n=2 could match --nproc-per-node, --nproc_per_node, --nnodes, "
                            "--node-rank, --node_rank");
  CHECK(refusal("--local") == "ambiguous option: --local could match --local-ranks-filter, --local_ranks_filter");
}

TEST_CASE("split_program with torchrun's spelling: only the words before the program are written out", "[launch][spelling]") {
  const OptionSpelling s = spelling();
  const std::vector<std::string> own_values = {"--config", "--nproc-per-node", "--nproc_per_node", "--nnodes",
                                               "--node-rank", "--node_rank", "--redirects", "--tee",
                                               "--local-ranks-filter", "--local_ranks_filter", "-r", "-t"};
  const std::vector<std::string> own_switches = {"--standalone", "--dry-run"};
  auto split = [&](const std::vector<std::string>& w) {
    return mr::launch::split_program(w, mr::Schema::megatron(), own_values, own_switches, &s);
  };
  // --nn takes its value (it is --nnodes): train.py is the program, and its own --nn stays its own.
  auto p = split({"--nn", "2", "-r3", "--num-layers", "4", "train.py", "--nn", "-r3"});
  CHECK(p.form == mr::launch::Program::Form::Script);
  CHECK(p.start == 5);
  CHECK(p.words == std::vector<std::string>{"--nnodes", "2", "--redirects=3", "--num-layers", "4", "train.py", "--nn",
                                            "-r3"});
  // A prefix of --module is torchrun's -m form.
  auto m = split({"--stand", "--modu", "pkg.train", "--stand"});
  CHECK(m.form == mr::launch::Program::Form::Module);
  CHECK(m.start == 2);
  CHECK(m.words[0] == "--standalone");
  CHECK(m.words[3] == "--stand");
  // Without a spelling nothing is written out, and an unknown word stops the search for the program.
  auto plain = mr::launch::split_program({"--nn", "2", "train.py"}, mr::Schema::megatron(), own_values, own_switches);
  CHECK(plain.stopped_at_unknown);
  CHECK(plain.words[0] == "--nn");
  // An ambiguous prefix before the program is refused; after it, it is the program's.
  CHECK_THROWS_AS(split({"--nproc", "2", "train.py"}), mr::UsageError);
  CHECK(split({"train.py", "--nproc", "2"}).start == 0);
}

TEST_CASE("option spelling: a switch given a value is refused as argparse refuses it, however spelled",
          "[launch][spelling]") {
  // argparse: "argument -m/--module: ignored explicit argument 'x'" for every one of these.
  for (const char* w : {"--module=x", "--modu=x", "-m=x", "-mx"}) {
    INFO(w);
    CHECK(refusal(w) == "argument -m/--module: ignored explicit argument 'x'");
  }
  CHECK(refusal("--standalone=1") == "argument --standalone: ignored explicit argument '1'");
  CHECK(refusal("--stand=") == "argument --standalone: ignored explicit argument ''");
  CHECK(refusal("--dry-run=yes") == "argument --dry-run: ignored explicit argument 'yes'");
  CHECK(refusal("-h=1") == "argument -h/--help: ignored explicit argument '1'");
  // -mr3 is -m -r3 to argparse (a chain of short options): left to the parsers, as any word of two options.
  CHECK(spell("-mr3") == "-mr3");
  CHECK(spell("-m") == "-m");
  // Lenient (reading a refused command line): left as written, refused nowhere.
  OptionSpelling lenient = spelling();
  lenient.lenient = true;
  CHECK(lenient.spell("--modu=x", mr::Schema::megatron()) == "--module=x");
  CHECK(lenient.spell("-mx", mr::Schema::megatron()) == "-mx");
  CHECK(lenient.spell("--nproc", mr::Schema::megatron()) == "--nproc");
}

TEST_CASE("split_program: past an unknown option the option words are still spelled, refusing none",
          "[launch][spelling]") {
  const OptionSpelling s = spelling();
  const std::vector<std::string> own_values = {"--config", "--nproc-per-node", "--nproc_per_node", "--nnodes"};
  auto split = [&](const std::vector<std::string>& w) {
    return mr::launch::split_program(w, mr::Schema::megatron(), own_values, {"--standalone", "--dry-run"}, &s);
  };
  // argparse reads --nproc-per as --nproc-per-node after --bogus (torchrun lists --bogus alone).
  auto p = split({"--bogus", "--nproc-per", "2", "--nproc", "train.py", "--nn=2", "--", "--nn"});
  CHECK(p.stopped_at_unknown);
  CHECK(p.form == mr::launch::Program::Form::Worker);  // no program looked for: `2` may be --bogus's value
  CHECK(p.words == std::vector<std::string>{"--bogus", "--nproc-per-node", "2", "--nproc", "train.py", "--nnodes=2",
                                            "--", "--nn"});
}
