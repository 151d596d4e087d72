// The learning-rate and weight-decay schedule of a Megatron job (Megatron-LM's OptimizerParamScheduler and the
// way training.py's get_optimizer_param_scheduler derives its settings from the resolved arguments).
//
// Steps are counted in *samples*, as in Megatron: an iteration-based job (--train-iters) converts every
// iteration count to samples with --global-batch-size, and the run loop advances the scheduler by the number of
// samples an iteration consumed (step(global_batch_size), or the current batch size under batch-size ramp-up).
//
//   auto cfg = mr::optim::ScheduleConfig::from_args(args);   // mr::Args; std::invalid_argument naming flags
//   mr::optim::ParamScheduler sched(cfg);                               // Megatron's constructor checks
//   for (...) { double lr = sched.lr(); double wd = sched.weight_decay(); ...; sched.step(gbs); }
//
// Parameter groups may carry their own peak / floor learning rate and weight-decay range (Megatron's
// ParamGroupOverride; --decoupled-lr / --decoupled-min-lr give the embedding and output layers such a group):
// pass a GroupOverride, or the pair (max_lr, min_lr). Warmup always starts from the global --lr-warmup-init.
//
// No LibTorch here: this header and schedule.cpp use the standard library and lib/config only.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "config/args.h"
#include "config/namespace.h"

namespace mr::optim {

// --lr-decay-style
enum class LrDecayStyle { Constant, Linear, Cosine, InverseSquareRoot, WSD };
// --lr-wsd-decay-style: the shape of the final annealing phase of WSD (warmup-stable-decay).
enum class WsdDecayStyle { Exponential, Linear, Cosine, MinusSqrt };
// --weight-decay-incr-style
enum class WdIncrStyle { Constant, Linear, Cosine };

// Megatron's spellings ("constant", "linear", "cosine", "inverse-square-root", "WSD"; "exponential",
// "minus_sqrt"). Unknown words throw std::invalid_argument naming the flag and the accepted words.
LrDecayStyle lr_decay_style_from_string(std::string_view s);
WsdDecayStyle wsd_decay_style_from_string(std::string_view s);
WdIncrStyle wd_incr_style_from_string(std::string_view s);
std::string_view to_string(LrDecayStyle s);
std::string_view to_string(WsdDecayStyle s);
std::string_view to_string(WdIncrStyle s);

// Per-parameter-group values that replace the scheduler's own (unset = the scheduler's value).
struct GroupOverride {
  std::optional<double> max_lr;    // peak learning rate of the group
  std::optional<double> min_lr;    // floor of the group
  std::optional<double> start_wd;  // weight-decay range of the group
  std::optional<double> end_wd;
  double wd_mult = 1.0;  // the scheduled weight decay is multiplied by this (0 for biases and norms)
};

// What the scheduler needs, all step counts in samples.
struct ScheduleConfig {
  double init_lr = 0.0;          // --lr-warmup-init: lr at step 0 of the warmup
  double max_lr = 0.0;           // --lr: peak, reached at the end of the warmup
  double min_lr = 0.0;           // --min-lr: floor of the decay
  double lr_warmup_steps = 0.0;  // fractional when it comes from --lr-warmup-fraction
  int64_t lr_decay_steps = 0;    // the decay ends here (lr = min_lr beyond it)
  LrDecayStyle lr_decay_style = LrDecayStyle::Linear;
  std::optional<int64_t> wsd_decay_steps;  // length of WSD's annealing phase; required by WSD
  WsdDecayStyle lr_wsd_decay_style = WsdDecayStyle::Exponential;
  double start_wd = 0.0;  // weight decay at step 0 ...
  double end_wd = 0.0;    // ... and from wd_incr_steps on
  int64_t wd_incr_steps = 0;
  WdIncrStyle wd_incr_style = WdIncrStyle::Constant;
  // Checkpoint policy (load_state): take the checkpoint's values, or insist on ours; the flags' defaults (the
  // schema's: both off).
  bool use_checkpoint_opt_param_scheduler = default_of(ArgId::use_checkpoint_opt_param_scheduler).as_bool();
  bool override_opt_param_scheduler = default_of(ArgId::override_opt_param_scheduler).as_bool();
  // --decoupled-lr / --decoupled-min-lr: not part of the schedule itself but of the embedding/output group.
  std::optional<double> decoupled_lr;
  std::optional<double> decoupled_min_lr;

