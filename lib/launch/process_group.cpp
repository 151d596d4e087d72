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

// A small /proc file read at once into `buf` (`cap` bytes, NUL-terminated): its length, 0 when it cannot be read
// (gone since its directory was listed, another user's) or is empty.
size_t read_small(const char* path, char* buf, size_t cap) {
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  const ssize_t n = read(fd, buf, cap - 1);
  close(fd);
  const size_t len = n > 0 ? static_cast<size_t>(n) : 0;
  buf[len] = '\0';
  return len;
}

// /proc/<pid>/stat is "pid (comm) state ppid pgrp ...": comm may hold blanks and parentheses, so the fields are
// read after its last ')'. Whether the process is alive (not a zombie) and in group `pgid`.
bool live_member(const char* pid_text, pid_t pgid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%s/stat", pid_text);
  char buf[1024];
  if (read_small(path, buf, sizeof buf) == 0) return false;  // gone since the directory was listed
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

namespace {

// The first line of a small /proc file, without its newline ("" when it cannot be read).
std::string first_line(const std::string& path) {
  char buf[256];
  const std::string s(buf, read_small(path.c_str(), buf, sizeof buf));
  return s.substr(0, s.find('\n'));
}

// Whether descriptor `fd` of `pid` is open for writing: /proc/<pid>/fdinfo/<fd>'s "flags:" (octal) has O_WRONLY
// or O_RDWR.
bool open_for_writing(pid_t pid, const char* fd) {
  char path[320];  // a descriptor's name is a number; d_name may hold 255 bytes
  std::snprintf(path, sizeof path, "/proc/%d/fdinfo/%s", static_cast<int>(pid), fd);
  char buf[512];
  if (read_small(path, buf, sizeof buf) == 0) return false;
  const char* flags = std::strstr(buf, "flags:");
  if (!flags) return false;
  unsigned long v = 0;
  if (std::sscanf(flags + 6, " %lo", &v) != 1) return false;
  return (v & O_ACCMODE) == O_WRONLY || (v & O_ACCMODE) == O_RDWR;
}

}  // namespace

std::vector<PipeHolder> pipe_holders(const std::vector<ino_t>& inodes, size_t max_links) {
  std::vector<PipeHolder> out;
  if (inodes.empty()) return out;
  DIR* proc = opendir("/proc");
  if (!proc) return out;
  const pid_t self = getpid();
  size_t links = 0;
  while (const dirent* e = readdir(proc)) {
    if (links >= max_links) break;
    pid_t pid = 0;
    const char* end = e->d_name + std::strlen(e->d_name);
    auto [p, ec] = std::from_chars(e->d_name, end, pid);
    if (ec != std::errc() || p != end || pid <= 0 || pid == self) continue;
    char path[64];
    std::snprintf(path, sizeof path, "/proc/%d/fd", static_cast<int>(pid));
    DIR* fds = opendir(path);
    if (!fds) continue;  // another user's (EACCES), or gone since the listing
    const size_t first = out.size();
    while (const dirent* f = readdir(fds)) {
      if (f->d_name[0] == '.') continue;
      if (++links > max_links) break;
      char link[320], target[64];
      std::snprintf(link, sizeof link, "/proc/%d/fd/%s", static_cast<int>(pid), f->d_name);
      const ssize_t n = readlink(link, target, sizeof target - 1);
      if (n <= 6) continue;
      target[n] = '\0';
      unsigned long long ino = 0;
      char close_bracket = 0;
      if (std::sscanf(target, "pipe:[%llu%c", &ino, &close_bracket) != 2 || close_bracket != ']') continue;
      if (std::find(inodes.begin(), inodes.end(), static_cast<ino_t>(ino)) == inodes.end()) continue;
      const bool writes = open_for_writing(pid, f->d_name);
      auto held = std::find_if(out.begin() + static_cast<long>(first), out.end(),
                               [&](const PipeHolder& h) { return h.inode == static_cast<ino_t>(ino); });
      if (held != out.end()) {
        held->writes = held->writes || writes;
        continue;
      }
      out.push_back({pid, "", static_cast<ino_t>(ino), writes});
    }
    closedir(fds);
    if (out.size() > first) {
      const std::string name = first_line("/proc/" + std::to_string(pid) + "/comm");
      for (size_t k = first; k < out.size(); ++k) out[k].name = name;
    }
  }
  closedir(proc);
  std::sort(out.begin(), out.end(), [](const PipeHolder& a, const PipeHolder& b) {
    return a.pid != b.pid ? a.pid < b.pid : a.inode < b.inode;
  });
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
