// The parameters a rank of a GPT model holds (run/model.h): counts against the closed-form GPT parameter count,
// tensor-parallel shards, pipeline stages (even, uneven, virtual), tied embeddings, weight-decay flags, limits.
// The attention's cases are in model_attention_test.cpp, the MoE block's in model_moe_test.cpp.
#include <catch2/catch.hpp>

#include <fstream>
#include <map>
#include <sstream>
#include <numeric>
#include <optional>

#include "config/value.h"
#include "run/buffers.h"
#include "optim/optimizer_table.h"
#include "run/hybrid_layers.h"
#include "run/model.h"
#include "model_support.h"

using mr::Namespace;
using mr::Value;
using mr::run::ModelPlan;
using mr::run::ParamSpec;
using mr::run::RankCoord;
using mrtest::counted;
using mrtest::find;
using mrtest::gpt;

namespace {

// 12 L h^2 + 13 L h + (V + s) h + 2 h: GPT with biases, LayerNorm, 4h MLP, learned positions, tied output.
int64_t closed_form(int64_t L, int64_t h, int64_t V, int64_t s) { return 12 * L * h * h + 13 * L * h + (V + s) * h + 2 * h; }

// The plan of `over` without --rmsnorm-weight-decay-mult.
ModelPlan plan_gpt_model_without_mult(std::map<std::string, Value> over) {
  over.erase("rmsnorm_weight_decay_mult");
  return mr::run::plan_gpt_model(gpt(over), {});
}

}  // namespace

TEST_CASE("a single-rank GPT holds the closed-form parameter count", "[run][model]") {
  ModelPlan p = mr::run::plan_gpt_model(gpt(), {});
  CHECK(p.padded_vocab_size == 1024);
  CHECK(p.numel() == closed_form(4, 64, 1024, 32));
  CHECK(p.layers == std::vector<int64_t>{0, 1, 2, 3});
  REQUIRE(find(p, "decoder.layers.3.self_attention.linear_qkv.weight"));
  CHECK(find(p, "decoder.layers.3.self_attention.linear_qkv.weight")->shape == std::vector<int64_t>{192, 64});
  CHECK(find(p, "output_layer.weight") == nullptr);  // tied, one stage: the embedding is the output layer
  // Weight decay: not for biases and 1-D params.
  CHECK(find(p, "decoder.layers.0.mlp.linear_fc1.bias")->no_weight_decay);
  CHECK(find(p, "decoder.layers.0.mlp.linear_fc1.layer_norm_weight")->no_weight_decay);
  CHECK_FALSE(find(p, "decoder.layers.0.mlp.linear_fc1.weight")->no_weight_decay);
  CHECK(find(p, "embedding.word_embeddings.weight")->embedding_or_output);
  // Megatron's initial values: ones for norm weights (TE's fused names too), zeros for biases, else normal.
  using Init = ParamSpec::Init;
  CHECK(find(p, "decoder.layers.0.self_attention.linear_qkv.layer_norm_weight")->init == Init::One);
  CHECK(find(p, "decoder.layers.0.self_attention.linear_qkv.layer_norm_bias")->init == Init::Zero);
  CHECK(find(p, "decoder.final_layernorm.weight")->init == Init::One);
  CHECK(find(p, "decoder.layers.0.mlp.linear_fc1.bias")->init == Init::Zero);
  CHECK(find(p, "decoder.layers.0.mlp.linear_fc1.weight")->init == Init::Normal);
  // The local (non-TE) spec names its norms on their own.
  ModelPlan local = mr::run::plan_gpt_model(gpt({{"transformer_impl", Value(std::string("local"))}}), {});
  CHECK(find(local, "decoder.layers.0.input_layernorm.weight"));
  CHECK(find(local, "decoder.layers.0.pre_mlp_layernorm.bias"));
  CHECK(local.numel() == p.numel());
}

TEST_CASE("tensor parallelism splits the matrices and replicates the rest", "[run][model]") {
  const int64_t whole = mr::run::plan_gpt_model(gpt(), {}).numel();
  for (int64_t tp : {2, 4}) {
    int64_t total = 0;
    for (int64_t r = 0; r < tp; ++r) {
      ModelPlan p = mr::run::plan_gpt_model(gpt(), {r, tp, 0, 1});
      CHECK(p.padded_vocab_size == 1024);  // 1000 up to a multiple of 128 * tp (512 for tp 4: 1024)
      total += counted(p, r);
      const ParamSpec* qkv = find(p, "decoder.layers.0.self_attention.linear_qkv.weight");
      CHECK(qkv->shape == std::vector<int64_t>{192 / tp, 64});
      CHECK(qkv->full_shape == std::vector<int64_t>{192, 64});
      CHECK(find(p, "decoder.layers.0.self_attention.linear_proj.weight")->shape == std::vector<int64_t>{64, 64 / tp});
      CHECK(find(p, "decoder.layers.0.mlp.linear_fc2.weight")->split_dim == 1);
      CHECK(find(p, "decoder.layers.0.mlp.linear_fc1.bias")->shape == std::vector<int64_t>{256 / tp});
      CHECK(find(p, "decoder.layers.0.self_attention.linear_proj.bias")->tp_duplicate);
      CHECK(find(p, "embedding.position_embeddings.weight")->tp_duplicate);
      CHECK_FALSE(find(p, "embedding.word_embeddings.weight")->tp_duplicate);
    }
    CHECK(total == whole);
  }
  CHECK(mr::run::padded_vocab_size(1000, 128, 8) == 1024);
  CHECK(mr::run::padded_vocab_size(50257, 128, 1) == 50304);
  CHECK(mr::run::padded_vocab_size(50257, 128, 5) == 50560);
}

TEST_CASE("pipeline stages hold their layers; tied embeddings get a counted-once copy", "[run][model]") {
  ModelPlan first = mr::run::plan_gpt_model(gpt(), {0, 1, 0, 2}), last = mr::run::plan_gpt_model(gpt(), {0, 1, 1, 2});
  CHECK(first.layers == std::vector<int64_t>{0, 1});
  CHECK(last.layers == std::vector<int64_t>{2, 3});
  CHECK(find(first, "embedding.word_embeddings.weight"));
  CHECK_FALSE(find(first, "decoder.final_layernorm.weight"));
  CHECK(find(last, "decoder.final_layernorm.weight"));
  const ParamSpec* out = find(last, "output_layer.weight");
  REQUIRE(out);
  CHECK(out->shared_copy);
  CHECK(out->embedding_or_output);
  CHECK(counted(first, 0) + counted(last, 0) == mr::run::plan_gpt_model(gpt(), {}).numel());
  // Untied: the output layer is a parameter of its own, counted.
  ModelPlan untied = mr::run::plan_gpt_model(gpt({{"untie_embeddings_and_output_weights", Value(true)}}), {});
  REQUIRE(find(untied, "output_layer.weight"));
  CHECK_FALSE(find(untied, "output_layer.weight")->shared_copy);
  CHECK(untied.numel() == closed_form(4, 64, 1024, 32) + 1024 * 64);
}

