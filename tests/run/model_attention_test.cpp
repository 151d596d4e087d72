// The attention of a layer in the model plan (run/model_attention.cpp): multi-latent attention (and its fused
// down projection), the gated delta nets of --experimental-attention-variant gdn/gdn2, DSA's indexer, the output
// gate and the learnable softmax offset.
#include <catch2/catch.hpp>

#include <map>
#include <optional>
#include <string>

#include "config/value.h"
#include "run/buffers.h"
#include "run/model.h"
#include "model_support.h"

using mr::Value;
using mr::run::ModelPlan;
using mr::run::ParamSpec;
using mrtest::counted;
using mrtest::find;
using mrtest::gpt;

TEST_CASE("multi-latent attention: Megatron's attention parameter count, up projections split over TP",
          "[run][model][mla]") {
  // h 64, 4 heads, qk 8 + rotary 4, v 8, kv rank 16, RMSNorm, no biases, QK norms: per layer, Megatron's
  // theoretical_memory_usage counts q_term + kv_lora (h + heads (qk + v) + 1) + h rope + heads v h, with
  // q_term = q_lora (h + heads (qk + rope) + 1), or h heads (qk + rope) at full rank; plus the input norm.
  const int64_t h = 64, heads = 4, qk = 8, rope = 4, v = 8, kv_lora = 16, L = 4;
  auto mla = [&](std::optional<int64_t> q_lora) {
    std::map<std::string, Value> o = {{"multi_latent_attention", Value(true)}, {"kv_lora_rank", Value(kv_lora)},
                                      {"qk_head_dim", Value(qk)}, {"qk_pos_emb_head_dim", Value(rope)},
                                      {"v_head_dim", Value(v)}, {"normalization", Value(std::string("RMSNorm"))},
                                      {"add_bias_linear", Value(false)}, {"qk_layernorm", Value(true)},
                                      {"position_embedding_type", Value(std::string("rope"))}};
    if (q_lora) o["q_lora_rank"] = Value(*q_lora);
    return gpt(o);
  };
  auto attention = [](const ModelPlan& p, int64_t tp_rank) {
    int64_t n = 0;
    for (const ParamSpec& s : p.params)
      if (s.name.rfind("decoder.layers.0.", 0) == 0 && (s.name.find("self_attention.") != std::string::npos ||
                                                        s.name.find("input_layernorm.") != std::string::npos))
        if (!(s.tp_duplicate && tp_rank != 0)) n += s.numel();
    return n;
  };
  const int64_t kv_term = kv_lora * (h + heads * (qk + v) + 1) + h * rope, o_proj = heads * v * h;
  for (std::optional<int64_t> q_lora : {std::optional<int64_t>{}, std::optional<int64_t>{24}}) {
    INFO("q_lora_rank " << (q_lora ? std::to_string(*q_lora) : "none"));
    const int64_t q_term = q_lora ? *q_lora * (h + heads * (qk + rope) + 1) : h * heads * (qk + rope);
    const ModelPlan one = mr::run::plan_gpt_model(mla(q_lora), {});
    CHECK(attention(one, 0) == q_term + kv_term + o_proj + h);
    CHECK_FALSE(find(one, "decoder.layers.0.self_attention.linear_qkv.weight"));
    // TP=2: the up projections and the output are split by heads, the down projections and norms replicated.
    int64_t split = 0;
    for (int64_t r = 0; r < 2; ++r) split += attention(mr::run::plan_gpt_model(mla(q_lora), {r, 2, 0, 1}), r);
    CHECK(split == attention(one, 0));
    const ModelPlan tp2 = mr::run::plan_gpt_model(mla(q_lora), {1, 2, 0, 1});
    const ParamSpec* up = find(tp2, "decoder.layers.0.self_attention.linear_kv_up_proj.weight");
    REQUIRE(up);
    CHECK(up->shape == std::vector<int64_t>{heads * (qk + v) / 2, kv_lora});
    CHECK(find(tp2, "decoder.layers.0.self_attention.linear_kv_down_proj.weight")->tp_duplicate);
    CHECK(find(tp2, "decoder.layers.0.self_attention.linear_kv_up_proj.layer_norm_weight")->tp_duplicate);
    CHECK(find(tp2, "decoder.layers.0.self_attention.linear_proj.weight")->shape == std::vector<int64_t>{h, heads * v / 2});
    if (q_lora) CHECK(find(one, "decoder.layers.0.self_attention.linear_q_up_proj.layer_norm_weight"));
    else CHECK(find(one, "decoder.layers.0.self_attention.linear_q_proj.weight")->shape ==
               std::vector<int64_t>{heads * (qk + rope), h});
  }
  (void)L;
}

