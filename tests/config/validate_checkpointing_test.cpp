// The validation chain's checks of checkpointing: conversion prerequisites, use_dist_ckpt, save intervals,
// DCP/DTensor formats, save/load flags, local checkpoints.
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
// seed 101-112: parse_and_validate_args' asserts for --use-checkpoint-args, before validate_args.

TEST_CASE("--use-checkpoint-args needs a checkpoint to read, and not a local non-persistent one",
          "[validate-checkpointing]") {
  auto r = run(with({"--use-checkpoint-args"}), kWorld1);
  CHECK(fails_with(r, "checkpoint-args.needs-load"));
  CHECK(passes_opening(run(with({"--use-checkpoint-args", "--load", "/ckpt"}), kWorld1)));
  CHECK(passes_opening(run(with({"--use-checkpoint-args", "--pretrained-checkpoint", "/base"}), kWorld1)));
  r = run(with({"--use-checkpoint-args", "--load", "/ckpt", "--non-persistent-ckpt-type", "local"}), kWorld1);
  CHECK(fails_with(r, "checkpoint-args.not-local"));
  // Without the flag neither applies.
  CHECK(passes_opening(run(with({"--non-persistent-ckpt-type", "global"}), kWorld1)));
}

// ---------------------------------------------------------------------------------------------------------------
// seed 421-436: checkpoint conversion prerequisites, non-persistent checkpoint kind.

TEST_CASE("--ckpt-convert-format needs --ckpt-convert-save and --load", "[validate-checkpointing]") {
  // seed arguments.py:423 validate_args
  auto r = run(with({"--ckpt-convert-format", "torch_dist", "--load", "/ckpt"}), kWorld1);
  CHECK(fails_with(r, "ckpt-convert.requires-save"));
  // seed arguments.py:424 validate_args
  r = run(with({"--ckpt-convert-format", "torch_dist", "--ckpt-convert-save", "/out"}), kWorld1);
  CHECK(fails_with(r, "ckpt-convert.requires-load"));
  // Both given: passes, and a missing checkpoint becomes fatal (seed arguments.py:425).
  r = run(with({"--ckpt-convert-format", "torch_dist", "--ckpt-convert-save", "/out", "--load", "/ckpt"}), kWorld1);
  CHECK(passes_opening(r));
  CHECK(r["exit_on_missing_checkpoint"] == mr::Value(true));
  // Without conversion the flag keeps its default (false).
  r = run(mrtest::base_args(), kWorld1);
  CHECK(r.exit == 0);
  CHECK(r["exit_on_missing_checkpoint"] == mr::Value(false));
}

TEST_CASE("--non-persistent-ckpt-type must be global or local", "[validate-checkpointing]") {
  // seed arguments.py:428 validate_args
  CHECK(fails_with(run(with({"--non-persistent-ckpt-type", "in_memory"}), kWorld1),
                   "ckpt-nonpersistent.supported-type"));
  CHECK(passes_opening(run(with({"--non-persistent-ckpt-type", "global"}), kWorld1)));
  // local: nvidia_resiliency_ext is assumed installed (seed 430-436), so ckpt-conversion-prep has nothing against it.
  CHECK(passes_opening(run(with({"--non-persistent-ckpt-type", "local"}), kWorld1)));
}

TEST_CASE("use_dist_ckpt follows --ckpt-format", "[validate-checkpointing]") {
  // seed arguments.py:441 -> update_use_dist_ckpt: use_dist_ckpt = ckpt_format != "torch"
  struct Case {
    std::vector<std::string> extra;
    bool want;
  };
  for (const Case& c : {Case{{}, true}, Case{{"--ckpt-format", "torch"}, false},
                        Case{{"--ckpt-format", "torch_dist"}, true}}) {
    auto r = run(with(c.extra), kWorld1);
    CHECK(passes_opening(r));
    CHECK(r["use_dist_ckpt"] == mr::Value(c.want));
  }
}

// ---------------------------------------------------------------------------------------------------------
// save intervals (seed 1201-1208)

