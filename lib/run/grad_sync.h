// The training run's collectives around the step: the gradient reductions before it, the statistics reduction
// (found-inf, norms), the distributed optimizer's parameter all-gather after it, and the replica check at the end.
// Internal to lib/run.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "optim/clip_grads.h"
#include "run/run_context.h"

namespace mr::run {

// The tied word embeddings' two copies sum their gradients; then the data-parallel sum (reduce-scatter with
// the distributed optimizer; routed experts over the expert data-parallel group) and the average over the global
// batch times the loss scale (run/synthetic_grad.h).
void reduce_grads(RunContext& c);
// Gradient statistics: the model-parallel group, or everyone with the distributed optimizer (the shards are
// spread over the data-parallel ranks as well).
void stats_reduce(RunContext& c, std::span<double> v, optim::ReduceOp op);
// The distributed optimizer's parameter all-gather: every rank's updated shard to every data-parallel rank.
void publish_params(RunContext& c);
// Every data-parallel replica must hold the same parameters, and the two copies of tied word embeddings the same
// values (RunError otherwise, its message starting with `when`): Megatron's check_param_hashes_across_dp_replicas,
// which --check-weight-hash-across-dp-replicas-interval asks for during the run.
void compare_replicas(RunContext& c, const std::string& when = "");
// compare_replicas, then model_checksum: the run's final check.
uint64_t check_replicas(RunContext& c);
// A checksum of the whole model that does not depend on the layout: the sum (mod 2^64) over every element, once,
// of a hash of (parameter key, index in the unsplit tensor, the value's bits in the training dtype).
uint64_t model_checksum(RunContext& c);

}  // namespace mr::run
