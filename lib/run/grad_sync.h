// The training run's collectives around the step: the gradient reductions before it, the statistics reduction
// (found-inf, norms), the distributed optimizer's parameter all-gather after it, and the replica check at the end.
// Internal to lib/run.
#pragma once

#include <cstdint>
#include <span>

#include "optim/clip_grads.h"
#include "run/run_context.h"

namespace mr::run {

// The tied word embeddings' two copies sum their gradients; then the data-parallel average (reduce-scatter with
// the distributed optimizer); routed experts average over the expert data-parallel group.
void reduce_grads(RunContext& c);
// Gradient statistics: the model-parallel group, or everyone with the distributed optimizer (the shards are
// spread over the data-parallel ranks as well).
void stats_reduce(RunContext& c, std::span<double> v, optim::ReduceOp op);
// The distributed optimizer's parameter all-gather: every rank's updated shard to every data-parallel rank.
void publish_params(RunContext& c);
// Every data-parallel replica must hold the same parameters, and the two copies of tied word embeddings the same
// values (RunError otherwise); returns this rank's checksum.
uint64_t check_replicas(RunContext& c);

}  // namespace mr::run