TEST_CASE("save-schedule.interval-required", "[validate-checkpointing]") {
  auto bad = upto_mixed_precision_with({"--save", "/tmp/ckpt"});
  CHECK(bad.exit == 1);
  CHECK(bad.rule == "save-schedule.interval-required");
  CHECK(upto_mixed_precision_with({"--save", "/tmp/ckpt", "--save-interval", "5"}).exit == 0);
  CHECK(upto_mixed_precision_with({"--save-retain-interval", "7"}).exit == 0);  // no --save: nothing checked
}

TEST_CASE("save-schedule.interval-positive", "[validate-checkpointing]") {
  auto bad = upto_mixed_precision_with({"--save", "/tmp/ckpt", "--save-interval", "0"});
  CHECK(bad.exit == 1);
  CHECK(bad.rule == "save-schedule.interval-positive");
  CHECK(upto_mixed_precision_with({"--save", "/tmp/ckpt", "--save-interval", "1"}).exit == 0);
}

TEST_CASE("save-schedule.retain-interval-positive", "[validate-checkpointing]") {
  auto bad = upto_mixed_precision_with({"--save", "/tmp/ckpt", "--save-interval", "5", "--save-retain-interval", "0"});
  CHECK(bad.exit == 1);
  CHECK(bad.rule == "save-schedule.retain-interval-positive");
  CHECK(
      upto_mixed_precision_with({"--save", "/tmp/ckpt", "--save-interval", "5", "--save-retain-interval", "5"}).exit ==
      0);
}

TEST_CASE("save-schedule.retain-interval-multiple", "[validate-checkpointing]") {
  auto bad = upto_mixed_precision_with({"--save", "/tmp/ckpt", "--save-interval", "5", "--save-retain-interval", "7"});
  CHECK(bad.exit == 1);
  CHECK(bad.rule == "save-schedule.retain-interval-multiple");
  CHECK(
      upto_mixed_precision_with({"--save", "/tmp/ckpt", "--save-interval", "5", "--save-retain-interval", "10"}).exit ==
      0);
}

TEST_CASE("save-schedule.params-interval-overlap-param-gather", "[validate-checkpointing]") {
  const Args save = {"--save", "/tmp/ckpt", "--save-interval", "5", "--save-params-interval", "5",
                     "--use-distributed-optimizer"};
  auto bad = upto_mixed_precision_with(plus(save, {"--overlap-param-gather"}));
  CHECK(bad.exit == 1);
  CHECK(bad.rule == "save-schedule.params-interval-overlap-param-gather");
  CHECK(upto_mixed_precision_with(save).exit == 0);
  // Without --save the combination is not checked here.
  CHECK(upto_mixed_precision_with(
            {"--save-params-interval", "5", "--use-distributed-optimizer", "--overlap-param-gather"})
            .rule != "save-schedule.params-interval-overlap-param-gather");
}

// ---------------------------------------------------------------------------------------------------------
// torch_dcp / fsdp_dtensor checkpoint formats (seed arguments.py:1515-1525 validate_args)

