// Part B of the validation chain (seed arguments.py 626-956 of validate_args): batch sizes, hybrid layer
// pattern and MTP, virtual pipeline / pipeline layout, FSDP. For every rule: a config that triggers it and a
// neighbour that passes it; plus derivation tables worked out by hand from the seed.
#include <algorithm>
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "config/pipeline_layout.h"
#include "support.h"

namespace {

using mr::Value;
using Args = std::vector<std::string>;
using Env = std::map<std::string, std::string>;

// base_args() without `flag` and its value.
Args without(const std::string& flag, Args extra = {}) {
  Args a = mrtest::base_args();
  auto it = std::find(a.begin(), a.end(), flag);
  if (it != a.end()) a.erase(it, it + 2);
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

bool is_part_b_rule(const std::string& id) {
  for (const char* p : {"batch-size.", "hybrid-pattern.", "mtp.rope-or-none", "mtp.freeze-base", "virtual-pipeline.",
                        "pipeline-layout.", "pipeline-split.", "fsdp.", "torch-fsdp2."})
    if (id.rfind(p, 0) == 0) return true;
  return false;
}

// Part B accepted the config (a later part may still refuse it for reasons of its own).
#define CHECK_PART_B_PASSES(r)             \
  do {                                     \
    CHECK((r).exit != 2);                  \
    CHECK_FALSE(is_part_b_rule((r).rule)); \
  } while (0)

const Env kWs1{{"WORLD_SIZE", "1"}};
const Env kWs2{{"WORLD_SIZE", "2"}};
const Env kWs4{{"WORLD_SIZE", "4"}};
// TP/CP > 1 on sm_90 needs CUDA_DEVICE_MAX_CONNECTIONS=1 (a later part checks it).
const Env kWs8{{"WORLD_SIZE", "8"}, {"CUDA_DEVICE_MAX_CONNECTIONS", "1"}};

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// Batch sizes (seed 626-653)

TEST_CASE("batch-size: micro batch size required and positive", "[part-b]") {
  auto r = mrtest::run(without("--micro-batch-size"), kWs1);  // seed arguments.py:627
  CHECK(r.exit == 1);
  CHECK(r.rule == "batch-size.micro-batch-size-required");

  r = mrtest::run(mrtest::with({"--micro-batch-size", "0"}), kWs1);  // seed arguments.py:628
  CHECK(r.exit == 1);
  CHECK(r.rule == "batch-size.micro-batch-size-positive");
  r = mrtest::run(mrtest::with({"--micro-batch-size", "-1"}), kWs1);
  CHECK(r.rule == "batch-size.micro-batch-size-positive");

  r = mrtest::run(mrtest::with({"--micro-batch-size", "1"}), kWs1);
  CHECK(r.exit == 0);
  r = mrtest::run(mrtest::base_args(), kWs1);
  CHECK(r.exit == 0);
}

TEST_CASE("batch-size: --step-batch-size-schedule excludes an explicit --global-batch-size", "[part-b]") {
  // seed arguments.py:632
  auto r = mrtest::run(mrtest::with({"--step-batch-size-schedule", "0:8"}), kWs1);
  CHECK(r.exit == 1);
  CHECK(r.rule == "batch-size.step-schedule-with-global-batch-size");

  r = mrtest::run(without("--global-batch-size", {"--step-batch-size-schedule", "0:8"}), kWs1);
  CHECK_PART_B_PASSES(r);
  CHECK(r["global_batch_size"].as_int() == 2);  // still derived from the micro batch size
}

TEST_CASE("batch-size: global batch size must be positive", "[part-b]") {
  // seed arguments.py:639
  auto r = mrtest::run(mrtest::with({"--global-batch-size", "0"}), kWs1);
  CHECK(r.exit == 1);
  CHECK(r.rule == "batch-size.global-batch-size-positive");
  r = mrtest::run(mrtest::with({"--global-batch-size", "-8"}), kWs1);
  CHECK(r.rule == "batch-size.global-batch-size-positive");

  r = mrtest::run(mrtest::with({"--global-batch-size", "2"}), kWs1);
  CHECK(r.exit == 0);
}

TEST_CASE("batch-size: eval global batch size divisible by eval micro batch x batch-parallel size", "[part-b]") {
  // seed arguments.py:647
  auto r = mrtest::run(mrtest::with({"--eval-global-batch-size", "3"}), kWs1);
  CHECK(r.exit == 1);
  CHECK(r.rule == "batch-size.eval-global-batch-size-divisible");
  // A zero divisor (Python's ZeroDivisionError) fails too.
  r = mrtest::run(mrtest::with({"--eval-micro-batch-size", "0"}), kWs1);
  CHECK(r.exit == 1);
  CHECK(r.rule == "batch-size.eval-global-batch-size-divisible");
  // The default eval global batch size (8) is not a multiple of 3 x 1.
  r = mrtest::run(mrtest::with({"--eval-micro-batch-size", "3"}), kWs1);
  CHECK(r.rule == "batch-size.eval-global-batch-size-divisible");
  // batch_parallel_size 4 (WORLD_SIZE 8, TP 2): 8 % (4 x 4) != 0.
  r = mrtest::run(mrtest::with({"--tensor-model-parallel-size", "2", "--eval-micro-batch-size", "4"}), kWs8);
  CHECK(r.rule == "batch-size.eval-global-batch-size-divisible");

  r = mrtest::run(mrtest::with({"--eval-global-batch-size", "4"}), kWs1);
  CHECK(r.exit == 0);
  r = mrtest::run(mrtest::with({"--tensor-model-parallel-size", "2", "--eval-micro-batch-size", "1"}), kWs8);
  CHECK_PART_B_PASSES(r);
}

TEST_CASE("batch-size: derived global and eval batch sizes", "[part-b]") {
  struct Case {
    Args args;
    Env env;
    int64_t gbs, egbs, embs;
  };
  const std::vector<Case> cases = {
      // seed arguments.py:636 global = micro x batch_parallel_size; bps = 1 (WORLD_SIZE 1)
      {without("--global-batch-size"), kWs1, 2, 2, 2},
      // bps = 8 / (TP 2 x PP 1 x CP 1) = 4 -> 2 x 4 = 8
      {without("--global-batch-size", {"--tensor-model-parallel-size", "2"}), kWs8, 8, 8, 2},
      // bps = 8 / (TP 1 x PP 2 x CP 1) = 4 -> 2 x 4 = 8
      {without("--global-batch-size", {"--pipeline-model-parallel-size", "2"}), kWs8, 8, 8, 2},
      // bps = 8 / (1 x 1 x CP 2) = 4 -> 8
      {without("--global-batch-size", {"--context-parallel-size", "2"}), kWs8, 8, 8, 2},
      // bps = 8 -> 3 x 8 = 24
      {without("--global-batch-size", {"--micro-batch-size", "3"}), Env{{"WORLD_SIZE", "8"}}, 24, 24, 3},
      // explicit --global-batch-size is kept; seed arguments.py:642-645 eval sizes default to the training ones
      {mrtest::base_args(), kWs1, 8, 8, 2},
      // explicit eval sizes are kept
      {mrtest::with({"--eval-global-batch-size", "4", "--eval-micro-batch-size", "1"}), kWs1, 8, 4, 1},
      {mrtest::with({"--eval-micro-batch-size", "4"}), kWs1, 8, 8, 4},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    CAPTURE(i);
    auto r = mrtest::run(cases[i].args, cases[i].env);
    CHECK_PART_B_PASSES(r);
    CHECK(r["global_batch_size"].as_int() == cases[i].gbs);
    CHECK(r["eval_global_batch_size"].as_int() == cases[i].egbs);
    CHECK(r["eval_micro_batch_size"].as_int() == cases[i].embs);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Hybrid layer pattern (seed 655-812)

TEST_CASE("hybrid-pattern: deprecated --hybrid-override-pattern", "[part-b]") {
  // seed arguments.py:660
  auto r = mrtest::run(mrtest::with({"--hybrid-override-pattern", "M*", "--hybrid-layer-pattern", "M*"}), kWs1);
  CHECK(r.exit == 1);
  CHECK(r.rule == "hybrid-pattern.override-and-layer-pattern");

  // seed arguments.py:664-668: warns and becomes --hybrid-layer-pattern
  r = mrtest::run(mrtest::with({"--hybrid-override-pattern", "M*M*"}), kWs1);
  CHECK(r.exit == 0);
  CHECK(r.warned("hybrid-pattern.override-pattern-deprecated"));
  CHECK(r["hybrid_layer_pattern"].as_str() == "M*M*");
  CHECK(r["num_layers"].as_int() == 4);

  r = mrtest::run(mrtest::with({"--hybrid-layer-pattern", "M*"}), kWs1);
  CHECK(r.exit == 0);
  CHECK_FALSE(r.warned("hybrid-pattern.override-pattern-deprecated"));

  // warn_rank_0(..., args.rank): only rank 0 warns; the value is converted on every rank.
  r = mrtest::run(mrtest::with({"--hybrid-override-pattern", "M*M*"}), {{"WORLD_SIZE", "2"}, {"RANK", "1"}});
  CHECK_PART_B_PASSES(r);
  CHECK_FALSE(r.warned("hybrid-pattern.override-pattern-deprecated"));
  CHECK_FALSE(r.warned("hybrid-pattern.num-layers-overridden"));
  CHECK(r["hybrid_layer_pattern"].as_str() == "M*M*");
  CHECK(r["num_layers"].as_int() == 4);
}

TEST_CASE("hybrid-pattern: deprecated --mtp-hybrid-override-pattern and its conversion", "[part-b]") {
  // seed arguments.py:672 (warning)
  auto r = mrtest::run(mrtest::with({"--hybrid-layer-pattern", "M*M*", "--mtp-hybrid-override-pattern", "MM",
                                     "--mtp-num-layers", "2", "--position-embedding-type", "rope"}),
                       kWs1);
  CHECK(r.exit == 0);
  CHECK(r.warned("hybrid-pattern.mtp-override-pattern-deprecated"));
  r = mrtest::run(mrtest::with({"--hybrid-layer-pattern", "M*M*"}), kWs1);
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
    r = mrtest::run(mrtest::with(extra), kWs1);
    CHECK_PART_B_PASSES(r);
    CHECK(r["hybrid_layer_pattern"] == cases[i].pattern);
    CHECK(r["mtp_hybrid_override_pattern"] == cases[i].mtp_override);
    CHECK(r["mtp_num_layers"] == cases[i].mtp_num_layers);
    CHECK(r["num_layers"].as_int() == cases[i].num_layers);
  }

  // A legacy pattern repeated beyond what can be held is refused (Python would run out of memory).
  r = mrtest::run(mrtest::with({"--mtp-hybrid-override-pattern", "MM", "--mtp-num-layers", "100000000"}), kWs1);
  CHECK(r.exit == 1);
  CHECK(r.rule == "hybrid-pattern.too-large");
}

TEST_CASE("hybrid-pattern: layer symbols", "[part-b]") {
  // hybrid_layer_allocation.py _validate_pattern via get_hybrid_total_layer_count (seed arguments.py:704)
  auto r = mrtest::run(mrtest::with({"--hybrid-layer-pattern", "MX"}), kWs1);
  CHECK(r.exit == 1);
  CHECK(r.rule == "hybrid-pattern.invalid-symbol");
  // '|' is not allowed in the MTP part (parse_hybrid_pattern, seed arguments.py:780)
  r = mrtest::run(mrtest::with({"--hybrid-layer-pattern", "MM/M|M", "--position-embedding-type", "rope"}), kWs1);
  CHECK(r.rule == "hybrid-pattern.invalid-symbol");
  r = mrtest::run(mrtest::with({"--hybrid-layer-pattern", "MG*D"}), kWs1);
  CHECK(r.rule == "hybrid-pattern.attention-with-mla");  // checked after the symbols, which are all valid

  r = mrtest::run(mrtest::with({"--hybrid-layer-pattern", "MG*-E"}), kWs1);
  CHECK_PART_B_PASSES(r);
  CHECK(r["num_layers"].as_int() == 5);

  // Standard attention cannot be mixed with MLA/DSA in the main or in the MTP pattern.
  r = mrtest::run(mrtest::with({"--hybrid-layer-pattern", "M*+"}), kWs1);
  CHECK(r.exit == 1);
  CHECK(r.rule == "hybrid-pattern.attention-with-mla");
  r = mrtest::run(mrtest::with({"--hybrid-layer-pattern", "M*/*+", "--position-embedding-type", "rope"}), kWs1);
  CHECK(r.rule == "hybrid-pattern.attention-with-mla");
  // ... but each pattern is checked on its own.
  r = mrtest::run(mrtest::with({"--hybrid-layer-pattern", "M*/M+", "--position-embedding-type", "rope"}), kWs1);
  CHECK_PART_B_PASSES(r);
  r = mrtest::run(mrtest::with({"--hybrid-layer-pattern", "M+D"}), kWs1);
  CHECK_PART_B_PASSES(r);
}

TEST_CASE("hybrid-pattern: MTP depths must repeat one pattern", "[part-b]") {
  auto r = mrtest::run(mrtest::with({"--hybrid-layer-pattern", "M*/MM/M*", "--position-embedding-type", "rope"}), kWs1);
  CHECK(r.exit == 1);
  CHECK(r.rule == "hybrid-pattern.mtp-patterns-differ");
  // A trailing empty depth differs from a non-empty one.
  r = mrtest::run(mrtest::with({"--hybrid-layer-pattern", "M*/MM/", "--position-embedding-type", "rope"}), kWs1);
  CHECK(r.rule == "hybrid-pattern.mtp-patterns-differ");

  r = mrtest::run(mrtest::with({"--hybrid-layer-pattern", "M*/MM/MM", "--position-embedding-type", "rope"}), kWs1);
  CHECK_PART_B_PASSES(r);
}

TEST_CASE("hybrid-pattern: --num-layers follows the pattern", "[part-b]") {
  // seed arguments.py:704-713
  auto r = mrtest::run(mrtest::with({"--hybrid-layer-pattern", "M*M*"}), kWs1);
  CHECK(r.exit == 0);
  CHECK(r.warned("hybrid-pattern.num-layers-overridden"));
  CHECK(r["num_layers"].as_int() == 4);

  r = mrtest::run(mrtest::with({"--hybrid-layer-pattern", "M*"}), kWs1);
  CHECK(r.exit == 0);
  CHECK_FALSE(r.warned("hybrid-pattern.num-layers-overridden"));
  CHECK(r["num_layers"].as_int() == 2);

  // No --num-layers at all: no warning, the count comes from the pattern.
  r = mrtest::run(without("--num-layers", {"--hybrid-layer-pattern", "M-M-M"}), kWs1);
  CHECK_PART_B_PASSES(r);
  CHECK_FALSE(r.warned("hybrid-pattern.num-layers-overridden"));
  CHECK(r["num_layers"].as_int() == 5);
}

TEST_CASE("hybrid-pattern: pipe separators exclude first/last stage sizes", "[part-b]") {
  // seed arguments.py:718 and 722
  auto r = mrtest::run(mrtest::with({"--hybrid-layer-pattern", "M*|M*", "--pipeline-model-parallel-size", "2",
                                     "--decoder-first-pipeline-num-layers", "1"}),
                       kWs2);
  CHECK(r.exit == 1);
  CHECK(r.rule == "hybrid-pattern.pipes-with-first-last-stage-layers");
  r = mrtest::run(mrtest::with({"--hybrid-layer-pattern", "M*|M*", "--pipeline-model-parallel-size", "2",
                                "--decoder-last-pipeline-num-layers", "1"}),
                  kWs2);
  CHECK(r.rule == "hybrid-pattern.pipes-with-first-last-stage-layers");
  // A '|' in the MTP part only (an invalid symbol there) is not a pipeline separator.
  r = mrtest::run(mrtest::with({"--hybrid-layer-pattern", "M*M*/M|M", "--decoder-first-pipeline-num-layers", "1",
                                "--position-embedding-type", "rope"}),
                  kWs1);
  CHECK(r.rule == "hybrid-pattern.invalid-symbol");

  // Pipe-free patterns may use them for uneven splitting.
  r = mrtest::run(mrtest::with({"--hybrid-layer-pattern", "M*M*", "--pipeline-model-parallel-size", "2",
                                "--decoder-first-pipeline-num-layers", "1"}),
                  kWs2);
  CHECK_PART_B_PASSES(r);
}

TEST_CASE("hybrid-pattern: other pipeline-layout options are refused", "[part-b]") {
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
    auto r = mrtest::run(mrtest::with(extra), kWs1);
    CHECK(r.exit == 1);
    CHECK(r.rule == c.rule);
    // The same option without a hybrid pattern gets past these checks.
    r = mrtest::run(mrtest::with(c.extra), kWs1);
    CHECK(r.rule != c.rule);
  }
}

TEST_CASE("hybrid-pattern: segments divide over the pipeline stages", "[part-b]") {
  // seed arguments.py:763
  auto r = mrtest::run(mrtest::with({"--hybrid-layer-pattern", "M|M|M", "--pipeline-model-parallel-size", "2"}), kWs2);
  CHECK(r.exit == 1);
  CHECK(r.rule == "hybrid-pattern.segments-divisible-by-pp");

  r = mrtest::run(mrtest::with({"--hybrid-layer-pattern", "M|M|M|M", "--pipeline-model-parallel-size", "2"}), kWs2);
  CHECK(r.exit == 0);
}

TEST_CASE("hybrid-pattern: derived virtual pipeline size, num_layers and MLA", "[part-b]") {
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
    CHECK_PART_B_PASSES(r);
    CHECK(r["virtual_pipeline_model_parallel_size"] == c.vpp);
    CHECK(r["num_layers"].as_int() == c.num_layers);
    CHECK(r["multi_latent_attention"].as_bool() == c.mla);
  }
}

TEST_CASE("hybrid-pattern: --mtp-num-layers from the unified pattern", "[part-b]") {
  // seed arguments.py:779-796
  auto r = mrtest::run(mrtest::with({"--hybrid-layer-pattern", "M*/MM/MM", "--position-embedding-type", "rope",
                                     "--mtp-num-layers", "3"}),
                       kWs1);
  CHECK_PART_B_PASSES(r);
  CHECK(r.warned("hybrid-pattern.mtp-num-layers-conflict"));
  CHECK(r["mtp_num_layers"].as_int() == 2);

  r = mrtest::run(mrtest::with({"--hybrid-layer-pattern", "M*/MM/MM", "--position-embedding-type", "rope",
                                "--mtp-num-layers", "2"}),
                  kWs1);
  CHECK_PART_B_PASSES(r);
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
    r = mrtest::run(mrtest::with({"--hybrid-layer-pattern", c.pattern, "--position-embedding-type", "rope"}), kWs1);
    CHECK_PART_B_PASSES(r);
    CHECK(r["mtp_num_layers"] == c.mtp_num_layers);
  }
}

