// What megatron-run's own training run refuses, from the arguments alone. Torch-free (mr_run_model): the launcher
// checks it before any worker starts (rule init.training-run), and the worker's set-up (run/train.cpp) checks it
// again, so the two cannot disagree.
#pragma once

#include "config/args.h"
#include "config/rule.h"

namespace mr::run {

// The rules of what the training run refuses once its ranks run (stage "run"; docs/run.md), declared here, in the
// torch-free library megatron-run links, so that `megatron-run rules` lists them.
extern const Rule kHostMemoryRule;         // run.host-memory: buffers.cpp, train.cpp
extern const Rule kDeviceMemoryRule;       // run.device-memory: device_plan.cpp
extern const Rule kNanCheckRule;           // run.nan-check: train.cpp
extern const Rule kReplicaDivergenceRule;  // run.replica-divergence: grad_sync.cpp

// Throws RunError (run/model.h) naming the flags: an optimizer without a kernel of ours, Muon with --fp16 or a
// --muon-tp-mode it does not implement, --embedding-min-norm without --use-distributed-optimizer (or with fp16
// main params), a batch schedule Megatron would refuse (run/batch_schedule.h: a malformed
// --step-batch-size-schedule, a first step's batch that micro-batch x data-parallel size does not divide, a batch
// past the synthetic gradient's range), no --train-iters / --train-samples, and what the model plan refuses
// (run/model.h: plan_gpt_model, for every pipeline stage).
void check_run_supported(const Args& args);

}  // namespace mr::run
