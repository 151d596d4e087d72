// The validation chain's checks of the model: heterogeneous configs, hybrid layer patterns and MTP, model dimensions
// and sequence lengths, position embeddings, bias fusion, QK-clip and QK layer scaling, latent projections.
//
// For every rule a config that triggers it next to a neighbour that passes it, and derived values worked out
// by hand from the seed (../shared/spec/arguments.py). Most cases run a stretch of the chain (validate_support.h)
// so that a later section cannot mask what is tested; a few run one section on a namespace no command line
// can produce, or the whole chain.
#include <catch2/catch.hpp>

#include <unistd.h>

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
// seed 195-267: validate_model_config_args_from_heterogeneous_config.

namespace {

std::vector<std::string> hetero(const std::string& json, std::vector<std::string> extra = {}) {
  auto a = with(kHeteroFlags);
  a.push_back("--heterogeneous-layers-config-encoded-json");
  a.push_back(json);
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}
std::string replace(std::string s, const std::string& from, const std::string& to) {
  auto at = s.find(from);
  REQUIRE(at != std::string::npos);
  return s.replace(at, from.size(), to);
}
}  // namespace

TEST_CASE("heterogeneous config that agrees with the flags passes", "[validate-model]") {
  // seed arguments.py:240-255: every implied argument equals the command line.
  auto r = run(hetero(kHeteroJson), kWorld1);
  CHECK(passes_opening(r));
  // Python equality: rope_theta 10000.0 (float) equals --rotary-base 10000 (int).
  r = run(hetero(replace(kHeteroJson, "\"rope_theta\": 10000", "\"rope_theta\": 10000.0")), kWorld1);
  CHECK(passes_opening(r));
  // Without any heterogeneous config the function returns at once (seed arguments.py:217-221).
  r = run(mrtest::base_args(), kWorld1);
  CHECK(r.exit == 0);
  CHECK(r["heterogeneous_layers_config_encoded_json"].is_none());
}

TEST_CASE("heterogeneous config is read from --heterogeneous-layers-config-path", "[validate-model]") {
  const std::string name = "mr_part_a_hetero_test." + std::to_string(getpid()) + ".json";  // two runs at once
  std::string path = (std::filesystem::temp_directory_path() / name).string();
  {
    std::ofstream out(path);
    out << kHeteroJson;
  }
  auto a = with(kHeteroFlags);
  a.insert(a.end(), {"--heterogeneous-layers-config-path", path});
  auto r = run(a, kWorld1);
  CHECK(passes_opening(r));
  // seed arguments.py:224: the file's text is stored as the encoded JSON.
  CHECK(r["heterogeneous_layers_config_encoded_json"] == mr::Value(std::string(kHeteroJson)));
  std::remove(path.c_str());

  // A missing file fails (Path.read_text raises).
  a = with(kHeteroFlags);
  a.insert(a.end(), {"--heterogeneous-layers-config-path", path + ".missing"});
  CHECK(fails_with(run(a, kWorld1), "heterogeneous.config-unreadable"));
}

TEST_CASE("heterogeneous config must be well-formed JSON", "[validate-model]") {
  // seed arguments.py:228 (json.loads) and the attribute/key look-ups of seed 230-255.
  CHECK(fails_with(run(hetero("{not json"), kWorld1), "heterogeneous.config-unreadable"));
  CHECK(fails_with(run(hetero("[1, 2]"), kWorld1), "heterogeneous.config-unreadable"));
  CHECK(fails_with(run(hetero(replace(kHeteroJson, "\"rope_theta\": 10000,", "")), kWorld1),
                   "heterogeneous.config-unreadable"));
  CHECK(fails_with(run(hetero(replace(kHeteroJson, "{\"factor\": 8.0}", "null")), kWorld1),
                   "heterogeneous.config-unreadable"));
  // No block sets n_heads_in_group: n_kv_heads_in_group[0] raises IndexError (seed arguments.py:254).
  CHECK(fails_with(run(hetero(replace(kHeteroJson, "\"n_heads_in_group\": 2", "\"n_heads_in_group\": null")),
                       kWorld1),
                   "heterogeneous.config-unreadable"));
  // n_heads_in_group 0: ZeroDivisionError.
  CHECK(fails_with(run(hetero(replace(kHeteroJson, "\"n_heads_in_group\": 2", "\"n_heads_in_group\": 0")),
                       kWorld1),
                   "heterogeneous.config-unreadable"));
}

TEST_CASE("heterogeneous config must use silu", "[validate-model]") {
  // seed arguments.py:230 validate_model_config_args_from_heterogeneous_config
  auto r = run(hetero(replace(kHeteroJson, "\"silu\"", "\"gelu\"")), kWorld1);
  CHECK(fails_with(r, "heterogeneous.hidden-act-silu"));
  CHECK(passes_opening(run(hetero(kHeteroJson), kWorld1)));
}