TEST_CASE("mtp: position embedding and freezing", "[part-b]") {
  // seed arguments.py:798
  auto r = mrtest::run(mrtest::with({"--mtp-num-layers", "1"}), kWs1);  // learned_absolute by default
  CHECK(r.exit == 1);
  CHECK(r.rule == "mtp.rope-or-none-position-embedding");
  // A hybrid pattern with MTP depths switches MTP on too.
  r = mrtest::run(mrtest::with({"--hybrid-layer-pattern", "M*/MM"}), kWs1);
  CHECK(r.rule == "mtp.rope-or-none-position-embedding");

  r = mrtest::run(mrtest::with({"--mtp-num-layers", "1", "--position-embedding-type", "rope"}), kWs1);
  CHECK_PART_B_PASSES(r);
  r = mrtest::run(mrtest::with({"--mtp-num-layers", "1", "--position-embedding-type", "none"}), kWs1);
  CHECK_PART_B_PASSES(r);
  r = mrtest::run(mrtest::with({"--mtp-num-layers", "0"}), kWs1);  // 0 is falsy: no MTP
  CHECK(r.rule != "mtp.rope-or-none-position-embedding");

  // seed arguments.py:803
  r = mrtest::run(mrtest::with({"--freeze-base-model-for-mtp", "--freeze-all-layers"}), kWs1);
  CHECK(r.exit == 1);
  CHECK(r.rule == "mtp.freeze-base-model-with-freeze-all");
  r = mrtest::run(mrtest::with({"--freeze-base-model-for-mtp"}), kWs1);
  CHECK_PART_B_PASSES(r);
}

