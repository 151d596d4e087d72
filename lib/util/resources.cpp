#include "util/resources.h"

#include <sys/resource.h>

#include <cerrno>
#include <cstdio>
#include <new>
#include <system_error>

namespace mr::util {

std::optional<uint64_t> address_space_limit() {
  rlimit as{};
  if (getrlimit(RLIMIT_AS, &as) != 0 || as.rlim_cur == RLIM_INFINITY) return std::nullopt;
  return static_cast<uint64_t>(as.rlim_cur);
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
