// The megatron-run executable: commands, output formats and exit codes (0 valid, 1 rule failed, 2 usage).
#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <unistd.h>
#include <utility>
#include <vector>

#include "config/schema.h"
#include "config/value.h"
#include "binary.h"
#include "scratch.h"

namespace {
using Result = mrtest::Proc;  // `out` holds stdout and stderr together

Result sh(const std::string& args) { return mrtest::megatron_run_merged(args); }

std::string tmp_file(const std::string& name, const std::string& text) { return mrtest::write_file(name, text, "cli"); }

const std::string kDefault = std::string(MR_SOURCE_DIR) + "/configs/default.yaml";
}  // namespace

TEST_CASE("dry run of the default job prints Megatron's table and exits 0", "[cli]") {
  auto r = sh("--dry-run --config " + kDefault);
  CHECK(r.exit == 0);
  CHECK(r.out.find("------------------------ arguments ------------------------") != std::string::npos);
  CHECK(r.out.find("  num_layers ...................................... 2\n") != std::string::npos);
  CHECK(r.out.find("-------------------- end of arguments ---------------------") != std::string::npos);
}

TEST_CASE("exit codes: 2 for usage errors, 1 for a failed rule", "[cli]") {
  auto unknown = sh("--dry-run --config " + kDefault + " --num-layer 3");
  CHECK(unknown.exit == 2);
  CHECK(unknown.out.find("unrecognized arguments: --num-layer 3") != std::string::npos);
  CHECK(unknown.out.find("did you mean --num-layers") != std::string::npos);
  // A near miss of megatron-run's own option is suggested too.
  auto own = sh("--dry-run --confg " + kDefault);
  CHECK(own.exit == 2);
  CHECK(own.out.find("--confg: did you mean --config (megatron-run's own option)?") != std::string::npos);
  CHECK(sh("--dry-run --config " + kDefault + " --wrld-size 8").out.find("did you mean --world-size") != std::string::npos);
  auto bad_value = sh("--dry-run --config " + kDefault + " --hidden-size big");
  CHECK(bad_value.exit == 2);
  CHECK(bad_value.out.find("argument --hidden-size: invalid int value: 'big'") != std::string::npos);
  auto rule = sh("--dry-run --config " + kDefault + " --warmup 3");
  CHECK(rule.exit == 1);
  CHECK(rule.out.find("error[deprecated.warmup]") != std::string::npos);
  CHECK(sh("--dry-run --config /nonexistent/x.yaml").exit == 2);
  CHECK(sh("--dry-run --format xml --config " + kDefault).exit == 2);
}

TEST_CASE("every command names a near miss of its own options, and an unknown word before a missing --world-size",
          "[cli][own-option]") {
  const std::string cfg = " --config " + kDefault;
  struct Case {
    std::string args, typo, meant;
  };
  const Case cases[] = {
      {"topology --world-size 2 --formt json" + cfg, "--formt", "--format"},
      {"params --world-size 2 --formt json" + cfg, "--formt", "--format"},
      {"schedule --point 5" + cfg, "--point", "--points"},
      {"rules --formt json", "--formt", "--format"},
      {"schema --formt json", "--formt", "--format"},
      {"check --quite " + kDefault, "--quite", "--quiet"},
      {"check --formt=json " + kDefault, "--formt=json", "--format"},
      // A misspelt --world-size is the unknown word it is, not a missing --world-size.
      {"topology --world-sise 2" + cfg, "--world-sise", "--world-size"},
      {"topology --world_size 2" + cfg, "--world_size", "--world-size"},
      {"params --world-sise 2" + cfg, "--world-sise", "--world-size"},
  };
  for (const Case& c : cases) {
    INFO(c.args);
    auto r = sh(c.args);
    CHECK(r.exit == 2);
    CHECK(r.out.find("unrecognized arguments: " + c.typo) != std::string::npos);
    CHECK(r.out.find(c.typo + ": did you mean " + c.meant + " (megatron-run's own option)?") != std::string::npos);
    CHECK(r.out.find("is required") == std::string::npos);
  }
  // A word near no option of the command gets no suggestion; a world size still missing is still named.
  auto far = sh("topology --world-size 2 --zzzzzz" + cfg);
  CHECK(far.exit == 2);
  CHECK(far.out.find("did you mean") == std::string::npos);
  auto missing = sh("topology" + cfg);
  CHECK(missing.exit == 2);
  CHECK(missing.out.find("topology: --world-size N is required") != std::string::npos);
}

TEST_CASE("--target-gpu-arch's refusal names the option, and the architecture of a GPU named instead of it",
          "[cli][target]") {
  const std::string cfg = " --config " + kDefault;
  struct Case {
    std::string word, arch;
  };
  for (const Case& c : {Case{"h100", "sm_90"}, Case{"H200", "sm_90"}, Case{"a100", "sm_80"}, Case{"b200", "sm_100"},
                        Case{"gb200", "sm_100"}, Case{"l40s", "sm_89"}, Case{"nvidia-h100", "sm_90"}}) {
    INFO(c.word);
    auto r = sh("--dry-run --target-gpu-arch " + c.word + cfg);
    CHECK(r.exit == 2);  // named, never taken as its architecture
    CHECK(r.out.find("megatron-run: error: argument --target-gpu-arch: bad GPU architecture '" + c.word +
                     "': that is a GPU's name; its architecture is " + c.arch + " (expected e.g. sm_90") !=
          std::string::npos);
  }
  auto other = sh("check --target-gpu-arch sm_9x " + kDefault);
  CHECK(other.exit == 2);
  CHECK(other.out.find("argument --target-gpu-arch: bad GPU architecture 'sm_9x' (expected e.g. sm_90") !=
        std::string::npos);
  // The same word in a --target-env file names its line and the architecture.
  auto file = sh("--dry-run --target-env " + tmp_file("h100.yaml", "gpu_arch: h100\n") + cfg);
  CHECK(file.exit == 2);
  CHECK(file.out.find("h100.yaml:1: bad GPU architecture 'h100': that is a GPU's name; its architecture is sm_90") !=
        std::string::npos);
  CHECK(sh("--dry-run --target-gpu-arch sm_90" + cfg).exit == 0);
}

TEST_CASE("an option of megatron-run's given again overrides the earlier one, as argparse does", "[cli]") {
  auto text = sh("--dry-run --config " + kDefault + " --format json --format text");
  CHECK(text.exit == 0);
  CHECK(text.out.find("-------- arguments --------") != std::string::npos);
  auto json = sh("--dry-run --config " + kDefault + " --format=text --format json --world-size 2 --world-size 1");
  REQUIRE(json.exit == 0);
  CHECK(mr::Value::parse_json(json.out).as_object().size() > 100);
  // --config collects every file (a later one overrides the keys it repeats), not the last one only.
  const std::string more = tmp_file("more-layers.yaml", "--num-layers: 6\n");
  auto both = sh("--dry-run --config " + kDefault + " --config " + more + " --explain --num-layers");
  CHECK(both.out.find("num_layers = 6") != std::string::npos);
  CHECK(both.out.find("hidden_size") == std::string::npos);
}

TEST_CASE("megatron-run's own closed-set options list their choices when refusing a value, as argparse does", "[cli]") {
  const std::pair<std::string, std::string> refused[] = {
      {"--log-level loud --dry-run",
       "argument --log-level: invalid choice: 'loud' (choose from 'trace', 'debug', 'info', 'warning', 'error', 'fatal')"},
      {"--dry-run --format yaml", "argument --format: invalid choice: 'yaml' (choose from 'text', 'json', 'argv', 'argv0')"},
      {"check --format csv x.yaml", "argument --format: invalid choice: 'csv' (choose from 'text', 'json', 'github', 'junit')"},
      {"topology --world-size 1 --format png", "argument --format: invalid choice: 'png' (choose from 'text', 'json', 'svg', 'dot')"},
      {"schema --format xml", "argument --format: invalid choice: 'xml' (choose from 'json', 'text', 'json-schema', "
                              "'bash-completion', 'zsh-completion', 'fish-completion')"},
      {"rules --format html", "argument --format: invalid choice: 'html' (choose from 'text', 'markdown', 'json')"},
      {"--dry-run --start-method thread --nproc-per-node 1 --config " + kDefault,
       "argument --start-method/--start_method: invalid choice: 'thread' (choose from 'spawn', 'fork', 'forkserver')"},
      {"--dry-run --rdzv-backend etcd --nproc-per-node 1 --config " + kDefault,
       "argument --rdzv-backend/--rdzv_backend: etcd is a torchrun rendezvous backend that megatron-run does not implement (it has "
       "static and c10d); use --rdzv-backend c10d --rdzv-endpoint HOST[:PORT], or launch under torchrun"},
  };
  for (const auto& [args, message] : refused) {
    INFO(args);
    auto r = sh(args);
    CHECK(r.exit == 2);
    CHECK(r.out.find("megatron-run: error: " + message + "\n") != std::string::npos);
  }
  CHECK(sh("--log-level warn --dry-run --config " + kDefault).exit == 0);  // the alias stays accepted
}

TEST_CASE("megatron-run's own options refused in argparse's words, as Megatron's flags are", "[cli]") {
  // A value missing: the same line for one of our options (Boost.Program_options) as for a Megatron flag.
  auto megatron = sh("--dry-run --config " + kDefault + " --num-layers");
  CHECK(megatron.exit == 2);
  CHECK_THAT(megatron.out, Catch::Contains("megatron-run: error: argument --num-layers: expected one argument\n"));
  for (const auto& [words, flag] : std::vector<std::pair<std::string, std::string>>{
           {"--nproc-per-node", "--nproc-per-node/--nproc_per_node"},
           {"--dry-run --config " + kDefault + " --nproc_per_node", "--nproc-per-node/--nproc_per_node"},
           {"--dry-run --config " + kDefault + " --world-size", "--world-size"},
           {"check --world-size", "--world-size"},
           {"check --quiet --format", "--format"},
           {"topology --config " + kDefault + " --world-size", "--world-size"},
           {"rules --format", "--format"},
           {"schema --format", "--format"}}) {
    INFO(words);
    auto r = sh(words);
    CHECK(r.exit == 2);
    CHECK(r.out == "megatron-run: error: argument " + flag + ": expected one argument\n");
  }
  // The next word looks like an option (as argparse reads it): no value, whether the option is ours or Megatron's,
  // and whether the word is an option of ours, Megatron's or none.
  for (const auto& [words, flag] : std::vector<std::pair<std::string, std::string>>{
           {"--nproc-per-node --dry-run --config " + kDefault, "--nproc-per-node/--nproc_per_node"},
           {"--dry-run --nproc_per_node --config " + kDefault, "--nproc-per-node/--nproc_per_node"},
           {"--dry-run --config " + kDefault + " --max-restarts --num-layers 2", "--max-restarts/--max_restarts"},
           {"--dry-run --config " + kDefault + " --rdzv-id -x", "--rdzv-id/--rdzv_id"},
           {"--dry-run --config " + kDefault + " -r --tee 3", "-r/--redirects"},
           {"--dry-run --config " + kDefault + " --tee -r 3", "-t/--tee"},
           {"--dry-run --config " + kDefault + " --term-timeout --tee 3", "--term-timeout"},
           {"--dry-run --config " + kDefault + " --nn --nproc-p 2", "--nnodes"},
           {"--dry-run --config --world-size=8 " + kDefault, "--config"},
           {"check --world-size --quiet " + kDefault, "--world-size"},
           {"params --device-memory --world-size 8 --config " + kDefault, "--device-memory"},
           {"schedule --at -- --config " + kDefault, "--at"},
           {"rules --format --x", "--format"},
           {"--dry-run --config " + kDefault + " --num-layers --dry-run", "--num-layers"},
           {"--dry-run --config " + kDefault + " --num-layers --nproc-per-node 1", "--num-layers"}}) {
    INFO(words);
    auto r = sh(words);
    CHECK(r.exit == 2);
    CHECK(r.out == "megatron-run: error: argument " + flag + ": expected one argument\n");
  }
  // A negative number, or a word with a blank, is a value (argparse's reading): refused or taken as one.
  CHECK_THAT(sh("--dry-run --config " + kDefault + " --max-restarts -1").out,
             Catch::Contains("argument --max-restarts/--max_restarts: must be at least 0 (got -1)"));
  CHECK_THAT(sh("check --world-size -8 " + kDefault).out, Catch::Contains("argument --world-size: must be at least 1"));
  // hostile37 #5: a range refusal names both spellings, as the type errors do; a float option reads its value as
  // Python's float() ('1e400' is inf, then out of range; blanks and '_' between digits taken); a positive duration
  // below the launcher's millisecond resolution is refused rather than kept and printed as 0 s.
  for (const auto& [words, message] : std::vector<std::pair<std::string, std::string>>{
           {"--max_restarts -1", "argument --max-restarts/--max_restarts: must be at least 0 (got -1)"},
           {"--max-restarts nan", "argument --max-restarts/--max_restarts: invalid int value: 'nan'"},
           {"--monitor-interval 0", "argument --monitor-interval/--monitor_interval: must be a finite number of "
                                    "seconds above 0 (got 0), as torchrun requires"},
           {"--monitor-interval 1e400", "argument --monitor-interval/--monitor_interval: must be a finite number of "
                                        "seconds above 0 (got inf)"},
           {"--term-timeout 1e400", "argument --term-timeout: must be a number of seconds from 0 to 86400 (got inf)"},
           {"--term-timeout nan", "argument --term-timeout: must be a number of seconds from 0 to 86400 (got nan)"},
           {"--term-timeout 0.0001", "argument --term-timeout: 0.0001 s is below a millisecond, the resolution of "
                                     "megatron-run's timers: give 0 or at least 0.001"},
           {"--term-timeout x1", "argument --term-timeout: invalid float value: 'x1'"},
           {"--shutdown_timeout 1e400", "argument --shutdown-timeout/--shutdown_timeout: must be a number of seconds "
                                        "from 0 to 86400 (got inf)"},
           {"--heartbeat-timeout 0.0000001", "argument --heartbeat-timeout: 1e-07 s is below a millisecond, the "
                                             "resolution of megatron-run's timers: give at least 0.001"},
           {"--heartbeat-timeout=-inf", "argument --heartbeat-timeout: must be a number of seconds above 0, at most "
                                        "86400 (got -inf)"},
           {"--join-timeout 1e400", "argument --join-timeout: must be a number of seconds above 0, at most 86400 "
                                    "(got inf)"}}) {
    INFO(words);
    auto r = sh("--dry-run --config " + kDefault + " --nproc-per-node 1 " + words);
    CHECK(r.exit == 2);
    CHECK_THAT(r.out, Catch::Contains(message));
  }
  // Python's float() spellings are values: ' 2.5 ', '1_0', 'Infinity' (refused by the range only).
  CHECK(sh("--dry-run --config " + kDefault + " --nproc-per-node 1 --term-timeout ' 2.5 ' --join-timeout 1_0").exit == 0);
  CHECK(sh("--dry-run --config " + kDefault + " --nproc-per-node 1 --term-timeout 0.001 --heartbeat-timeout 2").exit == 0);
  CHECK(sh("--dry-run --config " + kDefault + " --rdzv-id '-x y'").exit == 0);
  // A value given to a switch, a value Boost cannot convert, a word no option takes.
  auto quiet = sh("check --quiet=yes " + kDefault);
  CHECK(quiet.exit == 2);
  CHECK(quiet.out == "megatron-run: error: argument --quiet: ignored explicit argument 'yes'\n");
  auto size = sh("check --world-size abc " + kDefault);
  CHECK(size.exit == 2);
  CHECK(size.out == "megatron-run: error[input.world-size]: argument --world-size: invalid int value: 'abc'\n");
  // The type named as argparse names it: int, float.
  CHECK_THAT(sh("--dry-run --config " + kDefault + " --term-timeout soon").out,
             Catch::Contains("megatron-run: error: argument --term-timeout: invalid float value: 'soon'\n"));
  CHECK_THAT(sh("--dry-run --config " + kDefault + " --max_restarts x").out,
             Catch::Contains("megatron-run: error: argument --max-restarts/--max_restarts: invalid int value: 'x'\n"));
  // An empty value after '=': argparse takes '' and its conversion refuses it, as for a Megatron flag.
  CHECK(sh("check --world-size= " + kDefault).out ==
        "megatron-run: error[input.world-size]: argument --world-size: invalid int value: ''\n");
  CHECK_THAT(sh("--dry-run --config " + kDefault + " --num-layers=").out,
             Catch::Contains("megatron-run: error: argument --num-layers: invalid int value: ''\n"));
  CHECK_THAT(sh("--dry-run --config " + kDefault + " --join-timeout=").out,
             Catch::Contains("megatron-run: error: argument --join-timeout: invalid float value: ''\n"));
  // A string option takes '' as argparse does: what follows judges it (an empty --config path, a choice).
  CHECK(sh("--dry-run --config " + kDefault + " --rdzv-id=").exit == 0);
  CHECK(sh("--dry-run --config " + kDefault + " --rdzv-id= --rdzv-id=x").exit == 0);  // overridden, also checked
  CHECK_THAT(sh("--dry-run --config " + kDefault + " --format=").out,
             Catch::Contains("argument --format: invalid choice: ''"));
  CHECK_THAT(sh("--dry-run --config=").out, Catch::Contains("error[input.unreadable]: config file: the path is empty"));
  // A switch refuses it, as argparse refuses any explicit value (also through a prefix: named in full).
  CHECK(sh("--dry-run --config " + kDefault + " --dry-run=").out ==
        "megatron-run: error: argument --dry-run: ignored explicit argument ''\n");
  CHECK(sh("--dry-run --config " + kDefault + " --stand=").out ==
        "megatron-run: error: argument --standalone: ignored explicit argument ''\n");
  // --format json abbreviated as the run command reads it still asks for the failure as JSON on stdout.
  for (const char* words : {"--fo json --nproc 2", "--form=json --num-lay 2"}) {
    INFO(words);
    const mrtest::Proc j = mrtest::megatron_run("--dry-run --config " + kDefault + " " + words);
    CHECK(j.exit == 2);
    CHECK_THAT(j.out, Catch::StartsWith("{\"ok\": false, \"exit\": 2"));
  }
  // check without a file: argparse's words for a required positional.
  auto no_file = sh("check --quiet");
  CHECK(no_file.exit == 2);
  CHECK(no_file.out == "megatron-run: error: the following arguments are required: FILE\n");
  auto extra = sh("schema extra");
  CHECK(extra.exit == 2);
  CHECK_THAT(extra.out, Catch::StartsWith("megatron-run: error: unrecognized arguments: extra"));
  // Every stray word listed, as argparse lists them (not only the first).
  for (const auto& [words, line] : std::vector<std::pair<std::string, std::string>>{
           {"schema extra --more", "unrecognized arguments: extra --more (this command takes no positional words)"},
           {"schema --x --y", "unrecognized arguments: --x --y"},
           {"rules --x api.x --y", "unrecognized arguments: --x --y"},
           {"check --x " + kDefault + " --z", "unrecognized arguments: --x --z (see `megatron-run help check`)"}}) {
    INFO(words);
    auto r = sh(words);
    CHECK(r.exit == 2);
    CHECK(r.out == "megatron-run: error: " + line + "\n");
  }
  // With --format json the failure document names the option, as for a Megatron flag.
  const mrtest::Proc json = mrtest::megatron_run("--dry-run --format json --config " + kDefault + " --world-size");
  CHECK(json.exit == 2);
  CHECK_THAT(json.out, Catch::Contains("\"exit\": 2") && Catch::Contains("\"flags\": [\"--world-size\"]") &&
                           Catch::Contains("argument --world-size: expected one argument"));
  // check's usage errors too: stdout is one JSON document (check has its own words, moved out of main's).
  for (const std::string& words : std::vector<std::string>{"check --format json", "check --format json --bogus " + kDefault,
                                   "check --format json --world-size"}) {
    INFO(words);
    const mrtest::Proc c = mrtest::megatron_run(words);
    CHECK(c.exit == 2);
    CHECK_THAT(c.out, Catch::StartsWith("{") && Catch::Contains("\"exit\": 2") && Catch::Contains("\"ok\": false"));
  }
  // --heartbeat-timeout is checked with the other options: a dry run refuses what the launch would.
  for (const char* v : {"x", "-1", "0", "nan", "inf"}) {
    INFO(v);
    const mrtest::Proc h = mrtest::megatron_run("--dry-run --config " + kDefault + " --heartbeat-timeout " + v);
    CHECK(h.exit == 2);
    CHECK_THAT(h.err, Catch::Contains("argument --heartbeat-timeout: "));
  }
  CHECK(mrtest::megatron_run("--dry-run --config " + kDefault + " --heartbeat-timeout 2.5").exit == 0);
  // --explain takes a Megatron flag's name as its value, but not one of megatron-run's own options.
  auto explain = sh("--dry-run --config " + kDefault + " --explain --format json");
  CHECK(explain.exit == 2);
  CHECK_THAT(explain.out, Catch::StartsWith("megatron-run: error: argument --explain: expected one argument (--format "
                                            "is one of megatron-run's own options, not a Megatron argument --explain "
                                            "can explain)\n") &&
                              Catch::Contains("\"flags\": [\"--explain\"]"));  // (--format json was asked for)
  // The launcher's own options likewise (review hostile37 #8: it said only "expected one argument").
  CHECK(sh("--dry-run --config " + kDefault + " --explain --nproc-per-node").out ==
        "megatron-run: error: argument --explain: expected one argument (--nproc-per-node is one of megatron-run's own "
        "options, not a Megatron argument --explain can explain)\n");
}