// ---------------------------------------------------------------------------------------------------------------
// Virtual pipeline / --pipeline-model-parallel-layout (seed 814-909)

TEST_CASE("pipeline-layout: unrolling like the Python regular expressions", "[part-b]") {
  // pipeline_parallel_layer_layout.py parse_str_to_list: commas dropped, one pass of (...)*n, one of x*n
  struct Case {
    const char* in;
    const char* out;
  };
  const std::vector<Case> cases = {
      {"Et*2|(tt|)*5t|tmL", "Ett|tt|tt|tt|tt|tt|t|tmL"},
      {"Ettt|(tt|)*2,m|L", "Ettt|tt|tt|m|L"},
      {"((t)*2)*3", "(t(t)))"},  // nested parentheses are not fully unrolled
      {"(|t)*2,L", "|t|tL"},
      {"t*0E", "E"},
      {"(t)*02", "tt"},
      {"()*3t", "()))t"},  // an empty group does not match the first pattern
      {"a(b*2)*2", "abbbb"},
      {"t**2", "t**"},
      {"t*2*3", "tt*3"},
      {"(t*2|)*2", "tt|tt|"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.in);
    CHECK(mr::pipeline_layout::expand(c.in) == c.out);
  }
  bool too_large = false;
  CHECK(mr::pipeline_layout::expand("t*99999999999", &too_large).empty());
  CHECK(too_large);
}

