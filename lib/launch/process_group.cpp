// A worker's process group after the worker has exited (process_group.h).
#include "launch/process_group.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <string>

namespace mr::launch {

namespace {

// /proc/<pid>/stat is "pid (comm) state ppid pgrp ...": comm may hold blanks and parentheses, so the fields are
// read after its last ')'. Whether the process is alive (not a zombie) and in group `pgid`.
bool live_member(const char* pid_text, pid_t pgid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%s/stat", pid_text);
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;  // gone since the directory was listed
  char buf[1024];
  const ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return false;
  buf[n] = '\0';
  const char* close_paren = std::strrchr(buf, ')');
  if (!close_paren) return false;
  char state = 0;
  long ppid = 0, pgrp = 0;
  if (std::sscanf(close_paren + 1, " %c %ld %ld", &state, &ppid, &pgrp) != 3) return false;
  return pgrp == pgid && state != 'Z' && state != 'X';
}

}  // namespace

std::vector<pid_t> group_members(pid_t pgid) {
  std::vector<pid_t> out;
  DIR* proc = opendir("/proc");
  if (!proc) return out;
  while (const dirent* e = readdir(proc)) {
    pid_t pid = 0;
    const char* end = e->d_name + std::strlen(e->d_name);
    auto [p, ec] = std::from_chars(e->d_name, end, pid);
    if (ec != std::errc() || p != end || pid <= 0) continue;  // not a process's directory
    if (live_member(e->d_name, pgid)) out.push_back(pid);
  }
  closedir(proc);
  std::sort(out.begin(), out.end());
  return out;
}

int wait_status(const siginfo_t& info) {
  switch (info.si_code) {
    case CLD_EXITED: return (info.si_status & 0xff) << 8;         // WEXITSTATUS in the second byte
    case CLD_KILLED: return info.si_status & 0x7f;                // WTERMSIG in the low 7 bits
    case CLD_DUMPED: return (info.si_status & 0x7f) | 0x80;       // and the core-dump flag
    default: return 0;
  }
}

bool exited_unreaped(pid_t pid, int& status) {
  siginfo_t info{};
  if (waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0 || info.si_pid != pid)
    return false;  // still running (si_pid 0), or not our child
  status = wait_status(info);
  return true;
}

}  // namespace mr::launch
