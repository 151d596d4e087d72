// The validation chain's checks of data: caller-supplied defaults and data sources, dataloader defaults, variable
// sequence lengths, varlen datasets and sequence packing, data blends.
//
// For every rule a config that triggers it next to a neighbour that passes it, and derived values worked out
// by hand from the seed (../shared/spec/arguments.py). Most cases run a stretch of the chain (validate_support.h)
// so that a later section cannot mask what is tested; a few run one section on a namespace no command line
// can produce, or the whole chain.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "config/pipeline_layout.h"
#include "config/validate/section_functions.h"
#include "validate_support.h"

using namespace mrtest;

// ---------------------------------------------------------------------------------------------------------------
// seed 590-625: input defaults, legacy split, data paths, phase transitions.

TEST_CASE("script defaults apply only to unset arguments", "[validate-data]") {
  // seed arguments.py:591-600: megatron-run passes no defaults; drive apply_input_defaults directly.
  mr::Object defaults = {{"seq_length", mr::Value(256)}, {"data_cache_path", mr::Value("/cache")}};
  auto d = direct([&](mr::Context& ctx) { mr::section::apply_input_defaults(ctx, defaults); }, mrtest::base_args());
  CHECK(d.rule.empty());
  // --seq-length 128 was given: kept, with a warning.
  CHECK(d.warned("input.default-overridden"));
  CHECK(d["seq_length"].as_int() == 128);
  // data_cache_path was unset (None): the default applies.
  CHECK(d["data_cache_path"] == mr::Value("/cache"));
  // Neighbour: a default for an unset argument alone does not warn.
  d = direct([](mr::Context& ctx) { mr::section::apply_input_defaults(ctx, {{"data_cache_path", mr::Value("/c")}}); },
             mrtest::base_args());
  CHECK_FALSE(d.warned("input.default-overridden"));
}

TEST_CASE("--data-path without --split uses the legacy split", "[validate-data]") {
  // seed arguments.py:602-606
  auto r = run(with({"--data-path", "/data/a"}), kWorld1);
  CHECK(r.warned("input.legacy-split-default"));
  CHECK(r["split"] == mr::Value("969, 30, 1"));
  r = run(with({"--data-path", "/data/a", "--split", "98,1,1"}), kWorld1);
  CHECK_FALSE(r.warned("input.legacy-split-default"));
  CHECK(r["split"] == mr::Value("98,1,1"));
}

TEST_CASE("data path sources are exclusive", "[validate-data]") {
  // seed arguments.py:608-611
  CHECK(fails_with(run(with({"--data-path", "/d", "--data-args-path", "/args"}), kWorld1),
                   "input.data-path-or-data-args-path"));
  CHECK(passes_opening(run(with({"--data-args-path", "/args"}), kWorld1)));
  // seed arguments.py:612-620
  CHECK(fails_with(run(with({"--train-data-path", "/t", "--per-split-data-args-path", "/args"}), kWorld1),
                   "input.per-split-paths-or-args-path"));
  CHECK(passes_opening(run(with({"--per-split-data-args-path", "/args"}), kWorld1)));
  CHECK(passes_opening(run(with({"--train-data-path", "/t", "--valid-data-path", "/v"}), kWorld1)));
}

TEST_CASE("--phase-transition-iterations becomes a sorted list of ints", "[validate-data]") {
  // seed arguments.py:622-625
  auto r = run(with({"--phase-transition-iterations", "30, 10,20"}), kWorld1);
  CHECK(passes_opening(r));
  CHECK(r["phase_transition_iterations"] == mr::Value(mr::List{mr::Value(10), mr::Value(20), mr::Value(30)}));
  CHECK(fails_with(run(with({"--phase-transition-iterations", "10,x"}), kWorld1),
                   "input.phase-transition-iterations-ints"));
  CHECK(fails_with(run(with({"--phase-transition-iterations", "10,"}), kWorld1),
                   "input.phase-transition-iterations-ints"));
  // Unset stays None.
  CHECK(run(mrtest::base_args(), kWorld1)["phase_transition_iterations"].is_none());
}

// ---------------------------------------------------------------------------------------------------------
// dataloader (seed 1139-1143, 1182-1186)

TEST_CASE("dataloader defaults and document masking", "[validate-data]") {
  struct Case {
    Args extra;
    const char* dest;
    mr::Value want;
  };
  const std::vector<Case> cases = {
      // seed arguments.py:1139-1140 validate_args
      {{}, "dataloader_type", "single"},
      {{"--dataloader-type", "cyclic"}, "dataloader_type", "cyclic"},
      // seed arguments.py:1182-1186 validate_args
      {{}, "create_attention_mask_in_dataloader", true},
      {{"--dataloader-inter-document-masking"}, "create_attention_mask_in_dataloader", false},
      {{"--no-create-attention-mask-in-dataloader"}, "create_attention_mask_in_dataloader", false},
  };
  for (const auto& c : cases) {
    INFO(c.dest << " with " << ::Catch::Detail::stringify(c.extra));
    auto r = upto_mixed_precision_with(c.extra);
    REQUIRE(r.exit == 0);
    CHECK(r[c.dest] == c.want);
  }
}

