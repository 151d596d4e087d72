// The failure summary (failure_report.h).
#include "launch/failure_report.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>

#include "config/value.h"

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

void print_failure_summary(std::ostream& os, const std::vector<WorkerFailure>& failures, int attempts,
                           const std::string& first_elsewhere) {
  if (failures.empty()) return;
  const WorkerFailure& root = failures.front();
  os << "megatron-run: the job failed"
     << (attempts > 1 ? " (attempt " + std::to_string(attempts) + " of " + std::to_string(attempts) +
                            ", no restart left)"
                      : "")
     << "\n";
  if (!first_elsewhere.empty()) os << "  root cause (first failure, on another node): " << first_elsewhere << "\n";
  os << (first_elsewhere.empty() ? "  root cause (first failure): " : "  this node's first failure: ") << who(root) << " on " << host_name() << ", " << describe_status(root.status)
     << " at " << local_time(root.when) << "\n";
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
       << " of its stderr:\n";
    for (const std::string& l : root.stderr_tail) os << "      " << l << "\n";
  } else if (!root.stderr_seen) {
    os << "    its stderr went straight to the console (above)\n";
  } else {
    os << "    its stderr was empty\n";
  }
  if (failures.size() == 1) {
    os << "  no other worker failed\n";
    return;
  }
  os << "  then (the cascade):\n";
  for (size_t i = 1; i < failures.size(); ++i) {
    const WorkerFailure& f = failures[i];
    os << "    " << who(f) << ": " << describe_status(f.status)
       << (f.after_stop ? " (after the launcher stopped the workers)" : "") << "\n";
  }
}

}  // namespace mr::launch
