// stdin, stdout and stderr closed when a process starts (`cmd >&-`, `2>&-`, a daemon's careless parent): the next
// descriptor the process opens (a socket, a pipe, a log file) would take the lowest free number, 0, 1 or 2, and
// what is meant for the console would go into it. Each main calls open_closed_std_fds first thing.
#pragma once

#include <string>

namespace mr::util {

// Opens /dev/null on each of fds 0, 1 and 2 that is closed, and records which were. stdin is opened for reading
// and stderr for writing (what goes there is dropped, as on the closed fd). stdout is opened read-only: a write to
// it still fails (EBADF) as it did on the closed fd, so a command that has output still says that it could not
// write it, and std_fd_was_closed(1) tells why. System calls only (a worker calls it from .preinit_array).
void open_closed_std_fds();

// Whether `fd` (0, 1 or 2) was closed when open_closed_std_fds ran.
bool std_fd_was_closed(int fd);

// The reason in "cannot write the output: REASON" for a failed write to stdout with errno `e` (0: not known):
// "stdout is closed", "stdout is a pipe whose reader has gone (a closed pipe)", "a write to stdout failed: No
// space left on device", or (0) "a write to stdout failed (a full disk or device?)" -- for 0, a stdout pipe whose
// reader has gone is still told (poll's POLLERR).
std::string stdout_write_failure(int e);

}  // namespace mr::util