TEST_CASE("a usage error with a rule id shows it on every path, as any refusal with an id does", "[cli][usage-ids]") {
  const std::string broken = tmp_file("usage-id-broken.yaml", "num_layers: [1, 2\n");
  const std::string seed_null = tmp_file("usage-id-seed-null.yaml", "seed: null\n");
  const std::string none = "/nonexistent/usage-id.yaml";
  const std::string unreadable = ": error[input.unreadable]: ";  // after the file's name, as check shows it
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--dry-run --config " + none, unreadable},
      {"--dry-run --config " + broken, "megatron-run: " + broken + ":1: error[input.yaml-syntax]: "},
      {"--dry-run --format argv --config " + kDefault + " --config " + seed_null,
       "megatron-run: error[input.unrepresentable-value]: "},
      {"--nproc-per-node 1 --config " + none, unreadable},                       // a launch
      {"--no-python --config " + none + " /bin/true", unreadable},               // a program's run
      {"check --target-env " + none + " " + kDefault, unreadable},
      {"params --world-size 8 --device-memory 80GB/s --config " + kDefault,
       "megatron-run: error[input.device-memory]: argument --device-memory: '80GB/s' is not a memory size"},
      {"topology --world-size 8 --gpus-per-node 0 --config " + kDefault,
       "megatron-run: error[input.gpus-per-node]: argument --gpus-per-node: must be at least 1, got 0\n"},
      {"schedule --points 0 --config " + kDefault,
       "megatron-run: error[input.schedule-steps]: argument --points: must be at least 1, got 0\n"},
      {"schedule --config " + none, unreadable},
  };
  for (const auto& [args, line] : cases) {
    INFO(args);
    const auto r = sh(args);
    CHECK(r.exit == 2);
    CHECK_THAT(r.out, Catch::Contains(line));
    CHECK_THAT(r.out, !Catch::Contains("megatron-run: error: "));  // never the generic heading besides
  }
  // check: the file's own line on stdout, with the id too (and the place first).
  CHECK_THAT(sh("check " + broken).out, Catch::Contains(broken + ":1: error[input.yaml-syntax]: "));
  // A usage error without an id keeps argparse's line.
  CHECK_THAT(sh("--dry-run --config " + kDefault + " --num-layers x").out,
             Catch::Contains("megatron-run: error: argument --num-layers: invalid int value: 'x'\n"));
}

TEST_CASE("every occurrence of megatron-run's option is checked, not only the one that wins, as argparse does",
          "[cli]") {
  // Alone, each of these values is refused; given before a valid one, it is refused the same way (exit 2).
  auto alone = sh("--dry-run --nproc-per-node abc --config " + kDefault);
  REQUIRE(alone.exit == 2);
  const std::string message = "argument --nproc-per-node/--nproc_per_node: invalid value 'abc' (an integer, cpu, gpu or auto)";
  CHECK(alone.out.find(message) != std::string::npos);
  for (const char* words : {"--nproc-per-node abc --nproc-per-node 2", "--nproc_per_node abc --nproc-per-node 2",
                                   "--nproc-per-node=abc --nproc_per_node=2", "--nproc_per_node abc --nproc_per_node 2"}) {
    INFO(words);
    auto r = sh(std::string("--dry-run ") + words + " --config " + kDefault);
    CHECK(r.exit == 2);
    CHECK(r.out.find(message) != std::string::npos);
  }
  // A conversion Boost makes (an int option) and an option's own check (its choices), in either spelling.
  auto rank = sh("--dry-run --node_rank x --node-rank 0 --config " + kDefault);
  CHECK(rank.exit == 2);
  CHECK(rank.out.find("argument --node-rank/--node_rank: invalid int value: 'x'") != std::string::npos);
  auto numa = sh("--dry-run --numa-binding nodes --numa_binding node --nproc-per-node 1 --config " + kDefault);
  CHECK(numa.exit == 2);
  CHECK(numa.out.find("argument --numa-binding/--numa_binding: invalid choice: 'nodes'") != std::string::npos);
  auto nnodes = sh("--dry-run --nnodes 1:x --nnodes 1 --config " + kDefault);
  CHECK(nnodes.exit == 2);
  CHECK(nnodes.out.find("--nnodes") != std::string::npos);
  // Valid earlier values: the last one wins, as before.
  auto two = sh("--dry-run --nproc-per-node 1 --nproc_per_node 2 --world-size 2 --config " + kDefault);
  CHECK(two.exit == 0);
  // The choices of --format and --log-level too (argparse's `choices`), with the message a single value gets.
  auto format = sh("--dry-run --config " + kDefault + " --format xml --format text");
  CHECK(format.exit == 2);
  CHECK(format.out.find("argument --format: invalid choice: 'xml' (choose from 'text', 'json', 'argv', 'argv0')") !=
        std::string::npos);
  auto level = sh("--dry-run --config " + kDefault + " --log-level loud --log-level info");
  CHECK(level.exit == 2);
  CHECK(level.out.find("argument --log-level: invalid choice: 'loud' (choose from 'trace',") != std::string::npos);
  CHECK(sh("--dry-run --config " + kDefault + " --format json --format text --log-level error --log-level info").exit ==
        0);
}

TEST_CASE("--world-size that disagrees with --nnodes x --nproc-per-node is refused", "[cli]") {
  auto r = sh("--dry-run --nnodes 2 --nproc-per-node 2 --world-size 8 --config " + kDefault);
  CHECK(r.exit == 2);
  CHECK(r.out.find("argument --world-size: 8 is not the job's 4 ranks (--nnodes 2 x --nproc-per-node 2)") !=
        std::string::npos);
  CHECK(sh("--dry-run --nnodes 2 --nproc-per-node 2 --world-size 4 --config " + kDefault).exit == 0);
}

TEST_CASE("a config file's mistakes are reported at once, each with its line (both layouts)", "[cli]") {
  const std::string plain = tmp_file("types.yaml", "--num-layers: two\n--hidden-size: 256.5\n--seq-length: [128]\n"
                                                   "--bf16: 1\n--lr-decay-style: cosin\nnum_attention_head: 4\n");
  auto r = sh("check " + plain);
  CHECK(r.exit == 2);
  CHECK(r.out.find(plain + ":1: error[parse.invalid-value]: argument --num-layers: invalid int value: 'two'") !=
        std::string::npos);
  for (const std::string& also : {plain + ":2: argument --hidden-size: invalid int value: '256.5'",
                                  plain + ":3: argument --seq-length: expects a single value, got a list",
                                  plain + ":4: switch --bf16 takes true or false, got 1",
                                  plain + ":5: argument --lr-decay-style: invalid choice: 'cosin'",
                                  plain + ":6: unknown argument 'num_attention_head' (did you mean --num-attention-heads"}) {
    INFO(also);
    CHECK(r.out.find("\n  also " + also) != std::string::npos);
  }
  const std::string ci = tmp_file("ci.yaml", "MODEL_ARGS:\n  --num-layers: two\n  --hidden-size: 256.5\n");
  auto c = sh("--dry-run --config " + ci);
  CHECK(c.exit == 2);
  CHECK(c.out.find("argument --num-layers: invalid int value: 'two'") != std::string::npos);
  CHECK(c.out.find("\n  also " + ci + ":3: argument --hidden-size: invalid int value: '256.5'") != std::string::npos);
}

TEST_CASE("check: a key set twice is one more of the file's mistakes, listed in line order", "[cli]") {
  const std::string d2 = tmp_file("d2.yaml", "hidden_sizee: 4\nnum_layers: 2\nnum_layers: 3\n");
  auto r = sh("check " + d2);
  CHECK(r.exit == 2);
  CHECK(r.out.find(d2 + ":1: error[parse.unknown-argument]: unknown argument 'hidden_sizee' (did you mean --hidden-size?)\n  also " +
                   d2 + ":3: duplicate key 'num_layers' (also at " + d2 + ":2)") != std::string::npos);
  // Alone, it is the file's error with its own id, as before.
  const std::string d1 = tmp_file("d1.yaml", "num_layers: 2\nnum_layers: 3\n");
  auto one = mrtest::megatron_run_stdout("check --format json " + d1);
  CHECK(one.exit == 2);
  const mr::Value e = mr::Value::parse_json(one.out).as_list()[0];
  CHECK(e.as_object()[3].second.as_list()[0].as_object()[0].second.as_str() == "input.yaml-duplicate-key");
  auto dry = sh("--dry-run --config " + d2);
  CHECK(dry.exit == 2);
  CHECK(dry.out.find("megatron-run: error: " + d2 + ":1: unknown argument 'hidden_sizee'") != std::string::npos);
  CHECK(dry.out.find("\n  also " + d2 + ":3: duplicate key 'num_layers'") != std::string::npos);
}

TEST_CASE("check and --format json: a usage error's place is given once, not repeated in its message", "[cli]") {
  const std::string u = tmp_file("u.yaml", "num_layers: abc\n");
  auto t = sh("check " + u);
  CHECK(t.exit == 2);
  CHECK(t.out.find(u + ":1: error[parse.invalid-value]: argument num_layers: invalid int value: 'abc'\n") !=
        std::string::npos);
  CHECK(t.out.find(u + ":1: " + u) == std::string::npos);
  auto j = mrtest::megatron_run_stdout("check --format json " + u);
  CHECK(j.exit == 2);
  const mr::Value d = mr::Value::parse_json(j.out).as_list()[0].as_object()[3].second.as_list()[0];
  std::string message, where;
  for (const auto& [k, v] : d.as_object()) {
    if (k == "message") message = v.as_str();
    if (k == "where") where = v.as_str();
  }
  CHECK(message == "argument num_layers: invalid int value: 'abc'");
  CHECK(where == u + ":1");
  // The dry run's JSON failure document too; its text line (no place of its own) keeps the place.
  auto dj = mrtest::megatron_run_stdout("--dry-run --config " + u + " --format json");
  CHECK(dj.exit == 2);
  CHECK(dj.out.find("\"message\": \"argument num_layers: invalid int value: 'abc'\"") != std::string::npos);
  CHECK(dj.out.find("\"where\": \"" + u + ":1\"") != std::string::npos);
  CHECK(sh("--dry-run --config " + u).out.find("error: " + u + ":1: argument num_layers") != std::string::npos);
  // A functional-test (CI) layout file: the same.
  const std::string ci = tmp_file("uci.yaml", "MODEL_ARGS:\n  --num-layers: abc\n");
  auto c = mrtest::megatron_run_stdout("check --format json " + ci);
  CHECK(c.out.find("\"message\": \"argument --num-layers: invalid int value: 'abc'\"") != std::string::npos);
  CHECK(sh("check " + ci).out.find(ci + ":2: error[parse.invalid-value]: argument --num-layers: invalid int value: 'abc'\n") !=
        std::string::npos);
}