TEST_CASE("torch_dcp and fsdp_dtensor checkpoint formats", "[validate-checkpointing]") {
  const std::vector<std::string> fsdp2 = {"--use-torch-fsdp2", "--no-gradient-accumulation-fusion",
                                          "--untie-embeddings-and-output-weights"};
  // seed arguments.py:1517
  auto r = upto_sequence_packing(mrtest::with({"--ckpt-format", "torch_dcp"}));
  CHECK(r.exit == 1);
  CHECK(r.rule == "torch-dcp.needs-torch-fsdp2");
  CHECK(upto_sequence_packing(mrtest::with(fsdp2 + std::vector<std::string>{"--ckpt-format", "torch_dcp"})).exit == 0);
  // seed arguments.py:1518
  r = upto_sequence_packing(
      mrtest::with(fsdp2 + std::vector<std::string>{"--ckpt-format", "torch_dcp", "--tensor-model-parallel-size", "2"}),
      {{"WORLD_SIZE", "2"}});
  CHECK(r.rule == "torch-dcp.no-tensor-parallel");
  // seed arguments.py:1520: FSDP2 already refuses pipeline parallelism (seed 883), so run the section alone.
  CHECK(run_section(&mr::section::dcp_dtensor_formats,
                    {{"ckpt_format", "torch_dcp"}, {"use_torch_fsdp2", true}, {"pipeline_model_parallel_size", 2}}) ==
        "torch-dcp.no-pipeline-parallel");
  CHECK(run_section(&mr::section::dcp_dtensor_formats,
                    {{"ckpt_format", "torch_dcp"}, {"use_torch_fsdp2", true}, {"pipeline_model_parallel_size", 1}}) ==
        "");
  // seed arguments.py:1525
  r = upto_sequence_packing(mrtest::with({"--ckpt-format", "fsdp_dtensor"}));
  CHECK(r.rule == "fsdp-dtensor.needs-megatron-fsdp");
  CHECK(upto_sequence_packing(mrtest::with({"--ckpt-format", "fsdp_dtensor", "--use-megatron-fsdp"})).exit == 0);
}

// ---------------------------------------------------------------------------------------------------------------
// seed 1672-1784: checkpointing

TEST_CASE("checkpointing: deprecated flags and parallel save/load warnings", "[validate-checkpointing]") {
  auto r = from_data_blend_with({"--ckpt-fully-parallel-save"});
  passes(r);
  CHECK(r.warned("checkpointing.fully-parallel-save-deprecated"));
  CHECK_FALSE(from_data_blend_with({"--ckpt-fully-parallel-save"}, {{"RANK", "1"}})
                  .warned("checkpointing.fully-parallel-save-deprecated"));  // printed on rank 0 only
  CHECK_FALSE(from_data_blend_with({}).warned("checkpointing.fully-parallel-save-deprecated"));

  CHECK(from_data_blend_with({"--no-ckpt-fully-parallel-save", "--use-distributed-optimizer"})
            .warned("checkpointing.non-parallel-save-distributed-optimizer"));
  CHECK_FALSE(
      from_data_blend_with({"--no-ckpt-fully-parallel-save", "--use-distributed-optimizer", "--ckpt-format", "torch"})
          .warned("checkpointing.non-parallel-save-distributed-optimizer"));
  CHECK_FALSE(from_data_blend_with({"--no-ckpt-fully-parallel-save"})
                  .warned("checkpointing.non-parallel-save-distributed-optimizer"));

  CHECK(from_data_blend_with({"--use-dist-ckpt"}).warned("checkpointing.use-dist-ckpt-deprecated"));
  CHECK_FALSE(from_data_blend_with({}).warned("checkpointing.use-dist-ckpt-deprecated"));
  CHECK(from_data_blend_with({"--dist-ckpt-format", "zarr"}).warned("checkpointing.dist-ckpt-format-deprecated"));
  CHECK_FALSE(from_data_blend_with({}).warned("checkpointing.dist-ckpt-format-deprecated"));

  r = from_data_blend_with({"--ckpt-fully-parallel-load", "--ckpt-fully-parallel-load-exchange-algo", "gather_rounds"});
  passes(r);
  CHECK(r.warned("checkpointing.parallel-load-exchange-algo"));
  CHECK_FALSE(from_data_blend_with({"--ckpt-fully-parallel-load"}).warned("checkpointing.parallel-load-exchange-algo"));
  CHECK_FALSE(from_data_blend_with({"--ckpt-fully-parallel-load", "--ckpt-fully-parallel-load-exchange-algo",
                                    "gather_object", "--ckpt-format", "torch"})
                  .warned("checkpointing.parallel-load-exchange-algo"));
}