TEST_CASE("heterogeneous config blocks agree on n_heads_in_group", "[validate-model]") {
  // seed arguments.py:234-238
  std::string mixed = replace(kHeteroJson, "\"n_heads_in_group\": null", "\"n_heads_in_group\": 4");
  CHECK(fails_with(run(hetero(mixed), kWorld1), "heterogeneous.uniform-heads-in-group"));
  std::string same = replace(kHeteroJson, "\"n_heads_in_group\": null", "\"n_heads_in_group\": 2");
  CHECK(passes_opening(run(hetero(same), kWorld1)));
}

TEST_CASE("flags must agree with the heterogeneous config", "[validate-model]") {
  // seed arguments.py:257-267: any differing argument is reported.
  auto r = run(hetero(replace(kHeteroJson, "\"num_hidden_layers\": 2", "\"num_hidden_layers\": 4")), kWorld1);
  CHECK(fails_with(r, "heterogeneous.args-match-config"));
  CHECK(r.message.find("--num-layers") != std::string::npos);
  // tie_word_embeddings true implies tied embeddings, but --untie-embeddings-and-output-weights is given.
  r = run(hetero(replace(kHeteroJson, "\"tie_word_embeddings\": false", "\"tie_word_embeddings\": true")), kWorld1);
  CHECK(fails_with(r, "heterogeneous.args-match-config"));
  // num_query_groups = num_attention_heads // n_heads_in_group = 4 // 2 = 2; --num-query-groups 1 disagrees.
  r = run(hetero(kHeteroJson, {"--num-query-groups", "1"}), kWorld1);
  CHECK(fails_with(r, "heterogeneous.args-match-config"));
  // Missing --swiglu (default False) disagrees with the implied True.
  auto a = hetero(kHeteroJson);
  a.erase(std::find(a.begin(), a.end(), "--swiglu"));
  CHECK(fails_with(run(a, kWorld1), "heterogeneous.args-match-config"));
  CHECK(passes_opening(run(hetero(kHeteroJson), kWorld1)));
}

// ---------------------------------------------------------------------------------------------------------------
// Hybrid layer pattern (seed 655-812)

TEST_CASE("hybrid-pattern: deprecated --hybrid-override-pattern", "[validate-model]") {
  // seed arguments.py:660
  auto r = mrtest::run(mrtest::with({"--hybrid-override-pattern", "M*", "--hybrid-layer-pattern", "M*"}), kWorld1);
  CHECK(r.exit == 1);
  CHECK(r.rule == "hybrid-pattern.override-and-layer-pattern");

  // seed arguments.py:664-668: warns and becomes --hybrid-layer-pattern
  r = mrtest::run(mrtest::with({"--hybrid-override-pattern", "M*M*"}), kWorld1);
  CHECK(r.exit == 0);
  CHECK(r.warned("hybrid-pattern.override-pattern-deprecated"));
  CHECK(r["hybrid_layer_pattern"].as_str() == "M*M*");
  CHECK(r["num_layers"].as_int() == 4);

  r = mrtest::run(mrtest::with({"--hybrid-layer-pattern", "M*"}), kWorld1);
  CHECK(r.exit == 0);
  CHECK_FALSE(r.warned("hybrid-pattern.override-pattern-deprecated"));

  // warn_rank_0(..., args.rank): only rank 0 warns; the value is converted on every rank.
  r = mrtest::run(mrtest::with({"--hybrid-override-pattern", "M*M*"}), {{"WORLD_SIZE", "2"}, {"RANK", "1"}});
  CHECK_BATCH_OR_LAYOUT_PASSES(r);
  CHECK_FALSE(r.warned("hybrid-pattern.override-pattern-deprecated"));
  CHECK_FALSE(r.warned("hybrid-pattern.num-layers-overridden"));
  CHECK(r["hybrid_layer_pattern"].as_str() == "M*M*");
  CHECK(r["num_layers"].as_int() == 4);
}

