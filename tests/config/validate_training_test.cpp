// The validation chain's checks of training: removed flags, the rerun tracker, emerging optimizers, --skip-train and
// RL.
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
// seed 524-575: deprecated flags.

TEST_CASE("removed flags are rejected and dropped", "[validate-training]") {
  // seed arguments.py:525, 528, 531, 535 validate_args
  CHECK(fails_with(run(with({"--batch-size", "4"}), kWorld1), "deprecated.batch-size"));
  CHECK(fails_with(run(with({"--warmup", "10"}), kWorld1), "deprecated.warmup"));
  CHECK(fails_with(run(with({"--model-parallel-size", "1"}), kWorld1), "deprecated.model-parallel-size"));
  CHECK(fails_with(run(with({"--checkpoint-activations"}), kWorld1), "deprecated.checkpoint-activations"));
  // Neighbour: none given -> the attributes are deleted (seed 527, 530, 533, 539, 543, 575).
  auto r = run(mrtest::base_args(), kWorld1);
  CHECK(r.exit == 0);
  for (const char* gone : {"batch_size", "warmup", "model_parallel_size", "checkpoint_activations",
                           "recompute_activations", "cuda_graph_scope_deprecated"}) {
    INFO(gone);
    CHECK_FALSE(r.has(gone));
  }
  // Kept when not set: enable_cuda_graph / external_cuda_graph are deleted only when used (seed 558, 565).
  CHECK(r["enable_cuda_graph"] == mr::Value(false));
  CHECK(r["external_cuda_graph"] == mr::Value(false));
}

TEST_CASE("derivation: iterations_to_skip from the rerun tracker file", "[validate-training]") {
  // seed arguments.py:1638-1643 validate_args, rerun_state_machine.py get_skipped_iterations_from_tracker_file:
  // an iteration failing twice on one rank is skipped, unless several ranks of one job failed at it.
  const std::string pre = "ts=2025-01-01 node=n1 device=0 ";
  const std::string text =
      pre + "jobID=J1 rank=0 iteration=5 status=RerunDiagnostic.FIRST_RERUN_REPRODUCIBLE result=1 message=a\n" + pre +
      "jobID=J2 rank=0 iteration=5 status=RERUN_DISABLED result=1 message=b\r\n" + pre +
      "jobID=J1 rank=1 iteration=7 status=SECOND_RERUN_REPRODUCIBLE result=1 message=c\n" + pre +
      "jobID=J1 rank=2 iteration=7 status=RERUN_DISABLED result=1 message=d\n" + pre +
      "jobID=J1 rank=1 iteration=7 status=x.rerun_disabled result=1 message=e\n" + pre +
      "jobID=J1 rank=3 iteration=9 status=FIRST_RERUN_NOT_REPRODUCIBLE result=1 message=f\n" + pre +
      "jobID=J1 rank=3 iteration=9 status=FIRST_RERUN_NOT_REPRODUCIBLE result=1 message=g\n" + "not a tracker line\n";
  const std::string path = write_temp("tracker.txt", text);
  // 5: (rank 0, it 5) seen twice -> skip; 7: seen twice on rank 1 but ranks 1 and 2 of J1 failed -> kept;
  // 9: not a reproducible status.
  auto r = from_data_blend_with({"--result-rejected-tracker-filename", path});
  passes(r);
  CHECK(r["iterations_to_skip"] == mr::Value(mr::List{mr::Value(5)}));
  r = from_data_blend_with({"--result-rejected-tracker-filename", path, "--iterations-to-skip", "2", "3"});
  CHECK(r["iterations_to_skip"] == mr::Value(mr::List{mr::Value(2), mr::Value(3), mr::Value(5)}));
  CHECK_FALSE(r.warned("rerun.tracker-file-unreadable"));

  // A line that does not parse stops the reading; what was read so far still counts.
  const std::string bad = pre + "jobID=J1 rank=0 iteration=4 status=RERUN_DISABLED result=1 message=a\n" + pre +
                          "jobID=J1 rank=0 iteration=4 status=RERUN_DISABLED result=1 message=a\n" + pre +
                          "jobID=J1 rank=abc iteration=6 status=RERUN_DISABLED result=1 message=a\n" + pre +
                          "jobID=J1 rank=0 iteration=6 status=RERUN_DISABLED result=1 message=a\n" + pre +
                          "jobID=J1 rank=0 iteration=6 status=RERUN_DISABLED result=1 message=a\n";
  r = from_data_blend_with({"--result-rejected-tracker-filename", write_temp("tracker_bad.txt", bad)});
  passes(r);
  CHECK(r.warned("rerun.tracker-file-unreadable"));
  CHECK(r["iterations_to_skip"] == mr::Value(mr::List{mr::Value(4)}));

  // A missing file only warns.
  r = from_data_blend_with(
      {"--result-rejected-tracker-filename", "/nonexistent/tracker.txt", "--iterations-to-skip", "8"});
  passes(r);
  CHECK(r.warned("rerun.tracker-file-unreadable"));
  CHECK(r["iterations_to_skip"] == mr::Value(mr::List{mr::Value(8)}));
  r = from_data_blend_with({});
  CHECK(r["iterations_to_skip"] == mr::Value(mr::List{}));
  CHECK_FALSE(r.warned("rerun.tracker-file-unreadable"));
}

