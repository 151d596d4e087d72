// build/bin/megatron-run-bench [--quick] [--json] [NAME...]: runs benchmarks and prints each figure.
#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/program_options.hpp>
#include <algorithm>
#include <cstdio>
#include <cstring>
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

namespace {

// The children's stderr goes to one unnamed temporary file, emptied before each child, read only when it failed.
int stderr_file() {
  static int fd = [] {
    int f = ::open(std::filesystem::temp_directory_path().c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    return f >= 0 ? f : ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  }();
  return fd;
}

// The last `lines` lines of what the child wrote to stderr (at most 4 KiB of it), for a failure's message.
std::string stderr_tail(int fd, int lines = 8) {
  off_t size = ::lseek(fd, 0, SEEK_END);
  if (size <= 0) return "";
  const off_t from = std::max<off_t>(0, size - 4096);
  std::string text(static_cast<size_t>(size - from), '\0');
  ssize_t got = ::pread(fd, text.data(), text.size(), from);
  if (got <= 0) return "";
  text.resize(static_cast<size_t>(got));
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  size_t start = text.size();
  for (int i = 0; i < lines && start != std::string::npos && start > 0; ++i) start = text.rfind('\n', start - 1);
  return start == std::string::npos || start == 0 ? text : text.substr(start + 1);
}

}  // namespace

ChildRun run_child(const std::vector<std::string>& argv, const std::string& cwd, int max_exit) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const int err = stderr_file();
  if (::ftruncate(err, 0) == 0) ::lseek(err, 0, SEEK_SET);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, err, 2);
  if (!cwd.empty()) posix_spawn_file_actions_addchdir_np(&fa, cwd.c_str());
  pid_t pid;
  int rc = posix_spawn(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) throw std::runtime_error("cannot start " + argv[0] + ": " + std::strerror(rc));
  int status = 0;
  struct rusage ru {};
  if (wait4(pid, &status, 0, &ru) < 0) throw std::runtime_error("wait4 failed");
  if (!WIFEXITED(status) || WEXITSTATUS(status) > max_exit) {
    std::string what = WIFEXITED(status) ? "exited with status " + std::to_string(WEXITSTATUS(status))
                       : WIFSIGNALED(status)
                           ? "was killed by signal " + std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")"
                           : "ended with wait status " + std::to_string(status);
    std::string tail = stderr_tail(err);
    throw std::runtime_error(argv[0] + " " + what + (tail.empty() ? ", nothing on stderr" : "; the end of its stderr:\n" + tail));
  }
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

namespace mr::bench {
namespace {

const char* of_word(const Target& t) { return t.of == Target::Of::ratio ? "ratio" : "value"; }

// Whether `r` misses its stated target (false where it has none).
bool below_target(const Result& r) {
  const Target& t = r.target;
  if (t.of == Target::Of::none) return false;
  const double x = t.of == Target::Of::ratio ? r.ratio : r.value;
  if (t.op == ">=") return !(x >= t.bound);
  if (t.op == ">") return !(x > t.bound);
  if (t.op == "<=") return !(x <= t.bound);
  if (t.op == "<") return !(x < t.bound);
  throw std::logic_error(r.name + ": target operator '" + t.op + "'");
}

// "ratio >= 0.9", "value <= 5 ms"; "" without a target.
std::string target_text(const Result& r) {
  const Target& t = r.target;
  if (t.of == Target::Of::none) return "";
  char bound[32];
  std::snprintf(bound, sizeof bound, "%g", t.bound);
  return std::string(of_word(t)) + " " + t.op + " " + bound + (t.of == Target::Of::value ? " " + r.unit : "");
}

std::string json_result(const Result& r) {
  std::string out = "{\"name\": " + mr::json_quote(r.name) + ", \"value\": " + mr::Value(r.value).json() +
                    ", \"unit\": " + mr::json_quote(r.unit) + ", \"baseline\": " + mr::json_quote(r.baseline) +
                    ", \"baseline_value\": " + mr::Value(r.baseline_value).json() +
                    ", \"ratio\": " + mr::Value(r.ratio).json() +
                    ", \"higher_is_better\": " + (r.higher_is_better ? "true" : "false") + ", \"target\": ";
  if (r.target.of == Target::Of::none) {
    out += "null";
  } else {
    out += std::string("{\"of\": \"") + of_word(r.target) + "\", \"op\": " + mr::json_quote(r.target.op) +
           ", \"bound\": " + mr::Value(r.target.bound).json() + "}";
  }
  return out + ", \"below_target\": " + (below_target(r) ? "true" : "false") + "}";
}

// Whether the benchmark `n` is selected by the word `w`: its whole name, or a prefix ending in '.'.
bool selects(const std::string& w, const std::string& n) {
  return n == w || (!w.empty() && w.back() == '.' && n.rfind(w, 0) == 0);
}

}  // namespace
}  // namespace mr::bench