TEST_CASE("--embedding-init-method-std: the word and position embeddings (and the later stages' copies) take it, "
          "the rest --init-method-std",
          "[run][model][init]") {
  const mr::Args with = gpt({{"embedding_init_method_std", Value(0.5)}});
  const ModelPlan one = mr::run::plan_gpt_model(with, {});
  for (const ParamSpec& p : one.params) {
    INFO(p.name);
    const bool embedding =
        p.name == "embedding.word_embeddings.weight" || p.name == "embedding.position_embeddings.weight";
    CHECK(p.init_std.has_value() == embedding);
    if (embedding) CHECK(*p.init_std == 0.5);
  }
  // Tied over two stages: the last stage's copy starts equal to the first stage's, as Megatron syncs it.
  const ParamSpec* copy = find(mr::run::plan_gpt_model(with, {0, 1, 1, 2}), "output_layer.weight");
  REQUIRE(copy);
  CHECK(copy->init_std == std::optional<double>(0.5));
  // Untied: the output layer is initialised with --init-method-std (Megatron's init_method).
  const ModelPlan untied =
      mr::run::plan_gpt_model(gpt({{"embedding_init_method_std", Value(0.5)}, {"untie_embeddings_and_output_weights", Value(true)}}), {});
  CHECK_FALSE(find(untied, "output_layer.weight")->init_std);
  // Not set: every parameter on --init-method-std.
  for (const ParamSpec& p : mr::run::plan_gpt_model(gpt(), {}).params) CHECK_FALSE(p.init_std);
}

TEST_CASE("pipeline layer assignment: even, first/last stage sizes, virtual chunks", "[run][model]") {
  using mr::run::pipeline_layers;
  CHECK(pipeline_layers(8, 1, 4, 1, -1, -1) == std::vector<int64_t>{2, 3});
  // 2 virtual chunks on 2 stages: stage 0 runs layers 0-1 then 4-5, stage 1 runs 2-3 then 6-7.
  CHECK(pipeline_layers(8, 0, 2, 2, -1, -1) == std::vector<int64_t>{0, 1, 4, 5});
  CHECK(pipeline_layers(8, 1, 2, 2, -1, -1) == std::vector<int64_t>{2, 3, 6, 7});
  // First stage 1 layer, last stage 3, the two middle stages share the other 4.
  CHECK(pipeline_layers(8, 0, 4, 1, 1, 3) == std::vector<int64_t>{0});
  CHECK(pipeline_layers(8, 1, 4, 1, 1, 3) == std::vector<int64_t>{1, 2});
  CHECK(pipeline_layers(8, 2, 4, 1, 1, 3) == std::vector<int64_t>{3, 4});
  CHECK(pipeline_layers(8, 3, 4, 1, 1, 3) == std::vector<int64_t>{5, 6, 7});
  CHECK(pipeline_layers(7, 1, 3, 1, 1, -1) == std::vector<int64_t>{1, 2, 3});
  CHECK_THROWS_WITH(pipeline_layers(6, 0, 4, 1, -1, -1), Catch::Contains("does not divide"));
  // The embedding and the loss counted as layers: 6 layers + 2 over 2 stages, one fewer on each end.
  CHECK(pipeline_layers(6, 0, 2, 1, -1, -1, true, true) == std::vector<int64_t>{0, 1, 2});
  CHECK(pipeline_layers(6, 1, 2, 1, -1, -1, true, true) == std::vector<int64_t>{3, 4, 5});
  // ... with 2 virtual chunks: stage 0 runs [0] then [3, 4], stage 1 [1, 2] then [5].
  CHECK(pipeline_layers(6, 0, 2, 2, -1, -1, true, true) == std::vector<int64_t>{0, 3, 4});
  CHECK(pipeline_layers(6, 1, 2, 2, -1, -1, true, true) == std::vector<int64_t>{1, 2, 5});
  // First/last stage sizes with virtual chunks: 10 layers, 3 stages, first 2, last 4, 2 chunks each.
  CHECK(pipeline_layers(10, 0, 3, 2, 2, 4) == std::vector<int64_t>{0, 5});
  CHECK(pipeline_layers(10, 1, 3, 2, 2, 4) == std::vector<int64_t>{1, 2, 6, 7});
  CHECK(pipeline_layers(10, 2, 3, 2, 2, 4) == std::vector<int64_t>{3, 4, 8, 9});
  CHECK_THROWS_WITH(pipeline_layers(8, 0, 2, 1, -1, -1, true, false), Catch::Contains("does not divide"));
  CHECK_THROWS_WITH(pipeline_layers(8, 0, 2, 1, 2, -1, true, false), Catch::Contains("cannot be combined"));
  // Every layer on exactly one stage, for each way of splitting.
  struct Split {
    int64_t L, pp, vp, first, last;
    bool emb, loss;
  };
  for (const Split& s : {Split{8, 4, 1, -1, -1, false, false}, Split{16, 4, 2, -1, -1, false, false},
                         Split{14, 4, 1, -1, -1, true, true}, Split{14, 4, 2, -1, -1, true, true},
                         Split{7, 4, 1, -1, -1, true, false}, Split{7, 2, 2, -1, -1, false, true},
                         Split{12, 4, 1, 2, 4, false, false}, Split{12, 4, 2, 2, 2, false, false},
                         Split{9, 3, 1, -1, 1, false, false}, Split{10, 3, 2, 2, 4, false, false}}) {
    INFO("L " << s.L << " pp " << s.pp << " vp " << s.vp << " first " << s.first << " last " << s.last << " emb "
              << s.emb << " loss " << s.loss);
    std::vector<int> seen(static_cast<size_t>(s.L), 0);
    for (int64_t r = 0; r < s.pp; ++r)
      for (int64_t l : pipeline_layers(s.L, r, s.pp, s.vp, s.first, s.last, s.emb, s.loss)) {
        REQUIRE(l >= 0);
        REQUIRE(l < s.L);
        ++seen[static_cast<size_t>(l)];
      }
    for (int n : seen) CHECK(n == 1);
  }
}

