// megatron-run-worker: one rank of a job (see lib/distributed/worker.h): bring-up, then the training run
// (lib/run/train.h). megatron-run execs it; not meant to be run by hand.
#include <iostream>

#include "distributed/worker.h"
#include "launch/worker_input.h"
#include "run/train.h"

int main(int argc, char** argv) {
  return mr::distributed::worker_main(argc, argv,
                               [](mr::distributed::Runtime& rt, const mr::launch::WorkerInput& in, const std::string& prefix) {
                                 if (in.train) mr::run::train(rt, in.args, std::cout, prefix, in.target);
                                 return 0;
                               });
}