TEST_CASE("hybrid-pattern: deprecated --mtp-hybrid-override-pattern and its conversion", "[validate-model]") {
  // seed arguments.py:672 (warning)
  auto r = mrtest::run(mrtest::with({"--hybrid-layer-pattern", "M*M*", "--mtp-hybrid-override-pattern", "MM",
                                     "--mtp-num-layers", "2", "--position-embedding-type", "rope"}),
                       kWorld1);
  CHECK(r.exit == 0);
  CHECK(r.warned("hybrid-pattern.mtp-override-pattern-deprecated"));
  r = mrtest::run(mrtest::with({"--hybrid-layer-pattern", "M*M*"}), kWorld1);
  CHECK_FALSE(r.warned("hybrid-pattern.mtp-override-pattern-deprecated"));

  struct Case {
    Args extra;
    Value pattern, mtp_override, mtp_num_layers;
    int64_t num_layers;
  };
  const std::vector<Case> cases = {
      // seed arguments.py:689-699: main + '/' + '/'.join([mtp] * mtp_num_layers); legacy pattern cleared
      {{"--hybrid-layer-pattern", "M*M*", "--mtp-hybrid-override-pattern", "MM", "--mtp-num-layers", "2"},
       Value("M*M*/MM/MM"),
       Value(),
       Value(2),
       4},
      // no main pattern: '' + '/MM'
      {{"--mtp-hybrid-override-pattern", "MM", "--mtp-num-layers", "1"}, Value("/MM"), Value(), Value(1), 0},
      // the pattern already has '/': no conversion, the legacy pattern stays, depth count from the pattern
      {{"--hybrid-layer-pattern", "M*/M", "--mtp-hybrid-override-pattern", "MM", "--mtp-num-layers", "1"},
       Value("M*/M"),
       Value("MM"),
       Value(1),
       2},
      // --mtp-num-layers 0: no conversion (seed arguments.py:692 requires > 0)
      {{"--hybrid-layer-pattern", "M*", "--mtp-hybrid-override-pattern", "MM", "--mtp-num-layers", "0"},
       Value("M*"),
       Value("MM"),
       Value(0),
       2},
      // no --mtp-num-layers: no conversion
      {{"--hybrid-layer-pattern", "M*", "--mtp-hybrid-override-pattern", "MM"}, Value("M*"), Value("MM"), Value(), 2},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    CAPTURE(i);
    Args extra = cases[i].extra;
    extra.insert(extra.end(), {"--position-embedding-type", "rope"});
    r = mrtest::run(mrtest::with(extra), kWorld1);
    CHECK_BATCH_OR_LAYOUT_PASSES(r);
    CHECK(r["hybrid_layer_pattern"] == cases[i].pattern);
    CHECK(r["mtp_hybrid_override_pattern"] == cases[i].mtp_override);
    CHECK(r["mtp_num_layers"] == cases[i].mtp_num_layers);
    CHECK(r["num_layers"].as_int() == cases[i].num_layers);
  }

  // A legacy pattern repeated beyond what can be held is refused (Python would run out of memory).
  r = mrtest::run(mrtest::with({"--mtp-hybrid-override-pattern", "MM", "--mtp-num-layers", "100000000"}), kWorld1);
  CHECK(r.exit == 1);
  CHECK(r.rule == "hybrid-pattern.too-large");
}

TEST_CASE("hybrid-pattern: layer symbols", "[validate-model]") {
  // hybrid_layer_allocation.py _validate_pattern via get_hybrid_total_layer_count (seed arguments.py:704)
  auto r = mrtest::run(mrtest::with({"--hybrid-layer-pattern", "MX"}), kWorld1);
  CHECK(r.exit == 1);
  CHECK(r.rule == "hybrid-pattern.invalid-symbol");
  // '|' is not allowed in the MTP part (parse_hybrid_pattern, seed arguments.py:780)
  r = mrtest::run(mrtest::with({"--hybrid-layer-pattern", "MM/M|M", "--position-embedding-type", "rope"}), kWorld1);
  CHECK(r.rule == "hybrid-pattern.invalid-symbol");
  r = mrtest::run(mrtest::with({"--hybrid-layer-pattern", "MG*D"}), kWorld1);
  CHECK(r.rule == "hybrid-pattern.attention-with-mla");  // checked after the symbols, which are all valid

  r = mrtest::run(mrtest::with({"--hybrid-layer-pattern", "MG*-E"}), kWorld1);
  CHECK_BATCH_OR_LAYOUT_PASSES(r);
  CHECK(r["num_layers"].as_int() == 5);

  // Standard attention cannot be mixed with MLA/DSA in the main or in the MTP pattern.
  r = mrtest::run(mrtest::with({"--hybrid-layer-pattern", "M*+"}), kWorld1);
  CHECK(r.exit == 1);
  CHECK(r.rule == "hybrid-pattern.attention-with-mla");
  r = mrtest::run(mrtest::with({"--hybrid-layer-pattern", "M*/*+", "--position-embedding-type", "rope"}), kWorld1);
  CHECK(r.rule == "hybrid-pattern.attention-with-mla");
  // ... but each pattern is checked on its own.
  r = mrtest::run(mrtest::with({"--hybrid-layer-pattern", "M*/M+", "--position-embedding-type", "rope"}), kWorld1);
  CHECK_BATCH_OR_LAYOUT_PASSES(r);
  r = mrtest::run(mrtest::with({"--hybrid-layer-pattern", "M+D"}), kWorld1);
  CHECK_BATCH_OR_LAYOUT_PASSES(r);
}

TEST_CASE("hybrid-pattern: MTP depths must repeat one pattern", "[validate-model]") {
  auto r =
      mrtest::run(mrtest::with({"--hybrid-layer-pattern", "M*/MM/M*", "--position-embedding-type", "rope"}), kWorld1);
  CHECK(r.exit == 1);
  CHECK(r.rule == "hybrid-pattern.mtp-patterns-differ");
  // A trailing empty depth differs from a non-empty one.
  r = mrtest::run(mrtest::with({"--hybrid-layer-pattern", "M*/MM/", "--position-embedding-type", "rope"}), kWorld1);
  CHECK(r.rule == "hybrid-pattern.mtp-patterns-differ");

  r = mrtest::run(mrtest::with({"--hybrid-layer-pattern", "M*/MM/MM", "--position-embedding-type", "rope"}), kWorld1);
  CHECK_BATCH_OR_LAYOUT_PASSES(r);
}

