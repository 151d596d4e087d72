// Running out of a process resource (memory, address space, threads), said in one line that names the cause:
// under a finite address-space limit (RLIMIT_AS, `ulimit -v`, as some HPC nodes set) an allocation, a mapping or a
// thread's stack fails long before the machine's memory is used, and the bare std::bad_alloc or "Resource
// temporarily unavailable" would not say so.
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <optional>
#include <string>

namespace mr::util {

// This process's address-space limit (RLIMIT_AS, soft) in bytes; nullopt when unlimited.
std::optional<uint64_t> address_space_limit();

// This process's process and thread limit (RLIMIT_NPROC, soft, `ulimit -u`); nullopt when unlimited.
std::optional<uint64_t> process_limit();

// This process's open-file limit (RLIMIT_NOFILE, soft); nullopt when unlimited.
std::optional<uint64_t> open_file_limit();

// The soft open-file limit raised to the hard one (as Go programs and many launchers do at start; a worker with
// several peers opens a few descriptors for each). Returns the soft limit it had when it raised it (for a program
// started from here, which gets it back: a program may use select(), which cannot watch a descriptor above 1023),
// nullopt when it was not raised (already at the hard limit, or refused).
std::optional<uint64_t> raise_open_file_limit();

// The soft open-file limit this process started with, as raise_open_file_limit found it; nullopt when it was
// never raised. Read in a forked child (no allocation) to give a program back the user's limit.
std::optional<uint64_t> original_open_file_limit();

// "WHAT: strerror(err)" with the limit that explains it for EMFILE (RLIMIT_NOFILE, ulimit -n N), ENFILE (the
// system's table, fs.file-max) and EAGAIN from fork or pthread_create (ulimit -u N, a cgroup's pids.max), and a
// way out; the bare "WHAT: strerror(err)" for any other errno.
std::string system_failure(const std::string& what, int err);

// A message "WHAT: strerror(err)" (a system call's failure, as the launcher's spawner words it) for EMFILE,
// ENFILE or EAGAIN, without a limit named yet: system_failure's line for it; any other message unchanged.
std::string with_limit_hint(const std::string& message);

// A message of a library (c10d's, Gloo's) that says a descriptor could not be opened ("errno: 24", "Too many open
// files", "errno: 23"): one line naming the open-file limit (ulimit -n N) and the message; "" otherwise.
// With `nearly_exhausted`, a message that names no errno (Gloo's "Cannot resolve 127.0.0.1 to a (local) address"
// when its socket() failed, c10d's "Failed to create the control pipe") is taken for one too when this process
// has fewer than 3 descriptors left below its limit (open_files_nearly_exhausted()).
std::string open_file_failure(const std::string& message, bool nearly_exhausted = false);

// Whether fewer than 3 descriptors can still be opened below this process's open-file limit (tried with dup, each
// closed again).
bool open_files_nearly_exhausted();

// When `e` means that the process ran out of memory, address space or threads (std::bad_alloc; a
// std::system_error with EAGAIN or ENOMEM, as std::thread throws when it cannot create a thread), writes one line
// naming the cause (and the limit, when RLIMIT_AS is finite) into `out` and returns its length; else returns 0.
// Allocates nothing: usable where memory has run out (a std::terminate handler).
size_t resource_failure(const std::exception& e, char* out, size_t size);

// The same line as a string; "" when `e` is not a resource failure.
std::string resource_failure(const std::exception& e);

}  // namespace mr::util
