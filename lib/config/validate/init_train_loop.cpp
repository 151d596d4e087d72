// The init stage (init.h): settings Megatron's start-up takes as they are but its training loop (train,
// megatron/training/training.py) fails on once its ranks train — here the interval of the weight-hash check, which
// the loop takes `iteration % interval` of.
#include <string>

#include "config/validate/init.h"

namespace mr::init {
namespace {

MR_INIT_RULE(kWeightHashInterval, "init.weight-hash-interval-positive",
             "--check-weight-hash-across-dp-replicas-interval must not be 0 (the training loop takes the iteration "
             "modulo it: ZeroDivisionError).");

}  // namespace

void train_loop(Context& ctx) {
  if (!ctx.has("check_weight_hash_across_dp_replicas_interval") ||
      !ctx["check_weight_hash_across_dp_replicas_interval"].is_int())
    return;  // None: no check
  const int64_t every = ctx.i("check_weight_hash_across_dp_replicas_interval");
  ctx.require(every != 0, kWeightHashInterval,
              "Megatron would fail in its training loop (train): --check-weight-hash-across-dp-replicas-interval 0 "
              "is taken modulo every iteration (ZeroDivisionError after the first iteration); give a positive "
              "number of iterations, or leave it out to skip the check",
              {"check_weight_hash_across_dp_replicas_interval"});
}

}  // namespace mr::init