TEST_CASE("hybrid-pattern: --num-layers follows the pattern", "[validate-model]") {
  // seed arguments.py:704-713
  auto r = mrtest::run(mrtest::with({"--hybrid-layer-pattern", "M*M*"}), kWorld1);
  CHECK(r.exit == 0);
  CHECK(r.warned("hybrid-pattern.num-layers-overridden"));
  CHECK(r["num_layers"].as_int() == 4);

  r = mrtest::run(mrtest::with({"--hybrid-layer-pattern", "M*"}), kWorld1);
  CHECK(r.exit == 0);
  CHECK_FALSE(r.warned("hybrid-pattern.num-layers-overridden"));
  CHECK(r["num_layers"].as_int() == 2);

  // No --num-layers at all: no warning, the count comes from the pattern.
  r = mrtest::run(without("--num-layers", {"--hybrid-layer-pattern", "M-M-M"}), kWorld1);
  CHECK_BATCH_OR_LAYOUT_PASSES(r);
  CHECK_FALSE(r.warned("hybrid-pattern.num-layers-overridden"));
  CHECK(r["num_layers"].as_int() == 5);
}

TEST_CASE("hybrid-pattern: pipe separators exclude first/last stage sizes", "[validate-model]") {
  // seed arguments.py:718 and 722
  auto r = mrtest::run(mrtest::with({"--hybrid-layer-pattern", "M*|M*", "--pipeline-model-parallel-size", "2",
                                     "--decoder-first-pipeline-num-layers", "1"}),
                       kWorld2);
  CHECK(r.exit == 1);
  CHECK(r.rule == "hybrid-pattern.pipes-with-first-last-stage-layers");
  r = mrtest::run(mrtest::with({"--hybrid-layer-pattern", "M*|M*", "--pipeline-model-parallel-size", "2",
                                "--decoder-last-pipeline-num-layers", "1"}),
                  kWorld2);
  CHECK(r.rule == "hybrid-pattern.pipes-with-first-last-stage-layers");
  // A '|' in the MTP part only (an invalid symbol there) is not a pipeline separator.
  r = mrtest::run(mrtest::with({"--hybrid-layer-pattern", "M*M*/M|M", "--decoder-first-pipeline-num-layers", "1",
                                "--position-embedding-type", "rope"}),
                  kWorld1);
  CHECK(r.rule == "hybrid-pattern.invalid-symbol");

  // Pipe-free patterns may use them for uneven splitting.
  r = mrtest::run(mrtest::with({"--hybrid-layer-pattern", "M*M*", "--pipeline-model-parallel-size", "2",
                                "--decoder-first-pipeline-num-layers", "1"}),
                  kWorld2);
  CHECK_BATCH_OR_LAYOUT_PASSES(r);
}

TEST_CASE("hybrid-pattern: other pipeline-layout options are refused", "[validate-model]") {
  struct Case {
    Args extra;
    const char* rule;
  };
  const std::vector<Case> cases = {
      {{"--num-layers-per-virtual-pipeline-stage", "1"}, "hybrid-pattern.num-layers-per-virtual-stage"},  // :728
      {{"--num-virtual-stages-per-pipeline-rank", "1"}, "hybrid-pattern.num-virtual-stages-per-rank"},    // :734
      {{"--pipeline-model-parallel-layout", "Et|tL"}, "hybrid-pattern.pipeline-layout"},                  // :739
      {{"--account-for-embedding-in-pipeline-split"}, "hybrid-pattern.account-for-embedding"},            // :743
      {{"--account-for-loss-in-pipeline-split"}, "hybrid-pattern.account-for-loss"},                      // :748
  };
  for (const auto& c : cases) {
    CAPTURE(c.rule);
    Args extra = c.extra;
    extra.insert(extra.end(), {"--hybrid-layer-pattern", "M*"});
    auto r = mrtest::run(mrtest::with(extra), kWorld1);
    CHECK(r.exit == 1);
    CHECK(r.rule == c.rule);
    // The same option without a hybrid pattern gets past these checks.
    r = mrtest::run(mrtest::with(c.extra), kWorld1);
    CHECK(r.rule != c.rule);
  }
}

TEST_CASE("hybrid-pattern: segments divide over the pipeline stages", "[validate-model]") {
  // seed arguments.py:763
  auto r =
      mrtest::run(mrtest::with({"--hybrid-layer-pattern", "M|M|M", "--pipeline-model-parallel-size", "2"}), kWorld2);
  CHECK(r.exit == 1);
  CHECK(r.rule == "hybrid-pattern.segments-divisible-by-pp");

  r = mrtest::run(mrtest::with({"--hybrid-layer-pattern", "M|M|M|M", "--pipeline-model-parallel-size", "2"}), kWorld2);
  CHECK(r.exit == 0);
}