TEST_CASE("check --yaml-cfg: Megatron --yaml-cfg files, checked as --dry-run --yaml-cfg checks them", "[cli]") {
  const std::string example = std::string(MR_SOURCE_DIR) + "/configs/examples/yaml-cfg-gpt.yaml";
  // As a --config file it is refused, with a hint.
  auto plain = sh("check " + example);
  CHECK(plain.exit == 2);
  CHECK(plain.out.find("unknown argument 'language_model'; this looks like a Megatron --yaml-cfg file") !=
        std::string::npos);
  auto ok = sh("check --yaml-cfg " + example);
  CHECK(ok.exit == 0);
  CHECK(ok.out.find(example + ": warning[parse.experimental-flag]: --yaml-cfg is experimental") != std::string::npos);
  CHECK(ok.out.find("1 file(s) checked, 0 invalid") != std::string::npos);
  CHECK(sh("check --quiet --yaml-cfg " + example).out.empty());
  // A failing rule (exit 1) and a malformed file (exit 2), each in its own file, as check reports any file.
  const std::string bad = tmp_file("ycfg-bad.yaml", "language_model:\n  num_layers: 4\nmodel_parallel: {}\n");
  const std::string broken = tmp_file("ycfg-broken.yaml", "language_model: [\n");
  auto one = sh("check --yaml-cfg " + example + " " + bad);
  CHECK(one.exit == 1);
  CHECK(one.out.find(bad) != std::string::npos);
  CHECK(one.out.find("error[yaml.") != std::string::npos);
  auto two = sh("check --yaml-cfg " + example + " " + bad + " " + broken + " /nonexistent/y.yaml");
  CHECK(two.exit == 2);
  CHECK(two.out.find(broken + ":1: error[input.yaml-syntax]") != std::string::npos);  // where the '[' opened
  CHECK(two.out.find("/nonexistent/y.yaml: error[input.unreadable]") != std::string::npos);
  CHECK(two.out.find("4 file(s) checked, 3 invalid") != std::string::npos);
  auto j = mrtest::megatron_run_stdout("check --format json --yaml-cfg " + example + " " + bad);
  CHECK(j.exit == 1);
  const mr::Value list = mr::Value::parse_json(j.out);
  REQUIRE(list.as_list().size() == 2);
  CHECK(list.as_list()[0].as_object()[1].second.as_bool());                 // ok
  CHECK(list.as_list()[0].as_object()[4].second.as_object().size() > 10);  // resolved: the YAML namespace
  CHECK_FALSE(list.as_list()[1].as_object()[1].second.as_bool());
  // The same verdict as the dry run.
  CHECK(sh("--dry-run --yaml-cfg " + bad).exit == 1);
}

TEST_CASE("a rule's error in a dry run names the config file's line, as check does", "[cli]") {
  const std::string tp3 = tmp_file("tp3.yaml", "--tensor-model-parallel-size: 3\n");
  auto r = sh("--dry-run --config " + kDefault + " --config " + tp3 + " --world-size 4");
  CHECK(r.exit == 1);
  CHECK(r.out.find("megatron-run: " + tp3 + ":1: error[parallel.world-size-divisible]: world size (4)") != std::string::npos);
  // A value from the command line has no file line.
  auto cli = sh("--dry-run --config " + kDefault + " --tensor-model-parallel-size 3 --world-size 4");
  CHECK(cli.out.find("megatron-run: error[parallel.world-size-divisible]: ") != std::string::npos);
}

TEST_CASE("JSON output, provenance and --explain", "[cli]") {
  auto r = sh("--dry-run --format json --config " + kDefault + " --num-layers 4");
  REQUIRE(r.exit == 0);
  mr::Value v = mr::Value::parse_json(r.out);
  bool found = false;
  for (const auto& [k, x] : v.as_object())
    if (k == "num_layers") found = x.as_int() == 4;
  CHECK(found);
  auto p = sh("--dry-run --format json --provenance --config " + kDefault);
  CHECK(p.out.find("\"hidden_size\": {\"value\": 256, \"source\": \"config " + kDefault + ":4\"}") != std::string::npos);
  auto e = sh("--dry-run --config " + kDefault + " --num-layers 4 --explain --num-layers --explain data_parallel_size");
  CHECK(e.exit == 0);
  CHECK(e.out.find("num_layers = 4    (command line argv[4])") != std::string::npos);
  CHECK(e.out.find("data_parallel_size = 1    (derived by") != std::string::npos);
  // With --format json, --explain answers in JSON; --provenance only shapes the JSON, so alone it is refused.
  auto ej = sh("--dry-run --config " + kDefault + " --explain --num-layers --format json");
  REQUIRE(ej.exit == 0);
  const mr::Value one = mr::Value::parse_json(ej.out);
  REQUIRE(one.as_object().size() == 1);
  CHECK(one.as_object().front().first == "num_layers");
  auto alone = sh("--dry-run --provenance --config " + kDefault);
  CHECK(alone.exit == 2);
  CHECK(alone.out.find("argument --provenance: adds each value's source to the JSON output") != std::string::npos);
}

TEST_CASE("--explain and --provenance say where the world size and rank came from", "[cli][explain]") {
  // Without WORLD_SIZE and RANK in the environment, no value of theirs is the environment's (review firsthour36 #2).
  auto in = [](const std::string& env, const std::string& args) {
    return mrtest::run_shell("env -u WORLD_SIZE -u RANK -u SLURM_PROCID -u SLURM_NTASKS -u SLURM_JOB_ID -u SLURM_STEP_ID " + env +
                             " '" + std::string(MR_BINARY) + "' " + args + " --config " + kDefault + " 2>&1");
  };
  auto given = in("", "--dry-run --world-size 4 --explain world_size --explain rank");
  CHECK(given.exit == 0);
  CHECK(given.out.find("world_size = 4    (command line --world-size)") != std::string::npos);
  CHECK(given.out.find("rank = 0    (default: RANK not set)") != std::string::npos);
  auto by_default = in("", "--explain world_size");
  CHECK(by_default.out.find("world_size = 1    (default: WORLD_SIZE not set)") != std::string::npos);
  auto launch = in("", "--nproc-per-node 2 --explain world_size --explain rank");
  CHECK(launch.out.find("world_size = 2    (--nnodes 1 x --nproc-per-node 2)") != std::string::npos);
  CHECK(launch.out.find("rank = 0    (default: a launch is checked as its rank 0 sees it)") != std::string::npos);
  auto json = in("", "--dry-run --format json --provenance --world-size 4");
  CHECK(json.out.find("\"world_size\": {\"value\": 4, \"source\": \"command line --world-size\"}") != std::string::npos);
  // The environment's, when it is: inside a torchrun job's variables.
  auto env = in("WORLD_SIZE=2 RANK=1", "--dry-run --explain world_size --explain rank");
  CHECK(env.out.find("world_size = 2    (environment WORLD_SIZE)") != std::string::npos);
  CHECK(env.out.find("rank = 1    (environment RANK)") != std::string::npos);
  // A derived size reads as its derivation in the user's terms, not as an internal line number.
  auto dp = in("", "--dry-run --world-size 2 --explain data_parallel_size");
  CHECK(dp.out.find("data_parallel_size = 2    (derived by model-parallel-sizes: world size 2 / (TP 1 x PP 1 x CP 1) = 2)") !=
        std::string::npos);
  CHECK(dp.out.find("seed") == std::string::npos);
}

TEST_CASE("--explain suggests a near flag or dest for an unknown one", "[cli][explain]") {
  auto flag = sh("--dry-run --config " + kDefault + " --explain --lr-warmup-iter");
  CHECK(flag.exit == 2);
  CHECK(flag.out.find("argument --explain: unknown flag --lr-warmup-iter; did you mean --lr-warmup-iters") != std::string::npos);
  auto dest = sh("--dry-run --config " + kDefault + " --explain num_layer");
  CHECK(dest.exit == 2);
  CHECK(dest.out.find("no resolved argument 'num_layer'; did you mean num_layers") != std::string::npos);
  auto typo = sh("--dry-run --config " + kDefault + " --tensor-paralel-size 2");
  CHECK(typo.exit == 2);
  CHECK(typo.out.find("did you mean --tensor-model-parallel-size") != std::string::npos);
}

TEST_CASE("a rule broken by flags of a file and of the command line is placed where the value was set last",
          "[cli][placement]") {
  // Review firsthour36 #12: --num-attention-heads 5 on the command line, --hidden-size 256 in the base file.
  auto cli = sh("--dry-run --config " + kDefault + " --num-attention-heads 5");
  CHECK(cli.exit == 1);
  CHECK(cli.out.find("command line: error[model-shape.hidden-size-divisible-by-heads]") != std::string::npos);
  CHECK(cli.out.find(kDefault + ":4: error[") == std::string::npos);
  // An overlay file: its line, not the base's.
  auto overlay = tmp_file("heads5.yaml", "--num-attention-heads: 5\n");
  auto o = sh("--dry-run --config " + kDefault + " --config " + overlay);
  CHECK(o.exit == 1);
  CHECK(o.out.find(overlay + ":1: error[model-shape.hidden-size-divisible-by-heads]") != std::string::npos);
  // check on a base and an overlay: the annotation gets the overlay's line.
  auto c = sh("check --world-size 1 --format github --config " + kDefault + " " + overlay);
  CHECK(c.exit == 1);
  CHECK(c.out.find("::error file=" + overlay + ",line=1") != std::string::npos);
}

TEST_CASE("check: one line per problem with file:line and rule id; JSON list; the worst file's exit code", "[cli]") {
  auto good = tmp_file("good.yaml", "--num-layers: 2\n");
  auto bad = tmp_file("bad.yaml", "--num-layers: 2\n--hidden-size: 64\n--num-attention-heads: 4\n"
                                  "--micro-batch-size: 1\n--seq-length: 8\n--max-position-embeddings: 8\n"
                                  "--tensor-model-parallel-size: 3\n");
  auto typo = tmp_file("typo.yaml", "--num-layer: 2\n");
  // Exit 1 when a rule failed; 2 when a file could not be read or parsed (an unknown key), whatever the others.
  CHECK(sh("check --world-size 1 " + kDefault + " " + bad).exit == 1);
  auto t = sh("check --world-size 1 " + kDefault + " " + bad + " " + typo);
  CHECK(t.exit == 2);
  CHECK(t.out.find(bad + ":7: error[parallel.world-size-divisible]: ") != std::string::npos);
  CHECK(t.out.find(typo + ":1: error[parse.unknown-argument]: unknown argument '--num-layer'") != std::string::npos);
  CHECK(t.out.find("3 file(s) checked, 2 invalid") != std::string::npos);
  auto j = sh("check --format json --world-size 1 " + kDefault + " " + typo + " 2>/dev/null");
  mr::Value list = mr::Value::parse_json(j.out);
  REQUIRE(list.as_list().size() == 2);
  const auto& first = list.as_list()[0].as_object();
  auto get = [](const mr::Object& o, const std::string& k) -> const mr::Value& {
    for (const auto& [key, v] : o)
      if (key == k) return v;
    FAIL("no key " << k);
    static mr::Value none;
    return none;
  };
  CHECK(get(first, "ok").as_bool());
  CHECK(get(first, "resolved").is_object());
  const auto& second = list.as_list()[1].as_object();
  CHECK_FALSE(get(second, "ok").as_bool());
  CHECK(get(get(second, "errors").as_list()[0].as_object(), "rule").as_str() == "parse.unknown-argument");
  CHECK(get(get(second, "errors").as_list()[0].as_object(), "stage").as_str() == "parse");
  CHECK(sh("check").exit == 2);
  (void)good;
}

TEST_CASE("schema, rules and help are generated from the tables", "[cli]") {
  auto s = sh("schema --format json");
  CHECK(s.exit == 0);
  CHECK(mr::Value::parse_json(s.out).as_list().size() == mr::Schema::megatron().args().size());
  auto c = sh("schema --format bash-completion");
  CHECK(c.out.find("--num-layers") != std::string::npos);
  auto rules = sh("rules");
  CHECK(rules.out.find("parallel.world-size-divisible  [error]") != std::string::npos);
  // Named rules: their lines of the list, in the order given; an unknown id is an error with the closest ids.
  auto named = sh("rules sanity.integer-overflow parallel.world-size-divisible");
  CHECK(named.exit == 0);
  std::string want;
  for (const char* id : {"sanity.integer-overflow  ", "parallel.world-size-divisible  "}) {
    size_t at = rules.out.find(std::string("\n") + id);
    REQUIRE(at != std::string::npos);
    want += rules.out.substr(at + 1, rules.out.find('\n', at + 1) - at);
  }
  CHECK(named.out == want);
  auto typo = sh("rules parallel.world-size-divisble");
  CHECK(typo.exit == 2);
  CHECK(typo.out.find("rules: unknown rule id 'parallel.world-size-divisble' (did you mean "
                      "parallel.world-size-divisible?)") != std::string::npos);
  CHECK(sh("rules world-size-divisible").out.find("(did you mean parallel.world-size-divisible?)") !=
        std::string::npos);
  // The error says what `rules` lists: every rule, the launcher's and the workers' too.
  CHECK(typo.out.find("`megatron-run rules` lists every rule") != std::string::npos);
  CHECK(typo.out.find("launch.*") != std::string::npos);
  // The ids megatron-run prints outside validation are rules too (review design34 #1): listed, with their stage;
  // a made-up one of their families is an unknown id with the closest ids, as any other.
  CHECK(sh("rules checkpoint.corrupt").out.rfind("checkpoint.corrupt  [error]  (run) ", 0) == 0);
  CHECK(sh("rules parse.deprecated-flag").out.rfind("parse.deprecated-flag  [warning]  (parse) ", 0) == 0);
  CHECK(sh("rules launch.dry-run-implied").out.rfind("launch.dry-run-implied  [warning]  (launch) ", 0) == 0);
  CHECK(sh("rules dist.nccl-unavailable").out.rfind("dist.nccl-unavailable  [error]  (init) ", 0) == 0);
  CHECK(sh("rules run.nan-check").out.rfind("run.nan-check  [error]  (run) ", 0) == 0);
  CHECK(sh("rules schedule.settings").out.rfind("schedule.settings  [error]  (plan) ", 0) == 0);
  CHECK(sh("rules launch.open-file-limit").out.rfind("launch.open-file-limit  [error]  (launch) ", 0) == 0);
  auto made_up = sh("rules checkpoint.no-such-thing");
  CHECK(made_up.exit == 2);
  CHECK(made_up.out.find("rules: unknown rule id 'checkpoint.no-such-thing'") != std::string::npos);
  auto near_ckpt = sh("rules checkpoint.corrup run.bogus");
  CHECK(near_ckpt.exit == 2);
  CHECK(near_ckpt.out.find("'checkpoint.corrup' (did you mean checkpoint.corrupt?)") != std::string::npos);
  CHECK(near_ckpt.out.find("'run.bogus'") != std::string::npos);
  auto ckpt_family = sh("rules checkpoint");
  CHECK(ckpt_family.exit == 0);
  CHECK(ckpt_family.out.find("checkpoint.corrupt  [error]  (run) ") != std::string::npos);
  // A family ("batch-size", or "batch-size.") lists each of its rules, in the list's order.
  std::string family;
  for (size_t at = 0; (at = rules.out.find("\nbatch-size.", at)) != std::string::npos; ++at)
    family += rules.out.substr(at + 1, rules.out.find('\n', at + 1) - at);
  CHECK(std::count(family.begin(), family.end(), '\n') >= 2);
  auto fam = sh("rules batch-size");
  CHECK(fam.exit == 0);
  CHECK(fam.out == family);
  CHECK(sh("rules batch-size.").out == family);
  // A family's start: the ids that start with it come first.
  CHECK(sh("rules batch-siz").out.find("(did you mean batch-size.") != std::string::npos);
  auto rj = mrtest::megatron_run_stdout("rules --format json");
  CHECK(rj.exit == 0);
  const mr::Value all = mr::Value::parse_json(rj.out);
  CHECK(all.as_list().size() == static_cast<size_t>(std::count(rules.out.begin(), rules.out.end(), '\n')));
  auto one = mrtest::megatron_run_stdout("rules --format json input.yaml-duplicate-key");
  const mr::Value r = mr::Value::parse_json(one.out);
  REQUIRE(r.as_list().size() == 1);
  std::vector<std::string> keys;
  for (const auto& [k, v] : r.as_list()[0].as_object()) keys.push_back(k);
  CHECK(keys == std::vector<std::string>{"id", "level", "stage", "description", "source"});
  CHECK(r.as_list()[0].as_object()[0].second.as_str() == "input.yaml-duplicate-key");
  CHECK(r.as_list()[0].as_object()[2].second.as_str() == "input");
  // --format json: stdout is one JSON document, a refusal included.
  auto bad_json = mrtest::megatron_run_stdout("rules --format json no.such-rule");
  CHECK(bad_json.exit == 2);
  CHECK_FALSE(mr::Value::parse_json(bad_json.out).as_object()[0].second.as_bool());
  CHECK(sh("rules --format markdown parallel.world-size-divisible").out.find("| `parallel.world-size-divisible` |") !=
        std::string::npos);
  CHECK(sh("rules --help").out.find("[ID...]") != std::string::npos);
  auto h = sh("--help");
  CHECK(h.exit == 0);
  CHECK(h.out.find("network size:") != std::string::npos);
  CHECK(h.out.find("--num-layers NUM_LAYERS") != std::string::npos);
  // The argument table's header names no list of commands (one went stale as commands were added): it points at
  // `help`, which prints the command table.
  auto text = sh("schema --format text");
  CHECK(text.out.find("megatron-run COMMAND ...   (`megatron-run help` lists the commands)") != std::string::npos);
  CHECK(text.out.find("check|schema|topology|help") == std::string::npos);
}