TEST_CASE("dataloader.builder-threads-positive", "[validate-data]") {
  auto bad = upto_mixed_precision_with({"--num-dataset-builder-threads", "0"});
  CHECK(bad.exit == 1);
  CHECK(bad.rule == "dataloader.builder-threads-positive");
  CHECK(upto_mixed_precision_with({"--num-dataset-builder-threads", "1"}).exit == 0);
}

// ---------------------------------------------------------------------------------------------------------
// variable_seq_lengths and the SFT mock dataset (seed arguments.py:1301-1312 validate_args)

TEST_CASE("variable_seq_lengths and the default SFT mock-dataset config", "[validate-data]") {
  // seed arguments.py:1301
  auto r = upto_sequence_packing(mrtest::base_args());
  CHECK(r["variable_seq_lengths"] == mr::Value(false));
  CHECK(r["sft_mock_dataset_config_json"].is_none());
  // seed arguments.py:1302-1312: min = seq // 2, max = seq, mean = seq // 4 * 3 (130 // 4 * 3 = 96, not 97).
  r = upto_sequence_packing(mrtest::with({"--sft", "--seq-length", "130", "--max-position-embeddings", "256"}));
  CHECK(r["sft_mock_dataset_config_json"] ==
        mr::Value("{\"mode\": \"distribution\", \"type\": \"lognormal\", \"min_seq_len\": 65, \"max_seq_len\": 130, "
                  "\"mean_seq_len\": 96, \"lognormal_sigma\": 1.1}"));
  r = upto_sequence_packing(mrtest::with({"--sft"}));
  CHECK(r["sft_mock_dataset_config_json"] ==
        mr::Value("{\"mode\": \"distribution\", \"type\": \"lognormal\", \"min_seq_len\": 64, \"max_seq_len\": 128, "
                  "\"mean_seq_len\": 96, \"lognormal_sigma\": 1.1}"));
  // Given explicitly: kept.
  r = upto_sequence_packing(
      mrtest::with({"--sft", "--sft-mock-dataset-config-json", "{\"mode\":\"file\",\"path\":\"/x\"}"}));
  CHECK(r["sft_mock_dataset_config_json"] == mr::Value("{\"mode\":\"file\",\"path\":\"/x\"}"));
  // Without --sft: untouched.
  r = upto_sequence_packing(mrtest::base_args());
  CHECK(r["sft_mock_dataset_config_json"].is_none());
}

// ---------------------------------------------------------------------------------------------------------
// --use-varlen-dataset and sequence packing (seed arguments.py:1527-1595 validate_args)

TEST_CASE("--use-varlen-dataset selection", "[validate-data]") {
  // seed arguments.py:1532
  auto r = upto_sequence_packing(mrtest::with({"--use-varlen-dataset", "--sft", "--calculate-per-token-loss"}));
  CHECK(r.exit == 1);
  CHECK(r.rule == "varlen.sft-exclusive");
  // seed arguments.py:1552-1555, 1570-1571: dp_balanced picked, sequence lengths vary.
  r = upto_sequence_packing(mrtest::with({"--use-varlen-dataset", "--calculate-per-token-loss"}));
  CHECK(r.exit == 0);
  CHECK(r["sequence_packing_scheduler"] == mr::Value("dp_balanced"));
  CHECK(r["variable_seq_lengths"] == mr::Value(true));
  // with dynamic CP the dynamic section (seed 1276) already picked default_dynamic_cp
  r = upto_sequence_packing(
      mrtest::with({"--use-varlen-dataset", "--calculate-per-token-loss", "--dynamic-context-parallel"}));
  CHECK(r.exit == 0);
  CHECK(r["sequence_packing_scheduler"] == mr::Value("default_dynamic_cp"));
  // seed arguments.py:1537
  r = upto_sequence_packing(real_data_args() + std::vector<std::string>{"--use-varlen-dataset",
                                                                        "--varlen-sbhd-validation",
                                                                        "--sequence-packing-scheduler", "dp_balanced",
                                                                        "--calculate-per-token-loss"});
  CHECK(r.rule == "varlen.sbhd-without-scheduler");
  // seed arguments.py:1543
  r = upto_sequence_packing(mrtest::with({"--use-varlen-dataset", "--varlen-sbhd-validation"}));
  CHECK(r.rule == "varlen.sbhd-without-mock-data");
  // Neighbour: SBHD validation on real data, no scheduler picked, lengths fixed.
  r = upto_sequence_packing(real_data_args() +
                            std::vector<std::string>{"--use-varlen-dataset", "--varlen-sbhd-validation"});
  CHECK(r.exit == 0);
  CHECK(r["sequence_packing_scheduler"].is_none());
  CHECK(r["variable_seq_lengths"] == mr::Value(false));
}

