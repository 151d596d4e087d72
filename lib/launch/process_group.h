// A worker's process group after the worker itself has exited: the processes it left in the group, and the wait
// status of an exit seen without reaping (so that the group's id, the worker's pid, is not reused). Linux only.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <string>
#include <vector>

namespace mr::launch {

// The live processes of process group `pgid` (zombies left out), from /proc, in ascending pid order. Empty when
// /proc cannot be read.
std::vector<pid_t> group_members(pid_t pgid);

// A process that holds a pipe open: its pid, its name (/proc/<pid>/comm, "" when unreadable), the pipe's inode
// (as fstat's st_ino of either end gives it), and whether it holds the write end (false: only the read end, or
// /proc/<pid>/fdinfo did not say).
struct PipeHolder {
  pid_t pid = 0;
  std::string name;
  ino_t inode = 0;
  bool writes = false;
};

// The processes other than this one that hold one of the pipes `inodes` open (a /proc/<pid>/fd link reads
// `pipe:[INODE]`), in ascending pid order, one entry per process and pipe. Bounded: at most `max_links` links
// are read in all (then the scan stops, with what it found so far); a process whose fd folder cannot be read
// (another user's, gone since the listing) is passed over quietly. Empty when /proc cannot be read.
std::vector<PipeHolder> pipe_holders(const std::vector<ino_t>& inodes, size_t max_links = 65536);

// The wait status (as waitpid gives it: WIFEXITED/WIFSIGNALED apply) of a child's exit that waitid reported.
int wait_status(const siginfo_t& info);

// Whether child `pid` has exited, without reaping it (waitid WNOWAIT): it stays a zombie, so its pid cannot name
// another process or group until the caller reaps it. Its wait status goes to `status`.
bool exited_unreaped(pid_t pid, int& status);

}  // namespace mr::launch
