// The guardian: a small process the launcher forks before any worker, that stops the workers' process groups when
// the launcher dies without finishing (kill -9, the OOM killer). The workers die with the launcher on their own
// (PR_SET_PDEATHSIG), but what they started in their process groups (a data loader's processes, `sleep 1000 &`
// in a shell rank) does not: the guardian sends those groups SIGTERM and SIGCONT, waits the grace period
// (--term-timeout), then sends SIGKILL. Linux only.
//
// The launcher tells it each worker's process group as the worker starts (add) and before the worker is reaped
// (remove: its id may name another process afterwards), over a socket; the end of the socket without a "done"
// message is the launcher's death. A launcher that finishes normally says "done" and reaps it (the destructor).
// The guardian keeps no other descriptor of the launcher's but its stderr (for one notice), runs in a process group
// of its own (an enclosing launcher's SIGKILL to the launcher's group, torchrun's os.killpg, does not reach it: it
// then does its work and exits), ignores SIGINT, SIGTERM, SIGHUP and SIGQUIT, and does not die with the launcher.
#pragma once

#include <sys/types.h>

namespace mr::launch {

class Guardian {
 public:
  // Forks the guardian, which can record up to `max_groups` process groups at once (more are ignored) and waits
  // `grace_seconds` from SIGTERM to SIGKILL. Throws std::runtime_error when the socket or the fork fails.
  Guardian(int max_groups, double grace_seconds);
  // done(), then reaps the guardian.
  ~Guardian();
  Guardian(const Guardian&) = delete;
  Guardian& operator=(const Guardian&) = delete;

  // Worker process group `pgid` started / is about to be reaped. Never throws; a guardian gone already (killed
  // by someone) is not an error of the launcher's.
  void add(pid_t pgid);
  void remove(pid_t pgid);
  // The launcher finishes normally: the guardian exits without touching any group.
  void done();

  pid_t pid() const { return pid_; }

 private:
  void send(char op, pid_t pgid);
  pid_t pid_ = -1;
  int fd_ = -1;  // the launcher's end of the socket
};

}  // namespace mr::launch