TEST_CASE("--mla-down-proj-fusion: one column-parallel down projection with the input norm fused in",
          "[run][model][mla]") {
  // FusedMLASelfAttention: linear_qkv_down_proj (TELayerNormColumnParallelLinear) of q_lora + kv_lora + rope rows,
  // split by TP; no input_layernorm; the same parameter count as the unfused layer.
  const int64_t h = 64, q_lora = 24, kv_lora = 16, rope = 4;
  std::map<std::string, Value> o = {{"multi_latent_attention", Value(true)}, {"kv_lora_rank", Value(kv_lora)},
                                    {"q_lora_rank", Value(q_lora)}, {"qk_head_dim", Value(int64_t{8})},
                                    {"qk_pos_emb_head_dim", Value(rope)}, {"v_head_dim", Value(int64_t{8})},
                                    {"qk_layernorm", Value(true)}, {"position_embedding_type", Value(std::string("rope"))}};
  const ModelPlan unfused = mr::run::plan_gpt_model(gpt(o), {});
  o["mla_down_proj_fusion"] = Value(true);
  const ModelPlan one = mr::run::plan_gpt_model(gpt(o), {});
  CHECK(counted(one, 0) == counted(unfused, 0));
  const std::string att = "decoder.layers.0.self_attention.";
  REQUIRE(find(one, att + "linear_qkv_down_proj.weight"));
  CHECK(find(one, att + "linear_qkv_down_proj.weight")->shape == std::vector<int64_t>{q_lora + kv_lora + rope, h});
  CHECK(find(one, att + "linear_qkv_down_proj.layer_norm_weight")->shape == std::vector<int64_t>{h});
  CHECK(find(one, att + "linear_qkv_down_proj.layer_norm_bias"));  // LayerNorm (the default) has a bias
  CHECK(find(one, att + "linear_q_up_proj.layer_norm_weight"));    // --qk-layernorm, fused into the up projection
  CHECK_FALSE(find(one, "decoder.layers.0.input_layernorm.weight"));
  CHECK_FALSE(find(one, att + "linear_q_down_proj.weight"));
  CHECK_FALSE(find(one, att + "linear_kv_down_proj.weight"));
  // TP=2: the fused projection is split by rows (no longer replicated), its norm replicated.
  const ModelPlan tp2 = mr::run::plan_gpt_model(gpt(o), {1, 2, 0, 1});
  CHECK(find(tp2, att + "linear_qkv_down_proj.weight")->shape == std::vector<int64_t>{(q_lora + kv_lora + rope) / 2, h});
  CHECK(find(tp2, att + "linear_qkv_down_proj.weight")->split_dim == 0);
  // Each rank's rows are its share of the q latent, then its share of the rest (Megatron's _qkv_down_projection
  // splits them so): rank 1's first row is global row q_lora / 2, its row q_lora / 2 is global row q_lora + rest / 2.
  const ParamSpec* fused1 = find(tp2, att + "linear_qkv_down_proj.weight");
  CHECK(fused1->split_parts == std::vector<int64_t>{q_lora, kv_lora + rope});
  CHECK(mr::run::global_index(*fused1, 1, 0) == (q_lora / 2) * h);
  CHECK(mr::run::global_index(*fused1, 1, (q_lora / 2) * h) == (q_lora + (kv_lora + rope) / 2) * h);
  CHECK(find(tp2, att + "linear_qkv_down_proj.layer_norm_weight")->tp_duplicate);
  // Megatron splits each rank's rows into its share of the q latent and of the rest: both must divide by TP.
  o["q_lora_rank"] = Value(int64_t{25});
  CHECK_THROWS_WITH(mr::run::plan_gpt_model(gpt(o), {0, 2, 0, 1}),
                    Catch::Contains("--q-lora-rank, with --mla-down-proj-fusion, (25) is not divisible by the "
                                    "tensor-parallel size 2"));
  o["q_lora_rank"] = Value(q_lora);
  o["qk_pos_emb_head_dim"] = Value(int64_t{5});
  CHECK_THROWS_WITH(mr::run::plan_gpt_model(gpt(o), {0, 2, 0, 1}),
                    Catch::Contains("--kv-lora-rank + --qk-pos-emb-head-dim, with --mla-down-proj-fusion, (21)"));
  // The local implementation has no fused module (Megatron's local layer spec ignores the flag): unfused.
  o["qk_pos_emb_head_dim"] = Value(rope);
  o["transformer_impl"] = Value(std::string("local"));
  CHECK(find(mr::run::plan_gpt_model(gpt(o), {}), att + "linear_q_down_proj.weight"));
}

