// The validation chain's checks of parallelism: model-parallel sizes, GTP shards, pipeline layout and virtual
// pipelining, Megatron-FSDP and torch FSDP2, sequence and (dynamic) context parallelism, CUDA connections and
// streams, process groups, pipeline-parallel inference, delayed wgrad.
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
// seed 443-522: GTP shards, model size, data- and batch-parallel sizes, CP checks.

TEST_CASE("parallel sizes derived from world size", "[validate-parallelism]") {
  struct Case {
    const char* why;
    std::string world;
    std::vector<std::string> extra;
    int64_t weight_shards, gtp, seq_shards, gtp_seq, cp, dp, bp, tpp, etp;
  };
  const std::vector<Case> cases = {
      // seed arguments.py:449-522: defaults, world 1 -> everything 1.
      {"defaults", "1", {}, 1, 1, 1, 1, 1, 1, 1, 1, 1},
      // seed arguments.py:491: dp = 8 // (2*1*1*1) = 4; seq shards = 1 without --sequence-parallel (seed 456).
      {"tp2", "8", {"--tensor-model-parallel-size", "2"}, 2, 1, 1, 1, 1, 4, 4, 1, 2},
      // seed arguments.py:456: with --sequence-parallel TP counts as sequence shards -> 2, factor 1.
      {"tp2 sp", "8", {"--tensor-model-parallel-size", "2", "--sequence-parallel"}, 2, 1, 2, 1, 1, 4, 4, 1, 2},
      // seed arguments.py:490-492: pp 2, cp 2 -> dp = bp = 8 // 4 = 2; transformer pp = 2.
      {"pp2 cp2", "8", {"--pipeline-model-parallel-size", "2", "--context-parallel-size", "2"},
       1, 1, 1, 1, 2, 2, 2, 2, 1},
      // seed arguments.py:449 + 464: weight shards 4 over tp 2 -> gtp 2; total = 2*1*1*2 = 4; dp = 2;
      // bp = 8 // (2*1*1) = 4 (GTP ranks take separate samples).
      {"gtp2", "8", {"--tensor-model-parallel-size", "2", "--tensor-parallel-num-weight-shards", "4"},
       4, 2, 1, 1, 1, 2, 4, 1, 2},
      // seed arguments.py:456-472: sequence shards 2 over sp size 1 -> factor 2 divides gtp 2; CP becomes 1*2;
      // total = 1*1*1*2 = 2 -> dp 4; bp = 8 // (1*1*2) = 4.
      {"gtp2 seq2", "8", {"--tensor-parallel-num-weight-shards", "2", "--tensor-parallel-num-sequence-shards", "2"},
       2, 2, 2, 2, 2, 4, 4, 1, 1},
      // tp 2 + sp, weight shards 8 -> gtp 4; sequence shards 4 -> factor 2; total = 2*1*1*4 = 8 -> dp 1;
      // CP 2; bp = 8 // (2*1*2) = 2.
      {"tp2 sp gtp4 seq4", "8",
       {"--tensor-model-parallel-size", "2", "--sequence-parallel", "--tensor-parallel-num-weight-shards", "8",
        "--tensor-parallel-num-sequence-shards", "4"},
       8, 4, 4, 2, 2, 1, 2, 1, 2},
      // seed arguments.py:521-522: an explicit --expert-tensor-parallel-size is kept.
      {"etp kept", "8", {"--tensor-model-parallel-size", "2", "--expert-tensor-parallel-size", "1"},
       2, 1, 1, 1, 1, 4, 4, 1, 1},
  };
  for (const Case& c : cases) {
    INFO(c.why);
    auto r = run(with(c.extra), {{"WORLD_SIZE", c.world}});
    CHECK(passes_opening(r));
    CHECK(r["tensor_parallel_num_weight_shards"].as_int() == c.weight_shards);
    CHECK(r["gtp_weight_remat_size"].as_int() == c.gtp);
    CHECK(r["tensor_parallel_num_sequence_shards"].as_int() == c.seq_shards);
    CHECK(r["gtp_remat_num_sequence_shards"].as_int() == c.gtp_seq);
    CHECK(r["context_parallel_size"].as_int() == c.cp);
    CHECK(r["data_parallel_size"].as_int() == c.dp);
    CHECK(r["batch_parallel_size"].as_int() == c.bp);
    CHECK(r["transformer_pipeline_model_parallel_size"].as_int() == c.tpp);
    CHECK(r["expert_tensor_parallel_size"].as_int() == c.etp);
  }
}

TEST_CASE("--tensor-parallel-num-weight-shards is a multiple of TP, at least TP", "[validate-parallelism]") {
  // seed arguments.py:449 -> resolve_tensor_parallel_weight_shards
  CHECK(fails_with(run(with({"--tensor-model-parallel-size", "2", "--tensor-parallel-num-weight-shards", "1"}),
                       kWorld8),
                   "parallel.weight-shards-at-least-tp"));
  CHECK(fails_with(run(with({"--tensor-model-parallel-size", "2", "--tensor-parallel-num-weight-shards", "3"}),
                       kWorld8),
                   "parallel.weight-shards-divisible-by-tp"));
  CHECK(passes_opening(run(with({"--tensor-model-parallel-size", "2", "--tensor-parallel-num-weight-shards", "2"}),
                          kWorld8)));
}

TEST_CASE("--tensor-parallel-num-sequence-shards rules", "[validate-parallelism]") {
  // seed arguments.py:456 -> resolve_tensor_parallel_sequence_shards (stand-in: see model_parallel_sizes.cpp)
  // 3 is not a multiple of the sequence-parallel size 2.
  CHECK(fails_with(run(with({"--tensor-model-parallel-size", "2", "--sequence-parallel",
                             "--tensor-parallel-num-sequence-shards", "3"}),
                       kWorld8),
                   "parallel.sequence-shards-divisible-by-sp"));
  // 1 is below the sequence-parallel size 2.
  CHECK(fails_with(run(with({"--tensor-model-parallel-size", "2", "--sequence-parallel",
                             "--tensor-parallel-num-sequence-shards", "1"}),
                       kWorld8),
                   "parallel.sequence-shards-divisible-by-sp"));
  // TP 2 without --sequence-parallel: sp size 1, factor 2 > 1 needs sequence parallelism.
  CHECK(fails_with(run(with({"--tensor-model-parallel-size", "2", "--tensor-parallel-num-weight-shards", "4",
                             "--tensor-parallel-num-sequence-shards", "2"}),
                       kWorld8),
                   "parallel.sequence-shards-need-sequence-parallel"));
  // Factor 2 with GTP weight-remat size 1 (no weight shards): 1 % 2 != 0.
  CHECK(fails_with(run(with({"--tensor-parallel-num-sequence-shards", "2"}), kWorld8),
                   "parallel.sequence-shards-divide-weight-remat"));
  // Neighbour: the same with --sequence-parallel and enough weight shards passes.
  CHECK(passes_opening(run(with({"--tensor-model-parallel-size", "2", "--sequence-parallel",
                                "--tensor-parallel-num-weight-shards", "4", "--tensor-parallel-num-sequence-shards",
                                "4"}),
                          kWorld8)));
}

TEST_CASE("GTP sequence sharding restrictions", "[validate-parallelism]") {
  // seed arguments.py:473-479: only when the sequence-shard factor is above 1.
  const std::vector<std::string> gtp_seq = {"--tensor-parallel-num-weight-shards", "2",
                                            "--tensor-parallel-num-sequence-shards", "2"};
  auto add = [&](std::vector<std::string> extra) {
    auto a = gtp_seq;
    a.insert(a.end(), extra.begin(), extra.end());
    return with(a);
  };
  CHECK(fails_with(run(add({"--ckpt-format", "torch"}), kWorld8), "parallel.gtp-sequence-needs-torch-dist"));
  CHECK(fails_with(run(add({"--use-torch-fsdp2"}), kWorld8), "parallel.gtp-sequence-no-fsdp"));
  CHECK(fails_with(run(add({"--use-megatron-fsdp"}), kWorld8), "parallel.gtp-sequence-no-fsdp"));
  CHECK(fails_with(run(add({"--use-tp-pp-dp-mapping"}), kWorld8), "parallel.gtp-sequence-no-tp-pp-dp-mapping"));
  CHECK(passes_opening(run(add({}), kWorld8)));
  // Without sequence shards the same flags are none of model-parallel-sizes' business here.
  CHECK(passes_opening(run(with({"--tensor-parallel-num-weight-shards", "2", "--use-tp-pp-dp-mapping"}), kWorld8)));
}

