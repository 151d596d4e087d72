// The validation chain as a whole: its sections in the seed's order, rule ids registered once, and the base config
// through every section with the values the sections derive.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "config/rule.h"
#include "config/validate/sections.h"
#include "support.h"

TEST_CASE("the chain's sections are listed in the seed's order", "[validate-sections]") {
  std::vector<std::string> names;
  for (const mr::Section& s : mr::validation_sections()) names.push_back(s.name);
  // parse_and_validate_args' asserts (seed 101-112), validate_args() from seed 421 to 1925 (sections.cpp gives each
  // one's lines), then the OptimizerConfig checks.
  const std::vector<std::string> expected = {
      "checkpoint-args", "ckpt-conversion-prep", "heterogeneous-config", "use-dist-ckpt", "model-parallel-sizes", "deprecated-flags",
      "cuda-graph-normalize", "input-defaults", "batch-size", "hybrid-pattern", "virtual-pipeline", "torch-fsdp2",
      "dtype-strings", "low-precision-formats", "megatron-fsdp", "params-dtype", "inference-graph-precision",
      "dataloader-defaults", "model-dimensions", "dataloader-document-masking", "sequence-lengths", "save-schedule",
      "mixed-precision-checks", "activation-recompute", "sequence-parallel", "dynamic-context-parallel",
      "variable-seq-lengths", "cuda-max-connections", "fsdp-high-priority-streams", "expert-gtp-weight-shards",
      "gtp-remat-checks", "bias-fusion", "qk-clip", "position-embedding", "moe-spec", "expert-parallel", "moe-router",
      "ckpt-format-dcp-dtensor", "varlen-dataset", "sequence-packing", "data-blend", "determinism",
      "qk-layer-scaling", "rerun-tracker", "emerging-optimizer", "gloo-process-groups", "fake-process-group",
      "checkpoint-save-load", "pp-inference", "moe-upcycling", "skip-train-rl", "local-checkpointing", "delay-wgrad",
      "fine-grained-offloading", "mtp-position-embedding", "cpu-offloading", "cuda-graph-runtime",
      "latent-projections", "optimizer.validate", "optimizer.finalize", "optimizer.validate-run",
      "optimizer.validate-model"};
  CHECK(names == expected);
}

TEST_CASE("rule ids are unique", "[validate-sections]") {
  // Every rule id is registered exactly once across all stages.
  auto rules = mr::all_rules();
  CHECK(rules.size() >= 40);
  for (const mr::Rule* r : rules) {
    INFO(r->id);
    CHECK(std::count_if(rules.begin(), rules.end(), [&](const mr::Rule* o) { return std::string(o->id) == r->id; }) ==
          1);
  }
}

TEST_CASE("base config through the whole chain: precision, data and model values", "[validate-sections]") {
  // The values dtype-strings .. model-dimensions derive survive the later sections.
  auto r = mrtest::run(mrtest::base_args(), {{"WORLD_SIZE", "1"}});
  CHECK(r.exit == 0);
  CHECK(r["params_dtype"] == mr::Value("torch.float32"));
  CHECK(r["dataloader_type"] == mr::Value("single"));
  CHECK(r["ffn_hidden_size"].as_int() == 256);
  CHECK(r["kv_channels"].as_int() == 16);
  CHECK(r["encoder_num_layers"].as_int() == 2);
  CHECK(r["encoder_seq_length"].as_int() == 128);
  CHECK(r["megatron_fsdp_main_params_dtype"] == mr::Value("torch.float32"));
}

TEST_CASE("base config through the whole chain: parallelism, fusion and MoE values", "[validate-sections]") {
  auto r = mrtest::run(mrtest::base_args());
  CHECK(r["sequence_parallel"] == mr::Value(false));
  CHECK(r["variable_seq_lengths"] == mr::Value(false));
  CHECK(r["expert_tensor_parallel_num_weight_shards"].as_int() == 1);
  CHECK(r["expert_gtp_weight_remat_size"].as_int() == 1);
  CHECK(r["add_qkv_bias"] == mr::Value(true));
  CHECK(r["apply_rope_fusion"] == mr::Value(false));
  CHECK(r["moe_router_load_balancing_type"] == mr::Value("aux_loss"));
}
