// megatron-run-worker: one rank of a job (see lib/dist/worker.h): bring-up, then the training run
// (lib/run/train.h). megatron-run execs it; not meant to be run by hand.
#include <iostream>

#include "dist/worker.h"
#include "dist/worker_input.h"
#include "run/train.h"

int main(int argc, char** argv) {
  return mr::dist::worker_main(argc, argv,
                               [](mr::dist::Runtime& rt, const mr::dist::WorkerInput& in, const std::string& prefix) {
                                 if (in.train) mr::run::train(rt, in.ns, std::cout, prefix);
                                 return 0;
                               });
}
