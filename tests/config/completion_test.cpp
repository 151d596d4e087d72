// Shell completion (lib/config/completion.h, apps/megatron-run/completion_spec.cpp): the bash, zsh and fish
// scripts `schema --format *-completion` prints, loaded into the real shells and asked for completions.
#include <catch2/catch.hpp>

#include <algorithm>
#include <sstream>
#include <string>

#include "binary.h"
#include "config/completion.h"
#include "config/converters.h"
#include "config/schema.h"

namespace {
using Result = mrtest::Proc;
std::string bin() { return std::string("'") + MR_BINARY + "'"; }
Result run(const std::string& cmd) { return mrtest::run_shell(cmd + " 2>&1"); }
std::string script(const std::string& shell) {
  const std::string path = mrtest::write_file(shell + "-completion", "", "completion");
  Result r = run(bin() + " schema --format " + shell + "-completion > '" + path + "'");
  INFO("`megatron-run schema --format " << shell << "-completion` printed:\n" << r.out);
  REQUIRE(r.exit == 0);
  return path;
}
}  // namespace

TEST_CASE("completion: bash completes commands, their options, values and Megatron's flags", "[cli][completion]") {
  const std::string f = script("bash");
  auto complete = [&](const std::string& words, int cword) {
    return run("bash -c 'source \"" + f + "\"; COMP_WORDS=(" + words + "); COMP_CWORD=" + std::to_string(cword) +
               "; _megatron_run; printf \"%s\\n\" \"${COMPREPLY[@]}\"'");
  };
  Result r = complete("megatron-run sch \"\"", 1);
  CHECK(r.out.find("schema\nschedule\n") != std::string::npos);
  r = complete("megatron-run topology --format \"\"", 3);
  CHECK(r.out == "text\njson\nsvg\ndot\n");
  r = complete("megatron-run schedule --form", 2);
  CHECK(r.out == "--format\n");
  r = complete("megatron-run topology --gpus", 2);
  CHECK(r.out == "--gpus-per-node\n");
  r = complete("megatron-run --nproc-per", 1);
  CHECK(r.out.find("--nproc-per-node\n") != std::string::npos);
  r = complete("megatron-run params --num-layer", 2);
  CHECK(r.out.find("--num-layers\n") != std::string::npos);
  r = complete("megatron-run --lr-decay-style \"\"", 2);
  CHECK(r.out == "constant\nlinear\ncosine\ninverse-square-root\nWSD\n");
  r = complete("megatron-run rules --num-layer", 2);  // rules takes no Megatron flags
  CHECK(r.out == "\n");
  // The launcher's options with a closed set of values offer them; --help is offered once.
  r = complete("megatron-run --rdzv-backend \"\"", 2);
  CHECK(r.out == "static\nc10d\n");
  r = complete("megatron-run --log-level \"\"", 2);
  CHECK(r.out == "trace\ndebug\ninfo\nwarning\nerror\nfatal\n");
  r = complete("megatron-run --start_method \"\"", 2);
  CHECK(r.out == "spawn\nfork\nforkserver\n");
  r = complete("megatron-run --help", 1);
  CHECK(r.out == "--help\n");
  // Values that are a closed set besides a number, and the words rules and help take.
  r = complete("megatron-run --nproc-per-node \"\"", 2);
  CHECK(r.out == "cpu\ngpu\nauto\n");
  r = complete("megatron-run --nproc_per_node \"\"", 2);
  CHECK(r.out == "cpu\ngpu\nauto\n");
  r = complete("megatron-run rules launch.input", 2);
  CHECK(r.out == "launch.input-missing\n");
  r = complete("megatron-run rules --format json dist.nccl", 4);
  CHECK(r.out == "dist.nccl-unavailable\n");
  r = complete("megatron-run help to", 2);
  CHECK(r.out == "topology\n");
  r = complete("megatron-run help topology \"\"", 3);  // help takes one command: nothing after it
  CHECK(r.out == "\n");
  r = complete("megatron-run help topology sch", 3);
  CHECK(r.out == "\n");
  r = complete("megatron-run check configs/defa", 2);  // check still takes files
  CHECK(r.out.find("launch.") == std::string::npos);
}

TEST_CASE("completion: fish completes commands, their options, values and Megatron's flags", "[cli][completion]") {
  const std::string f = script("fish");
  CHECK(run("fish --no-execute '" + f + "'").exit == 0);
  auto complete = [&](const std::string& line) {
    return run("fish -c 'source \"" + f + "\"; complete -C\"" + line + "\"'");
  };
  Result r = complete("megatron-run sche");
  CHECK(r.out.find("schedule\tlearning rate and weight decay") != std::string::npos);
  CHECK(r.out.find("schema\t") != std::string::npos);
  r = complete("megatron-run topology --format ");
  CHECK(r.out.find("svg\t") != std::string::npos);
  CHECK(r.out.find("dot\t") != std::string::npos);
  CHECK(r.out.find("csv\t") == std::string::npos);  // schedule's, not topology's
  r = complete("megatron-run params --device-");
  CHECK(r.out.find("--device-memory\t") != std::string::npos);
  r = complete("megatron-run --nnod");
  CHECK(r.out.find("--nnodes\t") != std::string::npos);
  r = complete("megatron-run schedule --lr-decay-st");
  CHECK(r.out.find("--lr-decay-style\t") != std::string::npos);
  r = complete("megatron-run schema --lr-decay-st");  // schema takes no Megatron flags
  CHECK(r.out.find("--lr-decay-style") == std::string::npos);
  r = complete("megatron-run help top");
  CHECK(r.out == "topology\n");
  r = complete("megatron-run help topology ");  // help takes one command: nothing after it (no files either)
  CHECK(r.out == "");
  r = complete("megatron-run help topology sch");
  CHECK(r.out == "");
  // Nor the named command's own words, options or Megatron's flags (review diff34 #3).
  for (const char* line : {"megatron-run help rules ", "megatron-run help rules launch.load",
                           "megatron-run help topology --num-l", "megatron-run help check --q",
                           "megatron-run help schema --format "}) {
    INFO(line);
    CHECK(complete(line).out == "");
  }
  // A command word later on the line is no command: the run command's options and Megatron's flags there.
  r = complete("megatron-run --config rules --num-l");
  CHECK(r.out.find("--num-layers\t") != std::string::npos);
  r = complete("megatron-run rules launch.load");
  CHECK(r.out == "launch.load-empty\n");
  r = complete("megatron-run --nproc-per-node g");
  CHECK(r.out.rfind("gpu\t", 0) == 0);  // with the option's description
  CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 1);
}

