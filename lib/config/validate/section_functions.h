// The section functions of Megatron's validate_args() chain, grouped by subject; each lives in the file named
// beside it (lib/config/validate/<file>.cpp). sections.cpp lists them in the order validate_args() runs them
// (the seed's order, seed = ../shared/spec/arguments.py), with the seed lines each ports. The helpers with
// Python's semantics that the sections share are in python.h.
#pragma once

#include <cstdint>
#include <optional>

#include "config/checked.h"
#include "config/validate/context.h"
#include "config/validate/python.h"

namespace mr::section {

// ---- parallelism: model-parallel sizes, pipeline layout, FSDP, sequence/context parallelism, process groups
// model_parallel_sizes.cpp: GTP shard resolution, total model size, data/batch-parallel sizes, CP checks.
void model_parallel_sizes(Context& ctx);
// virtual_pipeline.cpp: uneven/virtual pipeline, pipeline layout, layer divisibility.
void virtual_pipeline(Context& ctx);
// torch_fsdp2.cpp: MoE shortcut vs FSDP, --use-torch-fsdp2 requirements.
void torch_fsdp2(Context& ctx);
// megatron_fsdp.cpp: MoE megakernel vs FSDP, the Megatron-FSDP block, manual registration.
void megatron_fsdp(Context& ctx);
// sequence_parallel.cpp: sequence parallelism off with TP=1, TP communication overlap.
void sequence_parallel(Context& ctx);
// dynamic_context_parallel.cpp: --dynamic-context-parallel and its group sizes.
void dynamic_context_parallel(Context& ctx);
// cuda_connections.cpp: CUDA_DEVICE_MAX_CONNECTIONS, FSDP high-priority streams.
void cuda_max_connections(Context& ctx);
void fsdp_high_priority_streams(Context& ctx);
// expert_gtp.cpp: expert GTP weight shards, GTP weight-rematerialisation checks.
void expert_gtp_weight_shards(Context& ctx);
void gtp_remat_checks(Context& ctx);
// process_groups.cpp: running without Gloo process groups; the fake process group.
void gloo_process_groups(Context& ctx);
void fake_process_group(Context& ctx);
// pp_inference.cpp: pipeline-parallel microbatched inference.
void pp_inference(Context& ctx);
// delay_wgrad.cpp: --delay-wgrad-compute requirements.
void delay_wgrad(Context& ctx);

// ---- batch size
// batch_size.cpp: global/micro batch, eval batch sizes.
void batch_size(Context& ctx);

// ---- model: architecture and shapes
// heterogeneous_config.cpp: validate_model_config_args_from_heterogeneous_config.
void heterogeneous_config(Context& ctx);
// hybrid_pattern.cpp: hybrid layer pattern, MTP pattern, MLA symbols.
void hybrid_pattern(Context& ctx);
// model_dimensions.cpp: layers, required args, ffn/kv sizes, CP sequence split; seq_length / encoder_seq_length /
// max_position_embeddings.
void model_dimensions(Context& ctx);
void sequence_lengths(Context& ctx);
// position_embedding.cpp: RoPE and position-embedding derivations and checks.
void position_embedding(Context& ctx);
// bias_fusion.cpp: bias fusions and add_qkv_bias follow add_bias_linear.
void bias_fusion(Context& ctx);
// qk_clip.cpp: QK-clip checks.
void qk_clip(Context& ctx);
// qk_layer_scaling.cpp: --apply-query-key-layer-scaling implies fp32 softmax.
void qk_layer_scaling(Context& ctx);
// mtp_position_embedding.cpp: MTP needs position_ids-based embeddings.
void mtp_position_embedding(Context& ctx);
// latent_projections.cpp: multi-latent attention and MoE latent projections.
void latent_projections(Context& ctx);

// ---- precision: dtypes, FP8/FP4, mixed precision, deterministic numerics
// dtype_strings.cpp: dtype names ('bf16', 'auto', ...) -> torch dtypes ("torch.bfloat16", None).
void dtype_strings(Context& ctx);
// low_precision_formats.cpp: FP8/FP4 param gather, FP4/FP8 exclusivity, TE/FlashInfer gates.
void low_precision_formats(Context& ctx);
// params_dtype.cpp: params_dtype, fp16 loss scaling, bf16 fp32 grad accumulation.
void params_dtype(Context& ctx);
// inference_graph_precision.cpp: block-scope inference graphs with FP8, local graph count.
void inference_graph_precision(Context& ctx);
// mixed_precision_checks.cpp: fp16/fp32 flags, grouped GEMM capability, persistent layer norm.
void mixed_precision_checks(Context& ctx);
// determinism.cpp: megatron/training/determinism.py apply_determinism_to_args.
void determinism(Context& ctx);

// ---- MoE
// moe_spec.cpp: MoE spec, expert parallelism, router.
void moe_spec(Context& ctx);
void expert_parallel(Context& ctx);
void moe_router(Context& ctx);
// moe_upcycling.cpp: dense-to-MoE upcycling.
void moe_upcycling(Context& ctx);

// ---- data: input defaults, data sources, dataloader, sequence packing
// input_defaults.cpp: caller-supplied defaults, legacy --split, data-path exclusivity, phase transitions.
void input_defaults(Context& ctx);
// validate_args's `defaults` parameter on its own. megatron-run validates as validate_args(args, {}) does, so
// input_defaults() passes an empty mapping; tests drive this directly.
void apply_input_defaults(Context& ctx, const Object& defaults);
// dataloader_defaults.cpp: dataloader type, builder threads; document masking.
void dataloader_defaults(Context& ctx);
void dataloader_document_masking(Context& ctx);
// data_blend.cpp: one data source, FIM dataset arguments, TE cross-entropy fusion gate.
void data_blend(Context& ctx);
// sequence_packing.cpp: variable_seq_lengths reset and the SFT mock-dataset default; --use-varlen-dataset, the
// packing scheduler, its buffer size.
void variable_seq_lengths(Context& ctx);
void varlen_dataset(Context& ctx);
void sequence_packing(Context& ctx);

// ---- checkpointing
// checkpoint_args_asserts.cpp: parse_and_validate_args' asserts for --use-checkpoint-args (before validate_args).
void checkpoint_args_asserts(Context& ctx);
// ckpt_conversion_prep.cpp: --ckpt-convert-format prerequisites and the non-persistent checkpoint kind;
// Megatron's update_use_dist_ckpt.
void ckpt_conversion_prep(Context& ctx);
void update_use_dist_ckpt(Context& ctx);
// save_schedule.cpp: --save interval checks.
void save_schedule(Context& ctx);
// dcp_dtensor_formats.cpp: torch_dcp and fsdp_dtensor checkpoint formats.
void dcp_dtensor_formats(Context& ctx);
// checkpoint_save_load.cpp: deprecated checkpoint flags, parallel save/load, the PG cache, main-param / streamed
// dequant loading, async save, logits dumps, frozen layers, iteration override.
void checkpoint_save_load(Context& ctx);
// local_checkpointing.cpp: non-persistent local checkpoints and replication.
void local_checkpointing(Context& ctx);

// args.use_dist_ckpt as update_use_dist_ckpt() sets it (ckpt_format != "torch"), derived the same way when that
// section has not run, so a later section reads the value Megatron would.
inline bool dist_ckpt_in_use(const Context& ctx) {
  if (ctx.has("use_dist_ckpt")) return ctx.on("use_dist_ckpt");
  return !(ctx["ckpt_format"] == Value("torch"));
}

// ---- memory: activation recompute and offloading
// recompute.cpp: activation recompute granularity and method.
void activation_recompute(Context& ctx);
// activation_offloading.cpp: fine-grained activation offloading, cpu_offloading.
void fine_grained_offloading(Context& ctx);
void cpu_offloading(Context& ctx);

// ---- CUDA graphs
// cuda_graph_normalize.cpp: CUDA-graph module and inference-scope normalisation.
void cuda_graph_normalize(Context& ctx);
// cuda_graph_runtime.cpp: RNG tracker, allocator/NCCL env, full-iteration, shortcut MoE.
void cuda_graph_runtime(Context& ctx);

// ---- training: removed flags, rerun tracker, optimizer limits, --skip-train and RL
// deprecated_flags.cpp: removed and renamed flags.
void deprecated_flags(Context& ctx);
// rerun_tracker.cpp: iterations to skip read from the result-rejected tracker file.
void rerun_tracker(Context& ctx);
// emerging_optimizer.cpp: limits of the optimizers other than sgd/adam.
void emerging_optimizer(Context& ctx);
// rl_config.cpp: RLConfig.__post_init__'s checks of an RL run's generation settings (seed 497).
void rl_config(Context& ctx);
// skip_train_rl.cpp: --skip-train and RLConfig.validate_run.
void skip_train_rl(Context& ctx);

// ---- the OptimizerConfig checks, after validate_args (optimizer_config_checks.cpp): Megatron builds an
// OptimizerConfig from the resolved arguments and runs validate, finalize_optimizer_config, validate_run and
// validate_model on it, in that order.
void optimizer_validate(Context& ctx);
void optimizer_finalize(Context& ctx);
void optimizer_validate_run(Context& ctx);
void optimizer_validate_model(Context& ctx);

}  // namespace mr::section
