// What a rank's parameters, optimizer and activations cost in memory (model.h, estimate_memory): the buffers as
// Megatron lays them out, sharded as the distributed optimizer or Megatron-FSDP shards them, and Megatron's
// theoretical activation memory (megatron/training/theoretical_memory_usage.py). Torch-free.
#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <string_view>

#include "optim/optimizer_table.h"
#include "run/buffer_dtypes.h"
#include "run/grad_format.h"
#include "run/model.h"

namespace mr::run {

namespace {

// Bytes of one element of Megatron-FSDP's --megatron-fsdp-main-params-dtype / --megatron-fsdp-main-grads-dtype as
// validate_args leaves them (config/validate/dtype_strings.cpp: fp32, bf16, fp16 become torch.float32,
// torch.bfloat16, torch.float16; auto becomes None, which the caller handles).
double fsdp_dtype_size(const std::string& torch_dtype) {
  return torch_dtype == "torch.bfloat16" || torch_dtype == "torch.float16" ? 2 : 4;
}

// A sharding strategy's depth: 0 no_shard, 1 optim (main params + optimizer state), 2 optim_grads (+ gradients),
// 3 optim_grads_params (+ the params themselves). Both strategy enums (dense and expert) spell the same four.
template <class Strategy>
int shard_level(Strategy strategy) {
  switch (strategy) {
    case Strategy::no_shard: return 0;
    case Strategy::optim: return 1;
    case Strategy::optim_grads: return 2;
    case Strategy::optim_grads_params: return 3;
  }
  return 0;
}

// A transformer layer's linear weight (Transformer Engine keeps these in FP8 with --fp8-param-gather); norms,
// biases, the router, the embeddings and the output layer stay in the training dtype.
bool fp8_eligible(const ParamSpec& p) {
  if (p.shape.size() != 2 || p.embedding_or_output) return false;
  return p.name.find(".linear_") != std::string::npos;
}

}  // namespace

bool keeps_param_remainders(const Args& a, const TargetEnv& env) {
  if (!a.use_precision_aware_optimizer || a.optimizer != arg::Optimizer::adam || !a.bf16 ||
      a.main_params_dtype != arg::MainParamsDtype::fp32 || !env.te_stores_param_remainders())
    return false;
  return !a.fp8.has_value() || a.fp8_recipe == arg::Fp8Recipe::delayed || a.optimizer_cpu_offload;
}

MemoryEstimate estimate_memory(const ModelPlan& plan, const Args& a, int64_t dp, int64_t expert_dp,
                               const TargetEnv& env) {
  const bool half = a.bf16 || a.fp16;
  const optim::OptimizerInfo opt = optim::optimizer_info(a.optimizer, a.muon_scalar_optimizer);
  const bool fsdp = a.use_megatron_fsdp;
  // Torch FSDP2 (--use-torch-fsdp2): fully_shard over the data-parallel group with context parallelism, every
  // parameter (experts too) sharded with its gradient, main param and state; the gradient in the param's dtype (its
  // DDP config has no grad_reduce_in_fp32).
  const bool fsdp2 = a.use_torch_fsdp2;
  const bool fp8_params = a.fp8_param_gather && a.fp8.has_value();

  // Who shards what. Each of --num-distributed-optimizer-instances holds a full copy, sharded over its part of
  // the data-parallel group; Megatron-FSDP's outer strategy `optim` shards the optimizer over the instances too.
  const int64_t instances = std::max<int64_t>(1, a.num_distributed_optimizer_instances);
  // --optimizer dist_muon is muon with the distributed optimizer (Megatron's deprecated spelling).
  const bool distributed_optimizer = a.use_distributed_optimizer || a.optimizer == arg::Optimizer::dist_muon;
  auto inner = [&](int64_t group) { return std::max<int64_t>(1, std::max<int64_t>(1, group) / instances); };
  // FSDP2 shards everything (optim_grads_params), the distributed optimizer the state (optim).
  const int dense_level = fsdp    ? shard_level(a.data_parallel_sharding_strategy)
                          : fsdp2 ? 3
                                  : (distributed_optimizer ? 1 : 0);
  const int expert_level =
      fsdp && a.expert_data_parallel_sharding_strategy ? shard_level(*a.expert_data_parallel_sharding_strategy)
                                                       : dense_level;
  const bool outer_optim = fsdp && a.outer_dp_sharding_strategy == arg::OuterDpShardingStrategy::optim;
  struct Shards {
    double params = 1, grads = 1, state = 1;
  };
  auto shards = [&](int level, int64_t group) {
    const double in = static_cast<double>(inner(group));
    Shards s;
    if (level >= 1) s.state = in * (outer_optim ? static_cast<double>(instances) : 1.0);
    if (level >= 2) s.grads = in;
    if (level >= 3) s.params = in;
    return s;
  };
  const Shards dense = shards(dense_level, dp),
               expert = shards(expert_level, expert_dp > 0 && !fsdp2 ? expert_dp : dp);

  // Element sizes.
  const double p_bytes = half ? 2 : 4;
  // Megatron's main_grad (run/grad_format.h); FSDP2's param.grad.
  double g_bytes = fsdp2 ? p_bytes : optim::dtype_size(grad_format(a).buffer);
  // Main params: fp32, or with the precision-aware optimizer --main-params-dtype, where fp32 masters of bf16 params
  // may be kept as 16-bit remainders beside them (keeps_param_remainders; fp8 params keep fp32 ones).
  // The run's own buffer dtypes (run/buffer_dtypes.h): fp32 moments and masters unless the precision-aware Adam.
  const BufferDtypes dtypes = buffer_dtypes(a, env);
  double main_bytes = half ? main_storage_bytes(dtypes.main) : 0;
  if (fsdp) {
    // Megatron-FSDP's main weights (fp32 by default; auto, which validate_args turns into None: the params' own
    // dtype, no second copy) and main gradients (auto: the gradient dtype above; --accumulate-allreduce-grads-in-fp32
    // forces fp32).
    const std::optional<std::string>& mp = a.megatron_fsdp_main_params_dtype;
    main_bytes = half && mp ? fsdp_dtype_size(*mp) : 0;
    const std::optional<std::string>& mg = a.megatron_fsdp_main_grads_dtype;
    if (!a.accumulate_allreduce_grads_in_fp32 && mg) g_bytes = fsdp_dtype_size(*mg);
  }
  const double m1 = optim::dtype_size(dtypes.exp_avg);
  const double m2 = optim::dtype_size(dtypes.exp_avg_sq);

  MemoryEstimate m;
  m.params_shard = static_cast<int64_t>(dense.params);
  m.grads_shard = static_cast<int64_t>(dense.grads);
  m.state_shard = static_cast<int64_t>(dense.state);
  m.sharding = fsdp    ? "megatron-fsdp " + std::string(arg::to_string(a.data_parallel_sharding_strategy))
               : fsdp2 ? "torch fsdp2"
                       : (distributed_optimizer ? "distributed optimizer" : "none");
  std::vector<const ParamSpec*> all;  // the run's parameters and those Megatron allocates but does not use
  for (const ParamSpec& p : plan.params) all.push_back(&p);
  for (const ParamSpec& p : plan.unused) all.push_back(&p);
  for (const ParamSpec* pp : all) {
    const ParamSpec& p = *pp;
    const double n = static_cast<double>(p.numel());
    const Shards& sh = p.expert ? expert : dense;
    const bool fp8 = fp8_params && fp8_eligible(p);
    m.params += n * (fp8 ? 1.0 : p_bytes) / sh.params;
    m.grads += n * g_bytes / sh.grads;
    // FP8 params keep an fp32 main copy even when the other params are fp32 (the optimizer steps that copy), and
    // where bf16 params keep remainders (Transformer Engine splits only bf16 params).
    m.main_params += n * (fp8 && (main_bytes == 0 || dtypes.main == MainStorage::Remainder) ? 4.0 : main_bytes) / sh.state;
    const optim::StateLayout& st =
        optim::state_of(opt, optim::takes_own_rule(opt, p.shape.size(), p.embedding_or_output, p.use_muon));
    double state = 0;
    if (st.momentum_from_flag && a.sgd_momentum == 0.0) state = 0;
    else state = (st.exp_avg ? (st.precision_aware ? m1 : 4) : 0) + (st.exp_avg_sq ? (st.precision_aware ? m2 : 4) : 0);
    m.optimizer_state += n * state / sh.state;
    // SOAP's preconditioner, per matrix (this rank's TP shard, as Megatron hands SOAP the local parameter).
    if (st.kronecker && p.shape.size() == 2)
      m.optimizer_state += 4.0 * static_cast<double>(optim::kronecker_floats(p.shape[0], p.shape[1])) / sh.state;
  }
  // Megatron has no theoretical activation memory for hybrid models ("not yet supported"): not modelled.
  const bool hybrid = a.is_hybrid_model || a.hybrid_layer_pattern || a.hybrid_override_pattern;
  m.activations = hybrid ? std::nan("") : activation_memory(a, plan.padded_vocab_size);
  m.activation_estimate = hybrid ? "" : activation_estimate_name(a);
  return m;
}

const char* activation_estimate_name(const Args& a) {
  return a.sequence_parallel && a.recompute_granularity == arg::RecomputeGranularity::selective
             ? "compute_activation_memory"
             : "compute_activation_memory_without_sp";
}

// Megatron's theoretical activation memory of the first pipeline stage (Korthikanti et al., arXiv:2205.05198,
// Table 2), term by term as theoretical_memory_usage.py writes it. s: sequence length, b: micro-batch size,
// h: hidden size, t: TP, p: PP, L: layers, V: padded vocabulary.
double activation_memory(const Args& a, int64_t padded_vocab) {
  const double s = static_cast<double>(a.seq_length.value_or(0)), b = static_cast<double>(a.micro_batch_size);
  const double h = static_cast<double>(a.hidden_size);
  if (s <= 0 || h <= 0) return 0;
  const double ffn = static_cast<double>(a.ffn_hidden_size);
  const double t = static_cast<double>(std::max<int64_t>(1, a.tensor_model_parallel_size));
  const double p = static_cast<double>(std::max<int64_t>(1, a.pipeline_model_parallel_size));
  const double L = static_cast<double>(a.num_layers), V = static_cast<double>(padded_vocab);
  const bool with_sp = a.sequence_parallel && a.recompute_granularity == arg::RecomputeGranularity::selective;
  // Per layer: with SP and selective recompute every tensor is split over TP (sbh (18 + 4 ffn/h), divided by t
  // at the end); without SP, 10 sbh are kept whole on every TP rank and 24 sbh split (flash attention: no s^2).
  double act = with_sp ? s * b * h * (18 + 4 * (ffn / h)) : s * b * h * (10 + 24 / t);
  act *= L;                   // p stages of L/p layers, p microbatches in flight on the first one: L layers' worth
  act += 8 * s * b * p;       // the input tokens of the embedding, p microbatches in flight
  act += s * b * h * p;       // the embedding's dropout mask
  const std::optional<int64_t> vpp = a.virtual_pipeline_model_parallel_size;
  if (vpp) {
    act *= 1 + (p - 1) / (p * static_cast<double>(*vpp));  // the interleaved schedule's extra in-flight chunks
  } else if (p > 1) {
    // Fewer microbatches than stages: only that many in flight.
    const int64_t dp = std::max<int64_t>(1, a.data_parallel_size), mbs = std::max<int64_t>(1, a.micro_batch_size);
    const double microbatches = static_cast<double>(a.global_batch_size / (mbs * dp));
    act *= std::min(1.0, microbatches / p);
  }
  if (p == 1) {
    if (with_sp) act += s * b * h * 4 * (1 + V / h);  // the output layer's input and the cross-entropy's logits
    else act += (s * b * V / t + s * b * h) * 2;      // the logits (split over TP) and the final norm's output
  }
  return with_sp ? act / t : act * 1.05;  // without SP: 5 % for the optimizer's and other temporaries
}

}  // namespace mr::run