TEST_CASE("GQA, SwiGLU, RMSNorm, no biases, QK norms", "[run][model]") {
  ModelPlan p = mr::run::plan_gpt_model(gpt({{"group_query_attention", Value(true)},
                                             {"num_query_groups", Value(int64_t{2})},
                                             {"swiglu", Value(true)},
                                             {"normalization", Value(std::string("RMSNorm"))},
                                             {"add_bias_linear", Value(false)},
                                             {"qk_layernorm", Value(true)},
                                             {"position_embedding_type", Value(std::string("rope"))}}),
                                        {});
  CHECK(find(p, "decoder.layers.0.self_attention.linear_qkv.weight")->shape == std::vector<int64_t>{(4 + 2 * 2) * 16, 64});
  CHECK(find(p, "decoder.layers.0.mlp.linear_fc1.weight")->shape == std::vector<int64_t>{512, 64});
  CHECK_FALSE(find(p, "decoder.layers.0.mlp.linear_fc1.bias"));
  CHECK_FALSE(find(p, "decoder.layers.0.mlp.linear_fc1.layer_norm_bias"));
  CHECK_FALSE(find(p, "embedding.position_embeddings.weight"));
  REQUIRE(find(p, "decoder.layers.0.self_attention.q_layernorm.weight"));
  CHECK(find(p, "decoder.layers.0.self_attention.q_layernorm.weight")->shape == std::vector<int64_t>{16});
  CHECK(find(p, "decoder.layers.0.self_attention.q_layernorm.weight")->no_weight_decay);
  ModelPlan wd = mr::run::plan_gpt_model(gpt({{"qk_layernorm", Value(true)}, {"apply_wd_to_qk_layernorm", Value(true)}}), {});
  CHECK_FALSE(find(wd, "decoder.layers.0.self_attention.k_layernorm.weight")->no_weight_decay);
  CHECK(find(wd, "decoder.layers.0.mlp.linear_fc1.layer_norm_weight")->no_weight_decay);
  // --rmsnorm-weight-decay-mult marks every RMSNorm gamma (fused or not, q/k norms too), and nothing else.
  const std::map<std::string, Value> rms = {{"normalization", Value(std::string("RMSNorm"))},
                                            {"add_bias_linear", Value(false)},
                                            {"qk_layernorm", Value(true)},
                                            {"rmsnorm_weight_decay_mult", Value(0.5)}};
  for (const char* impl : {"transformer_engine", "local"}) {
    std::map<std::string, Value> over = rms;
    over["transformer_impl"] = Value(std::string(impl));
    const ModelPlan marked = mr::run::plan_gpt_model(gpt(over), {});
    int gammas = 0;
    for (const ParamSpec& q : marked.params) {
      INFO(impl << ": " << q.name);
      const bool is_norm_weight = q.name.find("norm") != std::string::npos && q.name.find("weight") != std::string::npos;
      CHECK(q.rmsnorm_gamma == is_norm_weight);
      gammas += q.rmsnorm_gamma;
    }
    CHECK(gammas == 4 * 4 + 1);  // per layer: input, pre-MLP, q and k norms; the final norm
  }
  for (const ParamSpec& q : plan_gpt_model_without_mult(rms).params) CHECK_FALSE(q.rmsnorm_gamma);
  std::map<std::string, Value> layer_norm = rms;
  layer_norm["normalization"] = Value(std::string("LayerNorm"));
  for (const ParamSpec& q : mr::run::plan_gpt_model(gpt(layer_norm), {}).params) CHECK_FALSE(q.rmsnorm_gamma);
}

TEST_CASE("what the run does not model is refused, naming the flag", "[run][model]") {
  CHECK_THROWS_WITH(mr::run::plan_gpt_model(gpt({{"vocab_size", Value()}}), {}), Catch::Contains("--vocab-size"));
  CHECK_THROWS_WITH(mr::run::plan_gpt_model(gpt({{"multi_latent_attention", Value(true)},
                                                {"mla_down_proj_fusion", Value(true)}}),
                                            {}),
                    Catch::Contains("--mla-down-proj-fusion needs --q-lora-rank"));
  CHECK_THROWS_WITH(mr::run::plan_gpt_model(gpt({{"hybrid_layer_pattern", Value(std::string("-Q"))}}), {}),
                    Catch::Contains("the model plan does not model the hybrid layer symbol 'Q'"));
  CHECK_THROWS_WITH(mr::run::plan_gpt_model(gpt(), {0, 3, 0, 1}), Catch::Contains("--tensor-model-parallel-size"));
}

