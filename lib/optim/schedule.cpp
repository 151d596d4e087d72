// Learning-rate / weight-decay schedule (see schedule.h and docs/optim.md, "Learning-rate and weight-decay
// schedule"). The arithmetic is written in the order Megatron evaluates it, in doubles, with the same libm calls
// (cos, pow, sqrt), so the values agree with Megatron's Python to the last bit on the same C library.
#include "optim/schedule.h"

#include <cmath>
#include <numbers>
#include <stdexcept>
#include <string>

#include "config/checked.h"

namespace mr::optim {

namespace {

[[noreturn]] void fail(const std::string& what) { throw std::invalid_argument(what); }

std::string num(double v) { return py_float_repr(v); }

// A length in samples, as the decay length is printed: a whole one as an integer ("16", not "16.0" beside "160"); a
// fractional one (--lr-warmup-fraction) as Python prints it.
std::string samples(double v) {
  return std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 9.0e15 ? std::to_string(static_cast<int64_t>(v))
                                                                         : num(v);
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------
// Style names.

LrDecayStyle lr_decay_style_from_string(std::string_view s) {
  if (s == "constant") return LrDecayStyle::Constant;
  if (s == "linear") return LrDecayStyle::Linear;
  if (s == "cosine") return LrDecayStyle::Cosine;
  if (s == "inverse-square-root") return LrDecayStyle::InverseSquareRoot;
  if (s == "WSD") return LrDecayStyle::WSD;
  fail("--lr-decay-style: '" + std::string(s) +
       "' is not a decay style (constant, linear, cosine, inverse-square-root, WSD)");
}

WsdDecayStyle wsd_decay_style_from_string(std::string_view s) {
  if (s == "exponential") return WsdDecayStyle::Exponential;
  if (s == "linear") return WsdDecayStyle::Linear;
  if (s == "cosine") return WsdDecayStyle::Cosine;
  if (s == "minus_sqrt") return WsdDecayStyle::MinusSqrt;
  fail("--lr-wsd-decay-style: '" + std::string(s) +
       "' is not a WSD annealing style (exponential, linear, cosine, minus_sqrt)");
}

WdIncrStyle wd_incr_style_from_string(std::string_view s) {
  if (s == "constant") return WdIncrStyle::Constant;
  if (s == "linear") return WdIncrStyle::Linear;
  if (s == "cosine") return WdIncrStyle::Cosine;
  fail("--weight-decay-incr-style: '" + std::string(s) + "' is not an increment style (constant, linear, cosine)");
}

std::string_view to_string(LrDecayStyle s) {
  switch (s) {
    case LrDecayStyle::Constant: return "constant";
    case LrDecayStyle::Linear: return "linear";
    case LrDecayStyle::Cosine: return "cosine";
    case LrDecayStyle::InverseSquareRoot: return "inverse-square-root";
    case LrDecayStyle::WSD: return "WSD";
  }
  return "?";
}

std::string_view to_string(WsdDecayStyle s) {
  switch (s) {
    case WsdDecayStyle::Exponential: return "exponential";
    case WsdDecayStyle::Linear: return "linear";
    case WsdDecayStyle::Cosine: return "cosine";
    case WsdDecayStyle::MinusSqrt: return "minus_sqrt";
  }
  return "?";
}

std::string_view to_string(WdIncrStyle s) {
  switch (s) {
    case WdIncrStyle::Constant: return "constant";
    case WdIncrStyle::Linear: return "linear";
    case WdIncrStyle::Cosine: return "cosine";
  }
  return "?";
}

// ---------------------------------------------------------------------------------------------------------
// From the resolved arguments.

namespace {

// Megatron's spellings, through the generated choice enums (a choice added to the schema fails to compile here).
LrDecayStyle lr_decay_style_of(arg::LrDecayStyle s) {
  switch (s) {
    case arg::LrDecayStyle::constant: return LrDecayStyle::Constant;
    case arg::LrDecayStyle::linear: return LrDecayStyle::Linear;
    case arg::LrDecayStyle::cosine: return LrDecayStyle::Cosine;
    case arg::LrDecayStyle::inverse_square_root: return LrDecayStyle::InverseSquareRoot;
    case arg::LrDecayStyle::WSD: return LrDecayStyle::WSD;
  }
  fail("--lr-decay-style: not a decay style");
}
WsdDecayStyle wsd_decay_style_of(arg::LrWsdDecayStyle s) {
  switch (s) {
    case arg::LrWsdDecayStyle::exponential: return WsdDecayStyle::Exponential;
    case arg::LrWsdDecayStyle::linear: return WsdDecayStyle::Linear;
    case arg::LrWsdDecayStyle::cosine: return WsdDecayStyle::Cosine;
    case arg::LrWsdDecayStyle::minus_sqrt: return WsdDecayStyle::MinusSqrt;
  }
  fail("--lr-wsd-decay-style: not a WSD annealing style");
}
WdIncrStyle wd_incr_style_of(arg::WeightDecayIncrStyle s) {
  switch (s) {
    case arg::WeightDecayIncrStyle::constant: return WdIncrStyle::Constant;
    case arg::WeightDecayIncrStyle::linear: return WdIncrStyle::Linear;
    case arg::WeightDecayIncrStyle::cosine: return WdIncrStyle::Cosine;
  }
  fail("--weight-decay-incr-style: not an increment style");
}

bool truthy(const std::optional<int64_t>& v) { return v && *v != 0; }

}  // namespace

ScheduleConfig ScheduleConfig::from_args(const Namespace& ns) {
  try {
    return from_args(Args::from(ns));
  } catch (const ArgsError& e) {
    fail(e.what());
  }
}

ScheduleConfig ScheduleConfig::from_args(const Args& a) {
  ScheduleConfig c;

  if (!a.lr) fail("--lr is required: the learning-rate schedule peaks at it");
  c.max_lr = *a.lr;
  c.min_lr = a.min_lr;
  c.init_lr = a.lr_warmup_init;
  c.lr_decay_style = lr_decay_style_of(a.lr_decay_style);
  c.lr_wsd_decay_style = wsd_decay_style_of(a.lr_wsd_decay_style);
  c.decoupled_lr = a.decoupled_lr;
  c.decoupled_min_lr = a.decoupled_min_lr;
  c.use_checkpoint_opt_param_scheduler = a.use_checkpoint_opt_param_scheduler;
  c.override_opt_param_scheduler = a.override_opt_param_scheduler;

  // validate_args' consistency asserts between the iteration- and the sample-based settings; Megatron skips
  // them when the training loop is skipped.
  const bool check_mix = !a.skip_train;
  const std::optional<double> fraction = a.lr_warmup_fraction;

  if (truthy(a.train_iters)) {
    // Every count below is in samples: iterations times the global batch size.
    if (check_mix) {
      if (a.train_samples)
        fail("--train-iters and --train-samples are exclusive: train by iterations or by samples");
      if (a.lr_decay_samples)
        fail("--lr-decay-samples is for sample-based training; with --train-iters use --lr-decay-iters");
      if (a.lr_warmup_samples != 0)
        fail("--lr-warmup-samples is for sample-based training; with --train-iters use --lr-warmup-iters");
      if (fraction && a.lr_warmup_iters != 0) fail("give only one of --lr-warmup-fraction and --lr-warmup-iters");
    }
    const int64_t gbs = a.global_batch_size;
    const int64_t train_iters = *a.train_iters;
    const int64_t decay_iters = a.lr_decay_iters.value_or(train_iters);
    auto samples = [gbs](int64_t iters, const char* flag) {  // validation's sanity.integer-overflow, again
      const std::optional<int64_t> n = checked_mul(iters, gbs);
      if (!n)
        fail(std::string(flag) + " x --global-batch-size (" + std::to_string(iters) + " x " + std::to_string(gbs) +
             ") does not fit in a 64-bit integer");
      return *n;
    };
    c.lr_decay_steps = samples(decay_iters, a.lr_decay_iters ? "--lr-decay-iters" : "--train-iters");
    c.wd_incr_steps = samples(train_iters, "--train-iters");
    if (a.lr_wsd_decay_iters) c.wsd_decay_steps = samples(*a.lr_wsd_decay_iters, "--lr-wsd-decay-iters");
    c.lr_warmup_steps = fraction ? *fraction * static_cast<double>(c.lr_decay_steps)
                                 : static_cast<double>(samples(a.lr_warmup_iters, "--lr-warmup-iters"));
  } else if (truthy(a.train_samples)) {
    if (check_mix) {
      if (a.train_iters)
        fail("--train-iters and --train-samples are exclusive: train by iterations or by samples");
      if (a.lr_decay_iters)
        fail("--lr-decay-iters is for iteration-based training; with --train-samples use --lr-decay-samples");
      if (a.lr_warmup_iters != 0)
        fail("--lr-warmup-iters is for iteration-based training; with --train-samples use --lr-warmup-samples");
      if (fraction && a.lr_warmup_samples != 0)
        fail("give only one of --lr-warmup-fraction and --lr-warmup-samples");
    }
    const int64_t train_samples = *a.train_samples;
    c.lr_decay_steps = a.lr_decay_samples.value_or(train_samples);
    c.wd_incr_steps = train_samples;
    c.wsd_decay_steps = a.lr_wsd_decay_samples;
    c.lr_warmup_steps = fraction ? *fraction * static_cast<double>(c.lr_decay_steps)
                                 : static_cast<double>(a.lr_warmup_samples);
  } else {
    fail("either --train-iters or --train-samples must be given to build the learning-rate schedule");
  }

  // Weight decay: one value throughout, or a ramp from --start-weight-decay to --end-weight-decay.
  c.wd_incr_style = wd_incr_style_of(a.weight_decay_incr_style);
  const std::optional<double> start = a.start_weight_decay;
  const std::optional<double> end = a.end_weight_decay;
  if (c.wd_incr_style == WdIncrStyle::Constant) {
    if (start || end)
      fail("--start-weight-decay / --end-weight-decay need --weight-decay-incr-style linear or cosine; "
           "with constant, --weight-decay is used throughout");
    c.start_wd = c.end_wd = a.weight_decay;
  } else {
    if (!start || !end)
      fail("--weight-decay-incr-style " + std::string(to_string(c.wd_incr_style)) +
           " needs both --start-weight-decay and --end-weight-decay");
    c.start_wd = *start;
    c.end_wd = *end;
  }

  c.check();
  return c;
}

void ScheduleConfig::check() const {
  if (!(min_lr >= 0.0)) fail("--min-lr (" + num(min_lr) + ") must not be negative");
  if (!(max_lr >= min_lr)) fail("--lr (" + num(max_lr) + ") must be at least --min-lr (" + num(min_lr) + ")");
  if (!(init_lr <= max_lr))
    fail("--lr-warmup-init (" + num(init_lr) + ") must not exceed --lr (" + num(max_lr) + ")");
  if (lr_decay_steps <= 0)
    fail("the learning-rate decay must be longer than 0 samples (--lr-decay-iters / --lr-decay-samples, "
         "or --train-iters / --train-samples); got " + std::to_string(lr_decay_steps));
  if (!(lr_warmup_steps < static_cast<double>(lr_decay_steps)))
    fail("the warmup (" + samples(lr_warmup_steps) + " samples; --lr-warmup-iters / --lr-warmup-samples / "
         "--lr-warmup-fraction) must be shorter than the decay (" + std::to_string(lr_decay_steps) +
         " samples; --lr-decay-iters / --lr-decay-samples, which default to the training length). To fix it, "
         "shorten the warmup (lower --lr-warmup-iters / --lr-warmup-samples, or use --lr-warmup-fraction) or "
         "lengthen the decay (raise --train-iters / --train-samples, or --lr-decay-iters / --lr-decay-samples)");
  if (lr_decay_style == LrDecayStyle::WSD && !wsd_decay_steps)
    fail("--lr-decay-style WSD needs the length of its annealing phase: --lr-wsd-decay-iters "
         "(or --lr-wsd-decay-samples with --train-samples)");
  if (!(start_wd >= 0.0)) fail("--start-weight-decay (" + num(start_wd) + ") must not be negative");
  if (!(end_wd >= start_wd))
    fail("--end-weight-decay (" + num(end_wd) + ") must be at least --start-weight-decay (" + num(start_wd) + ")");
  if (wd_incr_style == WdIncrStyle::Constant && start_wd != end_wd)
    fail("--weight-decay-incr-style constant needs --start-weight-decay == --end-weight-decay (" + num(start_wd) +
         " vs " + num(end_wd) + ")");
  // Megatron divides by it at step 0 (ZeroDivisionError there).
  if (wd_incr_style != WdIncrStyle::Constant && wd_incr_steps == 0)
    fail("--weight-decay-incr-style " + std::string(to_string(wd_incr_style)) +
         " needs a weight-decay ramp longer than 0 samples (--train-iters / --train-samples)");
  if (override_opt_param_scheduler && use_checkpoint_opt_param_scheduler)
    fail("--override-opt-param-scheduler and --use-checkpoint-opt-param-scheduler are exclusive");
}

GroupOverride ScheduleConfig::embedding_output_group() const {
  GroupOverride g;
  if (decoupled_lr) {
    g.max_lr = decoupled_lr;
    g.min_lr = decoupled_min_lr;  // unset: the scheduler's --min-lr
  }
  return g;
}

// ---------------------------------------------------------------------------------------------------------
// The scheduler.

ParamScheduler::ParamScheduler(ScheduleConfig config) : cfg_(std::move(config)) { cfg_.check(); }

void ParamScheduler::step(int64_t increment) {
  if (increment < 0) fail("ParamScheduler::step: the increment (" + std::to_string(increment) + ") is negative");
  num_steps_ += increment;
}

double ParamScheduler::lr(const GroupOverride& g) const {
  return lr_at(num_steps_, g.max_lr.value_or(cfg_.max_lr), g.min_lr.value_or(cfg_.min_lr));
}

double ParamScheduler::lr_at(int64_t num_steps, double max_lr, double min_lr) const {
  constexpr double pi = std::numbers::pi;
  const double n = static_cast<double>(num_steps);  // exact below 2^53 samples
  const double warmup = cfg_.lr_warmup_steps;

  // Linear warmup from init_lr to the group's peak, up to and including the last warmup step.
  if (warmup > 0 && n <= warmup) return cfg_.init_lr + (max_lr - cfg_.init_lr) * n / warmup;

  if (cfg_.lr_decay_style == LrDecayStyle::Constant) return max_lr;
  if (num_steps > cfg_.lr_decay_steps) return min_lr;

  if (cfg_.lr_decay_style == LrDecayStyle::InverseSquareRoot) {
    // Both counts are floored at 1; pow(x, 0.5) rather than sqrt, as Python's ** evaluates it.
    const double w = warmup < 1.0 ? 1.0 : warmup;
    const double s = n < 1.0 ? 1.0 : n;
    const double v = max_lr * std::pow(w, 0.5) / std::pow(s, 0.5);
    return v > min_lr ? v : min_lr;
  }

  const double ratio = (n - warmup) / (static_cast<double>(cfg_.lr_decay_steps) - warmup);  // in [0, 1]
  const double span = max_lr - min_lr;
  double coeff = 0.0;
  switch (cfg_.lr_decay_style) {
    case LrDecayStyle::Linear: coeff = 1.0 - ratio; break;
    case LrDecayStyle::Cosine: coeff = 0.5 * (std::cos(pi * ratio) + 1.0); break;
    case LrDecayStyle::WSD: {
      // Stable at the peak until the last wsd_decay_steps samples of the decay, then annealed to min_lr.
      const int64_t phase = *cfg_.wsd_decay_steps;
      const int64_t anneal_start = cfg_.lr_decay_steps - phase;
      if (num_steps <= anneal_start) {
        coeff = 1.0;
        break;
      }
      const double r = static_cast<double>(num_steps - anneal_start) / static_cast<double>(phase);
      switch (cfg_.lr_wsd_decay_style) {
        case WsdDecayStyle::Linear: coeff = 1.0 - r; break;
        case WsdDecayStyle::Cosine: coeff = 0.5 * (std::cos(pi * r) + 1.0); break;
        case WsdDecayStyle::Exponential: coeff = 2.0 * std::pow(0.5, r) - 1.0; break;
        case WsdDecayStyle::MinusSqrt: coeff = 1.0 - std::sqrt(r); break;
      }
      break;
    }
    case LrDecayStyle::Constant:
    case LrDecayStyle::InverseSquareRoot: break;  // handled above
  }
  return min_lr + coeff * span;
}

double ParamScheduler::weight_decay(const GroupOverride& g) const {
  return wd_at(num_steps_, g.start_wd.value_or(cfg_.start_wd), g.end_wd.value_or(cfg_.end_wd)) * g.wd_mult;
}

double ParamScheduler::wd_at(int64_t num_steps, double start_wd, double end_wd) const {
  constexpr double pi = std::numbers::pi;
  if (num_steps > cfg_.wd_incr_steps) return end_wd;
  if (cfg_.wd_incr_style == WdIncrStyle::Constant) {
    if (start_wd != end_wd)
      fail("--weight-decay-incr-style constant: a group's start (" + num(start_wd) + ") and end (" + num(end_wd) +
           ") weight decay differ");
    return end_wd;
  }
  const double ratio = static_cast<double>(num_steps) / static_cast<double>(cfg_.wd_incr_steps);
  const double coeff =
      cfg_.wd_incr_style == WdIncrStyle::Linear ? ratio : 0.5 * (std::cos(pi * (1.0 - ratio)) + 1.0);
  return start_wd + coeff * (end_wd - start_wd);
}

// ---------------------------------------------------------------------------------------------------------
// Checkpoints.

ScheduleState ParamScheduler::state() const {
  ScheduleState s;
  s.max_lr = cfg_.max_lr;
  s.min_lr = cfg_.min_lr;
  s.lr_warmup_steps = cfg_.lr_warmup_steps;
  s.lr_decay_steps = cfg_.lr_decay_steps;
  s.lr_decay_style = cfg_.lr_decay_style;
  s.num_steps = num_steps_;
  s.start_wd = cfg_.start_wd;
  s.end_wd = cfg_.end_wd;
  s.wd_incr_steps = cfg_.wd_incr_steps;
  s.wd_incr_style = cfg_.wd_incr_style;
  return s;
}

namespace {

// One value of a checkpoint against ours, under the two policy flags.
template <class T, class Show>
T settle(const ScheduleConfig& c, const T& ours, const T& saved, const char* what, Show show) {
  if (c.override_opt_param_scheduler) return ours;
  if (!c.use_checkpoint_opt_param_scheduler && !(ours == saved))
    fail(std::string("the checkpoint's ") + what + " (" + show(saved) + ") differs from this job's (" + show(ours) +
         "); pass --override-opt-param-scheduler to keep this job's or --use-checkpoint-opt-param-scheduler to "
         "take the checkpoint's");
  return saved;
}

}  // namespace

void ParamScheduler::set_num_steps(int64_t n) {
  if (n < 0) fail("the scheduler's step count (" + std::to_string(n) + ") is negative");
  num_steps_ = n;
}

void ParamScheduler::load_state(const ScheduleState& s) {
  if (s.num_steps < 0) fail("the checkpoint's scheduler step count (" + std::to_string(s.num_steps) + ") is negative");
  auto d = [](double v) { return num(v); };
  auto i = [](int64_t v) { return std::to_string(v); };
  ScheduleConfig c = cfg_;
  c.max_lr = settle(cfg_, cfg_.max_lr, s.max_lr, "learning rate (--lr)", d);
  c.min_lr = settle(cfg_, cfg_.min_lr, s.min_lr, "minimum learning rate (--min-lr)", d);
  c.lr_warmup_steps = settle(cfg_, cfg_.lr_warmup_steps, s.lr_warmup_steps, "warmup length in samples", samples);
  c.lr_decay_steps = settle(cfg_, cfg_.lr_decay_steps, s.lr_decay_steps, "decay length in samples", i);
  c.lr_decay_style = settle(cfg_, cfg_.lr_decay_style, s.lr_decay_style, "decay style (--lr-decay-style)",
                            [](LrDecayStyle v) { return std::string(to_string(v)); });
  if (s.start_wd) {  // checkpoints written before the weight-decay schedule lack these four
    if (!s.end_wd || !s.wd_incr_steps || !s.wd_incr_style)
      fail("the checkpoint's scheduler state has a start weight decay but not the rest of the weight-decay schedule");
    c.start_wd = settle(cfg_, cfg_.start_wd, *s.start_wd, "start weight decay (--start-weight-decay)", d);
    c.end_wd = settle(cfg_, cfg_.end_wd, *s.end_wd, "end weight decay (--end-weight-decay)", d);
    c.wd_incr_steps = settle(cfg_, cfg_.wd_incr_steps, *s.wd_incr_steps, "weight-decay ramp length in samples", i);
    c.wd_incr_style = settle(cfg_, cfg_.wd_incr_style, *s.wd_incr_style,
                             "weight-decay increment style (--weight-decay-incr-style)",
                             [](WdIncrStyle v) { return std::string(to_string(v)); });
  }
  c.check();
  cfg_ = c;
  num_steps_ += s.num_steps;
}

}  // namespace mr::optim
