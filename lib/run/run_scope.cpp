// What the training run does with each Megatron flag (run/run_scope.h).
#include "run/run_scope.h"

#include <algorithm>
#include <map>
#include <utility>

#include "config/schema.h"
#include "optim/optimizer_table.h"
#include "run/grad_format.h"
#include "run/model.h"

namespace mr::run {

namespace {

// The flags the run reads and acts on: what they mean here, or a refusal (RunError) naming them.
constexpr ArgId kActs[] = {
    // The batch and the length of the run (run/train.cpp).
    ArgId::micro_batch_size, ArgId::global_batch_size, ArgId::rampup_batch_size, ArgId::step_batch_size_schedule,
    ArgId::decrease_batch_size_if_needed, ArgId::train_iters,
    ArgId::train_samples, ArgId::mock_data,
    // No iteration and no save, the checkpoint loaded (run/train.cpp; the line it prints names the missing
    // evaluation).
    ArgId::skip_train,
    // A NaN or inf in the loss or a rank's gradient stops the run (run/train.cpp, rule run.nan-check).
    ArgId::check_for_nan_in_loss_and_grad,
    // Iterations skipped entirely (their samples consumed), and the replicas' parameters compared during the run
    // (run/train.cpp).
    ArgId::iterations_to_skip, ArgId::check_weight_hash_across_dp_replicas_interval,
    // The optimizer and its hyper-parameters (config/optimizer_config_from_args.h, optim/).
    ArgId::optimizer, ArgId::clip_grad, ArgId::weight_decay, ArgId::adam_beta1, ArgId::adam_beta2, ArgId::adam_eps,
    ArgId::sgd_momentum, ArgId::lion_beta1, ArgId::lion_beta2, ArgId::muon_momentum, ArgId::muon_split_qkv,
    ArgId::muon_nesterov, ArgId::muon_scale_mode, ArgId::muon_fp32_matmul_prec, ArgId::muon_coefficient_type,
    ArgId::muon_num_ns_steps, ArgId::muon_tp_mode, ArgId::muon_use_syrk, ArgId::muon_extra_scale_factor,
    ArgId::muon_scalar_optimizer, ArgId::muon_ns_batch_size, ArgId::use_distributed_optimizer, ArgId::log_num_zeros_in_grad,
    // The input word embeddings' rows rescaled after each step (run/embedding_norm.h).
    ArgId::embedding_min_norm,
    // The precision-aware optimizer's moments and main params: bf16, fp16 and fp8 (e4m3) with a scale, remainders
    // (run/buffers.h; fp16 main params in fp32 training are named in the notice).
    ArgId::use_precision_aware_optimizer, ArgId::exp_avg_dtype, ArgId::exp_avg_sq_dtype, ArgId::main_params_dtype,
    // The gradient buffer's dtype: one rounding of the reduced gradient to it, fp16's range (run/grad_format.h).
    ArgId::main_grads_dtype, ArgId::grad_reduce_in_bf16, ArgId::accumulate_allreduce_grads_in_fp32,
    // The schedule (optim/schedule.h).
    ArgId::lr, ArgId::min_lr, ArgId::lr_decay_style, ArgId::lr_wsd_decay_style, ArgId::lr_decay_iters,
    ArgId::lr_decay_samples, ArgId::lr_wsd_decay_iters, ArgId::lr_wsd_decay_samples, ArgId::lr_warmup_fraction,
    ArgId::lr_warmup_iters, ArgId::lr_warmup_samples, ArgId::lr_warmup_init, ArgId::override_opt_param_scheduler,
    ArgId::use_checkpoint_opt_param_scheduler, ArgId::start_weight_decay, ArgId::end_weight_decay,
    ArgId::weight_decay_incr_style, ArgId::decoupled_lr, ArgId::decoupled_min_lr,
    // Precision and the loss scaler (optim/grad_scaler.h).
    ArgId::bf16, ArgId::fp16, ArgId::loss_scale, ArgId::initial_loss_scale, ArgId::min_loss_scale,
    ArgId::loss_scale_window, ArgId::hysteresis,
    // Initial values (run/buffers.h): the word and position embeddings with --embedding-init-method-std when set.
    ArgId::seed, ArgId::init_method_std, ArgId::embedding_init_method_std,
    // Checkpoints and exits (run/checkpoint.h, docs/checkpoints.md); --async-save saves synchronously.
    ArgId::save, ArgId::save_interval, ArgId::load, ArgId::non_persistent_save_interval,
    ArgId::non_persistent_ckpt_type, ArgId::non_persistent_global_ckpt_dir, ArgId::finetune, ArgId::ckpt_step,
    ArgId::exit_on_missing_checkpoint, ArgId::no_save_optim, ArgId::no_load_optim, ArgId::no_load_rng,
    ArgId::async_save, ArgId::exit_interval, ArgId::exit_duration_in_mins, ArgId::exit_signal_handler,
    ArgId::exit_signal,
    // Older checkpoints removed after a save, the loaded iteration replaced, SHA-256 manifests written and checked
    // (run/checkpoint_integrity.h), main params from the checkpoint's stored params.
    ArgId::save_retain_interval, ArgId::override_ckpt_iteration, ArgId::verify_integrity,
    ArgId::load_main_params_from_ckpt,
    // A fine-tune from --pretrained-checkpoint when --load holds no checkpoint; a checkpoint saved with --no-save-rng
    // (it records the flag) resumes with the resuming run's --seed; a save and an exit at each of
    // --phase-transition-iterations, and a resume with it compares --global-batch-size with the checkpoint's (the
    // data phases themselves have no data to switch) (run/checkpoint_locate.h, run/checkpoint.h).
    ArgId::pretrained_checkpoint, ArgId::no_save_rng, ArgId::phase_transition_iterations,
    // The checkpoint's model arguments replace the given ones before validation (run/checkpoint_args.h).
    ArgId::use_checkpoint_args, ArgId::use_mp_args_from_checkpoint_args, ArgId::use_tokenizer_model_from_checkpoint_args,
    // Every parameter frozen: the load a fine-tune's at the iteration of --save's tracker, no update, no save
    // (run/frozen_layers.h, run/train.cpp).
    ArgId::freeze_all_layers,
    // The log (run/log.h).
    ArgId::log_interval, ArgId::log_params_norm, ArgId::timing_log_level,
    // The process groups and the rank layout (parallel/layout.h, distributed/).
    ArgId::distributed_backend, ArgId::distributed_timeout_minutes, ArgId::distributed_timeout_seconds_after_init,
    ArgId::tensor_model_parallel_size, ArgId::pipeline_model_parallel_size, ArgId::context_parallel_size,
    ArgId::expert_model_parallel_size, ArgId::expert_tensor_parallel_size, ArgId::use_tp_pp_dp_mapping,
    ArgId::num_layers_per_virtual_pipeline_stage, ArgId::num_virtual_stages_per_pipeline_rank,
    ArgId::decoder_first_pipeline_num_layers, ArgId::decoder_last_pipeline_num_layers,
    ArgId::pipeline_model_parallel_layout, ArgId::use_gloo_process_groups, ArgId::local_rank,
    // The model's parameters: names, shapes, tying, weight-decay groups (run/model.h), and what it refuses.
    ArgId::num_layers, ArgId::hidden_size, ArgId::ffn_hidden_size, ArgId::num_attention_heads, ArgId::kv_channels,
    ArgId::group_query_attention, ArgId::num_query_groups, ArgId::max_position_embeddings,
    ArgId::position_embedding_type, ArgId::make_vocab_size_divisible_by, ArgId::normalization, ArgId::swiglu,
    ArgId::untie_embeddings_and_output_weights, ArgId::add_bias_linear, ArgId::add_qkv_bias, ArgId::qk_layernorm,
    ArgId::apply_wd_to_qk_layernorm, ArgId::rmsnorm_weight_decay_mult, ArgId::vocab_size, ArgId::tokenizer_type, ArgId::num_experts,
    ArgId::moe_layer_freq, ArgId::moe_ffn_hidden_size, ArgId::moe_grouped_gemm, ArgId::moe_latent_size,
    ArgId::moe_shared_expert_intermediate_size, ArgId::moe_shared_expert_gate, ArgId::mtp_num_layers,
    ArgId::multi_latent_attention, ArgId::q_lora_rank, ArgId::kv_lora_rank, ArgId::qk_head_dim,
    ArgId::qk_pos_emb_head_dim, ArgId::v_head_dim, ArgId::mla_down_proj_fusion, ArgId::hybrid_override_pattern, ArgId::hybrid_layer_pattern,
    ArgId::is_hybrid_model, ArgId::mamba_state_dim, ArgId::mamba_head_dim, ArgId::mamba_num_groups,
    ArgId::mamba_num_heads, ArgId::mtp_use_repeated_layer, ArgId::experimental_attention_variant,
    ArgId::linear_attention_freq, ArgId::linear_conv_kernel_dim, ArgId::linear_key_head_dim,
    ArgId::linear_value_head_dim, ArgId::linear_num_key_heads, ArgId::linear_num_value_heads,
    ArgId::dsa_indexer_n_heads, ArgId::dsa_indexer_head_dim, ArgId::attention_output_gate,
    ArgId::softmax_type, ArgId::enable_mhc_connections, ArgId::wide_residual_num_streams,
    ArgId::moe_single_grouped_weight, ArgId::moe_single_grouped_bias, ArgId::csa_compress_ratios,
    ArgId::heterogeneous_layers_config_path, ArgId::heterogeneous_layers_config_encoded_json,
    ArgId::account_for_embedding_in_pipeline_split, ArgId::account_for_loss_in_pipeline_split,
};

constexpr const char* kNoForward = "no model forward/backward: the gradients are synthetic";
constexpr const char* kNoData = "no data is read: the gradients are synthetic";
constexpr const char* kNoEval = "no evaluation in a synthetic run";
constexpr const char* kNoCheckpoint = "not modelled by the synthetic run's checkpoints (docs/checkpoints.md)";
constexpr const char* kNoReport = "not reported by the synthetic run (its log is the iteration line)";
constexpr const char* kNoProfiler = "no profiler in the synthetic run";
constexpr const char* kNoResilience = "no fault tolerance, restart or straggler machinery in the synthetic run";
constexpr const char* kNoPerformance =
    "a performance option of Megatron's real run (overlap, fusion, buckets, offload, memory): not modelled";
constexpr const char* kNoInference = "inference, RL and distillation are not training-run features here";
constexpr const char* kNotModelled = "not modelled by the synthetic run";

// The reason for the rest of each argparse group.
const std::map<std::string_view, const char*>& group_reasons() {
  static const std::map<std::string_view, const char*> m = {
      {"transformer configuration", kNoForward},
      {"network size", kNoForward},
      {"mla", kNoForward},
      {"moe", kNoForward},
      {"experimental", kNoForward},
      {"experimental_attention_variant", kNoForward},
      {"heterogeneous architecture", kNoForward},
      {"Transformer-Engine", kNoForward},
      {"Triton autotune policy", kNoForward},
      {"kitchen", kNoForward},
      {"wide residual", kNoForward},
      {"vision", kNoForward},
      {"mixed precision", kNoForward},
      {"RNG and initialization", kNotModelled},
      {"regularization", kNotModelled},
      {"learning rate and weight decay", kNotModelled},
      {"training", kNotModelled},
      {"distributed init", kNoPerformance},
      {"data and dataloader", kNoData},
      {"tokenizer", kNoData},
      {"varlen dataset", kNoData},
      {"sft", kNoData},
      {"msc", kNoData},
      {"validation", kNoEval},
      {"checkpointing", kNoCheckpoint},
      {"logging", kNoReport},
      {"profiling", kNoProfiler},
      {"workload inspector", kNoProfiler},
      {"In-process restart", kNoResilience},
      {"fault injector", kNoResilience},
      {"straggler", kNoResilience},
      {"rerun engine", kNoResilience},
      {"ft_package", kNoResilience},
      {"autoresume", kNoResilience},
      {"inference", kNoInference},
      {"rl", kNoInference},
      {"Logits Distillation", kNoInference},
  };
  return m;
}

// Flags whose reason is not their group's.
const std::map<ArgId, const char*>& flag_reasons() {
  static const std::map<ArgId, const char*> m = {
      // Named only where it has no effect: on a load the value decides whether a (TP, PP) mismatch is noticed, and
      // `torch` makes it compare TP and PP (acts_in_this_job); `torch` refuses --async-save with --save
      // (save_settings_refusal, as Megatron's save raises).
      {ArgId::ckpt_format, "the synthetic run writes its own format whatever the value, safetensors + JSON per rank; "
                           "only a load depends on it: torch compares TP and PP with the checkpoint's, and torch or "
                           "torch_dcp without --auto-detect-ckpt-format print no (TP, PP) mismatch notice "
                           "(docs/checkpoints.md)"},
      // Megatron's setup_model_and_optimizer reads it only under --ckpt-convert-format (which the run refuses).
      {ArgId::ckpt_convert_save, "Megatron reads it only with --ckpt-convert-format, to convert and exit; without "
                                 "that flag it has no effect in Megatron either"},
      {ArgId::sequence_parallel, "a layout of activations: the synthetic run has none (its parameters are the same)"},
      {ArgId::fp8_param_gather, "fp8 parameters are not modelled: the run keeps the linear weights in the model dtype "
                                "(with --fp8-format, `megatron-run params` counts them at 1 byte, with their fp32 main "
                                "params)"},
      {ArgId::seq_length, "no model forward/backward: sequences have no effect on synthetic gradients"},
      {ArgId::optimizer_cpu_offload, kNoPerformance},
      {ArgId::optimizer_offload_fraction, kNoPerformance},
      {ArgId::use_torch_optimizer_for_cpu_offload, kNoPerformance},
      {ArgId::overlap_cpu_optimizer_d2h_h2d, kNoPerformance},
      {ArgId::optimizer_cuda_graph, kNoPerformance},
      {ArgId::pin_cpu_grads, kNoPerformance},
      {ArgId::pin_cpu_params, kNoPerformance},
      {ArgId::recompute_activations, kNoPerformance},
      {ArgId::checkpoint_activations, kNoPerformance},
      {ArgId::empty_unused_memory_level, kNoPerformance},
      {ArgId::manual_gc, kNoPerformance},
      {ArgId::manual_gc_interval, kNoPerformance},
      {ArgId::tensorboard_dir, "no TensorBoard writer in the synthetic run"},
      {ArgId::wandb_project, "no Weights & Biases writer in the synthetic run"},
      {ArgId::wandb_exp_name, "no Weights & Biases writer in the synthetic run"},
      {ArgId::use_megatron_fsdp, "the synthetic run shards with the distributed optimizer only (not Megatron-FSDP)"},
      {ArgId::use_torch_fsdp2, "the synthetic run shards with the distributed optimizer only (not FSDP2)"},
  };
  return m;
}

const std::vector<bool>& acts_table() {
  static const std::vector<bool> t = [] {
    std::vector<bool> v(kArgCount, false);
    for (ArgId id : kActs) v[static_cast<size_t>(id)] = true;
    return v;
  }();
  return t;
}

}  // namespace

bool acts_on(ArgId id) { return acts_table()[static_cast<size_t>(id)]; }

const char* why_not_acted_on(ArgId id, std::string_view group) {
  if (acts_on(id)) return nullptr;
  if (auto f = flag_reasons().find(id); f != flag_reasons().end()) return f->second;
  if (auto g = group_reasons().find(group); g != group_reasons().end()) return g->second;
  return nullptr;
}

std::string unused_by_optimizer(ArgId id, const Args& a) {
  const optim::OptimizerInfo o = optim::optimizer_info(a.optimizer, a.muon_scalar_optimizer);
  const bool muon = o.kernel == optim::Kernel::Muon;
  const bool scalar_lion = muon && a.muon_scalar_optimizer == arg::MuonScalarOptimizer::lion;
  const std::string opt = "--optimizer " + std::string(o.name);
  switch (id) {
    case ArgId::sgd_momentum:
      return a.optimizer == arg::Optimizer::sgd ? "" : "only --optimizer sgd uses it, not " + opt;
    case ArgId::adam_beta1:
    case ArgId::adam_beta2:
    case ArgId::adam_eps:
      // Adam itself, lion (its betas, and Adam on its other parameters), Muon's scalar Adam.
      if (a.optimizer == arg::Optimizer::sgd) return "--optimizer sgd uses no Adam options";
      if (scalar_lion) return opt + " with --muon-scalar-optimizer lion uses no Adam options";
      return "";
    case ArgId::lion_beta1:
    case ArgId::lion_beta2:
      if (scalar_lion) return "";
      if (a.optimizer == arg::Optimizer::lion)
        return "--optimizer lion takes Lion's betas from --adam-beta1/2, as Megatron's emerging-optimizer path does; "
               "--lion-beta1/2 act with --muon-scalar-optimizer lion only";
      return "--lion-beta1/2 act with --muon-scalar-optimizer lion only, not with " + opt;
    case ArgId::muon_momentum:
    case ArgId::muon_split_qkv:
    case ArgId::muon_nesterov:
    case ArgId::muon_scale_mode:
    case ArgId::muon_fp32_matmul_prec:
    case ArgId::muon_coefficient_type:
    case ArgId::muon_num_ns_steps:
    case ArgId::muon_tp_mode:
    case ArgId::muon_extra_scale_factor:
    case ArgId::muon_scalar_optimizer:
    case ArgId::muon_ns_batch_size:
      return muon ? "" : "Muon's options; " + opt + " is no Muon";
    case ArgId::muon_use_syrk:  // Emerging-Optimizers' newton_schulz takes the SYRK step in its "medium" branch only
      if (!muon) return "Muon's options; " + opt + " is no Muon";
      return a.muon_fp32_matmul_prec == arg::MuonFp32MatmulPrec::medium
                 ? ""
                 : "used with --muon-fp32-matmul-prec medium only, as in Emerging-Optimizers' Newton-Schulz";
    default:
      return "";
  }
}

std::string unmodelled_value(ArgId id, const Args& a) {
  if (id == ArgId::muon_fp32_matmul_prec && a.muon_fp32_matmul_prec == arg::MuonFp32MatmulPrec::low &&
      optim::optimizer_info(a.optimizer, a.muon_scalar_optimizer).kernel == optim::Kernel::Muon)
    return "'low' is no torch precision: torch.set_float32_matmul_precision ignores it and Newton-Schulz keeps the "
           "ambient one, full fp32 ('highest')";
  if (id == ArgId::main_params_dtype && a.main_params_dtype == arg::MainParamsDtype::fp16 && !a.bf16 && !a.fp16)
    return "fp32 training keeps no main params";
  // Asking for bf16 gradients where Megatron's buffer is another dtype (run/grad_format.h).
  const bool bf16_grads = (id == ArgId::main_grads_dtype && a.main_grads_dtype == arg::MainGradsDtype::bf16) ||
                          (id == ArgId::grad_reduce_in_bf16 && a.grad_reduce_in_bf16);
  if (const optim::DType g = grad_format(a).buffer; bf16_grads && g != optim::DType::BF16)
    return std::string("the gradients are ") + optim::dtype_name(g) +
           " here: Megatron's gradient buffer is fp32 in fp32 training or with --accumulate-allreduce-grads-in-fp32, "
           "else the parameters' dtype";
  return "";
}

bool tp_pp_mismatch_notice(const Args& a) {
  return a.auto_detect_ckpt_format || a.ckpt_format == arg::CkptFormat::torch_dist ||
         a.ckpt_format == arg::CkptFormat::fsdp_dtensor;
}

bool acts_in_this_job(ArgId id, const Args& a, const TargetEnv& env) {
  switch (id) {
    case ArgId::seq_length:
      // --step-batch-size-schedule's thresholds are tokens, divided by it (config/step_batch_schedule.h).
      return a.step_batch_size_schedule.has_value();
    case ArgId::fp8: {
      // Whether Megatron's Adam keeps the masters as remainders depends on fp8 training (keeps_param_remainders).
      Args without = a;
      without.fp8.reset();
      return keeps_param_remainders(a, env) != keeps_param_remainders(without, env);
    }
    case ArgId::ckpt_format: {
      // --ckpt-format torch: a load compares TP and PP with the checkpoint's (Megatron's check_checkpoint_args,
      // skipped by a fine-tune's load).
      if (a.ckpt_format == arg::CkptFormat::torch && a.load && !a.finetune) return true;
      // Any load (--pretrained-checkpoint's too): the format decides whether it prints the (TP, PP) mismatch
      // notice, unless --auto-detect-ckpt-format prints it whatever the format.
      Args other = a;
      const bool dist = a.ckpt_format == arg::CkptFormat::torch_dist || a.ckpt_format == arg::CkptFormat::fsdp_dtensor;
      other.ckpt_format = dist ? arg::CkptFormat::torch : arg::CkptFormat::torch_dist;
      return (a.load || a.pretrained_checkpoint) && tp_pp_mismatch_notice(a) != tp_pp_mismatch_notice(other);
    }
    case ArgId::auto_detect_ckpt_format: {
      // A load under --ckpt-format torch or torch_dcp prints the (TP, PP) mismatch notice with it only.
      Args without = a;
      without.auto_detect_ckpt_format = false;
      return (a.load || a.pretrained_checkpoint) && tp_pp_mismatch_notice(a) != tp_pp_mismatch_notice(without);
    }
    case ArgId::fp8_recipe: {
      Args delayed = a;
      delayed.fp8_recipe = arg::Fp8Recipe::delayed;
      return keeps_param_remainders(a, env) != keeps_param_remainders(delayed, env);
    }
    default:
      return false;
  }
}

std::string unused_in_this_job(ArgId id, const Args& a) {
  switch (id) {
    case ArgId::loss_scale:
    case ArgId::initial_loss_scale:
    case ArgId::min_loss_scale:
    case ArgId::loss_scale_window:
    case ArgId::hysteresis: {
      // The scaler the run makes (optim::make_grad_scaler, as Megatron's get_megatron_optimizer; that library is
      // not the launcher's, tests/run/run_scope_test.cpp checks the two agree): a constant one from --loss-scale in
      // 16-bit training or under the distributed optimizer, else a dynamic one with --fp16.
      const bool constant = (a.fp16 || a.bf16 || a.use_distributed_optimizer) && a.loss_scale && *a.loss_scale != 0;
      if (id == ArgId::loss_scale)
        return constant ? "" : "fp32 training without the distributed optimizer has no loss scaler";
      if (a.fp16 && !constant) return "";
      return constant ? "--loss-scale sets a constant scale: the dynamic loss scaler's options are unused"
                      : "the dynamic loss scaler runs with --fp16 only";
    }
    case ArgId::lr_wsd_decay_style:
    case ArgId::lr_wsd_decay_iters:
    case ArgId::lr_wsd_decay_samples:
      if (a.lr_decay_style != arg::LrDecayStyle::WSD) return "only --lr-decay-style WSD uses it";
      // get_optimizer_param_scheduler: an iteration-based run (--train-iters) reads the iterations, a sample-based
      // one the samples.
      if (id == ArgId::lr_wsd_decay_samples && a.train_iters)
        return "an iteration-based run (--train-iters) takes WSD's decay from --lr-wsd-decay-iters";
      if (id == ArgId::lr_wsd_decay_iters && !a.train_iters && a.train_samples)
        return "a sample-based run (--train-samples) takes WSD's decay from --lr-wsd-decay-samples";
      return "";
    case ArgId::min_lr:
    case ArgId::lr_decay_iters:
    case ArgId::lr_decay_samples:
      // OptimizerParamScheduler.get_lr: constant returns --lr after the warmup, before any decay. The decay length
      // still sets a --lr-warmup-fraction's warmup (lr_warmup_steps = fraction x lr_decay_steps).
      if (id != ArgId::min_lr && a.lr_warmup_fraction) return "";
      return a.lr_decay_style == arg::LrDecayStyle::constant
                 ? "--lr-decay-style constant keeps --lr after the warmup: no decay"
                 : "";
    case ArgId::muon_tp_mode: {
      // The mode says how a matrix split over tensor parallelism is orthogonalised (optim/muon_plan.h): with TP 1
      // (and expert TP 1 in a MoE model) none is, and every mode is each rank's whole-matrix Newton-Schulz.
      const int64_t tp = std::max<int64_t>(1, a.tensor_model_parallel_size);
      const int64_t etp = std::max<int64_t>(1, a.expert_tensor_parallel_size);
      if (tp > 1 || (a.num_experts.value_or(0) > 0 && etp > 1)) return "";
      return "no matrix is split over tensor parallelism (--tensor-model-parallel-size 1): every mode is the "
             "whole-matrix Newton-Schulz";
    }
    case ArgId::apply_wd_to_qk_layernorm:
      return a.qk_layernorm ? "" : "the model has no q/k norms without --qk-layernorm";
    case ArgId::rmsnorm_weight_decay_mult:
      return a.normalization == arg::Normalization::RMSNorm ? "" : "the model's norms are not RMSNorm (--normalization)";
    case ArgId::decoupled_min_lr:
      return a.decoupled_lr ? "" : "not used without --decoupled-lr";
    case ArgId::ckpt_step:  // 0 is Megatron's "not given" (docs/checkpoints.md): nothing to name
      return a.load || a.pretrained_checkpoint || !a.ckpt_step || *a.ckpt_step == 0 ? "" : "not used without --load";
    case ArgId::override_opt_param_scheduler:
    case ArgId::use_checkpoint_opt_param_scheduler:
    case ArgId::finetune:
    case ArgId::no_load_optim:
    case ArgId::no_load_rng:
    case ArgId::exit_on_missing_checkpoint:
    case ArgId::override_ckpt_iteration:
    case ArgId::load_main_params_from_ckpt:
      // --pretrained-checkpoint alone loads too (Megatron's pretrain calls load_checkpoint for either).
      return a.load || a.pretrained_checkpoint ? "" : "not used without --load";
    case ArgId::save_interval:
    case ArgId::save_retain_interval:  // (validation checks it against --save-interval only with --save)
    case ArgId::non_persistent_save_interval:
    case ArgId::no_save_optim:
    case ArgId::no_save_rng:
      return a.save ? "" : "not used without --save";
    case ArgId::verify_integrity:
      return a.load || a.pretrained_checkpoint || a.save ? "" : "checks nothing without --load or --save";
    default:
      return "";
  }
}

std::vector<Unacted> unacted_flags(const Namespace& ns, const Args& args, const TargetEnv& env) {
  std::vector<Unacted> out;
  std::map<std::string, size_t> index;
  std::vector<std::string_view> seen;
  for (const Arg& a : Schema::megatron().args()) {
    const std::string_view dest = a.dest();
    if (!ns.has(dest) || std::find(seen.begin(), seen.end(), dest) != seen.end()) continue;
    const Provenance& from = ns.provenance(dest);
    // The flag the user wrote: a deprecated alias validation translated into this dest and erased
    // (--recompute-activations sets --recompute-granularity), or this one, given in a file or on the command line
    // (not Env: a launcher's variables), whatever validation did to its value since (a one-element list
    // unwrapped, a dtype name turned into torch's: Provenance::by_user).
    std::string flag;
    if (from.kind == Provenance::Kind::Derived && !from.alias.empty()) {
      flag = from.alias;
    } else if (from.by_user()) {
      flag = Schema::megatron().flag_for_dest(dest);
    } else {
      continue;
    }
    seen.push_back(dest);
    const std::optional<ArgId> id = find_arg(dest);
    if (!id) continue;
    std::string why;
    if (const char* not_acted = why_not_acted_on(*id, a.spec->group)) {
      if (!acts_in_this_job(*id, args, env)) why = not_acted;
    } else {
      why = unused_by_optimizer(*id, args);
      if (why.empty()) why = unused_in_this_job(*id, args);
      if (why.empty()) why = unmodelled_value(*id, args);
    }
    if (why.empty()) continue;
    auto [it, fresh] = index.emplace(why, out.size());
    if (fresh) out.push_back({why, {}});
    out[it->second].flags.push_back(flag);
  }
  return out;
}

std::string unacted_notice(const Namespace& ns, const Args& a, const TargetEnv& env) {
  return unacted_notice(unacted_flags(ns, a, env));
}

std::string unacted_notice(const std::vector<Unacted>& u) {
  if (u.empty()) return {};
  std::string s = "megatron-run: notice: the synthetic training run does not act on ";
  for (size_t i = 0; i < u.size(); ++i) {
    if (i) s += "; ";
    for (size_t j = 0; j < u[i].flags.size(); ++j) s += (j ? ", " : "") + u[i].flags[j];
    s += " (" + u[i].why + ")";
  }
  return s;
}

}  // namespace mr::run
