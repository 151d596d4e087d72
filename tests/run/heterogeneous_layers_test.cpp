// The blocks of a heterogeneous layers config (run/heterogeneous_layers.h), as Megatron's AttentionConfig /
// MLPConfig / HeterogeneousTransformerConfig read them. The model plan of such a model: model_test.cpp.
#include <catch2/catch.hpp>

#include "run/heterogeneous_layers.h"
#include "run/model.h"

using mr::run::BlockPart;
using mr::run::heterogeneous_blocks;
using Catch::Contains;

TEST_CASE("ffn_mult to the MLP size: int(2 ffn_mult hidden / 3) up to a multiple of 256", "[run][heterogeneous]") {
  CHECK(mr::run::ffn_mult_to_intermediate_size(2.625, 256) == 512);    // int(448.0) -> 512
  CHECK(mr::run::ffn_mult_to_intermediate_size(1.3125, 256) == 256);   // int(224.0) -> 256
  CHECK(mr::run::ffn_mult_to_intermediate_size(5.25, 8192) == 28672);  // Llama-3-70B's 28672, already a multiple
  CHECK(mr::run::ffn_mult_to_intermediate_size(0.5, 8192) == 2816);    // int(2730.66...) = 2730 -> 2816
  CHECK(mr::run::ffn_mult_to_intermediate_size(1.0, 768) == 512);      // exactly 512: kept
  CHECK(mr::run::ffn_mult_to_intermediate_size(-1.0, 256) == 0);      // int(-170.66...) = -170, Python's % -> 0
}

TEST_CASE("heterogeneous blocks: parts, query groups and MLP sizes as Megatron's config classes read them",
          "[run][heterogeneous]") {
  const auto b = heterogeneous_blocks(R"({"block_configs": [
      {"attention": {"n_heads_in_group": 2, "no_op": false, "replace_with_linear": false}, "ffn": {"ffn_mult": 2.625}},
      {"attention": {"n_heads_in_group": null, "no_op": true}, "ffn": {"ffn_mult": 1.3125}},
      {"attention": {"n_heads_in_group": null, "replace_with_linear": true}, "ffn": {"ffn_mult": null, "no_op": true}},
      {"attention": {"num_query_groups": 4}, "mlp": {"ffn_hidden_size": 1000}},
      {"attention": {"num_query_groups": null}, "ffn": {}, "mlp": {"ffn_mult": null, "replace_with_linear": true}}]})",
                                      8, 256);
  REQUIRE(b.size() == 5);
  CHECK(b[0].attention == BlockPart::Normal);
  CHECK(b[0].num_query_groups == 4);  // 8 heads / 2 per group
  CHECK(b[0].ffn_hidden_size == 512);
  CHECK(b[1].attention == BlockPart::NoOp);
  CHECK_FALSE(b[1].num_query_groups);
  CHECK(b[1].ffn_hidden_size == 256);
  CHECK(b[2].attention == BlockPart::Linear);
  CHECK(b[2].mlp == BlockPart::NoOp);
  CHECK_FALSE(b[2].ffn_hidden_size);
  CHECK(b[3].num_query_groups == 4);  // given directly; "mlp" instead of "ffn"
  CHECK(b[3].ffn_hidden_size == 1000);
  CHECK(b[4].mlp == BlockPart::Linear);  // an empty "ffn" falls back to "mlp" (block.get("ffn") or block.get("mlp"))
}

TEST_CASE("heterogeneous blocks: what Megatron's config classes refuse, naming the block", "[run][heterogeneous]") {
  auto refused = [](const std::string& blocks, const std::string& says) {
    INFO(blocks);
    CHECK_THROWS_WITH(heterogeneous_blocks("{\"block_configs\": [" + blocks + "]}", 8, 256), Contains(says));
  };
  refused(R"({"attention": {"n_heads_in_group": 3}, "ffn": {"ffn_mult": 1}})",
          "block_configs[0]: num_attention_heads (8) must be a multiple of n_heads_in_group (3)");
  refused(R"({"attention": {"n_heads_in_group": 2, "no_op": true}, "ffn": {"ffn_mult": 1}})",
          "block_configs[0]: an attention with num_query_groups / n_heads_in_group cannot be no_op");
  refused(R"({"attention": {"n_heads_in_group": 2}, "ffn": {"ffn_mult": 1}},
             {"attention": {"n_heads_in_group": 2}, "ffn": {"ffn_mult": 1, "replace_with_linear": true}})",
          "block_configs[1]: an MLP with ffn_hidden_size / ffn_mult cannot be no_op or replace_with_linear");
  refused(R"({"attention": {}, "ffn": {"ffn_mult": 1}})",
          "block_configs[0].attention has neither 'num_query_groups' nor 'n_heads_in_group'");
  refused(R"({"attention": {"n_heads_in_group": 2}, "ffn": {}})", "block_configs[0] has no 'ffn' (or 'mlp') mapping");
  refused(R"({"attention": {"n_heads_in_group": 2}, "ffn": {"ffn_mult": "big"}})", "ffn_mult is 'big', not a number");
  refused(R"({"attention": {"n_heads_in_group": 2}, "ffn": {"ffn_hidden_size": 10.5}})", "is 10.5, not a whole number");
  refused(R"(7)", "block_configs[0] is not a mapping");
  CHECK_THROWS_WITH(heterogeneous_blocks("{\"blocks\": []}", 8, 256), Contains("has no 'block_configs' list"));
  CHECK_THROWS_WITH(heterogeneous_blocks("{", 8, 256), Contains("is not valid JSON"));
}