namespace {
// A member of a parsed JSON object by a dotted path ("bytes.total").
const mr::Value& field(const mr::Value& v, const std::string& path) {
  const mr::Value* cur = &v;
  size_t b = 0;
  while (b <= path.size()) {
    size_t e = path.find('.', b);
    if (e == std::string::npos) e = path.size();
    const std::string key = path.substr(b, e - b);
    const mr::Value* next = nullptr;
    for (const auto& [k, x] : cur->as_object())
      if (k == key) next = &x;
    if (!next) throw std::runtime_error("no member " + key);
    cur = next;
    b = e + 1;
  }
  return *cur;
}
}  // namespace

TEST_CASE("params: a config the model plan cannot count is rule model-plan (stage plan), in text and JSON", "[cli][params]") {
  // --decoder-num-layers: an encoder-decoder family (T5) the plan does not count as a GPT decoder.
  Result text = sh("params --world-size 1 --config " + kDefault + " --decoder-num-layers 2");
  CHECK(text.exit == 1);
  CHECK(text.out.find("error[model-plan]: ") != std::string::npos);
  Result json = sh("params --world-size 1 --config " + kDefault + " --decoder-num-layers 2 --format json");
  CHECK(json.exit == 1);
  CHECK(json.out.find("\"rule\": \"model-plan\", \"level\": \"error\", \"stage\": \"plan\"") != std::string::npos);
  CHECK(sh("rules model-plan").out.rfind("model-plan  [error]  (plan) ", 0) == 0);
}

TEST_CASE("params: what Megatron's activation formula leaves out (CP, full recompute) is said; figures as Python writes them",
          "[cli][params]") {
  Result plain = sh("params --world-size 1 --config " + kDefault + " --format json");
  REQUIRE(plain.exit == 0);
  CHECK(plain.out.find("\"activation_caveats\": [], ") != std::string::npos);
  // repr's shortest digits (5438361.600000001 here), not 17 of them (5438361.6000000006).
  CHECK(plain.out.find("\"activations\": 5438361.600000001, ") != std::string::npos);
  CHECK(plain.out.find("\"weights_and_optimizer\": 29999104.0, ") != std::string::npos);
  const std::string both = " --target-gpu-arch sm_100 --context-parallel-size 2 --recompute-granularity full --recompute-method uniform "
                           "--recompute-num-layers 1";
  Result json = sh("params --world-size 2 --config " + kDefault + both + " --format json");
  INFO(json.out);
  REQUIRE(json.exit == 0);
  mr::Value v = mr::Value::parse_json(json.out);
  const auto& caveats = field(v, "activation_caveats").as_list();
  REQUIRE(caveats.size() == 2);
  CHECK(caveats[0].as_str() == "the whole sequence's, not the 1/2 each rank holds under --context-parallel-size 2");
  CHECK(caveats[1].as_str() == "every layer's kept, though --recompute-granularity full recomputes them");
  Result text = sh("params --world-size 2 --config " + kDefault + both);
  CHECK(text.out.find("\nactivations as Megatron's formula counts them: the whole sequence's, not the 1/2 each rank holds "
                      "under --context-parallel-size 2; every layer's kept, though --recompute-granularity full "
                      "recomputes them\n(tp, pp)") != std::string::npos);
  Result svg = mrtest::run_shell(std::string("'") + MR_BINARY + "' params --world-size 2 --config " + kDefault + both +
                                 " --format svg 2>&1 >/dev/null");
  CHECK(svg.out == "megatron-run: notice: activations as Megatron's formula counts them: the whole sequence's, not the "
                   "1/2 each rank holds under --context-parallel-size 2; every layer's kept, though "
                   "--recompute-granularity full recomputes them\n");
}

TEST_CASE("params: parameters and memory per (tensor, pipeline) rank, without starting anything", "[cli][params]") {
  // The default job: 12Lh^2 + 13Lh + (V + s)h + 2h = 1,874,944 (L 2, h 256, V 1024, s 128); fp32 + adam:
  // 4 (param) + 4 (grad) + 8 (two moments) bytes each.
  Result r = sh("params --world-size 1 --config " + kDefault + " --format json");
  INFO(r.out);
  REQUIRE(r.exit == 0);
  mr::Value v = mr::Value::parse_json(r.out);
  CHECK(field(v, "parameters").as_int() == 1874944);
  const mr::Value& rank = field(v, "ranks").as_list().at(0);
  CHECK(field(rank, "parameters").as_int() == 1874944);
  CHECK(field(rank, "bytes.weights_and_optimizer").as_float() == 1874944.0 * 16);
  CHECK(field(rank, "bytes.main_params").as_float() == 0.0);
  // Activations, Megatron's compute_activation_memory_without_sp by hand (s 128, b 2, h 256, t 1, p 1, L 2,
  // V 1024): per layer sbh (10 + 24/t) = 2,228,224, x L = 4,456,448; embedding input 8sbp = 2,048 and dropout
  // sbhp = 65,536; logits (sbV/t + sbh) x 2 = 655,360; sum 5,179,392, x 1.05 = 5,438,361.6 bytes.
  CHECK(field(rank, "bytes.activations").as_float() == Approx(5438361.6).epsilon(1e-12));
  CHECK(field(rank, "bytes.total").as_float() == Approx(1874944.0 * 16 + 5438361.6).epsilon(1e-12));
  CHECK(field(rank, "sharding").as_str() == "none");

  // A 7B LLaMA-like model on 64 ranks, TP 8, bf16 with the distributed optimizer over DP 8: 6,738,415,616 +
  // untied output (32000 x 4096) = 6,744,707,072 parameters; per rank 2 (bf16) + 4 (fp32 grads: bf16 with the
  // distributed optimizer accumulates in fp32) + (4 + 8) / 8 bytes.
  const std::string llama = " --num-layers 32 --hidden-size 4096 --num-attention-heads 32 --vocab-size 32000"
                            " --ffn-hidden-size 11008 --swiglu --normalization RMSNorm --disable-bias-linear"
                            " --position-embedding-type rope --untie-embeddings-and-output-weights --bf16"
                            " --use-distributed-optimizer --seq-length 4096 --max-position-embeddings 4096"
                            " --global-batch-size 64 --tensor-model-parallel-size 8";
  r = sh("params --world-size 64 --config " + kDefault + llama + " --format json --target-gpu-arch sm_100");
  INFO(r.out);
  REQUIRE(r.exit == 0);
  v = mr::Value::parse_json(r.out);
  CHECK(field(v, "parameters").as_int() == 6744707072);
  CHECK(field(v, "dp").as_int() == 8);
  const mr::List& ranks = field(v, "ranks").as_list();
  REQUIRE(ranks.size() == 8);
  int64_t per = field(ranks[0], "parameters").as_int();
  CHECK(per == 843321344);
  const mr::Value& b = field(ranks[0], "bytes");
  CHECK(field(b, "params").as_float() == per * 2.0);
  CHECK(field(b, "grads").as_float() == per * 4.0);
  CHECK(field(b, "main_params").as_float() == Approx(per * 4.0 / 8));
  CHECK(field(b, "optimizer_state").as_float() == Approx(per * 8.0 / 8));
  // The precision-aware optimizer keeps the masters as 2-byte remainders from Transformer Engine 2.1 on; the
  // target's version decides (--target-te-version).
  for (const char* te : {"2.1.0", "2.0.0"}) {
    r = sh("params --world-size 64 --config " + kDefault + llama +
           " --use-precision-aware-optimizer --format json --target-gpu-arch sm_100 --target-te-version " + te);
    INFO(r.out);
    REQUIRE(r.exit == 0);
    v = mr::Value::parse_json(r.out);
    const double master = std::string(te) == "2.1.0" ? 2.0 : 4.0;
    CHECK(field(field(v, "ranks").as_list()[0], "bytes.main_params").as_float() == Approx(per * master / 8));
  }

  // Text, pipeline stages, and what the plan refuses.
  r = sh("params --world-size 2 --config " + kDefault + " --pipeline-model-parallel-size 2");
  INFO(r.out);
  REQUIRE(r.exit == 0);
  CHECK_THAT(r.out, Catch::Contains("(0, 1)") && Catch::Contains("TP=1 PP=2"));
  // The header names Megatron's formula, and its figure is the first stage's: the second stage's row shows "-"
  // there, and its total is its weights and optimizer alone.
  CHECK_THAT(r.out, Catch::Contains("activations: Megatron's theoretical estimate, compute_activation_memory_without_sp"
                                    " (no --sequence-parallel with selective recompute), for the first pipeline stage"));
  {
    std::istringstream lines(r.out);
    std::string l;
    int later = 0;
    while (std::getline(lines, l))
      if (l.rfind("(0, 1)", 0) == 0) {
        std::istringstream f(l.substr(6));
        std::string layers, params, p, g, m, o, a, total;
        f >> layers >> params >> p >> g >> m >> o >> a >> total;
        CHECK(a == "-");
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.2f", std::stod(p) + std::stod(g) + std::stod(m) + std::stod(o));
        CHECK(std::abs(std::stod(total) - std::stod(buf)) <= 0.011);  // rounding of the four parts
        ++later;
      }
    CHECK(later == 1);
  }
  // A small model's table is in MiB, not 0.00 GiB: the default job's fp32 weights are 1,874,944 x 4 bytes = 7.15 MiB,
  // optimizer state 8 bytes a parameter = 14.30 MiB.
  r = sh("params --world-size 1 --config " + kDefault);
  INFO(r.out);
  REQUIRE(r.exit == 0);
  CHECK_THAT(r.out, Catch::Contains("memory per rank in MiB ("));
  CHECK(std::regex_search(r.out, std::regex("\\(0, 0\\) +2 +1874944 +7\\.15 +7\\.15 +0\\.00 +14\\.30 +[0-9.]+ +")));
  CHECK_THAT(r.out, !Catch::Contains("for the first pipeline stage"));  // one stage: nothing to say
  r = sh("params --world-size 1 --config " + kDefault + " --multi-latent-attention --mla-down-proj-fusion");
  CHECK(r.exit == 1);
  CHECK_THAT(r.out, Catch::Contains("--mla-down-proj-fusion"));
  r = sh("params --config " + kDefault);
  CHECK(r.exit == 2);
  CHECK_THAT(r.out, Catch::Contains("--world-size"));
}

TEST_CASE("params: activations as Megatron's theoretical memory estimates them", "[cli][params][memory]") {
  auto activations = [](const std::string& flags, int world) {
    Result r = sh("params --world-size " + std::to_string(world) + " --config " + kDefault + flags + " --format json");
    INFO(r.out);
    REQUIRE(r.exit == 0);
    mr::Value v = mr::Value::parse_json(r.out.substr(r.out.find("{\"world_size\"")));
    // The formula that applies is named (report_theoretical_memory's choice).
    const bool sp = flags.find("--sequence-parallel") != std::string::npos;
    CHECK(field(v, "activation_estimate").as_str() ==
          (sp ? "compute_activation_memory" : "compute_activation_memory_without_sp"));
    return field(field(v, "ranks").as_list().at(0), "bytes.activations").as_float();
  };
  // --sequence-parallel with selective recompute: compute_activation_memory (Table 2 of arXiv:2205.05198). The
  // default job at TP 2 (s 128, b 2, h 256, ffn 1024, t 2, p 1, L 2, V 1024): per layer sbh (18 + 4 ffn/h) =
  // 2,228,224, x L = 4,456,448; + 8sbp 2,048 + sbhp 65,536; + the output layer sbh x 4 x (1 + V/h) = 1,310,720;
  // sum 5,834,752, / t = 2,917,376 bytes.
  CHECK(activations(" --tensor-model-parallel-size 2 --sequence-parallel --recompute-granularity selective"
                    " --target-gpu-arch sm_100", 2) ==
        Approx(2917376.0).epsilon(1e-12));
  // Two pipeline stages, one microbatch (--global-batch-size 2 = micro-batch size x DP 1): without SP, 4,456,448
  // + 8sbp 4,096 + sbhp 131,072 = 4,591,616, x min(1, 1 microbatch / 2 stages) = 2,295,808, x 1.05 = 2,410,598.4
  // (no output-layer term with PP).
  CHECK(activations(" --pipeline-model-parallel-size 2 --global-batch-size 2", 2) == Approx(2410598.4).epsilon(1e-12));
}

TEST_CASE("params: a corpus config with interleaved pipeline stages", "[cli][params][memory]") {
  // gpt3_mcore_te_tp1_pp4_vp1_decoupled_lr (s 1024, b 4, h 512, t 1, p 4, vpp 3, L 12, no SP), from Megatron's
  // formula by hand: per layer sbh (10 + 24) = 71,303,168, x 12 = 855,638,016; + 8sbp 131,072 + sbhp 8,388,608 =
  // 864,157,696; x the interleaving penalty 1 + (p - 1)/(p vpp) = 1.25 = 1,080,197,120; x 1.05 = 1,134,206,976.
  const std::string cfg = std::string(MR_DATA_DIR) + "/corpus/functional-tests/gpt__gpt3_mcore_te_tp1_pp4_vp1_decoupled_lr.yaml";
  Result r = sh("params --world-size 8 --env-placeholder /p --config " + cfg + " --vocab-size 32000 --format json");
  INFO(r.out);
  REQUIRE(r.exit == 0);
  mr::Value v = mr::Value::parse_json(r.out.substr(r.out.find("{\"world_size\"")));
  // The figure is the first stage's: on its rank, with the total to match; the later stages' activations are null
  // and their totals are their weights and optimizer.
  CHECK(field(v, "activation_estimate").as_str() == "compute_activation_memory_without_sp");
  CHECK(field(v, "activations_on").as_str() == "first pipeline stage");
  CHECK(field(v, "unit").as_str() == "bytes");
  int later = 0;
  for (const mr::Value& rank : field(v, "ranks").as_list()) {
    const mr::Value& b = field(rank, "bytes");
    if (field(rank, "pp_rank").as_int() == 0) {
      CHECK(field(b, "activations").as_float() == Approx(1134206976.0).epsilon(1e-12));
      CHECK(field(b, "total").as_float() ==
            Approx(field(b, "weights_and_optimizer").as_float() + 1134206976.0).epsilon(1e-12));
    } else {
      ++later;
      CHECK(field(b, "activations").is_none());
      CHECK(field(b, "total").as_float() == field(b, "weights_and_optimizer").as_float());
    }
  }
  CHECK(later == 3);
}

