// The failure summary spawn_workers prints when the job fails: the root cause (the first worker that failed:
// rank, local rank, host, pid, exit code or signal, time, the content of its TORCHELASTIC_ERROR_FILE in
// PyTorch's @record JSON format, the last lines of its stderr, torch's log lines left out: stderr_tail.h), then the cascade (the workers that failed
// after it, most of them stopped by the launcher). Torch-free.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace mr::launch {

// One worker that exited with a code other than 0 (or was killed by a signal).
struct WorkerFailure {
  int rank = 0, local_rank = 0;
  pid_t pid = -1;
  int status = 0;          // its wait status
  std::chrono::system_clock::time_point when;  // when the launcher saw it end
  bool after_stop = false;  // it ended after the launcher had begun stopping the workers
  // This node's worker count and the job's world size (0: not known): a rank a follower's error file names is this
  // node's when in [rank - local_rank, rank - local_rank + local_world_size), another node's when below world_size.
  int local_world_size = 0, world_size = 0;
  // It was killed by a signal the launcher had passed on to the workers (SIGUSR1, SIGUSR2 by default: passed on
  // without stopping them), not one from elsewhere.
  bool by_passed_signal = false;
  std::vector<std::string> stderr_tail;  // its last stderr lines, when its stderr went through the launcher
  size_t stderr_left_out = 0;            // torch's info/warning log lines left out of them (stderr_tail.h)
  bool stderr_seen = false;              // its stderr went through the launcher (else straight to the console)
  bool stderr_filtered = false;          // kept off the console by --local-ranks-filter, and in no log file
  std::string error_file;  // its TORCHELASTIC_ERROR_FILE ("" none)
  // megatron-run could not start it (the exec or the CPU binding in the forked child failed; the child's exit code,
  // 127 or 1, is then the launcher's, not the program's): "cannot start ./train.sh: Permission denied". "" it ran
  // (or the child was killed by a signal after its note: the signal is what it ended by).
  std::string start_failure;
};

// "exited with code 7", "was killed by signal 15 (SIGTERM)".
std::string describe_status(int status);
// describe_status, or for a worker megatron-run could not start "could not be started by megatron-run (...)".
std::string describe_end(const WorkerFailure& f);
// A signal's name: "SIGTERM" (or "signal N" when it has none).
std::string signal_name(int sig);

// What a worker wrote to its error file, read the way torchrun's ProcessFailure reads it: the @record format
// {"message": {"message": "...", "extraInfo": {"py_callstack": "...", "timestamp": "..."}}}, or {"message": "..."};
// anything else is returned as it is (at most a few kB). nullopt when there is no such file.
struct ErrorFileContent {
  std::string message;     // "RuntimeError: boom"
  std::string traceback;   // py_callstack ("" none)
  std::string timestamp;   // seconds since the epoch, as written ("" none)
  std::string raw;         // the file itself when it is not in that format
  // extraInfo.follows_rank (megatron-run's own worker writes it: follower_error_record): this rank failed only
  // because rank N failed (it learned it from a collective), -1 another rank it does not know; nullopt no such
  // field (a rank that failed on its own, any other program).
  std::optional<long long> follows_rank;
};
std::optional<ErrorFileContent> read_error_file(const std::string& path);

// The error record of a rank that fails only because another rank failed (megatron-run's worker writes it to its
// TORCHELASTIC_ERROR_FILE): @record's format, message the first line of `text` as the worker's log shows it
// ("[run.nan-check] ..." as "error[run.nan-check]: ...", other text as "error: ..."; all of it as py_callstack),
// extraInfo.timestamp `timestamp` and extraInfo.follows_rank `follows_rank` (an integer: the rank that failed,
// -1 not known which). torchrun reads only message and extraInfo's strings: the field changes nothing there.
std::string follower_error_record(const std::string& text, long long follows_rank, long long timestamp);

// Which of `failures` (in the order the launcher saw them) the summary names as the root cause: the first, unless
// its error file says it failed only because another rank failed (follows_rank): then the rank it names when that
// rank is among `failures`, or else (rank not known) the first failure whose error file says no such thing.
// `elsewhere_rank`: the rank the first failure names when that rank is not among `failures` and is another node's
// (outside this node's ranks, inside the world, where WorkerFailure says them). A rank of this node that did not
// fail, or one outside the world, is no root cause: the first failure is.
struct RootCause {
  size_t index = 0;
  std::optional<long long> elsewhere_rank;
};
RootCause find_root_cause(const std::vector<WorkerFailure>& failures);

