// The training-run loop (run/train.h). Its parts, one file each: the flat buffers' layout (buffers.cpp), the
// gradient collectives (grad_sync.cpp), the norm, clip and optimizer step (step.cpp), the log lines (log.cpp); all
// work on the buffers goes through the backend (run/backend.h, the CPU one in backend_cpu.cpp).
#include "run/host_collectives.h"
#include "run/train.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "config/optimizer_config_from_args.h"
#include "optim/dtype.h"
#include "optim/soap.h"
#include "run/abs_max.h"
#include "run/checkpoint.h"
#include "run/checkpoint_resume_args.h"
#include "run/embedding_norm.h"
#include "run/grad_sync.h"
#include "run/log.h"
#include "run/run_context.h"
#include "run/run_support.h"
#include "run/step.h"
#include "run/exact_stats.h"
#include "run/synthetic_grad.h"

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
  check_run_supported(args);  // what the launcher checked before starting us (run/run_support.h)
  c.cfg = optimizer_config_from(args);
  c.optimizer = optim::optimizer_info(args.optimizer, args.muon_scalar_optimizer);
  // The CPU backend's SOAP eigendecompositions need LAPACK (the CUDA backend's run on cuSOLVER).
  if (c.optimizer.kernel == optim::Kernel::Soap && args.distributed_backend != arg::DistributedBackend::nccl &&
      !optim::cpu::have_lapack())
    throw RunError("--optimizer soap on the CPU backend needs LAPACK (its eigendecompositions), and this worker was "
                   "built without it (OpenBLAS with LAPACK: scripts/setup.sh installs it)");
  c.batches = BatchSchedule::from(args);
  c.global_batch = c.batches->peek(0).running;  // each step's is checked when it comes (the loop)
  // Sample-based: Megatron's update_train_iters (whole global batches, or the steps of the schedule).
  c.train_iters =
      args.train_iters && *args.train_iters > 0 ? *args.train_iters : c.batches->iterations_for(*args.train_samples);
  // Megatron logs where `iteration % --log-interval == 0`: a negative interval at every multiple of its size
  // (validation refuses 0).
  c.log_interval = args.log_interval == std::numeric_limits<int64_t>::min()
                       ? std::numeric_limits<int64_t>::max()
                       : std::max<int64_t>(1, args.log_interval < 0 ? -args.log_interval : args.log_interval);
  c.seed = static_cast<uint64_t>(args.seed);
  c.init_std = args.init_method_std;  // 0: zero matrices, as Megatron's normal_(std=0) (sanity refuses < 0)

  RankCoord at{c.tp.rank(), c.tp.size(), c.pp.rank(), c.pp.size(), c.rt.group("ep").size(), c.rt.group("ep").rank(),
               c.etp.rank(), c.etp.size()};
  c.plan = plan_gpt_model(args, at);
  // Routed experts last: their gradients reduce over the expert data-parallel group, the rest over DP x CP.
  std::stable_partition(c.plan.params.begin(), c.plan.params.end(), [](const ParamSpec& p) { return !p.expert; });
  c.tied = !args.untie_embeddings_and_output_weights;
  // --optimizer dist_muon: Megatron's deprecated spelling of muon with the distributed optimizer.
  c.dist_opt = (c.cfg.use_distributed_optimizer || args.optimizer == arg::Optimizer::dist_muon) && c.dp.size() > 1;
  c.scaler = optim::make_grad_scaler(c.cfg);
  c.grad_format = grad_format(args);
  c.schedule.emplace(optim::ScheduleConfig::from_args(args));
  // Megatron's emerging optimizers (muon, adaptive_muon, lion, soap: every optimizer but adam and sgd) take its layer-wise
  // path (whole parameters per rank, finalize_optimizer_config); adam and sgd shard element ranges.
  const bool layer_wise = c.optimizer.scalar_rule != optim::ScalarRule::None;
  const ShardGroups shards{c.dist_opt, c.dp.size(), c.dp.rank(), c.edp.size(), c.edp.rank(), layer_wise};
  // Rule run.device-memory counts the CUDA Muon step's scratch too (the CPU step's is host memory, not checked).
  if (std::string(c.backend->name()) == "cuda") c.buf.muon_work_bytes = muon_device_work_bytes(c);
  // Rule run.host-memory (the CPU backend's buffers are host memory): every rank checks before any allocates, and
  // all stop alike; a rank that checked after another rank of its machine had allocated would count that one's
  // share twice and refuse a job that fits.
  if (std::string(c.backend->name()) == "cpu") {
    c.buf.set_layout(c.plan, c.optimizer, buffer_dtypes(args, c.target), shards, c.cfg.decoupled_lr.has_value());
    std::string why;
    try {
      c.buf.check_memory();
    } catch (const RunError& e) {
      why = e.what();
    }
    double refused = why.empty() ? 0.0 : 1.0;
    host_all_reduce(c.rt.group("world"), distributed::Buffer::cpu(&refused, 1), distributed::ReduceOp::Max);
    if (!why.empty()) throw distributed::RootCauseError(why);
    if (refused > 0)
      throw distributed::FollowerError(with_rule_id(kHostMemoryRule.id, "another rank's buffers do not fit its "
                                                                        "machine's memory (said by that rank)"));
  }
  c.backend->build(c.buf, c.plan, c.optimizer, buffer_dtypes(args, c.target), shards, c.tp.rank(), c.etp.rank(),
                   c.seed, c.init_std, c.cfg.decoupled_lr.has_value());
}

