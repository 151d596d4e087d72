// torchrun's per-rank logs (log_spec.h).
#include "launch/log_spec.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <stdexcept>
#include <vector>

#include "config/rule.h"
#include "config/value.h"

#include "util/rule_id.h"
#include "util/text.h"

namespace fs = std::filesystem;

namespace mr::launch {

const Rule kRunDirectoryRule{
    "launch.run-directory", Rule::Level::Error,
    "Without --log-dir, no temporary directory (TMPDIR, TEMP, TMP, /tmp, /var/tmp, /usr/tmp, the current "
    "directory) lets the launcher make the run directory for its workers' error files: refused (exit 1), naming "
    "each one tried and why.",
    __FILE__, __LINE__, kStageLaunch};
const Rule kLogDirUnwritableRule{
    "launch.log-dir-unwritable", Rule::Level::Error,
    "--log-dir DIR cannot be created, or the launcher cannot make its run's directory in it: refused (exit 1) "
    "before any worker starts, with the system's reason.",
    __FILE__, __LINE__, kStageLaunch};

namespace {

// `path` made absolute against the launch directory, without a trailing '/' ("logs3/" -> "/work/logs3"); as it is
// when the current directory cannot be read.
std::string absolute_path(const std::string& path) {
  std::error_code ec;
  fs::path p = fs::absolute(path, ec);
  if (ec) return path;
  p = p.lexically_normal();
  std::string out = p.string();
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  return out;
}

// A non-negative decimal integer, the whole of `s`.
bool parse_uint(const std::string& s, int& out) {
  if (s.empty() || s.size() > 9) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  out = std::stoi(s);
  return true;
}

// mkdtemp in `dir`: the path made, or nullopt with errno set.
std::optional<std::string> try_mkdtemp(const std::string& dir, const std::string& prefix) {
  std::string tmpl = (fs::path(dir) / (prefix + "XXXXXX")).string();
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (!mkdtemp(buf.data())) return std::nullopt;
  return std::string(buf.data());
}

std::string mkdtemp_in(const std::string& dir, const std::string& prefix) {
  std::optional<std::string> made = try_mkdtemp(dir, prefix);
  if (!made) throw std::runtime_error("cannot make a log directory in " + dir + ": " + std::strerror(errno));
  return *made;
}

}  // namespace

std::vector<TempDirCandidate> temp_dir_candidates() {
  std::vector<TempDirCandidate> out;
  for (const char* var : {"TMPDIR", "TEMP", "TMP"})
    if (const char* v = std::getenv(var); v && *v) out.push_back({v, std::string(var) + "=" + v});
  for (const char* dir : {"/tmp", "/var/tmp", "/usr/tmp"}) out.push_back({dir, dir});
  std::error_code ec;
  const fs::path cwd = fs::current_path(ec);
  if (!ec) out.push_back({cwd.string(), "the current directory " + cwd.string()});
  return out;
}

std::string make_temp_dir(const std::string& prefix, const std::vector<TempDirCandidate>& candidates) {
  std::string tried;
  for (const TempDirCandidate& c : candidates) {
    if (std::optional<std::string> made = try_mkdtemp(c.dir, prefix)) return *made;
    tried += (tried.empty() ? "" : "; ") + c.name + ": " + std::strerror(errno);
  }
  throw std::runtime_error(with_rule_id(kRunDirectoryRule.id,
                                        "cannot make the run directory for the workers' error files in any "
                                        "temporary directory (" + tried + "): set TMPDIR to a writable "
                                        "directory, or give --log-dir"));
}

int StdSpec::of(int local_rank) const {
  if (!per_rank) return all;
  auto it = by_rank.find(local_rank);
  return it == by_rank.end() ? kStdNone : it->second;
}

StdSpec StdSpec::parse(const std::string& v) {
  const std::invalid_argument bad("'" + abbreviate(v) +
                                  "' is neither a stream mask 0-3 (0 none, 1 stdout, 2 stderr, 3 both) nor "
                                  "LOCAL_RANK:MASK,... (e.g. 0:1,1:2)");
  StdSpec s;
  int n = 0;
  if (v.find(':') == std::string::npos) {
    if (v.size() != 1 || !parse_uint(v, n) || n > kStdAll) throw bad;
    s.all = n;
    return s;
  }
  s.per_rank = true;
  for (const std::string& item : split(v, ',')) {
    size_t colon = item.find(':');
    int rank = 0, mask = 0;
    if (colon == std::string::npos || !parse_uint(item.substr(0, colon), rank) ||
        item.size() != colon + 2 || !parse_uint(item.substr(colon + 1), mask) || mask > kStdAll)
      throw bad;
    s.by_rank[rank] = mask;
  }
  return s;
}

std::set<int> parse_local_ranks(const std::string& v) {
  std::set<int> ranks;
  for (const std::string& item : split(v, ',')) {
    int r = 0;
    if (!parse_uint(item, r))
      throw std::invalid_argument("'" + abbreviate(v) + "' is not a comma-separated list of local ranks (e.g. 0,1,2)");
    ranks.insert(r);
  }
  return ranks;
}

bool LogOptions::no_files() const { return log_dir == "/dev/null"; }

bool LogOptions::any_file(int nproc) const {
  if (no_files()) return false;
  for (int r = 0; r < nproc; ++r)
    if ((redirects.of(r) | tee.of(r)) != kStdNone) return true;
  return false;
}

RankLogs rank_logs(const LogOptions& o, const std::string& attempt_dir, int local_rank) {
  const int tee = o.tee.of(local_rank);
  const int redirect = o.redirects.of(local_rank) | tee;  // a tee is a redirect that is also shown
  const bool shown = o.local_ranks_filter.empty() || o.local_ranks_filter.count(local_rank);
  const fs::path dir = fs::path(attempt_dir) / std::to_string(local_rank);
  RankLogs r;
  if (o.no_files()) {  // torchrun's os.devnull: every stream to the console, no error file (TORCHELASTIC_ERROR_FILE="")
    r.out.console = r.err.console = shown;
    return r;
  }
  auto dest = [&](int bit, const char* name) {
    StreamDest d;
    if (redirect & bit) d.file = (dir / name).string();
    d.console = shown && (!(redirect & bit) || (tee & bit));
    return d;
  };
  r.out = dest(kStdOut, "stdout.log");
  r.err = dest(kStdErr, "stderr.log");
  r.error_file = (dir / "error.json").string();
  return r;
}

LogDir::LogDir(const LogOptions& o, const std::string& run_id, int nproc) {
  if (o.no_files()) return;  // no directory at all
  if (o.log_dir.empty()) {
    root_ = absolute_path(make_temp_dir("torchelastic_", temp_dir_candidates()));  // a relative $TMPDIR too
    temporary_ = true;
    keep_ = o.any_file(nproc);
  } else {
    // Absolute: the workers' TORCHELASTIC_ERROR_FILE and log paths derive from it, and a program that changes
    // its directory (os.chdir, then @record writing its error file) must still find them (review launch37 #3).
    root_ = absolute_path(o.log_dir);
    std::error_code ec;
    fs::create_directories(root_, ec);
    if (ec)
      throw std::runtime_error(with_rule_id(kLogDirUnwritableRule.id, "argument " + o.log_dir_name + ": cannot make " +
                                                                          root_ + ": " +
                                                                          ec.message()));
  }
  std::string prefix = run_id;
  for (char& c : prefix)
    if (c == '/') c = '_';
  try {
    run_dir_ = mkdtemp_in(root_, prefix + "_");
  } catch (const std::runtime_error& e) {
    if (temporary_) throw;
    throw std::runtime_error(with_rule_id(kLogDirUnwritableRule.id, "argument " + o.log_dir_name + ": " + e.what()));
  }
  if (!temporary_ || keep_) std::cerr << "megatron-run: log directory " << run_dir_ << "\n";
}

LogDir::~LogDir() {
  if (!temporary_ || keep_) return;
  // A worker's error file (the failure summary names its path; it holds what the summary leaves out) keeps it.
  // The root cause's, when it wrote one there (the file the summary names); else the others', said as such.
  std::error_code ec;
  if (root_cause_rank_ >= 0 && !root_cause_file_.empty() && fs::exists(root_cause_file_, ec)) {
    std::cerr << "megatron-run: log directory " << run_dir_ << " kept: it holds the root cause's error file (rank "
              << root_cause_rank_ << ": " << root_cause_file_ << ")\n";
    return;
  }
  std::vector<std::string> others;
  try {
    for (const auto& attempt : fs::directory_iterator(run_dir_))
      for (const auto& rank : fs::directory_iterator(attempt.path(), ec))
        if (fs::exists(rank.path() / "error.json", ec)) others.push_back((rank.path() / "error.json").string());
  } catch (const std::exception&) {  // unreadable: removed, as before
  }
  if (!others.empty()) {
    std::sort(others.begin(), others.end());
    std::string list;
    for (size_t i = 0; i < others.size() && i < 4; ++i) list += (i ? ", " : "") + others[i];
    if (others.size() > 4) list += ", ... (" + std::to_string(others.size()) + " in all)";
    std::cerr << "megatron-run: log directory " << run_dir_ << " kept: it holds "
              << (root_cause_rank_ >= 0 ? "error files of workers that failed after the root cause (rank " +
                                              std::to_string(root_cause_rank_) + ", which wrote none): "
                                        : std::string("workers' error files: "))
              << list << "\n";
    return;
  }
  fs::remove_all(root_, ec);
}

std::string LogDir::attempt(int restart_count, int nproc) const {
  if (run_dir_.empty()) return "";  // --log-dir /dev/null
  const fs::path dir = fs::path(run_dir_) / ("attempt_" + std::to_string(restart_count));
  std::error_code ec;
  fs::remove_all(dir, ec);
  for (int r = 0; r < nproc; ++r) {
    fs::create_directories(dir / std::to_string(r), ec);
    if (ec) throw std::runtime_error("cannot make the log directory " + dir.string() + ": " + ec.message());
  }
  return dir.string();
}

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return {};
  return name;
}

void write_node_record(const std::string& attempt_dir, const NodeRecord& n) {
  if (attempt_dir.empty()) return;
  const int first = n.node_rank * n.nproc;
  std::ofstream f(fs::path(attempt_dir) / kNodeFile);
  f << "{\"host\": " << Value(n.host).json() << ", \"node_rank\": " << n.node_rank << ", \"nnodes\": " << n.nnodes
    << ", \"ranks\": [" << first << ", " << first + n.nproc - 1 << "], \"local_world_size\": " << n.nproc
    << ", \"restart_count\": " << n.restart_count << ", \"run_id\": " << Value(n.run_id).json()
    << ", \"launcher_pid\": " << getpid() << "}\n";
}

}  // namespace mr::launch