TEST_CASE("heterogeneous layers: each layer as its block says (configs/examples/heterogeneous-blocks.json)",
          "[run][model][heterogeneous]") {
  // The example: hidden 256, 4 heads (kv 64), 2 query groups, SwiGLU, RMSNorm, no biases, untied output, TE.
  std::ifstream in(std::string(MR_SOURCE_DIR) + "/configs/examples/heterogeneous-blocks.json");
  std::stringstream json;
  json << in.rdbuf();
  std::map<std::string, Value> o = {
      {"heterogeneous_layers_config_encoded_json", Value(json.str())},
      {"heterogeneous_layers_config_path", Value(std::string("configs/examples/heterogeneous-blocks.json"))},
      {"hidden_size", Value(int64_t{256})},
      {"kv_channels", Value(int64_t{64})}, {"group_query_attention", Value(true)},
      {"num_query_groups", Value(int64_t{2})}, {"swiglu", Value(true)}, {"normalization", Value(std::string("RMSNorm"))},
      {"add_bias_linear", Value(false)}, {"untie_embeddings_and_output_weights", Value(true)},
      {"position_embedding_type", Value(std::string("rope"))}, {"vocab_size", Value(int64_t{1024})},
      {"ffn_hidden_size", Value(int64_t{704})}};
  const ModelPlan one = mr::run::plan_gpt_model(gpt(o), {});
  auto layer = [&](const ModelPlan& p, int i) {
    int64_t n = 0;
    for (const ParamSpec& s : p.params)
      if (s.name.rfind("decoder.layers." + std::to_string(i) + ".", 0) == 0) n += s.numel();
    return n;
  };
  const int64_t h = 256, attention = h + (4 + 2 * 2) * 64 * h + h * h, linear = h + h * h;
  auto mlp = [&](int64_t f) { return h + 2 * f * h + h * f; };
  CHECK(layer(one, 0) == attention + mlp(512));  // ffn_mult 2.625 -> 512
  CHECK(layer(one, 1) == mlp(256));              // no attention, ffn_mult 1.3125 -> 256
  CHECK(layer(one, 2) == linear);                // attention replaced by one linear layer, no MLP
  CHECK(layer(one, 3) == attention + linear);    // MLP replaced by one linear layer
  CHECK(counted(one, 0) == 1640192);             // what `megatron-run params` reports for the example
  CHECK(find(one, "decoder.layers.2.self_attention.layer_norm_weight"));
  CHECK(find(one, "decoder.layers.2.self_attention.weight")->shape == std::vector<int64_t>{h, h});
  CHECK(find(one, "decoder.layers.3.mlp.weight"));
  CHECK_FALSE(find(one, "decoder.layers.1.self_attention.linear_qkv.weight"));
  CHECK_FALSE(find(one, "decoder.layers.2.mlp.linear_fc1.weight"));
  // TP=2 halves the linear replacements by rows; the four layers over PP=2 hold the same total.
  CHECK(find(mr::run::plan_gpt_model(gpt(o), {1, 2, 0, 1}), "decoder.layers.2.self_attention.weight")->shape ==
        std::vector<int64_t>{h / 2, h});
  CHECK(layer(mr::run::plan_gpt_model(gpt(o), {0, 1, 1, 2}), 3) == layer(one, 3));
  // The encoded JSON alone is only checked against the flags: Megatron builds uniform layers then.
  std::map<std::string, Value> json_only = o;
  json_only.erase("heterogeneous_layers_config_path");
  CHECK(layer(mr::run::plan_gpt_model(gpt(json_only), {}), 2) == layer(mr::run::plan_gpt_model(gpt(json_only), {}), 0));
  CHECK(find(mr::run::plan_gpt_model(gpt(json_only), {}), "decoder.layers.2.self_attention.linear_qkv.weight"));
  // The local implementation: the norms before the linear replacements are the layer's own.
  o["transformer_impl"] = Value(std::string("local"));
  const ModelPlan local = mr::run::plan_gpt_model(gpt(o), {});
  CHECK(find(local, "decoder.layers.2.input_layernorm.weight"));
  CHECK(find(local, "decoder.layers.3.pre_mlp_layernorm.weight"));
  CHECK_FALSE(find(local, "decoder.layers.1.input_layernorm.weight"));  // no attention, no norm
  CHECK(counted(local, 0) == counted(one, 0));
  // Refused, naming why: MoE (the heterogeneous spec has none), too few blocks.
  o["transformer_impl"] = Value(std::string("transformer_engine"));
  o["num_experts"] = Value(int64_t{4});
  CHECK_THROWS_WITH(mr::run::plan_gpt_model(gpt(o), {}), Catch::Contains("heterogeneous layer configs with --num-experts"));
  o.erase("num_experts");
  o["num_layers"] = Value(int64_t{6});
  CHECK_THROWS_WITH(mr::run::plan_gpt_model(gpt(o), {}), Catch::Contains("has 4 block_configs for --num-layers 6"));
  o["num_layers"] = Value(int64_t{4});
  std::string three;  // four blocks of 3 query groups: 4 heads are not whole groups of them
  for (int i = 0; i < 4; ++i)
    three += std::string(i ? "," : "") + R"({"attention": {"num_query_groups": 3}, "ffn": {"ffn_mult": 1.0}})";
  o["heterogeneous_layers_config_encoded_json"] = Value("{\"block_configs\": [" + three + "]}");
  CHECK_THROWS_WITH(mr::run::plan_gpt_model(gpt(o), {}),
                    Catch::Contains("block_configs[0] has 3 query groups: it must divide --num-attention-heads (4)"));
}

TEST_CASE("multi-token prediction: MTP layers on the last stage, with their embedding copy under PP",
          "[run][model][mtp]") {
  // Each MTP layer: enorm, hnorm (LayerNorm: weight and bias), eh_proj 2h -> h, one transformer layer like the
  // decoder's, its final norm. Megatron's theoretical_memory_usage counts only the transformer layer of it.
  const int64_t h = 64, L = 4, V = 1024;  // vocabulary 1000 padded to 128 x TP
  const auto base = gpt({{"position_embedding_type", Value(std::string("rope"))}});
  const ModelPlan plain = mr::run::plan_gpt_model(base, {});
  const int64_t layer = 12 * h * h + 13 * h;  // a GPT layer with biases and LayerNorms (closed_form's per layer)
  for (int64_t mtp : {1, 2}) {
    INFO("--mtp-num-layers " << mtp);
    const auto args = gpt({{"position_embedding_type", Value(std::string("rope"))}, {"mtp_num_layers", Value(mtp)}});
    const ModelPlan one = mr::run::plan_gpt_model(args, {});
    CHECK(counted(one, 0) == counted(plain, 0) + mtp * (layer + 2 * h * h + 3 * 2 * h));
    REQUIRE(find(one, "mtp.layers.0.eh_proj.weight"));
    CHECK(find(one, "mtp.layers.0.eh_proj.weight")->shape == std::vector<int64_t>{h, 2 * h});
    CHECK(find(one, "mtp.layers.0.mtp_model_layer.self_attention.linear_qkv.weight"));
    CHECK(one.layers.size() == static_cast<size_t>(L));  // the decoder's layers only
    // PP=2: the MTP layers and an embedding copy (counted on the first stage only) on the last stage; tied, it is
    // the output layer's weight too (no output_layer.weight).
    const ModelPlan first = mr::run::plan_gpt_model(args, {0, 1, 0, 2}), last = mr::run::plan_gpt_model(args, {0, 1, 1, 2});
    CHECK_FALSE(find(first, "mtp.layers.0.enorm.weight"));
    const ParamSpec* copy = find(last, "embedding.word_embeddings.weight");
    REQUIRE(copy);
    CHECK(copy->shared_copy);
    CHECK(copy->shape == std::vector<int64_t>{V, h});
    CHECK_FALSE(find(last, "output_layer.weight"));
    CHECK(counted(first, 0) + counted(last, 0) == counted(one, 0));
    // ... yet Megatron allocates output_layer.weight there (on every stage but the first) and never uses it: it
    // is in Megatron's count of the rank and in the memory estimate, not in what the run holds.
    REQUIRE(last.unused.size() == 1);
    CHECK(last.unused[0].name == "output_layer.weight");
    CHECK(last.unused[0].shape == std::vector<int64_t>{V, h});
    CHECK(last.megatron_numel() == last.numel() + V * h);
    CHECK(mr::run::estimate_memory(last, args, 1, 1).params == 4.0 * static_cast<double>(last.megatron_numel()));
    CHECK(first.unused.empty());
    CHECK(one.unused.empty());  // one stage: the first, where the output layer takes the embedding's weight
    // Untied: the copy and an output layer of its own.
    const auto untied = gpt({{"position_embedding_type", Value(std::string("rope"))}, {"mtp_num_layers", Value(mtp)},
                             {"untie_embeddings_and_output_weights", Value(true)}});
    const ModelPlan last_untied = mr::run::plan_gpt_model(untied, {0, 1, 1, 2});
    CHECK(find(last_untied, "embedding.word_embeddings.weight")->shared_copy);
    CHECK_FALSE(find(last_untied, "output_layer.weight")->shared_copy);
    CHECK(last_untied.unused.empty());
  }
}