TEST_CASE("sequence-packing scheduler checks", "[validate-data]") {
  // seed arguments.py:1562-1569
  auto r = upto_sequence_packing(
      mrtest::with({"--sequence-packing-scheduler", "default_dynamic_cp", "--calculate-per-token-loss"}));
  CHECK(r.exit == 1);
  CHECK(r.rule == "sequence-packing.dynamic-cp-scheduler");
  // seed arguments.py:1577
  r = upto_sequence_packing(mrtest::with({"--sequence-packing-scheduler", "dp_balanced"}));
  CHECK(r.rule == "sequence-packing.per-token-loss");
  r = upto_sequence_packing(
      mrtest::with({"--sequence-packing-scheduler", "dp_balanced", "--calculate-per-token-loss"}));
  CHECK(r.exit == 0);
  CHECK(r["variable_seq_lengths"] == mr::Value(true));
}

TEST_CASE("packed-sequence buffer must hold --seq-length", "[validate-data]") {
  // seed arguments.py:1580-1587: total CP ranks (x DP for default_dynamic_cp) x max_seqlen >= seq_length (128).
  struct Case {
    std::vector<std::string> extra;
    const char* world;
    bool ok;
  };
  const Case cases[] = {
      {{"--sequence-packing-scheduler", "dp_balanced", "--max-seqlen-per-dp-cp-rank", "128"}, "1", true},
      {{"--sequence-packing-scheduler", "dp_balanced", "--max-seqlen-per-dp-cp-rank", "127"}, "1", false},
      // dp_balanced does not count DP ranks: 1 x 64 < 128
      {{"--sequence-packing-scheduler", "dp_balanced", "--max-seqlen-per-dp-cp-rank", "64"}, "2", false},
      // default_dynamic_cp does: cp 1 x dp 2 x 64 = 128
      {{"--dynamic-context-parallel", "--max-seqlen-per-dp-cp-rank", "64"}, "2", true},
      {{"--dynamic-context-parallel", "--max-seqlen-per-dp-cp-rank", "63"}, "2", false},
      // context parallelism counts for both: cp 2 x 64 = 128
      {{"--sequence-packing-scheduler", "dp_balanced", "--max-seqlen-per-dp-cp-rank", "64", "--context-parallel-size",
        "2"},
       "2", true},
  };
  for (const auto& c : cases) {
    auto r = upto_sequence_packing(mrtest::with(c.extra + std::vector<std::string>{"--calculate-per-token-loss"}),
                   {{"WORLD_SIZE", c.world}, {"CUDA_DEVICE_MAX_CONNECTIONS", "1"}});
    INFO(r.message);
    if (c.ok) {
      CHECK(r.exit == 0);
    } else {
      CHECK(r.exit == 1);
      CHECK(r.rule == "sequence-packing.buffer-size");
    }
  }
}