TEST_CASE("world size must be a multiple of the total model size", "[validate-parallelism]") {
  // seed arguments.py:482 validate_args
  auto r = run(with({"--tensor-model-parallel-size", "3"}), kWorld8);
  CHECK(fails_with(r, "parallel.world-size-divisible"));
  // The GTP weight-remat size counts: tp 2 x gtp 8 = 16 does not divide 8.
  r = run(with({"--tensor-model-parallel-size", "2", "--tensor-parallel-num-weight-shards", "16"}), kWorld8);
  CHECK(fails_with(r, "parallel.world-size-divisible"));
  // TP 0: Python's modulo by zero raises.
  CHECK(fails_with(run(with({"--tensor-model-parallel-size", "0"}), kWorld8), "parallel.world-size-divisible"));
  r = run(with({"--tensor-model-parallel-size", "2"}), kWorld8);
  CHECK(passes_opening(r));
  CHECK(r["data_parallel_size"].as_int() == 4);
}

TEST_CASE("--attention-backend local needs --spec local", "[validate-parallelism]") {
  // seed arguments.py:486-487 validate_args
  CHECK(fails_with(run(with({"--attention-backend", "local"}), kWorld1),
                   "parallel.local-attention-backend-needs-local-spec"));
  CHECK(fails_with(run(with({"--attention-backend", "local", "--spec", "my.module", "fn"}), kWorld1),
                   "parallel.local-attention-backend-needs-local-spec"));
  CHECK(passes_opening(run(with({"--attention-backend", "local", "--spec", "local"}), kWorld1)));
  CHECK(passes_opening(run(with({"--attention-backend", "flash"}), kWorld1)));
}

TEST_CASE("hierarchical context-parallel sizes", "[validate-parallelism]") {
  // seed arguments.py:514-516: product must equal the CP size.
  CHECK(fails_with(run(with({"--context-parallel-size", "4", "--hierarchical-context-parallel-sizes", "2", "3"}),
                       kWorld8),
                   "parallel.hierarchical-cp-product"));
  CHECK(passes_opening(run(with({"--context-parallel-size", "4", "--hierarchical-context-parallel-sizes", "2", "2"}),
                          kWorld8)));
  // seed arguments.py:517-519: a2a+p2p needs the hierarchy.
  CHECK(fails_with(run(with({"--context-parallel-size", "4", "--cp-comm-type", "a2a+p2p"}), kWorld8),
                   "parallel.a2a-p2p-needs-hierarchical-cp"));
  CHECK(passes_opening(run(with({"--context-parallel-size", "4", "--cp-comm-type", "a2a+p2p",
                                "--hierarchical-context-parallel-sizes", "2", "2"}),
                          kWorld8)));
}

// ---------------------------------------------------------------------------------------------------------------
// Virtual pipeline / --pipeline-model-parallel-layout (seed 814-909)

