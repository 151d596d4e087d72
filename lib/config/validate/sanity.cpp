// The sanity stage (see sanity.h): megatron-run's own checks of values Megatron accepts but no job can run with.
// Each rule names the flag, the value and why it cannot run. They look only at values that are set (None means
// "not given" and is Megatron's business), and at numbers only (a YAML string where a number belongs is a
// usage error earlier on).
#include "config/validate/sanity.h"

#include <cmath>
#include <limits>
#include <optional>
#include <string>

#include "config/value.h"

namespace mr {
namespace {

MR_SANITY_RULE(kIntegerOverflow, "sanity.integer-overflow",
               "A size computed from the arguments (a product or sum of sizes) must fit in a 64-bit integer.");
MR_SANITY_RULE(kHybridPatternLayers, "sanity.hybrid-pattern-has-layers",
               "--hybrid-layer-pattern must hold at least one layer in its main part.");
MR_SANITY_RULE(kNumLayers, "sanity.num-layers-positive", "--num-layers must be at least 1.");
MR_SANITY_RULE(kHiddenSize, "sanity.hidden-size-positive", "--hidden-size must be at least 1.");
MR_SANITY_RULE(kFfnHiddenSize, "sanity.ffn-hidden-size-positive",
               "--ffn-hidden-size (given or derived from --hidden-size) must be at least 1.");
MR_SANITY_RULE(kAttentionHeads, "sanity.attention-heads-positive",
               "--num-attention-heads and --num-query-groups must be at least 1.");
MR_SANITY_RULE(kKvChannels, "sanity.kv-channels-positive",
               "--kv-channels (given or derived as --hidden-size / --num-attention-heads) must be at least 1.");
MR_SANITY_RULE(kSequenceLength, "sanity.sequence-length-positive",
               "--seq-length, --max-position-embeddings, --decoder-seq-length and --encoder-seq-length must be at "
               "least 1 when set.");
MR_SANITY_RULE(kVocabSize, "sanity.vocab-size-positive",
               "--vocab-size and --make-vocab-size-divisible-by must be at least 1 when set.");
MR_SANITY_RULE(kMoeSizes, "sanity.moe-sizes-positive",
               "--num-experts, --moe-router-topk, --moe-ffn-hidden-size and --moe-shared-expert-intermediate-size "
               "must be at least 1 when set (MoE models).");
MR_SANITY_RULE(kTrainLength, "sanity.train-length-nonnegative",
               "--train-iters, --train-samples, --eval-iters and the LR warmup/decay/WSD lengths (iterations, samples, "
               "the warmup fraction) must not be negative.");
MR_SANITY_RULE(kEvalBatchSizes, "sanity.eval-batch-sizes-positive",
               "--eval-micro-batch-size and --eval-global-batch-size must be at least 1.");
MR_SANITY_RULE(kIntervals, "sanity.intervals-positive",
               "--log-interval must not be 0 (Python's `iteration % 0`); --eval-interval neither, unless "
               "--skip-train or --full-validation, nor --tensorboard-log-interval with --tensorboard-dir; "
               "--eval-interval, --save-interval, --exit-interval, --exit-duration-in-mins, "
               "--non-persistent-save-interval and --ckpt-step must not be negative (a typo guard: Megatron runs a "
               "negative interval, its `%` firing every |n| iterations).");
MR_SANITY_RULE(kSaveNonEmpty, "sanity.save-nonempty",
               "--save must name a directory: an empty one is refused (Megatron would save nothing).");
MR_SANITY_RULE(kNumWorkers, "sanity.num-workers-nonnegative",
               "--num-workers (data loader processes) must not be negative.");
MR_SANITY_RULE(kLearningRates, "sanity.learning-rates-finite",
               "--lr, --min-lr, --decoupled-lr, --decoupled-min-lr and --lr-warmup-init must be finite and not "
               "negative.");
MR_SANITY_RULE(kWeightDecay, "sanity.weight-decay-finite",
               "--weight-decay, --start-weight-decay and --end-weight-decay must be finite and not negative.");
MR_SANITY_RULE(kClipGrad, "sanity.clip-grad-finite",
               "--clip-grad must be finite (0, or a negative value, turns clipping off).");
// Megatron clips only where clip_grad > 0 (core/optimizer: `if self.config.clip_grad > 0.0`), so a negative value
// runs as 0 does: accepted, and said, since it reads like a typo for a positive bound.
static const Rule kClipGradNegative{
    "sanity.clip-grad-negative", Rule::Level::Warning,
    "A negative --clip-grad turns clipping off, as 0 does (Megatron clips only when --clip-grad > 0): accepted and "
    "named, since it reads like a typo for a bound.",
    __FILE__, __LINE__, kStageSanity};
MR_SANITY_RULE(kAdamBetas, "sanity.adam-betas-range", "--adam-beta1 and --adam-beta2 must lie in [0, 1).");
MR_SANITY_RULE(kAdamEps, "sanity.adam-eps-positive", "--adam-eps must be finite and greater than 0.");
MR_SANITY_RULE(kSgdMomentum, "sanity.sgd-momentum-finite", "--sgd-momentum must be finite and not negative.");
MR_SANITY_RULE(kLossScale, "sanity.loss-scale-positive",
               "Where Megatron builds a loss scaler (--fp16, --bf16 or --use-distributed-optimizer), a --loss-scale "
               "other than 0 (`if config.loss_scale`: 0 is none) must be greater than 0 and finite in float32 (Megatron's scaler holds it in an fp32 tensor); where --fp16 builds the "
               "dynamic scaler (no such --loss-scale), --initial-loss-scale and --min-loss-scale likewise, "
               "--loss-scale-window greater than 0 and --hysteresis at least 1.");
MR_SANITY_RULE(kInitStd, "sanity.init-method-std-finite", "--init-method-std must be finite and not negative.");
MR_SANITY_RULE(kDropout, "sanity.dropout-range", "--hidden-dropout and --attention-dropout must lie in [0, 1].");
// A warning of the stage: a value Megatron accepts and documents as needing something else, which it does not check.
static const Rule kEmbeddingMinNormDistOpt{
    "sanity.embedding-min-norm-needs-distributed-optimizer", Rule::Level::Warning,
    "--embedding-min-norm is documented as requiring the distributed optimizer (OptimizerConfig."
    "embedding_min_norm), which Megatron does not check: without --use-distributed-optimizer (or the deprecated "
    "--optimizer dist_muon) it may have no effect. megatron-run's own training run refuses it (init.training-run).",
    __FILE__, __LINE__, kStageSanity};
MR_SANITY_RULE(kWorldSize, "sanity.world-size-range",
               "The world size (WORLD_SIZE, --world-size, --nproc-per-node x --nnodes) must be between 1 and "
               "2147483647.");
MR_SANITY_RULE(kRank, "sanity.rank-in-world", "The rank (RANK) must be 0 or more and less than the world size.");

// The number a dest holds, when it is set to one (ints and floats; bools and None are not numbers here).
std::optional<double> number(Context& ctx, const char* dest) {
  if (!ctx.has(dest)) return std::nullopt;
  const Value& v = ctx[dest];
  if (!v.is_number()) return std::nullopt;
  return v.as_float();
}

// The value as the message shows it: Python's repr (2, -1, nan, inf, 1e-05).
std::string shown(Context& ctx, const char* dest) { return ctx[dest].py_repr(); }

// Fails `rule` when `dest` is a number outside what `ok` accepts; `need` says what is needed ("at least 1").
template <class Ok>
void check(Context& ctx, const Rule& rule, const char* dest, Ok ok, const std::string& need,
           const std::string& why = {}) {
  auto v = number(ctx, dest);
  if (!v || ok(*v)) return;
  const std::string derived =
      ctx.args().provenance(dest).kind == Provenance::Kind::Derived ? " (derived by the validation chain)" : "";
  ctx.fail(rule,
           Context::flag(dest) + " (" + shown(ctx, dest) + ")" + derived + " must be " + need +
               (why.empty() ? std::string() : ": " + why),
           {dest});
}

bool at_least_1(double v) { return v >= 1; }
bool non_negative(double v) { return v >= 0; }  // false for NaN
bool finite_non_negative(double v) { return std::isfinite(v) && v >= 0; }
bool finite_positive(double v) { return std::isfinite(v) && v > 0; }

void model_shape(Context& ctx) {
  if (ctx.has("hybrid_layer_pattern") && ctx["hybrid_layer_pattern"].is_str() && ctx.has("num_layers") &&
      ctx["num_layers"] == Value(0))
    ctx.fail(kHybridPatternLayers,
             "--hybrid-layer-pattern " + ctx["hybrid_layer_pattern"].py_repr() +
                 " holds no layer in its main part, so the model would have 0 layers",
             {"hybrid_layer_pattern"});
  check(ctx, kNumLayers, "num_layers", at_least_1, "at least 1", "a model needs at least one layer");
  check(ctx, kHiddenSize, "hidden_size", at_least_1, "at least 1");
  check(ctx, kFfnHiddenSize, "ffn_hidden_size", at_least_1, "at least 1");
  check(ctx, kAttentionHeads, "num_attention_heads", at_least_1, "at least 1");
  if (ctx.has("group_query_attention") && ctx.on("group_query_attention"))
    check(ctx, kAttentionHeads, "num_query_groups", at_least_1, "at least 1");
  check(ctx, kKvChannels, "kv_channels", at_least_1, "at least 1");
  for (const char* d : {"seq_length", "max_position_embeddings", "decoder_seq_length", "encoder_seq_length"})
    check(ctx, kSequenceLength, d, at_least_1, "at least 1");
  check(ctx, kVocabSize, "vocab_size", at_least_1, "at least 1");
  check(ctx, kVocabSize, "make_vocab_size_divisible_by", at_least_1, "at least 1");
  if (number(ctx, "num_experts")) {
    check(ctx, kMoeSizes, "num_experts", at_least_1, "at least 1");
    for (const char* d : {"moe_router_topk", "moe_ffn_hidden_size", "moe_shared_expert_intermediate_size"})
      check(ctx, kMoeSizes, d, at_least_1, "at least 1");
  }
}

void training(Context& ctx) {
  // Megatron's scheduler takes a negative warmup or WSD length without a word (a negative warmup fraction makes a
  // negative warmup; a negative WSD length never anneals): each is a typo, refused alike.
  for (const char* d : {"train_iters", "train_samples", "eval_iters", "lr_warmup_iters", "lr_warmup_samples",
                        "lr_warmup_fraction", "lr_decay_iters", "lr_decay_samples", "lr_wsd_decay_iters",
                        "lr_wsd_decay_samples"})
    check(ctx, kTrainLength, d, non_negative, "0 or more");
  // The learning-rate scheduler counts samples: an iteration count times the global batch size must fit.
  if (ctx.has("global_batch_size") && ctx["global_batch_size"].is_int())
    for (const char* d : {"train_iters", "lr_decay_iters", "lr_warmup_iters", "lr_wsd_decay_iters"})
      if (ctx.has(d) && ctx[d].is_int())
        (void)ctx.mul(ctx.i(d), ctx.i("global_batch_size"),
                      Context::flag(d) + " x --global-batch-size (the learning-rate schedule counts samples)",
                      {d, "global_batch_size"});
  for (const char* d : {"eval_micro_batch_size", "eval_global_batch_size"})
    check(ctx, kEvalBatchSizes, d, at_least_1, "at least 1");
  // Python's `iteration % n == 0`: 0 divides by zero; a negative n is true at every multiple of |n| (-1: every
  // iteration), so Megatron runs with it.
  auto nonzero = [](double v) { return v != 0; };
  check(ctx, kIntervals, "log_interval", nonzero, "other than 0",
        "the training loop tests `iteration % --log-interval` and would divide by zero");
  // get_train_valid_test_num_samples divides --train-iters by --eval-interval (`if args.eval_interval` only guards
  // the evaluation itself), unless the run skips training or validates on the full set.
  if (!ctx.on("skip_train") && !(ctx.has("full_validation") && ctx.on("full_validation")))
    check(ctx, kIntervals, "eval_interval", nonzero, "other than 0 (unless --skip-train or --full-validation)",
          "Megatron divides --train-iters by it when it sizes the validation data, before the first iteration");
  // training_log tests `iteration % --tensorboard-log-interval` where a TensorBoard writer exists.
  if (ctx.has("tensorboard_dir") && !ctx.is_none("tensorboard_dir"))
    check(ctx, kIntervals, "tensorboard_log_interval", nonzero, "other than 0 with --tensorboard-dir",
          "the training loop tests `iteration % --tensorboard-log-interval` when it writes to TensorBoard");
  for (const char* d : {"eval_interval", "save_interval", "exit_interval", "non_persistent_save_interval"})
    check(ctx, kIntervals, d, non_negative, "0 or more");
  // Megatron's load reads a negative --ckpt-step as "no tracker" and starts from scratch (a --save to the same
  // directory then overwrites its checkpoints); 0 is Megatron's "not given".
  check(ctx, kIntervals, "ckpt_step", non_negative, "0 or more",
        "a negative step makes Megatron's load act as if the checkpoint had no tracker");
  // Megatron tests `if args.exit_duration_in_mins:` and then `train_time > exit_duration_in_mins`: a negative
  // duration ends the run after its first iteration.
  check(ctx, kIntervals, "exit_duration_in_mins", non_negative, "0 or more",
        "Megatron would save and exit after the first iteration; 0 (or leaving it out) sets no time limit");
  check(ctx, kNumWorkers, "num_workers", non_negative, "0 or more");
  // Megatron reads an empty --save as no --save (`if args.save`): the run trains and saves nothing, without a word.
  // An empty value is mostly an unset variable (--save $CKPT_DIR), and the training it was to keep would be lost.
  if (ctx.has("save") && ctx["save"].is_str() && ctx.s("save").empty())
    ctx.fail(kSaveNonEmpty,
             "--save is empty: Megatron would take it as no --save and save nothing; give the checkpoint "
             "directory, or leave --save out to train without saving",
             {"save"});
}

void optimizer(Context& ctx) {
  for (const char* d : {"lr", "min_lr", "decoupled_lr", "decoupled_min_lr", "lr_warmup_init"})
    check(ctx, kLearningRates, d, finite_non_negative, "a finite number, 0 or more");
  for (const char* d : {"weight_decay", "start_weight_decay", "end_weight_decay"})
    check(ctx, kWeightDecay, d, finite_non_negative, "a finite number, 0 or more");
  check(ctx, kClipGrad, "clip_grad", [](double v) { return std::isfinite(v); }, "a finite number",
        "0 turns clipping off");
  if (std::optional<double> clip = number(ctx, "clip_grad"); clip && *clip < 0)
    ctx.warn(kClipGradNegative,
             "--clip-grad " + shown(ctx, "clip_grad") +
                 " is negative: Megatron clips the gradient norm only when --clip-grad is greater than 0, so this "
                 "trains without clipping, as --clip-grad 0 does; give a positive bound to clip",
             {"clip_grad"});
  for (const char* d : {"adam_beta1", "adam_beta2"})
    check(ctx, kAdamBetas, d, [](double v) { return v >= 0 && v < 1; }, "in [0, 1)",
          "Adam's moment estimates diverge otherwise");
  check(ctx, kAdamEps, "adam_eps", finite_positive, "a finite number greater than 0",
        "it keeps Adam's update from dividing by zero");
  check(ctx, kSgdMomentum, "sgd_momentum", finite_non_negative, "a finite number, 0 or more");
  {
    // The scaler keeps the scale it uses in an fp32 tensor: --loss-scale's constant one, or with --fp16 (and no
    // --loss-scale: `if config.loss_scale ... elif config.fp16`) the dynamic one's start and floor. Below 2^128 -
    // 2^103 a value rounds to float32's largest at most; from there on it is inf, and every step would be skipped.
    // A --loss-scale of 0 is none (Python's truthiness); the dynamic scaler's values are read only where it is built.
    // Megatron builds a scaler only for fp16, bf16 or the distributed optimizer (fp32 otherwise reads none of them).
    const bool scaler = ctx.on("fp16") || ctx.on("bf16") || ctx.on("use_distributed_optimizer");
    const bool constant =
        scaler && ctx.has("loss_scale") && !ctx.is_none("loss_scale") && ctx.f("loss_scale") != 0.0;
    const bool dynamic = ctx.on("fp16") && !constant;
    std::vector<const char*> held;
    if (constant) held.push_back("loss_scale");
    if (dynamic) held.insert(held.end(), {"initial_loss_scale", "min_loss_scale"});
    for (const char* d : held)
      check(ctx, kLossScale, d, [](double v) { return finite_positive(v) && v < 0x1.ffffffp+127; },
            "a number greater than 0 that float32 holds (below 3.4028235677973366e+38)",
            "the scaler keeps it in an fp32 tensor, where a larger value is inf and every step would be skipped");
    if (dynamic) {
      check(ctx, kLossScale, "loss_scale_window", [](double v) { return v > 0; }, "greater than 0",
            "Megatron's DynamicGradScaler asserts growth_interval > 0");
      check(ctx, kLossScale, "hysteresis", at_least_1, "at least 1", "Megatron's DynamicGradScaler asserts hysteresis > 0");
    }
  }
  check(ctx, kInitStd, "init_method_std", finite_non_negative, "a finite number, 0 or more");
  for (const char* d : {"hidden_dropout", "attention_dropout"})
    check(ctx, kDropout, d, [](double v) { return v >= 0 && v <= 1; }, "in [0, 1]", "it is a probability");
  // OptimizerConfig's doc: "requires the distributed optimizer"; its validate() checks only the value itself.
  if (ctx.has("embedding_min_norm") && !ctx.is_none("embedding_min_norm") && !ctx.on("use_distributed_optimizer") &&
      !(ctx["optimizer"].is_str() && ctx.s("optimizer") == "dist_muon"))
    ctx.warn(kEmbeddingMinNormDistOpt,
             "--embedding-min-norm " + shown(ctx, "embedding_min_norm") +
                 " is documented as requiring the distributed optimizer (OptimizerConfig.embedding_min_norm: the "
                 "rows are rescaled in its step), and --use-distributed-optimizer is not set; Megatron does not "
                 "check this, so the norm floor may not be applied: add --use-distributed-optimizer (megatron-run's "
                 "own training run refuses the flag without it)",
             {"embedding_min_norm", "use_distributed_optimizer"});
}

void job(Context& ctx) {
  auto ws = number(ctx, "world_size");
  if (ws && !(*ws >= 1 && *ws <= static_cast<double>(sanity::kMaxWorldSize)))
    ctx.fail(kWorldSize,
             "the world size (" + shown(ctx, "world_size") +
                 "; WORLD_SIZE, --world-size or --nproc-per-node x --nnodes) must be between 1 and " +
                 std::to_string(sanity::kMaxWorldSize),
             {"world_size"});
  auto rank = number(ctx, "rank");
  if (rank && ws && !(*rank >= 0 && *rank < *ws))
    ctx.fail(kRank,
             "the rank (" + shown(ctx, "rank") + ", from " + ctx.args().provenance("rank").describe() +
                 ") must be 0 or more and less than the world size (" + shown(ctx, "world_size") + ")",
             {"rank", "world_size"});
}

}  // namespace

namespace sanity {

const Rule& integer_overflow_rule() { return kIntegerOverflow; }

std::vector<Section> sections() {
  return {
      {"sanity.job", &job},                  // world size and rank first: everything else is per rank
      {"sanity.model-shape", &model_shape},  // layers, widths, heads, sequence and vocabulary sizes
      {"sanity.training", &training},        // iteration counts, eval batch sizes, intervals, data loader
      {"sanity.optimizer", &optimizer},      // learning rates, weight decay, clipping, Adam, loss scaling
  };
}

}  // namespace sanity
}  // namespace mr