  // From a resolved (validated) namespace, as training.py's get_optimizer_param_scheduler derives it:
  //  - iteration-based (--train-iters non-zero): decay = (--lr-decay-iters or --train-iters) x gbs,
  //    weight-decay ramp = --train-iters x gbs, WSD phase = --lr-wsd-decay-iters x gbs, warmup =
  //    --lr-warmup-fraction x decay or --lr-warmup-iters x gbs;
  //  - sample-based (--train-samples non-zero): the same with --lr-decay-samples (default --train-samples),
  //    --train-samples, --lr-wsd-decay-samples, --lr-warmup-samples;
  //  - weight decay: with --weight-decay-incr-style constant, start = end = --weight-decay (and
  //    --start/--end-weight-decay must be unset); otherwise both must be given (validate_args' rule).
  // Also applies validate_args' iteration-vs-sample consistency asserts (skipped with --skip-train, as there).
  // Throws std::invalid_argument naming the flags on a missing or inconsistent setting.
  static ScheduleConfig from_args(const Args& args);
  // The same from a namespace (its typed view, config/args.h; a value of the wrong kind is an invalid_argument).
  static ScheduleConfig from_args(const Namespace& args);

  // Megatron's constructor assertions (lr and wd ranges, warmup shorter than decay, WSD phase present, ...);
  // throws std::invalid_argument naming the flags.
  void check() const;

  // The group of the embedding and output layers: {decoupled_lr, decoupled_min_lr} when --decoupled-lr is set
  // (the floor stays --min-lr without --decoupled-min-lr), else no override.
  GroupOverride embedding_output_group() const;
};

// The scheduler's checkpointed state (Megatron's state_dict keys).
struct ScheduleState {
  double max_lr = 0.0;
  double min_lr = 0.0;
  double lr_warmup_steps = 0.0;
  int64_t lr_decay_steps = 0;
  LrDecayStyle lr_decay_style = LrDecayStyle::Linear;
  int64_t num_steps = 0;
  std::optional<double> start_wd;  // absent in checkpoints older than the weight-decay schedule
  std::optional<double> end_wd;
  std::optional<int64_t> wd_incr_steps;
  std::optional<WdIncrStyle> wd_incr_style;
};

class ParamScheduler {
 public:
  // Runs config.check(); starts at step 0.
  explicit ParamScheduler(ScheduleConfig config);

  // Advances by `increment` samples (not negative); 0 is allowed (Megatron's constructor does step(0)).
  void step(int64_t increment);
  int64_t num_steps() const { return num_steps_; }
  // Moves the scheduler to `n` samples (not negative): Megatron's reset of num_steps to the consumed samples under
  // --override-opt-param-scheduler.
  void set_num_steps(int64_t n);

  // Learning rate at the current step: the default group, a group with overrides, an explicit peak/floor.
  double lr() const { return lr_at(num_steps_, cfg_.max_lr, cfg_.min_lr); }
  double lr(const GroupOverride& g) const;
  double lr(double max_lr, double min_lr) const { return lr_at(num_steps_, max_lr, min_lr); }
  // The same at any step count (samples), without moving the scheduler.
  double lr_at(int64_t num_steps, double max_lr, double min_lr) const;

  // Weight decay at the current step: the default group, or a group (its range, times its wd_mult).
  double weight_decay() const { return wd_at(num_steps_, cfg_.start_wd, cfg_.end_wd); }
  double weight_decay(const GroupOverride& g) const;
  double wd_at(int64_t num_steps, double start_wd, double end_wd) const;

  const ScheduleConfig& config() const { return cfg_; }

  // Checkpointing. load_state() follows Megatron's load_state_dict: each value is taken from the checkpoint
  // (use_checkpoint_opt_param_scheduler), or ours is kept (override_opt_param_scheduler), or, with neither,
  // the two must agree (std::invalid_argument naming the flag otherwise); num_steps is added to ours.
  ScheduleState state() const;
  void load_state(const ScheduleState& s);

 private:
  ScheduleConfig cfg_;
  int64_t num_steps_ = 0;
};

}  // namespace mr::optim