TEST_CASE("virtual-pipeline: one way of asking for virtual pipelining", "[part-b]") {
  // seed arguments.py:815
  auto r = mrtest::run(
      mrtest::with({"--num-layers-per-virtual-pipeline-stage", "1", "--num-virtual-stages-per-pipeline-rank", "2"}),
      kWs1);
  CHECK(r.exit == 1);
  CHECK(r.rule == "virtual-pipeline.one-option");
  r = mrtest::run(
      mrtest::with({"--num-virtual-stages-per-pipeline-rank", "2", "--pipeline-model-parallel-layout", "Et|tL"}), kWs1);
  CHECK(r.rule == "virtual-pipeline.one-option");

  r = mrtest::run(mrtest::with({"--pipeline-model-parallel-size", "2", "--num-layers", "4",
                                "--num-virtual-stages-per-pipeline-rank", "2"}),
                  kWs2);
  CHECK(r.exit == 0);
}

TEST_CASE("pipeline-layout: characters, size and stage count", "[part-b]") {
  // PipelineParallelLayerLayout.parse_str_to_list asserts on unknown characters (seed arguments.py:831)
  auto r = mrtest::run(mrtest::with({"--pipeline-model-parallel-layout", "Etx|tL"}), kWs1);
  CHECK(r.exit == 1);
  CHECK(r.rule == "pipeline-layout.invalid-layer-character");
  r = mrtest::run(mrtest::with({"--pipeline-model-parallel-layout", "Et*2 tL"}), kWs1);
  CHECK(r.rule == "pipeline-layout.invalid-layer-character");
  r = mrtest::run(mrtest::with({"--pipeline-model-parallel-layout", "t*99999999999"}), kWs1);
  CHECK(r.exit == 1);
  CHECK(r.rule == "pipeline-layout.too-large");

  // seed arguments.py:832: stage count divisible by PP
  r = mrtest::run(mrtest::with({"--pipeline-model-parallel-size", "2", "--pipeline-model-parallel-layout", "Et|t|tL"}),
                  kWs2);
  CHECK(r.exit == 1);
  CHECK(r.rule == "pipeline-layout.stages-divisible-by-pp");

  r = mrtest::run(mrtest::with({"--pipeline-model-parallel-size", "2", "--pipeline-model-parallel-layout", "Et|tL"}),
                  kWs2);
  CHECK_PART_B_PASSES(r);
}