TEST_CASE("hybrid-pattern: derived virtual pipeline size, num_layers and MLA", "[validate-model]") {
  struct Case {
    const char* pattern;
    int pp;
    Value vpp;
    int64_t num_layers;
    bool mla;
  };
  const std::vector<Case> cases = {
      // seed arguments.py:758-761: no pipes and PP > 1 -> VPP None
      {"MMMM", 2, Value(), 4, false},
      // seed arguments.py:769-776: segments > PP -> segments // PP, else None
      {"M|M|M|M", 2, Value(2), 4, false},
      {"M*|M*", 2, Value(), 4, false},
      {"M-|M-|M-|M-|M-|M-", 2, Value(3), 12, false},
      {"M*M*", 1, Value(), 4, false},
      // seed arguments.py:807-810: '+' or 'D' anywhere in the pattern -> multi_latent_attention
      {"M+M+", 1, Value(), 4, true},
      {"MDMD", 1, Value(), 4, true},
      {"MM/M+", 1, Value(), 2, true},
      {"M-E-", 1, Value(), 4, false},
  };
  for (const auto& c : cases) {
    CAPTURE(c.pattern, c.pp);
    auto r = mrtest::run(mrtest::with({"--hybrid-layer-pattern", c.pattern, "--pipeline-model-parallel-size",
                                       std::to_string(c.pp), "--position-embedding-type", "rope"}),
                         Env{{"WORLD_SIZE", std::to_string(c.pp)}});
    CHECK_BATCH_OR_LAYOUT_PASSES(r);
    CHECK(r["virtual_pipeline_model_parallel_size"] == c.vpp);
    CHECK(r["num_layers"].as_int() == c.num_layers);
    CHECK(r["multi_latent_attention"].as_bool() == c.mla);
  }
}

TEST_CASE("hybrid-pattern: --mtp-num-layers from the unified pattern", "[validate-model]") {
  // seed arguments.py:779-796
  auto r = mrtest::run(mrtest::with({"--hybrid-layer-pattern", "M*/MM/MM", "--position-embedding-type", "rope",
                                     "--mtp-num-layers", "3"}),
                       kWorld1);
  CHECK_BATCH_OR_LAYOUT_PASSES(r);
  CHECK(r.warned("hybrid-pattern.mtp-num-layers-conflict"));
  CHECK(r["mtp_num_layers"].as_int() == 2);

  r = mrtest::run(mrtest::with({"--hybrid-layer-pattern", "M*/MM/MM", "--position-embedding-type", "rope",
                                "--mtp-num-layers", "2"}),
                  kWorld1);
  CHECK_BATCH_OR_LAYOUT_PASSES(r);
  CHECK_FALSE(r.warned("hybrid-pattern.mtp-num-layers-conflict"));

  struct Case {
    const char* pattern;
    Value mtp_num_layers;
  };
  const std::vector<Case> cases = {
      {"M*/MM/MM", Value(2)},                        // two depths
      {"M*/*M/*M/*M", Value(3)}, {"M*//", Value()},  // only empty MTP parts: no MTP
      {"M*", Value()},                               // no '/'
      {"M-M-/MM", Value(1)},                         // one depth
  };
  for (const auto& c : cases) {
    CAPTURE(c.pattern);
    r = mrtest::run(mrtest::with({"--hybrid-layer-pattern", c.pattern, "--position-embedding-type", "rope"}), kWorld1);
    CHECK_BATCH_OR_LAYOUT_PASSES(r);
    CHECK(r["mtp_num_layers"] == c.mtp_num_layers);
  }
}

TEST_CASE("mtp: position embedding and freezing", "[validate-model]") {
  // seed arguments.py:798
  auto r = mrtest::run(mrtest::with({"--mtp-num-layers", "1"}), kWorld1);  // learned_absolute by default
  CHECK(r.exit == 1);
  CHECK(r.rule == "mtp.rope-or-none-position-embedding");
  // A hybrid pattern with MTP depths switches MTP on too.
  r = mrtest::run(mrtest::with({"--hybrid-layer-pattern", "M*/MM"}), kWorld1);
  CHECK(r.rule == "mtp.rope-or-none-position-embedding");

  r = mrtest::run(mrtest::with({"--mtp-num-layers", "1", "--position-embedding-type", "rope"}), kWorld1);
  CHECK_BATCH_OR_LAYOUT_PASSES(r);
  r = mrtest::run(mrtest::with({"--mtp-num-layers", "1", "--position-embedding-type", "none"}), kWorld1);
  CHECK_BATCH_OR_LAYOUT_PASSES(r);
  r = mrtest::run(mrtest::with({"--mtp-num-layers", "0"}), kWorld1);  // 0 is falsy: no MTP
  CHECK(r.rule != "mtp.rope-or-none-position-embedding");

  // seed arguments.py:803
  r = mrtest::run(mrtest::with({"--freeze-base-model-for-mtp", "--freeze-all-layers"}), kWorld1);
  CHECK(r.exit == 1);
  CHECK(r.rule == "mtp.freeze-base-model-with-freeze-all");
  r = mrtest::run(mrtest::with({"--freeze-base-model-for-mtp"}), kWorld1);
  CHECK_BATCH_OR_LAYOUT_PASSES(r);
}

// ---------------------------------------------------------------------------------------------------------
// model dimensions (seed 1145-1180)

