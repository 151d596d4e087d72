// build/bin/megatron-run-bench [--quick] [--json] [NAME...]: runs benchmarks and prints each figure.
#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/program_options.hpp>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <stdexcept>

#include "bench.h"
#include "config/value.h"
#include "util/text.h"

extern char** environ;

namespace mr::bench {

std::vector<std::pair<std::string, Fn>>& registry() {
  static std::vector<std::pair<std::string, Fn>> r;
  return r;
}

Register::Register(const char* name, Fn fn) { registry().emplace_back(name, std::move(fn)); }

double best_of(int reps, const std::function<void()>& f) {
  f();
  double best = 1e300;
  for (int i = 0; i < reps; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::min(best, s);
  }
  return best;
}

ChildRun run_child(const std::vector<std::string>& argv, const std::string& cwd, int max_exit) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  if (!cwd.empty()) posix_spawn_file_actions_addchdir_np(&fa, cwd.c_str());
  pid_t pid;
  int rc = posix_spawn(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) throw std::runtime_error("cannot start " + argv[0]);
  int status = 0;
  struct rusage ru {};
  if (wait4(pid, &status, 0, &ru) < 0) throw std::runtime_error("wait4 failed");
  if (!WIFEXITED(status) || WEXITSTATUS(status) > max_exit)
    throw std::runtime_error(argv[0] + " failed (status " + std::to_string(status) + ")");
  return ChildRun{WEXITSTATUS(status), ru.ru_maxrss};
}

double process_seconds(const std::vector<std::string>& argv, int n) {
  run_child(argv);  // warm the page cache
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) run_child(argv);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return s / n;
}

// While alive (and `on`), file descriptor 1 is a copy of descriptor 2: output to stdout lands on stderr.
class StdoutToStderr {
 public:
  explicit StdoutToStderr(bool on) {
    if (!on) return;
    std::cout.flush();
    std::fflush(stdout);
    saved_ = ::dup(1);
    if (saved_ >= 0) ::dup2(2, 1);
  }
  StdoutToStderr(const StdoutToStderr&) = delete;
  StdoutToStderr& operator=(const StdoutToStderr&) = delete;
  ~StdoutToStderr() { restore(); }
  void restore() {
    if (saved_ < 0) return;
    std::cout.flush();
    std::fflush(stdout);
    ::dup2(saved_, 1);
    ::close(saved_);
    saved_ = -1;
  }

 private:
  int saved_ = -1;
};

}  // namespace mr::bench

