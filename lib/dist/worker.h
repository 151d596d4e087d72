// megatron-run-worker: the torch-linked process megatron-run execs inside a job (one per rank). It joins the
// rendezvous, builds Megatron's process groups and, until the training loop lands, runs a self-check (an
// all-reduce in every group, the other collectives on the world group) and exits 0.
//
//   megatron-run-worker --input-fd N | --input FILE     (the JSON megatron-run writes: lib/dist/worker_input.h)
//
// Knobs for tests and operators (environment):
//   MR_DIST_TIMEOUT_S=S          overrides --distributed-timeout-minutes (rendezvous, collectives), in seconds
//   MR_DIST_HEARTBEAT_S=S        heartbeat / abort-check period (default 1)
//   MR_DIST_SELFCHECK_SECONDS=S  repeat the self-check for S seconds (default: once)
//   MR_DIST_REPORT=PREFIX        write PREFIX<rank>.json: the groups, the all-reduce results, the checks
#pragma once

namespace mr::dist {

int worker_main(int argc, char** argv);

}  // namespace mr::dist
