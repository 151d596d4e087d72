// The benchmark runner's interface: every benchmark reports a figure beside a baseline measured in the same
// run (machine noise cancels in the ratio as far as both sides suffer it alike; docs/performance.md says where
// not), and the target the docs state for it, which the runner checks.
#pragma once

#include <chrono>
#include <functional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "config/args.h"
#include "config/optimizer_config_from_args.h"

namespace mr::bench {

// A target stated in docs/performance.md (its "target" column), on the ratio or on the value itself:
// `of` op bound, e.g. ratio >= 0.9 or value <= 5 (ms). Of::none: the docs state none (figure only reported).
struct Target {
  enum class Of { none, ratio, value };
  Of of = Of::none;
  std::string op;  // ">=", ">", "<=" or "<"
  double bound = 0;
};
inline Target ratio_at_least(double b) { return {Target::Of::ratio, ">=", b}; }
inline Target ratio_above(double b) { return {Target::Of::ratio, ">", b}; }
inline Target ratio_at_most(double b) { return {Target::Of::ratio, "<=", b}; }
inline Target value_at_most(double b) { return {Target::Of::value, "<=", b}; }
inline Target value_below(double b) { return {Target::Of::value, "<", b}; }

struct Result {
  std::string name;           // "cli.dry_run"
  double value = 0;           // the measured figure
  std::string unit;           // "ms", "GB/s", ...
  std::string baseline;       // what it is compared with, e.g. "trivial process"
  double baseline_value = 0;  // the baseline's figure, same unit, same run
  double ratio = 0;           // as the benchmark defines it (documented in docs/performance.md)
  bool higher_is_better = true;  // the ratio's direction: false where it is ours / baseline (memory, time shares)
  Target target;              // the stated target, checked by the runner; none where the docs state none
};

inline Result with_target(Result r, Target t) {
  r.target = std::move(t);
  return r;
}

struct Options {
  bool quick = false;         // short runs (sizes and repetitions cut; see docs/contributing.md for the time)
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
// Runs `argv` (stdout to /dev/null, stderr kept for the message) in `cwd` ("" here) and waits; throws unless it
// exits with a code <= max_exit, saying the exit code or the signal and the last lines of the child's stderr. Returns the exit code and the child's peak resident set (wait4's rusage of that child alone).
struct ChildRun {
  int exit_code = 0;
  long max_rss_kib = 0;
};
ChildRun run_child(const std::vector<std::string>& argv, const std::string& cwd = "", int max_exit = 0);
// Mean wall seconds of running `argv` (stdout to /dev/null, stderr kept as for run_child) `n` times; throws if it fails.
double process_seconds(const std::vector<std::string>& argv, int n);

// Megatron's OptimizerConfig at every flag's default (the schema's: Args() is every default). A benchmark builds its
// kernel options from it (optim/config.h: adam_options, muon_options, ...), so it measures the step Megatron's
// defaults give, not an option struct's own default.
inline const OptimizerConfig& megatron_optimizer_defaults() {
  static const OptimizerConfig c = optimizer_config_from(Args());
  return c;
}

}  // namespace mr::bench

#define MR_BENCH_CAT2(a, b) a##b
#define MR_BENCH_CAT(a, b) MR_BENCH_CAT2(a, b)
#define MR_BENCHMARK(name, ...) static ::mr::bench::Register MR_BENCH_CAT(mr_bench_reg_, __LINE__){name, __VA_ARGS__}