TEST_CASE("--experimental-attention-variant gdn: the layers --linear-attention-freq marks get a gated delta net",
          "[run][model][gdn]") {
  const std::map<std::string, Value> gdn = {{"experimental_attention_variant", Value(std::string("gated_delta_net"))},
                                            {"linear_attention_freq", Value(int64_t{2})},
                                            {"linear_num_key_heads", Value(int64_t{2})},
                                            {"linear_key_head_dim", Value(int64_t{8})},
                                            {"linear_num_value_heads", Value(int64_t{4})},
                                            {"linear_value_head_dim", Value(int64_t{16})}};
  // Freq 2: layers 0 and 2 linear attention, 1 and 3 standard (every second keeps it).
  const ModelPlan p = mr::run::plan_gpt_model(gpt(gdn), {});
  for (int layer : {0, 2}) {
    const std::string pre = "decoder.layers." + std::to_string(layer) + ".self_attention.";
    CHECK(find(p, pre + "in_proj.layer_norm_weight"));
    CHECK(find(p, pre + "in_proj.layer_norm_bias"));  // LayerNorm: weight and bias
    CHECK(find(p, pre + "out_norm.bias"));
    CHECK_FALSE(find(p, pre + "linear_qkv.weight"));
    CHECK_FALSE(find(p, pre + "in_proj.bias"));  // GatedDeltaNet has no biases
  }
  CHECK(find(p, "decoder.layers.1.self_attention.linear_qkv.weight"));
  CHECK(find(p, "decoder.layers.0.mlp.linear_fc1.weight"));  // the MLP as any layer's
  // A list: 1 for linear attention; its length is the layer count.
  auto listed = gdn;
  listed["linear_attention_freq"] = Value(mr::List{Value(int64_t{0}), Value(int64_t{0}), Value(int64_t{0}), Value(int64_t{1})});
  const ModelPlan q = mr::run::plan_gpt_model(gpt(listed), {});
  CHECK(find(q, "decoder.layers.3.self_attention.in_proj.weight"));
  CHECK(find(q, "decoder.layers.0.self_attention.linear_qkv.weight"));
  using Catch::Matchers::Contains;
  listed["linear_attention_freq"] = Value(mr::List{Value(int64_t{1})});
  CHECK_THROWS_WITH(mr::run::plan_gpt_model(gpt(listed), {}), Contains("--linear-attention-freq lists 1 layers"));
  CHECK_THROWS_WITH(mr::run::plan_gpt_model(gpt({{"experimental_attention_variant", Value(std::string("gdn2"))}}), {}),
                    Contains("--experimental-attention-variant gdn2 needs --linear-attention-freq"));
  // gdn2 (GatedDeltaNet2): in_proj q, k, v, z, f, b, w; dt_bias per key channel, A_log per key head.
  auto two = gdn;
  two["experimental_attention_variant"] = Value(std::string("gdn2"));
  const ModelPlan g2 = mr::run::plan_gpt_model(gpt(two), {1, 2, 0, 1});
  const ParamSpec* in2 = find(g2, "decoder.layers.0.self_attention.in_proj.weight");
  REQUIRE(in2);
  CHECK(in2->split_parts == std::vector<int64_t>{16, 16, 64, 64, 16, 16, 64});
  CHECK(in2->shape == std::vector<int64_t>{128, 64});
  CHECK(find(g2, "decoder.layers.0.self_attention.dt_bias")->shape == std::vector<int64_t>{8});
  CHECK(find(g2, "decoder.layers.0.self_attention.A_log")->shape == std::vector<int64_t>{1});
}