TEST_CASE("--pipeline-model-parallel-layout: each rank's layers and MTP layers as the layout places them",
          "[run][model][mtp]") {
  const int64_t h = 64;
  auto with_layout = [](const char* layout, int64_t layers, std::optional<int64_t> mtp) {
    std::map<std::string, Value> over = {{"position_embedding_type", Value(std::string("rope"))},
                                         {"num_layers", Value(layers)},
                                         {"pipeline_model_parallel_layout", Value(std::string(layout))}};
    if (mtp) over["mtp_num_layers"] = Value(*mtp);
    return gpt(over);
  };
  // "Ett|tt|m|L" on PP=4: layers 0-1, 2-3, the MTP layer with an embedding copy on rank 2, the loss on rank 3.
  const auto args = with_layout("Ett|tt|m|L", 4, 1);
  std::vector<ModelPlan> rank;
  for (int64_t r = 0; r < 4; ++r) rank.push_back(mr::run::plan_gpt_model(args, {0, 1, r, 4}));
  CHECK(rank[0].layers == std::vector<int64_t>{0, 1});
  CHECK(rank[1].layers == std::vector<int64_t>{2, 3});
  CHECK(rank[2].layers.empty());
  CHECK(rank[3].layers.empty());
  REQUIRE(find(rank[2], "mtp.layers.0.eh_proj.weight"));
  CHECK(find(rank[2], "embedding.word_embeddings.weight")->shared_copy);
  CHECK_FALSE(find(rank[2], "decoder.final_layernorm.weight"));
  CHECK_FALSE(find(rank[3], "mtp.layers.0.eh_proj.weight"));
  CHECK(find(rank[3], "decoder.final_layernorm.weight"));
  CHECK(find(rank[3], "output_layer.weight")->shared_copy);  // tied: the last stage's copy
  // Every rank together counts what one rank holds.
  const ModelPlan one = mr::run::plan_gpt_model(
      gpt({{"position_embedding_type", Value(std::string("rope"))}, {"mtp_num_layers", Value(int64_t{1})}}), {});
  int64_t sum = 0;
  for (const ModelPlan& p : rank) sum += counted(p, 0);
  CHECK(sum == counted(one, 0));
  CHECK(counted(rank[2], 0) == 12 * h * h + 13 * h + 2 * h * h + 3 * 2 * h);  // the MTP layer alone
  // PP=2 x 2 chunks: rank 0 runs layers 0 then 3-4, rank 1 layers 1-2 then 5.
  const auto chunks = with_layout("Et|tt|tt|tmL", 6, 1);
  CHECK(mr::run::plan_gpt_model(chunks, {0, 1, 0, 2}).layers == std::vector<int64_t>{0, 3, 4});
  CHECK(mr::run::plan_gpt_model(chunks, {0, 1, 1, 2}).layers == std::vector<int64_t>{1, 2, 5});
  // What TransformerConfig refuses (the init stage refuses it first), and MTP on the first of several ranks.
  using Catch::Matchers::Contains;
  CHECK_THROWS_WITH(mr::run::plan_gpt_model(with_layout("Ett|tttL", 4, std::nullopt), {0, 1, 0, 2}),
                    Contains("it has 5 decoder layers (t), --num-layers is 4"));
  CHECK_THROWS_WITH(mr::run::plan_gpt_model(with_layout("Ett|tt|tm|L", 5, 1), {0, 1, 0, 2}),
                    Contains("puts the MTP layers on the first pipeline rank"));
  CHECK_THROWS_WITH(mr::run::plan_gpt_model(with_layout("Ett|ttL", 4, std::nullopt), {0, 1, 0, 3}),
                    Contains("not a multiple of the 3 pipeline ranks"));
}

