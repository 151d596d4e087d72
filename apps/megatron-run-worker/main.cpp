// megatron-run-worker: one rank of a job (see lib/dist/worker.h). megatron-run execs it; not meant to be run
// by hand.
#include "dist/worker.h"

int main(int argc, char** argv) { return mr::dist::worker_main(argc, argv); }