TEST_CASE("derived model dimensions", "[validate-model]") {
  struct Case {
    Args extra;
    int64_t ffn, kv;
  };
  const std::vector<Case> cases = {
      // seed arguments.py:1170 validate_args: ffn = 4h = 256; seed 1174: kv = 64 // 4 = 16
      {{}, 256, 16},
      // seed arguments.py:1168: swiglu ffn = int((4*64*2/3)/64)*64 = int(2.67)*64 = 128
      {{"--swiglu"}, 128, 16},
      // h=4096, 32 heads: swiglu int(10922.67/64)=170 -> 10880; kv 128
      {{"--swiglu", "--hidden-size", "4096", "--num-attention-heads", "32"}, 10880, 128},
      // h=5120, 40 heads: swiglu int(13653.33/64)=213 -> 13632; kv 128
      {{"--swiglu", "--hidden-size", "5120", "--num-attention-heads", "40"}, 13632, 128},
      // h=768 without swiglu: 3072; 12 heads -> 64
      {{"--hidden-size", "768", "--num-attention-heads", "12"}, 3072, 64},
      // explicit values are kept, and explicit kv_channels skips the divisibility check (seed 1173)
      {{"--ffn-hidden-size", "100", "--kv-channels", "32", "--num-attention-heads", "3"}, 100, 32},
  };
  for (const auto& c : cases) {
    INFO(::Catch::Detail::stringify(c.extra));
    auto r = upto_mixed_precision_with(c.extra);
    REQUIRE(r.exit == 0);
    CHECK(r["ffn_hidden_size"].as_int() == c.ffn);
    CHECK(r["kv_channels"].as_int() == c.kv);
  }
}

TEST_CASE("num_layers and encoder_num_layers mirror each other", "[validate-model]") {
  // seed arguments.py:1145-1148 validate_args
  auto r = upto_mixed_precision(mrtest::base_args());
  REQUIRE(r.exit == 0);
  CHECK(r["encoder_num_layers"].as_int() == 2);
  // seed arguments.py:1149-1152 validate_args
  auto e = upto_mixed_precision(plus(without("--num-layers"), {"--encoder-num-layers", "4"}));
  REQUIRE(e.exit == 0);
  CHECK(e["num_layers"].as_int() == 4);
  CHECK(e["encoder_num_layers"].as_int() == 4);
}

TEST_CASE("model-shape.num-layers-conflict", "[validate-model]") {
  auto bad = upto_mixed_precision_with({"--encoder-num-layers", "2"});
  CHECK(bad.exit == 1);
  CHECK(bad.rule == "model-shape.num-layers-conflict");
  CHECK(upto_mixed_precision(plus(without("--num-layers"), {"--encoder-num-layers", "2"})).exit == 0);
}

TEST_CASE("model-shape.num-layers-missing", "[validate-model]") {
  auto bad = upto_mixed_precision(without("--num-layers"));
  CHECK(bad.exit == 1);
  CHECK(bad.rule == "model-shape.num-layers-missing");
  CHECK(upto_mixed_precision(mrtest::base_args()).exit == 0);
}

TEST_CASE("model-shape.required-argument", "[validate-model]") {
  for (const char* flag : {"--hidden-size", "--num-attention-heads", "--max-position-embeddings"}) {
    INFO(flag);
    auto bad = upto_mixed_precision(without(flag));
    CHECK(bad.exit == 1);
    CHECK(bad.rule == "model-shape.required-argument");
  }
  CHECK(upto_mixed_precision(mrtest::base_args()).exit == 0);
}

TEST_CASE("model-shape.hidden-size-divisible-by-heads", "[validate-model]") {
  auto bad = upto_mixed_precision_with({"--num-attention-heads", "3"});
  CHECK(bad.exit == 1);
  CHECK(bad.rule == "model-shape.hidden-size-divisible-by-heads");
  CHECK(upto_mixed_precision_with({"--num-attention-heads", "3", "--kv-channels", "16"}).exit == 0);
  CHECK(upto_mixed_precision_with({"--num-attention-heads", "8"}).exit == 0);
}

TEST_CASE("seq-length.context-parallel-divisible", "[validate-model]") {
  const Env ws2 = {{"WORLD_SIZE", "2"}};
  auto bad = upto_mixed_precision_with(
      {"--context-parallel-size", "2", "--seq-length", "130", "--max-position-embeddings", "130"}, ws2);
  CHECK(bad.exit == 1);
  CHECK(bad.rule == "seq-length.context-parallel-divisible");
  // 128 % (2 * 2) == 0
  CHECK(upto_mixed_precision_with({"--context-parallel-size", "2"}, ws2).exit == 0);
  // CP 1: no constraint
  CHECK(upto_mixed_precision_with({"--seq-length", "130", "--max-position-embeddings", "130"}).exit == 0);
}

// ---------------------------------------------------------------------------------------------------------
// sequence lengths (seed 1188-1200)

TEST_CASE("seq_length and encoder_seq_length mirror each other", "[validate-model]") {
  // seed arguments.py:1188-1190 validate_args
  auto r = upto_mixed_precision(mrtest::base_args());
  REQUIRE(r.exit == 0);
  CHECK(r["encoder_seq_length"].as_int() == 128);
  // seed arguments.py:1191-1193 validate_args
  auto e = upto_mixed_precision(plus(without("--seq-length"), {"--encoder-seq-length", "64"}));
  REQUIRE(e.exit == 0);
  CHECK(e["seq_length"].as_int() == 64);
  CHECK(e["encoder_seq_length"].as_int() == 64);
}