TEST_CASE("hybrid models: Mamba, attention, MLP and MoE layers by the pattern, TP shards, pipeline segments",
          "[run][model][hybrid]") {
  const int64_t h = 64;
  auto hybrid = [](const char* pattern, std::map<std::string, Value> more = {}) {
    std::map<std::string, Value> over = {{"hybrid_layer_pattern", Value(std::string(pattern))},
                                         {"num_layers", Value(int64_t{0})},
                                         {"normalization", Value(std::string("RMSNorm"))},
                                         {"add_bias_linear", Value(false)},
                                         {"position_embedding_type", Value(std::string("none"))},
                                         {"mamba_state_dim", Value(int64_t{16})},
                                         {"mamba_head_dim", Value(int64_t{16})},
                                         {"mamba_num_groups", Value(int64_t{2})}};
    for (auto& [k, x] : more) over[k] = x;
    return gpt(over);
  };
  // Mamba: d_inner 2h = 128, 8 heads of 16, 2 groups of state 16: in_proj 2 x 128 + 2 x 2 x 16 + 8 = 328 rows,
  // conv1d 128 + 64 = 192 channels of width 4 (+ bias), dt_bias / A_log / D per head, the gated norm, out_proj.
  const int64_t mamba = h + 328 * h + 192 * 4 + 192 + 3 * 8 + 128 + h * 128;
  const int64_t attention = h + 3 * h * h + h * h;  // fused norm, QKV (4 heads of 16), projection
  const int64_t mlp = h + 256 * h + h * 256;        // fused norm, fc1, fc2 (--ffn-hidden-size 256)
  const int64_t outside = 1024 * h + h + 1024 * h;  // word embeddings, final norm, output layer (untied below)
  const auto args = hybrid("M*-M", {{"untie_embeddings_and_output_weights", Value(true)}});
  const ModelPlan one = mr::run::plan_gpt_model(args, {});
  CHECK(one.layers == std::vector<int64_t>{0, 1, 2, 3});
  CHECK(counted(one, 0) == 2 * mamba + attention + mlp + outside);
  REQUIRE(find(one, "decoder.layers.0.mixer.in_proj.weight"));
  CHECK(find(one, "decoder.layers.0.mixer.in_proj.weight")->shape == std::vector<int64_t>{328, h});
  CHECK_FALSE(find(one, "decoder.layers.0.mixer.in_proj.weight")->use_muon);  // as Megatron marks it
  CHECK(find(one, "decoder.layers.0.mixer.conv1d_weight")->shape == std::vector<int64_t>{192, 1, 4});
  CHECK(find(one, "decoder.layers.1.self_attention.linear_qkv.weight"));
  CHECK_FALSE(find(one, "decoder.layers.1.mlp.linear_fc1.weight"));  // an attention layer has no MLP
  CHECK(find(one, "decoder.layers.2.mlp.linear_fc1.layer_norm_weight"));
  CHECK(find(one, "decoder.final_norm.weight"));
  // TP=2: every Mamba part halves (heads and groups split), out_proj by its input.
  const ModelPlan tp2 = mr::run::plan_gpt_model(args, {1, 2, 0, 1});
  CHECK(find(tp2, "decoder.layers.0.mixer.in_proj.weight")->shape == std::vector<int64_t>{164, h});
  CHECK(find(tp2, "decoder.layers.0.mixer.A_log")->shape == std::vector<int64_t>{4});
  CHECK(find(tp2, "decoder.layers.0.mixer.out_proj.weight")->shape == std::vector<int64_t>{h, 64});
  // Pipeline: '|' segments (segment v x PP + rank is chunk v of a rank), or an even split without them.
  const auto segs = hybrid("M|*-|M|E", {{"num_experts", Value(int64_t{4})}});
  CHECK(mr::run::plan_gpt_model(segs, {0, 1, 0, 2}).layers == std::vector<int64_t>{0, 3});
  CHECK(mr::run::plan_gpt_model(segs, {0, 1, 1, 2}).layers == std::vector<int64_t>{1, 2, 4});
  CHECK(mr::run::plan_gpt_model(hybrid("M*-M"), {0, 1, 1, 2}).layers == std::vector<int64_t>{2, 3});
  // --decoder-first/last-pipeline-num-layers split a pattern without '|' as they split a GPT decoder.
  const mr::run::HybridLayers middle = mr::run::hybrid_layers("M*-ME*-M", 1, 3, 1, 3);
  CHECK(middle.index == std::vector<int64_t>{1, 2, 3, 4});
  CHECK(middle.symbols == "*-ME");
  CHECK(mr::run::hybrid_layers("M*-ME*-M", 2, 3, 1, 3).symbols == "*-M");
  CHECK(mr::run::hybrid_layers("M*-M/*-", 0, 2, -1, 1).symbols == "M*-");
  CHECK(mr::run::hybrid_layers("M*-M/*-", 0, 2, -1, 1).mtp_pattern == "*-");
  CHECK_THROWS_WITH(mr::run::hybrid_layers("M*-M", 0, 2, 1, 1), Catch::Matchers::Contains("no middle pipeline stage"));
  // MTP depths after '/': each a stack of the MTP pattern's layers; --mtp-use-repeated-layer builds one.
  const auto mtp = hybrid("M*M-/*-/*-", {{"mtp_num_layers", Value(int64_t{2})}});
  const ModelPlan with_mtp = mr::run::plan_gpt_model(mtp, {});
  CHECK(find(with_mtp, "mtp.layers.1.mtp_model_layer.layers.1.mlp.linear_fc2.weight"));
  CHECK(counted(with_mtp, 0) == counted(mr::run::plan_gpt_model(hybrid("M*M-"), {}), 0) +
                                    2 * (attention + mlp + 2 * h * h + 3 * h));
  // A Mamba layer only in the MTP pattern gets its real sizes too.
  const ModelPlan mamba_mtp = mr::run::plan_gpt_model(hybrid("*-/M-", {{"mtp_num_layers", Value(int64_t{1})}}), {});
  REQUIRE(find(mamba_mtp, "mtp.layers.0.mtp_model_layer.layers.0.mixer.in_proj.weight"));
  CHECK(find(mamba_mtp, "mtp.layers.0.mtp_model_layer.layers.0.mixer.in_proj.weight")->shape ==
        std::vector<int64_t>{328, h});
  auto repeated = mtp;
  repeated.mtp_use_repeated_layer = true;
  CHECK_FALSE(find(mr::run::plan_gpt_model(repeated, {}), "mtp.layers.1.enorm.weight"));
  // '+': multi-latent attention with its own input norm and no latent norms (hybrid_stack_spec's IdentityOp), also
  // with --qk-layernorm; '*' gets no q/k norms there either.
  const int64_t heads = 4, qk = 8, rope = 4, v = 8, kv_lora = 16;
  const auto mla_args = hybrid("M+-M", {{"multi_latent_attention", Value(true)}, {"kv_lora_rank", Value(kv_lora)},
                                        {"qk_head_dim", Value(qk)}, {"qk_pos_emb_head_dim", Value(rope)},
                                        {"v_head_dim", Value(v)}, {"qk_layernorm", Value(true)}});
  const ModelPlan with_mla = mr::run::plan_gpt_model(mla_args, {});
  int64_t mla_layer = 0;
  for (const ParamSpec& s : with_mla.params)
    if (s.name.rfind("decoder.layers.1.", 0) == 0) mla_layer += s.numel();
  CHECK(mla_layer == h + h * heads * (qk + rope) + (kv_lora + rope) * h + heads * (qk + v) * kv_lora + h * heads * v);
  CHECK(find(with_mla, "decoder.layers.1.input_layernorm.weight"));
  CHECK_FALSE(find(with_mla, "decoder.layers.1.self_attention.linear_kv_up_proj.layer_norm_weight"));
  // --mla-down-proj-fusion: HybridStack._fuse_mla_down_proj gives every '+' layer the fused down projection with the
  // input norm in it (hybrid models are always TE), even under --transformer-impl local.
  auto fused_args = hybrid("M+-M", {{"multi_latent_attention", Value(true)}, {"kv_lora_rank", Value(kv_lora)},
                                    {"qk_head_dim", Value(qk)}, {"qk_pos_emb_head_dim", Value(rope)},
                                    {"v_head_dim", Value(v)}, {"q_lora_rank", Value(int64_t{32})},
                                    {"mla_down_proj_fusion", Value(true)},
                                    {"transformer_impl", Value(std::string("local"))}});
  const ModelPlan fused = mr::run::plan_gpt_model(fused_args, {});
  CHECK(find(fused, "decoder.layers.1.self_attention.linear_qkv_down_proj.weight")->shape ==
        std::vector<int64_t>{32 + kv_lora + rope, h});
  CHECK(find(fused, "decoder.layers.1.self_attention.linear_qkv_down_proj.layer_norm_weight"));
  CHECK_FALSE(find(fused, "decoder.layers.1.input_layernorm.weight"));
  CHECK_FALSE(find(mr::run::plan_gpt_model(hybrid("M*-M", {{"qk_layernorm", Value(true)}}), {}),
                   "decoder.layers.1.self_attention.q_layernorm.weight"));
  // 'G': a gated delta net layer (key heads 2 of 8, value heads 4 of 16, kernel 4): the fused norm, in_proj's q, k
  // (16 each), v, z (64 each), beta, alpha (4 each), conv1d over q, k, v, dt_bias and A_log per value head, the
  // output norm over one value head, out_proj; TP=2 halves every in_proj part.
  const std::map<std::string, Value> gdn = {{"linear_num_key_heads", Value(int64_t{2})},
                                            {"linear_key_head_dim", Value(int64_t{8})},
                                            {"linear_num_value_heads", Value(int64_t{4})},
                                            {"linear_value_head_dim", Value(int64_t{16})}};
  const ModelPlan with_gdn = mr::run::plan_gpt_model(hybrid("MG-M", gdn), {});
  int64_t gdn_layer = 0;
  for (const ParamSpec& s : with_gdn.params)
    if (s.name.rfind("decoder.layers.1.", 0) == 0) gdn_layer += s.numel();
  CHECK(gdn_layer == h + 168 * h + 96 * 4 + 4 + 4 + 16 + h * 64);
  const ModelPlan gdn_tp2 = mr::run::plan_gpt_model(hybrid("MG-M", gdn), {1, 2, 0, 1});
  const ParamSpec* gdn_in = find(gdn_tp2, "decoder.layers.1.self_attention.in_proj.weight");
  REQUIRE(gdn_in);
  CHECK(gdn_in->shape == std::vector<int64_t>{84, h});
  CHECK(gdn_in->split_parts == std::vector<int64_t>{16, 16, 64, 64, 4, 4});
  CHECK(find(with_gdn, "decoder.layers.1.self_attention.out_norm.weight")->shape == std::vector<int64_t>{16});
  // What the plan does not model, and Megatron's own divisibility rules, name the symbol or the flag.
  using Catch::Matchers::Contains;
  CHECK_THROWS_WITH(mr::run::plan_gpt_model(hybrid("M+"), {}), Contains("'+' (MLA) needs --multi-latent-attention"));
  CHECK_THROWS_WITH(mr::run::plan_gpt_model(hybrid("MD"), {}), Contains("'D' (DSA) needs --multi-latent-attention"));
  CHECK_THROWS_WITH(mr::run::plan_gpt_model(hybrid("MX"), {}), Contains("hybrid layer symbol 'X'"));
  CHECK_THROWS_WITH(mr::run::plan_gpt_model(hybrid("MG", {{"linear_num_key_heads", Value(int64_t{3})}}), {0, 2, 0, 1}),
                    Contains("--linear-num-key-heads (3) and --linear-num-value-heads (32) must be divisible"));
  CHECK_THROWS_WITH(mr::run::plan_gpt_model(hybrid("M*M"), {0, 1, 0, 2}), Contains("do not divide over 2 pipeline"));
  CHECK_THROWS_WITH(mr::run::plan_gpt_model(hybrid("M*", {{"mamba_num_groups", Value(int64_t{3})}}), {}),
                    Contains("divisible by --mamba-num-groups (3)"));
  CHECK_THROWS_WITH(mr::run::plan_gpt_model(hybrid("M*", {{"mamba_num_heads", Value(int64_t{1} << 62)}}), {}),
                    Contains("do not fit in 64 bits"));
  CHECK_THROWS_WITH(mr::run::plan_gpt_model(hybrid("*E"), {}), Contains("needs --num-experts"));
}