// ---------------------------------------------------------------------------------------------------------------
// seed 1645-1670: emerging optimizers, Gloo process groups, fake process group

TEST_CASE("emerging optimizers: FSDP and checkpoint formats", "[validate-training]") {
  fails(from_data_blend_with({"--optimizer", "muon", "--use-torch-fsdp2"}), "emerging-optimizer.no-torch-fsdp2");
  fails(from_data_blend_with({"--optimizer", "lion", "--use-megatron-fsdp"}), "emerging-optimizer.no-megatron-fsdp");
  fails(from_data_blend_with({"--optimizer", "soap", "--ckpt-format", "torch_dcp"}), "emerging-optimizer.ckpt-format");
  fails(from_data_blend_with({"--optimizer", "muon", "--ckpt-format", "fsdp_dtensor"}),
        "emerging-optimizer.ckpt-format");
  passes(from_data_blend_with({"--optimizer", "muon"}));
  passes(from_data_blend_with({"--optimizer", "muon", "--ckpt-format", "torch"}));
  passes(from_data_blend_with({"--optimizer", "adam", "--use-torch-fsdp2", "--ckpt-format", "torch_dcp"}));
  passes(from_data_blend_with({"--optimizer", "sgd", "--use-megatron-fsdp", "--ckpt-format", "fsdp_dtensor"}));
}

TEST_CASE("skip-train turns off optimizer loading", "[validate-training]") {
  auto r = from_data_blend_with({"--skip-train"});
  passes(r);
  CHECK(r.warned("skip-train.no-load-optim"));
  r = from_data_blend_with({"--skip-train", "--no-load-optim"});
  CHECK_FALSE(r.warned("skip-train.no-load-optim"));
  CHECK_FALSE(from_data_blend_with({}).warned("skip-train.no-load-optim"));
}

TEST_CASE("derivation: no_load_optim / no_load_rng", "[validate-training]") {
  struct Case {
    Args extra;
    mr::Value optim, rng;
  };
  const Case cases[] = {
      {{}, mr::Value(), mr::Value()},  // argparse default None
      // seed arguments.py:1796-1802 validate_args: upcycling never loads optimizer or RNG state
      {{"--moe-use-upcycling", "--save", "/ckpt"}, mr::Value(true), mr::Value(true)},
      {{"--moe-use-upcycling", "--save", "/ckpt", "--no-load-rng"}, mr::Value(true), mr::Value(true)},
      // seed arguments.py:1804-1806 validate_args: --skip-train -> no_load_optim
      {{"--skip-train"}, mr::Value(true), mr::Value()},
      {{"--no-load-optim"}, mr::Value(true), mr::Value()},
  };
  for (const auto& c : cases) {
    auto r = from_data_blend_with(c.extra);
    passes(r);
    CHECK(r["no_load_optim"] == c.optim);
    CHECK(r["no_load_optim"].kind() == c.optim.kind());
    CHECK(r["no_load_rng"] == c.rng);
    CHECK(r["no_load_rng"].kind() == c.rng.kind());
  }
}