TEST_CASE("seq-length.encoder-seq-length-conflict", "[validate-model]") {
  auto bad = upto_mixed_precision_with({"--encoder-seq-length", "128"});
  CHECK(bad.exit == 1);
  CHECK(bad.rule == "seq-length.encoder-seq-length-conflict");
  CHECK(upto_mixed_precision(plus(without("--seq-length"), {"--encoder-seq-length", "128"})).exit == 0);
}

TEST_CASE("seq-length.missing", "[validate-model]") {
  auto bad = upto_mixed_precision(without("--seq-length"));
  CHECK(bad.exit == 1);
  CHECK(bad.rule == "seq-length.missing");
  CHECK(upto_mixed_precision(mrtest::base_args()).exit == 0);
}

TEST_CASE("seq-length.exceeds-max-position-embeddings", "[validate-model]") {
  auto bad = upto_mixed_precision_with({"--max-position-embeddings", "64"});
  CHECK(bad.exit == 1);
  CHECK(bad.rule == "seq-length.exceeds-max-position-embeddings");
  CHECK(upto_mixed_precision_with({"--max-position-embeddings", "128"}).exit == 0);  // equal is fine
  CHECK(upto_mixed_precision(plus(without("--seq-length"), {"--encoder-seq-length", "256"})).rule ==
        "seq-length.exceeds-max-position-embeddings");
}

TEST_CASE("seq-length.decoder-exceeds-max-position-embeddings", "[validate-model]") {
  auto bad = upto_mixed_precision_with({"--decoder-seq-length", "256"});
  CHECK(bad.exit == 1);
  CHECK(bad.rule == "seq-length.decoder-exceeds-max-position-embeddings");
  CHECK(upto_mixed_precision_with({"--decoder-seq-length", "128"}).exit == 0);
}

// ---------------------------------------------------------------------------------------------------------
// Bias fusions (seed arguments.py:1453-1459 validate_args)

TEST_CASE("bias fusion and add_qkv_bias follow add_bias_linear", "[validate-model]") {
  struct Case {
    std::vector<std::string> extra;
    bool bias_gelu_fusion, add_qkv_bias;
  };
  const Case cases[] = {
      {{}, true, true},                                            // seed 1458: add_bias_linear -> add_qkv_bias
      {{"--disable-bias-linear"}, false, false},                   // seed 1454-1455
      {{"--disable-bias-linear", "--add-qkv-bias"}, false, true},  // qkv bias kept when asked for
      {{"--no-bias-gelu-fusion"}, false, true},
  };
  for (const auto& c : cases) {
    auto r = upto_sequence_packing(mrtest::with(c.extra));
    CHECK(r.exit == 0);
    CHECK(r["bias_gelu_fusion"] == mr::Value(c.bias_gelu_fusion));
    CHECK(r["add_qkv_bias"] == mr::Value(c.add_qkv_bias));
  }
}

// ---------------------------------------------------------------------------------------------------------
// QK-clip and attention-logit logging (seed arguments.py:1461-1472 validate_args)

TEST_CASE("QK-clip checks", "[validate-model]") {
  auto old_te = target("sm_90", "2.8.0");
  // seed arguments.py:1462
  auto r = upto_sequence_packing(mrtest::with({"--qk-clip"}), {}, &old_te);
  CHECK(r.rule == "qk-clip.te-version");
  CHECK(upto_sequence_packing(mrtest::with({"--qk-clip"})).exit == 0);
  CHECK(upto_sequence_packing(mrtest::base_args(), {}, &old_te).rule != "qk-clip.te-version");
  // seed arguments.py:1464
  for (const char* alpha : {"0", "1", "1.5", "-0.1"}) {
    INFO("--qk-clip-alpha " << alpha);
    CHECK(upto_sequence_packing(mrtest::with({"--qk-clip", "--qk-clip-alpha", alpha})).rule == "qk-clip.alpha-range");
  }
  CHECK(upto_sequence_packing(mrtest::with({"--qk-clip", "--qk-clip-alpha", "0.99"})).exit == 0);
  CHECK(upto_sequence_packing(mrtest::with({"--qk-clip-alpha", "2"})).exit == 0);  // not checked without --qk-clip
  // seed arguments.py:1466
  CHECK(upto_sequence_packing(mrtest::with({"--qk-clip", "--qk-clip-threshold", "0"})).rule ==
        "qk-clip.threshold-positive");
  CHECK(upto_sequence_packing(mrtest::with({"--qk-clip", "--qk-clip-threshold", "0.5"})).exit == 0);
  // seed arguments.py:1470-1472
  CHECK(upto_sequence_packing(mrtest::with({"--log-max-attention-logit"}), {}, &old_te).rule ==
        "qk-clip.log-max-attention-logit-te-version");
  CHECK(upto_sequence_packing(mrtest::with({"--log-max-attention-logit"})).exit == 0);
}

// ---------------------------------------------------------------------------------------------------------
// Position embeddings (seed arguments.py:1474-1494 validate_args)

