// The init stage (init.h): settings Megatron's start-up takes as they are but its data set-up or its training loop
// (megatron/training/training.py) fails on: the sample counts pretrain builds the datasets with
// (get_train_valid_test_num_samples, before training), then, once its ranks train, the intervals the loop takes
// `iteration % interval` of (post_training_step_callbacks: the weight-hash check, autoresume, the GPU sniff test),
// and the fault injector that train() sets up before the first iteration (megatron/core/fault_injector.py). pretrain
// calls train() only when it trains: not under --skip-train, unless --perform-rl-step (training.py, pretrain: `if not
// skip_train or (perform_rl_step and do_train)`), so none of the training loop's is checked then (the datasets are
// built under --skip-train too).
#include <algorithm>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "config/converters.h"
#include "config/validate/init.h"
#include "config/validate/python.h"
#include "util/text.h"

namespace mr::init {
namespace {

MR_INIT_RULE(kPhaseTransitionSamples, "init.phase-transition-needs-train-samples",
             "--phase-transition-iterations needs --train-samples: with --train-iters, Megatron's dataset build "
             "compares the current sample with train_samples (None) and fails (get_train_valid_test_num_samples: "
             "TypeError).");
MR_INIT_RULE(kWeightHashInterval, "init.weight-hash-interval-positive",
             "--check-weight-hash-across-dp-replicas-interval must not be 0 (the training loop takes the iteration "
             "modulo it: ZeroDivisionError).");
MR_INIT_RULE(kSniffInterval, "init.gpu-sniff-test-interval-positive",
             "--gpu-sniff-test-interval must not be 0 (the training loop takes the iteration modulo it: "
             "ZeroDivisionError).");
MR_INIT_RULE(kAutoresumeInterval, "init.adlr-autoresume-interval-positive",
             "--adlr-autoresume-interval must not be 0 with --adlr-autoresume (the training loop takes the iteration "
             "modulo it: ZeroDivisionError).");
MR_INIT_RULE(kFaultRanksXorNum, "init.fault-injector.ranks-or-num-ranks",
             "--fault-injector-ranks and --fault-injector-num-ranks cannot both be given (train: "
             "setup_fault_injection).");
MR_INIT_RULE(kFaultRanks, "init.fault-injector.ranks-in-world",
             "Each of --fault-injector-ranks must be an integer from 0 to the world size - 1 (train: "
             "setup_fault_injection).");
MR_INIT_RULE(kFaultNumRanks, "init.fault-injector.num-ranks-range",
             "--fault-injector-num-ranks must be from 0 to the world size - 1 (ranks other than 0 are sampled) "
             "(train: setup_fault_injection).");
MR_INIT_RULE(kFaultTypes, "init.fault-injector.fault-types-required",
             "Injecting faults (--fault-injector-ranks or --fault-injector-num-ranks) needs "
             "--fault-injector-fault-types (train: setup_fault_injection).");
MR_INIT_RULE(kFaultProbabilities, "init.fault-injector.probabilities-match-types",
             "--fault-injector-fault-probabilities must be numbers, one per fault type, with a sum other than 0 "
             "(train: setup_fault_injection).");
MR_INIT_RULE(kFaultDelay, "init.fault-injector.delay-required",
             "Injecting faults needs --fault-injector-fault-delay or a nonzero --fault-injector-mtti-seconds (train: "
             "setup_fault_injection).");

// A positive (or negative: Python's modulo runs) interval passes; 0 is a ZeroDivisionError.
void interval(Context& ctx, const Rule& rule, const char* dest, const std::string& when, const std::string& advice) {
  if (!ctx.has(dest) || !ctx[dest].is_int()) return;  // None: never evaluated
  ctx.require(ctx.i(dest) != 0, rule,
              "Megatron would fail in its training loop (train): " + Context::flag(dest) + " 0" + when +
                  " is taken modulo every iteration (ZeroDivisionError after the first iteration); give a positive "
                  "number of iterations" + advice,
              {dest});
}


// A value as the messages echo it: escaped (util/text.h echo_word), so a newline in it starts no line of its own.
std::string str_or_none(const Context& ctx, const char* dest) {
  return ctx.has(dest) && !ctx.is_none(dest) ? echo_word(ctx[dest].py_str()) : "None";
}

// The iteration a deferred setup (--fault-injector-delay-start-iteration D) runs at, when the run certainly
// reaches it; nullopt when it does not or may not. train() sets it up at the end of the training step whose
// iteration (before its increment) is D, in its loop `while iteration < train_iters`. Known to be reached only in a
// run from iteration 0 (no --load or --pretrained-checkpoint: a checkpoint's iteration is not known here) counted
// in iterations (--train-iters, not --train-samples, whose count follows the batch-size ramp) that takes training
// steps (not --skip-train, which RL's inference-only mode runs the loop with and no step), when the step is not
// skipped (D + 1 in --iterations-to-skip), --exit-duration-in-mins cannot stop the loop first, and --exit-interval
// E does not: the loop stops after a step that makes the iteration a multiple of E, so each multiple of E up to D
// must be an iteration --iterations-to-skip skips (a skipped step goes on without the exit check).
std::optional<int64_t> deferred_setup_reached(const Context& ctx) {
  const int64_t d = ctx.i("fault_injector_delay_start_iteration");
  for (const char* dest : {"load", "pretrained_checkpoint", "train_samples", "exit_duration_in_mins"})
    if (set(ctx, dest)) return std::nullopt;
  if (ctx.has("skip_train") && ctx.on("skip_train")) return std::nullopt;
  if (!set(ctx, "train_iters") || d < 0 || d >= ctx.i("train_iters")) return std::nullopt;
  std::set<int64_t> skipped;
  if (ctx.has("iterations_to_skip") && ctx["iterations_to_skip"].is_list())
    for (const Value& it : ctx["iterations_to_skip"].as_list())
      if (it.is_int()) skipped.insert(it.as_int());
  if (skipped.count(d + 1)) return std::nullopt;
  if (set(ctx, "exit_interval") && ctx.i("exit_interval") > 0) {
    const int64_t e = ctx.i("exit_interval");
    if (d / e > static_cast<int64_t>(skipped.size())) return std::nullopt;  // more multiples than skipped steps
    for (int64_t k = e; k <= d; k += e)
      if (!skipped.count(k)) return std::nullopt;  // the loop exits after the step that reaches k
  }
  return d;
}

// train() builds FaultInjectorConfig from the arguments and, when --fault-injector-ranks or
// --fault-injector-num-ranks is set, calls setup_fault_injection before the first iteration (training.py, train),
// or, with --fault-injector-delay-start-iteration D, at the end of iteration D (deferred_setup_reached: checked
// only where the run reaches it). Rank 0 then draws the plan (fault_injector.py: get_fault_ranks, get_fault,
// get_fault_delay, in that order) and asserts on the settings before the broadcast, so the other ranks wait on it.
// Not checkable here: the fault type names (nvidia_resiliency_ext's Fault enum) and whether that package is
// installed.
void fault_injector(Context& ctx) {
  const bool ranks = set(ctx, "fault_injector_ranks"), num = set(ctx, "fault_injector_num_ranks");
  if (!(ranks || num)) return;
  std::string why = would_fail("train: setup_fault_injection");
  if (set(ctx, "fault_injector_delay_start_iteration")) {
    const std::optional<int64_t> at = deferred_setup_reached(ctx);
    if (!at) return;
    why = "Megatron would fail in its training loop at the end of iteration " + std::to_string(*at) +
          " (train: setup_fault_injection, deferred by --fault-injector-delay-start-iteration): ";
  }
  const int64_t world = ctx.i("world_size");

  // get_fault_ranks
  if (ranks) {
    ctx.require(!num, kFaultRanksXorNum,
                why + "--fault-injector-ranks " + str_or_none(ctx, "fault_injector_ranks") +
                    " and --fault-injector-num-ranks " + str_or_none(ctx, "fault_injector_num_ranks") +
                    " cannot both be given (Cannot specify both force_ranks and num_ranks): keep one",
                {"fault_injector_ranks", "fault_injector_num_ranks"});
    for (const std::string& word : split(ctx.s("fault_injector_ranks"), ',')) {
      bool ok = true;
      int64_t r = 0;
      try {
        r = parse_py_int(word);
      } catch (const std::exception&) {
        ok = false;
      }
      ctx.require(ok && r >= 0 && r < world, kFaultRanks,
                  why + "--fault-injector-ranks " + str_or_none(ctx, "fault_injector_ranks") + ": '" + echo_word(word) + "' " +
                      (ok ? "is not a rank of the world" : "is not an integer (int(): ValueError)") +
                      "; fault ranks must be between 0 and " + std::to_string(world - 1) + " (world size " +
                      std::to_string(world) + ")",
                  {"fault_injector_ranks", "world_size"});
    }
  } else {
    const int64_t k = ctx.i("fault_injector_num_ranks");
    ctx.require(k >= 0 && k <= world - 1, kFaultNumRanks,
                why + "--fault-injector-num-ranks " + std::to_string(k) + ": the ranks are sampled from ranks 1 to " +
                    std::to_string(world - 1) + " (world size " + std::to_string(world) +
                    "; random.sample: ValueError): give 0 to " + std::to_string(std::max<int64_t>(0, world - 1)),
                {"fault_injector_num_ranks", "world_size"});
  }

  // get_fault
  ctx.require(set(ctx, "fault_injector_fault_types"), kFaultTypes,
              why + "--fault-injector-" + std::string(ranks ? "ranks" : "num-ranks") +
                  " injects faults, but --fault-injector-fault-types is not given (fault_injector_fault_types must "
                  "be specified)",
              {"fault_injector_fault_types"});
  if (set(ctx, "fault_injector_fault_probabilities")) {
    const size_t types = split(ctx.s("fault_injector_fault_types"), ',').size();
    const std::vector<std::string> words = split(ctx.s("fault_injector_fault_probabilities"), ',');
    double sum = 0;
    for (const std::string& word : words) {
      bool ok = true;
      try {
        sum += parse_py_float(word);
      } catch (const std::exception&) {
        ok = false;
      }
      ctx.require(ok, kFaultProbabilities,
                  why + "--fault-injector-fault-probabilities " + str_or_none(ctx, "fault_injector_fault_probabilities") +
                      ": '" + echo_word(word) + "' is not a number (float(): ValueError)",
                  {"fault_injector_fault_probabilities"});
    }
    ctx.require(sum != 0, kFaultProbabilities,
                why + "--fault-injector-fault-probabilities " + str_or_none(ctx, "fault_injector_fault_probabilities") +
                    " sums to 0 (they are normalised by their sum: ZeroDivisionError)",
                {"fault_injector_fault_probabilities"});
    ctx.require(words.size() == types, kFaultProbabilities,
                why + "--fault-injector-fault-probabilities " + str_or_none(ctx, "fault_injector_fault_probabilities") +
                    " gives " + std::to_string(words.size()) + " probabilities for " + std::to_string(types) +
                    " fault types (--fault-injector-fault-types " + str_or_none(ctx, "fault_injector_fault_types") +
                    "): the numbers must match",
                {"fault_injector_fault_probabilities", "fault_injector_fault_types"});
  }

  // get_fault_delay
  if (!set(ctx, "fault_injector_fault_delay")) {
    ctx.require(set(ctx, "fault_injector_mtti_seconds"), kFaultDelay,
                why + "neither --fault-injector-fault-delay nor --fault-injector-mtti-seconds is given "
                      "(fault_injector_fault_delay or fault_injector_mtti_seconds must be specified)",
                {"fault_injector_fault_delay", "fault_injector_mtti_seconds"});
    ctx.require(ctx.f("fault_injector_mtti_seconds") != 0, kFaultDelay,
                why + "--fault-injector-mtti-seconds 0 (without --fault-injector-fault-delay) is divided by "
                      "(ZeroDivisionError): give a positive mean time to injection",
                {"fault_injector_mtti_seconds"});
  }
}

}  // namespace

// pretrain builds the data iterators (build_train_valid_test_data_loaders) before train(), under --skip-train too;
// only --perform-rl-step builds no datasets. build_train_valid_test_datasets takes its sample counts from
// get_train_valid_test_num_samples (training.py), which, with --phase-transition-iterations, lists the phase
// boundaries as [0] + [t * global_batch_size ...] + [args.train_samples] and takes
// max(s for s in them if s <= current_sample): with --train-iters, train_samples is None (validate_args never
// sets it), and `None <= int` is a TypeError on every rank that builds datasets, before training.
void datasets(Context& ctx) {
  if (ctx.has("perform_rl_step") && ctx.on("perform_rl_step")) return;
  if (!ctx.has("phase_transition_iterations") || !ctx["phase_transition_iterations"].is_list() ||
      ctx["phase_transition_iterations"].as_list().empty())
    return;  // None, or Megatron's falsy "" (it skips the phases)
  if (set(ctx, "train_samples")) return;
  std::string phases;
  for (const Value& v : ctx["phase_transition_iterations"].as_list())
    phases += (phases.empty() ? "" : ",") + v.py_str();
  const std::string length =
      set(ctx, "train_iters") ? "--train-iters " + std::to_string(ctx.i("train_iters")) : std::string("no --train-samples");
  ctx.require(false, kPhaseTransitionSamples,
              "Megatron would fail building the datasets (get_train_valid_test_num_samples): "
              "--phase-transition-iterations " + phases + " with " + length +
                  " ends the last phase at train_samples, which is None without --train-samples (TypeError: '<=' not "
                  "supported between instances of 'NoneType' and 'int', on every rank, before training); give "
                  "--train-samples (the run's length in samples, e.g. --train-iters times --global-batch-size) instead "
                  "of --train-iters",
              {"phase_transition_iterations", "train_iters", "train_samples"});
}

void train_loop(Context& ctx) {
  auto on = [&](const char* dest) { return ctx.has(dest) && ctx.on(dest); };
  if (on("skip_train") && !on("perform_rl_step")) return;  // train() is never called
  fault_injector(ctx);  // train(), before the first iteration
  // post_training_step_callbacks, after each iteration, in its order: the weight-hash check, autoresume, the GPU
  // sniff test (each `iteration % interval` when evaluated).
  interval(ctx, kWeightHashInterval, "check_weight_hash_across_dp_replicas_interval", "",
           ", or leave it out to skip the check");
  if (ctx.has("adlr_autoresume") && ctx.on("adlr_autoresume"))
    interval(ctx, kAutoresumeInterval, "adlr_autoresume_interval", " with --adlr-autoresume", "");
  interval(ctx, kSniffInterval, "gpu_sniff_test_interval", "", ", or leave it out to skip the test");
}

}  // namespace mr::init