TEST_CASE("virtual-pipeline: uneven stages need --num-virtual-stages-per-pipeline-rank", "[part-b]") {
  // seed arguments.py:842
  auto r = mrtest::run(mrtest::with({"--pipeline-model-parallel-size", "2", "--num-layers-per-virtual-pipeline-stage",
                                     "1", "--decoder-first-pipeline-num-layers", "1"}),
                       kWs2);
  CHECK(r.exit == 1);
  CHECK(r.rule == "virtual-pipeline.uneven-needs-num-virtual-stages");
  r = mrtest::run(mrtest::with({"--pipeline-model-parallel-size", "2", "--num-layers-per-virtual-pipeline-stage", "1",
                                "--decoder-last-pipeline-num-layers", "1"}),
                  kWs2);
  CHECK(r.rule == "virtual-pipeline.uneven-needs-num-virtual-stages");

  r = mrtest::run(mrtest::with({"--pipeline-model-parallel-size", "2", "--num-virtual-stages-per-pipeline-rank", "2",
                                "--decoder-first-pipeline-num-layers", "1", "--num-layers", "3"}),
                  kWs2);
  CHECK_PART_B_PASSES(r);
}

TEST_CASE("virtual-pipeline: layers per virtual stage needs a layer count", "[part-b]") {
  // seed arguments.py:845-848 (Megatron's None arithmetic raises TypeError)
  auto r = mrtest::run(
      without("--num-layers", {"--pipeline-model-parallel-size", "2", "--num-layers-per-virtual-pipeline-stage", "1"}),
      kWs2);
  CHECK(r.exit == 1);
  CHECK(r.rule == "virtual-pipeline.num-layers-missing");

  // --decoder-num-layers stands in: 4 / PP 2 = 2 per stage, / 1 -> VPP 2
  r = mrtest::run(
      without("--num-layers", {"--pipeline-model-parallel-size", "2", "--num-layers-per-virtual-pipeline-stage", "1",
                               "--decoder-num-layers", "4"}),
      kWs2);
  CHECK_PART_B_PASSES(r);
  CHECK(r["virtual_pipeline_model_parallel_size"].as_int() == 2);
}

