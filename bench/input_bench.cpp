// input.*: megatron-run on very large inputs (issue 9): each figure against a baseline measured in the same run
// on an input of the same size that never had a cost problem, so the ratio shows the cost is linear.
//
//   input.config_100k_keys   a config file of 100k distinct keys vs a file of 100k sequence items (same lines)
//   input.cli_100k_args      100k command-line words vs the same 100k words in a config file
//   input.check_memory       peak RSS of `check` over 100x the corpus vs one pass over it (10x with --quick)
//   input.pattern_worst      the worst layer patterns under the limits vs building the same values directly

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "bench.h"
#include "config/converters.h"

namespace mr::bench {
namespace {

namespace fs = std::filesystem;

// A scratch folder removed at the end of the benchmark.
struct Scratch {
  fs::path dir;
  Scratch() {
    std::string t = (fs::temp_directory_path() / "mr-input-bench.XXXXXX").string();
    if (!mkdtemp(t.data())) throw std::runtime_error("cannot make a temporary folder");
    dir = t;
  }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  std::string write(const std::string& name, const std::string& text) const {
    fs::path p = dir / name;
    std::ofstream(p, std::ios::binary) << text;
    return p.string();
  }
};

// `line` through /bin/sh with its exit status ignored (the 100k-key file is refused, as it should be).
std::vector<std::string> shell(const std::string& line) { return {"/bin/sh", "-c", line + " >/dev/null 2>&1; exit 0"}; }

Result ratio_result(double t, double base, const std::string& baseline) {
  Result r;
  r.value = t * 1e3;
  r.unit = "ms";
  r.baseline = baseline;
  r.baseline_value = base * 1e3;
  r.ratio = base / t;  // 1.0 = as cheap as the baseline
  r.target = ratio_at_least(0.2);  // linear
  return r;
}

MR_BENCHMARK("input.config_100k_keys", [](const Options& o) {
  const int n = 100000;
  Scratch s;
  std::string keys, items = "--data-path:\n";
  for (int i = 0; i < n; ++i) {
    // Unknown keys as long as real flags: a "did you mean" search for each would cost a pass over every flag.
    keys += "--unknown-setting-of-the-model-" + std::to_string(i) + ": " + std::to_string(i) + "\n";
    items += "- p" + std::to_string(i) + "\n";
  }
  std::string kf = s.write("keys.yaml", keys), lf = s.write("items.yaml", items);
  const std::string bin = "'" + o.bin_dir + "/megatron-run' --dry-run --parse-only --config ";
  int reps = o.quick ? 2 : 5;
  double base = process_seconds(shell(bin + "'" + lf + "'"), reps);
  double t = process_seconds(shell(bin + "'" + kf + "'"), reps);
  return ratio_result(t, base, "100k-item sequence file");
});

MR_BENCHMARK("input.cli_100k_args", [](const Options& o) {
  const int n = 100000;
  Scratch s;
  std::vector<std::string> cli = {o.bin_dir + "/megatron-run", "--dry-run", "--parse-only", "--data-path"};
  std::string items = "--data-path:\n";
  for (int i = 0; i < n; ++i) {
    cli.push_back("w" + std::to_string(i));
    items += "- w" + std::to_string(i) + "\n";
  }
  std::string f = s.write("words.yaml", items);
  int reps = o.quick ? 3 : 10;
  double base = process_seconds({o.bin_dir + "/megatron-run", "--dry-run", "--parse-only", "--config", f}, reps);
  double t = process_seconds(cli, reps);
  return ratio_result(t, base, "the same words in a config file");
});

// The layer-pattern language at its limits: patterns of about a million values built by repetition, by 24k
// appends (lib/config/converters.h). The claim is linear cost: the baseline is the same patterns at a tenth of
// the size, its time times ten, so the ratio is near 1 when the cost grows with the size (quadratic would give
// about 0.1). A pattern past the evaluation budget is checked to be refused, outside the timings.
MR_BENCHMARK("input.pattern_worst", [](const Options& o) {
  auto repeat = [](const std::string& s, int n) {
    std::string out;
    for (int i = 0; i < n; ++i) out += s;
    return out;
  };
  auto patterns = [&](int tenth) {  // tenth = 10: a tenth of each
    return std::vector<std::string>{"[1]*" + std::to_string(999999 / tenth), "[[1]*1000]*" + std::to_string(999 / tenth),
                                    "[1]*" + std::to_string(500000 / tenth) + repeat("+[1]", 24000 / tenth),
                                    "[1]*" + std::to_string(999990 / tenth) + repeat("+[]", 30000 / tenth)};
  };
  const std::vector<std::string> full = patterns(1), small = patterns(10);
  try {
    mr::eval_pattern("[1]*999990" + repeat("*1", 30000));
    throw std::runtime_error("input.pattern_worst: a pattern past the budget was accepted");
  } catch (const mr::ConvError&) {
  }
  auto eval_all = [](const std::vector<std::string>& ps) {
    size_t values = 0;
    for (const std::string& p : ps) values += mr::eval_pattern(p).as_list().size();
    return values;
  };
  if (eval_all(full) != 999999 + 999 + 524000 + 999990 || eval_all(small) != 99999 + 99 + 52400 + 99999)
    throw std::runtime_error("input.pattern_worst: wrong result size");
  const int reps = o.quick ? 2 : 5;
  const double t = best_of(reps, [&] { (void)eval_all(full); });
  const double base = 10 * best_of(reps * 3, [&] { (void)eval_all(small); });
  Result r = ratio_result(t, base, "the same patterns at a tenth of the size, times 10");
  r.target = ratio_at_least(0.3);  // linear: about 1 (0.4-0.65 on a loaded 2-core machine); quadratic: about 0.1
  return r;
});

// Peak resident set (KiB) of `argv` run in `cwd`, measured by mr-peak-rss (bench/peak_rss.cpp says why not
// here); check exits 1 when a file fails a rule and 2 when one is a usage error (the corpus has both), so both
// count as success.
long peak_rss_kib(const Options& o, const std::vector<std::string>& argv, const std::string& cwd) {
  Scratch s;
  const std::string out = (s.dir / "rss").string();
  std::vector<std::string> cmd = {o.bin_dir + "/mr-peak-rss", out};
  cmd.insert(cmd.end(), argv.begin(), argv.end());
  run_child(cmd, cwd, /*max_exit=*/2);
  std::ifstream in(out);
  long kib = -1;
  if (!(in >> kib) || kib <= 0) throw std::runtime_error("mr-peak-rss wrote no figure for " + argv[0]);
  return kib;
}

MR_BENCHMARK("input.check_memory", [](const Options& o) {
  const std::string dir = o.source_dir + "/tests/data/corpus/functional-tests";
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".yaml") files.push_back(e.path().filename().string());  // relative: short argv
  std::sort(files.begin(), files.end());
  std::vector<std::string> cmd = {o.bin_dir + "/megatron-run", "check", "--world-size", "8", "--env-placeholder",
                                  "/placeholder", "--format", "json"};
  auto times = [&](int k) {
    std::vector<std::string> c = cmd;
    for (int i = 0; i < k; ++i) c.insert(c.end(), files.begin(), files.end());
    return c;
  };
  const int k = o.quick ? 10 : 100;
  long one = peak_rss_kib(o, times(1), dir);
  long many = peak_rss_kib(o, times(k), dir);
  Result r;
  r.value = static_cast<double>(many) / 1024.0;
  r.unit = "MiB";
  r.baseline = "one corpus pass (167 files)";
  r.baseline_value = static_cast<double>(one) / 1024.0;
  r.ratio = static_cast<double>(many) / static_cast<double>(one);  // goal: within 2 for 100x the files
  r.higher_is_better = false;
  r.target = ratio_at_most(2);
  return r;
});

}  // namespace
}  // namespace mr::bench