TEST_CASE("--experimental-attention-variant dsa and the hybrid 'D': MLA plus the DSA indexer, replicated over TP",
          "[run][model][dsa]") {
  // h 64, 4 heads, qk 8 + rotary 4, v 8, q rank 24, kv rank 16; indexer 2 heads of 32.
  const int64_t h = 64, ix = 2 * 32 * 24 + 32 * h + 2 * 32 + 2 * h;  // wq_b, wk, k_norm (LayerNorm), weights_proj
  const std::map<std::string, Value> mla = {{"multi_latent_attention", Value(true)}, {"kv_lora_rank", Value(int64_t{16})},
                                            {"q_lora_rank", Value(int64_t{24})}, {"qk_head_dim", Value(int64_t{8})},
                                            {"qk_pos_emb_head_dim", Value(int64_t{4})}, {"v_head_dim", Value(int64_t{8})},
                                            {"position_embedding_type", Value(std::string("rope"))},
                                            {"qk_layernorm", Value(true)}, {"dsa_indexer_n_heads", Value(int64_t{2})},
                                            {"dsa_indexer_head_dim", Value(int64_t{32})}};
  auto layer0 = [](const ModelPlan& p) {
    int64_t n = 0;
    for (const ParamSpec& s : p.params)
      if (s.name.rfind("decoder.layers.0.self_attention.", 0) == 0) n += s.numel();
    return n;
  };
  auto with_dsa = mla;
  with_dsa["experimental_attention_variant"] = Value(std::string("dsa"));
  const ModelPlan plain = mr::run::plan_gpt_model(gpt(mla), {}), sparse = mr::run::plan_gpt_model(gpt(with_dsa), {});
  CHECK(layer0(sparse) == layer0(plain) + ix);
  // Its latent norms are never fused into the up projections (the indexer needs the normalised latent).
  CHECK(find(plain, "decoder.layers.0.self_attention.linear_q_up_proj.layer_norm_weight"));
  CHECK(find(sparse, "decoder.layers.0.self_attention.q_layernorm.weight"));
  CHECK(find(sparse, "decoder.layers.0.self_attention.kv_layernorm.weight"));
  const ModelPlan tp2 = mr::run::plan_gpt_model(gpt(with_dsa), {1, 2, 0, 1});
  const ParamSpec* wq = find(tp2, "decoder.layers.0.self_attention.core_attention.indexer.linear_wq_b.weight");
  REQUIRE(wq);
  CHECK(wq->shape == std::vector<int64_t>{64, 24});
  CHECK(wq->tp_duplicate);
  CHECK(find(tp2, "decoder.layers.0.self_attention.core_attention.indexer.k_norm.bias"));
  // In a hybrid model ('D'), as hybrid_stack_spec builds it: no latent norms even with --qk-layernorm.
  auto hy = mla;
  hy["hybrid_layer_pattern"] = Value(std::string("D-"));
  hy["num_layers"] = Value(int64_t{0});
  const ModelPlan d = mr::run::plan_gpt_model(gpt(hy), {});
  CHECK(find(d, "decoder.layers.0.self_attention.core_attention.indexer.linear_wk.weight"));
  CHECK_FALSE(find(d, "decoder.layers.0.self_attention.q_layernorm.weight"));
  CHECK(layer0(d) == layer0(sparse) - 2 * (24 + 16));  // the two latent norms (LayerNorm: weights and biases)
}

TEST_CASE("--attention-output-gate: a gate per query head in the QKV projection, split over TP with its group",
          "[run][model]") {
  const ModelPlan plain = mr::run::plan_gpt_model(gpt(), {}),
                  gated = mr::run::plan_gpt_model(gpt({{"attention_output_gate", Value(true)}}), {});
  const std::string qkv = "decoder.layers.0.self_attention.linear_qkv.";
  // 4 heads of 16, a group each: (4 + 2 x 4) x 16 rows, and 4 x 16 more for the gate (weight and bias).
  CHECK(find(plain, qkv + "weight")->shape == std::vector<int64_t>{192, 64});
  CHECK(find(gated, qkv + "weight")->shape == std::vector<int64_t>{256, 64});
  CHECK(find(gated, qkv + "bias")->shape == std::vector<int64_t>{256});
  CHECK(gated.numel() == plain.numel() + 4 * (64 * 64 + 64));
  const ModelPlan tp2 = mr::run::plan_gpt_model(gpt({{"attention_output_gate", Value(true)},
                                                     {"group_query_attention", Value(true)},
                                                     {"num_query_groups", Value(int64_t{2})}}),
                                                {1, 2, 0, 1});
  CHECK(find(tp2, qkv + "weight")->shape == std::vector<int64_t>{96, 64});  // (2 x 4 + 2 x 2) x 16 / 2
}