TEST_CASE("RL run checks (RLConfig.validate_run)", "[validate-training]") {
  // base: micro batch 2, global batch 8; GRPO defaults 32 prompts x 2 rollouts x 2 iterations = 128 samples,
  // i.e. 16 training iterations per inference step.
  const Args rl = {"--perform-rl-step"};
  passes(from_data_blend_with(rl));

  fails(from_data_blend_with(plus(rl, {"--rl-training-cuda-graphs"})), "rl.training-cuda-graphs-need-graphs");
  passes(from_data_blend_with(plus(rl, {"--rl-training-cuda-graphs", "--cuda-graph-impl", "local"})));
  passes(from_data_blend_with({"--rl-training-cuda-graphs"}));  // not an RL run

  fails(from_data_blend_with(plus(rl, {"--rl-use-sequence-packing"})), "rl.sequence-packing-micro-batch-size");
  passes(from_data_blend_with(plus(rl, {"--rl-use-sequence-packing", "--micro-batch-size", "1"})));

  const Args six = {"--grpo-prompts-per-step", "3", "--grpo-group-size", "2", "--grpo-iterations", "1"};
  fails(from_data_blend_with(plus(plus(rl, six), {})), "rl.samples-divisible-by-global-batch-size");
  passes(from_data_blend_with(plus(plus(rl, six), {"--global-batch-size", "6"})));
  passes(from_data_blend_with(plus(plus(rl, six), {"--global-batch-size", "3"})));  // 2 iterations per inference step

  fails(from_data_blend_with(plus(rl, {"--exit-interval", "20"})), "rl.exit-interval-divisible");
  passes(from_data_blend_with(plus(rl, {"--exit-interval", "32"})));
  fails(from_data_blend_with(plus(rl, {"--save-interval", "24"})), "rl.save-interval-divisible");
  passes(from_data_blend_with(plus(rl, {"--save-interval", "48"})));
  passes(from_data_blend_with({"--exit-interval", "20", "--save-interval", "24"}));  // not an RL run

  const Args offload = plus(rl, {"--rl-offload-optimizer-during-inference"});
  fails(from_data_blend_with(plus(offload, {"--skip-train"})), "rl.offload-optimizer-needs-optimizer");
  passes(from_data_blend_with(offload));
  passes(from_data_blend_with({"--rl-offload-optimizer-during-inference", "--skip-train"}));

  const Args weights = plus(rl, {"--rl-offload-inference-model-weights-when-idle"});
  fails(from_data_blend_with(weights), "rl.offload-inference-weights-needs-separate-model");
  passes(from_data_blend_with(plus(weights, {"--rl-inference-tensor-model-parallel-size", "1"})));
  passes(from_data_blend_with(plus(weights, {"--rl-inference-expert-model-parallel-size", "1"})));
  passes(from_data_blend_with(plus(weights, {"--context-parallel-size", "2"})));
  passes(from_data_blend_with(plus(weights, {"--inference-shards", "tp=1"})));
}

TEST_CASE("RL generation settings (RLConfig.__post_init__)", "[validate-training]") {
  // GRPO defaults: 32 prompts x 2 rollouts = 64 requests per training batch. RLConfig is built early in the chain
  // (seed 497), so the whole chain runs.
  auto full = [](const Args& extra) { return run(with(extra), kWorld1); };
  const Args rl = {"--perform-rl-step"};
  const Args partial = {"--perform-rl-step", "--rl-partial-rollouts"};
  fails(full(plus(rl, {"--rl-generation-lag", "1"})), "rl.generation-lag");
  passes(full(plus(partial, {"--rl-generation-lag", "1.5"})));
  passes(full(plus(rl, {"--rl-generation-lag", "-0.5"})));  // at most 0 runs without partial rollouts
  fails(full(plus(partial, {"--rl-generation-lag", "-2"})), "rl.generation-lag");
  passes(full({"--rl-generation-lag", "-2"}));  // not an RL run

  fails(full(plus(rl, {"--rl-max-inflight-requests", "0"})), "rl.max-inflight-requests");
  passes(full(plus(rl, {"--rl-max-inflight-requests", "64"})));  // one batch: a lag of 0
  fails(full(plus(rl, {"--rl-max-inflight-requests", "65"})), "rl.max-inflight-requests");
  passes(full(plus(partial, {"--rl-max-inflight-requests", "128"})));
  // Both given: only where they agree (128 requests = 2 batches = a lag of 1).
  passes(full(plus(partial, {"--rl-max-inflight-requests", "128", "--rl-generation-lag", "1"})));
  fails(full(plus(partial, {"--rl-max-inflight-requests", "128", "--rl-generation-lag", "2"})),
        "rl.max-inflight-requests");
  // A cap below one batch is a negative lag: fine without partial rollouts, refused below -1 (never: at least 1).
  passes(full(plus(rl, {"--rl-max-inflight-requests", "16"})));

  fails(full(plus(rl, {"--rl-submission-granularity", "G"})), "rl.rollout-granularity");
  passes(full(plus(partial, {"--rl-submission-granularity", "R"})));
  fails(full(plus(partial, {"--rl-consumption-granularity", "R"})), "rl.rollout-granularity");
  passes(full(plus(partial, {"--rl-consumption-granularity", "G", "--rl-submission-granularity", "G"})));
  passes(full({"--rl-consumption-granularity", "R"}));  // not an RL run
}