int main(int argc, char** argv) {
  namespace po = boost::program_options;
  using namespace mr::bench;
  bool quick = false, json = false, list = false, help = false;
  std::vector<std::string> names;
  po::options_description desc("megatron-run-bench [--quick] [--json] [--list] [NAME...]");
  desc.add_options()("help,h", po::bool_switch(&help), "this text")("quick", po::bool_switch(&quick), "short runs (whole suite under a minute)")(
      "json", po::bool_switch(&json), "one JSON list of results")("list", po::bool_switch(&list), "list benchmarks")(
      "names", po::value(&names), "benchmarks to run (exact names or prefixes such as cpu.)");
  po::positional_options_description pos;
  pos.add("names", -1);
  po::variables_map vm;
  // With --json, stdout is exactly one JSON document whatever happens: the results, or {"error": ...}.
  bool json_requested = false;
  for (int i = 1; i < argc; ++i) json_requested = json_requested || std::string(argv[i]) == "--json";
  auto usage_error = [&](const std::string& message) {
    std::cerr << "megatron-run-bench: " << mr::printable(message) << "\n";
    if (json_requested) std::cout << "{\"error\": " << mr::json_quote(message) << "}\n";
    return 2;
  };
  try {
    po::store(po::command_line_parser(argc, argv).options(desc).positional(pos).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << desc;
    return usage_error(e.what());
  }
  if (help) {
    std::cout << desc;
    return 0;
  }
  if (list) {
    if (json) {  // --list --json: the names as one JSON list
      std::string out = "[";
      for (const auto& [n, f] : registry()) out += (out.size() > 1 ? ", " : "") + mr::json_quote(n);
      std::cout << out << "]\n";
      return 0;
    }
    for (const auto& [n, f] : registry()) std::cout << n << "\n";
    return 0;
  }
  // Every name must be known before anything runs.
  for (const auto& w : names) {
    bool found = false;
    for (const auto& [n, f] : registry()) found = found || n == w || (w.back() == '.' && n.rfind(w, 0) == 0);
    if (!found) return usage_error("unknown benchmark " + w + " (see --list)");
  }
  Options opts;
  opts.quick = quick;
  opts.bin_dir = std::filesystem::canonical("/proc/self/exe").parent_path().string();
  opts.source_dir = MR_SOURCE_DIR;
  // With --json, whatever a benchmark (or a library it calls: Gloo, LibTorch, OpenMP) writes to stdout while it
  // runs goes to stderr instead: file descriptor 1 points at stderr until the JSON document is written.
  StdoutToStderr guard(json);
  std::vector<Result> results;
  std::vector<std::pair<std::string, std::string>> not_run;  // (name, the JSON entry's fields after the name)
  std::vector<size_t> order;  // the JSON's entries in run order: < results.size() a result, else a not_run one
  int failures = 0;
  for (const auto& [n, f] : registry()) {
    bool wanted = names.empty();
    for (const auto& w : names) wanted = wanted || n == w || (w.back() == '.' && n.rfind(w, 0) == 0);
    if (!wanted) continue;
    try {
      Result r = f(opts);
      r.name = n;
      order.push_back(results.size());
      results.push_back(r);
      if (!json)
        std::printf("%-28s %12.4g %-6s  baseline %-28s %12.4g  ratio %.3f\n", n.c_str(), r.value, r.unit.c_str(),
                    r.baseline.c_str(), r.baseline_value, r.ratio);
    } catch (const Skipped& e) {
      // A benchmark asked for by its whole name must run: not being able to is a failure then.
      // The JSON says so too: {"name": N, "skipped": REASON} or {"name": N, "failed": REASON}.
      const bool by_name = std::find(names.begin(), names.end(), n) != names.end();
      if (by_name) {
        ++failures;
        std::cerr << n << ": failed (asked for by name): " << mr::printable(e.what()) << "\n";
      } else {
        std::cerr << n << ": skipped: " << mr::printable(e.what()) << "\n";
      }
      order.push_back(1000000 + not_run.size());
      not_run.emplace_back(n, std::string(by_name ? "\"failed\": " : "\"skipped\": ") + mr::json_quote(e.what()));
    } catch (const std::exception& e) {
      ++failures;
      std::cerr << n << ": failed: " << mr::printable(e.what()) << "\n";
      order.push_back(1000000 + not_run.size());
      not_run.emplace_back(n, "\"failed\": " + mr::json_quote(e.what()));
    }
  }
  guard.restore();
  if (json) {
    std::cout << "[";
    for (size_t i = 0; i < order.size(); ++i) {
      std::cout << (i ? ",\n " : "\n ");
      if (order[i] >= 1000000) {
        const auto& [n, fields] = not_run[order[i] - 1000000];
        std::cout << "{\"name\": " << mr::json_quote(n) << ", " << fields << "}";
        continue;
      }
      const auto& r = results[order[i]];
      std::cout << "{\"name\": " << mr::json_quote(r.name) << ", \"value\": " << mr::Value(r.value).json()
                << ", \"unit\": " << mr::json_quote(r.unit) << ", \"baseline\": " << mr::json_quote(r.baseline)
                << ", \"baseline_value\": " << mr::Value(r.baseline_value).json() << ", \"ratio\": " << mr::Value(r.ratio).json()
                << "}";
    }
    std::cout << "\n]\n";
  }
  return failures ? 1 : 0;
}