int main(int argc, char** argv) {
  namespace po = boost::program_options;
  using namespace mr::bench;
  bool quick = false, json = false, list = false, help = false, fail_below = false;
  std::vector<std::string> names;
  po::options_description desc("megatron-run-bench [--quick] [--json] [--fail-below-target] [--list] [NAME...]\n"
                               "NAME: a benchmark's whole name or a prefix ending in '.' (cpu.); none: all of them.\nOptions");
  desc.add_options()("help,h", po::bool_switch(&help), "this text (plain text, also with --json)")(
      "quick", po::bool_switch(&quick),
      "short runs (the whole suite: about a minute on an idle 2-core machine, more when it is loaded)")(
      "json", po::bool_switch(&json), "one JSON list of results on stdout, written when every benchmark has run")(
      "fail-below-target", po::bool_switch(&fail_below), "exit 1 when a result misses its stated target")(
      "list", po::bool_switch(&list), "list the benchmarks (those NAME selects, if given)");
  po::options_description hidden;
  hidden.add_options()("names", po::value(&names));
  po::options_description all;
  all.add(desc).add(hidden);
  po::positional_options_description pos;
  pos.add("names", -1);
  po::variables_map vm;
  // With --json, stdout is exactly one JSON document whatever happens: the results, or {"error": ...}; --help
  // alone is the usage text. Options are not abbreviated (no guessing), so the JSON mode is known from the words
  // themselves, before parsing: `--json` or `--json=...` (which is refused: a switch takes no value).
  bool json_requested = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--") break;
    json_requested = json_requested || a == "--json" || a.rfind("--json=", 0) == 0;
  }
  auto usage_error = [&](const std::string& message) {
    std::cerr << "megatron-run-bench: " << mr::printable(message) << "\n";
    if (json_requested) std::cout << "{\"error\": " << mr::json_quote(message) << "}\n";
    return 2;
  };
  try {
    const int style = po::command_line_style::default_style & ~po::command_line_style::allow_guessing;
    po::store(po::command_line_parser(argc, argv).options(all).positional(pos).style(style).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << desc;
    return usage_error(e.what());
  }
  if (help) {
    std::cout << desc;
    return 0;
  }
  // Every name must be known (with --list too) before anything runs.
  for (const auto& w : names) {
    if (w.empty()) return usage_error("an empty benchmark name '' (see --list)");
    bool found = false;
    for (const auto& [n, f] : registry()) found = found || selects(w, n);
    if (!found) return usage_error("unknown benchmark '" + w + "' (see --list)");
  }
  auto wanted = [&](const std::string& n) {
    if (names.empty()) return true;
    for (const auto& w : names)
      if (selects(w, n)) return true;
    return false;
  };
  if (list) {
    std::string out = "[";
    for (const auto& [n, f] : registry()) {
      if (!wanted(n)) continue;
      if (json)  // --list --json: the names as one JSON list
        out += (out.size() > 1 ? ", " : "") + mr::json_quote(n);
      else
        std::cout << n << "\n";
    }
    if (json) std::cout << out << "]\n";
    return 0;
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
  int failures = 0, below = 0, with_target = 0;
  for (const auto& [n, f] : registry()) {
    if (!wanted(n)) continue;
    try {
      Result r = f(opts);
      r.name = n;
      const bool miss = below_target(r);
      below += miss;
      with_target += r.target.of != Target::Of::none;
      order.push_back(results.size());
      results.push_back(r);
      // Each line as soon as its benchmark is done, flushed: a run cut short (a CI timeout) keeps what it had.
      const std::string t = target_text(r);
      if (!json) {
        std::printf("%-28s %12.4g %-6s  baseline %-28s %12.4g  ratio %.3f (%s)%s%s%s\n", n.c_str(), r.value,
                    r.unit.c_str(), r.baseline.c_str(), r.baseline_value, r.ratio,
                    r.higher_is_better ? "higher is better" : "lower is better", t.empty() ? "" : "  target ",
                    t.c_str(), miss ? "  BELOW TARGET" : "");
        std::fflush(stdout);
      } else if (miss) {
        std::cerr << n << ": below target (" << t << ")\n";
      }
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
      std::cout << json_result(results[order[i]]);
    }
    std::cout << "\n]" << std::endl;
  }
  // The count of misses: on stdout after the table, on stderr under --json (stdout is the document).
  if (!results.empty()) {
    std::string summary = std::to_string(below) + " of " + std::to_string(results.size()) +
                          " results below target (" + std::to_string(with_target) + " with a stated target)" +
                          (below && !fail_below ? "; the exit status does not say so without --fail-below-target" : "") +
                          "\n";
    (json ? std::cerr : std::cout) << summary << std::flush;
  }
  if (failures) return 1;
  return fail_below && below ? 1 : 0;
}