TEST_CASE("checkpointing: the PG-distribution cache needs one group", "[validate-checkpointing]") {
  const Args cache = {"--ckpt-pg-tensors-cache-path", "/cache"};
  fails(from_data_blend_with(plus(cache, {"--ckpt-fully-parallel-save-process-group", "ep_dp"})),
        "checkpointing.pg-cache-same-group");
  fails(from_data_blend_with(plus(cache, {"--ckpt-fully-parallel-load-process-group", "ep_dp"})),
        "checkpointing.pg-cache-same-group");
  passes(from_data_blend_with(cache));
  passes(from_data_blend_with(plus(cache, {"--ckpt-fully-parallel-save-process-group", "ep_dp",
                               "--ckpt-fully-parallel-load-process-group", "ep_dp"})));
  passes(from_data_blend_with({"--ckpt-fully-parallel-save-process-group", "ep_dp"}));  // no cache
}

TEST_CASE("checkpointing: main params and streamed dequantisation", "[validate-checkpointing]") {
  fails(from_data_blend_with({"--load-main-params-from-ckpt"}), "checkpointing.main-params-needs-no-load-optim");
  passes(from_data_blend_with({"--load-main-params-from-ckpt", "--no-load-optim"}));

  const Args sd = {"--stream-ckpt-dequant", "--no-load-optim"};
  fails(from_data_blend_with({"--stream-ckpt-dequant"}), "checkpointing.stream-dequant-inference-only");
  fails(from_data_blend_with(plus(sd, {"--finetune"})), "checkpointing.stream-dequant-inference-only");
  passes(from_data_blend_with(sd));
  fails(from_data_blend_with(plus(sd, {"--load-main-params-from-ckpt"})),
        "checkpointing.stream-dequant-no-main-params");
  fails(from_data_blend_with(plus(sd, {"--fp8-format", "e4m3"})), "checkpointing.stream-dequant-no-delayed-fp8");
  passes(from_data_blend_with(plus(sd, {"--fp8-format", "e4m3", "--fp8-recipe", "tensorwise"})));
  passes(from_data_blend_with(plus(sd, {"--fp8-recipe", "delayed"})));  // no FP8 at all
  fails(from_data_blend_with(
            plus(sd, {"--ckpt-fully-parallel-load", "--ckpt-fully-parallel-load-exchange-algo", "gather_rounds"})),
        "checkpointing.stream-dequant-parallel-load-broadcast");
  passes(from_data_blend_with(plus(sd, {"--ckpt-fully-parallel-load"})));
  passes(from_data_blend_with(plus(sd, {"--ckpt-fully-parallel-load-exchange-algo", "gather_rounds"})));
}

TEST_CASE("checkpointing: async save, logits dumps, frozen layers, iteration override", "[validate-checkpointing]") {
  auto r = from_data_blend_with({"--async-save"});
  passes(r);
  CHECK(r.warned("checkpointing.async-save-needs-persistent-worker"));
  r = from_data_blend_with({"--async-save", "--use-persistent-ckpt-worker"});
  CHECK_FALSE(r.warned("checkpointing.async-save-needs-persistent-worker"));

  const Args logits = {"--logits-save-dir", "/logits"};
  fails(from_data_blend_with(logits), "checkpointing.logits-save-dir-needs-async-save");
  // --async-save without the persistent worker is switched off first, so the logits check then fails.
  fails(from_data_blend_with(plus(logits, {"--async-save"})), "checkpointing.logits-save-dir-needs-async-save");
  const Args ok = plus(logits, {"--async-save", "--use-persistent-ckpt-worker"});
  r = from_data_blend_with(ok);
  passes(r);
  CHECK(r.warned("checkpointing.logits-save-dir-training"));
  r = from_data_blend_with(plus(ok, {"--freeze-all-layers"}));
  passes(r);
  CHECK_FALSE(r.warned("checkpointing.logits-save-dir-training"));
  fails(from_data_blend_with(plus(ok, {"--rampup-batch-size", "2", "2", "100"})),
        "checkpointing.logits-save-dir-no-rampup");

  r = from_data_blend_with({"--freeze-all-layers", "--use-distributed-optimizer", "--overlap-param-gather"});
  passes(r);
  CHECK(r.warned("checkpointing.frozen-disables-distributed-optimizer"));
  CHECK(r.warned("checkpointing.frozen-disables-overlap-param-gather"));
  r = from_data_blend_with({"--freeze-all-layers"});
  CHECK_FALSE(r.warned("checkpointing.frozen-disables-distributed-optimizer"));
  CHECK_FALSE(r.warned("checkpointing.frozen-disables-overlap-param-gather"));

  fails(from_data_blend_with({"--override-ckpt-iteration", "100", "--finetune"}),
        "checkpointing.override-iteration-with-finetune");
  passes(from_data_blend_with({"--override-ckpt-iteration", "100"}));
  passes(from_data_blend_with({"--finetune"}));
}

