// The MoE block of the model plan (run/model_moe.cpp): the experts a rank holds over EP and expert TP, the
// expert parameter count, latent MoE's projections.
#include <catch2/catch.hpp>

#include <map>
#include <optional>
#include <string>

#include "config/value.h"
#include "run/model.h"
#include "model_support.h"

using mr::Value;
using mr::run::ModelPlan;
using mr::run::ParamSpec;
using mrtest::counted;
using mrtest::find;
using mrtest::gpt;

TEST_CASE("latent MoE: the routed experts in the latent space, two replicated projections per MoE layer",
          "[run][model][moe]") {
  // Megatron's theoretical_memory_usage: routed experts 2 x latent x moe_ffn x experts (no biases), plus
  // 2 x h x latent for the projections.
  const int64_t h = 64, latent = 16, moe_ffn = 32, experts = 4;
  std::map<std::string, Value> o = {{"num_experts", Value(experts)}, {"moe_ffn_hidden_size", Value(moe_ffn)},
                                    {"add_bias_linear", Value(false)}, {"normalization", Value(std::string("RMSNorm"))}};
  const ModelPlan full = mr::run::plan_gpt_model(gpt(o), {});
  o["moe_latent_size"] = Value(latent);
  const ModelPlan lat = mr::run::plan_gpt_model(gpt(o), {});
  const int64_t per_layer_change = 2 * moe_ffn * experts * (latent - h) + 2 * h * latent;
  CHECK(counted(lat, 0) == counted(full, 0) + 4 * per_layer_change);  // 4 MoE layers
  CHECK(find(lat, "decoder.layers.0.mlp.experts.local_experts.0.linear_fc1.weight")->shape ==
        std::vector<int64_t>{moe_ffn, latent});
  CHECK(find(lat, "decoder.layers.0.mlp.fc2_latent_proj.weight")->shape == std::vector<int64_t>{h, latent});
  CHECK(find(lat, "decoder.layers.0.mlp.router.weight")->shape == std::vector<int64_t>{experts, h});
  CHECK(lat.expert_numel_total == 4 * experts * 2 * moe_ffn * latent);
  // TP=2: the projections are replicated.
  CHECK(find(mr::run::plan_gpt_model(gpt(o), {1, 2, 0, 1}), "decoder.layers.0.mlp.fc1_latent_proj.weight")->tp_duplicate);
}

TEST_CASE("MoE: Mixtral 8x7B's parameter count, experts split over EP and expert TP", "[run][model][moe]") {
  // 32 layers, h 4096, 32 heads in 8 query groups, SwiGLU experts of 14336, 8 experts in every layer, RMSNorm,
  // no biases, rotary positions, untied output, vocabulary 32000: 46,702,792,704 parameters.
  auto mixtral = [](std::map<std::string, Value> more = {}) {
    std::map<std::string, Value> o = {{"num_layers", Value(int64_t{32})},
                                      {"hidden_size", Value(int64_t{4096})},
                                      {"num_attention_heads", Value(int64_t{32})},
                                      {"kv_channels", Value(int64_t{128})},
                                      {"group_query_attention", Value(true)},
                                      {"num_query_groups", Value(int64_t{8})},
                                      {"ffn_hidden_size", Value(int64_t{14336})},
                                      {"swiglu", Value(true)},
                                      {"normalization", Value(std::string("RMSNorm"))},
                                      {"add_bias_linear", Value(false)},
                                      {"position_embedding_type", Value(std::string("rope"))},
                                      {"untie_embeddings_and_output_weights", Value(true)},
                                      {"vocab_size", Value(int64_t{32000})},
                                      {"num_experts", Value(int64_t{8})},
                                      {"moe_layer_freq", Value(int64_t{1})},
                                      {"moe_grouped_gemm", Value(true)}};
    for (auto& [k, x] : more) o[k] = x;
    return gpt(o);
  };
  ModelPlan whole = mr::run::plan_gpt_model(mixtral(), {});
  CHECK(whole.numel() == 46702792704);
  CHECK(whole.has_experts());
  const int64_t expert_part = int64_t{32} * 8 * 3 * 14336 * 4096;
  CHECK(whole.expert_numel_total == expert_part);
  REQUIRE(find(whole, "decoder.layers.0.mlp.experts.linear_fc1.weight7"));
  CHECK(find(whole, "decoder.layers.0.mlp.experts.linear_fc1.weight7")->shape == std::vector<int64_t>{2 * 14336, 4096});
  CHECK(find(whole, "decoder.layers.0.mlp.router.weight")->shape == std::vector<int64_t>{8, 4096});
  CHECK(find(whole, "decoder.layers.0.pre_mlp_layernorm.weight"));
  CHECK_FALSE(find(whole, "decoder.layers.0.mlp.linear_fc1.weight"));
  // EP 8 x expert TP 2 (TP 2, which validation gives --expert-tensor-parallel-size): one expert per rank, halved.
  ModelPlan part = mr::run::plan_gpt_model(mixtral({{"tensor_model_parallel_size", Value(int64_t{2})}}),
                                           {0, 2, 0, 1, 8, 0, 2});
  CHECK(find(part, "decoder.layers.0.mlp.experts.linear_fc1.weight0")->shape == std::vector<int64_t>{14336, 4096});
  CHECK_FALSE(find(part, "decoder.layers.0.mlp.experts.linear_fc1.weight1"));
  CHECK(find(part, "decoder.layers.0.mlp.experts.linear_fc2.weight0")->split_dim == 1);
  CHECK(part.expert_numel_total == expert_part);
  // Per-expert names without grouped GEMM; a layer pattern; shared experts with a gate.
  ModelPlan seq = mr::run::plan_gpt_model(
      mixtral({{"moe_grouped_gemm", Value(false)},
               {"moe_layer_freq", Value(int64_t{2})},
               {"moe_shared_expert_intermediate_size", Value(int64_t{1024})},
               {"moe_shared_expert_gate", Value(true)}}),
      {});
  CHECK(find(seq, "decoder.layers.0.mlp.experts.local_experts.3.linear_fc2.weight"));
  CHECK(find(seq, "decoder.layers.1.mlp.linear_fc1.weight"));  // odd layers are dense
  CHECK(find(seq, "decoder.layers.2.mlp.shared_experts.linear_fc1.weight")->shape == std::vector<int64_t>{2048, 4096});
  CHECK(find(seq, "decoder.layers.2.mlp.shared_experts.gate_weight")->shape == std::vector<int64_t>{1, 4096});
  CHECK_THROWS_WITH(mr::run::plan_gpt_model(mixtral(), {0, 1, 0, 1, 3, 0, 1}), Catch::Contains("--expert-model-parallel-size"));
}