TEST_CASE("--softmax-type learnable: a softmax offset per attention head, split over TP", "[run][model]") {
  const ModelPlan p = mr::run::plan_gpt_model(gpt({{"softmax_type", Value(std::string("learnable"))}}), {1, 2, 0, 1});
  const ParamSpec* off = find(p, "decoder.layers.0.self_attention.core_attention.softmax_offset");
  REQUIRE(off);
  CHECK(off->shape == std::vector<int64_t>{2});  // 4 heads over TP=2
  CHECK(off->no_weight_decay);                    // 1-D, Megatron's default rule
  CHECK_FALSE(find(mr::run::plan_gpt_model(gpt({{"softmax_type", Value(std::string("off-by-one"))}}), {}),
                   "decoder.layers.0.self_attention.core_attention.softmax_offset"));  // a constant, not a parameter
}

TEST_CASE("--apply-wd-to-qk-layernorm decays the parameters named q_layernorm./k_layernorm. only, as Megatron's "
          "name match",
          "[run][model][mla]") {
  // Megatron's get_standard_config_overrides: with the flag, a 1-D parameter keeps no decay unless its name holds
  // "q_layernorm." or "k_layernorm.": MLA's kv_layernorm and Transformer Engine's norms fused into the up
  // projections keep none (review worker39 #1: every MLA latent norm was decayed).
  std::map<std::string, Value> o = {{"multi_latent_attention", Value(true)}, {"kv_lora_rank", Value(int64_t{16})},
                                    {"q_lora_rank", Value(int64_t{24})}, {"qk_head_dim", Value(int64_t{8})},
                                    {"qk_pos_emb_head_dim", Value(int64_t{4})}, {"v_head_dim", Value(int64_t{8})},
                                    {"add_bias_linear", Value(false)}, {"qk_layernorm", Value(true)},
                                    {"position_embedding_type", Value(std::string("rope"))},
                                    {"apply_wd_to_qk_layernorm", Value(true)}};
  const std::string att = "decoder.layers.0.self_attention.";
  const ModelPlan te = mr::run::plan_gpt_model(gpt(o), {});
  for (const char* n : {"linear_q_up_proj.layer_norm_weight", "linear_kv_up_proj.layer_norm_weight"}) {
    INFO(n);
    REQUIRE(find(te, att + n));
    CHECK(find(te, att + n)->no_weight_decay);
  }
  o["transformer_impl"] = Value(std::string("local"));
  const ModelPlan local = mr::run::plan_gpt_model(gpt(o), {});
  REQUIRE(find(local, att + "q_layernorm.weight"));
  REQUIRE(find(local, att + "kv_layernorm.weight"));
  CHECK_FALSE(find(local, att + "q_layernorm.weight")->no_weight_decay);  // "q_layernorm." in the name
  CHECK(find(local, att + "kv_layernorm.weight")->no_weight_decay);       // "kv_layernorm." holds neither
  // Plain attention's q/k norms are decayed with the flag, not without it.
  std::map<std::string, Value> plain = {{"qk_layernorm", Value(true)}, {"apply_wd_to_qk_layernorm", Value(true)}};
  const ModelPlan qk = mr::run::plan_gpt_model(gpt(plain), {});
  REQUIRE(find(qk, att + "q_layernorm.weight"));
  CHECK_FALSE(find(qk, att + "q_layernorm.weight")->no_weight_decay);
  CHECK_FALSE(find(qk, att + "k_layernorm.weight")->no_weight_decay);
  plain["apply_wd_to_qk_layernorm"] = Value(false);
  CHECK(find(mr::run::plan_gpt_model(gpt(plain), {}), att + "k_layernorm.weight")->no_weight_decay);
}