TEST_CASE("derivation: checkpointing switches", "[validate-checkpointing]") {
  struct Case {
    Args extra;
    bool async_save, dist_opt, overlap_pg;
  };
  const Case cases[] = {
      {{}, false, false, false},
      // seed arguments.py:1745-1751 validate_args: async save needs the persistent worker (dist ckpt formats)
      {{"--async-save"}, false, false, false},
      {{"--async-save", "--use-persistent-ckpt-worker"}, true, false, false},
      {{"--async-save", "--ckpt-format", "torch"}, true, false, false},
      // seed arguments.py:1771-1781 validate_args: frozen layers turn off the distributed optimizer and param gather
      {{"--use-distributed-optimizer", "--overlap-param-gather"}, false, true, true},
      {{"--freeze-all-layers", "--use-distributed-optimizer", "--overlap-param-gather"}, false, false, false},
      {{"--freeze-all-layers", "--overlap-param-gather"}, false, false, false},
  };
  for (const auto& c : cases) {
    auto r = from_data_blend_with(c.extra);
    passes(r);
    CHECK(r["async_save"] == mr::Value(c.async_save));
    CHECK(r["use_distributed_optimizer"] == mr::Value(c.dist_opt));
    CHECK(r["overlap_param_gather"] == mr::Value(c.overlap_pg));
  }
}

TEST_CASE("local checkpoints and replication", "[validate-checkpointing]") {
  fails(from_data_blend_with({"--non-persistent-ckpt-type", "local"}), "local-ckpt.dir-required");
  passes(from_data_blend_with({"--non-persistent-ckpt-type", "local", "--non-persistent-local-ckpt-dir", "/local"}));
  const Args local = {"--non-persistent-ckpt-type", "local", "--non-persistent-local-ckpt-dir", "/local"};
  fails(from_data_blend_with(plus(local, {"--replication"})), "local-ckpt.replication-needs-jump");
  passes(from_data_blend_with(plus(local, {"--replication", "--replication-jump", "2"})));
  fails(from_data_blend_with({"--replication", "--replication-jump", "2"}), "local-ckpt.replication-needs-local");
  fails(from_data_blend_with({"--replication", "--replication-jump", "2", "--non-persistent-ckpt-type", "global"}),
        "local-ckpt.replication-needs-local");
  auto r = from_data_blend_with({"--replication-jump", "2"});
  passes(r);
  CHECK(r.warned("local-ckpt.replication-jump-ignored"));
  CHECK_FALSE(from_data_blend_with({"--replication-jump", "0"}).warned("local-ckpt.replication-jump-ignored"));
}

TEST_CASE("derivation: replication_jump", "[validate-checkpointing]") {
  struct Case {
    Args extra;
    mr::Value expected;
  };
  const std::string local[] = {"--non-persistent-ckpt-type", "local", "--non-persistent-local-ckpt-dir", "/l"};
  // seed arguments.py:1828-1830 validate_args: a jump without --replication is dropped (a 0 jump is falsy, kept)
  const Case cases[] = {
      {{}, mr::Value()},
      {{"--replication-jump", "4"}, mr::Value()},
      {{"--replication-jump", "0"}, mr::Value(0)},
      {{"--replication", "--replication-jump", "4", local[0], local[1], local[2], local[3]}, mr::Value(4)},
  };
  for (const auto& c : cases) {
    auto r = from_data_blend_with(c.extra);
    passes(r);
    CHECK(r["replication_jump"] == c.expected);
    CHECK(r["replication_jump"].kind() == c.expected.kind());
  }
}