TEST_CASE("model plan: sizes beyond 64 bits and plans beyond the limits are RunErrors naming the flag", "[run][model][overflow]") {
  using mr::run::plan_gpt_model;
  using mr::run::RunError;
  const RankCoord one{};
  // An MLP weight of 4 x 2^32 by 2^32 elements: its size does not fit in 64 bits (it wrapped before).
  CHECK_THROWS_WITH(plan_gpt_model(gpt({{"hidden_size", Value(int64_t{4294967296})},
                                        {"ffn_hidden_size", Value(int64_t{17179869184})}}),
                                   one),
                    Catch::Contains("does not fit in a 64-bit integer"));
  CHECK_THROWS_WITH(plan_gpt_model(gpt({{"ffn_hidden_size", Value(int64_t{INT64_MAX})}}), one),
                    Catch::Contains("does not fit in a 64-bit integer"));
  CHECK_THROWS_WITH(plan_gpt_model(gpt({{"kv_channels", Value(int64_t{INT64_MAX})}}), one),
                    Catch::Contains("does not fit in a 64-bit integer"));
  CHECK_THROWS_WITH(plan_gpt_model(gpt({{"vocab_size", Value(int64_t{INT64_MAX})}}), one),
                    Catch::Contains("--vocab-size"));
  // More layers or experts than the plan handles: refused before anything is allocated.
  CHECK_THROWS_WITH(plan_gpt_model(gpt({{"num_layers", Value(int64_t{INT64_MAX})}}), one),
                    Catch::Contains("more than the 100000 layers"));
  CHECK_THROWS_WITH(plan_gpt_model(gpt({{"num_experts", Value(int64_t{4294967296})}}), one),
                    Catch::Contains("--num-experts 4294967296"));
  // Values the sanity stage refuses are refused here too (the plan does not rely on it).
  CHECK_THROWS_WITH(plan_gpt_model(gpt({{"num_layers", Value(int64_t{-3})}}), one), Catch::Contains("--num-layers"));
  CHECK_THROWS_WITH(plan_gpt_model(gpt({{"num_attention_heads", Value(int64_t{0})}}), one),
                    Catch::Contains("--num-attention-heads (0) must be at least 1"));
  CHECK_THROWS_WITH(mr::run::pipeline_layers(4, 0, 2, 1, INT64_MAX, -1), Catch::Contains("ask for more than the 4 layers"));
  CHECK_THROWS_AS(mr::run::pipeline_layers(4, 3, 2, 1, -1, -1), RunError);  // no pipeline rank 3 of 2
  // A first stage of 0 layers splits into any number of chunks: a huge number is refused, not looped over.
  CHECK_THROWS_WITH(mr::run::pipeline_layers(4, 0, 2, INT64_MAX, 0, -1), Catch::Contains("virtual pipeline chunks"));
  // The neighbours: a wide model at the edge of what fits plans fine.
  CHECK(plan_gpt_model(gpt({{"hidden_size", Value(int64_t{65536})}, {"num_attention_heads", Value(int64_t{64})},
                            {"kv_channels", Value(int64_t{1024})}, {"ffn_hidden_size", Value(int64_t{262144})}}),
                       one)
            .numel() > 0);
  CHECK(plan_gpt_model(gpt({{"num_layers", Value(int64_t{1000})}}), one).layers.size() == 1000);
}

TEST_CASE("options that add or rename parameters the plan does not know are refused, naming the flag",
          "[run][model]") {
  using Catch::Matchers::Contains;
  CHECK_THROWS_WITH(mr::run::plan_gpt_model(gpt({{"enable_mhc_connections", Value(true)}}), {}),
                    Contains("--enable-mhc-connections"));
  CHECK_THROWS_WITH(mr::run::plan_gpt_model(gpt({{"wide_residual_num_streams", Value(int64_t{4})}}), {}),
                    Contains("--wide-residual"));
  CHECK_THROWS_WITH(mr::run::plan_gpt_model(gpt({{"moe_single_grouped_weight", Value(true)}}), {}),
                    Contains("--moe-single-grouped-weight"));
  CHECK_THROWS_WITH(mr::run::plan_gpt_model(gpt({{"csa_compress_ratios", Value(mr::List{Value(int64_t{0})})}}), {}),
                    Contains("--csa-compress-ratios"));
}