TEST_CASE("params: Megatron-FSDP's Llama-3 8B example shards weights and gradients over DP", "[cli][params][memory]") {
  // Megatron-LM's examples/megatron_fsdp/train_llama3_8b_fsdp_h100_fp8.sh on 8 GPUs (tests/data/examples): bf16,
  // --use-megatron-fsdp with optim_grads_params (ZeRO-3) over DP 8, --fp8-param-gather. By hand: 32 layers of
  // qkv (32 + 2 x 8) x 128 x 4096 = 25,165,824, proj 16,777,216, fc1 2 x 14336 x 4096 = 117,440,512, fc2
  // 58,720,256 (linear: 218,103,808) and two RMSNorms 8,192; embedding and output 2 x 128256 x 4096; final norm
  // 4,096: 8,030,261,248 parameters, 6,979,321,856 of them in linear layers.
  //   params: (6,979,321,856 x 1 byte (fp8) + 1,050,939,392 x 2 (bf16)) / 8 = 1,135,150,080
  //   grads: 4 bytes (fp32 main grads: --accumulate-allreduce-grads-in-fp32 as validated) / 8 = 4,015,130,624
  //   main params: 4 bytes / 8 = 4,015,130,624; Adam's two moments: 8 bytes / 8 = 8,030,261,248
  // 17,195,672,576 bytes = 16.0 GiB of weights and optimizer per rank, where 56 GiB (params and grads whole) was
  // reported before. Activations (without SP: TP is 1), s 8192, b 1, h 4096, V 128256: sbh x 34 x 32 =
  // 36,507,222,016; + 8sb 65,536 + sbh 33,554,432; + (sbV + sbh) x 2 = 2,168,455,168; x 1.05 = 40,644,762,009.6.
  const std::string cfg = std::string(MR_DATA_DIR) + "/examples/llama3_8b_megatron_fsdp_fp8.yaml";
  Result r = sh("params --world-size 8 --config " + cfg + " --format json");
  INFO(r.out);
  REQUIRE(r.exit == 0);
  mr::Value v = mr::Value::parse_json(r.out.substr(r.out.find("{\"world_size\"")));
  CHECK(field(v, "parameters").as_int() == 8030261248);
  const mr::Value& rank = field(v, "ranks").as_list().at(0);
  CHECK(field(rank, "sharding").as_str() == "megatron-fsdp optim_grads_params");
  CHECK(field(rank, "bytes.params").as_float() == 1135150080.0);
  CHECK(field(rank, "bytes.grads").as_float() == 4015130624.0);
  CHECK(field(rank, "bytes.main_params").as_float() == 4015130624.0);
  CHECK(field(rank, "bytes.optimizer_state").as_float() == 8030261248.0);
  CHECK(field(rank, "bytes.weights_and_optimizer").as_float() == 17195672576.0);
  CHECK(field(rank, "bytes.activations").as_float() == Approx(40644762009.6).epsilon(1e-12));
  // The same job with the distributed optimizer alone (ZeRO-1): params and grads whole again, bf16 everywhere.
  r = sh("params --world-size 8 --config " + cfg + " --data-parallel-sharding-strategy optim --format json");
  INFO(r.out);
  REQUIRE(r.exit == 0);
  v = mr::Value::parse_json(r.out.substr(r.out.find("{\"world_size\"")));
  const mr::Value& z1 = field(v, "ranks").as_list().at(0);
  CHECK(field(z1, "bytes.params").as_float() == 9081200640.0);  // fp8 linear weights, the rest bf16, whole
  CHECK(field(z1, "bytes.grads").as_float() == 8030261248.0 * 4);
  CHECK(field(z1, "bytes.main_params").as_float() == 4015130624.0);
  // Text: the sharding is named, and activations have their column.
  r = sh("params --world-size 8 --config " + cfg);
  CHECK_THAT(r.out, Catch::Contains("sharding: megatron-fsdp optim_grads_params") && Catch::Contains("activ"));
}

TEST_CASE("params: torch FSDP2 shards params, gradients, main params and state over DP", "[cli][params][memory]") {
  // Megatron's FSDP2 CI config (TP 2, bf16, Adam) on 8 ranks: DP 4. Each TP rank holds 45,279,232 parameters;
  // fully_shard splits each over the 4 DP ranks: params 2 bytes, grads 2 (param.grad in the params' dtype: FSDP2's
  // DDP config has no grad_reduce_in_fp32), fp32 main params 4, Adam's two moments 8, each / 4.
  const std::string cfg =
      std::string(MR_DATA_DIR) + "/corpus/functional-tests/gpt__gpt3_mcore_te_tp2_pp1_fsdp2_resume_torch_dist.yaml";
  Result r = sh("params --world-size 8 --env-placeholder /p --config " + cfg + " --vocab-size 50257 --format json");
  INFO(r.out);
  REQUIRE(r.exit == 0);
  const mr::Value v = mr::Value::parse_json(r.out.substr(r.out.find("{\"world_size\"")));
  for (const mr::Value& rank : field(v, "ranks").as_list()) {
    const double n = static_cast<double>(field(rank, "parameters").as_int());
    CHECK(n == 45279232);
    CHECK(field(rank, "sharding").as_str() == "torch fsdp2");
    CHECK(field(rank, "bytes.params").as_float() == n * 2 / 4);
    CHECK(field(rank, "bytes.grads").as_float() == n * 2 / 4);
    CHECK(field(rank, "bytes.main_params").as_float() == n * 4 / 4);
    CHECK(field(rank, "bytes.optimizer_state").as_float() == n * 8 / 4);
  }
}

TEST_CASE("params: a config that looks like a vision/multimodal or BERT model is said to be counted as a GPT decoder",
          "[cli][params]") {
  // Megatron's LLaVA CI config: --img-h, --img-w and --patch-dim are the vision group's; the plan has no vision tower.
  const std::string llava =
      std::string(MR_DATA_DIR) + "/corpus/functional-tests/multimodal-llava__multimodal_llava_mcore_te_tp1_pp1.yaml";
  const std::string said = "--img-h, --img-w, --patch-dim are a vision or multimodal model's (Megatron's LLaVA / "
                           "pretrain_vlm.py, ViT): the figures are the GPT decoder of the config's sizes only, without "
                           "a vision encoder or projection";
  Result text = sh("params --world-size 8 --env-placeholder /p --config " + llava);
  INFO(text.out);
  REQUIRE(text.exit == 0);
  CHECK(text.out.find("\nmodel: " + said + "\n") != std::string::npos);
  Result json = sh("params --world-size 8 --env-placeholder /p --config " + llava + " --format json");
  REQUIRE(json.exit == 0);
  CHECK(json.out.find("megatron-run: notice: " + said + "\n") != std::string::npos);  // stderr: stdout stays JSON
  Result mm = sh("params --world-size 1 --config " + kDefault + " --tokenizer-type NullMultimodalTokenizer");
  REQUIRE(mm.exit == 0);
  CHECK(mm.out.find("model: --tokenizer-type NullMultimodalTokenizer is a vision or multimodal model's") !=
        std::string::npos);
  Result bert = sh("params --world-size 1 --config " + kDefault + " --tokenizer-type BertWordPieceLowerCase "
                   "--vocab-file " + tmp_file("bert-vocab.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\na\n"));
  INFO(bert.out);
  REQUIRE(bert.exit == 0);
  CHECK(bert.out.find("model: --tokenizer-type BertWordPieceLowerCase is BERT's: if the program is pretrain_bert.py") !=
        std::string::npos);
  Result plain = sh("params --world-size 1 --config " + kDefault);
  REQUIRE(plain.exit == 0);
  CHECK(plain.out.find("model: ") == std::string::npos);
  // --no-data-sharding is in the vision group but belongs to the cyclic data loader of any model (review diff32).
  Result sharding = sh("params --world-size 1 --config " + kDefault + " --no-data-sharding");
  REQUIRE(sharding.exit == 0);
  CHECK(sharding.out.find("model: ") == std::string::npos);
}

TEST_CASE("params --format svg: a picture of more than 4096 (tensor, pipeline) ranks is refused, as topology's",
          "[cli][params]") {
  // Review docsrobust 3: PP 65536 drew a 134 MB SVG. The text and JSON outputs have no such bound.
  const std::string job = "params --world-size 8192 --config " + kDefault +
                          " --pipeline-model-parallel-size 8192 --num-layers 8192 --micro-batch-size 1 "
                          "--global-batch-size 1";
  Result svg = sh(job + " --format svg");
  INFO(svg.out);
  CHECK(svg.exit == 2);
  CHECK(svg.out.find("error[input.picture-too-large]: params --format svg: a picture of 8192 (tensor, pipeline) "
                     "ranks is too large (at most 4096") != std::string::npos);
  CHECK(svg.out.find("<svg") == std::string::npos);
  Result json = sh(job + " --format json");
  CHECK(json.exit == 0);
}

TEST_CASE("params: Megatron's Mixtral 8x7B CI config holds Mixtral's 46.7 B parameters", "[cli][params][moe]") {
  // The corpus config (TP 2, PP 4, EP 4 on 32 ranks); its tokenizer is a file we do not load: --vocab-size 32000.
  const std::string cfg = std::string(MR_DATA_DIR) + "/corpus/functional-tests/mixtral__mixtral_8x7b_alltoall_tp2pp4ep4_release.yaml";
  ::setenv("CUDA_DEVICE_MAX_CONNECTIONS", "1", 1);  // TP on sm_90 needs it (validation reads the environment)
  Result r = sh("params --world-size 32 --env-placeholder /p --config " + cfg + " --vocab-size 32000 --format json");
  ::unsetenv("CUDA_DEVICE_MAX_CONNECTIONS");
  INFO(r.out);
  REQUIRE(r.exit == 0);
  mr::Value v = mr::Value::parse_json(r.out.substr(r.out.find("{\"world_size\"")));  // after the config's warnings
  CHECK(field(v, "parameters").as_int() == 46702792704);
  CHECK(field(v, "ranks").as_list().size() == 8);  // 2 TP x 4 PP coordinates
}

TEST_CASE("params: Megatron's DeepSeek-V3 proxy CI config (MLA, MTP, 256 experts): Megatron's count plus eh_proj",
          "[cli][params][moe][mla]") {
  // 14 layers (the first 3 dense), MLA with q/kv latents, one MTP layer, untied; 64 ranks (TP 2, PP 2, EP 8).
  // Megatron's theoretical_memory_usage gives 40.21 billion (block 35.30 + MTP 3.05 + embeddings 1.85) and leaves out
  // the MTP layer's eh_proj (7168 x 14336 = 102,760,448) and its three norms (3 x 7168).
  const std::string cfg = std::string(MR_DATA_DIR) +
                          "/corpus/functional-tests/mixtral__deepseekv3_proxy_flex_tp2pp2emp16etp1cp1_gb_200_release_sm.yaml";
  ::setenv("CUDA_DEVICE_MAX_CONNECTIONS", "1", 1);
  Result r = sh("params --world-size 64 --env-placeholder /p --config " + cfg + " --vocab-size 129280 --format json");
  ::unsetenv("CUDA_DEVICE_MAX_CONNECTIONS");
  INFO(r.out);
  REQUIRE(r.exit == 0);
  mr::Value v = mr::Value::parse_json(r.out.substr(r.out.find("{\"world_size\"")));
  const int64_t n = field(v, "parameters").as_int();
  CHECK(n == 40308912128);
  CHECK(n - 102760448 - 3 * 7168 > 40205000000);  // Megatron's 40.21 (rounded) billion
  CHECK(n - 102760448 - 3 * 7168 < 40215000000);
}

TEST_CASE("params: a CI config's --pipeline-model-parallel-layout places the layers (PP=2 x 4 chunks, MTP last)",
          "[cli][params][mtp]") {
  // "Et*3|(tt|)*6mL", 15 layers: pipeline rank 0 builds 3 + 2 + 2 + 2 of them, rank 1 2 + 2 + 2 and the MTP layer.
  const std::string cfg = std::string(MR_DATA_DIR) +
                          "/corpus/functional-tests/moe__gpt3_moe_mcore_te_tp2_pp2_ep4_etp1_fine_grained_offloading.yaml";
  ::setenv("CUDA_DEVICE_MAX_CONNECTIONS", "1", 1);
  Result r = sh("params --world-size 8 --env-placeholder /p --config " + cfg + " --vocab-size 32000 --format json");
  ::unsetenv("CUDA_DEVICE_MAX_CONNECTIONS");
  INFO(r.out);
  REQUIRE(r.exit == 0);
  mr::Value v = mr::Value::parse_json(r.out.substr(r.out.find("{\"world_size\"")));
  std::map<int64_t, int64_t> layers;  // pipeline rank -> layers
  for (const mr::Value& rank : field(v, "ranks").as_list())
    layers[field(rank, "pp_rank").as_int()] = field(rank, "layers").as_int();
  CHECK(layers == std::map<int64_t, int64_t>{{0, 9}, {1, 6}});
}

TEST_CASE("params: a hybrid CI config (Mamba, attention, MoE, MTP) holds Nemotron 3 Nano's 31.6 B parameters",
          "[cli][params][hybrid]") {
  // The corpus config is Nemotron 3 Nano's architecture (52 layers: 23 Mamba, 23 MoE with 128 experts, 6 attention)
  // with 2 MTP depths of "*E" in one repeated layer (--mtp-use-repeated-layer). With the model's vocabulary
  // (131072) and without the MTP part it is the released model, published as 31.6 B parameters.
  const std::string cfg = std::string(MR_DATA_DIR) +
                          "/corpus/functional-tests/nemotron__nemotron3_5_lightning_nightly_tp1_pp1_cp1_ep8_dgx_gb200.yaml";
  const std::string base = "params --world-size 8 --env-placeholder /p --config " + cfg + " --vocab-size 131072";
  auto count = [&](const std::string& more) {
    Result r = sh(base + " --format json" + more);
    INFO(r.out);
    REQUIRE(r.exit == 0);
    mr::Value v = mr::Value::parse_json(r.out.substr(r.out.find("{\"world_size\"")));
    const mr::Value& rank = field(v, "ranks").as_list().at(0);
    CHECK(field(rank, "layers").as_int() == 52);
    CHECK(field(field(rank, "bytes"), "activations").is_none());  // Megatron has no estimate for hybrid models
    return field(v, "parameters").as_int();
  };
  const int64_t released =
      count(" --hybrid-layer-pattern MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME --mtp-num-layers 0");
  CHECK(released == 31577937344);
  // The MTP layer: enorm, hnorm, eh_proj (2688 x 5376), an attention and an MoE layer, its final norm.
  CHECK(count("") - released == 1335325824);
  // The text says what the total holds.
  Result text = sh(base);
  CHECK_THAT(text.out, Catch::Contains("activations: not estimated for hybrid models") && Catch::Contains("+?"));
}

TEST_CASE("params: a hybrid model's N+? totals choose the table's unit as other totals do", "[cli][params][memory]") {
  // Its largest figures are the weights-and-optimizer totals (activations unknown): 1386.76+? MiB was printed in MiB
  // although the table is in GiB from 1 GiB on (review mem41 #2).
  const std::string cfg = std::string(MR_DATA_DIR) +
                          "/corpus/functional-tests/hybrid__hybrid_mr_mcore_te_tp1_pp4_cp1_dgx_a100_1N8G.yaml";
  Result r = sh("params --world-size 8 --allow-unset-env --vocab-size 32000 --config " + cfg);
  INFO(r.out << r.err);
  REQUIRE(r.exit == 0);
  CHECK_THAT(r.out, Catch::Contains("memory per rank in GiB") && Catch::Contains("1.35+?"));
}