TEST_CASE("position-embedding derivations", "[validate-model]") {
  struct Case {
    std::vector<std::string> extra;
    const char* type;
    bool rope_fusion;
  };
  const Case cases[] = {
      {{}, "learned_absolute", false},                                          // seed 1477-1478
      {{"--use-rotary-position-embeddings"}, "rope", true},                     // seed 1475-1476
      {{"--position-embedding-type", "rope"}, "rope", true},
      {{"--position-embedding-type", "rope", "--no-rope-fusion"}, "rope", false},
      {{"--position-embedding-type", "yarn"}, "yarn", false},
      {{"--position-embedding-type", "none"}, "none", false},
      {{"--no-position-embedding", "--position-embedding-type", "rope"}, "rope", true},  // seed 1482 passes
  };
  for (const auto& c : cases) {
    auto r = upto_sequence_packing(mrtest::with(c.extra));
    INFO(c.type << " " << r.message);
    CHECK(r.exit == 0);
    CHECK(r["position_embedding_type"] == mr::Value(c.type));
    CHECK(r["apply_rope_fusion"] == mr::Value(c.rope_fusion));
  }
}

TEST_CASE("position-embedding checks", "[validate-model]") {
  // seed arguments.py:1482
  auto r = upto_sequence_packing(mrtest::with({"--no-position-embedding"}));
  CHECK(r.exit == 1);
  CHECK(r.rule == "position-embedding.no-position-embedding-deprecated");
  // seed arguments.py:1486-1489
  r = upto_sequence_packing(mrtest::with({"--position-embedding-type", "relative", "--transformer-impl", "local"}));
  CHECK(r.rule == "position-embedding.relative-needs-te");
  CHECK(upto_sequence_packing(mrtest::with({"--position-embedding-type", "relative"})).exit == 0);
  // seed arguments.py:1492-1494
  r = upto_sequence_packing(mrtest::with({"--position-embedding-type", "mrope"}));
  CHECK(r.rule == "position-embedding.mrope-section");
  CHECK(upto_sequence_packing(mrtest::with({"--position-embedding-type", "mrope", "--mrope-section", "2", "3", "3"}))
            .exit == 0);
}

// ---------------------------------------------------------------------------------------------------------------
// seed 1634-1643: query-key layer scaling, rerun tracker file

TEST_CASE("derivation: attention_softmax_in_fp32", "[validate-model]") {
  struct Case {
    Args extra;
    bool expected;
  };
  // seed arguments.py:1635 validate_args: apply_query_key_layer_scaling -> attention_softmax_in_fp32 = True
  const Case cases[] = {
      {{}, false},
      {{"--apply-query-key-layer-scaling"}, true},
      {{"--attention-softmax-in-fp32"}, true},
      {{"--apply-query-key-layer-scaling", "--attention-softmax-in-fp32"}, true},
  };
  for (const auto& c : cases) {
    auto r = from_data_blend_with(c.extra);
    passes(r);
    CHECK(r["attention_softmax_in_fp32"] == mr::Value(c.expected));
  }
}

TEST_CASE("MTP needs position_ids-based position embeddings", "[validate-model]") {
  fails(from_data_blend_with({"--mtp-num-layers", "1", "--position-embedding-type", "relative"}),
        "mtp-position-embedding.supported-type");
  fails(from_data_blend_with({"--mtp-num-layers", "1", "--position-embedding-type", "yarn"}),
        "mtp-position-embedding.supported-type");
  for (const char* t : {"learned_absolute", "rope", "mrope", "none"})
    passes(from_data_blend_with({"--mtp-num-layers", "2", "--position-embedding-type", t}));
  passes(from_data_blend_with({"--mtp-num-layers", "0", "--position-embedding-type", "relative"}));
  passes(from_data_blend_with({"--position-embedding-type", "yarn"}));
}

TEST_CASE("multi-latent attention and MoE latent projections", "[validate-model]") {
  fails(from_data_blend_with({"--multi-latent-attention", "--group-query-attention"}), "latent.mla-excludes-gqa");
  passes(from_data_blend_with({"--multi-latent-attention"}));
  passes(from_data_blend_with({"--group-query-attention"}));
  fails(from_data_blend_with({"--mla-down-proj-fusion"}), "latent.mla-down-proj-fusion-needs-mla");
  passes(from_data_blend_with({"--mla-down-proj-fusion", "--multi-latent-attention"}));
  fails(from_data_blend_with({"--moe-use-norm-before-up-proj", "--num-experts", "4"}),
        "latent.norm-before-up-proj-needs-latent-size");
  passes(from_data_blend_with({"--moe-use-norm-before-up-proj", "--num-experts", "4", "--moe-latent-size", "16"}));
  fails(from_data_blend_with({"--moe-latent-size", "0", "--num-experts", "4"}), "latent.moe-latent-size-positive");
  fails(from_data_blend_with({"--moe-latent-size", "-3", "--num-experts", "4"}), "latent.moe-latent-size-positive");
  fails(from_data_blend_with({"--moe-latent-size", "16"}), "latent.moe-latent-needs-experts");
  passes(from_data_blend_with({"--moe-latent-size", "16", "--num-experts", "4"}));
}
