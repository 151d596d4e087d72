// Closed standard descriptors (std_fds.h).
#include "util/std_fds.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace mr::util {

namespace {

bool g_closed[3] = {false, false, false};

}  // namespace

void open_closed_std_fds() {
  for (int fd = 0; fd < 3; ++fd) {
    if (fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
    // The lowest free number is `fd` itself (the ones below it are open now); dup2 in case it is not.
    const int got = open("/dev/null", fd == 2 ? O_WRONLY : O_RDONLY);
    if (got < 0) continue;  // no /dev/null (a bare chroot): nothing better to do
    if (got != fd) {
      dup2(got, fd);
      close(got);
    }
    g_closed[fd] = true;
  }
}

bool std_fd_was_closed(int fd) { return fd >= 0 && fd < 3 && g_closed[fd]; }

std::string stdout_write_failure(int e) {
  if (std_fd_was_closed(1) || e == EBADF) return "stdout is closed";
  if (e == EPIPE) return "stdout is a pipe whose reader has gone (a closed pipe)";
  if (e != 0) return std::string("a write to stdout failed: ") + std::strerror(e);
  // The write's errno is lost (a C++ stream keeps only its fail bit): a pipe whose reader has gone still says so,
  // as poll's POLLERR on its write end.
  struct stat st {};
  pollfd p{1, POLLOUT, 0};
  if (fstat(1, &st) == 0 && S_ISFIFO(st.st_mode) && poll(&p, 1, 0) == 1 && (p.revents & POLLERR))
    return stdout_write_failure(EPIPE);
  return "a write to stdout failed (a full disk or device?)";
}

}  // namespace mr::util