TEST_CASE("a config of another of Megatron's model families (T5, BERT) is refused, not counted as a GPT decoder",
          "[run][model]") {
  using Catch::Matchers::Contains;
  // T5's configs give --encoder-num-layers/--decoder-num-layers (validation makes --num-layers the encoder's).
  CHECK_THROWS_WITH(mr::run::plan_gpt_model(gpt({{"decoder_num_layers", Value(int64_t{12})}}), {}),
                    Contains("--decoder-num-layers (12)") && Contains("T5"));
  CHECK_THROWS_WITH(mr::run::plan_gpt_model(gpt({{"bert_binary_head", Value(false)}}), {}),
                    Contains("--bert-no-binary-head") && Contains("BERT"));
  CHECK_NOTHROW(mr::run::plan_gpt_model(gpt({{"bert_binary_head", Value(true)}}), {}));  // the default
}

TEST_CASE("the run's optimizer state is what `params` estimates: a second moment only where the rule keeps one",
          "[run][model][memory]") {
  // One rank, fp32: FlatBuffers' state buffers (the first moment over the shard, the second packed over the
  // parameters that keep one) against estimate_memory's optimizer state, byte for byte.
  for (const mr::optim::OptimizerInfo& row : mr::optim::kOptimizers) {
    if (row.kernel == mr::optim::Kernel::None) continue;  // every row the run steps
    const std::string opt(row.name);
    for (const char* scalar : {"adam", "lion"}) {
      const mr::Args a = gpt({{"optimizer", Value(opt)}, {"muon_scalar_optimizer", Value(std::string(scalar))}});
      const ModelPlan plan = mr::run::plan_gpt_model(a, {});
      mr::run::FlatBuffers b;
      const mr::optim::OptimizerInfo info = mr::optim::optimizer_info(a.optimizer, a.muon_scalar_optimizer);
      b.set_layout(plan, info, mr::optim::DType::F32, {}, false);
      INFO("--optimizer " << opt << " --muon-scalar-optimizer " << scalar);
      CHECK(b.bytes().state == mr::run::estimate_memory(plan, a, 1, 1).optimizer_state);
      // Muon and lion: 4 B/param on their matrices (no second moment), 8 on Adam's parameters.
      const bool muon_like = opt == "muon" || opt == "dist_muon" || opt == "lion";
      if (muon_like) CHECK(b.bytes().state < 8.0 * static_cast<double>(plan.numel()));
    }
  }
  // Adam with the precision-aware optimizer: each moment in its dtype (buffer_dtypes, as the run builds them), and
  // the main params: bf16 + remainders (2 bytes), fp16 (2), fp16 params' fp32 master (4).
  auto bytes_of = [](const std::string& d) { return d == "fp32" ? 4 : d == "fp8" ? 1 : 2; };
  for (const char* m1 : {"fp32", "bf16", "fp16", "fp8"})
    for (const char* m2 : {"fp32", "bf16", "fp16", "fp8"}) {
      const bool bf16 = std::string(m1) != "fp16";
      const char* mp = std::string(m2) == "bf16" ? "fp16" : "fp32";
      const mr::Args a = gpt({{bf16 ? "bf16" : "fp16", Value(true)},
                              {"use_precision_aware_optimizer", Value(true)},
                              {"exp_avg_dtype", Value(std::string(m1))},
                              {"exp_avg_sq_dtype", Value(std::string(m2))},
                              {"main_params_dtype", Value(std::string(mp))}});
      const ModelPlan plan = mr::run::plan_gpt_model(a, {});
      mr::run::FlatBuffers b;
      b.set_layout(plan, mr::optim::optimizer_info(a.optimizer), mr::run::buffer_dtypes(a), {}, false);
      INFO("--exp-avg-dtype " << m1 << " --exp-avg-sq-dtype " << m2);
      INFO("--" << (bf16 ? "bf16" : "fp16") << " --main-params-dtype " << mp);
      const mr::run::MemoryEstimate e = mr::run::estimate_memory(plan, a, 1, 1);
      CHECK(b.bytes().state == e.optimizer_state);
      CHECK(b.bytes().main == e.main_params);
      const double n = static_cast<double>(plan.numel());
      CHECK(b.bytes().state == n * (bytes_of(m1) + bytes_of(m2)));
      CHECK(b.bytes().main == n * (bf16 || std::string(mp) == "fp16" ? 2 : 4));
    }
  // FP8 params (--fp8-param-gather) keep fp32 masters: Transformer Engine splits only bf16 params into remainders, and
  // with a recipe other than delayed Megatron keeps every master itself (no remainders at all).
  for (const char* recipe : {"delayed", "tensorwise"}) {
    const mr::Args a = gpt({{"bf16", Value(true)},
                            {"use_precision_aware_optimizer", Value(true)},
                            {"fp8", Value(std::string("hybrid"))},
                            {"fp8_recipe", Value(std::string(recipe))},
                            {"fp8_param_gather", Value(true)}});
    const ModelPlan plan = mr::run::plan_gpt_model(a, {});
    const bool delayed = std::string(recipe) == "delayed";
    CHECK(mr::run::keeps_param_remainders(a) == delayed);
    double expect = 0;
    for (const mr::run::ParamSpec& p : plan.params) {
      const bool fp8 = p.shape.size() == 2 && !p.embedding_or_output && p.name.find(".linear_") != std::string::npos;
      expect += static_cast<double>(p.numel()) * (fp8 || !delayed ? 4 : 2);
    }
    INFO("--fp8-recipe " << recipe);
    CHECK(mr::run::estimate_memory(plan, a, 1, 1).main_params == expect);
  }
  // Transformer Engine before 2.1 has no remainders (--target-te-version): fp32 masters, 4 bytes.
  const mr::Args aware = gpt({{"bf16", Value(true)}, {"use_precision_aware_optimizer", Value(true)}});
  const ModelPlan plan = mr::run::plan_gpt_model(aware, {});
  mr::TargetEnv old_te;
  old_te.te_version = "2.0.0";
  CHECK(mr::run::keeps_param_remainders(aware));
  CHECK_FALSE(mr::run::keeps_param_remainders(aware, old_te));
  CHECK(mr::run::estimate_memory(plan, aware, 1, 1).main_params == 2.0 * static_cast<double>(plan.numel()));
  CHECK(mr::run::estimate_memory(plan, aware, 1, 1, old_te).main_params == 4.0 * static_cast<double>(plan.numel()));
}