// A line that says what the root cause's exit code 127 most likely means ("" for any other end, and for a
// program megatron-run could not start, which the summary says as such): the dynamic loader could not map the
// program's libraries (its "error while loading shared libraries: ... failed to map segment" line) within
// `address_space_limit` (RLIMIT_AS, bytes: raise `ulimit -v`), could not load them otherwise, or a shell in the
// program could not find a command; else both readings, and the limit when one is set.
std::string exit_127_hint(const WorkerFailure& f, std::optional<uint64_t> address_space_limit);

// A worker whose stderr tail says a thread could not be created (libgomp's "libgomp: Thread creation failed: ...",
// OpenBLAS's "pthread_create failed for thread ...", a "std::system_error ... Resource temporarily unavailable"
// from std::thread): the process or user thread limit `nproc_limit` (RLIMIT_NPROC, ulimit -u; nullopt unlimited)
// or a cgroup's pids.max, and the ways out (OMP_NUM_THREADS, fewer workers); "" for any other end.
std::string thread_limit_hint(const WorkerFailure& f, std::optional<uint64_t> nproc_limit);

// A worker whose stderr tail (or error file) shows a Python import failure (ModuleNotFoundError, ImportError): the
// interpreter that ran the program, `python` ("PATH (the first python3 on PATH)", "PATH (PYTHON_EXEC)"; "" for a
// program not run under Python, and then ""), and that PYTHON_EXEC chooses another; "" for any other end.
std::string missing_module_hint(const WorkerFailure& f, const std::string& python);

// torchrun's exit code of a worker (its ProcessFailure.exitcode): the code, or minus the signal that killed it.
int torch_exit_code(int status);

// What the launcher writes to its own TORCHELASTIC_ERROR_FILE when the job fails (torchrun's main is @record: its
// ChildFailedError copies the root cause's error file there), for the root cause `root`: its error file as it is,
// with torch_exit_code as message.errorCode when the message is an object (torchrun's dump_error_file); for a
// worker that wrote none (or not JSON), a record in the same format: message "worker rank R (local rank L), pid P
// on HOST exited with code C", extraInfo.py_callstack its last stderr lines, extraInfo.timestamp, errorCode
// (torchrun writes nothing then).
std::string launcher_error_record(const WorkerFailure& root);
// Writes launcher_error_record(root) to `path` (replacing it). "" done, else why not (strerror).
std::string write_launcher_error_file(const std::string& path, const WorkerFailure& root);

// What the launcher writes to its own TORCHELASTIC_ERROR_FILE when a signal `sig` stopped it (and its workers):
// torchrun's record of the SignalException its agent raises, message "SignalException: Process PID got signal:
// SIG" (`pid`: the launcher's), extraInfo.py_callstack (here a line saying what stopped) and extraInfo.timestamp
// (`when`, seconds since the epoch); no errorCode, as torchrun writes none for it.
std::string launcher_signal_record(int sig, long pid, long long when);
// Writes `record` to `path` (replacing it). "" done, else why not (strerror).
std::string write_error_record(const std::string& path, const std::string& record);
// Whether write_error_record wrote a file in this process (the launcher's record of a failed job): megatron-run's
// own refusal record (apps/megatron-run/error_record.h) does not replace it.
bool error_record_written();

// The summary: `failures` in the order the launcher saw them (the root cause find_root_cause's: the first, unless
// its error file names the rank it followed; unless `first_elsewhere` names another node's failure that the
// launchers' store recorded before it). Workers that all died of a signal the launcher passed on without stopping
// them (by_passed_signal: SIGUSR1) are named together as killed by it, with no root cause among them; `restarts` the
// restart count of the attempt that failed (TORCHELASTIC_RESTART_COUNT, its attempt_<n> log directory) and
// `max_restarts` --max-restarts: with restarts allowed, the heading names the attempt and whether one was left.
// `incomplete_logs`: the log files a write to failed during the job ("PATH: REASON" each; rule
// launch.log-write-failed), listed last. `python`: the interpreter that ran the program (missing_module_hint).
void print_failure_summary(std::ostream& os, const std::vector<WorkerFailure>& failures, int restarts, int max_restarts,
                           const std::string& first_elsewhere = "",
                           const std::vector<std::string>& incomplete_logs = {},
                           const std::string& python = "");

}  // namespace mr::launch
