// launch.*: megatron-run as a launcher against a real torchrun (TORCHRUN=/path/to/torchrun, PyTorch 2.x), both
// measured in the same run. Without TORCHRUN (Debian's torchrun does not start under Python 3.11) they are
// skipped with a message.
#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench.h"

namespace mr::bench {
namespace {

std::string torchrun() {
  const char* t = std::getenv("TORCHRUN");
  if (!t || !*t)
    throw Skipped("TORCHRUN is not set: no torchrun to compare with (a PyPI torch 2.x: TORCHRUN=venv/bin/torchrun)");
  return t;
}

// Wall seconds of the best of `reps` runs of `argv` (one warm-up first), which must exit with a code <= max_exit
// (and, when `must_fail`, above 0).
double best_wall(const std::vector<std::string>& argv, int reps, int max_exit = 0, bool must_fail = false) {
  return best_of(reps, [&] {
    ChildRun r = run_child(argv, "", max_exit);
    if (must_fail && r.exit_code == 0) throw std::runtime_error(argv[0] + " was expected to fail");
  });
}

Result ratio_result(double ours, double theirs, const char* baseline, double goal) {
  Result r;
  r.value = ours * 1e3;
  r.unit = "ms";
  r.baseline = baseline;
  r.baseline_value = theirs * 1e3;
  r.ratio = theirs / ours;  // how many times faster megatron-run is
  r.target = ratio_at_least(goal);  // the docs' "goal" column
  return r;
}

// 8 workers running `true`: from the launcher's start to its exit. megatron-run also validates the config
// (configs/default.yaml; its global batch of 8 needs --micro-batch-size 1 at world size 8).
MR_BENCHMARK("launch.overhead", [](const Options& o) {
  const std::string tr = torchrun();
  const double ours = best_wall({o.bin_dir + "/megatron-run", "--nproc-per-node", "8", "--config",
                                 o.source_dir + "/configs/default.yaml", "--micro-batch-size", "1", "--no-append-args", "--no-python", "/bin/true"},
                                o.quick ? 3 : 10);
  const double theirs = best_wall({tr, "--nproc-per-node", "8", "--no-python", "/bin/true"}, o.quick ? 1 : 3);
  return ratio_result(ours, theirs, "torchrun, same 8 workers", 20);
});

// A config error (--num-layers four) with 8 ranks: the time until the launcher exits with it. megatron-run
// refuses it before starting anything; under torchrun, 8 Python ranks each build Megatron's argparse parser
// (tests/launch/programs/megatron_client.py, the whole parser) and fail in parse_args.
MR_BENCHMARK("launch.fail_fast", [](const Options& o) {
  const std::string tr = torchrun();
  const std::string client = o.source_dir + "/tests/launch/programs/megatron_client.py";
  const std::string schema = o.source_dir + "/tests/data/spec/reference-schema.json";
  const double ours = best_wall({o.bin_dir + "/megatron-run", "--nproc-per-node", "8", "--config",
                                 o.source_dir + "/configs/default.yaml", "--micro-batch-size", "1", "--num-layers", "four", "--no-python",
                                 "/usr/bin/python3", client, schema, "-", "-"},
                                o.quick ? 5 : 20, 255, true);
  const double theirs = best_wall({tr, "--nproc-per-node", "8", "--no-python", "/usr/bin/python3", client, schema, "-",
                                   "-", "--num-layers", "four"},
                                  o.quick ? 1 : 3, 255, true);
  return ratio_result(ours, theirs, "torchrun + argparse client", 100);
});

}  // namespace
}  // namespace mr::bench