TEST_CASE("pipeline-split: layers divisible by the pipeline size", "[part-b]") {
  // seed arguments.py:855 (virtual pipeline) and :884 (no virtual pipeline)
  auto r = mrtest::run(mrtest::with({"--pipeline-model-parallel-size", "2", "--num-layers", "3",
                                     "--num-layers-per-virtual-pipeline-stage", "1"}),
                       kWs2);
  CHECK(r.exit == 1);
  CHECK(r.rule == "pipeline-split.num-layers-divisible-by-pp");
  r = mrtest::run(mrtest::with({"--pipeline-model-parallel-size", "2", "--num-layers", "3"}), kWs2);
  CHECK(r.exit == 1);
  CHECK(r.rule == "pipeline-split.num-layers-divisible-by-pp");
  // 2 + embedding = 3
  r = mrtest::run(mrtest::with({"--pipeline-model-parallel-size", "2", "--account-for-embedding-in-pipeline-split"}),
                  kWs2);
  CHECK(r.rule == "pipeline-split.num-layers-divisible-by-pp");
  // 2 + loss = 3
  r = mrtest::run(mrtest::with({"--pipeline-model-parallel-size", "2", "--account-for-loss-in-pipeline-split"}), kWs2);
  CHECK(r.rule == "pipeline-split.num-layers-divisible-by-pp");

  // 3 + embedding = 4
  r = mrtest::run(mrtest::with({"--pipeline-model-parallel-size", "2", "--num-layers", "3",
                                "--account-for-embedding-in-pipeline-split"}),
                  kWs2);
  CHECK_PART_B_PASSES(r);
  // 2 + embedding + loss = 4
  r = mrtest::run(mrtest::with({"--pipeline-model-parallel-size", "2", "--account-for-embedding-in-pipeline-split",
                                "--account-for-loss-in-pipeline-split"}),
                  kWs2);
  CHECK_PART_B_PASSES(r);
  // uneven first/last stages skip the check
  r = mrtest::run(mrtest::with({"--pipeline-model-parallel-size", "2", "--num-layers", "3",
                                "--decoder-first-pipeline-num-layers", "1"}),
                  kWs2);
  CHECK(r.rule != "pipeline-split.num-layers-divisible-by-pp");
  // so does a hybrid pattern
  r = mrtest::run(mrtest::with({"--pipeline-model-parallel-size", "2", "--hybrid-layer-pattern", "MMM"}), kWs2);
  CHECK_PART_B_PASSES(r);
}

TEST_CASE("virtual-pipeline: layers per stage divisible by layers per virtual stage", "[part-b]") {
  // seed arguments.py:859
  auto r = mrtest::run(mrtest::with({"--pipeline-model-parallel-size", "2", "--num-layers", "4",
                                     "--num-layers-per-virtual-pipeline-stage", "3"}),
                       kWs2);
  CHECK(r.exit == 1);
  CHECK(r.rule == "virtual-pipeline.stage-layers-divisible");
  // 0 (Python's ZeroDivisionError)
  r = mrtest::run(mrtest::with({"--pipeline-model-parallel-size", "2", "--num-layers", "4",
                                "--num-layers-per-virtual-pipeline-stage", "0"}),
                  kWs2);
  CHECK(r.rule == "virtual-pipeline.stage-layers-divisible");

  r = mrtest::run(mrtest::with({"--pipeline-model-parallel-size", "2", "--num-layers", "4",
                                "--num-layers-per-virtual-pipeline-stage", "2"}),
                  kWs2);
  CHECK(r.exit == 0);
}

TEST_CASE("virtual-pipeline: the interleaved schedule's pipeline size", "[part-b]") {
  // seed arguments.py:889 (P2P overlap on, the default)
  auto r = mrtest::run(mrtest::with({"--num-virtual-stages-per-pipeline-rank", "2"}), kWs1);
  CHECK(r.exit == 1);
  CHECK(r.rule == "virtual-pipeline.interleaved-needs-pp-gt-1");
  r = mrtest::run(mrtest::with({"--hybrid-layer-pattern", "M|M"}), kWs1);  // 2 segments, PP 1 -> VPP 2
  CHECK(r.rule == "virtual-pipeline.interleaved-needs-pp-gt-1");
  r = mrtest::run(mrtest::with({"--pipeline-model-parallel-size", "2", "--num-layers", "4",
                                "--num-virtual-stages-per-pipeline-rank", "2"}),
                  kWs2);
  CHECK(r.exit == 0);

  // seed arguments.py:893 (--no-overlap-p2p-communication)
  r = mrtest::run(mrtest::with({"--pipeline-model-parallel-size", "2", "--num-virtual-stages-per-pipeline-rank", "2",
                                "--no-overlap-p2p-communication"}),
                  kWs2);
  CHECK(r.exit == 1);
  CHECK(r.rule == "virtual-pipeline.interleaved-without-p2p-overlap-needs-pp-gt-2");
  r = mrtest::run(mrtest::with({"--pipeline-model-parallel-size", "4", "--num-layers", "8",
                                "--num-virtual-stages-per-pipeline-rank", "2", "--no-overlap-p2p-communication"}),
                  kWs4);
  CHECK(r.exit == 0);
}

