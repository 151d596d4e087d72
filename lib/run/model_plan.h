// The parts of plan_gpt_model (run/model.h), internal to mr_run_model: the checked arithmetic of the plan, the
// builder every block adds its parameters through, the sizes the plan works out step by step, and the block
// builders that live in their own files (model_attention.cpp: the attention and the gated delta net in its place;
// model_moe.cpp: the MoE block). model.cpp runs the steps in order, each with its own RunError naming a flag.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "run/hybrid_layers.h"
#include "run/model.h"

namespace mr::run::gpt_plan {

// The plan's checked numbers: a product or sum beyond 64 bits, a size below its minimum, a size TP does not divide:
// each a RunError naming the flag or the size.
int64_t mul(int64_t a, int64_t b, const std::string& what);
int64_t sum(int64_t a, int64_t b, const std::string& what);
int64_t at_least(int64_t v, int64_t min, const char* flag);
int64_t split(int64_t n, int64_t parts, const char* what);

// What every block adds its parameters through: the plan of the rank `at` and the flags each parameter follows.
struct Builder {
  const Args& a;
  const RankCoord& at;
  ModelPlan& plan;
  int64_t tp = 1;             // the tensor-parallel size
  int64_t h = 0;              // --hidden-size
  bool te = false;            // --transformer-impl transformer_engine: norms fused into the next linear
  bool bias = false;          // --add-bias-linear
  bool layernorm = false;     // --normalization LayerNorm (a weight and a bias), else RMSNorm (a weight)
  bool rmsnorm_mult = false;  // --rmsnorm-weight-decay-mult: every RMSNorm's gamma takes it

  // A parameter of the full shape `full`, split over TP along `split_dim` (-1: replicated).
  ParamSpec& add(std::string name, std::vector<int64_t> full, int split_dim) const;
  // A norm of `width` under `prefix`: its weight (and bias for LayerNorm).
  void norm(const std::string& prefix, int64_t width) const;
};

// The QKV projection (worked out after the embeddings are added).
struct QkvSizes {
  int64_t heads = 0, kv = 0, groups = 0;
  int64_t q_rows = 0;   // the query rows: a gate per head after its queries with --attention-output-gate
  int64_t qkv_out = 0;  // the QKV projection's rows
};
QkvSizes qkv_sizes(const Args& a, int64_t heads, int64_t kv, int64_t groups);

// Multi-latent attention's ranks and head sizes (worked out after the MoE sizes); all 0 but v_head (kv) without
// --multi-latent-attention.
struct MlaSizes {
  bool on = false;
  int64_t q_lora = 0, kv_lora = 0, rope_dim = 0, q_head = 0, v_head = 0;
};
MlaSizes mla_sizes(const Args& a, int64_t kv);

// --experimental-attention-variant outside a hybrid model: dsa (every MLA with the DSA indexer), gdn/gdn2 (a gated
// delta net in the layers --linear-attention-freq marks).
struct LinearAttention {
  bool dsa = false, gdn2 = false;
  std::vector<bool> gdn_layer;  // per global layer
};
LinearAttention linear_attention(const Args& a, int64_t num_layers, bool hybrid);

// MoE: which layers (worked out before the heterogeneous blocks), then the experts' sizes on this rank.
struct MoeLayers {
  int64_t experts = 0;
  std::vector<bool> moe_layer;  // per global layer
};
MoeLayers moe_layers(const Args& a, int64_t num_layers, bool hybrid);
struct MoeSizes {
  int64_t experts = 0, etp = 1, local_experts = 0;
  int64_t moe_ffn = 0, latent = 0, expert_h = 0, moe_fc1 = 0, shared_ffn = 0;
  bool grouped = false;
};
MoeSizes moe_sizes(const Args& a, const RankCoord& at, int64_t experts, int64_t h);

// What the block builders read: the builder and every size the plan worked out.
struct Layers {
  const Builder& b;
  QkvSizes qkv;
  MlaSizes mla;
  MoeSizes moe;
  MambaSizes mamba;
  int64_t ffn = 0, fc1_out = 0;  // --ffn-hidden-size, and the fc1 rows (x 2 gated)
  bool hybrid = false, dsa = false, gdn2 = false;
};

// The attention of a layer under `p` with its input norm (model_attention.cpp). `use_mla`: multi-latent attention;
// `qk_norms`: the norms --qk-layernorm adds (on q and k, or on MLA's latents; a hybrid model's attention layers
// have none). `sparse`: MLA with DeepSeek sparse attention (AbsorbedMLASelfAttention: the same projections, its
// latent norms never fused, and the DSA indexer's projections and key norm, replicated over TP). `qkv_rows`: the
// QKV projection's rows when a heterogeneous block sets its own query groups (0: qkv_out).
void add_attention(const Layers& m, const std::string& p, bool use_mla, bool qk_norms, bool sparse = false,
                   int64_t qkv_rows = 0);
// A gated delta net as the layer's self-attention (model_attention.cpp); `two`: GatedDeltaNet2.
void add_gdn(const Layers& m, const std::string& p, bool two);
// The MoE block of a layer under `p` (model_moe.cpp).
void add_moe(const Layers& m, const std::string& p);

}  // namespace mr::run::gpt_plan
