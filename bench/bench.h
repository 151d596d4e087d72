// The benchmark runner's interface: every benchmark reports a figure beside a baseline measured in the same
// run, so machine noise cancels in the ratio.
#pragma once

#include <chrono>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace mr::bench {

struct Result {
  std::string name;           // "cli.dry_run"
  double value = 0;           // the measured figure
  std::string unit;           // "ms", "GB/s", ...
  std::string baseline;       // what it is compared with, e.g. "trivial process"
  double baseline_value = 0;  // the baseline's figure, same unit, same run
  double ratio = 0;           // as the benchmark defines it (documented in docs/performance.md)
};

struct Options {
  bool quick = false;         // keep the full run under a minute
  std::string bin_dir;        // where megatron-run and the helper binaries are
  std::string source_dir;     // the repository (configs/, ../shared)
};

using Fn = std::function<Result(const Options&)>;

// Thrown by a benchmark that cannot run here (no GPU, or its baseline is missing): reported as skipped, with the
// message, and not as a failure, unless the benchmark was asked for by its whole name.
struct Skipped : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Registers a benchmark at static-initialisation time.
struct Register {
  Register(const char* name, Fn fn);
};
std::vector<std::pair<std::string, Fn>>& registry();

// Seconds taken by f(), best (minimum) of `reps` runs after one warm-up.
double best_of(int reps, const std::function<void()>& f);
// Runs `argv` (stdout/stderr to /dev/null) in `cwd` ("" here) and waits; throws unless it exits with a code
// <= max_exit. Returns the exit code and the child's peak resident set (wait4's rusage of that child alone).
struct ChildRun {
  int exit_code = 0;
  long max_rss_kib = 0;
};
ChildRun run_child(const std::vector<std::string>& argv, const std::string& cwd = "", int max_exit = 0);
// Mean wall seconds of running `argv` (stdout/stderr to /dev/null) `n` times; throws if it fails.
double process_seconds(const std::vector<std::string>& argv, int n);

}  // namespace mr::bench

#define MR_BENCH_CAT2(a, b) a##b
#define MR_BENCH_CAT(a, b) MR_BENCH_CAT2(a, b)
#define MR_BENCHMARK(name, ...) static ::mr::bench::Register MR_BENCH_CAT(mr_bench_reg_, __LINE__){name, __VA_ARGS__}
