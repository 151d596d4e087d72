// The training-run loop (run/train.h). Its parts, one file each: the flat buffers (buffers.cpp), the gradient
// collectives (grad_sync.cpp), the norm, clip and optimizer step (step.cpp), the log lines (log.cpp).
#include "run/train.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <set>
#include <sstream>
#include <vector>

#include "config/optimizer_config_from_args.h"
#include "optim/kernels.h"
#include "run/grad_sync.h"
#include "run/log.h"
#include "run/run_context.h"
#include "run/step.h"

namespace mr::run {

namespace {

using Clock = std::chrono::steady_clock;

std::set<int64_t> iterations_from_env(const char* name) {
  std::set<int64_t> out;
  const char* v = std::getenv(name);
  if (!v) return out;
  std::stringstream ss(v);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.insert(std::stoll(item));
  return out;
}

// The settings of the run from the arguments, the plan and the buffers; RunError for what it does not handle.
void set_up(RunContext& c) {
  const Args& args = c.args;
  c.cfg = optimizer_config_from(args);
  c.optimizer = &optim::optimizer_info(args.optimizer);
  if (c.optimizer->kernel == optim::Kernel::None)
    throw RunError("the training run steps adam, sgd, lion and muon; --optimizer " + c.cfg.optimizer +
                   " is not supported yet");
  if (c.muon() && c.cfg.use_distributed_optimizer)
    throw RunError("the training run does not shard Muon's state: --optimizer muon with --use-distributed-optimizer "
                   "(Megatron's layer-wise distributed optimizer) is not supported yet");
  if (c.muon() && c.cfg.fp16)
    throw RunError("--optimizer muon does not run with --fp16 (Megatron gives Muon's parameters no loss scaler)");
  if (args.rampup_batch_size) throw RunError("the training run does not model --rampup-batch-size yet");
  if (!args.global_batch_size) throw RunError("the training run needs --global-batch-size");
  c.global_batch = *args.global_batch_size;
  if (args.train_iters && *args.train_iters > 0) {
    c.train_iters = *args.train_iters;
  } else if (args.train_samples) {
    // Sample-based (Megatron's update_train_iters without ramp-up): whole global batches.
    c.train_iters = *args.train_samples / c.global_batch;
  } else {
    throw RunError("the training run needs --train-iters or --train-samples");
  }
  c.log_interval = std::max<int64_t>(1, args.log_interval);
  c.seed = static_cast<uint64_t>(args.seed);
  c.init_std = args.init_method_std > 0 ? args.init_method_std : default_of(ArgId::init_method_std).as_float();

  RankCoord at{c.tp.rank(), c.tp.size(), c.pp.rank(), c.pp.size(), c.rt.group("ep").size(), c.rt.group("ep").rank(),
               c.etp.rank(), c.etp.size()};
  c.plan = plan_gpt_model(args, at);
  if (c.plan.has_experts() && (c.cfg.use_distributed_optimizer || c.muon()))
    throw RunError(std::string("the training run does not shard or orthogonalise routed experts yet: --num-experts with ") +
                   (c.muon() ? "--optimizer muon" : "--use-distributed-optimizer") + " is not supported");
  // Routed experts last: their gradients reduce over the expert data-parallel group, the rest over DP x CP.
  std::stable_partition(c.plan.params.begin(), c.plan.params.end(), [](const ParamSpec& p) { return !p.expert; });
  c.tied = !args.untie_embeddings_and_output_weights;
  c.dist_opt = c.cfg.use_distributed_optimizer && c.dp.size() > 1;
  const optim::DType dtype = c.cfg.bf16 ? optim::DType::BF16 : c.cfg.fp16 ? optim::DType::F16 : optim::DType::F32;
  c.scaler = optim::make_grad_scaler(c.cfg);
  c.schedule.emplace(optim::ScheduleConfig::from_args(args));
  c.buf.build(c.plan, *c.optimizer, dtype, c.dist_opt, c.dp.size(), c.dp.rank(), c.tp.rank(), c.seed, c.init_std,
              c.cfg.decoupled_lr.has_value());
}

// Loss of the current parameters (before this iteration's step) and this rank's gradients of the synthetic
// objective 0.5 * mean((p - target)^2), plus noise that differs per data-parallel replica, into the grad buffer.
double forward_and_grads(RunContext& c, int64_t it, bool inject_nonfinite) {
  FlatBuffers& b = c.buf;
  const float scale = c.scaler ? c.scaler->scale() : 1.0f;
  const float noise = static_cast<float>(c.init_std);
  double sum_sq = 0.0, count = 0.0, expert_sum_sq = 0.0, expert_count = 0.0;
  for (size_t k = 0; k < c.plan.params.size(); ++k) {
    const ParamSpec& p = c.plan.params[k];
    // The noise differs per data-parallel replica (of the dense part, or of this expert).
    const uint64_t replica = static_cast<uint64_t>(p.expert ? c.edp.rank() : c.dp.rank());
    const uint64_t key = name_key(p.key, c.seed ^ mix64(static_cast<uint64_t>(it) * 0x9e37ull + replica));
    const bool counted = c.is_counted(p);
    const int64_t cnt = p.numel(), base = b.offset[k];
    const int64_t tp_rank = c.tp.rank();
    double local = 0.0;
#pragma omp parallel for schedule(static) num_threads(optim::cpu::threads()) reduction(+ : local)
    for (int64_t i = 0; i < cnt; ++i) {
      const float w = to_float(b.model.data(), b.model_dtype, base + i);
      const float d = w - b.target[static_cast<size_t>(base + i)];
      const uint64_t gi = static_cast<uint64_t>(global_index(p, tp_rank, i));
      b.grad[static_cast<size_t>(base + i)] = (d + noise * uniform(key ^ mix64(gi))) * scale;
      local += static_cast<double>(d) * static_cast<double>(d);
    }
    if (counted) {
      (p.expert ? expert_sum_sq : sum_sq) += local;
      (p.expert ? expert_count : count) += static_cast<double>(cnt);
    }
  }
  if (inject_nonfinite && b.numel > 0) b.grad[0] = INFINITY;
  // The dense part once per model-parallel group; every routed expert once per expert model-parallel group.
  double v[2] = {sum_sq, count};
  c.mp.all_reduce(distributed::Buffer::cpu(v, 2), distributed::ReduceOp::Sum);
  if (c.plan.has_experts()) {
    double e[2] = {expert_sum_sq, expert_count};
    c.emp.all_reduce(distributed::Buffer::cpu(e, 2), distributed::ReduceOp::Sum);
    v[0] += e[0];
    v[1] += e[1];
  }
  return v[1] > 0 ? 0.5 * v[0] / v[1] : 0.0;
}

}  // namespace

TrainResult train(distributed::Runtime& rt, const Args& args, std::ostream& log, const std::string& prefix) {
  RunContext c(rt, args);
  set_up(c);
  TrainResult res;
  log_start(c, log, prefix);
  const std::set<int64_t> inject = iterations_from_env("MR_RUN_NONFINITE_AT");
  int64_t consumed = 0, skipped_total = 0, steps_done = 0;
  Window window;
  for (int64_t it = 1; it <= c.train_iters; ++it) {
    auto t0 = Clock::now();
    const double loss = forward_and_grads(c, it, inject.count(it) && rt.rank() == 0);
    if (it == 1) res.first_loss = loss;
    res.last_loss = loss;
    reduce_grads(c);
    // Unscale and look for inf/NaN (mixed precision with a loss scaler only, as Megatron).
    bool found_inf = false;
    if (c.scaler) {
      auto u = optim::cpu::unscale_and_check(c.buf.grad_slots(c.plan), c.scaler->inv_scale(), /*in_place=*/true);
      double f = u.found_inf ? 1.0 : 0.0;
      stats_reduce(c, std::span<double>(&f, 1), optim::ReduceOp::Max);
      found_inf = f > 0;
      c.scaler->update(found_inf);
    }
    double grad_norm = std::nan("");
    if (!found_inf) {
      grad_norm = clip_grad_norm(c);
      optimizer_step(c, ++steps_done);
      c.schedule->step(c.global_batch);
      publish_params(c);
    } else {
      ++skipped_total;
      ++window.skipped;
    }
    consumed += c.global_batch;
    res.last_grad_norm = grad_norm;
    window.elapsed_ms += std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    ++window.iterations;
    if (it % c.log_interval == 0 || it == c.train_iters) {
      log_iteration(c, log, prefix, it, consumed, window, loss, found_inf, grad_norm);
      window = Window{};
    }
  }
  res.iterations = c.train_iters;
  res.skipped = skipped_total;
  res.params_checksum = check_replicas(c);
  log_finished(c, log, prefix, res);
  return res;
}

}  // namespace mr::run
