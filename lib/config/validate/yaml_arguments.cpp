// validate_yaml() for --yaml-cfg runs, section by section in Megatron's order. Line numbers are those of
// Megatron-LM megatron/training/yaml_arguments.py ("py NN"); "seed NN" is ../shared/spec/arguments.py.
#include "config/validate/yaml_arguments.h"
#include "config/validate/python.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <optional>
#include <stdexcept>

namespace mr {

namespace {

MR_RULE(kCkptNeedsLoad, "yaml.use-checkpoint-args-needs-load",
        "use_checkpoint_args needs load or pretrained_checkpoint.");
MR_RULE(kCkptNotLocal, "yaml.use-checkpoint-args-not-local",
        "use_checkpoint_args is not supported with non_persistent_ckpt_type 'local'.");
MR_RULE(kWsByTp, "yaml.world-size-divisible-by-tp",
        "The world size is divisible by model_parallel.tensor_model_parallel_size (after capping it at the world "
        "size).");
MR_RULE(kWsByMp, "yaml.world-size-divisible-by-model-parallel",
        "The world size is divisible by tensor x pipeline x context parallel size.");
MR_RULE(kTpCommOverlap, "yaml.tp-comm-overlap-needs-sequence-parallel",
        "model_parallel.tp_comm_overlap needs model_parallel.sequence_parallel.");
MR_RULE(kMbsRequired, "yaml.micro-batch-size-required", "micro_batch_size is not null.");
MR_RULE(kMbsPositive, "yaml.micro-batch-size-positive", "micro_batch_size is positive.");
MR_RULE(kStepSchedule, "yaml.step-batch-size-schedule-or-global-batch-size",
        "step_batch_size_schedule and an explicit global_batch_size are mutually exclusive.");
MR_RULE(kGbsPositive, "yaml.global-batch-size-positive", "global_batch_size (given or derived) is positive.");
MR_RULE(kEvalGbs, "yaml.eval-global-batch-size-divisible",
        "eval_global_batch_size is divisible by eval_micro_batch_size x data-parallel size.");
MR_RULE(kVppNeedsPp, "yaml.virtual-pipeline-needs-pp-gt-2",
        "num_layers_per_virtual_pipeline_stage needs model_parallel.pipeline_model_parallel_size > 2.");
MR_RULE(kVppLayersByPp, "yaml.virtual-pipeline-layers-divisible-by-pp",
        "With num_layers_per_virtual_pipeline_stage, language_model.num_layers is divisible by the transformer "
        "pipeline size.");
MR_RULE(kVppStageLayers, "yaml.virtual-pipeline-stage-layers-divisible",
        "The layers of a pipeline stage are divisible by num_layers_per_virtual_pipeline_stage.");
MR_RULE(kOpgNeedsDistOpt, "yaml.overlap-param-gather-needs-distributed-optimizer",
        "overlap_param_gather needs use_distributed_optimizer.");
MR_RULE(kOpgNeedsOgr, "yaml.overlap-param-gather-needs-overlap-grad-reduce",
        "overlap_param_gather needs overlap_grad_reduce.");
MR_RULE(kFp16Bf16, "yaml.fp16-and-bf16", "model_parallel.fp16 and model_parallel.bf16 are mutually exclusive.");
MR_RULE(kIterNoSamples, "yaml.iteration-based-no-train-samples",
        "Iteration-based training (train_iters) leaves train_samples null.");
MR_RULE(kIterNoDecaySamples, "yaml.iteration-based-no-lr-decay-samples",
        "Iteration-based training leaves lr_decay_samples null.");
MR_RULE(kIterNoWarmupSamples, "yaml.iteration-based-no-lr-warmup-samples",
        "Iteration-based training leaves lr_warmup_samples at 0.");
MR_RULE(kIterOneWarmup, "yaml.iteration-based-one-warmup",
        "Iteration-based training: lr_warmup_fraction and lr_warmup_iters are mutually exclusive.");
MR_RULE(kSamplesNoIters, "yaml.sample-based-no-train-iters",
        "Sample-based training (train_samples) leaves train_iters null.");
MR_RULE(kSamplesNoDecayIters, "yaml.sample-based-no-lr-decay-iters",
        "Sample-based training leaves lr_decay_iters null.");
MR_RULE(kSamplesNoWarmupIters, "yaml.sample-based-no-lr-warmup-iters",
        "Sample-based training leaves lr_warmup_iters at 0.");
MR_RULE(kSamplesOneWarmup, "yaml.sample-based-one-warmup",
        "Sample-based training: lr_warmup_fraction and lr_warmup_samples are mutually exclusive.");
MR_RULE(kLayersAndEncoder, "yaml.num-layers-and-encoder-num-layers",
        "language_model.num_layers and encoder_num_layers are mutually exclusive.");
MR_RULE(kLayersRequired, "yaml.num-layers-required",
        "One of language_model.num_layers and encoder_num_layers is given.");
MR_RULE(kRequiredModelArgs, "yaml.required-model-args",
        "language_model.num_layers, hidden_size and num_attention_heads are not null.");
MR_RULE(kHiddenByHeads, "yaml.hidden-size-divisible-by-heads",
        "Without kv_channels, language_model.hidden_size is divisible by num_attention_heads.");
MR_RULE(kSeqAndEncoderSeq, "yaml.seq-length-and-encoder-seq-length",
        "seq_length and encoder_seq_length are mutually exclusive.");
MR_RULE(kSeqRequired, "yaml.seq-length-required", "One of seq_length and encoder_seq_length is given.");
MR_RULE(kMaxPosSeq, "yaml.max-position-embeddings-seq-length", "max_position_embeddings >= seq_length.");
MR_RULE(kMaxPosDecoderSeq, "yaml.max-position-embeddings-decoder-seq-length",
        "max_position_embeddings >= decoder_seq_length.");
MR_RULE(kMinLr, "yaml.min-lr-le-lr", "min_lr <= lr.");
MR_RULE(kSaveInterval, "yaml.save-needs-save-interval", "save needs save_interval.");
MR_RULE(kFp16LmCe, "yaml.fp16-lm-cross-entropy-needs-fp16",
        "fp16_lm_cross_entropy needs the top-level fp16 (validate_yaml reads args.fp16, not model_parallel.fp16).");
MR_RULE(kFp32Residual, "yaml.fp32-residual-needs-fp16-or-bf16",
        "language_model.fp32_residual_connection needs model_parallel.fp16 or bf16.");
MR_RULE(kGroupedGemmBf16, "yaml.moe-grouped-gemm-needs-bf16", "language_model.moe_grouped_gemm needs bf16.");
MR_RULE(kGroupedGemmArch, "yaml.moe-grouped-gemm-compute-capability",
        "language_model.moe_grouped_gemm needs a GPU of compute capability 8 or newer.");
MR_RULE(kConstWdNoStart, "yaml.constant-weight-decay-no-start",
        "weight_decay_incr_style 'constant' leaves start_weight_decay null.");
MR_RULE(kConstWdNoEnd, "yaml.constant-weight-decay-no-end",
        "weight_decay_incr_style 'constant' leaves end_weight_decay null.");
MR_RULE(kWdIncrStart, "yaml.weight-decay-incr-needs-start",
        "A weight_decay_incr_style other than 'constant' needs start_weight_decay.");
MR_RULE(kWdIncrEnd, "yaml.weight-decay-incr-needs-end",
        "A weight_decay_incr_style other than 'constant' needs end_weight_decay.");
MR_RULE(kDsaTp, "yaml.distribute-saved-activations-needs-tp",
        "language_model.distribute_saved_activations needs tensor_model_parallel_size > 1.");
MR_RULE(kDsaFull, "yaml.distribute-saved-activations-needs-full-recompute",
        "language_model.distribute_saved_activations needs recompute_granularity 'full'.");
MR_RULE(kDsaMethod, "yaml.distribute-saved-activations-needs-recompute-method",
        "language_model.distribute_saved_activations needs a recompute_method.");
MR_RULE(kDsaTorch, "yaml.distribute-saved-activations-torch-version",
        "language_model.distribute_saved_activations needs torch 1.10 or newer.");
MR_RULE(kSelectiveNoMethod, "yaml.selective-recompute-no-method",
        "recompute_granularity 'selective' takes no recompute_method.");
MR_RULE(kSpCudaConnections, "yaml.sequence-parallel-cuda-max-connections",
        "model_parallel.sequence_parallel (with tensor parallelism) needs CUDA_DEVICE_MAX_CONNECTIONS=1 "
        "(Megatron: RuntimeError).");
MR_RULE(kMoeTpSp, "yaml.moe-tp-needs-sequence-parallel",
        "MoE (language_model.num_moe_experts) with tensor parallelism needs sequence_parallel.");
MR_RULE(kEpNeedsExperts, "yaml.expert-parallel-needs-experts",
        "expert_model_parallel_size > 1 needs language_model.num_moe_experts.");
MR_RULE(kExpertsByEp, "yaml.experts-divisible-by-ep",
        "language_model.num_moe_experts is divisible by expert_model_parallel_size.");
MR_RULE(kEpNoFp16, "yaml.expert-parallel-no-fp16", "Expert parallelism does not support model_parallel.fp16.");
MR_RULE(kSectionCollision, "yaml.section-key-collision",
        "A key of model_parallel / language_model is neither a top-level key nor in the other section (validate_yaml "
        "flattens the sections into the top level; Megatron: TypeError, multiple values for keyword argument).");

// `path` quoted in a message.
std::string q(std::string_view path) { return "`" + std::string(path) + "`"; }

constexpr const char* kMp = "model_parallel";

// seed 101-112 (parse_and_validate_args, before validate_yaml): the checkpoint-args asserts. Loading the arguments
// from the checkpoint is not done (a dry run has no checkpoint); the YAML values are validated as they are.
void use_checkpoint_args(YamlArgs& y) {
  if (!y.truthy("use_checkpoint_args")) return;
  y.require(!y.is_none("load") || !y.is_none("pretrained_checkpoint"), kCkptNeedsLoad,
            "use_checkpoint_args requires load or pretrained_checkpoint", {"use_checkpoint_args", "load"});
  y.require(y.get("non_persistent_ckpt_type") != Value("local"), kCkptNotLocal,
            "use_checkpoint_args is not supported with non_persistent_ckpt_type 'local': two-stage checkpoint "
            "loading is not implemented",
            {"use_checkpoint_args", "non_persistent_ckpt_type"});
}

// py 50-55: a whitespace-separated data_path string becomes a list.
void data_path(YamlArgs& y) {
  const Value& v = y.get("data_path");
  if (!v.is_str()) return;
  List words;
  std::string w;
  for (char c : v.as_str() + " ") {
    if (std::isspace(static_cast<unsigned char>(c))) {
      if (!w.empty()) words.push_back(Value(w));
      w.clear();
    } else {
      w += c;
    }
  }
  if (words.size() != 1) y.set("data_path", Value(std::move(words)), "py 55: data_path split on whitespace");
}

// py 57-91
void parallel_sizes(YamlArgs& y) {
  const int64_t ws = y.integer("world_size");
  int64_t tp = std::min(y.integer("model_parallel.tensor_model_parallel_size"), ws);
  y.set("model_parallel.tensor_model_parallel_size", Value(tp), "py 58: min(tensor_model_parallel_size, world_size)");
  y.require(y.mod(ws, tp, "model_parallel.tensor_model_parallel_size") == 0, kWsByTp,
            "world size (" + std::to_string(ws) + ") is not divisible by tensor model parallel size (" +
                std::to_string(tp) + ")",
            {"model_parallel.tensor_model_parallel_size"});
  int64_t pp = std::min(y.integer("model_parallel.pipeline_model_parallel_size"),
                        y.floordiv(ws, tp, "model_parallel.tensor_model_parallel_size"));
  y.set("model_parallel.pipeline_model_parallel_size", Value(pp),
        "py 64: min(pipeline_model_parallel_size, world_size // tensor_model_parallel_size)");
  int64_t tpp = y.truthy("account_for_embedding_in_pipeline_split") ? pp - 1 : pp;
  y.set("model_parallel.transformer_pipeline_model_parallel_size", Value(tpp),
        "py 67: pipeline size, less one with account_for_embedding_in_pipeline_split");
  const int64_t mp = y.ctx().mul(pp, tp, "model_parallel.pipeline_model_parallel_size x tensor_model_parallel_size");
  const int64_t cp = y.integer("model_parallel.context_parallel_size");
  const int64_t mp_cp = y.ctx().mul(mp, cp, "tensor x pipeline x context parallel size");
  // The product is 0 only through a 0 pipeline or context size (tp is positive here): the failure names its line.
  const std::string_view zero_key =
      pp == 0 ? "model_parallel.pipeline_model_parallel_size" : "model_parallel.context_parallel_size";
  y.require(y.mod(ws, mp_cp, "tensor x pipeline x context parallel size", {zero_key}) == 0,
            kWsByMp,
            "world size (" + std::to_string(ws) + ") is not divisible by tensor parallel size (" + std::to_string(tp) +
                ") times pipeline parallel size (" + std::to_string(pp) + ") times context parallel size (" +
                std::to_string(cp) + ")",
            {"model_parallel.tensor_model_parallel_size", "model_parallel.pipeline_model_parallel_size",
             "model_parallel.context_parallel_size"});
  y.set("data_parallel_size",
        Value(y.floordiv(ws, mp_cp, "tensor x pipeline x context parallel size", {zero_key})),
        "py 82: world_size // (tp * pp * cp)");
}

// py 93-94
void tp_comm_overlap(YamlArgs& y) {
  if (!y.truthy("model_parallel.tp_comm_overlap")) return;
  y.require(y.get("model_parallel.sequence_parallel") == Value(true), kTpCommOverlap,
            "Tensor parallel communication/GEMM overlap can happen only when sequence parallelism is enabled",
            {"model_parallel.tp_comm_overlap", "model_parallel.sequence_parallel"});
}

// py 96-108 apply the calling script's defaults: megatron-run validates as validate_yaml(args, {}) does, so
// there are none (no section).

// py 110-125
void batch_size(YamlArgs& y) {
  y.require(!y.is_none("micro_batch_size"), kMbsRequired, "micro_batch_size must be given", {"micro_batch_size"});
  const int64_t mbs = y.integer("micro_batch_size");
  y.require(mbs > 0, kMbsPositive, "micro_batch_size must be positive, got " + std::to_string(mbs),
            {"micro_batch_size"});
  // getattr(args, '_is_global_batch_size_explicitly_specified', args.global_batch_size is not None): the
  // fallback is evaluated first, so global_batch_size must exist.
  const bool gbs_given = !y.is_none("global_batch_size");
  const bool explicit_gbs = y.get_or("_is_global_batch_size_explicitly_specified", Value(gbs_given)).truthy();
  if (!y.is_none("step_batch_size_schedule") && explicit_gbs)
    y.fail(kStepSchedule, "Cannot specify both --step-batch-size-schedule and --global-batch-size",
           {"step_batch_size_schedule", "global_batch_size"});
  if (!gbs_given)
    y.set("global_batch_size",
          Value(y.ctx().mul(mbs, y.integer("data_parallel_size"), "micro_batch_size x data_parallel_size")),
          "py 121: micro_batch_size * data_parallel_size");
  const int64_t gbs = y.integer("global_batch_size");
  y.require(gbs > 0, kGbsPositive, "global_batch_size must be positive, got " + std::to_string(gbs),
            {"global_batch_size"});
}

// py 127-134
void eval_batch_size(YamlArgs& y) {
  // A failure is placed at the file's line of the key that holds the value: eval_global_batch_size, or the
  // global_batch_size it is taken from (py 129) when it is unset or null; likewise eval_micro_batch_size.
  const bool egbs_derived = y.get_or("eval_global_batch_size", Value()).is_none();
  const bool embs_derived = y.get_or("eval_micro_batch_size", Value()).is_none();
  if (egbs_derived)
    y.set("eval_global_batch_size", y.get("global_batch_size"), "py 129: eval_global_batch_size = global_batch_size");
  if (embs_derived)
    y.set("eval_micro_batch_size", y.get("micro_batch_size"), "py 131: eval_micro_batch_size = micro_batch_size");
  const std::string_view egbs_key = egbs_derived ? "global_batch_size" : "eval_global_batch_size";
  const std::string_view embs_key = embs_derived ? "micro_batch_size" : "eval_micro_batch_size";
  const int64_t egbs = y.integer("eval_global_batch_size"), embs = y.integer("eval_micro_batch_size");
  const int64_t dp = y.integer("data_parallel_size");
  y.require(y.mod(egbs, y.ctx().mul(embs, dp, "eval_micro_batch_size x data_parallel_size"),
                  "eval_micro_batch_size * data_parallel_size", {embs_key}) == 0,
            kEvalGbs,
            "eval_global_batch_size (" + std::to_string(egbs) + ") must be divisible by eval_micro_batch_size (" +
                std::to_string(embs) + ") * data_parallel_size (" + std::to_string(dp) + ")",
            {egbs_key, embs_key});
}

// py 136-154
void virtual_pipeline(YamlArgs& y) {
  if (y.is_none("num_layers_per_virtual_pipeline_stage")) {
    y.set("model_parallel.virtual_pipeline_model_parallel_size", Value(), "py 149: no interleaved schedule");
    y.set("model_parallel.overlap_p2p_comm", Value(false),
          "py 151: overlapping P2P communication needs the interleaved schedule");
    return;
  }
  const int64_t pp = y.integer("model_parallel.pipeline_model_parallel_size");
  y.require(pp > 2, kVppNeedsPp, "pipeline-model-parallel size should be greater than 2 with interleaved schedule",
            {"num_layers_per_virtual_pipeline_stage", "model_parallel.pipeline_model_parallel_size"});
  const int64_t layers = y.integer("language_model.num_layers");
  const int64_t tpp = y.integer("model_parallel.transformer_pipeline_model_parallel_size");
  y.require(y.mod(layers, tpp, "model_parallel.transformer_pipeline_model_parallel_size") == 0, kVppLayersByPp,
            "number of layers should be divisible by the pipeline parallel size (" + std::to_string(layers) +
                " layers, " + std::to_string(tpp) + " transformer pipeline stages)",
            {"language_model.num_layers", "model_parallel.pipeline_model_parallel_size"});
  const int64_t per_stage = y.floordiv(layers, tpp, "model_parallel.transformer_pipeline_model_parallel_size");
  const int64_t per_virtual = y.integer("num_layers_per_virtual_pipeline_stage");
  y.require(y.mod(per_stage, per_virtual, "num_layers_per_virtual_pipeline_stage") == 0, kVppStageLayers,
            "number of layers per pipeline stage (" + std::to_string(per_stage) +
                ") must be divisible number of layers per virtual pipeline stage (" + std::to_string(per_virtual) + ")",
            {"num_layers_per_virtual_pipeline_stage", "language_model.num_layers"});
  y.set("model_parallel.virtual_pipeline_model_parallel_size",
        Value(y.floordiv(per_stage, per_virtual, "num_layers_per_virtual_pipeline_stage")),
        "py 146: layers per pipeline stage // num_layers_per_virtual_pipeline_stage");
}

// py 156-160
void overlap_param_gather(YamlArgs& y) {
  if (!y.truthy("overlap_param_gather")) return;
  y.require(y.truthy("use_distributed_optimizer"), kOpgNeedsDistOpt,
            "--overlap-param-gather only supported with distributed optimizer",
            {"overlap_param_gather", "use_distributed_optimizer"});
  y.require(y.truthy("overlap_grad_reduce"), kOpgNeedsOgr,
            "--overlap-grad-reduce should be turned on when using --overlap-param-gather",
            {"overlap_param_gather", "overlap_grad_reduce"});
}

// py 162-179
void params_dtype(YamlArgs& y) {
  const char* both = "model_parallel.fp16 and model_parallel.bf16 cannot both be set";
  if (y.truthy("model_parallel.fp16")) {
    y.require(!y.truthy("model_parallel.bf16"), kFp16Bf16, both, {"model_parallel.fp16", "model_parallel.bf16"});
    y.set("model_parallel.params_dtype", Value("torch.float16"), "py 165: torch.half for fp16");
  }
  if (y.truthy("model_parallel.bf16")) {
    y.require(!y.truthy("model_parallel.fp16"), kFp16Bf16, both, {"model_parallel.bf16", "model_parallel.fp16"});
    y.set("model_parallel.params_dtype", Value("torch.bfloat16"), "py 168: torch.bfloat16 for bf16");
    if (!y.truthy("accumulate_allreduce_grads_in_fp32"))
      y.set("accumulate_allreduce_grads_in_fp32", Value(true), "py 172: bf16 accumulates and all-reduces in fp32");
  }
  // py 177-179: rank 0 prints model_parallel.params_dtype.
  if (y.integer("rank") == 0) (void)y.get("model_parallel.params_dtype");
}

// py 181-193
void dataloader_and_consumed(YamlArgs& y) {
  if (y.is_none("dataloader_type")) y.set("dataloader_type", Value("single"), "py 182: default dataloader");
  y.set("consumed_train_samples", Value(0), "py 185");
  y.set("consumed_valid_samples", Value(0), "py 186");
  y.set("model_parallel.variable_seq_lengths", Value(false), "py 193");
}

// py 195-207
void iteration_based(YamlArgs& y) {
  if (!y.truthy("train_iters")) return;
  y.require(y.is_none("train_samples"), kIterNoSamples, "expected iteration-based training",
            {"train_iters", "train_samples"});
  y.require(y.is_none("lr_decay_samples"), kIterNoDecaySamples, "expected iteration-based learning rate decay",
            {"train_iters", "lr_decay_samples"});
  y.require(y.get("lr_warmup_samples") == Value(0), kIterNoWarmupSamples,
            "expected iteration-based learning rate warmup", {"train_iters", "lr_warmup_samples"});
  if (!y.is_none("lr_warmup_fraction"))
    y.require(y.get("lr_warmup_iters") == Value(0), kIterOneWarmup,
              "can only specify one of lr-warmup-fraction and lr-warmup-iters",
              {"lr_warmup_fraction", "lr_warmup_iters"});
}

// py 209-222
void sample_based(YamlArgs& y) {
  if (!y.truthy("train_samples")) return;
  y.require(y.is_none("train_iters"), kSamplesNoIters, "expected sample-based training",
            {"train_samples", "train_iters"});
  y.require(y.is_none("lr_decay_iters"), kSamplesNoDecayIters, "expected sample-based learning rate decay",
            {"train_samples", "lr_decay_iters"});
  y.require(y.get("lr_warmup_iters") == Value(0), kSamplesNoWarmupIters, "expected sample-based learnig rate warmup",
            {"train_samples", "lr_warmup_iters"});
  if (!y.is_none("lr_warmup_fraction"))
    y.require(y.get("lr_warmup_samples") == Value(0), kSamplesOneWarmup,
              "can only specify one of lr-warmup-fraction and lr-warmup-samples",
              {"lr_warmup_fraction", "lr_warmup_samples"});
}

// py 224-238
void num_layers(YamlArgs& y) {
  if (!y.is_none("language_model.num_layers")) {
    y.require(y.is_none("encoder_num_layers"), kLayersAndEncoder,
              "cannot have both num-layers and encoder-num-layers specified",
              {"language_model.num_layers", "encoder_num_layers"});
    y.set("encoder_num_layers", y.get("language_model.num_layers"), "py 228: encoder_num_layers = num_layers");
  } else {
    y.require(!y.is_none("encoder_num_layers"), kLayersRequired,
              "either num-layers or encoder-num-layers should be specified",
              {"language_model.num_layers", "encoder_num_layers"});
    y.set("language_model.num_layers", y.get("encoder_num_layers"), "py 232: num_layers = encoder_num_layers");
  }
}

void required_args(YamlArgs& y) {
  // _check_arg_is_not_none(args.language_model, arg)
  for (const char* arg : {"num_layers", "hidden_size", "num_attention_heads"}) {
    const std::string path = std::string("language_model.") + arg;
    y.require(!y.is_none(path), kRequiredModelArgs, std::string(arg) + " argument is None", {path});
  }
}

// py 240-254
void ffn_and_kv_channels(YamlArgs& y) {
  if (y.is_none("language_model.ffn_hidden_size")) {
    const bool swiglu = y.get("language_model.activation_func") == Value("swiglu");
    const int64_t h = y.integer("language_model.hidden_size");
    // int((4 * h * 2 / 3) / 64) * 64: true division, truncated toward zero.
    const int64_t h8 = y.ctx().mul(8, h, "8 x language_model.hidden_size");
    const int64_t ffn = swiglu ? y.ctx().mul(static_cast<int64_t>(std::trunc((static_cast<double>(h8) / 3) / 64)), 64,
                                             "the SwiGLU ffn_hidden_size derived from language_model.hidden_size")
                               : y.ctx().mul(4, h, "4 x language_model.hidden_size");
    y.set("language_model.ffn_hidden_size", Value(ffn),
          swiglu ? "py 248: int((4 * hidden_size * 2 / 3) / 64) * 64 for swiglu" : "py 250: 4 * hidden_size");
  }
  if (y.is_none("language_model.kv_channels")) {
    const int64_t h = y.integer("language_model.hidden_size");
    const int64_t heads = y.integer("language_model.num_attention_heads");
    y.require(y.mod(h, heads, "language_model.num_attention_heads") == 0, kHiddenByHeads,
              "hidden_size (" + std::to_string(h) + ") is not divisible by num_attention_heads (" +
                  std::to_string(heads) + ")",
              {"language_model.hidden_size", "language_model.num_attention_heads"});
    y.set("language_model.kv_channels", Value(y.floordiv(h, heads, "language_model.num_attention_heads")),
          "py 254: hidden_size // num_attention_heads");
  }
}

// py 256-271
void seq_length(YamlArgs& y) {
  if (!y.is_none("seq_length")) {
    y.require(y.is_none("encoder_seq_length"), kSeqAndEncoderSeq, "seq_length and encoder_seq_length are both given",
              {"seq_length", "encoder_seq_length"});
    y.set("encoder_seq_length", y.get("seq_length"), "py 259: encoder_seq_length = seq_length");
  } else {
    y.require(!y.is_none("encoder_seq_length"), kSeqRequired, "one of seq_length and encoder_seq_length is needed",
              {"seq_length", "encoder_seq_length"});
    y.set("seq_length", y.get("encoder_seq_length"), "py 262: seq_length = encoder_seq_length");
  }
  if (!y.is_none("seq_length")) {
    const double seq = y.number("seq_length"), max_pos = y.number("max_position_embeddings");
    y.require(max_pos >= seq, kMaxPosSeq,
              "max_position_embeddings (" + y.get("max_position_embeddings").py_str() + ") is smaller than seq_length (" +
                  y.get("seq_length").py_str() + ")",
              {"max_position_embeddings", "seq_length"});
  }
  if (!y.is_none("decoder_seq_length")) {
    const double dec = y.number("decoder_seq_length"), max_pos = y.number("max_position_embeddings");
    y.require(max_pos >= dec, kMaxPosDecoderSeq,
              "max_position_embeddings (" + y.get("max_position_embeddings").py_str() +
                  ") is smaller than decoder_seq_length (" + y.get("decoder_seq_length").py_str() + ")",
              {"max_position_embeddings", "decoder_seq_length"});
  }
  if (!y.is_none("lr")) {
    const double lr = y.number("lr"), min_lr = y.number("min_lr");
    y.require(min_lr <= lr, kMinLr,
              "min_lr (" + y.get("min_lr").py_str() + ") is larger than lr (" + y.get("lr").py_str() + ")",
              {"min_lr", "lr"});
  }
  if (!y.is_none("save"))
    y.require(!y.is_none("save_interval"), kSaveInterval, "save needs save_interval", {"save", "save_interval"});
}

// py 272-282
void mixed_precision(YamlArgs& y) {
  if (y.truthy("fp16_lm_cross_entropy"))
    y.require(y.truthy("fp16"), kFp16LmCe, "lm cross entropy in fp16 only support in fp16 mode.",
              {"fp16_lm_cross_entropy", "fp16"});
  if (y.truthy("language_model.fp32_residual_connection"))
    y.require(y.truthy("model_parallel.fp16") || y.truthy("model_parallel.bf16"), kFp32Residual,
              "residual connection in fp32 only supported when using fp16 or bf16.",
              {"language_model.fp32_residual_connection", "model_parallel.bf16"});
  if (y.truthy("language_model.moe_grouped_gemm")) {
    y.require(y.truthy("model_parallel.bf16"), kGroupedGemmBf16, "Currently GroupedGEMM for MoE only supports bf16 dtype.",
              {"language_model.moe_grouped_gemm", "model_parallel.bf16"});
    y.require(y.ctx().env().no_gpu() || y.ctx().arch_major() >= 8, kGroupedGemmArch,
              "Unsupported compute capability for GroupedGEMM kernels (target " + y.ctx().env().gpu_arch + ")",
              {"language_model.moe_grouped_gemm"});
  }
}

// py 284-291
void weight_decay(YamlArgs& y) {
  if (y.get("weight_decay_incr_style") == Value("constant")) {
    y.require(y.is_none("start_weight_decay"), kConstWdNoStart,
              "start_weight_decay is given with weight_decay_incr_style 'constant'",
              {"start_weight_decay", "weight_decay_incr_style"});
    y.require(y.is_none("end_weight_decay"), kConstWdNoEnd,
              "end_weight_decay is given with weight_decay_incr_style 'constant'",
              {"end_weight_decay", "weight_decay_incr_style"});
    y.set("start_weight_decay", y.get("weight_decay"), "py 287: start_weight_decay = weight_decay");
    y.set("end_weight_decay", y.get("weight_decay"), "py 288: end_weight_decay = weight_decay");
  } else {
    y.require(!y.is_none("start_weight_decay"), kWdIncrStart,
              "weight_decay_incr_style " + y.get("weight_decay_incr_style").py_repr() + " needs start_weight_decay",
              {"start_weight_decay", "weight_decay_incr_style"});
    y.require(!y.is_none("end_weight_decay"), kWdIncrEnd,
              "weight_decay_incr_style " + y.get("weight_decay_incr_style").py_repr() + " needs end_weight_decay",
              {"end_weight_decay", "weight_decay_incr_style"});
  }
}

// py 293-299
void persist_layer_norm(YamlArgs& y) {
  if (!y.ctx().torch_min("1.11.0a0"))
    y.set("language_model.persist_layer_norm", Value(false), "py 295: persistent layer norm needs torch 1.11");
}

// py 301-320
void recompute(YamlArgs& y) {
  if (y.truthy("language_model.distribute_saved_activations")) {
    y.require(y.integer("model_parallel.tensor_model_parallel_size") > 1, kDsaTp,
              "can distribute recomputed activations only across tensor model parallel groups",
              {"language_model.distribute_saved_activations", "model_parallel.tensor_model_parallel_size"});
    y.require(y.get("language_model.recompute_granularity") == Value("full"), kDsaFull,
              "distributed recompute activations is only application to full recompute granularity",
              {"language_model.distribute_saved_activations", "language_model.recompute_granularity"});
    y.require(!y.is_none("language_model.recompute_method"), kDsaMethod,
              "for distributed recompute activations to work you need to use a recompute method",
              {"language_model.distribute_saved_activations", "language_model.recompute_method"});
    y.require(y.ctx().torch_min("1.10.0a0"), kDsaTorch,
              "distributed recompute activations are supported for pytorch v1.10 and above (Nvidia Pytorch "
              "container >= 21.07). Current pytorch version is v" + y.ctx().env().torch_version + ".",
              {"language_model.distribute_saved_activations"});
  }
  if (y.get("language_model.recompute_granularity") == Value("selective"))
    y.require(y.is_none("language_model.recompute_method"), kSelectiveNoMethod,
              "recompute method is not yet supported for selective recomputing granularity",
              {"language_model.recompute_granularity", "language_model.recompute_method"});
}

// py 322-332
void sequence_parallel(YamlArgs& y) {
  if (y.get("model_parallel.tensor_model_parallel_size") == Value(1))
    y.set("model_parallel.sequence_parallel", Value(false), "py 326: no sequence parallelism with tp=1");
  if (y.ctx().env_var("CUDA_DEVICE_MAX_CONNECTIONS") != std::optional<std::string>("1") &&
      y.truthy("model_parallel.sequence_parallel"))
    y.fail(kSpCudaConnections,
           "Using sequence parallelism requires setting the environment variable CUDA_DEVICE_MAX_CONNECTIONS to 1",
           {"model_parallel.sequence_parallel"});
}

// py 334-346
void moe(YamlArgs& y) {
  if (!y.is_none("language_model.num_moe_experts") && y.integer("model_parallel.tensor_model_parallel_size") > 1)
    y.require(y.truthy("model_parallel.sequence_parallel"), kMoeTpSp,
              "When using MoE and tensor parallelism, sequence parallelism must be used.",
              {"language_model.num_moe_experts", "model_parallel.sequence_parallel"});
  const int64_t ep = y.integer("model_parallel.expert_model_parallel_size");
  if (ep > 1) {
    y.require(!y.is_none("language_model.num_moe_experts"), kEpNeedsExperts,
              "num_experts must be non None to use expert model parallelism",
              {"model_parallel.expert_model_parallel_size", "language_model.num_moe_experts"});
    const int64_t experts = y.integer("language_model.num_moe_experts");
    y.require(y.mod(experts, ep, "model_parallel.expert_model_parallel_size") == 0, kExpertsByEp,
              "Number of experts should be a multiple of expert model parallel_size.",
              {"language_model.num_moe_experts", "model_parallel.expert_model_parallel_size"});
    y.require(!y.truthy("model_parallel.fp16"), kEpNoFp16, "Expert parallelism is not supported with fp16 training.",
              {"model_parallel.expert_model_parallel_size", "model_parallel.fp16"});
  }
}

// py 348-355: after printing, the sections are flattened into the top level (they stay as sections too) and
// num_experts is added.
void flatten(YamlArgs& y) {
  Namespace& ns = y.ctx().args();
  for (const char* section : {kMp, "language_model"}) {
    y.require_section(section);
    const Value& s = y.get(section);
    const Object keys = s.as_object();
    for (const auto& [k, v] : keys) {
      std::string path = std::string(section) + "." + k;
      const std::string in_mp = std::string(kMp) + "." + k;
      if (section != kMp && y.has(in_mp))  // flattened from model_parallel a moment ago
        y.fail(kSectionCollision,
               q(in_mp) + " and " + q(path) +
                   " are the same key in both sections (Megatron: TypeError: types.SimpleNamespace() got multiple "
                   "values for keyword argument '" + k + "')",
               {path, in_mp});
      if (ns.has(k))
        y.fail(kSectionCollision,
               q(k) + " is both a top-level key and " + q(path) +
                   " (Megatron: TypeError: types.SimpleNamespace() got multiple values for keyword argument '" + k +
                   "')",
               {path, k});
    }
    for (const auto& [k, v] : keys) {
      std::string path = std::string(section) + "." + k;
      auto d = y.derived().find(path);
      auto w = y.cfg().where.find(path);
      Provenance p = d != y.derived().end() ? Provenance{Provenance::Kind::Derived, d->second}
                     : w != y.cfg().where.end() ? Provenance{Provenance::Kind::Config, w->second}
                                                : Provenance{Provenance::Kind::Derived, "validate_yaml"};
      ns.set(k, v, p);
    }
  }
  // Always a derived value (print_yaml_table recognises a flattened namespace by it).
  y.ctx().set("num_experts", y.get("language_model.num_moe_experts"), "yaml_arguments.py:355: num_experts = num_moe_experts");
}

// seed 121-122 (parse_and_validate_args, after validate_yaml) reads args.enable_experimental.
void enable_experimental(YamlArgs& y) { (void)y.truthy("enable_experimental"); }

}  // namespace

const std::vector<YamlSection>& yaml_sections() {
  static const std::vector<YamlSection> sections = {
      {"use-checkpoint-args", &use_checkpoint_args},          // seed 101-112
      {"data-path", &data_path},                              // py 50-55
      {"parallel-sizes", &parallel_sizes},                    // py 57-91
      {"tp-comm-overlap", &tp_comm_overlap},                  // py 93-94
      {"batch-size", &batch_size},                            // py 110-125
      {"eval-batch-size", &eval_batch_size},                  // py 127-134
      {"virtual-pipeline", &virtual_pipeline},                // py 136-154
      {"overlap-param-gather", &overlap_param_gather},        // py 156-160
      {"params-dtype", &params_dtype},                        // py 162-179
      {"dataloader-and-consumed", &dataloader_and_consumed},  // py 181-193
      {"iteration-based", &iteration_based},                  // py 195-207
      {"sample-based", &sample_based},                        // py 209-222
      {"num-layers", &num_layers},                            // py 224-232
      {"required-args", &required_args},                      // py 234-238
      {"ffn-and-kv-channels", &ffn_and_kv_channels},          // py 240-254
      {"seq-length", &seq_length},                            // py 256-271
      {"mixed-precision", &mixed_precision},                  // py 272-282
      {"weight-decay", &weight_decay},                        // py 284-291
      {"persist-layer-norm", &persist_layer_norm},            // py 293-299
      {"recompute", &recompute},                              // py 301-320
      {"sequence-parallel", &sequence_parallel},              // py 322-332
      {"moe", &moe},                                          // py 334-346
      {"flatten", &flatten},                                  // py 348-355
      {"enable-experimental", &enable_experimental},          // seed 121-122
  };
  return sections;
}

void validate_yaml_cfg(Parsed& parsed, std::vector<Diagnostic>& diagnostics) {
  const YamlCfg& cfg = *parsed.yaml_cfg;
  if (!cfg.errors.empty()) {
    diagnostics.insert(diagnostics.end(), cfg.errors.begin(), cfg.errors.end());
    return;
  }
  Context ctx(parsed.ns, parsed.env, diagnostics);
  YamlArgs y(ctx, cfg);
  try {
    for (const YamlSection& s : yaml_sections()) s.run(y);
    for (const YamlSection& s : yaml_model_config_sections()) s.run(y);
  } catch (const RuleFailure& f) {
    diagnostics.push_back(f.diag);
  }
}

}  // namespace mr
