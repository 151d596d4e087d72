// The failure summary (failure_report.h).
#include "launch/failure_report.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>

#include "config/value.h"
#include "util/resources.h"
#include "util/rule_id.h"

namespace mr::launch {

namespace {

const mr::Value* member(const mr::Value& v, const std::string& key) {
  if (!v.is_object()) return nullptr;
  for (const auto& [k, e] : v.as_object())
    if (k == key) return &e;
  return nullptr;
}

std::string str_of(const mr::Value* v) { return v && v->is_str() ? v->as_str() : ""; }

std::string local_time(std::chrono::system_clock::time_point t) {
  std::time_t s = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  localtime_r(&s, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

std::string host_name() {
  char buf[256] = {};
  return gethostname(buf, sizeof buf - 1) == 0 ? buf : "?";
}

// Every line of `text`, indented.
void indented(std::ostream& os, const std::string& text, const char* indent) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) os << indent << line << "\n";
}

std::string who(const WorkerFailure& f) {
  return "rank " + std::to_string(f.rank) + " (local rank " + std::to_string(f.local_rank) + "), pid " +
         std::to_string(f.pid);
}

}  // namespace

std::string describe_end(const WorkerFailure& f) {
  if (f.start_failure.empty())
    return describe_status(f.status) + (f.by_passed_signal ? " (a signal the launcher received and passed on)" : "");
  const int code = WIFEXITED(f.status) ? WEXITSTATUS(f.status) : 127;
  return "could not be started by megatron-run (" + f.start_failure + "; the exit code " + std::to_string(code) +
         " is megatron-run's)";
}

std::string signal_name(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

std::string describe_status(int status) {
  if (WIFEXITED(status)) return "exited with code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status))
    return "was killed by signal " + std::to_string(WTERMSIG(status)) + " (" + signal_name(WTERMSIG(status)) + ")";
  return "stopped";
}

std::optional<ErrorFileContent> read_error_file(const std::string& path) {
  if (path.empty()) return std::nullopt;
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::string text;
  char buf[4096];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    text.append(buf, static_cast<size_t>(in.gcount()));
    if (text.size() > (1u << 20)) break;
  }
  ErrorFileContent c;
  try {
    mr::Value v = mr::Value::parse_json(text);
    const mr::Value* m = member(v, "message");
    if (m && m->is_str()) {
      c.message = m->as_str();
      return c;
    }
    if (m && m->is_object()) {
      c.message = str_of(member(*m, "message"));
      if (const mr::Value* extra = member(*m, "extraInfo")) {
        c.traceback = str_of(member(*extra, "py_callstack"));
        c.timestamp = str_of(member(*extra, "timestamp"));
        if (const mr::Value* k = member(*extra, "follows_rank"); k && k->is_int())
          c.follows_rank = std::max<long long>(-1, k->as_int());
      }
      if (!c.message.empty() || !c.traceback.empty()) return c;
    }
  } catch (const std::exception&) {
  }
  c = ErrorFileContent{};
  c.raw = text.size() > 4096 ? text.substr(0, 4096) + "\n[... " + std::to_string(text.size() - 4096) + " more bytes]"
                             : text;
  return c;
}

std::string follower_error_record(const std::string& text, long long follows_rank, long long timestamp) {
  // As the worker's log line shows it ("error[run.nan-check]: ..."), so that the summary's "(...)" reads alike.
  const std::string logged = rule_heading("error", text);
  mr::Object extra = {{"py_callstack", logged}, {"timestamp", std::to_string(timestamp)}, {"follows_rank", follows_rank}};
  mr::Object message = {{"message", logged.substr(0, logged.find('\n'))}, {"extraInfo", mr::Value::object(extra)}};
  return mr::Value::object({{"message", mr::Value::object(message)}}).json();
}

RootCause find_root_cause(const std::vector<WorkerFailure>& failures) {
  RootCause r;
  if (failures.empty()) return r;
  auto follows = [](const WorkerFailure& f) -> std::optional<long long> {
    auto e = read_error_file(f.error_file);
    return e ? e->follows_rank : std::nullopt;
  };
  const std::optional<long long> k = follows(failures.front());
  if (!k) return r;
  if (*k >= 0) {
    for (size_t i = 0; i < failures.size(); ++i)
      if (failures[i].rank == *k) {
        r.index = i;
        return r;
      }
    // Not among this node's failures: another node's only when it is no rank of this node (one that ended well or
    // has not ended) and a rank of the job at all (review diff39 #4: a user's program can write any number).
    const WorkerFailure& f = failures.front();
    const long long first_local = f.rank - f.local_rank;
    const bool this_node = f.local_world_size > 0 && *k >= first_local && *k < first_local + f.local_world_size;
    const bool outside = f.world_size > 0 && *k >= f.world_size;
    if (!this_node && !outside) r.elsewhere_rank = k;
    return r;
  }
  for (size_t i = 1; i < failures.size(); ++i)  // "another rank": the first that says nothing of the kind
    if (!follows(failures[i])) {
      r.index = i;
      return r;
    }
  return r;
}

std::string exit_127_hint(const WorkerFailure& f, std::optional<uint64_t> address_space_limit) {
  if (!f.start_failure.empty() || !WIFEXITED(f.status) || WEXITSTATUS(f.status) != 127) return "";
  bool loader = false, loader_map = false, not_found = false;
  for (const std::string& l : f.stderr_tail) {
    if (l.find("error while loading shared libraries") != std::string::npos) {
      loader = true;
      loader_map = loader_map || l.find("failed to map segment") != std::string::npos ||
                   l.find("Cannot allocate memory") != std::string::npos;
    }
    not_found = not_found || l.find("command not found") != std::string::npos ||
                l.find(": not found") != std::string::npos;
  }
  const std::string limit =
      address_space_limit ? "this node's address-space limit (RLIMIT_AS, ulimit -v " +
                                std::to_string(*address_space_limit / 1024) + ")"
                          : "";
  if (loader_map && address_space_limit)
    return "the dynamic loader could not map the program's libraries within " + limit +
           " (exit code 127 is the loader's): raise the limit (ulimit -v)";
  if (loader_map) return "the dynamic loader could not map the program's libraries: the memory ran out (exit code 127 is the loader's)";
  if (loader) return "the dynamic loader could not load the program's libraries (exit code 127 is the loader's; its stderr says which)";
  if (not_found) return "exit code 127: a shell in the program could not find a command (its stderr says which)";
  if (address_space_limit)
    return "exit code 127 under " + limit + ": the dynamic loader exits 127 when the program's libraries do not fit "
           "in the limit (its stderr says \"error while loading shared libraries: ... failed to map segment\"): then "
           "raise the limit (ulimit -v); a shell exits 127 for a command it cannot find";
  return "exit code 127: a shell's code for a command it cannot find (\"command not found\"), and the dynamic "
         "loader's for a library it cannot load (\"error while loading shared libraries\"); its stderr says which";
}

std::string thread_limit_hint(const WorkerFailure& f, std::optional<uint64_t> nproc_limit) {
  if (!f.start_failure.empty()) return "";
  std::string said;
  bool system_error = false;  // "terminate called after throwing an instance of 'std::system_error'", then what()
  for (const std::string& l : f.stderr_tail) {
    system_error = system_error || l.find("system_error") != std::string::npos;
    const bool thread = l.find("Thread creation failed") != std::string::npos ||  // libgomp
                        l.find("pthread_create failed") != std::string::npos;     // OpenBLAS
    const bool again = l.find("Resource temporarily unavailable") != std::string::npos &&
                       (l.find("thread") != std::string::npos || system_error);
    if (thread || again) {
      said = l;
      break;
    }
  }
  if (said.empty()) return "";
  const std::string line = said.size() > 120 ? said.substr(0, 117) + "..." : said;
  return "a thread could not be created (\"" + line + "\"): the process or user thread limit (ulimit -u " +
         (nproc_limit ? std::to_string(*nproc_limit) : std::string("unlimited")) +
         ", a cgroup's pids.max) or the memory ran out; raise the limit, or start fewer threads (OMP_NUM_THREADS, "
         "fewer workers)";
}

std::string missing_module_hint(const WorkerFailure& f, const std::string& python) {
  if (python.empty()) return "";
  auto import_failure = [](const std::string& l) {
    return l.find("ModuleNotFoundError") != std::string::npos || l.find("ImportError") != std::string::npos;
  };
  bool seen = std::any_of(f.stderr_tail.begin(), f.stderr_tail.end(), import_failure);
  if (!seen)
    if (auto e = read_error_file(f.error_file)) seen = import_failure(e->message) || import_failure(e->raw);
  if (!seen) return "";
  return "a module could not be imported; the program ran under " + python + ": install the module there, or set "
         "PYTHON_EXEC to a Python that has it (torchrun would run the script under its own interpreter)";
}

int torch_exit_code(int status) {
  if (WIFSIGNALED(status)) return -WTERMSIG(status);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

std::string launcher_error_record(const WorkerFailure& root) {
  const int code = torch_exit_code(root.status);
  std::ifstream in(root.error_file, std::ios::binary);
  if (!root.error_file.empty() && in) {
    std::ostringstream text;
    text << in.rdbuf();
    try {
      const mr::Value v = mr::Value::parse_json(text.str());
      const mr::Value* m = member(v, "message");
      // torchrun's dump_error_file: the child's record as it is, with the exit code as message.errorCode (the
      // worker cannot know it when a signal ended it); a record whose message is a string keeps no code.
      if (!m || !m->is_object() || code == 0) return v.json();
      mr::Object message;
      for (const auto& [k, e] : m->as_object())
        if (k != "errorCode") message.emplace_back(k, e);
      message.emplace_back("errorCode", code);
      mr::Object top;
      for (const auto& [k, e] : v.as_object()) top.emplace_back(k, k == "message" ? mr::Value::object(message) : e);
      return mr::Value::object(top).json();
    } catch (const std::exception&) {
      // Not JSON: the record below, as for a worker without an error file.
    }
  }
  std::string tail;
  for (const std::string& l : root.stderr_tail) tail += l + "\n";
  const auto secs = std::chrono::duration_cast<std::chrono::seconds>(root.when.time_since_epoch()).count();
  mr::Object extra = {{"py_callstack", tail}, {"timestamp", std::to_string(secs)}};
  mr::Object message = {{"message", "worker " + who(root) + " on " + host_name() + " " + describe_end(root)},
                        {"extraInfo", mr::Value::object(extra)},
                        {"errorCode", code}};
  return mr::Value::object({{"message", mr::Value::object(message)}}).json();
}

std::string launcher_signal_record(int sig, long pid, long long when) {
  const std::string pid_text = std::to_string(pid);
  mr::Object extra = {{"py_callstack", "megatron-run (the launcher, pid " + pid_text + " on " + host_name() +
                                           ") received signal " + std::to_string(sig) + " (" + signal_name(sig) +
                                           ") and stopped its workers\n"},
                      {"timestamp", std::to_string(when)}};
  mr::Object message = {{"message", "SignalException: Process " + pid_text + " got signal: " + std::to_string(sig)},
                        {"extraInfo", mr::Value::object(extra)}};
  return mr::Value::object({{"message", mr::Value::object(message)}}).json();
}

std::string write_launcher_error_file(const std::string& path, const WorkerFailure& root) {
  return write_error_record(path, launcher_error_record(root));
}

namespace {
bool g_error_record_written = false;
}  // namespace

bool error_record_written() { return g_error_record_written; }

std::string write_error_record(const std::string& path, const std::string& record) {
  g_error_record_written = true;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return std::strerror(errno);
  out << record;
  out.close();
  if (!out) return std::strerror(errno);
  return "";
}

void print_failure_summary(std::ostream& os, const std::vector<WorkerFailure>& failures, int restarts,
                           int max_restarts, const std::string& first_elsewhere,
                           const std::vector<std::string>& incomplete_logs, const std::string& python) {
  if (failures.empty()) return;
  const RootCause cause = find_root_cause(failures);
  const WorkerFailure& root = failures[cause.index];
  const std::string n = std::to_string(restarts);
  os << "megatron-run: the job failed"
     << (max_restarts > 0 ? " (attempt_" + n + ", TORCHELASTIC_RESTART_COUNT=" + n + "; " +
                                (restarts >= max_restarts ? "no restart left, --max-restarts " + std::to_string(max_restarts)
                                                          : std::string("not restarted")) +
                                ")"
                          : "")
     << "\n";
  auto incomplete = [&] {
    if (incomplete_logs.empty()) return;
    os << "  log file" << (incomplete_logs.size() == 1 ? "" : "s")
       << " left incomplete (a write failed; nothing after it was written there):\n";
    for (const std::string& l : incomplete_logs) os << "    " << l << "\n";
  };
  // Every failed worker died of the signal the launcher passed on without stopping them (SIGUSR1): the same cause
  // for all, none of them a root cause, none stopped by the launcher (review user39 #5).
  const bool all_passed = std::all_of(failures.begin(), failures.end(), [&](const WorkerFailure& f) {
    return f.by_passed_signal && f.start_failure.empty() && WIFSIGNALED(f.status) &&
           WTERMSIG(f.status) == WTERMSIG(failures.front().status);
  });
  if (all_passed) {
    const int sig = WTERMSIG(failures.front().status);
    os << "  the worker" << (failures.size() == 1 ? " was" : "s were") << " killed by signal " << sig << " ("
       << signal_name(sig) << "), which the launcher received and passed on to them (it does not stop the "
       << "workers; their programs do not handle it):\n";
    for (const WorkerFailure& f : failures)
      os << "    " << who(f) << " on " << host_name() << " at " << local_time(f.when) << "\n";
    incomplete();
    return;
  }
  if (!first_elsewhere.empty()) os << "  root cause (first failure, on another node): " << first_elsewhere << "\n";
  const WorkerFailure& first = failures.front();
  if (first_elsewhere.empty() && cause.elsewhere_rank)  // named by this node's first failure (follows_rank)
    os << "  root cause (first failure, on another node): rank " << *cause.elsewhere_rank << ", which the error file "
       << "of this node's first failure (rank " << first.rank << ") names as the rank it failed because of\n";
  // A root cause a follower named that the launcher's stop killed (by a signal, not an exit of its own).
  const bool stopped_root = cause.index != 0 && root.after_stop && WIFSIGNALED(root.status);
  os << (first_elsewhere.empty() && !cause.elsewhere_rank ? "  root cause (first failure): "
                                                          : "  this node's first failure: ")
     << who(root) << " on " << host_name() << ", " << describe_end(root)
     << (stopped_root ? " (after the launcher stopped the workers)" : "") << " at " << local_time(root.when) << "\n";
  // The rank that exited first only followed it (review user39 #4). One the launcher's stop killed is not said to
  // have failed first: the follower's error file is what names it (review diff39 #5). One that exited with a code
  // of its own after the stop began (it was still failing) did fail first.
  if (cause.index != 0 && !stopped_root)
    os << "    it failed first; rank " << first.rank << " (pid " << first.pid << "), which exited first, failed "
       << "because of it (its error file says so; below)\n";
  else if (cause.index != 0)
    os << "    rank " << first.rank << " (pid " << first.pid << "), which exited first, names it in its error file "
       << "as the rank it failed because of (below)\n";
  if (auto e = read_error_file(root.error_file)) {
    os << "    error file " << root.error_file << ":\n";
    if (!e->raw.empty()) {
      indented(os, e->raw, "      ");
    } else {
      if (!e->message.empty()) indented(os, e->message, "      ");
      if (!e->traceback.empty()) indented(os, e->traceback, "      ");
    }
  }
  if (!root.stderr_tail.empty()) {
    os << "    last " << root.stderr_tail.size() << " line" << (root.stderr_tail.size() == 1 ? "" : "s")
       << " of its stderr"
       << (root.stderr_left_out ? " (" + std::to_string(root.stderr_left_out) + " torch log line" +
                                      (root.stderr_left_out == 1 ? "" : "s") + " left out)"
                                : std::string())
       << (root.stderr_filtered ? " (not shown on the console: --local-ranks-filter)" : "") << ":\n";
    for (const std::string& l : root.stderr_tail) os << "      " << l << "\n";
  } else if (!root.stderr_seen) {
    os << "    its stderr went straight to the console (above)\n";
  } else {
    os << "    its stderr was empty\n";
  }
  if (const std::string hint = exit_127_hint(root, util::address_space_limit()); !hint.empty())
    os << "    hint: " << hint << "\n";
  if (const std::string hint = thread_limit_hint(root, util::process_limit()); !hint.empty())
    os << "    hint: " << hint << "\n";
  if (const std::string hint = missing_module_hint(root, python); !hint.empty()) os << "    hint: " << hint << "\n";
  if (failures.size() == 1) {
    os << "  no other worker failed\n";
  } else {
    os << "  then (the cascade):\n";
    for (size_t i = 0; i < failures.size(); ++i) {
      if (i == cause.index) continue;
      const WorkerFailure& f = failures[i];
      // One that wrote its error file failed on its own too (an exception @record caught, often the root
      // cause's echo: "Connection closed by peer"), whatever ended it then: said with the file, which the kept
      // log directory's line may name (review launch37 #8).
      std::string wrote;
      if (auto e = read_error_file(f.error_file)) {
        std::string what = e->raw.empty() ? e->message : e->raw;
        what = what.substr(0, what.find('\n'));
        if (what.size() > 160) what = what.substr(0, 157) + "...";
        wrote = "wrote its error file " + f.error_file + (what.empty() ? std::string() : " (" + what + ")") + ", then ";
      }
      os << "    " << who(f) << ": " << wrote << describe_end(f)
         << (f.after_stop ? " (after the launcher stopped the workers)" : "") << "\n";
    }
  }
  incomplete();
}

}  // namespace mr::launch