TEST_CASE("virtual-pipeline: non-interleaved schedule turns P2P overlap and param-gather alignment off", "[part-b]") {
  // seed arguments.py:898-905 (the notice is printed on rank 0 when PP > 1)
  auto r = mrtest::run(mrtest::with({"--pipeline-model-parallel-size", "2"}), kWs2);
  CHECK(r.exit == 0);
  CHECK(r.warned("virtual-pipeline.p2p-overlap-and-param-gather-alignment-off"));
  CHECK(r["overlap_p2p_comm"].as_bool() == false);
  CHECK(r["align_param_gather"].as_bool() == false);

  r = mrtest::run(mrtest::base_args(), kWs1);  // PP 1: switched off silently
  CHECK(r.exit == 0);
  CHECK_FALSE(r.warned("virtual-pipeline.p2p-overlap-and-param-gather-alignment-off"));
  CHECK(r["overlap_p2p_comm"].as_bool() == false);
  CHECK(r["align_param_gather"].as_bool() == false);

  r = mrtest::run(mrtest::with({"--pipeline-model-parallel-size", "2"}), {{"WORLD_SIZE", "2"}, {"RANK", "1"}});
  CHECK_FALSE(r.warned("virtual-pipeline.p2p-overlap-and-param-gather-alignment-off"));

  // Interleaved: both stay as given.
  r = mrtest::run(mrtest::with({"--pipeline-model-parallel-size", "2", "--num-layers", "4",
                                "--num-virtual-stages-per-pipeline-rank", "2"}),
                  kWs2);
  CHECK(r.exit == 0);
  CHECK_FALSE(r.warned("virtual-pipeline.p2p-overlap-and-param-gather-alignment-off"));
  CHECK(r["overlap_p2p_comm"].as_bool() == true);
  CHECK(r["align_param_gather"].as_bool() == true);
}