// Megatron's --check-for-nan-in-loss-and-grad failure (rerun_state_machine.validate_result, fatal): the run stops
// on every rank alike, the ranks that saw the value say so.
[[noreturn]] void throw_nonfinite(RunContext& c, int64_t it, const char* where, double value, bool mine) {
  std::ostringstream s;
  s << with_rule_id(kNanCheckRule.id, "iteration ") << it << ": found " << (std::isnan(value) ? "NaN" : "Inf") << " in " << where
    << (mine ? " on rank " + std::to_string(c.rt.rank()) : std::string(" on another rank"))
    << "; --check-for-nan-in-loss-and-grad (Megatron's default) stops the run "
       "(--no-check-for-nan-in-loss-and-grad goes on and logs it)";
  // A rank that only follows another's failure lingers before it exits (distributed::FollowerError), so that the
  // launcher's first failure is a rank that saw the value; that rank waits a shorter grace
  // (distributed::RootCauseError), so that the followers have said theirs before the launcher stops them.
  if (!mine) throw distributed::FollowerError(s.str());
  throw distributed::RootCauseError(s.str());
}

// Each rank's gradient before the data-parallel reduction, as Megatron's check_grads looks at each bucket's:
// a NaN or inf anywhere stops the run on every rank (one all-reduce of the max).
// Under --fp16 the rank's own buffer holds its samples' mean gradient times the loss scale in fp16 (Megatron's
// check_grads reads it so): beyond fp16's range that is inf, and the check stops the run -- with a constant
// --loss-scale, where validation leaves the check on (dynamic scaling turns it off and skips the step instead).
void check_local_grads(RunContext& c, int64_t it) {
  double mine = c.backend->max_abs(c.backend->ptrs().grad, c.buf.numel);
  bool f16_overflow = false;
  if (c.grad_format.f16_range && c.scaler && std::isfinite(mine)) {
    // A rank's part is 8x the sum over its global_batch / dp samples (run/synthetic_grad.h).
    const double local = mine * static_cast<double>(c.scaler->scale()) * static_cast<double>(c.dp.size()) /
                         (8.0 * static_cast<double>(c.global_batch));
    if (!std::isfinite(static_cast<double>(optim::round_to_f16(static_cast<float>(std::min(local, 1e30)))))) {
      f16_overflow = true;
      mine = std::numeric_limits<double>::infinity();
    }
  }
  const double top = all_reduce_max(c.rt.group("world"), mine);
  if (!std::isfinite(top))
    throw_nonfinite(c, it,
                    f16_overflow ? "the local gradient before the data-parallel reduction (beyond fp16's range at "
                                   "the constant --loss-scale)"
                                 : "the local gradient before the data-parallel reduction",
                    top, !std::isfinite(mine));
}

