// A worker's process group after the worker itself has exited: the processes it left in the group, and the wait
// status of an exit seen without reaping (so that the group's id, the worker's pid, is not reused). Linux only.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <vector>

namespace mr::launch {

// The live processes of process group `pgid` (zombies left out), from /proc, in ascending pid order. Empty when
// /proc cannot be read.
std::vector<pid_t> group_members(pid_t pgid);

// The wait status (as waitpid gives it: WIFEXITED/WIFSIGNALED apply) of a child's exit that waitid reported.
int wait_status(const siginfo_t& info);

// Whether child `pid` has exited, without reaping it (waitid WNOWAIT): it stays a zombie, so its pid cannot name
// another process or group until the caller reaps it. Its wait status goes to `status`.
bool exited_unreaped(pid_t pid, int& status);

}  // namespace mr::launch
