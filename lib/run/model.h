// The parameters one rank of a GPT-style Megatron model holds (mcore GPTModel, or HybridModel: word and position
// embeddings, the decoder's layers, the final norm, the output layer), with the names, shard shapes and flags the
// optimizer needs: which ones are copies of another rank's (tensor-parallel duplicates, the tied output layer on
// the last pipeline stage) and which ones are exempt from weight decay. Built from the validated arguments and
// this rank's tensor/pipeline coordinates; no memory is allocated here. Torch-free.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "config/args.h"
#include "config/pipeline_layout.h"
#include "config/target_env.h"

namespace mr::run {

// A configuration the training run cannot handle; the message names the flag.
struct RunError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// What the plan handles (a RunError beyond): layers per model, parameter tensors per rank.
inline constexpr int64_t kMaxPlanLayers = 100000;
inline constexpr int64_t kMaxPlanTensors = 1000000;

struct ParamSpec {
  std::string name;                 // Megatron's parameter name, e.g. "decoder.layers.3.mlp.linear_fc1.weight"
  std::vector<int64_t> shape;       // this rank's shard
  std::vector<int64_t> full_shape;  // the whole tensor (equal to `shape` when not tensor-parallel)
  int split_dim = -1;               // the dimension tensor parallelism splits (-1: none, the tensor is replicated)
  // Parts along split_dim 0 that tensor parallelism splits one by one (their whole sizes; empty: one part). A
  // rank's shard is its slice of each part, back to back: Mamba's in_proj (z, x, B, C, dt) and conv1d (x, B, C).
  std::vector<int64_t> split_parts;
  bool tp_duplicate = false;        // replicated on every TP rank: counted once (on TP rank 0) in norms and losses
  bool shared_copy = false;         // the last stage's copy of the tied word embeddings: counted on the first stage
  bool no_weight_decay = false;     // Megatron's default rule: biases and 1-D parameters
  // An RMSNorm's weight (gamma) while --rmsnorm-weight-decay-mult is set: its weight decay is the scheduled one
  // times that multiplier, whatever no_weight_decay and --apply-wd-to-qk-layernorm say.
  bool rmsnorm_gamma = false;
  bool embedding_or_output = false; // the word embeddings and the output layer (Megatron's is_embedding_or_output_parameter)
  bool expert = false;              // a routed expert's weight (MoE): split over expert parallelism, not replicated
  bool use_muon = true;             // false: Megatron's use_muon=False (Mamba's in_proj), stepped by Muon's scalar optimizer
  std::string key;                  // the same tensor under every layout: `name`, with a routed expert's global index
  enum class Init { Normal, One, Zero };
  Init init = Init::Normal;         // Megatron's initial values: normal (--init-method-std), norm weights 1, biases 0
  // Normal with this std instead of --init-method-std: the word and position embeddings under
  // --embedding-init-method-std (Megatron's embedding_init_method).
  std::optional<double> init_std;
  int64_t numel() const;            // RunError when the size does not fit in 64 bits (checked when planned)
};

struct ModelPlan {
  std::vector<ParamSpec> params;
  // Parameters Megatron allocates on this rank but never uses, which the run does not hold: the output layer's
  // weight on a later stage with MTP and tied embeddings (gpt_model.py skips allocating it on the first stage only;
  // the forward uses the stage's embedding copy). Megatron counts them in its parameter print and they take
  // gradient and optimizer memory: `params` and the run's parameter line count them (megatron_numel).
  std::vector<ParamSpec> unused;
  std::vector<int64_t> layers;  // the global indices of the transformer layers on this rank
  int64_t padded_vocab_size = 0;
  int64_t expert_numel_total = 0;  // MoE: the routed experts of this rank's layers, all experts, unsplit
  int64_t numel() const;        // elements this rank holds
  int64_t megatron_numel() const;  // numel() and the unused parameters: what Megatron prints for the rank
  bool has_experts() const;
};

struct RankCoord {
  int64_t tp_rank = 0, tp_size = 1;
  int64_t pp_rank = 0, pp_size = 1;
  int64_t ep_size = 1;              // --expert-model-parallel-size: each rank holds num_experts / ep_size experts
  int64_t ep_rank = 0;              // ... the ep_rank-th block of them
  int64_t etp_rank = 0, etp_size = 0;  // expert tensor parallelism (0: --expert-tensor-parallel-size, else TP)
};

// MoE (--num-experts): the layers --moe-layer-freq marks get a router, this rank's share of the routed experts
// (grouped-GEMM or per-expert names), shared experts and their gate; their norm before the MLP is its own.
// The layers come from the pipeline split (pipeline_layers) or --pipeline-model-parallel-layout (layout_layers);
// a hybrid model's (--hybrid-layer-pattern: Mamba, gated delta net, attention, MLA, DSA, MLP and MoE layers, MTP
// depths after '/') from its pattern (run/hybrid_layers.h); --experimental-attention-variant gdn/gdn2 puts gated
// delta nets in the layers --linear-attention-freq marks, dsa the DSA indexer in every MLA. Throws RunError for what
// it does not model (--mla-down-proj-fusion, heterogeneous layers, MTP layers on the first of several pipeline
// ranks) and when the vocabulary size is unknown (--vocab-size).
ModelPlan plan_gpt_model(const Args& args, const RankCoord& at);

// Bytes a rank spends on its parameters, the optimizer and the activations (lib/run/memory_estimate.cpp;
// docs/run.md, "Memory"). Weights and optimizer the way Megatron lays them out: model params in the training
// dtype (2 bytes for bf16/fp16, else 4; 1 for the transformer layers' linear weights with --fp8-param-gather);
// gradients in fp32 when the params are fp32 or --accumulate-allreduce-grads-in-fp32, else in the param dtype
// (Megatron-FSDP: --megatron-fsdp-main-grads-dtype); with 16-bit params fp32 main params (--main-params-dtype,
// --megatron-fsdp-main-params-dtype); optimizer state as the optimizer table (optim/optimizer_table.h) lays it out
// (adam, adaptive_muon: two moments; sgd with momentum, lion, muon: one; what lion and muon leave to Adam: two), the
// precision-aware optimizer's --exp-avg-dtype / --exp-avg-sq-dtype. Sharding over the data-parallel group
// (times CP; within one of --num-distributed-optimizer-instances): the distributed optimizer shards main params
// and state (ZeRO-1); Megatron-FSDP (--use-megatron-fsdp) shards per --data-parallel-sharding-strategy: optim
// (main params and state), optim_grads (and gradients), optim_grads_params (and the params); routed experts by
// --expert-data-parallel-sharding-strategy over the expert data-parallel group; torch FSDP2 (--use-torch-fsdp2)
// shards everything (experts too) over the data-parallel group, its gradients in the params' dtype. Activations:
// Megatron's theoretical estimate (megatron/training/theoretical_memory_usage.py) for the first pipeline stage, the most
// loaded one (its in-flight microbatches and the embedding), whichever rank the plan is for: the caller decides
// where it applies (`megatron-run params` shows it on the first stage's rows only); NaN for hybrid models (Megatron
// has no estimate for them). SOAP's state adds
// its preconditioner per matrix (optim::kronecker_floats of the local shape).
struct MemoryEstimate {
  double params = 0, grads = 0, main_params = 0, optimizer_state = 0;
  double activations = 0;  // Megatron's theoretical activation memory of a first-stage rank
  // Which of Megatron's functions `activations` follows: activation_estimate_name (empty: none, hybrid models).
  std::string activation_estimate;
  // The divisors the sharding applied to the dense parameters' buffers (1: replicated on every DP rank).
  int64_t params_shard = 1, grads_shard = 1, state_shard = 1;
  std::string sharding = "none";  // "none", "distributed optimizer", "megatron-fsdp <strategy>", "torch fsdp2"
  double weights_and_optimizer() const { return params + grads + main_params + optimizer_state; }
  double total() const { return weights_and_optimizer() + activations; }  // NaN: state not modelled
};
// Whether Megatron's Adam keeps the fp32 masters of bf16 params as 16-bit remainders beside them (Transformer
// Engine's FusedAdam with store_param_remainders): the precision-aware optimizer with adam, --bf16 and fp32 main
// params, where Megatron hands TE the master weights (its use_precision_aware_optimizer_no_fp8_or_ds_fp8: no fp8
// training, the delayed recipe, or CPU offload), with Transformer Engine 2.1 or newer in `env` (older ones drop the
// option: finalize_optimizer_config). The memory estimate and the run (run/buffers.h) both ask this, for the
// target the arguments were validated for (--target-te-version; the launcher hands it to the workers).
bool keeps_param_remainders(const Args& args, const TargetEnv& env = {});

// Routed experts shard over the expert data-parallel group (0: the same size as `data_parallel_size`). `env`: the
// target's Transformer Engine version decides keeps_param_remainders.
MemoryEstimate estimate_memory(const ModelPlan& plan, const Args& args, int64_t data_parallel_size,
                               int64_t expert_data_parallel_size = 0, const TargetEnv& env = {});
// Megatron's compute_activation_memory (with --sequence-parallel and --recompute-granularity selective) or
// compute_activation_memory_without_sp (otherwise), in bytes, for the padded vocabulary `padded_vocab`.
double activation_memory(const Args& args, int64_t padded_vocab);
// The name of the one of those two functions report_theoretical_memory picks for `args`.
const char* activation_estimate_name(const Args& args);

// Megatron's vocabulary padding: up to a multiple of --make-vocab-size-divisible-by times the TP size.
int64_t padded_vocab_size(int64_t vocab_size, int64_t divisible_by, int64_t tp_size);

// The global layer indices a pipeline rank holds, in the order its virtual chunks run, as Megatron's
// get_num_layers_to_build and get_transformer_layer_offset give them: an even split, or
// --decoder-first/last-pipeline-num-layers (-1: unset), or the embedding and/or the loss counted as a layer
// (--account-for-embedding/loss-in-pipeline-split: the first chunk of the first stage and the last chunk of the last
// stage build one layer fewer); each with virtual pipeline chunks. RunError for a split that does not divide.
// (With --pipeline-model-parallel-layout, layout_layers below.)
std::vector<int64_t> pipeline_layers(int64_t num_layers, int64_t pp_rank, int64_t pp_size, int64_t vpp_size,
                                     int64_t first_stage_layers, int64_t last_stage_layers,
                                     bool embedding_in_split = false, bool loss_in_split = false);

// The same under --pipeline-model-parallel-layout (config/pipeline_layout.h): the decoder layers and MTP layers the
// layout gives the rank `at`, for --num-layers and --mtp-num-layers (-1: unset). RunError for a layout
// TransformerConfig refuses (the init stage refuses it before a launch) and for MTP layers on the first of
// several pipeline ranks (Megatron builds a second embedding there; not modelled).
pipeline_layout::RankStages layout_layers(const std::string& layout, int64_t num_layers, int64_t mtp_num_layers,
                                          const RankCoord& at);

}  // namespace mr::run
