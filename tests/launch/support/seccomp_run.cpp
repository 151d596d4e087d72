// mr_test_seccomp_run MODE PROGRAM [ARGS...]: runs PROGRAM under a seccomp filter that makes one system call fail
// the way a test needs, in every process it starts (the filter is inherited across fork and exec). The launcher's
// tests use it to reach the forked child's failure paths deterministically, with nothing in megatron-run for it:
//   kill-exit-127     exit_group(127) or exit(127) kills the process instead (as if by SIGSYS): a child killed
//                     after it wrote its note that the exec failed and before its _exit(127);
//   deny-setaffinity  sched_setaffinity fails with EPERM: the CPU binding of --numa-binding fails in the child.
// Core dumps are off (RLIMIT_CORE 0). Exit 125 when the filter cannot be installed (the test then skips).
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <vector>

#if defined(__x86_64__)
#define MR_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define MR_AUDIT_ARCH AUDIT_ARCH_AARCH64
#endif

int main(int argc, char** argv) {
#ifndef MR_AUDIT_ARCH
  (void)argc, (void)argv;
  fprintf(stderr, "mr_test_seccomp_run: no seccomp filter for this architecture\n");
  return 125;
#else
  if (argc < 3) {
    fprintf(stderr, "usage: mr_test_seccomp_run kill-exit-127|deny-setaffinity PROGRAM [ARGS...]\n");
    return 2;
  }
  const bool kill_127 = strcmp(argv[1], "kill-exit-127") == 0;
  if (!kill_127 && strcmp(argv[1], "deny-setaffinity") != 0) {
    fprintf(stderr, "mr_test_seccomp_run: unknown mode %s\n", argv[1]);
    return 2;
  }
  std::vector<sock_filter> f = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, MR_AUDIT_ARCH, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
  };
  if (kill_127) {
    f.insert(f.end(), {
                          BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_exit_group, 1, 0),
                          BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_exit, 0, 3),
                          BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[0])),
                          BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 127, 0, 1),
                          BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
                          BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
                      });
  } else {
    f.insert(f.end(), {
                          BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_sched_setaffinity, 0, 1),
                          BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
                          BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
                      });
  }
  const rlimit no_core{0, 0};
  setrlimit(RLIMIT_CORE, &no_core);
  sock_fprog prog{static_cast<unsigned short>(f.size()), f.data()};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
    fprintf(stderr, "mr_test_seccomp_run: cannot install the filter: %s\n", strerror(errno));
    return 125;
  }
  execvp(argv[2], argv + 2);
  fprintf(stderr, "mr_test_seccomp_run: cannot run %s: %s\n", argv[2], strerror(errno));
  return 125;
#endif
}
