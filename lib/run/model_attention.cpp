// The attention of a layer in the model plan (model_plan.h): the QKV projection, multi-latent attention (with
// --mla-down-proj-fusion and DeepSeek sparse attention's indexer), and the gated delta net that
// --experimental-attention-variant gdn/gdn2 or a hybrid model's 'G' puts in its place.
#include "run/model_plan.h"

namespace mr::run::gpt_plan {

QkvSizes qkv_sizes(const Args& a, int64_t heads, int64_t kv, int64_t groups) {
  QkvSizes s{heads, kv, groups};
  // --attention-output-gate: a gate per query head, in each query group's rows after its queries (so TP still
  // splits whole groups).
  s.q_rows = a.attention_output_gate ? mul(2, heads, "2 x --num-attention-heads") : heads;
  s.qkv_out = mul(sum(s.q_rows, mul(2, groups, "2 x --num-query-groups"), "the attention heads"), kv,
                  "the QKV projection width ((heads (x 2 with the output gate) + 2 x query groups) x "
                  "--kv-channels)");
  return s;
}

// Multi-latent attention (Megatron's MLASelfAttention with its GPT layer spec): queries projected at full rank
// (--q-lora-rank unset) or down to --q-lora-rank and up again; keys and values down to --kv-lora-rank plus the
// rotary part and up again per head; the down projections replicated over TP, the up projections split by
// heads; with --qk-layernorm a norm on each latent (TE: fused into the up projection). No biases but the output's.
// --mla-down-proj-fusion fuses the two down projections and the input norm (add_attention).
MlaSizes mla_sizes(const Args& a, int64_t kv) {
  MlaSizes s;
  s.on = a.multi_latent_attention;
  const bool mla = s.on;
  s.q_lora = mla && a.q_lora_rank ? at_least(*a.q_lora_rank, 1, "--q-lora-rank") : 0;
  s.kv_lora = mla ? at_least(a.kv_lora_rank, 1, "--kv-lora-rank") : 0;
  s.rope_dim = mla ? at_least(a.qk_pos_emb_head_dim, 0, "--qk-pos-emb-head-dim") : 0;
  s.q_head = mla ? sum(at_least(a.qk_head_dim, 1, "--qk-head-dim"), s.rope_dim, "the MLA query head") : 0;
  s.v_head = mla ? at_least(a.v_head_dim, 1, "--v-head-dim") : kv;
  return s;
}

// --experimental-attention-variant gdn (or its old name gated_delta_net) and gdn2: the layers
// --linear-attention-freq marks use a gated delta net as their self-attention (Megatron's
// get_linear_attention_pattern: N, every N-th layer keeps standard attention; or a list, 1 for linear attention).
LinearAttention linear_attention(const Args& a, int64_t L, bool hybrid) {
  LinearAttention s;
  s.gdn_layer.assign(static_cast<size_t>(L), false);
  using Variant = arg::ExperimentalAttentionVariant;
  // dsa: every layer's attention is MLA with DeepSeek sparse attention (Megatron asserts --multi-latent-attention).
  s.dsa = !hybrid && a.experimental_attention_variant == Variant::dsa;
  if (s.dsa && !a.multi_latent_attention)
    throw RunError("--experimental-attention-variant dsa needs --multi-latent-attention");
  s.gdn2 = !hybrid && a.experimental_attention_variant == Variant::gdn2;
  if (!hybrid && a.experimental_attention_variant && !s.dsa) {
    const Value& f = a.linear_attention_freq;
    if (f.is_list()) {
      if (static_cast<int64_t>(f.as_list().size()) != L)
        throw RunError("--linear-attention-freq lists " + std::to_string(f.as_list().size()) +
                       " layers, --num-layers is " + std::to_string(L));
      for (int64_t i = 0; i < L; ++i) s.gdn_layer[static_cast<size_t>(i)] = f.as_list()[static_cast<size_t>(i)].truthy();
    } else if (f.is_int() && f.as_int() > 0) {
      for (int64_t i = 0; i < L; ++i) s.gdn_layer[static_cast<size_t>(i)] = (i + 1) % f.as_int() != 0;
    } else {
      throw RunError(std::string("--experimental-attention-variant ") + (s.gdn2 ? "gdn2" : "gdn") +
                     " needs --linear-attention-freq (N, or a list of 0/1 per layer)");
    }
  }
  return s;
}

namespace {

// A norm on an MLA latent or on q/k. --apply-wd-to-qk-layernorm gives weight decay to the parameters whose name
// holds "q_layernorm." or "k_layernorm." (Megatron's get_standard_config_overrides matches names, not roles): the
// q/k norms and MLA's local q latent norm, not MLA's kv_layernorm nor Transformer Engine's norms fused into the up
// projections (linear_q_up_proj.layer_norm_weight), which keep no decay (review worker39 #1).
void latent_norm(const Builder& b, const std::string& prefix, int64_t width) {
  const size_t before = b.plan.params.size();
  b.norm(prefix, width);
  if (!b.a.apply_wd_to_qk_layernorm) return;
  for (size_t i = before; i < b.plan.params.size(); ++i) {
    const std::string& name = b.plan.params[i].name;
    if (name.find("q_layernorm.") != std::string::npos || name.find("k_layernorm.") != std::string::npos)
      b.plan.params[i].no_weight_decay = false;
  }
}

// The DSA indexer (DSAIndexer): queries from the q latent (or the hidden state at full rank), one key head.
void add_dsa_indexer(const Builder& b, const std::string& att, int64_t q_lora) {
  const Args& a = b.a;
  const std::string ix = att + "core_attention.indexer.";
  const int64_t ix_heads = at_least(a.dsa_indexer_n_heads.value_or(0), 1, "--dsa-indexer-n-heads");
  const int64_t ix_dim = at_least(a.dsa_indexer_head_dim.value_or(0), 1, "--dsa-indexer-head-dim");
  b.add(ix + "linear_wq_b.weight", {mul(ix_heads, ix_dim, "--dsa-indexer-n-heads x --dsa-indexer-head-dim"),
                                    q_lora > 0 ? q_lora : b.h}, -1);
  b.add(ix + "linear_wk.weight", {ix_dim, b.h}, -1);
  b.add(ix + "k_norm.weight", {ix_dim}, -1).init = ParamSpec::Init::One;  // always a LayerNorm
  b.add(ix + "k_norm.bias", {ix_dim}, -1).init = ParamSpec::Init::Zero;
  b.add(ix + "linear_weights_proj.weight", {ix_heads, b.h}, -1);
}

// MLA's up projections from the q and kv latents (column-parallel), each after its latent's norm where the layer
// has one (`fused`: Transformer Engine's, fused into the projection), in both MLA forms below.
void add_q_up_proj(const Layers& m, const std::string& att, bool qk_norm_here, bool fused, int64_t q_out) {
  const Builder& b = m.b;
  if (qk_norm_here) latent_norm(b, att + (fused ? "linear_q_up_proj.layer_norm_" : "q_layernorm."), m.mla.q_lora);
  b.add(att + "linear_q_up_proj.weight", {q_out, m.mla.q_lora}, 0);
}
void add_kv_up_proj(const Layers& m, const std::string& att, bool qk_norm_here, bool fused) {
  const Builder& b = m.b;
  const MlaSizes& s = m.mla;
  if (qk_norm_here) latent_norm(b, att + (fused ? "linear_kv_up_proj.layer_norm_" : "kv_layernorm."), s.kv_lora);
  b.add(att + "linear_kv_up_proj.weight",
        {mul(m.qkv.heads, sum(b.a.qk_head_dim, s.v_head, "--qk-head-dim + --v-head-dim"),
             "the MLA key/value up projection"),
         s.kv_lora},
        0);
}

// --mla-down-proj-fusion (FusedMLASelfAttention; TE's GPT layer spec, and every MLA layer of a hybrid model,
// which is always TE): one column-parallel down projection for the q latent, the kv latent and the rotary part,
// split by TP (each rank's rows: its share of the q latent, then of the rest), with the input norm fused in.
void add_fused_mla(const Layers& m, const std::string& att, bool qk_norm_here, bool fused) {
  const Builder& b = m.b;
  const MlaSizes& s = m.mla;
  if (s.q_lora == 0)
    throw RunError("--mla-down-proj-fusion needs --q-lora-rank (Megatron's FusedMLASelfAttention asserts it)");
  const int64_t rest = sum(s.kv_lora, s.rope_dim, "--kv-lora-rank + --qk-pos-emb-head-dim");
  (void)split(s.q_lora, b.tp, "--q-lora-rank, with --mla-down-proj-fusion,");
  (void)split(rest, b.tp, "--kv-lora-rank + --qk-pos-emb-head-dim, with --mla-down-proj-fusion,");
  b.norm(att + "linear_qkv_down_proj.layer_norm_", b.h);
  b.add(att + "linear_qkv_down_proj.weight", {sum(s.q_lora, rest, "the fused MLA down projection"), b.h}, 0)
      .split_parts = {s.q_lora, rest};
  const int64_t q_out = mul(m.qkv.heads, s.q_head, "--num-attention-heads x (--qk-head-dim + --qk-pos-emb-head-dim)");
  add_q_up_proj(m, att, qk_norm_here, fused, q_out);
  add_kv_up_proj(m, att, qk_norm_here, fused);
}

// Multi-latent attention with its own input norm (MLASelfAttention; `sparse`: with the DSA indexer).
void add_mla(const Layers& m, const std::string& p, const std::string& att, bool qk_norm_here, bool fused,
             bool sparse) {
  const Builder& b = m.b;
  const MlaSizes& s = m.mla;
  b.norm(p + "input_layernorm.", b.h);
  const int64_t q_out = mul(m.qkv.heads, s.q_head, "--num-attention-heads x (--qk-head-dim + --qk-pos-emb-head-dim)");
  if (s.q_lora == 0) {
    b.add(att + "linear_q_proj.weight", {q_out, b.h}, 0);
  } else {
    b.add(att + "linear_q_down_proj.weight", {s.q_lora, b.h}, -1);
    add_q_up_proj(m, att, qk_norm_here, fused, q_out);
  }
  b.add(att + "linear_kv_down_proj.weight", {sum(s.kv_lora, s.rope_dim, "--kv-lora-rank + --qk-pos-emb-head-dim"), b.h},
        -1);
  add_kv_up_proj(m, att, qk_norm_here, fused);
  if (sparse) add_dsa_indexer(b, att, s.q_lora);
}

// The QKV projection with its input norm (SelfAttention; TE: the norm fused into linear_qkv).
void add_qkv(const Layers& m, const std::string& p, const std::string& att, bool qk_norm_here, int64_t qkv_rows) {
  const Builder& b = m.b;
  b.norm(b.te ? att + "linear_qkv.layer_norm_" : p + "input_layernorm.", b.h);
  const int64_t rows = qkv_rows > 0 ? qkv_rows : m.qkv.qkv_out;
  b.add(att + "linear_qkv.weight", {rows, b.h}, 0);
  if (b.bias || b.a.add_qkv_bias) b.add(att + "linear_qkv.bias", {rows}, 0);
  if (qk_norm_here)
    for (const char* which : {"q_layernorm.", "k_layernorm."}) latent_norm(b, att + which, m.qkv.kv);
}

}  // namespace

void add_attention(const Layers& m, const std::string& p, bool use_mla, bool qk_norms, bool sparse,
                   int64_t qkv_rows) {
  const Builder& b = m.b;
  const Args& a = b.a;
  const std::string att = p + "self_attention.";
  const bool qk_norm_here = a.qk_layernorm && qk_norms;
  const bool fused = b.te && !sparse;  // TE fuses the latent norms into the up projections, but not for DSA
  const bool fuse_down = use_mla && !sparse && a.mla_down_proj_fusion && (b.te || m.hybrid);
  if (fuse_down) add_fused_mla(m, att, qk_norm_here, fused);
  else if (use_mla) add_mla(m, p, att, qk_norm_here, fused, sparse);
  else add_qkv(m, p, att, qk_norm_here, qkv_rows);
  b.add(att + "linear_proj.weight",
        {b.h, mul(m.qkv.heads, use_mla ? m.mla.v_head : m.qkv.kv, "--num-attention-heads x the value head size")}, 1);
  if (b.bias) b.add(att + "linear_proj.bias", {b.h}, -1);
  // --softmax-type learnable: the dot-product attention's per-head softmax offset, split with the heads (DSA's
  // own core attention has none).
  if (a.softmax_type == arg::SoftmaxType::learnable && !sparse)
    b.add(att + "core_attention.softmax_offset", {m.qkv.heads}, 0);
}

// A gated delta net layer: a hybrid model's 'G', or a layer --linear-attention-freq marks (Megatron's
// TransformerLayer with GatedDeltaNet as its self-attention: the norm fused into in_proj, no biases, no conv1d
// bias). in_proj packs q, k, v, the gate z, beta and alpha, conv1d q, k and v, each part split over TP on its own;
// dt_bias and A_log per value head; the output norm over one value head (replicated); out_proj from all value
// heads. `two`: GatedDeltaNet2 (--experimental-attention-variant gdn2), whose in_proj adds the decay f, the erase
// gate b (q-sized each) and the write gate w (v-sized) in place of beta and alpha, dt_bias per key channel and
// A_log per key head.
void add_gdn(const Layers& m, const std::string& p, bool two) {
  const Builder& b = m.b;
  const Args& a = b.a;
  const int64_t tp = b.tp;
  const std::string s = p + "self_attention.";
  const int64_t key_heads = at_least(a.linear_num_key_heads, 1, "--linear-num-key-heads");
  const int64_t value_heads = at_least(a.linear_num_value_heads, 1, "--linear-num-value-heads");
  if (key_heads % tp != 0 || value_heads % tp != 0)
    throw RunError("--linear-num-key-heads (" + std::to_string(key_heads) + ") and --linear-num-value-heads (" +
                   std::to_string(value_heads) + ") must be divisible by the tensor-parallel size " +
                   std::to_string(tp) + " (gated delta net layers)");
  const int64_t qk = mul(at_least(a.linear_key_head_dim, 1, "--linear-key-head-dim"), key_heads,
                         "--linear-key-head-dim x --linear-num-key-heads");
  const int64_t v = mul(at_least(a.linear_value_head_dim, 1, "--linear-value-head-dim"), value_heads,
                        "--linear-value-head-dim x --linear-num-value-heads");
  const int64_t kernel = at_least(a.linear_conv_kernel_dim, 1, "--linear-conv-kernel-dim");
  b.norm(s + "in_proj.layer_norm_", b.h);
  const int64_t in_rows = sum(sum(mul(2, qk, "the gated delta net q and k"), mul(2, v, "its v and z"), "its in_proj"),
                              mul(2, value_heads, "its beta and alpha"), "its in_proj");
  if (two) {
    const int64_t rows2 = sum(mul(4, qk, "the gated delta net 2's q, k, f and b"), mul(3, v, "its v, z and w"),
                              "its in_proj");
    b.add(s + "in_proj.weight", {rows2, b.h}, 0).split_parts = {qk, qk, v, v, qk, qk, v};
  } else {
    b.add(s + "in_proj.weight", {in_rows, b.h}, 0).split_parts = {qk, qk, v, v, value_heads, value_heads};
  }
  b.add(s + "conv1d.weight", {sum(mul(2, qk, "its q and k"), v, "its conv1d"), 1, kernel}, 0).split_parts = {qk, qk, v};
  b.add(s + "dt_bias", {two ? qk : value_heads}, 0);
  b.add(s + "A_log", {two ? key_heads : value_heads}, 0);
  b.norm(s + "out_norm.", a.linear_value_head_dim);
  b.add(s + "out_proj.weight", {b.h, v}, 1);
}

}  // namespace mr::run::gpt_plan