TEST_CASE("scheduler CUDA graphs need varlen samples, micro-batch 1 and a fixed batch", "[validate-data]") {
  const std::vector<std::string> graphs = {"--sequence-packing-scheduler", "dp_balanced", "--calculate-per-token-loss",
                                           "--cuda-graph-impl", "transformer_engine"};
  // seed arguments.py:1589
  auto r = upto_sequence_packing(mrtest::with(graphs + std::vector<std::string>{"--micro-batch-size", "1"}));
  CHECK(r.rule == "sequence-packing.cuda-graph-varlen-mbs1");
  r = upto_sequence_packing(mrtest::with(graphs + std::vector<std::string>{"--use-varlen-dataset"}));  // micro-batch 2
  CHECK(r.rule == "sequence-packing.cuda-graph-varlen-mbs1");
  r = upto_sequence_packing(
      mrtest::with(graphs + std::vector<std::string>{"--use-varlen-dataset", "--micro-batch-size", "1"}));
  CHECK(r.rule != "sequence-packing.cuda-graph-varlen-mbs1");
  CHECK(r.rule != "sequence-packing.cuda-graph-fixed-batch");
  // Not transformer_engine graphs: no requirement.
  CHECK(
      upto_sequence_packing(mrtest::with({"--sequence-packing-scheduler", "dp_balanced", "--calculate-per-token-loss"}))
          .exit == 0);
  // seed arguments.py:1593 (a schedule excludes --global-batch-size, seed 632)
  std::vector<std::string> no_gbs;
  for (const auto& w : mrtest::base_args()) no_gbs.push_back(w);
  no_gbs.erase(std::find(no_gbs.begin(), no_gbs.end(), "--global-batch-size"),
               std::find(no_gbs.begin(), no_gbs.end(), "--global-batch-size") + 2);
  r = upto_sequence_packing(no_gbs + graphs +
            std::vector<std::string>{"--use-varlen-dataset", "--micro-batch-size", "1", "--step-batch-size-schedule",
                                     "1:4,100:8"});
  CHECK(r.rule == "sequence-packing.cuda-graph-fixed-batch");
  CHECK(upto_sequence_packing(no_gbs + graphs +
                              std::vector<std::string>{"--use-varlen-dataset", "--micro-batch-size", "1"})
            .exit == 0);
  // The same on the section alone.
  CHECK(run_section(&mr::section::sequence_packing,
                    {{"sequence_packing_scheduler", "dp_balanced"},
                     {"calculate_per_token_loss", true},
                     {"cuda_graph_impl", "transformer_engine"},
                     {"use_varlen_dataset", true},
                     {"micro_batch_size", 1},
                     {"step_batch_size_schedule", "1:4,100:8"}}) == "sequence-packing.cuda-graph-fixed-batch");
  CHECK(run_section(&mr::section::sequence_packing, {{"sequence_packing_scheduler", "dp_balanced"},
                                                    {"calculate_per_token_loss", true},
                                                    {"cuda_graph_impl", "transformer_engine"},
                                                    {"use_varlen_dataset", true},
                                                    {"micro_batch_size", 1}}) == "");
}

// ---------------------------------------------------------------------------------------------------------------
// seed 1597-1625: data blend, FIM, TE cross-entropy fusion

TEST_CASE("data blend: a single data source", "[validate-data]") {
  fails(from_data_blend_with({"--data-path", "/d/a"}), "data-blend.single-source");  // mock + data-path
  fails(from_data_blend_with({"--test-data-path", "/d/t"}), "data-blend.single-source");
  fails(from_data_blend(plus(without("--mock-data"), {"--data-path", "/d/a", "--train-data-path", "/d/t"})),
        "data-blend.single-source");
  passes(from_data_blend_with({}));  // mock data only
  passes(from_data_blend(plus(without("--mock-data"), {"--data-path", "/d/a"})));
  passes(from_data_blend(plus(without("--mock-data"), {"--train-data-path", "/d/t", "--valid-data-path", "/d/v"})));
  passes(from_data_blend(without("--mock-data")));  // no data source at all is fine
}

TEST_CASE("data blend: FIM dataset arguments", "[validate-data]") {
  const Args real = plus(without("--mock-data"), {"--data-path", "/d/a", "--fim-data"});
  fails(from_data_blend_with({"--fim-data"}), "data-blend.fim-no-mock-data");
  passes(from_data_blend(real));
  fails(from_data_blend(plus(real, {"--fim-rate", "0"})), "data-blend.fim-rate-required");
  passes(from_data_blend(plus(real, {"--fim-rate", "0.1"})));
  fails(from_data_blend(plus(real, {"--fim-spm-rate", "0.0"})), "data-blend.fim-spm-rate-required");
  passes(from_data_blend(plus(real, {"--fim-spm-rate", "0.9"})));
  // A token cannot be None from the command line (type str, default ""); set it on the namespace.
  fails(from_data_blend(real, {}, nullptr, [](mr::Namespace& ns) { ns.derive("fim_pad_token", mr::Value()); }),
        "data-blend.fim-tokens-required");
  passes(from_data_blend(plus(real, {"--fim-pad-token", ""})));
  // Without --fim-data none of this is checked.
  passes(from_data_blend_with({"--fim-rate", "0"}));
}

TEST_CASE("data blend: TE cross-entropy fusion needs TE 2.19", "[validate-data]") {
  const Args te_fusion = {"--cross-entropy-loss-fusion", "--cross-entropy-fusion-impl", "te"};
  auto old = te("2.18.9"), ok = te("2.19.0");
  fails(from_data_blend_with(te_fusion, {}, &old), "data-blend.te-cross-entropy-fusion-version");
  passes(from_data_blend_with(te_fusion, {}, &ok));
  passes(from_data_blend_with(te_fusion));  // target TE 2.20.2
  passes(from_data_blend_with({"--cross-entropy-loss-fusion", "--cross-entropy-fusion-impl", "native"}, {}, &old));
  passes(from_data_blend_with({"--cross-entropy-fusion-impl", "te"}, {}, &old));
}