TEST_CASE("pipeline-layout: unrolling like the Python regular expressions", "[validate-parallelism]") {
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

TEST_CASE("virtual-pipeline: one way of asking for virtual pipelining", "[validate-parallelism]") {
  // seed arguments.py:815
  auto r = mrtest::run(
      mrtest::with({"--num-layers-per-virtual-pipeline-stage", "1", "--num-virtual-stages-per-pipeline-rank", "2"}),
      kWorld1);
  CHECK(r.exit == 1);
  CHECK(r.rule == "virtual-pipeline.one-option");
  r = mrtest::run(
      mrtest::with({"--num-virtual-stages-per-pipeline-rank", "2", "--pipeline-model-parallel-layout", "Et|tL"}),
      kWorld1);
  CHECK(r.rule == "virtual-pipeline.one-option");

  r = mrtest::run(mrtest::with({"--pipeline-model-parallel-size", "2", "--num-layers", "4",
                                "--num-virtual-stages-per-pipeline-rank", "2"}),
                  kWorld2);
  CHECK(r.exit == 0);
}

TEST_CASE("pipeline-layout: characters, size and stage count", "[validate-parallelism]") {
  // PipelineParallelLayerLayout.parse_str_to_list asserts on unknown characters (seed arguments.py:831)
  auto r = mrtest::run(mrtest::with({"--pipeline-model-parallel-layout", "Etx|tL"}), kWorld1);
  CHECK(r.exit == 1);
  CHECK(r.rule == "pipeline-layout.invalid-layer-character");
  r = mrtest::run(mrtest::with({"--pipeline-model-parallel-layout", "Et*2 tL"}), kWorld1);
  CHECK(r.rule == "pipeline-layout.invalid-layer-character");
  r = mrtest::run(mrtest::with({"--pipeline-model-parallel-layout", "t*99999999999"}), kWorld1);
  CHECK(r.exit == 1);
  CHECK(r.rule == "pipeline-layout.too-large");

  // seed arguments.py:832: stage count divisible by PP
  r = mrtest::run(mrtest::with({"--pipeline-model-parallel-size", "2", "--pipeline-model-parallel-layout", "Et|t|tL"}),
                  kWorld2);
  CHECK(r.exit == 1);
  CHECK(r.rule == "pipeline-layout.stages-divisible-by-pp");

  r = mrtest::run(mrtest::with({"--pipeline-model-parallel-size", "2", "--pipeline-model-parallel-layout", "Et|tL"}),
                  kWorld2);
  CHECK_BATCH_OR_LAYOUT_PASSES(r);
}

TEST_CASE("virtual-pipeline: uneven stages need --num-virtual-stages-per-pipeline-rank", "[validate-parallelism]") {
  // seed arguments.py:842
  auto r = mrtest::run(mrtest::with({"--pipeline-model-parallel-size", "2", "--num-layers-per-virtual-pipeline-stage",
                                     "1", "--decoder-first-pipeline-num-layers", "1"}),
                       kWorld2);
  CHECK(r.exit == 1);
  CHECK(r.rule == "virtual-pipeline.uneven-needs-num-virtual-stages");
  r = mrtest::run(mrtest::with({"--pipeline-model-parallel-size", "2", "--num-layers-per-virtual-pipeline-stage", "1",
                                "--decoder-last-pipeline-num-layers", "1"}),
                  kWorld2);
  CHECK(r.rule == "virtual-pipeline.uneven-needs-num-virtual-stages");

  r = mrtest::run(mrtest::with({"--pipeline-model-parallel-size", "2", "--num-virtual-stages-per-pipeline-rank", "2",
                                "--decoder-first-pipeline-num-layers", "1", "--num-layers", "3"}),
                  kWorld2);
  CHECK_BATCH_OR_LAYOUT_PASSES(r);
}

TEST_CASE("virtual-pipeline: layers per virtual stage needs a layer count", "[validate-parallelism]") {
  // seed arguments.py:845-848 (Megatron's None arithmetic raises TypeError)
  auto r = mrtest::run(
      without("--num-layers", {"--pipeline-model-parallel-size", "2", "--num-layers-per-virtual-pipeline-stage", "1"}),
      kWorld2);
  CHECK(r.exit == 1);
  CHECK(r.rule == "virtual-pipeline.num-layers-missing");

  // --decoder-num-layers stands in: 4 / PP 2 = 2 per stage, / 1 -> VPP 2
  r = mrtest::run(
      without("--num-layers", {"--pipeline-model-parallel-size", "2", "--num-layers-per-virtual-pipeline-stage", "1",
                               "--decoder-num-layers", "4"}),
      kWorld2);
  CHECK_BATCH_OR_LAYOUT_PASSES(r);
  CHECK(r["virtual_pipeline_model_parallel_size"].as_int() == 2);
}

TEST_CASE("pipeline-split: layers divisible by the pipeline size", "[validate-parallelism]") {
  // seed arguments.py:855 (virtual pipeline) and :884 (no virtual pipeline)
  auto r = mrtest::run(mrtest::with({"--pipeline-model-parallel-size", "2", "--num-layers", "3",
                                     "--num-layers-per-virtual-pipeline-stage", "1"}),
                       kWorld2);
  CHECK(r.exit == 1);
  CHECK(r.rule == "pipeline-split.num-layers-divisible-by-pp");
  r = mrtest::run(mrtest::with({"--pipeline-model-parallel-size", "2", "--num-layers", "3"}), kWorld2);
  CHECK(r.exit == 1);
  CHECK(r.rule == "pipeline-split.num-layers-divisible-by-pp");
  // 2 + embedding = 3
  r = mrtest::run(mrtest::with({"--pipeline-model-parallel-size", "2", "--account-for-embedding-in-pipeline-split"}),
                  kWorld2);
  CHECK(r.rule == "pipeline-split.num-layers-divisible-by-pp");
  // 2 + loss = 3
  r = mrtest::run(mrtest::with({"--pipeline-model-parallel-size", "2", "--account-for-loss-in-pipeline-split"}),
                  kWorld2);
  CHECK(r.rule == "pipeline-split.num-layers-divisible-by-pp");

  // 3 + embedding = 4
  r = mrtest::run(mrtest::with({"--pipeline-model-parallel-size", "2", "--num-layers", "3",
                                "--account-for-embedding-in-pipeline-split"}),
                  kWorld2);
  CHECK_BATCH_OR_LAYOUT_PASSES(r);
  // 2 + embedding + loss = 4
  r = mrtest::run(mrtest::with({"--pipeline-model-parallel-size", "2", "--account-for-embedding-in-pipeline-split",
                                "--account-for-loss-in-pipeline-split"}),
                  kWorld2);
  CHECK_BATCH_OR_LAYOUT_PASSES(r);
  // uneven first/last stages skip the check
  r = mrtest::run(mrtest::with({"--pipeline-model-parallel-size", "2", "--num-layers", "3",
                                "--decoder-first-pipeline-num-layers", "1"}),
                  kWorld2);
  CHECK(r.rule != "pipeline-split.num-layers-divisible-by-pp");
  // so does a hybrid pattern
  r = mrtest::run(mrtest::with({"--pipeline-model-parallel-size", "2", "--hybrid-layer-pattern", "MMM"}), kWorld2);
  CHECK_BATCH_OR_LAYOUT_PASSES(r);
}

TEST_CASE("virtual-pipeline: layers per stage divisible by layers per virtual stage", "[validate-parallelism]") {
  // seed arguments.py:859
  auto r = mrtest::run(mrtest::with({"--pipeline-model-parallel-size", "2", "--num-layers", "4",
                                     "--num-layers-per-virtual-pipeline-stage", "3"}),
                       kWorld2);
  CHECK(r.exit == 1);
  CHECK(r.rule == "virtual-pipeline.stage-layers-divisible");
  // 0 (Python's ZeroDivisionError)
  r = mrtest::run(mrtest::with({"--pipeline-model-parallel-size", "2", "--num-layers", "4",
                                "--num-layers-per-virtual-pipeline-stage", "0"}),
                  kWorld2);
  CHECK(r.rule == "virtual-pipeline.stage-layers-divisible");

  r = mrtest::run(mrtest::with({"--pipeline-model-parallel-size", "2", "--num-layers", "4",
                                "--num-layers-per-virtual-pipeline-stage", "2"}),
                  kWorld2);
  CHECK(r.exit == 0);
}

TEST_CASE("virtual-pipeline: the interleaved schedule's pipeline size", "[validate-parallelism]") {
  // seed arguments.py:889 (P2P overlap on, the default)
  auto r = mrtest::run(mrtest::with({"--num-virtual-stages-per-pipeline-rank", "2"}), kWorld1);
  CHECK(r.exit == 1);
  CHECK(r.rule == "virtual-pipeline.interleaved-needs-pp-gt-1");
  r = mrtest::run(mrtest::with({"--hybrid-layer-pattern", "M|M"}), kWorld1);  // 2 segments, PP 1 -> VPP 2
  CHECK(r.rule == "virtual-pipeline.interleaved-needs-pp-gt-1");
  r = mrtest::run(mrtest::with({"--pipeline-model-parallel-size", "2", "--num-layers", "4",
                                "--num-virtual-stages-per-pipeline-rank", "2"}),
                  kWorld2);
  CHECK(r.exit == 0);

  // seed arguments.py:893 (--no-overlap-p2p-communication)
  r = mrtest::run(mrtest::with({"--pipeline-model-parallel-size", "2", "--num-virtual-stages-per-pipeline-rank", "2",
                                "--no-overlap-p2p-communication"}),
                  kWorld2);
  CHECK(r.exit == 1);
  CHECK(r.rule == "virtual-pipeline.interleaved-without-p2p-overlap-needs-pp-gt-2");
  r = mrtest::run(mrtest::with({"--pipeline-model-parallel-size", "4", "--num-layers", "8",
                                "--num-virtual-stages-per-pipeline-rank", "2", "--no-overlap-p2p-communication"}),
                  kWorld4);
  CHECK(r.exit == 0);
}

TEST_CASE("virtual-pipeline: non-interleaved schedule turns P2P overlap and param-gather alignment off",
          "[validate-parallelism]") {
  // seed arguments.py:898-905 (the notice is printed on rank 0 when PP > 1)
  auto r = mrtest::run(mrtest::with({"--pipeline-model-parallel-size", "2"}), kWorld2);
  CHECK(r.exit == 0);
  CHECK(r.warned("virtual-pipeline.p2p-overlap-and-param-gather-alignment-off"));
  CHECK(r["overlap_p2p_comm"].as_bool() == false);
  CHECK(r["align_param_gather"].as_bool() == false);

  r = mrtest::run(mrtest::base_args(), kWorld1);  // PP 1: switched off silently
  CHECK(r.exit == 0);
  CHECK_FALSE(r.warned("virtual-pipeline.p2p-overlap-and-param-gather-alignment-off"));
  CHECK(r["overlap_p2p_comm"].as_bool() == false);
  CHECK(r["align_param_gather"].as_bool() == false);

  r = mrtest::run(mrtest::with({"--pipeline-model-parallel-size", "2"}), {{"WORLD_SIZE", "2"}, {"RANK", "1"}});
  CHECK_FALSE(r.warned("virtual-pipeline.p2p-overlap-and-param-gather-alignment-off"));

  // Interleaved: both stay as given.
  r = mrtest::run(mrtest::with({"--pipeline-model-parallel-size", "2", "--num-layers", "4",
                                "--num-virtual-stages-per-pipeline-rank", "2"}),
                  kWorld2);
  CHECK(r.exit == 0);
  CHECK_FALSE(r.warned("virtual-pipeline.p2p-overlap-and-param-gather-alignment-off"));
  CHECK(r["overlap_p2p_comm"].as_bool() == true);
  CHECK(r["align_param_gather"].as_bool() == true);
}

TEST_CASE("virtual-pipeline: derived virtual pipeline size", "[validate-parallelism]") {
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
    CHECK_BATCH_OR_LAYOUT_PASSES(r);
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

TEST_CASE("fsdp: MoE shortcut connection", "[validate-parallelism]") {
  // seed arguments.py:916
  auto r = mrtest::run(mrtest::with({"--moe-shortcut-connection", "--use-megatron-fsdp"}), kWorld1);
  CHECK(r.exit == 1);
  CHECK(r.rule == "fsdp.moe-shortcut-connection");
  r = mrtest::run(fsdp2({"--moe-shortcut-connection"}), kWorld1);
  CHECK(r.rule == "fsdp.moe-shortcut-connection");

  r = mrtest::run(mrtest::with({"--moe-shortcut-connection"}), kWorld1);
  CHECK_BATCH_OR_LAYOUT_PASSES(r);
}

TEST_CASE("torch-fsdp2: requirements", "[validate-parallelism]") {
  mr::TargetEnv old_torch;
  old_torch.torch_version = "2.3.1";
  auto r = mrtest::run(fsdp2(), kWorld1, &old_torch);  // seed arguments.py:927
  CHECK(r.exit == 1);
  CHECK(r.rule == "torch-fsdp2.torch-version");
  mr::TargetEnv torch24;
  torch24.torch_version = "2.4.0";
  r = mrtest::run(fsdp2(), kWorld1, &torch24);
  CHECK(r.exit == 0);

  struct Case {
    Args args;
    Env env;
    const char* rule;
  };
  const std::vector<Case> cases = {
      {fsdp2({"--pipeline-model-parallel-size", "2"}), kWorld2, "torch-fsdp2.pipeline-parallel"},  // :929
      {fsdp2({"--expert-model-parallel-size", "2"}), kWorld2, "torch-fsdp2.expert-parallel"},      // :931
      {mrtest::with({"--use-torch-fsdp2", "--untie-embeddings-and-output-weights"}), kWorld1,
       "torch-fsdp2.gradient-accumulation-fusion"},                          // :933
      {fsdp2({"--ckpt-format", "torch"}), kWorld1, "torch-fsdp2.ckpt-format"},  // :935
      {mrtest::with({"--use-torch-fsdp2", "--no-gradient-accumulation-fusion"}), kWorld1,
       "torch-fsdp2.untied-embeddings"},              // :937
      {fsdp2({"--fp16"}), kWorld1, "torch-fsdp2.fp16"},  // :939
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
  r = mrtest::run(fsdp2(), kWorld1);
  CHECK(r.exit == 0);
  r = mrtest::run(fsdp2({"--ckpt-format", "torch_dcp"}), kWorld1);
  CHECK(r.exit == 0);
  r = mrtest::run(fsdp2(), Env{{"WORLD_SIZE", "1"}, {"CUDA_DEVICE_MAX_CONNECTIONS", "8"}});
  CHECK(r.exit == 0);
  r = mrtest::run(fsdp2(), kWorld2);  // data parallel 2 is fine
  CHECK(r.exit == 0);
  // Without --use-torch-fsdp2 none of this applies.
  r = mrtest::run(mrtest::with({"--ckpt-format", "torch", "--fp16"}), kWorld1);
  CHECK_FALSE(is_batch_or_layout_rule(r.rule));
}

TEST_CASE("torch-fsdp2: FP8/FP4 param gather fallbacks", "[validate-parallelism]") {
  // seed arguments.py:944-949: TE >= 2.0 turns --fp8-param-gather off
  auto r = mrtest::run(fsdp2({"--fp8-param-gather"}), kWorld1);
  CHECK_BATCH_OR_LAYOUT_PASSES(r);
  CHECK(r.warned("torch-fsdp2.fp8-param-gather-off"));
  CHECK(r["fp8_param_gather"].as_bool() == false);
  mr::TargetEnv te1;
  te1.te_version = "1.14.0";
  r = mrtest::run(fsdp2({"--fp8-param-gather"}), kWorld1, &te1);
  CHECK_BATCH_OR_LAYOUT_PASSES(r);
  CHECK_FALSE(r.warned("torch-fsdp2.fp8-param-gather-off"));
  CHECK(r["fp8_param_gather"].as_bool() == true);
  // Not under FSDP2: untouched.
  r = mrtest::run(mrtest::with({"--fp8-param-gather"}), kWorld1);
  CHECK_FALSE(r.warned("torch-fsdp2.fp8-param-gather-off"));
  CHECK(r["fp8_param_gather"].as_bool() == true);

  // seed arguments.py:950-955: TE < 2.7 turns --fp4-param-gather off
  mr::TargetEnv te26;
  te26.te_version = "2.6.0";
  r = mrtest::run(fsdp2({"--fp4-param-gather"}), kWorld1, &te26);
  CHECK_BATCH_OR_LAYOUT_PASSES(r);
  CHECK(r.warned("torch-fsdp2.fp4-param-gather-off"));
  CHECK(r["fp4_param_gather"].as_bool() == false);
  mr::TargetEnv te27;
  te27.te_version = "2.7.0";
  r = mrtest::run(fsdp2({"--fp4-param-gather"}), kWorld1, &te27);
  CHECK_FALSE(r.warned("torch-fsdp2.fp4-param-gather-off"));
  CHECK(r["fp4_param_gather"].as_bool() == true);
}

// ---------------------------------------------------------------------------------------------------------
// MoE megakernel and Megatron-FSDP (seed 996-1078)

TEST_CASE("moe-megakernel.fsdp-unsupported", "[validate-parallelism]") {
  auto bad = upto_mixed_precision_with(plus({"--moe-megakernel-backend", "mok"}, kMegatronFsdp));
  CHECK(bad.exit == 1);
  CHECK(bad.rule == "moe-megakernel.fsdp-unsupported");
  CHECK(upto_mixed_precision_with({"--moe-megakernel-backend", "mok"}).exit == 0);
}

TEST_CASE("Megatron-FSDP derivations", "[validate-parallelism]") {
  // seed arguments.py:1003 validate_args: use_custom_fsdp appears only with Megatron-FSDP
  auto plain = upto_mixed_precision_with({"--reuse-grad-buf-for-mxfp8-param-ag"});
  REQUIRE(plain.exit == 0);
  CHECK_FALSE(plain.has("use_custom_fsdp"));
  CHECK(plain["reuse_grad_buf_for_mxfp8_param_ag"] == mr::Value(true));

  auto fsdp = upto_mixed_precision_with(plus(kMegatronFsdp, {"--reuse-grad-buf-for-mxfp8-param-ag"}));
  REQUIRE(fsdp.exit == 0);
  CHECK(fsdp["use_custom_fsdp"] == mr::Value(true));
  // seed arguments.py:1018 validate_args
  CHECK(fsdp["reuse_grad_buf_for_mxfp8_param_ag"] == mr::Value(false));
  CHECK(fsdp["fsdp_double_buffer"] == mr::Value(false));
  CHECK(fsdp["fsdp_manual_registration"] == mr::Value(false));

  // seed arguments.py:1066-1068 validate_args: the max-pool allocator is a double buffer
  auto pool = upto_mixed_precision_with(plus(kMegatronFsdp, {"--megatron-fsdp-max-pool-double-buffer"}));
  REQUIRE(pool.exit == 0);
  CHECK(pool["fsdp_double_buffer"] == mr::Value(true));
  CHECK(pool["fsdp_manual_registration"] == mr::Value(false));
}

TEST_CASE("megatron-fsdp.v2-no-distributed-optimizer", "[validate-parallelism]") {
  auto bad = upto_mixed_precision_with(plus(kMegatronFsdp, {"--megatron-fsdp-version", "2"}));
  CHECK(bad.exit == 1);
  CHECK(bad.rule == "megatron-fsdp.v2-no-distributed-optimizer");
  // seed arguments.py:1005-1007 validate_args: v2 leaves the distributed optimizer off
  auto ok = upto_mixed_precision_with(
      {"--use-megatron-fsdp", "--ckpt-format", "fsdp_dtensor", "--megatron-fsdp-version", "2"});
  CHECK(ok.exit == 0);
  CHECK(ok["use_distributed_optimizer"] == mr::Value(false));
  CHECK_FALSE(ok.warned("megatron-fsdp.v1-enables-distributed-optimizer"));
}

TEST_CASE("megatron-fsdp.v1-enables-distributed-optimizer", "[validate-parallelism]") {
  // seed arguments.py:1008-1016 validate_args: v1 turns the distributed optimizer on, with a warning
  auto w = upto_mixed_precision_with({"--use-megatron-fsdp", "--ckpt-format", "fsdp_dtensor"});
  CHECK(w.exit == 0);
  CHECK(w.warned("megatron-fsdp.v1-enables-distributed-optimizer"));
  CHECK(w["use_distributed_optimizer"] == mr::Value(true));
  auto quiet = upto_mixed_precision_with(kMegatronFsdp);
  CHECK(quiet.exit == 0);
  CHECK_FALSE(quiet.warned("megatron-fsdp.v1-enables-distributed-optimizer"));
}

TEST_CASE("megatron-fsdp.single-grouped-moe-params", "[validate-parallelism]") {
  for (const char* flag : {"--moe-single-grouped-weight", "--moe-single-grouped-bias"}) {
    INFO(flag);
    auto bad = upto_mixed_precision_with(plus(kMegatronFsdp, {flag}));
    CHECK(bad.exit == 1);
    CHECK(bad.rule == "megatron-fsdp.single-grouped-moe-params");
    CHECK(upto_mixed_precision_with({flag}).rule != "megatron-fsdp.single-grouped-moe-params");
  }
  CHECK(upto_mixed_precision_with(kMegatronFsdp).exit == 0);
}

TEST_CASE("megatron-fsdp.optimizer-supported", "[validate-parallelism]") {
  auto bad = upto_mixed_precision_with(plus(kMegatronFsdp, {"--optimizer", "lion"}));
  CHECK(bad.exit == 1);
  CHECK(bad.rule == "megatron-fsdp.optimizer-supported");
  CHECK(upto_mixed_precision_with(plus(kMegatronFsdp, {"--optimizer", "sgd"})).exit == 0);
  CHECK(upto_mixed_precision_with(plus(kMegatronFsdp, {"--optimizer", "adam"})).exit == 0);
}

TEST_CASE("megatron-fsdp.grad-accumulation-fusion", "[validate-parallelism]") {
  // Default strategy optim_grads_params and fusion on: warned.
  CHECK(upto_mixed_precision_with(kMegatronFsdp).warned("megatron-fsdp.grad-accumulation-fusion"));
  // An expert strategy that shards gradients counts as well.
  CHECK(upto_mixed_precision_with(plus(kMegatronFsdp, {"--data-parallel-sharding-strategy", "no_shard",
                                    "--expert-data-parallel-sharding-strategy", "optim_grads"}))
            .warned("megatron-fsdp.grad-accumulation-fusion"));
  // Neighbours: fusion off, or no strategy shards gradients.
  CHECK_FALSE(upto_mixed_precision_with(plus(kMegatronFsdp, {"--no-gradient-accumulation-fusion"}))
                  .warned("megatron-fsdp.grad-accumulation-fusion"));
  CHECK_FALSE(upto_mixed_precision_with(plus(kMegatronFsdp, {"--data-parallel-sharding-strategy", "optim"}))
                  .warned("megatron-fsdp.grad-accumulation-fusion"));
  CHECK_FALSE(
      upto_mixed_precision_with({"--use-distributed-optimizer"}).warned("megatron-fsdp.grad-accumulation-fusion"));
}

TEST_CASE("megatron-fsdp.weight-hash-check-unsupported", "[validate-parallelism]") {
  auto bad = upto_mixed_precision_with(plus(kMegatronFsdp, {"--check-weight-hash-across-dp-replicas-interval", "10"}));
  CHECK(bad.exit == 1);
  CHECK(bad.rule == "megatron-fsdp.weight-hash-check-unsupported");
  auto expert = upto_mixed_precision_with(plus(kMegatronFsdp, {"--check-weight-hash-across-dp-replicas-interval", "10",
                                            "--data-parallel-sharding-strategy", "optim",
                                            "--expert-data-parallel-sharding-strategy", "optim_grads_params"}));
  CHECK(expert.rule == "megatron-fsdp.weight-hash-check-unsupported");
  CHECK(upto_mixed_precision_with(plus(kMegatronFsdp, {"--check-weight-hash-across-dp-replicas-interval", "10",
                                    "--data-parallel-sharding-strategy", "optim_grads"}))
            .exit == 0);
}

TEST_CASE("megatron-fsdp.cuda-device-max-connections", "[validate-parallelism]") {
  auto bad = upto_mixed_precision_with(kMegatronFsdp, {{"CUDA_DEVICE_MAX_CONNECTIONS", "1"}});
  CHECK(bad.exit == 1);
  CHECK(bad.rule == "megatron-fsdp.cuda-device-max-connections");
  CHECK(upto_mixed_precision_with(kMegatronFsdp, {{"CUDA_DEVICE_MAX_CONNECTIONS", "8"}}).exit == 0);
  CHECK(upto_mixed_precision_with(kMegatronFsdp).exit == 0);  // unset
  CHECK(upto_mixed_precision_with({}, {{"CUDA_DEVICE_MAX_CONNECTIONS", "1"}}).exit == 0);  // no FSDP
}

TEST_CASE("megatron-fsdp.ckpt-format", "[validate-parallelism]") {
  auto bad = upto_mixed_precision_with({"--use-megatron-fsdp", "--use-distributed-optimizer"});  // default torch_dist
  CHECK(bad.exit == 1);
  CHECK(bad.rule == "megatron-fsdp.ckpt-format");
  CHECK(upto_mixed_precision_with(kMegatronFsdp).exit == 0);
}

TEST_CASE("megatron-fsdp.nccl-ub-double-buffer", "[validate-parallelism]") {
  // seed arguments.py:1059-1064 validate_args: --use-nccl-ub turns both FSDP buffers options on
  auto w = upto_mixed_precision_with(plus(kMegatronFsdp, {"--use-nccl-ub"}));
  CHECK(w.exit == 0);
  CHECK(w.warned("megatron-fsdp.nccl-ub-double-buffer"));
  CHECK(w["fsdp_manual_registration"] == mr::Value(true));
  CHECK(w["fsdp_double_buffer"] == mr::Value(true));
  auto quiet = upto_mixed_precision_with(kMegatronFsdp);
  CHECK_FALSE(quiet.warned("megatron-fsdp.nccl-ub-double-buffer"));
  CHECK(upto_mixed_precision_with({"--use-nccl-ub"}).exit == 0);
  CHECK_FALSE(upto_mixed_precision_with({"--use-nccl-ub"}).warned("megatron-fsdp.nccl-ub-double-buffer"));
}

TEST_CASE("megatron-fsdp.meta-init-no-shard", "[validate-parallelism]") {
  auto bad = upto_mixed_precision_with(
      plus(kMegatronFsdp, {"--init-model-with-meta-device", "--data-parallel-sharding-strategy", "no_shard"}));
  CHECK(bad.exit == 1);
  CHECK(bad.rule == "megatron-fsdp.meta-init-no-shard");
  // Neighbour: an expert strategy makes the set {no_shard, optim}, which is not {no_shard}.
  CHECK(upto_mixed_precision_with(
            plus(kMegatronFsdp, {"--init-model-with-meta-device", "--data-parallel-sharding-strategy", "no_shard",
                                 "--expert-data-parallel-sharding-strategy", "optim"}))
            .exit == 0);
  CHECK(upto_mixed_precision_with(plus(kMegatronFsdp, {"--init-model-with-meta-device"})).exit == 0);
}

TEST_CASE("megatron-fsdp.manual-registration-needs-megatron-fsdp", "[validate-parallelism]") {
  auto bad = upto_mixed_precision_with({"--fsdp-manual-registration", "--use-nccl-ub"});
  CHECK(bad.exit == 1);
  CHECK(bad.rule == "megatron-fsdp.manual-registration-needs-megatron-fsdp");
  CHECK(upto_mixed_precision_with(plus(kMegatronFsdp, {"--fsdp-manual-registration", "--use-nccl-ub"})).exit == 0);
}

TEST_CASE("megatron-fsdp.manual-registration-needs-nccl-ub", "[validate-parallelism]") {
  auto bad = upto_mixed_precision_with(plus(kMegatronFsdp, {"--fsdp-manual-registration"}));
  CHECK(bad.exit == 1);
  CHECK(bad.rule == "megatron-fsdp.manual-registration-needs-nccl-ub");
  CHECK(upto_mixed_precision_with(plus(kMegatronFsdp, {"--use-nccl-ub"})).exit == 0);
}

// ---------------------------------------------------------------------------------------------------------
// Sequence parallelism (seed arguments.py:1248-1260 validate_args)

TEST_CASE("sequence parallelism is forced off with TP=1", "[validate-parallelism]") {
  // seed arguments.py:1251-1257
  auto r = upto_sequence_packing(mrtest::with({"--sequence-parallel"}));
  CHECK(r.exit == 0);
  CHECK(r["sequence_parallel"] == mr::Value(false));
  CHECK(r.warned("sequence-parallel.disabled-without-tp"));
  // Neighbour: TP=2 keeps it, no warning.
  r = upto_sequence_packing(mrtest::with({"--sequence-parallel", "--tensor-model-parallel-size", "2"}),
            {{"WORLD_SIZE", "2"}, {"CUDA_DEVICE_MAX_CONNECTIONS", "1"}});
  CHECK(r.exit == 0);
  CHECK(r["sequence_parallel"] == mr::Value(true));
  CHECK_FALSE(r.warned("sequence-parallel.disabled-without-tp"));
  // Not requested: off, no warning.
  r = upto_sequence_packing(mrtest::base_args());
  CHECK(r["sequence_parallel"] == mr::Value(false));
  CHECK_FALSE(r.warned("sequence-parallel.disabled-without-tp"));
}

TEST_CASE("--tp-comm-overlap needs sequence parallelism", "[validate-parallelism]") {
  const Env tp2 = {{"WORLD_SIZE", "2"}, {"CUDA_DEVICE_MAX_CONNECTIONS", "1"}};
  // seed arguments.py:1259
  auto r = upto_sequence_packing(mrtest::with({"--tp-comm-overlap", "--tensor-model-parallel-size", "2"}), tp2);
  CHECK(r.exit == 1);
  CHECK(r.rule == "sequence-parallel.tp-comm-overlap-needs-sp");
  // TP=1 turns --sequence-parallel off first, so the overlap fails there too.
  r = upto_sequence_packing(mrtest::with({"--tp-comm-overlap", "--sequence-parallel"}));
  CHECK(r.rule == "sequence-parallel.tp-comm-overlap-needs-sp");
  auto ok = upto_sequence_packing(
      mrtest::with({"--tp-comm-overlap", "--sequence-parallel", "--tensor-model-parallel-size", "2"}), tp2);
  CHECK(ok.rule != "sequence-parallel.tp-comm-overlap-needs-sp");
  CHECK(ok.exit == 0);
}

// ---------------------------------------------------------------------------------------------------------
// Hybrid / dynamic context parallelism (seed arguments.py:1262-1294 validate_args)

TEST_CASE("--hybrid-context-parallel is forwarded to --dynamic-context-parallel", "[validate-parallelism]") {
  // seed arguments.py:1262-1277, 1570-1571
  auto r = upto_sequence_packing(mrtest::with({"--hybrid-context-parallel", "--calculate-per-token-loss"}));
  CHECK(r.exit == 0);
  CHECK(r.warned("dynamic-cp.hybrid-deprecated"));
  CHECK(r["dynamic_context_parallel"] == mr::Value(true));
  CHECK(r["hybrid_context_parallel"] == mr::Value(false));
  CHECK(r["sequence_packing_scheduler"] == mr::Value("default_dynamic_cp"));
  CHECK(r["variable_seq_lengths"] == mr::Value(true));
  // seed arguments.py:1267
  r = upto_sequence_packing(
      mrtest::with({"--hybrid-context-parallel", "--dynamic-context-parallel", "--calculate-per-token-loss"}));
  CHECK(r.exit == 1);
  CHECK(r.rule == "dynamic-cp.hybrid-and-dynamic");
  auto ok = upto_sequence_packing(mrtest::with({"--dynamic-context-parallel", "--calculate-per-token-loss"}));
  CHECK(ok.exit == 0);
  CHECK_FALSE(ok.warned("dynamic-cp.hybrid-deprecated"));
}

TEST_CASE("dynamic context parallelism checks", "[validate-parallelism]") {
  const std::vector<std::string> dcp = {"--dynamic-context-parallel", "--calculate-per-token-loss"};
  // seed arguments.py:1274
  auto r = upto_sequence_packing(
      mrtest::with(dcp + std::vector<std::string>{"--use-megatron-fsdp", "--ckpt-format", "fsdp_dtensor"}));
  CHECK(r.exit == 1);
  CHECK(r.rule == "dynamic-cp.no-megatron-fsdp");
  // seed arguments.py:1275
  r = upto_sequence_packing(mrtest::with(dcp + std::vector<std::string>{"--dataloader-type", "cyclic"}));
  CHECK(r.rule == "dynamic-cp.single-dataloader");
  auto ok = upto_sequence_packing(mrtest::with(dcp + std::vector<std::string>{"--dataloader-type", "single"}));
  CHECK(ok.exit == 0);
  // seed arguments.py:1278
  r = upto_sequence_packing(
      mrtest::with(dcp + std::vector<std::string>{"--sequence-packing-scheduler", "dp_balanced"}));
  CHECK(r.rule == "dynamic-cp.scheduler");
  ok = upto_sequence_packing(
      mrtest::with(dcp + std::vector<std::string>{"--sequence-packing-scheduler", "default_dynamic_cp"}));
  CHECK(ok.exit == 0);
}

TEST_CASE("--min-dynamic-context-parallel-size must be a dynamic-CP group size", "[validate-parallelism]") {
  // seed arguments.py:1284-1294: DPxCP 8 -> sizes [1, 2, 4, 8]; DPxCP 6 -> [1, 2, 6].
  struct Case {
    const char* world;
    const char* gbs;
    const char* min_size;
    bool ok;
  };
  const Case cases[] = {
      {"8", "16", "1", true},  {"8", "16", "2", true},  {"8", "16", "4", true},  {"8", "16", "8", true},
      {"8", "16", "3", false}, {"8", "16", "16", false}, {"6", "12", "2", true},  {"6", "12", "6", true},
      {"6", "12", "4", false}, {"6", "12", "3", false}, {"1", "8", "1", true},   {"1", "8", "2", false},
  };
  for (const auto& c : cases) {
    INFO("WORLD_SIZE=" << c.world << " --min-dynamic-context-parallel-size " << c.min_size);
    auto r = upto_sequence_packing(
        mrtest::with({"--dynamic-context-parallel", "--calculate-per-token-loss", "--global-batch-size", c.gbs,
                      "--min-dynamic-context-parallel-size", c.min_size}),
        {{"WORLD_SIZE", c.world}});
    if (c.ok) {
      CHECK(r.exit == 0);
    } else {
      CHECK(r.exit == 1);
      CHECK(r.rule == "dynamic-cp.min-group-size");
    }
  }
}

// ---------------------------------------------------------------------------------------------------------
// CUDA_DEVICE_MAX_CONNECTIONS and high-priority streams (seed arguments.py:1313-1350 validate_args)

TEST_CASE("TP/CP before Blackwell needs CUDA_DEVICE_MAX_CONNECTIONS=1", "[validate-parallelism]") {
  const auto tp2 = mrtest::with({"--tensor-model-parallel-size", "2"});
  // seed arguments.py:1339
  auto r = upto_sequence_packing(tp2, {{"WORLD_SIZE", "2"}});
  CHECK(r.exit == 1);
  CHECK(r.rule == "cuda-connections.max-connections-one");
  // The message says how to avoid it without setting the variable in this shell (item 7 of review 2).
  CHECK(r.message.find("it is unset. Set it where the job runs") != std::string::npos);
  CHECK(r.message.find("--target-env FILE with `env: {CUDA_DEVICE_MAX_CONNECTIONS: '1'}`") != std::string::npos);
  CHECK(r.message.find("--target-gpu-arch sm_100 or newer") != std::string::npos);
  r = upto_sequence_packing(tp2, {{"WORLD_SIZE", "2"}, {"CUDA_DEVICE_MAX_CONNECTIONS", "8"}});
  CHECK(r.rule == "cuda-connections.max-connections-one");
  r = upto_sequence_packing(mrtest::with({"--context-parallel-size", "2"}), {{"WORLD_SIZE", "2"}});
  CHECK(r.rule == "cuda-connections.max-connections-one");
  // Neighbours: the variable set, or a Blackwell target.
  CHECK(upto_sequence_packing(tp2, {{"WORLD_SIZE", "2"}, {"CUDA_DEVICE_MAX_CONNECTIONS", "1"}}).exit == 0);
  auto blackwell = target("sm_100");
  CHECK(upto_sequence_packing(tp2, {{"WORLD_SIZE", "2"}}, &blackwell).exit == 0);
  CHECK(upto_sequence_packing(mrtest::base_args()).exit == 0);
}

TEST_CASE("TP/CP with FSDP or MoE comm overlap before Blackwell only warns", "[validate-parallelism]") {
  // seed arguments.py:1318-1327
  const std::vector<std::string> fsdp2 = {"--use-torch-fsdp2", "--no-gradient-accumulation-fusion",
                                          "--untie-embeddings-and-output-weights"};
  auto r = upto_sequence_packing(mrtest::with(fsdp2 + std::vector<std::string>{"--tensor-model-parallel-size", "2"}),
                 {{"WORLD_SIZE", "2"}});
  CHECK(r.rule != "cuda-connections.max-connections-one");
  CHECK(r.warned("cuda-connections.fsdp-with-tp-cp"));
  auto plain = upto_sequence_packing(mrtest::with(fsdp2), {{"WORLD_SIZE", "2"}});
  CHECK_FALSE(plain.warned("cuda-connections.fsdp-with-tp-cp"));
  // seed arguments.py:1328-1337
  r = upto_sequence_packing(mrtest::with({"--overlap-moe-expert-parallel-comm", "--tensor-model-parallel-size", "2"}),
            {{"WORLD_SIZE", "2"}});
  CHECK(r.rule != "cuda-connections.max-connections-one");
  CHECK(r.warned("cuda-connections.ep-overlap-with-tp-cp"));
  auto blackwell = target("sm_100");
  r = upto_sequence_packing(mrtest::with({"--overlap-moe-expert-parallel-comm", "--tensor-model-parallel-size", "2"}),
            {{"WORLD_SIZE", "2"}}, &blackwell);
  CHECK_FALSE(r.warned("cuda-connections.ep-overlap-with-tp-cp"));
}

TEST_CASE("FSDP high-priority stream groups", "[validate-parallelism]") {
  const std::vector<std::string> fsdp2 = {"--use-torch-fsdp2", "--no-gradient-accumulation-fusion",
                                          "--untie-embeddings-and-output-weights"};
  const std::vector<std::string> mfsdp = {"--use-megatron-fsdp", "--ckpt-format", "fsdp_dtensor"};
  const std::vector<std::string> ep2 = {"--expert-model-parallel-size", "2", "--num-experts", "4"};
  auto blackwell = target("sm_100");
  struct Case {
    const char* what;
    std::vector<std::string> args;
    const mr::TargetEnv* target;
    mr::Value groups;
  };
  const Case cases[] = {
      // seed arguments.py:1346: `fsdp2 or (megatron_fsdp and arch >= 10)` (and binds tighter than or).
      {"torch FSDP2 on sm_90", mrtest::with(fsdp2), nullptr, strs({"dp_cp"})},
      {"torch FSDP2 on sm_100", mrtest::with(fsdp2), &blackwell, strs({"dp_cp"})},
      {"Megatron-FSDP on sm_90", mrtest::with(mfsdp), nullptr, strs({})},
      {"Megatron-FSDP on sm_100", mrtest::with(mfsdp), &blackwell, strs({"dp_cp"})},
      // seed arguments.py:1349
      {"Megatron-FSDP + EP on sm_100", mrtest::with(mfsdp + ep2), &blackwell, strs({"dp_cp", "ep_dp"})},
      // seed arguments.py:1347: already listed, not repeated.
      {"given already", mrtest::with(fsdp2 + std::vector<std::string>{"--high-priority-stream-groups", "dp_cp"}),
       nullptr, strs({"dp_cp"})},
      {"no FSDP", mrtest::base_args(), &blackwell, strs({})},
  };
  for (const auto& c : cases) {
    INFO(c.what);
    auto r = upto_sequence_packing(c.args, {{"WORLD_SIZE", "2"}}, c.target);
    CHECK(r.exit == 0);
    CHECK(r["high_priority_stream_groups"] == c.groups);
  }
}

// ---------------------------------------------------------------------------------------------------------
// Expert GTP weight shards (seed arguments.py:1353-1362 validate_args; resolve_tensor_parallel_weight_shards)

TEST_CASE("expert GTP weight shards", "[validate-parallelism]") {
  struct Case {
    std::vector<std::string> extra;
    int64_t shards, remat;
  };
  // shards = etp * remat when unset; otherwise remat = shards // etp.
  const Case cases[] = {
      {{}, 1, 1},                                                               // etp = tp = 1
      {{"--expert-tensor-parallel-num-weight-shards", "2"}, 2, 2},              // 2 // 1
      {{"--expert-tensor-parallel-size", "2"}, 2, 1},                           // unset: 2 * 1
      {{"--expert-tensor-parallel-size", "2", "--expert-tensor-parallel-num-weight-shards", "4"}, 4, 2},
      {{"--expert-tensor-parallel-size", "2", "--expert-tensor-parallel-num-weight-shards", "2"}, 2, 1},
  };
  for (const auto& c : cases) {
    auto r = upto_sequence_packing(mrtest::with(c.extra + std::vector<std::string>{"--num-experts", "4"}),
                                   {{"WORLD_SIZE", "2"}});
    INFO(r.message);
    CHECK(r.exit == 0);
    CHECK(r["expert_tensor_parallel_num_weight_shards"].as_int() == c.shards);
    CHECK(r["expert_gtp_weight_remat_size"].as_int() == c.remat);
  }
  // seed arguments.py:1356 -> model_parallel_config.py resolve_tensor_parallel_weight_shards
  auto r =
      upto_sequence_packing(mrtest::with({"--expert-tensor-parallel-size", "2",
                                          "--expert-tensor-parallel-num-weight-shards", "1", "--num-experts", "4"}),
                            {{"WORLD_SIZE", "2"}});
  CHECK(r.exit == 1);
  CHECK(r.rule == "expert-gtp.weight-shards-below-etp");
  r = upto_sequence_packing(mrtest::with({"--expert-tensor-parallel-size", "2",
                                          "--expert-tensor-parallel-num-weight-shards", "3", "--num-experts", "4"}),
                            {{"WORLD_SIZE", "2"}});
  CHECK(r.exit == 1);
  CHECK(r.rule == "expert-gtp.weight-shards-divisible");
}

// ---------------------------------------------------------------------------------------------------------
// GTP weight-rematerialisation checks (seed arguments.py:1364-1451 validate_args). Expert GTP of 2
// (--expert-tensor-parallel-num-weight-shards 2 with etp 1) switches the block on.

TEST_CASE("GTP checks", "[validate-parallelism]") {
  const auto gtp = [](std::vector<std::string> extra) {
    return mrtest::with(std::vector<std::string>{"--expert-tensor-parallel-num-weight-shards", "2", "--num-experts",
                                                 "4"} +
                        extra);
  };
  // Neighbour for every check below: GTP with nothing else passes.
  auto ok = upto_sequence_packing(gtp({}));
  CHECK(ok.exit == 0);
  CHECK(ok["high_priority_stream_groups"] == strs({}));  // sm_90: no stream priorities
  // seed arguments.py:1365
  auto r = upto_sequence_packing(gtp({"--fp4-format", "e2m1", "--bf16"}));
  CHECK(r.rule == "gtp-remat.fp4-needs-param-gather");
  r = upto_sequence_packing(mrtest::with({"--fp4-format", "e2m1", "--bf16"}));  // no GTP: no such requirement
  CHECK(r.rule != "gtp-remat.fp4-needs-param-gather");
  // seed arguments.py:1402
  r = upto_sequence_packing(gtp({"--ddp-average-in-collective"}));
  CHECK(r.rule == "gtp-remat.no-ddp-average-in-collective");
  CHECK(upto_sequence_packing(mrtest::with({"--ddp-average-in-collective"})).exit == 0);
  // seed arguments.py:1407
  r = upto_sequence_packing(gtp({"--ckpt-format", "torch_dcp"}));
  CHECK(r.rule == "gtp-remat.ckpt-format");
  CHECK(upto_sequence_packing(gtp({"--ckpt-format", "torch"})).exit == 0);
  // seed arguments.py:1411
  r = upto_sequence_packing(
      gtp({"--dist-ckpt-optim-fully-reshardable", "--distrib-optim-fully-reshardable-mem-efficient"}));
  CHECK(r.rule == "gtp-remat.fully-reshardable-mem-efficient");
  CHECK(upto_sequence_packing(gtp({"--dist-ckpt-optim-fully-reshardable"})).rule !=
        "gtp-remat.fully-reshardable-mem-efficient");
  // seed arguments.py:1424-1436 (fp8_recipe alone decides, as in the seed)
  r = upto_sequence_packing(gtp({"--fp8-recipe", "mxfp8"}));
  CHECK(r.rule == "gtp-remat.mxfp8-needs-fp8-param-gather");
  r = upto_sequence_packing(gtp({"--fp8-recipe", "mxfp8", "--fp8-param-gather", "--use-distributed-optimizer"}));
  CHECK(r.rule == "gtp-remat.mxfp8-needs-reuse-grad-buf");
  r = upto_sequence_packing(gtp({"--fp8-recipe", "mxfp8", "--fp8-param-gather", "--use-distributed-optimizer",
                 "--reuse-grad-buf-for-mxfp8-param-ag"}));
  CHECK(r.exit == 0);
  // seed arguments.py:1440-1444
  r = upto_sequence_packing(gtp({"--gtp-remat-nccl-ub", "--disable-symmetric-registration"}));
  CHECK(r.rule == "gtp-remat.nccl-ub-symmetric-registration");
  r = upto_sequence_packing(gtp({"--gtp-expert-remat-nccl-ub", "--disable-symmetric-registration"}));
  CHECK(r.rule == "gtp-remat.nccl-ub-symmetric-registration");
  CHECK(upto_sequence_packing(gtp({"--disable-symmetric-registration"})).exit == 0);
  // seed arguments.py:1445-1451 (a printed warning)
  r = upto_sequence_packing(gtp({"--gtp-remat-nccl-ub", "--gtp-remat-reduce-scatter-with-fp32-accumulation"}));
  CHECK(r.exit == 0);
  CHECK(r.warned("gtp-remat.nccl-ub-overrides-fp32-accumulation"));
  CHECK_FALSE(
      upto_sequence_packing(gtp({"--gtp-remat-nccl-ub"})).warned("gtp-remat.nccl-ub-overrides-fp32-accumulation"));
  // seed arguments.py:1396
  r = upto_sequence_packing(gtp({}), {{"NCCL_PROTO", "SIMPLE"}});
  CHECK(r.warned("gtp-remat.nccl-proto-simple"));
  CHECK_FALSE(upto_sequence_packing(gtp({}), {{"NCCL_PROTO", "LL128"}}).warned("gtp-remat.nccl-proto-simple"));
  CHECK_FALSE(
      upto_sequence_packing(mrtest::base_args(), {{"NCCL_PROTO", "simple"}}).warned("gtp-remat.nccl-proto-simple"));
}

TEST_CASE("GTP on Blackwell: stream priorities and CUDA-graph node priority", "[validate-parallelism]") {
  auto blackwell = target("sm_100");
  const std::vector<std::string> egtp = {"--expert-tensor-parallel-num-weight-shards", "2", "--num-experts", "4"};
  // seed arguments.py:1373-1386
  auto r = upto_sequence_packing(mrtest::with(egtp), {}, &blackwell);
  CHECK(r.exit == 0);
  CHECK(r["high_priority_stream_groups"] == strs({"gtp_remat", "expt_gtp_remat"}));
  CHECK(r.warned("gtp-remat.high-priority-gtp-remat"));
  CHECK(r.warned("gtp-remat.high-priority-expert-gtp-remat"));
  // Already listed: no warning, no duplicate.
  r = upto_sequence_packing(mrtest::with(egtp + std::vector<std::string>{"--high-priority-stream-groups", "gtp_remat"}),
                            {}, &blackwell);
  CHECK(r["high_priority_stream_groups"] == strs({"gtp_remat", "expt_gtp_remat"}));
  CHECK_FALSE(r.warned("gtp-remat.high-priority-gtp-remat"));
  CHECK(r.warned("gtp-remat.high-priority-expert-gtp-remat"));
  // seed arguments.py:1389-1393
  r = upto_sequence_packing(mrtest::with(egtp + std::vector<std::string>{"--cuda-graph-impl", "local"}), {},
                            &blackwell);
  CHECK(r.exit == 1);
  CHECK(r.rule == "gtp-remat.cuda-graphs-node-priority");
  r = upto_sequence_packing(mrtest::with(egtp + std::vector<std::string>{"--cuda-graph-impl", "local"}),
            {{"CUDA_GRAPHS_USE_NODE_PRIORITY", "1"}}, &blackwell);
  CHECK(r.rule != "gtp-remat.cuda-graphs-node-priority");
  // Hopper: no node-priority requirement.
  r = upto_sequence_packing(mrtest::with(egtp + std::vector<std::string>{"--cuda-graph-impl", "local"}));
  CHECK(r.rule != "gtp-remat.cuda-graphs-node-priority");
}

TEST_CASE("Gloo process groups: distributed optimizer without Gloo", "[validate-parallelism]") {
  const Args no_gloo = {"--disable-gloo-process-groups", "--use-distributed-optimizer"};
  fails(from_data_blend_with(plus(no_gloo, {"--ckpt-format", "torch"})), "gloo.distributed-optimizer-needs-dist-ckpt");
  passes(from_data_blend_with(no_gloo));                                                             // torch_dist
  passes(from_data_blend_with(plus(no_gloo, {"--ckpt-format", "torch", "--optimizer", "muon"})));  // only sgd/adam
  passes(from_data_blend_with({"--use-distributed-optimizer", "--ckpt-format", "torch"}));           // Gloo available
  // The value use-dist-ckpt derives wins over the fallback.
  fails(from_data_blend_with(no_gloo, {}, nullptr,
                             [](mr::Namespace& ns) { ns.derive("use_dist_ckpt", mr::Value(false)); }),
        "gloo.distributed-optimizer-needs-dist-ckpt");

  const Args reshard = plus(no_gloo, {"--dist-ckpt-optim-fully-reshardable"});
  fails(from_data_blend_with(plus(reshard, {"--distrib-optim-fully-reshardable-mem-efficient"})),
        "gloo.fully-reshardable-mem-efficient");
  passes(from_data_blend_with(reshard));
  passes(from_data_blend_with(plus(no_gloo, {"--distrib-optim-fully-reshardable-mem-efficient"})));
  passes(from_data_blend_with({"--dist-ckpt-optim-fully-reshardable", "--distrib-optim-fully-reshardable-mem-efficient",
                 "--use-distributed-optimizer"}));
}

TEST_CASE("fake process group", "[validate-parallelism]") {
  fails(from_data_blend_with({"--fake-process-group", "--moe-token-dispatcher-type", "flex"}),
        "fake-process-group.no-flex-dispatcher");
  auto r = from_data_blend_with({"--fake-process-group", "--moe-token-dispatcher-type", "alltoall"});
  passes(r);
  CHECK(r.warned("fake-process-group.nan-check-disabled"));
  CHECK(r.warned("fake-process-group.gloo-disabled"));
  passes(from_data_blend_with({"--moe-token-dispatcher-type", "flex"}));
  // The Gloo check runs before the fake process group turns Gloo off.
  passes(from_data_blend_with({"--fake-process-group", "--use-distributed-optimizer", "--ckpt-format", "torch"}));
}

TEST_CASE("derivation: fake process group switches", "[validate-parallelism]") {
  struct Case {
    Args extra;
    bool nan_check, gloo;
  };
  // seed arguments.py:1663-1670 validate_args
  const Case cases[] = {
      {{}, true, true},
      {{"--fake-process-group"}, false, false},
      {{"--disable-gloo-process-groups"}, true, false},
      {{"--no-check-for-nan-in-loss-and-grad"}, false, true},
  };
  for (const auto& c : cases) {
    auto r = from_data_blend_with(c.extra);
    passes(r);
    CHECK(r["check_for_nan_in_loss_and_grad"] == mr::Value(c.nan_check));
    CHECK(r["use_gloo_process_groups"] == mr::Value(c.gloo));
  }
}

// ---------------------------------------------------------------------------------------------------------------
// seed 1786-1830: pipeline-parallel inference, MoE upcycling, --skip-train, RL run checks, local checkpoints

TEST_CASE("pipeline-parallel microbatched inference", "[validate-parallelism]") {
  const Args thr = {"--inference-batch-times-seqlen-threshold", "512"};
  fails(from_data_blend_with(thr), "pp-inference.needs-pipeline-parallel");
  passes(from_data_blend_with(plus(thr, {"--pipeline-model-parallel-size", "2"})));
  fails(from_data_blend_with(plus(thr, {"--pipeline-model-parallel-size", "2", "--cuda-graph-impl", "local"})),
        "pp-inference.no-cuda-graphs");
  passes(from_data_blend_with({"--inference-batch-times-seqlen-threshold", "-1", "--cuda-graph-impl", "local"}));
  fails(from_data_blend_with({"--inference-batch-times-seqlen-threshold", "0"}),
        "pp-inference.needs-pipeline-parallel");
}

// ---------------------------------------------------------------------------------------------------------------
// seed 1832-1879: delayed wgrad, activation offloading, MTP position embeddings, cpu_offloading

TEST_CASE("delay wgrad compute", "[validate-parallelism]") {
  const Args dw = {"--delay-wgrad-compute"};
  fails(from_data_blend_with(plus(dw, {"--transformer-impl", "local"})), "delay-wgrad.needs-transformer-engine");
  passes(from_data_blend_with(dw));

  const Args ov = plus(dw, {"--overlap-grad-reduce"});
  auto t27 = te("2.7.0"), t28 = te("2.8.0"), t211 = te("2.11.0"), t212 = te("2.12.0"), t26 = te("2.6.0");
  fails(from_data_blend_with(ov, {}, &t27), "delay-wgrad.overlap-grad-reduce-te-version");
  passes(from_data_blend_with(ov, {}, &t28));
  passes(from_data_blend_with(dw, {}, &t27));  // no grad-reduce overlap

  const Args attn = plus(ov, {"--cuda-graph-modules", "attn", "--disable-bias-linear"});
  fails(from_data_blend_with(attn, {}, &t211), "delay-wgrad.cuda-graph-te-version");
  passes(from_data_blend_with(attn, {}, &t212));
  passes(from_data_blend_with(plus(ov, {"--cuda-graph-modules", "mlp"}), {}, &t211));  // no wgrad in the graph
  const Args router = plus(ov, {"--cuda-graph-modules", "moe_router", "--moe-shared-expert-intermediate-size", "64"});
  fails(from_data_blend_with(router, {}, &t211), "delay-wgrad.cuda-graph-te-version");
  passes(from_data_blend_with(plus(router, {"--moe-shared-expert-overlap"}), {}, &t211));
  passes(from_data_blend_with(plus(ov, {"--cuda-graph-modules", "moe_router"}), {}, &t211));  // no shared expert

  fails(from_data_blend_with(plus(attn, {"--no-gradient-accumulation-fusion"})),
        "delay-wgrad.cuda-graph-needs-grad-accumulation-fusion");
  fails(from_data_blend_with(plus(router, {"--no-gradient-accumulation-fusion"})),
        "delay-wgrad.cuda-graph-needs-grad-accumulation-fusion");
  passes(from_data_blend_with(plus(ov, {"--no-gradient-accumulation-fusion"})));

  fails(from_data_blend_with(plus(ov, {"--cuda-graph-modules", "attn"})), "delay-wgrad.cuda-graph-attn-no-bias");
  fails(from_data_blend_with(plus(attn, {"--add-qkv-bias"})), "delay-wgrad.cuda-graph-attn-no-bias");
  passes(from_data_blend_with(router));  // biases are only checked for attention graphs

  fails(from_data_blend_with(plus(dw, {"--no-gradient-accumulation-fusion"}), {}, &t26),
        "delay-wgrad.no-grad-accumulation-fusion-te-version");
  passes(from_data_blend_with(plus(dw, {"--no-gradient-accumulation-fusion"}), {}, &t27));
  passes(from_data_blend_with({"--no-gradient-accumulation-fusion", "--transformer-impl", "local"}, {}, &t26));
}
