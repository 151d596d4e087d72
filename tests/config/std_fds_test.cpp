// util/std_fds.h: closed standard descriptors filled with /dev/null, in a forked child of their own.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "util/std_fds.h"

namespace {

// What the child found, one byte each (1: yes).
struct Found {
  char closed[3];       // std_fd_was_closed(fd)
  char open_now[3];     // fcntl(fd, F_GETFD) works
  char out_write_ebadf; // a write to stdout fails with EBADF
  char err_write_ok;    // a write to stderr succeeds
  char socket_above;    // a socketpair made afterwards has both ends >= 3
};

// Runs open_closed_std_fds in a child whose stdin, stdout and stderr are closed first as asked.
Found in_child(bool close_in, bool close_out, bool close_err) {
  int p[2];
  REQUIRE(pipe(p) == 0);  // both ends >= 3: 0..2 are open here
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    close(p[0]);
    if (close_in) close(0);
    if (close_out) close(1);
    if (close_err) close(2);
    mr::util::open_closed_std_fds();
    Found f{};
    for (int fd = 0; fd < 3; ++fd) {
      f.closed[fd] = mr::util::std_fd_was_closed(fd);
      f.open_now[fd] = fcntl(fd, F_GETFD) != -1;
    }
    errno = 0;
    f.out_write_ebadf = close_out ? (write(1, "x", 1) < 0 && errno == EBADF) : 0;
    f.err_write_ok = close_err ? write(2, "", 0) == 0 && write(2, "x", 1) == 1 : 1;
    int sv[2];
    f.socket_above = socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0 && sv[0] >= 3 && sv[1] >= 3;
    (void)!write(p[1], &f, sizeof f);
    _exit(0);
  }
  close(p[1]);
  Found f{};
  REQUIRE(read(p[0], &f, sizeof f) == static_cast<ssize_t>(sizeof f));
  close(p[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return f;
}

}  // namespace

TEST_CASE("std_fds: closed stdin, stdout and stderr get /dev/null; stdout's writes still fail", "[std_fds]") {
  const Found all = in_child(true, true, true);
  for (int fd = 0; fd < 3; ++fd) {
    INFO("fd " << fd);
    CHECK(all.closed[fd]);
    CHECK(all.open_now[fd]);
  }
  CHECK(all.out_write_ebadf);  // read-only /dev/null: the command still learns that it could not write
  CHECK(all.err_write_ok);     // what goes to a closed stderr is dropped
  CHECK(all.socket_above);     // no later socket takes 0, 1 or 2

  const Found out_only = in_child(false, true, false);
  CHECK_FALSE(out_only.closed[0]);
  CHECK(out_only.closed[1]);
  CHECK_FALSE(out_only.closed[2]);
  CHECK(out_only.socket_above);

  const Found none = in_child(false, false, false);
  for (int fd = 0; fd < 3; ++fd) CHECK_FALSE(none.closed[fd]);
}

TEST_CASE("std_fds: the reason a write to stdout failed", "[std_fds]") {
  // This process's stdout was open when the test started (std_fd_was_closed(1) is false here).
  CHECK(mr::util::stdout_write_failure(0) == "a write to stdout failed (a full disk or device?)");
  CHECK(mr::util::stdout_write_failure(EBADF) == "stdout is closed");
  CHECK(mr::util::stdout_write_failure(EPIPE) == "stdout is a pipe whose reader has gone (a closed pipe)");
  CHECK(mr::util::stdout_write_failure(ENOSPC) == "a write to stdout failed: No space left on device");
}

// Review hostile37 #6: a stream's failed write loses its errno; a stdout pipe whose reader has gone is still named.
TEST_CASE("stdout_write_failure(0) names a stdout pipe whose reader has gone", "[std-fds]") {
  int p[2], r[2], go[2];
  REQUIRE(pipe(p) == 0);
  REQUIRE(pipe(r) == 0);
  REQUIRE(pipe(go) == 0);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    close(r[0]);
    close(go[1]);
    dup2(p[1], 1);
    close(p[0]);  // the child's copy of the read end
    close(p[1]);
    char c = 0;
    (void)!read(go[0], &c, 1);  // the parent has closed its read end: no reader is left
    const std::string why = mr::util::stdout_write_failure(0);
    (void)!write(r[1], why.data(), why.size());
    _exit(0);
  }
  close(r[1]);
  close(go[0]);
  close(p[0]);
  close(p[1]);
  (void)!write(go[1], "g", 1);
  close(go[1]);
  std::string got;
  char buf[256];
  for (ssize_t n; (n = read(r[0], buf, sizeof buf)) > 0;) got.append(buf, static_cast<size_t>(n));
  close(r[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK(got == "stdout is a pipe whose reader has gone (a closed pipe)");
}