// Loss of the current parameters (before this iteration's step) and this rank's part of the synthetic
// gradient (run/synthetic_grad.h: its sum over this rank's samples, times 8; reduce_grads averages) into the
// grad buffer. The loss, 0.5 * mean((p - target)^2) over the whole model, is summed in fixed point
// (run/exact_stats.h), so that it is the same bits under every layout.
double forward_and_grads(RunContext& c, int64_t it, int64_t consumed, bool inject_nonfinite) {
  FlatBuffers& b = c.buf;
  Backend& dev = *c.backend;
  const BufferPtrs d = dev.ptrs();
  const int bits = quantize_bits(c.global_batch);
  const SampleTable dense(dense_samples(c.seed, it, consumed, c.global_batch, c.args.micro_batch_size,
                                          c.dp.size(), c.dp.rank()));
  const SampleTable experts(expert_samples(c.seed, it, consumed, c.global_batch, c.edp.size(), c.edp.rank()));
  const uint64_t it_key = c.seed ^ mix64(static_cast<uint64_t>(it));
  uint32_t local_max = 0;  // max |p - target| as bits: a NaN is the max (run/abs_max.h)
  for (size_t k = 0; k < c.plan.params.size(); ++k) {
    const ParamSpec& p = c.plan.params[k];
    const SampleTable& s = p.expert ? experts : dense;
    const uint32_t key = static_cast<uint32_t>(name_key(p.key, it_key));
    const int64_t cnt = p.numel(), base = b.offset[k], tp_rank = c.tp_rank_of(p);
    const bool zero = p.shared_copy;  // the tied output copy: the first stage's gradient is the whole one
    const size_t bytes = static_cast<size_t>(base) * dtype_bytes(b.model_dtype);
    const float m = dev.synthetic_grads(p, tp_rank, key, s, bits, zero,
                                        {static_cast<uint8_t*>(d.model) + bytes, b.model_dtype, d.target + base, d.grad + base, cnt});
    local_max = max_bits(local_max, abs_bits(m));
  }
  if (inject_nonfinite && b.numel > 0) dev.set_grad(0, INFINITY);
  // The loss: every element once (counted, on the first data-parallel replica), summed exactly over the world.
  // A NaN or inf anywhere makes it NaN or inf (as Megatron's); --check-for-nan-in-loss-and-grad stops the run.
  const double top = all_reduce_max(c.rt.group("world"), static_cast<double>(abs_of_bits(local_max)));
  if (!std::isfinite(top)) {
    if (c.args.check_for_nan_in_loss_and_grad)
      throw_nonfinite(c, it, "the loss", top, !std::isfinite(abs_of_bits(local_max)));
    return top;
  }
  const int e = fixed_exponent(top);
  Fixed sum = 0;
  double count = 0;
  for (size_t k = 0; k < c.plan.params.size(); ++k) {
    const ParamSpec& p = c.plan.params[k];
    if (!c.owns(p)) continue;
    const int64_t cnt = p.numel(), base = b.offset[k];
    sum += dev.sum_squares_model_minus_target(base, base + cnt, e);
    count += static_cast<double>(cnt);
  }
  distributed::Group& world = c.rt.group("world");
  host_all_reduce(world, distributed::Buffer::cpu(&count, 1), distributed::ReduceOp::Sum);
  const Fixed total = all_reduce_sum(world, sum);
  return count > 0 ? 0.5 * to_double(total, e) / count : 0.0;
}

}  // namespace