TEST_CASE("no arguments is a usage error: the usage on stderr, exit 2; help and -h/--help on stdout, exit 0",
          "[cli][help]") {
  // Nothing asked: a script that forgot its arguments must not pass. The usage goes to stderr, after a line that
  // says what is wrong; stdout stays empty.
  const mrtest::Proc none = mrtest::megatron_run("");
  CHECK(none.exit == 2);
  CHECK(none.out.empty());
  CHECK_THAT(none.err, Catch::StartsWith("megatron-run: no command or flags given; ") &&
                           Catch::Contains("\nusage:\n  megatron-run --dry-run"));
  // `help` and `--help` are asked for: the same usage (help) or the flags (--help) on stdout, exit 0.
  const mrtest::Proc help = mrtest::megatron_run("help");
  CHECK(help.exit == 0);
  CHECK(help.err.empty());
  CHECK(none.err.substr(none.err.find('\n') + 1) == help.out);
  const mrtest::Proc flags = mrtest::megatron_run("--help");
  CHECK(flags.exit == 0);
  CHECK_THAT(flags.out, Catch::StartsWith(help.out) && Catch::Contains("\nMegatron-LM arguments ("));
  for (std::string cmd : {"", "check ", "schema ", "rules ", "topology ", "params ", "schedule "})
    for (std::string h : {"-h", "--help"}) {
      auto r = sh(cmd + h);
      INFO(cmd + h);
      CHECK(r.exit == 0);
      CHECK(r.out.find("usage") != std::string::npos);
    }
  CHECK(sh("check --help").out.find("megatron-run check") != std::string::npos);
  // `help COMMAND` is COMMAND --help; an unknown one, or a near miss of a command, is named with the right word.
  CHECK(sh("help check").out == sh("check --help").out);
  CHECK(sh("help schedule").out.find("usage: megatron-run schedule") != std::string::npos);
  auto bad = sh("help chek");
  CHECK(bad.exit == 2);
  CHECK(bad.out.find("help: unknown command 'chek' (did you mean check?)") != std::string::npos);
  // One command at most (it ignored the rest, exit 0).
  auto two = sh("help check schema");
  CHECK(two.exit == 2);
  CHECK(two.out.find("help: unrecognized arguments: schema (`megatron-run help check` shows one command's usage)") !=
        std::string::npos);
  auto typo = sh("chek " + kDefault);
  CHECK(typo.exit == 2);
  CHECK(typo.out.find("unknown command 'chek' (did you mean check?)") != std::string::npos);
  CHECK(sh("topolgy --world-size 1 --config " + kDefault).out.find("did you mean topology?") != std::string::npos);
  // A near miss that is a program on PATH is that program (the launcher's PATH search decides); a file of that
  // name that may not be executed is no program.
  const std::string dir = (mrtest::scratch_dir("cli") / "on-path").string();
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/chek") << "#!/bin/sh\n";
  std::filesystem::permissions(dir + "/chek", std::filesystem::perms::owner_all);
  const std::string with_path = "PATH='" + dir + "':\"$PATH\" '" + MR_BINARY + "' chek 2>&1";
  auto on_path = mrtest::run_shell(with_path);
  CHECK(on_path.out.find("unknown command") == std::string::npos);
  std::filesystem::permissions(dir + "/chek", std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  auto not_exec = mrtest::run_shell(with_path);
  CHECK(not_exec.exit == 2);
  CHECK(not_exec.out.find("did you mean check?") != std::string::npos);
  CHECK(sh("--version").out.find("megatron-run") != std::string::npos);
  // --version: the first line as scripts read it, then the build (review ops37, finding 10).
  auto version = sh("--version");
  CHECK(version.exit == 0);
  const std::string first = version.out.substr(0, version.out.find('\n'));
  CHECK(first.rfind("megatron-run ", 0) == 0);
  CHECK(first.find(' ', 13) == std::string::npos);  // `megatron-run X.Y.Z`, nothing after
  CHECK(version.out.find("\ncommit: ") != std::string::npos);
  CHECK(version.out.find("\nbuild: ") != std::string::npos);
  CHECK(version.out.find("\nworker: ") != std::string::npos);
  // `megatron-run version` (helm's, kubectl's spelling) is no script: the refusal points at --version.
  auto word = sh("version");
  CHECK(word.exit == 2);
  CHECK(word.out.find("unknown command 'version' (its version and build: megatron-run --version)") !=
        std::string::npos);
  CHECK(none.err.find("--version") != std::string::npos);  // the usage (on stderr: nothing was asked)
  // check --quiet: nothing at all for valid files.
  auto quiet = sh("check --quiet " + kDefault);
  CHECK(quiet.exit == 0);
  CHECK(quiet.out.empty());
  // A program's own -h is the program's: megatron-run only validates and passes it on.
  auto prog = sh("--dry-run --format argv --num-layers 2 -- prog -h");
  CHECK(prog.exit == 0);
  CHECK(prog.out == "prog -h --num-layers 2\n");
}

TEST_CASE("init stage: a layout Megatron's initialize_model_parallel refuses fails the dry run and check",
          "[cli][init]") {
  const std::string f = std::string(MR_DATA_DIR) +
                        "/corpus/functional-tests/mixtral__mixtral_8x7b_alltoall_tp2pp4ep4_release.yaml";
  auto dry = sh("--dry-run --world-size 8 --env-placeholder /p --config " + f);
  CHECK(dry.exit == 1);
  CHECK(dry.out.find("error[init.process-groups]: Megatron would fail at initialisation") != std::string::npos);
  CHECK(dry.out.find("expert TP x EP x PP = 32") != std::string::npos);
  auto ok = sh("--dry-run --world-size 32 --env-placeholder /p --config " + f);
  CHECK(ok.exit == 0);
  auto json = sh("check --format json --world-size 8 --env-placeholder /p " + f + " 2>/dev/null");
  CHECK(json.exit == 1);
  CHECK(json.out.find("\"init.process-groups\"") != std::string::npos);
  CHECK(json.out.find("\"stage\": \"init\"") != std::string::npos);
}

namespace {
// A launch of our worker refused by `rule` before any worker starts (no bring-up line): the text names the rule and
// says `says`; --format json gives the rule as an error of the init stage.
void refused_before_start(const std::string& flags, const std::string& rule, const std::string& says) {
  auto run = sh(flags);
  INFO(run.out);
  CHECK(run.exit == 1);
  CHECK(run.out.find("error[" + rule + "]: " + says) != std::string::npos);
  CHECK(run.out.find("bring-up") == std::string::npos);
  auto json = sh("--format json " + flags + " 2>/dev/null");
  CHECK(json.exit == 1);
  CHECK(json.out.find("\"rule\": \"" + rule + "\", \"level\": \"error\", \"stage\": \"init\"") != std::string::npos);
}
}  // namespace

TEST_CASE("init stage: a schedule the training run's scheduler refuses stops our worker's job before it starts",
          "[cli][init]") {
  // configs/default.yaml warms up for 2 iterations; a 2-iteration run leaves no decay after it.
  const std::string bad = "--config " + kDefault + " --train-iters 2";
  refused_before_start(bad, "init.lr-schedule",
                       "the training run would fail when it builds its learning-rate scheduler: the warmup (16 "
                       "samples; --lr-warmup-iters");
  // The user's own program may not train (an inference server): a warning, and it runs.
  auto prog = sh(bad + " --no-python /bin/echo ran");
  CHECK(prog.exit == 0);
  CHECK(prog.out.find("warning[init.lr-schedule]: Megatron's training would fail") != std::string::npos);
  CHECK(prog.out.find("ran --") != std::string::npos);
  // A dry run validates the config for any program: a warning; --bring-up-only stops before training.
  auto dry = sh("--dry-run " + bad);
  CHECK(dry.exit == 0);
  CHECK(dry.out.find("warning[init.lr-schedule]:") != std::string::npos);
  CHECK(sh("--bring-up-only --dry-run " + bad).exit == 0);
  CHECK(sh("--dry-run --config " + kDefault + " --train-iters 3").out.find("lr-schedule") == std::string::npos);
}

TEST_CASE("init stage: what megatron-run's own training run cannot run is refused before its workers start",
          "[cli][init]") {
  // The synthetic gradient's sample index has 26 bits: our worker refuses a larger global batch.
  const std::string big = "--config " + kDefault + " --global-batch-size 67108864";
  refused_before_start(big, "init.training-run",
                       "the training run's synthetic gradient handles global batch sizes below 2^26 (67108864)");
  // Megatron's own program runs it, and a dry run validates the config for any program: no refusal.
  CHECK(sh(big + " --no-python /bin/true").exit == 0);
  CHECK(sh("--dry-run " + big).exit == 0);
}

TEST_CASE("init stage: a global batch size that does not split into micro batches x DP is refused by check, a dry "
          "run and any launch", "[cli][init]") {
  // Three ranks: 8 is not a multiple of --micro-batch-size 2 x DP 3 (the eval batch size is given, so that
  // validate_args' own eval check passes). Megatron's calculator fails on every rank; nothing starts.
  const std::string flags = "--config " + kDefault + " --eval-global-batch-size 6";
  const std::string says = "Megatron would fail at initialisation (the number-of-microbatches calculator): the global "
                           "batch size 8 (--global-batch-size) is not divisible by --micro-batch-size 2 x "
                           "data-parallel size 3";
  auto dry = sh("--dry-run --world-size 3 " + flags);
  CHECK(dry.exit == 1);
  CHECK(dry.out.find("error[init.global-batch-size-divisible]: " + says) != std::string::npos);
  auto prog = sh("--nproc-per-node 3 " + flags + " --no-python /bin/echo program-ran");
  CHECK(prog.exit == 1);
  CHECK(prog.out.find("error[init.global-batch-size-divisible]: " + says) != std::string::npos);
  CHECK(prog.out.find("program-ran") == std::string::npos);
  refused_before_start("--nproc-per-node 3 " + flags, "init.global-batch-size-divisible", says);
  CHECK(sh("--dry-run --world-size 3 --config " + kDefault + " --global-batch-size 12").exit == 0);
}

TEST_CASE("a launch validates for this machine: no GPU here, the CUDA-only rules do not apply", "[cli][target]") {
  // A dry run checks the documented default target (sm_90), where TP needs CUDA_DEVICE_MAX_CONNECTIONS=1 ...
  auto dry = sh("--dry-run --config " + kDefault + " --tensor-model-parallel-size 2 --world-size 2");
  CHECK(dry.exit == 1);
  CHECK(dry.out.find("error[cuda-connections.max-connections-one]") != std::string::npos);
  // ... a launch on a machine without GPUs (hidden here) does not refuse it; --bring-up-only spawns nothing
  // torch-linked when the worker is missing, so only the validation verdict is looked at: it gets past it.
  auto run = mrtest::run_shell("env -u CUDA_DEVICE_MAX_CONNECTIONS CUDA_VISIBLE_DEVICES= MR_WORKER=/bin/false '" +
                               std::string(MR_BINARY) + "' --nproc-per-node 2 --config " + kDefault +
                               " --tensor-model-parallel-size 2 2>&1");
  CHECK(run.out.find("cuda-connections.max-connections-one") == std::string::npos);
  CHECK(run.out.find("exited with code 1") != std::string::npos);  // it started the workers (here /bin/false)
  // With the target named, the launch checks for it.
  auto named = mrtest::run_shell("env -u CUDA_DEVICE_MAX_CONNECTIONS MR_WORKER=/bin/false '" + std::string(MR_BINARY) +
                                 "' --target-gpu-arch sm_90 --nproc-per-node 2 --config " + kDefault +
                                 " --tensor-model-parallel-size 2 2>&1");
  CHECK(named.exit == 1);
  CHECK(named.out.find("error[cuda-connections.max-connections-one]") != std::string::npos);
}

TEST_CASE("rule dist.nccl-unavailable: the launcher refuses nccl for its own worker where it cannot run, once",
          "[cli][nccl-check]") {
  // A machine without any GPU (an empty root for the probe, util/gpu_devices.h): refused whether the build has
  // NCCL (then for the GPU) or not (for the build). MR_WORKER=/bin/false: a worker started would fail the job.
  const std::string root = mrtest::fake_root("no-gpu", {"dev/null"}, "cli-nccl");
  auto run = mrtest::run_shell("env -u CUDA_VISIBLE_DEVICES MR_DEVICE_ROOT='" + root + "' MR_WORKER=/bin/false '" +
                               std::string(MR_BINARY) + "' --nproc-per-node 2 --config " + kDefault +
                               " --distributed-backend nccl 2>&1");
  INFO(run.out);
  CHECK(run.exit == 1);
  const size_t at = run.out.find("megatron-run: error[dist.nccl-unavailable]: argument --distributed-backend nccl: "
                                 "megatron-run's worker cannot run it here: ");
  REQUIRE(at != std::string::npos);
  CHECK(run.out.find("; use --distributed-backend gloo (the CPU path)\n") != std::string::npos);
  CHECK(run.out.find("exited with code") == std::string::npos);  // no worker started
  CHECK(run.out.find("dist.nccl-unavailable", at + 30) == std::string::npos);  // said once
}

TEST_CASE("rules launch.input-missing, launch.output-unwritable, launch.load-empty: a program's files, before it starts",
          "[cli][program-inputs]") {
  // A program that says it ran; the files it would read by its flags are checked first, on this node, in a real
  // launch only (launch/program_inputs.h).
  const std::string dir = (mrtest::scratch_dir("cli") / "program-inputs").string();
  std::filesystem::create_directories(dir + "/data");
  std::ofstream(dir + "/data/a.bin") << "";
  std::ofstream(dir + "/data/a.idx") << "";
  std::ofstream(dir + "/prog.py") << "print('PROGRAM RAN')\n";
  std::ofstream(dir + "/data.yaml") << "--data-path: [0.5, data/a, 0.5, data/b]\n";
  const std::string run = "cd '" + dir + "' && PYTHON_EXEC=/usr/bin/python3 '" + std::string(MR_BINARY) +
                          "' --nproc-per-node 1 --num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 8 "
                          "--max-position-embeddings 8 --micro-batch-size 1 --train-iters 1 --lr 0.1 --split 1,0,0 "
                          "--tokenizer-type NullTokenizer --vocab-size 64 ";
  // The data's second prefix is not there: named with the config file's line, nothing started.
  mrtest::Proc missing = mrtest::run_shell(run + "--config data.yaml prog.py 2>&1");
  INFO(missing.out);
  CHECK(missing.exit == 1);
  CHECK(missing.out.find("megatron-run: data.yaml:1: error[launch.input-missing]: argument --data-path: 1 of its 2 dataset "
                         "prefixes cannot be read here: neither data/b.bin nor data/b.idx exists (Megatron's indexed "
                         "datasets read PREFIX.bin and PREFIX.idx") != std::string::npos);
  CHECK(missing.out.find("PROGRAM RAN") == std::string::npos);
  // --no-file-checks: a program that reads none of them (a converter given the training flags) starts.
  mrtest::Proc unchecked = mrtest::run_shell(run + "--config data.yaml --no-file-checks prog.py 2>&1");
  CHECK(unchecked.exit == 0);
  CHECK(unchecked.out.find("launch.input-missing") == std::string::npos);
  CHECK(unchecked.out.find("PROGRAM RAN") != std::string::npos);
  mrtest::Proc no_program = mrtest::run_shell(run + "--config data.yaml --no-file-checks 2>&1");
  CHECK(no_program.exit == 2);
  CHECK(no_program.out.find("error: --no-file-checks needs a program to run (megatron-run ... -- CMD ARGS, or SCRIPT ARGS)") !=
        std::string::npos);
  // A --save that cannot be made, after the program: refused.
  mrtest::Proc save = mrtest::run_shell(run + "prog.py --data-path data/a --save prog.py/ck --save-interval 1 2>&1");
  INFO(save.out);
  CHECK(save.exit == 1);
  CHECK(save.out.find("megatron-run: error[launch.output-unwritable]: argument --save prog.py/ck: cannot be made: " + dir +
                      "/prog.py is not a directory (the program writes its checkpoints there)") != std::string::npos);
  CHECK(save.out.find("PROGRAM RAN") == std::string::npos);
  // A --load with no checkpoint: said, and the program runs; the same in a dry run says nothing (the files are
  // where the job runs).
  mrtest::Proc load = mrtest::run_shell(run + "prog.py --data-path data/a --load nothing-here 2>&1");
  INFO(load.out);
  CHECK(load.exit == 0);
  CHECK(load.out.find("megatron-run: warning[launch.load-empty]: argument --load nothing-here: no such directory; the program "
                      "will find no checkpoint and start from random initialization") != std::string::npos);
  CHECK(load.out.find("PROGRAM RAN") != std::string::npos);
  // A --data-cache-path that cannot be written: a warning (Megatron writes there only when a cache is missing).
  mrtest::Proc cache = mrtest::run_shell(run + "prog.py --data-path data/a --data-cache-path prog.py 2>&1");
  INFO(cache.out);
  CHECK(cache.exit == 0);
  CHECK(cache.out.find("megatron-run: warning[launch.data-cache-unwritable]: argument --data-cache-path prog.py: it is "
                       "there and is not a directory") != std::string::npos);
  CHECK(cache.out.find("PROGRAM RAN") != std::string::npos);
  // A job that runs megatron-run on every rank (the program exec'd in place) without LOCAL_RANK (one rank a node,
  // mpirun-style): every rank says why it stops (review: today31 5).
  const std::string in_job = "cd '" + dir + "' && env -u LOCAL_RANK RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29555 '" +
                             std::string(MR_BINARY) + "' --num-layers 2 --hidden-size 64 --num-attention-heads 4 "
                             "--seq-length 8 --max-position-embeddings 8 --micro-batch-size 1 --train-iters 1 --lr 0.1 "
                             "--split 1,0,0 --tokenizer-type NullTokenizer --vocab-size 64 ";
  mrtest::Proc rank1 = mrtest::run_shell(in_job + "--no-python /bin/echo PROGRAM RAN --data-path data/gone 2>&1");
  INFO(rank1.out);
  CHECK(rank1.exit == 1);
  CHECK(rank1.out.find("error[launch.input-missing]: argument --data-path: neither data/gone.bin nor data/gone.idx "
                       "exists") != std::string::npos);
  CHECK(rank1.out.find("PROGRAM RAN") == std::string::npos);
  mrtest::Proc dry = mrtest::run_shell(run + "--dry-run prog.py --data-path data/gone --load nothing-here 2>&1");
  CHECK(dry.exit == 0);
  CHECK(dry.out.find("launch.") == std::string::npos);
}

TEST_CASE("output that cannot be written fails the command; running out of memory is an error, not exit 3",
          "[cli][robustness]") {
  const std::string bin = std::string("'") + MR_BINARY + "' ";
  // A full device: the JSON a CI step keeps would be empty, so the command fails.
  mrtest::Proc full = mrtest::run_shell(bin + "schema --format json 2>&1 >/dev/full");
  CHECK(full.exit == 1);
  CHECK(full.out == "megatron-run: error: cannot write the output: a write to stdout failed (a full disk or device?)\n");
  mrtest::Proc closed = mrtest::run_shell(bin + "rules 2>&1 >&-");
  CHECK(closed.exit == 1);
  CHECK(closed.out == "megatron-run: error: cannot write the output: stdout is closed\n");
  // A command that writes nothing to stdout is not affected.
  CHECK(mrtest::run_shell(bin + "--dry-run --config '" + MR_SOURCE_DIR + "/configs/default.yaml' --format json >/dev/null 2>&1").exit == 0);
  // A legal input too big for the address space given: an error naming the cause, exit 1. (Not in a sanitizer
  // build, MR_SANITIZED: ASan reserves terabytes of shadow address space and cannot start under ulimit -v.)
  if (std::getenv("MR_SANITIZED")) return;
  mrtest::Proc oom = mrtest::run_shell("ulimit -v 150000; " + bin + "topology --world-size 262144 --global-batch-size 262144 "
                       "--micro-batch-size 1 --config '" + MR_SOURCE_DIR + "/configs/default.yaml' --format json 2>&1 >/dev/null");
  CHECK(oom.exit == 1);
  CHECK(oom.out.find("megatron-run: error: out of memory: an allocation failed") != std::string::npos);
  CHECK(oom.out.find("internal error") == std::string::npos);
}

TEST_CASE("every command has its usage, its line in the general usage and its completion", "[cli][help]") {
  // The commands as the command table lists them (help's refusal names them all): its row (commands()
  // in apps/megatron-run/commands.cpp) must give each its usage, its line in the general usage and its completion,
  // which print_command_usage, print_usage and completion_spec() read from it (docs/contributing.md).
  auto bad = sh("help no-such-command");
  INFO("`megatron-run help no-such-command` printed:\n" << bad.out);
  REQUIRE(bad.exit == 2);
  const size_t from = bad.out.find("(commands: ");
  {
    INFO("no \"(commands: ...)\" list of the command table (apps/megatron-run/commands.cpp) in help's refusal");
    REQUIRE(from != std::string::npos);
  }
  std::vector<std::string> commands;
  std::stringstream list(bad.out.substr(from + 11, bad.out.find(')', from) - from - 11));
  for (std::string w; std::getline(list, w, ',');) commands.push_back(w.substr(w.find_first_not_of(' ')));
  REQUIRE(commands.size() >= 6);
  const std::string usage = sh("help").out, bash = sh("schema --format bash-completion").out;
  // The bash script's case of the command words, in any order: "      check|schema|...|help) cmd=...".
  const size_t words_end = bash.find(") cmd=\"${COMP_WORDS[1]}\"");
  {
    INFO("no line `WORD|WORD...) cmd=\"${COMP_WORDS[1]}\"` (the command words) in `schema --format bash-completion`'s"
         " script (lib/config/completion.cpp, bash_completion); its first lines:\n" << bash.substr(0, 600));
    REQUIRE(words_end != std::string::npos);
  }
  const size_t words_start = bash.find_first_not_of(' ', bash.rfind('\n', words_end) + 1);
  const std::string completion = "|" + bash.substr(words_start, words_end - words_start) + "|";
  INFO("the bash script's command words: " << completion);
  CHECK(completion.find("|help|") != std::string::npos);
  for (const std::string& cmd : commands) {
    INFO("command " << cmd);
    const auto own = sh(cmd + " --help");
    CHECK(own.exit == 0);
    CHECK(sh("help " + cmd).out == own.out);
    {
      INFO("no usage of its own: give its row a .usage (apps/megatron-run/commands.cpp)");
      CHECK(own.out.find("usage: megatron-run " + cmd) != std::string::npos);
    }
    {
      INFO("no line in the general usage: give its row a .synopsis (apps/megatron-run/commands.cpp)");
      CHECK(usage.find("  megatron-run " + cmd + " ") != std::string::npos);
    }
    {
      INFO("no shell completion: completion_spec() (apps/megatron-run/completion_spec.cpp) left its row out");
      CHECK(completion.find("|" + cmd + "|") != std::string::npos);
    }
  }
}

TEST_CASE("launcher options in torchrun's argparse spellings: -r3, prefixes, an ambiguous prefix", "[cli][spelling]") {
  const std::string dry = "--dry-run --config " + kDefault;
  // A unique prefix is the option: --nproc-p 2 makes a job of 2 ranks, which --world-size 3 contradicts.
  auto world = sh(dry + " --nproc-p 2 --world-size 3");
  CHECK(world.exit == 2);
  CHECK_THAT(world.out, Catch::Contains("argument --world-size: 3 is not the job's 2 ranks (--nnodes 1 x --nproc-per-node 2)"));
  CHECK_THAT(sh(dry + " --nproc-p=2 --nn=2 --world-size 3").out,
             Catch::Contains("3 is not the job's 4 ranks (--nnodes 2 x --nproc-per-node 2)"));
  CHECK_THAT(sh(dry + " --nnodes=2 --nproc_per_node=2 --world-size 3").out,  // whole names with '=' as before
             Catch::Contains("3 is not the job's 4 ranks (--nnodes 2 x --nproc-per-node 2)"));
  // A short option's attached value, -r3 and -r=3 as argparse reads them: the same as -r 3.
  CHECK(sh(dry + " -r3 -t=1").exit == 0);
  auto attached = sh(dry + " -r9");
  auto separate = sh(dry + " --redirects 9");
  CHECK(attached.exit == 2);
  CHECK(attached.out == separate.out);
  // Several option strings start with it: refused naming them (the two spellings of one option are two).
  auto nproc = sh(dry + " --nproc 2");
  CHECK(nproc.exit == 2);
  CHECK(nproc.out == "megatron-run: error: ambiguous option: --nproc could match --nproc-per-node, --nproc_per_node\n");
  auto log = sh(dry + " --log-l=x");  // torchrun's --log-line-prefix-template and megatron-run's --log-level
  CHECK(log.exit == 2);
  CHECK(log.out == "megatron-run: error: ambiguous option: --log-l=x could match --log-level, "
                   "--log-line-prefix-template\n");
  // Megatron's flags are never abbreviated (its parser has allow_abbrev=False) and a whole one is never ours:
  // --local-rank is Megatron's, though torchrun would read it as a prefix of --local-ranks-filter.
  auto megatron = sh(dry + " --num-lay 2");
  CHECK(megatron.exit == 2);
  CHECK_THAT(megatron.out, Catch::Contains("unrecognized arguments: --num-lay"));
  auto local_rank = sh(dry + " --local-rank 0 --format json");
  CHECK(local_rank.exit == 0);
  CHECK_THAT(local_rank.out, Catch::Contains("\"local_rank\": 0"));
  // --local_rank=0, Megatron's old spelling (torch.distributed.launch passes it): '_' and '-' are alike when looking
  // for the Megatron flag it may be, so it is refused naming --local-rank, not read as --local_ranks_filter=0 (as
  // torchrun 2.x reads it, hiding every other rank's output); in a launch too, before anything starts.
  const std::string underscored = "megatron-run: error: ambiguous option: --local_rank=0 could match "
                                  "--local_ranks_filter, --local-rank (--local_rank is Megatron's --local-rank spelt "
                                  "with '_', which Megatron's parser does not take; torchrun would read it as "
                                  "--local_ranks_filter: write the one you mean in full)\n";
  auto old_spelling = sh(dry + " --local_rank=0 --explain local_rank");
  CHECK(old_spelling.exit == 2);
  CHECK(old_spelling.out == underscored);
  auto launch = sh("--nproc-per-node 2 --local_rank=0 --config " + kDefault + " -- /bin/true");
  CHECK(launch.exit == 2);
  CHECK(launch.out == underscored);
  // After the program every word is the program's: no prefix is read there, an ambiguous one neither.
  CHECK(sh(dry + " train.py --nproc 2").exit == 0);
}

TEST_CASE("-m/--module is a switch, as torchrun's store_true: options may follow it, the first positional word is the "
          "module", "[cli][spelling]") {
  // The config after -m is read (it was taken for the module, and json.tool for its argument).
  auto argv = sh("--dry-run --format argv -m --config " + kDefault + " json.tool --sort-keys");
  CHECK(argv.exit == 0);
  CHECK_THAT(argv.out, Catch::StartsWith("python3 -u -m json.tool --sort-keys --num-layers 2 "));
  CHECK(sh("--dry-run --format argv --module --nproc-per-node 1 --config " + kDefault + " json.tool").out ==
        sh("--dry-run --format argv --config " + kDefault + " -m json.tool").out);
  CHECK(sh("--dry-run --format argv --config " + kDefault + " -m -- json.tool --sort-keys").out == argv.out);
  // No module: refused, as before; -m with --no-python after it: refused, as torchrun refuses it.
  auto none = sh("--dry-run --config " + kDefault + " -m");
  CHECK(none.exit == 2);
  CHECK(none.out == "megatron-run: error: argument -m/--module: expected a module name\n");
  auto no_python = sh("--dry-run -m --no-python --config " + kDefault + " json.tool");
  CHECK(no_python.exit == 2);
  CHECK_THAT(no_python.out, Catch::Contains("--no-python and -m/--module cannot be used together"));
}

TEST_CASE("torchrun's argparse parity: a switch's value, words past an unknown one, -tp, --format json's reach",
          "[cli][spelling]") {
  const std::string dry = "--dry-run --config " + kDefault;
  // A switch given a value, whatever its spelling: argparse's refusal, naming every option string (exit 2).
  for (const auto& [words, line] : std::vector<std::pair<std::string, std::string>>{
           {"--module=x train.py", "argument -m/--module: ignored explicit argument 'x'"},
           {"--modu=x train.py", "argument -m/--module: ignored explicit argument 'x'"},
           {"-m=x", "argument -m/--module: ignored explicit argument 'x'"},
           {"-mx train.py", "argument -m/--module: ignored explicit argument 'x'"},
           {"--no_python=1 /bin/true", "argument --no-python/--no_python: ignored explicit argument '1'"},
           {dry + " --standalone=yes", "argument --standalone: ignored explicit argument 'yes'"},
           {dry + " --dry-run=1", "argument --dry-run: ignored explicit argument '1'"},
           {dry + " --help=1", "argument -h/--help: ignored explicit argument '1'"},
           {"check --quiet= " + kDefault, "argument --quiet: ignored explicit argument ''"}}) {
    INFO(words);
    const auto r = sh(words);
    CHECK(r.exit == 2);
    CHECK(r.out == "megatron-run: error: " + line + "\n");
  }
  // Past an unknown word our abbreviations are still ours, as argparse reads them: only the unknown word is listed.
  const auto bogus = sh(dry + " --bogus --nproc-per 2");
  CHECK(bogus.exit == 2);
  CHECK_THAT(bogus.out, Catch::StartsWith("megatron-run: error: unrecognized arguments: --bogus\n") &&
                            !Catch::Contains("--nproc-per "));
  const auto missing = sh("--bogus --nproc-per --config " + kDefault + " train.py");
  CHECK(missing.exit == 2);
  CHECK(missing.out == "megatron-run: error: argument --nproc-per-node/--nproc_per_node: expected one argument\n");
  // -tp 2: torchrun's -t with the value 'p' to argparse; its refusal says which Megatron flag was meant.
  const auto tp = sh(dry + " -tp 2");
  CHECK(tp.exit == 2);
  CHECK_THAT(tp.out, Catch::StartsWith("megatron-run: error: argument -t/--tee: ") &&
                         Catch::EndsWith("\n  -tp: did you mean --tensor-model-parallel-size? Megatron's flags take "
                                         "two dashes (-t is torchrun's --tee)\n"));
  CHECK_THAT(sh(dry + " -recompute-granularity full").out,
             Catch::Contains("argument -r/--redirects: ") &&
                 Catch::Contains("-recompute-granularity: did you mean --recompute-granularity? Megatron's flags take "
                                 "two dashes (-r is torchrun's --redirects)"));
  CHECK_THAT(sh(dry + " -mp 2").out, Catch::StartsWith("megatron-run: error: argument -m/--module: ignored explicit "
                                                       "argument 'p'\n  -mp: did you mean"));
  CHECK_THAT(sh(dry + " -t3").out, !Catch::Contains("did you mean"));  // a valid -t3: nothing to say
  // --format json asks for a JSON failure only as the run command reads its own words: before the program.
  const mrtest::Proc program_own = mrtest::megatron_run("--nproc-per-node 0 train.py --format json");
  CHECK(program_own.exit == 2);
  CHECK(program_own.out.empty());
  CHECK_THAT(program_own.err, Catch::Contains("argument --nproc-per-node"));
  const mrtest::Proc ours = mrtest::megatron_run("--fo json --nproc-per-node 0 train.py");
  CHECK(ours.exit == 2);
  CHECK_THAT(ours.out, Catch::StartsWith("{\"ok\": false, \"exit\": 2"));
  // check's own options take prefixes too (review user40 #5): --fo is its --format.
  const mrtest::Proc check = mrtest::megatron_run("check --fo json " + kDefault);
  CHECK(check.exit == 0);
  CHECK_THAT(check.out, Catch::StartsWith("["));
  CHECK_THAT(check.err, !Catch::Contains("unrecognized arguments"));
  // ...and its usage says so (review check41 #2).
  CHECK_THAT(mrtest::megatron_run("help check").out,
             Catch::Contains("check's own options take an unambiguous prefix") && Catch::Contains("--fo json is --format json"));
  // ...so a usage error of check asks for its failure document as JSON in every spelling check takes for
  // --format json (review check41 #1: --fo json printed none), an ambiguous prefix of another option's refusal too;
  // the last --format wins, as it does in the parse; a file named like a command is a file (its words are check's).
  for (const std::string& words :
       std::vector<std::string>{"--fo json " + kDefault + " --bogus", "--form=json " + kDefault + " --bogus",
                                "--format=json --bogus " + kDefault, "--format json --bogus " + kDefault,
                                "--fo text --forma json --bogus " + kDefault, "--fo=json --target x " + kDefault,
                                "--fo json schema --bogus"}) {
    INFO(words);
    const mrtest::Proc c = mrtest::megatron_run("check " + words);
    CHECK(c.exit == 2);
    CHECK_THAT(c.out, Catch::StartsWith("{\"ok\": false, \"exit\": 2, \"diagnostics\": [") &&
                          Catch::EndsWith("]}\n"));
  }
  for (const std::string& words : std::vector<std::string>{"--format json --format text --bogus " + kDefault,
                                                           "--fo json --fo github --bogus " + kDefault}) {
    INFO(words);
    const mrtest::Proc c = mrtest::megatron_run("check " + words);
    CHECK(c.exit == 2);
    CHECK(c.out.empty());
  }
  // The run command's last --format wins too.
  const mrtest::Proc run_text = mrtest::megatron_run(dry + " --format json --fo text --bogus");
  CHECK(run_text.exit == 2);
  CHECK(run_text.out.empty());
}

TEST_CASE("check: the parser's refusals carry ids of their own; stderr keeps argparse's line (lint36 #3)", "[cli][check]") {
  // Each family: the id in check's line and JSON (stage "parse"), the message as argparse words it.
  struct Case {
    const char* name;
    std::string text;
    const char* id;
    const char* message;
  };
  for (const Case& c : std::vector<Case>{
           {"ua.yaml", "hidden_sizee: 4\n", "parse.unknown-argument", "unknown argument 'hidden_sizee'"},
           {"uci.yaml", "MODEL_ARGS:\n  --hidden-sizee: 4\n", "parse.unknown-argument",
            "unrecognized arguments: --hidden-sizee 4"},
           {"iv.yaml", "num_layers: abc\n", "parse.invalid-value", "argument num_layers: invalid int value: 'abc'"},
           {"ch.yaml", "--lr-decay-style: cosin\n", "parse.invalid-value", "argument --lr-decay-style: invalid choice"},
           {"mv.yaml", "MODEL_ARGS:\n  --num-layers: []\n", "parse.missing-value",
            "argument --num-layers: expected one argument"},
           {"ue.yaml", "data_path: ${MR_SURELY_UNSET_VARIABLE}/x\n", "parse.unset-env",
            "environment variable MR_SURELY_UNSET_VARIABLE is not set"},
           {"er.yaml", "data_path: ${MR_OPEN/x\n", "parse.env-reference", "unterminated ${"},
           {"ed.yaml", "data_path: ${MR_X:-c}/x\n", "parse.env-reference",
            "${MR_X:-c} in '${MR_X:-c}/x' is not a ${NAME} reference"},
           {"ma.yaml", "MODEL_ARGS: [1, 2]\n", "parse.config-not-mapping", "MODEL_ARGS must be a mapping"},
           {"li.yaml", "- 1\n- 2\n", "parse.config-not-mapping", "a config file must be a mapping"}}) {
    const std::string f = tmp_file(c.name, c.text);
    INFO(c.name);
    auto t = sh("check " + f);
    CHECK(t.exit == 2);
    CHECK(t.out.find(std::string("error[") + c.id + "]: " + c.message) != std::string::npos);
    CHECK(t.out.find("error[usage]") == std::string::npos);
    auto j = mrtest::megatron_run_stdout("check --format json " + f);
    CHECK(j.out.find(std::string("\"rule\": \"") + c.id + "\", \"level\": \"error\", \"stage\": \"parse\"") !=
          std::string::npos);
    // Elsewhere (a dry run, a launch) the line stays argparse's, as Megatron prints it; its JSON has the id.
    auto d = sh("--dry-run --config " + f);
    CHECK(d.exit == 2);
    CHECK(d.out.find("megatron-run: error: ") != std::string::npos);
    CHECK(d.out.find(c.message) != std::string::npos);
    CHECK(d.out.find(c.id) == std::string::npos);
    CHECK(mrtest::megatron_run_stdout("--dry-run --format json --config " + f).out.find(
              std::string("\"rule\": \"") + c.id + "\"") != std::string::npos);
  }
  // Megatron's flags on the command line: the same ids.
  CHECK_THAT(mrtest::megatron_run_stdout("--dry-run --format json --config " + kDefault + " --num-layerz 2").out,
             Catch::Contains("\"rule\": \"parse.unknown-argument\""));
  CHECK_THAT(mrtest::megatron_run_stdout("--dry-run --format json --config " + kDefault + " --num-layers").out,
             Catch::Contains("\"rule\": \"parse.missing-value\""));
  // What has no id of its own is "usage", which `rules` explains (it was an unknown rule id).
  auto u = mrtest::megatron_run_stdout("rules usage");
  CHECK(u.exit == 0);
  CHECK_THAT(u.out, Catch::Contains("usage") && Catch::Contains("no id of its own"));
  auto p = mrtest::megatron_run_stdout("rules parse.unknown-argument parse.invalid-value parse.missing-value "
                                       "parse.unset-env parse.env-reference parse.config-not-mapping");
  CHECK(p.exit == 0);
}

TEST_CASE("check --env-placeholder '': refused, not taken as the option left out (lint36 #7)", "[cli][check]") {
  const std::string f = tmp_file("ph.yaml", "data_path: ${MR_SURELY_UNSET_VARIABLE}/x\n");
  auto r = sh("check --env-placeholder '' " + f);
  CHECK(r.exit == 2);
  CHECK(r.out == "megatron-run: error: argument --env-placeholder: expected a directory, got '' "
                 "(an unset or empty variable in the command line?)\n");
  CHECK_THAT(mrtest::megatron_run_stdout("--dry-run --format json --env-placeholder '' --config " + f).out,
             Catch::Contains("\"rule\": \"parse.invalid-value\""));
  CHECK(sh("--dry-run --env-placeholder= --config " + f).exit == 2);
  CHECK(sh("check --env-placeholder /p " + f).out.find("is not set") == std::string::npos);
  CHECK(sh("check " + f).out.find("error[parse.unset-env]") != std::string::npos);
}

TEST_CASE("check --world-size read as Python's int(): out of range said so, every refusal input.world-size (lint36 #8)",
          "[cli][check]") {
  auto big = sh("check --world-size 99999999999999999999 " + kDefault);
  CHECK(big.exit == 2);
  CHECK(big.out == "megatron-run: error[input.world-size]: argument --world-size: int value out of range: "
                   "'99999999999999999999'\n");
  CHECK(sh("check --world-size 1.5 " + kDefault).out ==
        "megatron-run: error[input.world-size]: argument --world-size: invalid int value: '1.5'\n");
  CHECK(sh("check --world-size 0 " + kDefault).out ==
        "megatron-run: error[input.world-size]: argument --world-size: must be at least 1\n");
  // int(' 4'), int('+4'), int('1_0') are numbers to Python.
  CHECK(sh("check --world-size ' 1' " + kDefault).exit == 0);
  CHECK(sh("check --world-size +1 " + kDefault).exit == 0);
  auto ten = sh("check --world-size 1_0 " + kDefault);  // 10 ranks: a rule of the default config fails, no refusal
  CHECK(ten.exit == 1);
  CHECK(ten.out.find("batch-parallel size (10)") != std::string::npos);
}

TEST_CASE("check: init.process-groups is placed at the first flag it names that the file set (lint36 #6)",
          "[cli][check]") {
  const std::string f = tmp_file("pg.yaml", "MODEL_ARGS:\n  --num-layers: 4\n  --hidden-size: 64\n"
                                            "  --num-attention-heads: 4\n  --seq-length: 128\n"
                                            "  --max-position-embeddings: 128\n  --micro-batch-size: 1\n"
                                            "  --num-experts: 8\n  --expert-model-parallel-size: 8\n"
                                            "  --pipeline-model-parallel-size: 2\n");
  auto j = mrtest::megatron_run_stdout("check --format json --world-size 8 " + f);
  INFO(j.out);
  REQUIRE(j.out.find("\"rule\": \"init.process-groups\"") != std::string::npos);
  CHECK(j.out.find("\"where\": \"" + f + ":9\"") != std::string::npos);
  CHECK(j.out.find("\"--expert-model-parallel-size\"") != std::string::npos);
  auto g = sh("check --format github --world-size 8 " + f);
  CHECK(g.out.find("line=9,") != std::string::npos);
}

TEST_CASE("the target options refuse an empty value instead of validating for nothing installed (hostile37 #4)",
          "[cli][target]") {
  const std::string cfg = " --config " + std::string(MR_SOURCE_DIR) + "/configs/default.yaml";
  for (const char* flag : {"--target-te-version", "--target-torch-version", "--target-flashinfer-version"}) {
    auto r = sh("--dry-run " + std::string(flag) + " ''" + cfg);
    CHECK(r.exit == 2);
    CHECK(r.out == "megatron-run: error: argument " + std::string(flag) +
                       ": expected a version (e.g. 2.9.0) or none, got '' (an unset or empty variable in the command "
                       "line?)\n");
    CHECK(sh("--dry-run " + std::string(flag) + "=none" + cfg).exit == 0);  // none: said on purpose
  }
  CHECK(sh("--dry-run --target-gpu-arch ''" + cfg).out ==
        "megatron-run: error: argument --target-gpu-arch: expected sm_XY or none, got '' (an unset or empty variable "
        "in the command line?)\n");
  CHECK(sh("check --target-env= " + std::string(MR_SOURCE_DIR) + "/configs/default.yaml").exit == 2);
  CHECK_THAT(mrtest::megatron_run_stdout("--dry-run --format json --target-te-version ''" + cfg).out,
             Catch::Contains("\"rule\": \"parse.invalid-value\""));
  const std::string te = tmp_file("te-empty.yaml", "torch_version: \"\"\n");
  auto f = sh("--dry-run --target-env " + te + cfg);
  CHECK(f.exit == 2);
  CHECK_THAT(f.out, Catch::Contains(te + ":1: torch_version: expected a version (e.g. 2.9.0) or none, got ''"));
}

// Review diff37 #4: the commit is read at every build, not when cmake configured.
TEST_CASE("--version names the commit the binary was built from", "[cli][version]") {
  const std::string v = sh("--version").out;
  const size_t at = v.find("\ncommit: ");
  REQUIRE(at != std::string::npos);
  const std::string commit = v.substr(at + 9, v.find('\n', at + 1) - at - 9);
  FILE* p = popen(("git -C '" + std::string(MR_SOURCE_DIR) + "' rev-parse --short=12 HEAD 2>/dev/null").c_str(), "r");
  REQUIRE(p);
  char buf[64] = {0};
  const bool got = std::fgets(buf, sizeof buf, p) != nullptr;
  pclose(p);
  if (!got) {
    CHECK(commit == "unknown");  // a source tree outside git
    return;
  }
  std::string head(buf);
  while (!head.empty() && (head.back() == '\n' || head.back() == '\r')) head.pop_back();
  INFO("rebuild megatron-run after a commit: the test compares it with HEAD");
  CHECK((commit == head || commit == head + "-dirty"));
}

TEST_CASE("config commands in a torchrun job given another --world-size: checked for it, warned (check41 #3)",
          "[cli][world-size-job]") {
  // A torchrun job of 2 ranks, whose WORLD_SIZE these commands would otherwise check for.
  const std::string job = "env -u LOCAL_RANK -u LOCAL_WORLD_SIZE -u SLURM_PROCID -u SLURM_NTASKS -u SLURM_STEP_ID "
                          "RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=1";
  const std::string warning = "warning[launch.world-size-not-job]: --world-size 4 is not the enclosing job's 2 ranks "
                              "(WORLD_SIZE=2: rank 0 of 2";
  const std::string config = " --config " + kDefault;
  for (const std::string& cmd : {"check --world-size 4 " + kDefault, "topology --world-size 4" + config,
                                 "params --world-size 4" + config, "schedule --world-size 4" + config,
                                 "topology --format json --world-size 4" + config}) {
    INFO(cmd);
    const mrtest::Proc r = mrtest::megatron_run(cmd, job);
    CHECK(r.exit == 0);
    CHECK_THAT(r.err, Catch::Contains("megatron-run: command line: " + warning) &&
                          Catch::Contains("checked for --world-size 4, as given; a launch or --dry-run joining this "
                                          "job refuses it"));
  }
  // Checked for 4, as given (not for the job's 2).
  CHECK_THAT(mrtest::megatron_run("topology --world-size 4" + config, job).out, Catch::StartsWith("world size 4, "));
  // check --format json: stderr stays empty; the warning is among each file's diagnostics, which stay ok.
  const mrtest::Proc json = mrtest::megatron_run("check --format json --world-size 4 " + kDefault + " " + kDefault, job);
  CHECK(json.exit == 0);
  CHECK(json.err.empty());
  CHECK_THAT(json.out, Catch::Contains("\"ok\": true") &&
                           Catch::Contains("{\"rule\": \"launch.world-size-not-job\", \"level\": \"warning\", \"stage\": "
                                           "\"launch\", \"message\": \"--world-size 4 is not the enclosing job's 2 ranks") &&
                           Catch::Contains("\"flags\": [\"--world-size\"], \"where\": \"command line\"}"));
  // --format github and junit carry it where a CI reads them, each file's annotation / testcase output, not stderr
  // (review diff41 #2).
  const mrtest::Proc github = mrtest::megatron_run("check --format github --world-size 4 " + kDefault, job);
  CHECK(github.exit == 0);
  CHECK_THAT(github.err, !Catch::Contains("world-size-not-job"));
  CHECK_THAT(github.out, Catch::Contains("::warning file=" + kDefault + ",title=launch.world-size-not-job::"));
  const mrtest::Proc junit = mrtest::megatron_run("check --format junit --world-size 4 " + kDefault, job);
  CHECK(junit.exit == 0);
  CHECK_THAT(junit.err, !Catch::Contains("world-size-not-job"));
  CHECK_THAT(junit.out, Catch::Contains("<system-out>") && Catch::Contains("warning[launch.world-size-not-job]"));
  // --quiet hides it, as every warning of check's; the job's own size, no --world-size, no job: nothing to say.
  CHECK(mrtest::megatron_run("check --quiet --world-size 4 " + kDefault, job).err.empty());
  for (const std::string& quiet : {"topology --world-size 2" + config, "topology" + config})
    CHECK_THAT(mrtest::megatron_run(quiet, job).err, !Catch::Contains("world-size-not-job"));
  CHECK_THAT(mrtest::megatron_run("topology --world-size 4" + config, "env -u RANK WORLD_SIZE=2").err,
             !Catch::Contains("world-size-not-job"));
  // A SLURM task's SLURM_NTASKS is none these commands read: --world-size is how they get one there (a CI lint
  // under srun), nothing it overrides.
  CHECK_THAT(mrtest::megatron_run("topology --world-size 4" + config,
                                  "env -u RANK -u WORLD_SIZE SLURM_PROCID=0 SLURM_NTASKS=2 SLURM_STEP_ID=0 "
                                  "SLURM_NODELIST=n1")
                 .err,
             !Catch::Contains("world-size-not-job"));
  // Every rank of the job lints alike: a rank at or past the given size is checked as rank 0 of the other job (it
  // failed sanity.rank-in-world on ranks 4..7 of 8 given --world-size 4: review diff41 #1).
  const std::string rank5 = "env -u LOCAL_RANK -u LOCAL_WORLD_SIZE -u SLURM_PROCID -u SLURM_NTASKS -u SLURM_STEP_ID "
                            "RANK=5 WORLD_SIZE=8 MASTER_ADDR=127.0.0.1 MASTER_PORT=1";
  for (const std::string& cmd : {"check --world-size 4 " + kDefault, "topology --world-size 4" + config,
                                 "params --world-size 4" + config, "schedule --world-size 4" + config}) {
    INFO(cmd);
    const mrtest::Proc r = mrtest::megatron_run(cmd, rank5);
    CHECK(r.exit == 0);
    CHECK_THAT(r.out + r.err, Catch::Contains("world-size-not-job") && !Catch::Contains("rank-in-world"));
  }
  // The dry run joining the job refuses it (exit 2), as the launch does.
  const mrtest::Proc dry = mrtest::megatron_run("--dry-run --world-size 4" + config, job);
  CHECK(dry.exit == 2);
  CHECK_THAT(dry.err, Catch::Contains("argument --world-size: 4 is not the job's 2 ranks (WORLD_SIZE=2"));
}
