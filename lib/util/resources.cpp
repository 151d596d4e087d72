#include "util/resources.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <new>
#include <system_error>

namespace mr::util {

std::optional<uint64_t> address_space_limit() {
  rlimit as{};
  if (getrlimit(RLIMIT_AS, &as) != 0 || as.rlim_cur == RLIM_INFINITY) return std::nullopt;
  return static_cast<uint64_t>(as.rlim_cur);
}

std::optional<uint64_t> open_file_limit() {
  rlimit nofile{};
  if (getrlimit(RLIMIT_NOFILE, &nofile) != 0 || nofile.rlim_cur == RLIM_INFINITY) return std::nullopt;
  return static_cast<uint64_t>(nofile.rlim_cur);
}

std::optional<uint64_t> process_limit() {
  rlimit nproc{};
  if (getrlimit(RLIMIT_NPROC, &nproc) != 0 || nproc.rlim_cur == RLIM_INFINITY) return std::nullopt;
  return static_cast<uint64_t>(nproc.rlim_cur);
}

namespace {
// Set once, by raise_open_file_limit (before any thread or child exists); read by forked children.
bool g_nofile_raised = false;
rlim_t g_nofile_original = 0;

std::string limit_text(const std::optional<uint64_t>& limit) {
  return limit ? std::to_string(*limit) : std::string("unlimited");
}
}  // namespace

std::optional<uint64_t> raise_open_file_limit() {
  rlimit nofile{};
  if (getrlimit(RLIMIT_NOFILE, &nofile) != 0 || nofile.rlim_cur >= nofile.rlim_max) return std::nullopt;
  const rlim_t before = nofile.rlim_cur;
  nofile.rlim_cur = nofile.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &nofile) != 0) return std::nullopt;
  if (!g_nofile_raised) g_nofile_original = before;
  g_nofile_raised = true;
  return static_cast<uint64_t>(before);
}

std::optional<uint64_t> original_open_file_limit() {
  if (!g_nofile_raised) return std::nullopt;
  return static_cast<uint64_t>(g_nofile_original);
}

std::string system_failure(const std::string& what, int err) {
  std::string line = what + ": " + std::strerror(err);
  if (err == EMFILE) {
    line += ": this process's open-file limit (RLIMIT_NOFILE, ulimit -n " + limit_text(open_file_limit()) +
            ") is reached; raise it (ulimit -n)";
  } else if (err == ENFILE) {
    line += ": the system's open-file table is full (fs.file-max); close files or raise it";
  } else if (err == EAGAIN) {
    line += ": the process or user thread limit (ulimit -u " + limit_text(process_limit()) +
            ", a cgroup's pids.max) or the memory is exhausted; raise the limit (ulimit -u) or start fewer workers";
  }
  return line;
}

std::string with_limit_hint(const std::string& message) {
  if (message.find("ulimit") != std::string::npos) return message;
  for (int err : {EMFILE, ENFILE, EAGAIN}) {
    const std::string tail = std::string(": ") + std::strerror(err);
    if (message.size() > tail.size() && message.compare(message.size() - tail.size(), tail.size(), tail) == 0)
      return system_failure(message.substr(0, message.size() - tail.size()), err);
  }
  return message;
}

bool open_files_nearly_exhausted() {
  int fds[3] = {-1, -1, -1};
  bool exhausted = false;
  for (int& fd : fds) {
    fd = fcntl(2, F_DUPFD_CLOEXEC, 0);
    if (fd < 0) {
      exhausted = errno == EMFILE;
      break;
    }
  }
  for (int fd : fds)
    if (fd >= 0) close(fd);
  return exhausted;
}

std::string open_file_failure(const std::string& message, bool nearly_exhausted) {
  const bool process = message.find("errno: 24") != std::string::npos ||
                       message.find("Too many open files") != std::string::npos ||
                       (nearly_exhausted && open_files_nearly_exhausted());
  const bool system = message.find("errno: 23") != std::string::npos ||
                      message.find("Too many open files in system") != std::string::npos;
  if (!process && !system) return "";
  if (system)
    return "the system's open-file table is full (fs.file-max): a connection or pipe could not be opened (" +
           message + ")";
  return "out of file descriptors: this rank's open-file limit (RLIMIT_NOFILE, ulimit -n " +
         limit_text(open_file_limit()) + ") is reached; raise it (ulimit -n) (" + message + ")";
}

size_t resource_failure(const std::exception& e, char* out, size_t size) {
  if (!out || size == 0) return 0;
  const std::optional<uint64_t> as = address_space_limit();
  const unsigned long long kib = as ? static_cast<unsigned long long>(*as / 1024) : 0;
  int n = 0;
  if (dynamic_cast<const std::bad_alloc*>(&e)) {
    if (as)
      n = std::snprintf(out, size,
                        "out of address space: an allocation failed under this rank's address-space limit "
                        "(RLIMIT_AS, ulimit -v %llu); raise the limit (ulimit -v) or run a smaller job",
                        kib);
    else
      n = std::snprintf(out, size,
                        "out of memory: an allocation failed (more than this rank may have: its cgroup's "
                        "memory.max or the machine's memory)");
  } else if (const auto* se = dynamic_cast<const std::system_error*>(&e)) {
    const int code = se->code().value();
    const bool ours = se->code().category() == std::generic_category() ||
                      se->code().category() == std::system_category();
    if (!ours || (code != EAGAIN && code != ENOMEM)) return 0;
    const char* what = code == EAGAIN ? "a thread could not be created" : "memory could not be mapped";
    if (as)
      n = std::snprintf(out, size,
                        "out of address space: %s (%s) under this rank's address-space limit (RLIMIT_AS, "
                        "ulimit -v %llu; every thread's stack and every allocation count against it); raise the "
                        "limit (ulimit -v) or run a smaller job",
                        what, se->what(), kib);
    else if (code == EAGAIN)
      n = std::snprintf(out, size,
                        "%s (%s): the process or user thread limit (ulimit -u, a cgroup's pids.max) or the "
                        "memory is exhausted",
                        what, se->what());
    else
      n = std::snprintf(out, size, "out of memory: %s (%s)", what, se->what());
  } else {
    return 0;
  }
  if (n < 0) return 0;
  return static_cast<size_t>(n) < size ? static_cast<size_t>(n) : size - 1;
}

std::string resource_failure(const std::exception& e) {
  char buf[1024];  // as long as the worker's raw path's line can be
  const size_t n = resource_failure(e, buf, sizeof buf);
  return std::string(buf, n);
}

}  // namespace mr::util