TrainResult train(distributed::Runtime& rt, const Args& args, std::ostream& log, const std::string& prefix,
                  const TargetEnv& target) {
  const Args run_args = resume_args(args);  // --load: the checkpoint's seed when its RNG state is restored
  RunContext c(rt, run_args, target);
  set_up(c);
  TrainResult res;
  log_start(c, log, prefix);
  Checkpointer ckpt(c, log, prefix, args.seed);  // --save is writable, --exit-signal-handler installed
  const Progress resumed = ckpt.load();
  // --skip-train: Megatron skips its train() call and the final save after it (training.py), and only evaluates;
  // the checkpoint is loaded all the same. The synthetic run has no evaluation: it ends here with 0 iterations.
  if (args.skip_train) {
    if (rt.rank() == 0)
      log << prefix << "megatron-run: training skipped (--skip-train): 0 iterations run, nothing saved"
          << (args.save ? " to --save " + *args.save : std::string())
          << "; Megatron would evaluate next, and the synthetic run has no evaluation" << std::endl;
    res.iterations = resumed.iteration;
    res.skipped_train = true;
    res.params_checksum = check_replicas(c);
    log_finished(c, log, prefix, res);
    return res;
  }
  const std::set<int64_t> inject = iterations_from_env("MR_RUN_NONFINITE_AT");
  const std::set<int64_t> diverge = iterations_from_env("MR_RUN_DIVERGE_AT");
  const std::set<int64_t> to_skip(args.iterations_to_skip.begin(), args.iterations_to_skip.end());
  // --iterations-to-skip values this run never reaches skip nothing (as in Megatron, whose loop only meets the
  // iterations it runs): named, so that a typo or a resumed run's past iteration is not taken for a skip.
  if (rt.rank() == 0 && resumed.iteration < c.train_iters) {
    std::ostringstream never;
    for (int64_t i : to_skip)
      if (i <= resumed.iteration || i > c.train_iters) never << (never.tellp() > 0 ? " " : "") << i;
    if (never.tellp() > 0)
      log << prefix << "notice: --iterations-to-skip " << never.str() << ": not among this run's iterations ("
          << resumed.iteration + 1 << " to " << c.train_iters << "), so nothing is skipped there" << std::endl;
  }
  int64_t consumed = resumed.consumed_samples, skipped_total = resumed.skipped, steps_done = resumed.optimizer_steps;
  int64_t skipped_samples = resumed.skipped_samples;
  int64_t last = resumed.iteration;
  // The run's first iteration that trains (Megatron's start_iteration, moved past the skipped ones at the start):
  // its line is always printed, and it starts the loss the summary reports.
  int64_t first = resumed.iteration + 1;
  bool stopped = false;
  int64_t kept = 0;  // this run's iterations that were not skipped
  // --freeze-all-layers: every parameter frozen (Megatron's _freeze_all_model_chunks, requires_grad_(False)): its
  // train_step runs the forward pass only (forward_only, torch.no_grad), so there is the loss and no gradient; its
  // optimizer holds no parameters (a stub): no inf check of gradients, a grad norm of 0.0, no update, the scheduler
  // stepped all the same (update_successful), the loss scaler updated with no overflow. The synthetic gradient is
  // made with the loss in one pass (forward_and_grads) and left unused.
  const bool frozen = args.freeze_all_layers;
  Window window;
  Backend& dev = *c.backend;
  // --check-weight-hash-across-dp-replicas-interval: once before the first iteration (after --load), then after
  // every multiple of it, as Megatron's train (the check runs whether or not it has anything to compare).
  const std::optional<int64_t> hash_every = args.check_weight_hash_across_dp_replicas_interval;
  if (hash_every) {  // Megatron's line after this check too, with the loaded iteration (0 for a fresh run)
    compare_replicas(c, "before iteration " + std::to_string(resumed.iteration + 1) + ": ");
    if (rt.rank() == 0) log << prefix << ">>> Weight hashes match after " << resumed.iteration << " iterations..." << std::endl;
  }
  for (int64_t it = resumed.iteration + 1; it <= c.train_iters; ++it) {
    auto t0 = Clock::now();
    // This step's samples (a schedule's step, if any); Megatron's checks: the size fits micro-batch x DP, and the
    // micro-batches never decrease from one step to the next.
    const BatchSchedule::Step step = c.batches->at(consumed);
    if (it > resumed.iteration + 1 && step.running < c.global_batch)
      throw RunError("iteration " + std::to_string(it) + ": the number of micro-batches would decrease (global batch " +
                     std::to_string(c.global_batch) + " -> " + std::to_string(step.running) +
                     ", --step-batch-size-schedule); Megatron refuses that");
    // Megatron's train loop saves a checkpoint (with --save, whatever --save-interval is) when the number of
    // micro-batches changes between two iterations, at the top of the new one: its `iteration` is the one just
    // run. The micro-batch size and the data-parallel size are fixed, so the running batch size changes with it.
    if (it > resumed.iteration + 1 && step.running != c.global_batch)
      ckpt.on_microbatch_change({it - 1, consumed, skipped_total, steps_done, skipped_samples}, c.global_batch,
                                step.running);
    c.global_batch = step.running;
    // --iterations-to-skip: the iteration's samples are consumed (the later iterations draw the samples they would
    // have drawn) and counted as skipped; no gradient, step, scheduler step, line, check or save, as Megatron's
    // train loop `continue`s past it.
    if (to_skip.count(it)) {
      if (it == first) ++first;
      consumed += c.global_batch;
      skipped_samples += c.global_batch;
      last = it;
      ++res.passed_over;
      continue;
    }
    dev.start_timing();
    const double loss = forward_and_grads(c, it, consumed, !frozen && inject.count(it) && rt.rank() == 0);
    if (args.check_for_nan_in_loss_and_grad && !frozen) check_local_grads(c, it);
    dev.end_phase(Phase::Grads);
    if (it == first) res.first_loss = loss;
    res.last_loss = loss;
    if (!frozen) {
      reduce_grads(c);
      // MR_RUN_DIVERGE_AT (tests): data-parallel rank 1 alone changes a reduced gradient, so that its replica drifts.
      if (diverge.count(it) && c.dp.rank() == 1 && c.buf.numel > 0) dev.set_grad(0, 1.0f);
      dev.end_phase(Phase::GradsReduce);
    }
    // Unscale and look for inf/NaN (mixed precision with a loss scaler only, as Megatron).
    bool found_inf = false;
    if (frozen) {
      if (c.scaler) c.scaler->update(false);  // the stub optimizer's found_inf stays 0
    } else if (c.scaler) {
      double f = unscale_and_check(c) ? 1.0 : 0.0;
      stats_reduce(c, std::span<double>(&f, 1), optim::ReduceOp::Max);
      found_inf = f > 0;
      c.scaler->update(found_inf);
      dev.end_phase(Phase::UnscaleCheck);
    }
    double grad_norm = std::nan("");
    StepReport report;
    if (frozen) {
      grad_norm = 0.0;  // get_grad_norm_fp32 of no gradients
      if (args.log_num_zeros_in_grad) report.zeros = 0;
      c.schedule->step(c.global_batch);
      window.loss_sum += loss;
      ++window.advanced;
    } else if (!found_inf) {
      grad_norm = clip_grad_norm(c);
      if (args.log_num_zeros_in_grad) report.zeros = count_zeros_in_grad(c);  // after the clip, as Megatron
      dev.end_phase(Phase::ClipNorm);
      optimizer_step(c, ++steps_done);
      apply_embedding_min_norm(c);  // --embedding-min-norm: on the masters this step left, before they are published
      c.schedule->step(c.global_batch);
      dev.end_phase(Phase::Step);
      publish_params(c);
      dev.end_phase(Phase::ParamsGather);
      window.loss_sum += loss;
      ++window.advanced;
    } else {
      ++skipped_total;
      ++window.skipped;
      if (!std::isfinite(loss)) ++window.nan;
    }
    consumed += c.global_batch;
    // Megatron counts the samples --decrease-batch-size-if-needed leaves out of each step as skipped too (global
    // minus running batch size, after every iteration that ran).
    skipped_samples += step.global - step.running;
    if (!found_inf) {  // a skipped step has none (Megatron's grad_norm None)
      res.last_grad_norm = grad_norm;
      res.stepped = true;
      ++kept;
    }
    window.elapsed_ms += std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    ++window.iterations;
    // Megatron's training_log: a line every --log-interval iterations and after the run's first (a resumed run's
    // too), none for a last iteration off the interval.
    const bool first_of_run = it == first;
    if (it % c.log_interval == 0 || first_of_run) {
      report.grad_norm = grad_norm;
      report.run_kept_one = kept > 0;
      report.skipped_samples = skipped_samples;
      if (args.log_params_norm) report.params_norm = params_norm(c);
      log_iteration(c, log, prefix, it, consumed, window, found_inf, report);
      const PhaseTimes ms = dev.take_phase_ms();
      for (size_t p = 0; p < ms.size(); ++p) window.phase_ms[p] += ms[p];
      if (args.timing_log_level >= 1) log_timers(c, log, prefix, window.phase_ms, window.iterations);
      window = window.next(first_of_run);
    }
    last = it;
    ++res.ran;
    if (hash_every && it % *hash_every == 0) {  // a negative interval checks at its multiples too, as Python's %
      compare_replicas(c, "after iteration " + std::to_string(it) + " (--check-weight-hash-across-dp-replicas-interval): ");
      if (rt.rank() == 0) log << prefix << ">>> Weight hashes match after " << it << " iterations..." << std::endl;
    }
    if (ckpt.after_iteration({it, consumed, skipped_total, steps_done, skipped_samples})) {  // interval saves, --exit-*
      stopped = true;
      break;
    }
  }
  if (!stopped) ckpt.at_end({last, consumed, skipped_total, steps_done, skipped_samples});
  res.iterations = last;
  res.skipped = skipped_total;
  res.params_checksum = check_replicas(c);
  log_finished(c, log, prefix, res);
  return res;
}

}  // namespace mr::run