TEST_CASE("completion: zsh loads the script and defines the completion function", "[cli][completion]") {
  const std::string f = script("zsh");
  CHECK(run("zsh -n '" + f + "'").exit == 0);
  Result r = run("zsh -f -c 'autoload -U compinit; compinit -u -D; source \"" + f +
                 "\"; print -r -- $+functions[_megatron_run] ${_comps[megatron-run]} ${#_megatron_run_megatron_flags}'");
  CHECK(r.exit == 0);
  CHECK(r.out.find("1 _megatron_run 9") != std::string::npos);  // and 9xx Megatron flags
  // Every command and its options are in the script (read from the same descriptions the commands parse with).
  // The commands as the script lists them for the command word ("    'NAME:help'" lines of `commands=(`), which
  // completion_spec() makes: `help` completes every one of them but itself, as its one argument (':command:', not
  // the repeated '*:command:': help takes one command).
  Result listed = run("sed -n \"/^  commands=(/,/^  )/s/^    '\\([a-z-]*\\):.*/\\1/p\" '" + f + "'");
  INFO("the zsh script's commands:\n" << listed.out);
  std::string help_words;
  std::stringstream names(listed.out);
  for (std::string n; std::getline(names, n);)
    if (n != "help") help_words += (help_words.empty() ? "" : " ") + n;
  CHECK(std::count(help_words.begin(), help_words.end(), ' ') >= 5);  // six commands or more were found
  const bool help_last = listed.out.size() >= 5 && listed.out.compare(listed.out.size() - 5, 5, "help\n") == 0;
  CHECK(help_last);  // completion_spec() appends it
  const std::string help_line = "':command:(" + help_words + ")'";
  for (const std::string& w : {std::string("'schedule:"), std::string("'topology:"), std::string("--gpus-per-node"),
                               std::string("--device-memory"), std::string("--every"), std::string("--nproc-per-node"),
                               std::string("--bring-up-only"), std::string("(text json svg dot)"),
                               std::string("(constant linear cosine inverse-square-root WSD)"),
                               std::string("--nproc-per-node[workers to start on this node (int|cpu|gpu|auto)]:value:(cpu gpu auto)"),
                               help_line, std::string(" launch.input-missing ")}) {
    INFO("not in the zsh script: " << w);
    CHECK(run("grep -qF -- \"" + w + "\" '" + f + "'").exit == 0);
  }
  // zsh's case takes the first pattern that matches: the main command's catch-all branch must come after every
  // command's own (it came first, and every command completed the main command's options).
  Result branches = run("grep -n '^    [a-z*]*)$' '" + f + "'");
  INFO("the zsh script's case branches (`    NAME)` lines):\n" << branches.out);
  REQUIRE(!branches.out.empty());
  const std::string last = branches.out.substr(branches.out.rfind('\n', branches.out.size() - 2) + 1);
  CHECK(last.find("*)") != std::string::npos);
  CHECK(std::count(branches.out.begin(), branches.out.end(), '*') == 1);
  // A number-valued flag offers nothing, not file names.
  CHECK(run("grep -qF -- \"'*--num-layers[\" '" + f + "'").exit == 0);
  CHECK(run("grep -F -- \"'*--num-layers[\" '" + f + "' | grep -q _files").exit != 0);
}

TEST_CASE("schema --format json-schema is one JSON Schema document", "[cli][completion]") {
  Result r = mrtest::run_shell(bin() + " schema --format json-schema 2>/dev/null | head -3");
  CHECK(r.out.find("\"$schema\": \"https://json-schema.org/draft/2020-12/schema\"") != std::string::npos);
}

TEST_CASE("completion: every value offered for a Megatron flag is one the flag takes", "[cli][completion]") {
  const mr::Schema& schema = mr::Schema::megatron();
  int offered = 0;
  for (const mr::CompletionOption& o : mr::megatron_completion_options(schema)) {
    const mr::Arg* a = schema.find_flag(o.flag);
    REQUIRE(a);
    for (const std::string& word : o.choices) {
      INFO(o.flag << " " << word);
      ++offered;
      mr::Value v;
      REQUIRE_NOTHROW(v = mr::convert(a->spec->type, word));
      CHECK(std::find(a->choices.begin(), a->choices.end(), v) != a->choices.end());
    }
  }
  CHECK(offered > 100);
  // --exit-signal: names (Megatron's Signals[name]), never the numbers its choices hold.
  const std::vector<mr::CompletionOption> all = mr::megatron_completion_options(schema);
  auto es = std::find_if(all.begin(), all.end(), [](const mr::CompletionOption& o) { return o.flag == "--exit-signal"; });
  REQUIRE(es != all.end());
  CHECK(std::find(es->choices.begin(), es->choices.end(), "SIGTERM") != es->choices.end());
  CHECK(std::find(es->choices.begin(), es->choices.end(), "15") == es->choices.end());
}

