// megatron-run-worker: one rank of a job (see lib/distributed/worker.h): bring-up, then the training run
// (lib/run/train.h). megatron-run execs it; not meant to be run by hand.
#include <iostream>

#include "distributed/worker.h"
#include "launch/worker_input.h"
#include "run/train.h"
#include "util/std_fds.h"

namespace {

// A closed stdout or stderr is filled first (util/std_fds.h): the store's and Gloo's sockets must not take fd 1 or 2.
void preinit(int, char** argv, char** envp) {
  mr::util::open_closed_std_fds();
  mr::distributed::worker_preinit(argv, envp);
}

}  // namespace

// Before any shared library's constructor (LibTorch registers its operators there, and may run out of memory
// under `ulimit -v`): the terminate handler must already be in place then.
__attribute__((section(".preinit_array"), used)) static void (*const mr_worker_preinit)(int, char**, char**) = preinit;

int main(int argc, char** argv) {
  const int code = mr::distributed::worker_main(
      argc, argv, [](mr::distributed::Runtime& rt, const mr::launch::WorkerInput& in, const std::string& prefix) {
        if (in.train) mr::run::train(rt, in.args, std::cout, prefix, in.target);
        return 0;
      });
  return mr::distributed::worker_exit(code);
}
