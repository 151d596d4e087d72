// What the parts of the training run share (run/train.cpp drives them): the process groups, the model plan, the
// flat buffers' layout, the backend that holds their storage and does the work on them (run/backend.h: the CPU
// one with --distributed-backend gloo, the CUDA one with nccl, chosen here once) and the settings read once from
// the arguments. Internal to lib/run.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "config/args.h"
#include "config/optimizer_config.h"
#include "distributed/runtime.h"
#include "optim/dtype.h"
#include "optim/grad_scaler.h"
#include "optim/optimizer_table.h"
#include "optim/schedule.h"
#include "run/backend.h"
#include "run/batch_schedule.h"
#include "run/buffers.h"
#include "run/model.h"

namespace mr::run {

struct RunContext {
  RunContext(distributed::Runtime& rt, const Args& args, const TargetEnv& target)
      : rt(rt), args(args), target(target), tp(rt.group("tp")), pp(rt.group("pp")), dp(rt.group("dp-cp")), mp(rt.group("tp-pp")),
        edp(rt.group("expert-dp")), etp(rt.group("expert-tp")), emp(rt.group("expert-tp-ep-pp")),
        backend(make_backend(rt)) {}

  distributed::Runtime& rt;
  const Args& args;
  const TargetEnv target;  // the environment the arguments were validated for (its Transformer Engine version)
  distributed::Group &tp, &pp, &dp, &mp;
  distributed::Group &edp, &etp, &emp;  // expert data-parallel, expert tensor-parallel, expert model-parallel

  OptimizerConfig cfg;
  // The optimizer table's row of --optimizer (with the state --muon-scalar-optimizer gives Muon's scalar params).
  optim::OptimizerInfo optimizer = optim::optimizer_info(arg::Optimizer::adam);
  ModelPlan plan;
  // global_batch: the current step's samples (Megatron's running global batch size, from `batches`).
  int64_t train_iters = 0, global_batch = 1, log_interval = 1;
  std::optional<BatchSchedule> batches;
  uint64_t seed = 0;
  double init_std = 0;
  bool tied = true, dist_opt = false;
  std::optional<optim::GradScaler> scaler;
  GradFormat grad_format;  // Megatron's gradient buffer dtype (run/grad_format.h)
  std::optional<optim::ParamScheduler> schedule;
  FlatBuffers buf;                   // the layout (and, for the CPU backend, the storage)
  std::unique_ptr<Backend> backend;  // the device: buffers' storage, kernels, collectives on them

  bool muon() const { return optimizer.kernel == optim::Kernel::Muon; }
  // Counted once in losses and norms: not a TP copy (expert TP for routed experts), not the tied output copy.
  bool is_counted(const ParamSpec& p) const {
    if (p.expert) return !(p.tp_duplicate && etp.rank() != 0);
    return !(p.tp_duplicate && tp.rank() != 0) && !p.shared_copy;
  }
  // Whether this rank's copy is the one that stands for the parameter in whole-model sums (loss, params norm,
  // checksum): counted, and on the first (expert) data-parallel replica — every element of the model once.
  bool owns(const ParamSpec& p) const { return is_counted(p) && (p.expert ? edp.rank() : dp.rank()) == 0; }
  // The tensor-parallel rank that splits the parameter: the expert TP rank for routed experts.
  int64_t tp_rank_of(const ParamSpec& p) const { return p.expert ? etp.rank() : tp.rank(); }
};

}  // namespace mr::run
