// torchrun's per-rank logs (--log-dir, -r/--redirects, -t/--tee, --local-ranks-filter), with torchrun's rules
// (torch/distributed/elastic/multiprocessing/api.py, DefaultLogsSpecs): where each worker's stdout and stderr
// go, its TORCHELASTIC_ERROR_FILE, and the directory layout <log-dir>/<run_id>_<unique>/attempt_<n>/<local_rank>/.
// Torch-free.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

namespace mr::launch {

// torchrun's Std: which of a worker's streams a setting applies to.
inline constexpr int kStdNone = 0, kStdOut = 1, kStdErr = 2, kStdAll = 3;

// A --redirects / --tee value, torchrun's Std.from_str: one Std (0-3) for every local rank ("3"), or one per
// local rank ("0:1,1:2"; a rank not named gets 0). torchrun's pattern allows one-digit ranks only; ranks of any
// size are accepted here.
struct StdSpec {
  int all = kStdNone;
  std::map<int, int> by_rank;  // used when per_rank
  bool per_rank = false;
  int of(int local_rank) const;
  // Throws std::invalid_argument naming the accepted forms.
  static StdSpec parse(const std::string& v);
};

// --local-ranks-filter "0,2": a non-empty comma-separated list of local ranks. Throws std::invalid_argument.
std::set<int> parse_local_ranks(const std::string& v);

struct LogOptions {
  // --log-dir; empty: a temporary directory, removed at the end unless a stream or an error file went to it.
  std::string log_dir;
  // The option that gave log_dir as a refusal names it ("argument NAME: cannot make ..."): every option string of
  // it where the launcher has several ("--log-dir/--log_dir").
  std::string log_dir_name = "--log-dir";
  StdSpec redirects, tee;
  std::set<int> local_ranks_filter;  // only these local ranks reach the console; empty: every rank
  // torchrun 2.x's --duplicate-stdout-filters / --duplicate-stderr-filters: the lines of tee'd streams that
  // contain any of these go also to <attempt dir>/filtered_std{out,err}.log, prefixed, every rank in one file.
  // Empty: not given (an empty string in the list matches every line, as in torchrun).
  std::vector<std::string> duplicate_stdout_filters, duplicate_stderr_filters;
  // --log-dir /dev/null, torchrun's "no log files": no run directory, every stream of every rank to the console
  // (redirects and tee change nothing; --local-ranks-filter still applies), no TORCHELASTIC_ERROR_FILE (empty).
  bool no_files() const;
  // Some stream of one of `nproc` local ranks is written to a file.
  bool any_file(int nproc) const;
};

// Where one stream of a worker goes: its log file ("" none) and/or the launcher's console.
struct StreamDest {
  std::string file;
  bool console = true;
};

struct RankLogs {
  StreamDest out, err;
  std::string error_file;  // TORCHELASTIC_ERROR_FILE
};

// torchrun's rules for local rank `local_rank` of an attempt whose directory is `attempt_dir`: a tee'd stream is
// also redirected (file and console); a redirected one goes to <attempt_dir>/<local_rank>/std{out,err}.log only;
// a rank outside a non-empty --local-ranks-filter reaches the console with neither (its files are still written).
RankLogs rank_logs(const LogOptions& o, const std::string& attempt_dir, int local_rank);

// Where a temporary directory may be made, in the order of Python's tempfile.gettempdir() (torchrun's mkdtemp):
// $TMPDIR, $TEMP, $TMP (each when set and not empty), /tmp, /var/tmp, /usr/tmp, the current directory.
struct TempDirCandidate {
  std::string dir;
  std::string name;  // how a message names it: "TMPDIR=/x", "/tmp", "the current directory /y"
};
std::vector<TempDirCandidate> temp_dir_candidates();

// A fresh <dir>/<prefix>XXXXXX in the first of `candidates` (temp_dir_candidates()) where one can be made (a
// TMPDIR that is missing or unwritable falls back, as under torchrun). Throws std::runtime_error
// "[launch.run-directory] ..." naming each candidate tried and why it failed when none can.
std::string make_temp_dir(const std::string& prefix, const std::vector<TempDirCandidate>& candidates);

// A run's log directory: <root>/<run_id>_<unique> (torchrun's mkdtemp with the run id as prefix), root being
// --log-dir (made when missing) or a fresh torchelastic_XXXXXX made by make_temp_dir. A temporary root is removed by the
// destructor unless some stream was written to it (then it is kept and its path said on stderr, as torchrun
// keeps it) or a worker wrote its error file there (kept, and said on stderr at the end). With o.no_files()
// (--log-dir /dev/null) there is none: run_dir() and attempt() are "". Throws std::runtime_error when a
// directory cannot be made.
// Which node an attempt directory is from: two nodes sharing one --log-dir (NFS) each make their own run directory
// (mkdtemp), which does not say which node it is (ops37 #11). The file kNodeFile in each attempt directory says it.
struct NodeRecord {
  std::string host;      // gethostname()
  int node_rank = 0;     // the attempt's (a c10d rendezvous may renumber the nodes at a restart)
  int nnodes = 1;
  int nproc = 1;         // its workers: global ranks node_rank x nproc .. + nproc - 1
  int restart_count = 0;
  std::string run_id;
};
inline constexpr const char* kNodeFile = "node.json";
// Writes <attempt_dir>/node.json: {"host", "node_rank", "nnodes", "ranks": [first, last], "local_world_size",
// "restart_count", "run_id", "launcher_pid"}. Nothing for "" (--log-dir /dev/null); a write that fails is not
// an error (the logs themselves are said when they fail).
void write_node_record(const std::string& attempt_dir, const NodeRecord& node);
// This machine's host name (gethostname), "" when it has none.
std::string host_name();

class LogDir {
 public:
  LogDir(const LogOptions& o, const std::string& run_id, int nproc);
  ~LogDir();
  LogDir(const LogDir&) = delete;
  LogDir& operator=(const LogDir&) = delete;
  const std::string& run_dir() const { return run_dir_; }
  // <run_dir>/attempt_<restart_count> emptied and made afresh, with one directory per local rank; its path.
  std::string attempt(int restart_count, int nproc) const;
  // The root cause the failure summary named, on this node: its rank and its TORCHELASTIC_ERROR_FILE ("" none).
  // A kept temporary directory's last line names that file, not another worker's (review launch37 #4).
  void set_root_cause(int rank, const std::string& error_file) {
    root_cause_rank_ = rank;
    root_cause_file_ = error_file;
  }

 private:
  std::string root_, run_dir_;
  int root_cause_rank_ = -1;  // -1: no root cause on this node was named
  std::string root_cause_file_;
  bool temporary_ = false, keep_ = false;
};

}  // namespace mr::launch