TEST_CASE("virtual-pipeline: derived virtual pipeline size", "[part-b]") {
  struct Case {
    Args extra;
    int pp;
    Value vpp;
  };
  const std::vector<Case> cases = {
      // seed arguments.py:837-839: stages // PP, 1 -> None ("Et*2|(tt|)*5t|tmL" has 8 stages)
      {{"--num-layers", "14", "--pipeline-model-parallel-layout", "Et*2|(tt|)*5t|tmL"}, 4, Value(2)},
      {{"--pipeline-model-parallel-layout", "Et|tL"}, 2, Value()},
      {{"--pipeline-model-parallel-layout", "E|t|t|L"}, 2, Value(2)},
      {{"--num-layers", "4", "--pipeline-model-parallel-layout", "(t|)*7tL"}, 2, Value(4)},
      // seed arguments.py:857-862: (layers [+1 +1]) // PP // layers-per-virtual-stage, 1 -> None
      {{"--num-layers", "4", "--num-layers-per-virtual-pipeline-stage", "1"}, 2, Value(2)},
      {{"--num-layers", "4", "--num-layers-per-virtual-pipeline-stage", "2"}, 2, Value()},
      {{"--num-layers", "12", "--num-layers-per-virtual-pipeline-stage", "1"}, 4, Value(3)},
      {{"--num-layers", "3", "--account-for-embedding-in-pipeline-split", "--num-layers-per-virtual-pipeline-stage",
        "1"},
       2,
       Value(2)},
      {{"--num-layers", "6", "--account-for-embedding-in-pipeline-split", "--account-for-loss-in-pipeline-split",
        "--num-layers-per-virtual-pipeline-stage", "2"},
       2,
       Value(2)},
      // seed arguments.py:864-866: --num-virtual-stages-per-pipeline-rank as is, 1 -> None
      {{"--num-virtual-stages-per-pipeline-rank", "3"}, 2, Value(3)},
      {{"--num-virtual-stages-per-pipeline-rank", "1"}, 2, Value()},
      // seed arguments.py:869-870: none of them -> None
      {{}, 2, Value()},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    CAPTURE(i);
    Args extra = cases[i].extra;
    extra.insert(extra.end(), {"--pipeline-model-parallel-size", std::to_string(cases[i].pp)});
    auto r = mrtest::run(mrtest::with(extra), Env{{"WORLD_SIZE", std::to_string(cases[i].pp)}});
    CHECK_PART_B_PASSES(r);
    CHECK(r["virtual_pipeline_model_parallel_size"] == cases[i].vpp);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// FSDP (seed 911-956)

namespace {
Args fsdp2(Args extra = {}) {
  Args a =
      mrtest::with({"--use-torch-fsdp2", "--no-gradient-accumulation-fusion", "--untie-embeddings-and-output-weights"});
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}
}  // namespace

TEST_CASE("fsdp: MoE shortcut connection", "[part-b]") {
  // seed arguments.py:916
  auto r = mrtest::run(mrtest::with({"--moe-shortcut-connection", "--use-megatron-fsdp"}), kWs1);
  CHECK(r.exit == 1);
  CHECK(r.rule == "fsdp.moe-shortcut-connection");
  r = mrtest::run(fsdp2({"--moe-shortcut-connection"}), kWs1);
  CHECK(r.rule == "fsdp.moe-shortcut-connection");

  r = mrtest::run(mrtest::with({"--moe-shortcut-connection"}), kWs1);
  CHECK_PART_B_PASSES(r);
}

TEST_CASE("torch-fsdp2: requirements", "[part-b]") {
  mr::TargetEnv old_torch;
  old_torch.torch_version = "2.3.1";
  auto r = mrtest::run(fsdp2(), kWs1, &old_torch);  // seed arguments.py:927
  CHECK(r.exit == 1);
  CHECK(r.rule == "torch-fsdp2.torch-version");
  mr::TargetEnv torch24;
  torch24.torch_version = "2.4.0";
  r = mrtest::run(fsdp2(), kWs1, &torch24);
  CHECK(r.exit == 0);

  struct Case {
    Args args;
    Env env;
    const char* rule;
  };
  const std::vector<Case> cases = {
      {fsdp2({"--pipeline-model-parallel-size", "2"}), kWs2, "torch-fsdp2.pipeline-parallel"},  // :929
      {fsdp2({"--expert-model-parallel-size", "2"}), kWs2, "torch-fsdp2.expert-parallel"},      // :931
      {mrtest::with({"--use-torch-fsdp2", "--untie-embeddings-and-output-weights"}), kWs1,
       "torch-fsdp2.gradient-accumulation-fusion"},                          // :933
      {fsdp2({"--ckpt-format", "torch"}), kWs1, "torch-fsdp2.ckpt-format"},  // :935
      {mrtest::with({"--use-torch-fsdp2", "--no-gradient-accumulation-fusion"}), kWs1,
       "torch-fsdp2.untied-embeddings"},              // :937
      {fsdp2({"--fp16"}), kWs1, "torch-fsdp2.fp16"},  // :939
      {fsdp2(), Env{{"WORLD_SIZE", "1"}, {"CUDA_DEVICE_MAX_CONNECTIONS", "1"}},
       "torch-fsdp2.cuda-device-max-connections"},  // :941
  };
  for (const auto& c : cases) {
    CAPTURE(c.rule);
    r = mrtest::run(c.args, c.env);
    CHECK(r.exit == 1);
    CHECK(r.rule == c.rule);
  }

  // Neighbours that pass.
  r = mrtest::run(fsdp2(), kWs1);
  CHECK(r.exit == 0);
  r = mrtest::run(fsdp2({"--ckpt-format", "torch_dcp"}), kWs1);
  CHECK(r.exit == 0);
  r = mrtest::run(fsdp2(), Env{{"WORLD_SIZE", "1"}, {"CUDA_DEVICE_MAX_CONNECTIONS", "8"}});
  CHECK(r.exit == 0);
  r = mrtest::run(fsdp2(), kWs2);  // data parallel 2 is fine
  CHECK(r.exit == 0);
  // Without --use-torch-fsdp2 none of this applies.
  r = mrtest::run(mrtest::with({"--ckpt-format", "torch", "--fp16"}), kWs1);
  CHECK_FALSE(is_part_b_rule(r.rule));
}

TEST_CASE("torch-fsdp2: FP8/FP4 param gather fallbacks", "[part-b]") {
  // seed arguments.py:944-949: TE >= 2.0 turns --fp8-param-gather off
  auto r = mrtest::run(fsdp2({"--fp8-param-gather"}), kWs1);
  CHECK_PART_B_PASSES(r);
  CHECK(r.warned("torch-fsdp2.fp8-param-gather-off"));
  CHECK(r["fp8_param_gather"].as_bool() == false);
  mr::TargetEnv te1;
  te1.te_version = "1.14.0";
  r = mrtest::run(fsdp2({"--fp8-param-gather"}), kWs1, &te1);
  CHECK_PART_B_PASSES(r);
  CHECK_FALSE(r.warned("torch-fsdp2.fp8-param-gather-off"));
  CHECK(r["fp8_param_gather"].as_bool() == true);
  // Not under FSDP2: untouched.
  r = mrtest::run(mrtest::with({"--fp8-param-gather"}), kWs1);
  CHECK_FALSE(r.warned("torch-fsdp2.fp8-param-gather-off"));
  CHECK(r["fp8_param_gather"].as_bool() == true);

  // seed arguments.py:950-955: TE < 2.7 turns --fp4-param-gather off
  mr::TargetEnv te26;
  te26.te_version = "2.6.0";
  r = mrtest::run(fsdp2({"--fp4-param-gather"}), kWs1, &te26);
  CHECK_PART_B_PASSES(r);
  CHECK(r.warned("torch-fsdp2.fp4-param-gather-off"));
  CHECK(r["fp4_param_gather"].as_bool() == false);
  mr::TargetEnv te27;
  te27.te_version = "2.7.0";
  r = mrtest::run(fsdp2({"--fp4-param-gather"}), kWs1, &te27);
  CHECK_FALSE(r.warned("torch-fsdp2.fp4-param-gather-off"));
  CHECK(r["fp4_param_gather"].as_bool() == true);
}
