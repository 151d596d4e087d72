// The training run's log lines (run/log.h).
#include "run/log.h"
#include "util/byte_size.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <sstream>

namespace mr::run {

namespace {
std::string format(const char* fmt, double v) {
  char b[64];
  std::snprintf(b, sizeof b, fmt, v);
  return b;
}
bool last_rank(const RunContext& c) { return c.rt.rank() == c.rt.world_size() - 1; }
}  // namespace

void log_start(const RunContext& c, std::ostream& log, const std::string& prefix) {
  const FlatBuffers& b = c.buf;
  const double model_bytes = static_cast<double>(b.numel) * static_cast<double>(dtype_bytes(b.model_dtype));
  const BufferBytes bytes = b.bytes();
  const double state_bytes = bytes.main + bytes.state;
  std::ostringstream s;
  s << prefix << " > number of parameters on (tensor, pipeline) model parallel rank (" << c.tp.rank() << ", "
    << c.pp.rank() << "): " << c.plan.megatron_numel() << " (" << c.plan.layers.size()
      << (c.plan.layers.size() == 1 ? " layer; " : " layers; ");
  if (!c.plan.unused.empty())  // Megatron's count; the run leaves out what Megatron allocates but never uses
    s << "the run holds " << b.numel << ", without Megatron's unused " << c.plan.unused.front().name << "; ";
  s << "model params " << format_mib(model_bytes);
  // --freeze-all-layers: Megatron freezes every parameter before its DDP wrap and builds its optimizer over no
  // parameter, so it allocates no gradient buffer, main params or optimizer state. The run still lays them out
  // (unused: no gradient is reduced, no step taken), which the line says rather than an optimizer state in use.
  if (c.args.freeze_all_layers)
    s << ", optimizer state none: all layers frozen (--freeze-all-layers; Megatron's optimizer holds no parameters; "
      << "this run leaves its " << format_mib(state_bytes) << " of main params + optimizer state unused)";
  else
    s << ", main params + optimizer state " << format_mib(state_bytes)
      << (c.dist_opt ? (b.layer_wise ? " (layer-wise distributed optimizer shard)" : " (distributed optimizer shard)")
                     : "");
  s << ")";
  // One line per (tp, pp) coordinate, from its first data-parallel rank, as Megatron prints it.
  if (c.dp.rank() == 0) log << s.str() << std::endl;
  if (last_rank(c))
    log << prefix << "megatron-run: synthetic "
        << (c.args.freeze_all_layers ? "forward-only run (--freeze-all-layers: no parameter is trained): "
                                     : "training run: ")
        << (c.args.skip_train ? "no iteration (--skip-train; --train-iters " + std::to_string(c.train_iters) + ")"
                              : std::to_string(c.train_iters) + " iterations")
        << ", "
        << (c.args.freeze_all_layers ? "no optimizer step (--optimizer " : "")
        // --optimizer dist_muon runs as muon: Megatron's finalize_optimizer_config renames it after its deprecation
        // warning (the optimizer it builds is muon, on the layer-wise path).
        << (c.args.optimizer == arg::Optimizer::dist_muon ? std::string("muon (the deprecated --optimizer dist_muon)")
                                                          : std::string(c.optimizer.name))
        << (c.args.use_precision_aware_optimizer
                ? std::string(" (precision-aware: ") + optim::dtype_name(b.exp_avg_dtype) + " exp_avg, " +
                      optim::dtype_name(b.exp_avg_sq_dtype) + " exp_avg_sq" +
                      (!b.has_main                                        ? ")"
                       : b.main_storage == MainStorage::Remainder ? ", main params as bf16 + 16-bit remainders)"
                       : b.main_storage == MainStorage::F16       ? ", fp16 main params)"
                                                                  : ", fp32 main params)")
                : std::string())
        << (c.args.freeze_all_layers ? " holds no parameters)" : "")
        << ", " << optim::dtype_name(b.model_dtype)
        << (b.model_dtype != optim::DType::F32 && !c.args.freeze_all_layers
                ? std::string(" with ") + optim::dtype_name(c.grad_format.buffer) + " gradients"
                : std::string())
        // Megatron replaces the distributed optimizer by its layer-wise one for every optimizer but adam and sgd.
        << (c.dist_opt ? (c.buf.layer_wise ? ", layer-wise distributed optimizer" : ", distributed optimizer") : "")
        << ", on the " << c.backend->name()
        << (c.args.freeze_all_layers ? " backend; the loss is synthetic (no model forward) and no gradient is used"
                                     : " backend; gradients are synthetic (no model forward/backward)")
        << std::endl;
  if (!last_rank(c)) return;
  // --freeze-all-layers (Megatron's _freeze_all_model_chunks: requires_grad_(False) on every parameter): what the
  // loop does instead of training (run/train.cpp).
  if (c.args.freeze_all_layers)
    log << prefix << "megatron-run: --freeze-all-layers: every parameter is frozen: each iteration computes the loss "
        << "only (Megatron's forward-only pass), no gradient and no optimizer update, so the parameters stay as "
        << (c.args.load || c.args.pretrained_checkpoint ? "loaded" : "initialized")
        << "; the learning rate logs 0 and the grad norm 0.000 (Megatron's optimizer holds no parameters); no "
        << "checkpoint is written" << (c.args.save ? " to --save " + *c.args.save : std::string()) << std::endl;
  // The batch of each step (run/batch_schedule.h), as Megatron's calculator reports it.
  const BatchSchedule& batches = *c.batches;
  if (batches.scheduled()) {
    log << prefix << "megatron-run: step batch size schedule (" << batches.steps().size() << " steps):";
    for (const auto& [threshold, bs] : batches.steps()) log << " >= " << threshold << " samples -> " << bs << ";";
    log << std::endl;
  } else if (const BatchSchedule::Step s = batches.peek(0); s.running != s.global) {
    log << prefix << "megatron-run: decreasing the global batch size from " << s.global << " to " << s.running
        << " to keep it divisible by micro-batch size x data-parallel size (--decrease-batch-size-if-needed)"
        << std::endl;
  }
  if (c.args.rampup_batch_size)
    log << prefix << "megatron-run: --rampup-batch-size is ignored, as by Megatron (deprecated: use "
        << "--step-batch-size-schedule); the global batch size stays " << batches.peek(0).global << std::endl;
}

void log_iteration(const RunContext& c, std::ostream& log, const std::string& prefix, int64_t it, int64_t consumed,
                   const Window& w, bool found_inf, const StepReport& step) {
  if (!last_rank(c)) return;
  std::ostringstream line;
  // Megatron's line: the local time to the microsecond, then the fields in its order.
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  const long long us =
      std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count() % 1000000;
  std::tm tm{};
  localtime_r(&t, &tm);
  char stamp[64];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S", &tm);
  char head[160];
  std::snprintf(head, sizeof head, " [%s.%06lld] iteration %8lld/%8lld | consumed samples: %12lld |", stamp, us,
                static_cast<long long>(it), static_cast<long long>(c.train_iters), static_cast<long long>(consumed));
  // The loss averaged over the interval's iterations that were not skipped (0 when all were, none before the run's
  // first one that was not), as Megatron's.
  const double loss = w.loss_sum / static_cast<double>(std::max<int64_t>(1, w.advanced));
  line << prefix << head;
  if (step.skipped_samples > 0) line << format(" skipped samples: %12.0f |", static_cast<double>(step.skipped_samples));
  // The learning rate: under --freeze-all-layers Megatron's training_log has none from an optimizer without
  // parameters and logs 0.0 (`if learning_rate is None and args.freeze_all_layers`).
  line << " elapsed time per iteration (ms): " << format("%.1f", w.elapsed_ms / static_cast<double>(w.iterations))
       << " | learning rate: " << format("%.6E", c.args.freeze_all_layers ? 0.0 : c.schedule->lr())
       << " | global batch size: "
       << format("%5.0f", static_cast<double>(c.global_batch)) << " |";
  // Megatron leaves a NaN average out (its `avg >= 0.0` test).
  if (step.run_kept_one && loss >= 0.0) line << " synthetic loss: " << format("%.6E", loss) << " |";
  // Megatron prints the loss scale always: 1.0 without a scaler (fp32, bf16).
  line << " loss scale: " << format("%.1f", c.scaler ? c.scaler->scale() : 1.0) << " |";
  if (!found_inf) line << " grad norm: " << format("%.3f", step.grad_norm) << " |";
  if (!found_inf && step.zeros) line << " num zeros: " << format("%.1f", static_cast<double>(*step.zeros)) << " |";
  if (step.params_norm) line << " params norm: " << format("%.3f", *step.params_norm) << " |";
  line << " number of skipped iterations: " << format("%3.0f", static_cast<double>(w.skipped))
       << " | number of nan iterations: " << format("%3.0f", static_cast<double>(w.nan)) << " |";
  log << line.str() << std::endl;
}

void log_timers(const RunContext& c, std::ostream& log, const std::string& prefix, const PhaseTimes& ms,
                int64_t iterations) {
  if (!last_rank(c) || iterations <= 0) return;
  std::ostringstream s;
  s << prefix << " phase times of rank " << c.rt.rank() << " (ms per iteration, " << c.backend->clock() << "):";
  for (int p = 0; p < kPhases; ++p)
    s << (p ? " |" : "") << " " << phase_name(static_cast<Phase>(p)) << " "
      << format("%.3f", ms[static_cast<size_t>(p)] / static_cast<double>(iterations));
  log << s.str() << std::endl;
}

void log_finished(const RunContext& c, std::ostream& log, const std::string& prefix, const TrainResult& res) {
  if (!last_rank(c)) return;
  char b[64];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(res.params_checksum));
  const std::string passed =
      res.passed_over > 0 ? ", " + std::to_string(res.passed_over) + " passed over by --iterations-to-skip" : "";
  if (res.skipped_train) {  // --skip-train: the parameters are the loaded (or initial) ones
    log << prefix << "megatron-run: training run finished: 0 iterations (--skip-train); the parameters are "
        << (c.args.load ? "those of --load (iteration " + std::to_string(res.iterations) + ")"
                        : std::string("the initial ones (no --load)"))
        << " (parameter checksum " << b << ")" << std::endl;
    return;
  }
  if (res.ran == 0 && res.passed_over > 0) {  // every iteration left was skipped: no loss either
    log << prefix << "megatron-run: training run finished: " << res.iterations << " iterations (" << res.skipped
        << " skipped" << passed << "); no optimizer step ran in this run (parameter checksum " << b << ")" << std::endl;
    return;
  }
  if (res.ran == 0) {  // no loss to report: none was made
    log << prefix << "megatron-run: training run finished: nothing to train, the loaded checkpoint is at iteration "
        << res.iterations << " and --train-iters is " << c.train_iters << " (parameter checksum " << b << ")"
        << std::endl;
    return;
  }
  // A resumed run: how many of them this run did (its losses are of those); iterations passed over by
  // --iterations-to-skip are this run's too.
  const int64_t here_n = res.ran + res.passed_over;
  const std::string here =
      here_n < res.iterations ? "; " + std::to_string(here_n) + " in this run, after the loaded checkpoint" : "";
  log << prefix << "megatron-run: training run finished: " << res.iterations << " iterations (" << res.skipped
      << " skipped" << passed << here << "), synthetic loss " << format("%.6E", res.first_loss) << " -> " << format("%.6E", res.last_loss)
      << (c.dp.size() > 1 ? "; the " + std::to_string(c.dp.size()) + " data-parallel replicas hold identical parameters"
                          : std::string())
      << (c.args.freeze_all_layers ? "; --freeze-all-layers: no parameter was updated" : "")
      << " (parameter checksum " << b << "; last loss " << format("%a", res.last_loss) << ", last grad norm "
      << (res.stepped || res.ran == 0 ? format("%a", res.last_grad_norm) : std::string("none: every step was skipped"))
      << ")" << std::endl;
}

}  // namespace mr::run
