// Part E of the validation chain: seed arguments.py 1597-1931 of validate_args (data blend, deterministic mode,
// query-key layer scaling, rerun tracker, emerging optimizers, Gloo / fake process groups, checkpointing,
// pipeline-parallel inference, MoE upcycling, --skip-train and RL run checks, local checkpoints, delayed wgrad,
// activation offloading, MTP position embeddings, CUDA graphs, latent projections).
//
// Most cases parse a command line and run part E's sections alone, so they depend only on part E and on the
// argparse defaults (values that earlier parts derive are given on the command line where it matters). A few
// run the whole chain on a corpus file.
#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <unistd.h>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "config/validate/part_e_sections.h"
#include "config/validate/sections.h"
#include "support.h"

namespace {

using Env = std::map<std::string, std::string>;
using Args = std::vector<std::string>;
using Tweak = std::function<void(mr::Namespace&)>;

// Parses `args`, applies `tweak` to the namespace (values no command line can produce), runs part E's sections.
mrtest::Run only_e(const Args& args, const Env& env = {}, const mr::TargetEnv* target = nullptr,
                   const Tweak& tweak = {}) {
  return mrtest::run_parts(args, {&mr::sections_part_e}, env, target, tweak);
}

mrtest::Run e_with(const Args& extra, const Env& env = {}, const mr::TargetEnv* target = nullptr,
                   const Tweak& tweak = {}) {
  return only_e(mrtest::with(extra), env, target, tweak);
}

// base_args() without `flag` and its value.
Args base_without(const std::string& flag) {
  Args a = mrtest::base_args(), out;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] == flag) {
      if (i + 1 < a.size() && a[i + 1].rfind("--", 0) != 0) ++i;
      continue;
    }
    out.push_back(a[i]);
  }
  return out;
}

Args concat(Args a, const Args& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

mr::TargetEnv te(const std::string& version) {
  mr::TargetEnv t;
  t.te_version = version;
  return t;
}

void fails(const mrtest::Run& r, const std::string& rule) {
  INFO(r.message);
  CHECK(r.exit == 1);
  CHECK(r.rule == rule);
}

void passes(const mrtest::Run& r) {
  INFO(r.rule << ": " << r.message);
  CHECK(r.exit == 0);
}

std::string write_temp(const std::string& name, const std::string& text) {
  // Per-process names: ctest may run two test_config processes at once.
  std::string path = (std::filesystem::temp_directory_path() /
                      ("mr_validate_e_" + std::to_string(::getpid()) + "_" + name)).string();
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// seed 1597-1625: data blend, FIM, TE cross-entropy fusion

TEST_CASE("data blend: a single data source", "[part-e]") {
  fails(e_with({"--data-path", "/d/a"}), "data-blend.single-source");  // mock + data-path
  fails(e_with({"--test-data-path", "/d/t"}), "data-blend.single-source");
  fails(only_e(concat(base_without("--mock-data"), {"--data-path", "/d/a", "--train-data-path", "/d/t"})),
        "data-blend.single-source");
  passes(e_with({}));  // mock data only
  passes(only_e(concat(base_without("--mock-data"), {"--data-path", "/d/a"})));
  passes(only_e(concat(base_without("--mock-data"), {"--train-data-path", "/d/t", "--valid-data-path", "/d/v"})));
  passes(only_e(base_without("--mock-data")));  // no data source at all is fine
}

TEST_CASE("data blend: FIM dataset arguments", "[part-e]") {
  const Args real = concat(base_without("--mock-data"), {"--data-path", "/d/a", "--fim-data"});
  fails(e_with({"--fim-data"}), "data-blend.fim-no-mock-data");
  passes(only_e(real));
  fails(only_e(concat(real, {"--fim-rate", "0"})), "data-blend.fim-rate-required");
  passes(only_e(concat(real, {"--fim-rate", "0.1"})));
  fails(only_e(concat(real, {"--fim-spm-rate", "0.0"})), "data-blend.fim-spm-rate-required");
  passes(only_e(concat(real, {"--fim-spm-rate", "0.9"})));
  // A token cannot be None from the command line (type str, default ""); set it on the namespace.
  fails(only_e(real, {}, nullptr, [](mr::Namespace& ns) { ns.derive("fim_pad_token", mr::Value()); }),
        "data-blend.fim-tokens-required");
  passes(only_e(concat(real, {"--fim-pad-token", ""})));
  // Without --fim-data none of this is checked.
  passes(e_with({"--fim-rate", "0"}));
}

TEST_CASE("data blend: TE cross-entropy fusion needs TE 2.19", "[part-e]") {
  const Args te_fusion = {"--cross-entropy-loss-fusion", "--cross-entropy-fusion-impl", "te"};
  auto old = te("2.18.9"), ok = te("2.19.0");
  fails(e_with(te_fusion, {}, &old), "data-blend.te-cross-entropy-fusion-version");
  passes(e_with(te_fusion, {}, &ok));
  passes(e_with(te_fusion));  // target TE 2.20.2
  passes(e_with({"--cross-entropy-loss-fusion", "--cross-entropy-fusion-impl", "native"}, {}, &old));
  passes(e_with({"--cross-entropy-fusion-impl", "te"}, {}, &old));
}

// ---------------------------------------------------------------------------------------------------------------
// seed 1627-1632: deterministic mode (megatron/training/determinism.py)

TEST_CASE("determinism: options that must be off", "[part-e]") {
  auto r = e_with({"--deterministic-mode", "--tp-comm-overlap"});
  fails(r, "determinism.incompatible-options");
  CHECK(r.message.find("tp_comm_overlap=False (got True)") != std::string::npos);
  r = e_with({"--deterministic-mode", "--cross-entropy-loss-fusion", "--tp-comm-overlap"});
  fails(r, "determinism.incompatible-options");
  CHECK(r.message.find("cross_entropy_loss_fusion=False (got True), tp_comm_overlap=False (got True)") !=
        std::string::npos);
  passes(e_with({"--deterministic-mode"}));
  passes(e_with({"--tp-comm-overlap", "--cross-entropy-loss-fusion"}));  // not in deterministic mode
  // The option check comes before the environment checks.
  fails(e_with({"--deterministic-mode", "--tp-comm-overlap"}, {{"NCCL_ALGO", "Tree"}}),
        "determinism.incompatible-options");
}

TEST_CASE("determinism: NCCL_ALGO tokens", "[part-e]") {
  const Args det = {"--deterministic-mode"};
  fails(e_with(det, {{"NCCL_ALGO", "Tree"}}), "determinism.nccl-algo");
  fails(e_with(det, {{"NCCL_ALGO", "Ring,Tree"}}), "determinism.nccl-algo");
  fails(e_with(det, {{"NCCL_ALGO", ""}}), "determinism.nccl-algo");      // no token at all
  fails(e_with(det, {{"NCCL_ALGO", " , "}}), "determinism.nccl-algo");   // blank tokens only
  fails(e_with(det, {{"NCCL_ALGO", "ring"}}), "determinism.nccl-algo");  // case matters
  passes(e_with(det, {{"NCCL_ALGO", "Ring"}}));
  passes(e_with(det, {{"NCCL_ALGO", "^NVLS"}}));
  passes(e_with(det, {{"NCCL_ALGO", " Ring , CollnetDirect,CollnetChain,"}}));
  passes(e_with(det));                          // unset: Megatron fills in Ring
  passes(e_with({}, {{"NCCL_ALGO", "Tree"}}));  // not in deterministic mode
}

TEST_CASE("determinism: exact-value environment variables", "[part-e]") {
  const Args det = {"--deterministic-mode"};
  fails(e_with(det, {{"NVTE_ALLOW_NONDETERMINISTIC_ALGO", "1"}}), "determinism.env-value");
  fails(e_with(det, {{"NVTE_ALLOW_NONDETERMINISTIC_ALGO", "00"}}), "determinism.env-value");
  passes(e_with(det, {{"NVTE_ALLOW_NONDETERMINISTIC_ALGO", "0"}}));
  fails(e_with(det, {{"CUBLAS_WORKSPACE_CONFIG", ":4096:2"}}), "determinism.env-value");
  passes(e_with(det, {{"CUBLAS_WORKSPACE_CONFIG", ":4096:8"}}));
  passes(e_with(det, {{"CUBLAS_WORKSPACE_CONFIG", ":16:8"}}));
  passes(e_with({}, {{"CUBLAS_WORKSPACE_CONFIG", ":4096:2"}, {"NVTE_ALLOW_NONDETERMINISTIC_ALGO", "1"}}));
}

TEST_CASE("determinism: SSM determinism variables", "[part-e]") {
  const Args det = {"--deterministic-mode"};
  fails(e_with(det, {{"MAMBA_DETERMINISTIC", "0"}}), "determinism.ssm-env");
  fails(e_with(det, {{"CAUSAL_CONV1D_DETERMINISTIC", "true"}}), "determinism.ssm-env");
  passes(e_with(det, {{"MAMBA_DETERMINISTIC", "1"}}));
  passes(e_with(det, {{"CAUSAL_CONV1D_DETERMINISTIC", "1yes"}}));  // only the first character counts
  passes(e_with(det, {{"MAMBA_DETERMINISTIC", ""}}));              // empty counts as unset
  passes(e_with({}, {{"MAMBA_DETERMINISTIC", "0"}}));
}

TEST_CASE("determinism: the TP-overlap corpus config is rejected by the whole chain", "[part-e]") {
  // seed 1631-1632: the file asks for --deterministic-mode together with --tp-comm-overlap.
  // As the reference was run: WORLD_SIZE=8, RANK=0, ${VAR} -> /placeholder/VAR.
  mr::Invocation inv;
  inv.env = mr::TargetEnv{};
  inv.env.vars["WORLD_SIZE"] = "8";
  inv.env.vars["RANK"] = "0";
  inv.config.env = [](const std::string& name) -> std::optional<std::string> { return "/placeholder/" + name; };
  inv.config_files = {std::string(MR_DATA_DIR) +
                      "/corpus/functional-tests/"
                      "gpt__gpt3_weekly_mcore_tp2_pp2_current_scaling_native_fp8_tp_pp_sp_tp_overlap.yaml"};
  std::ifstream probe(inv.config_files[0]);
  if (!probe) {
    WARN("corpus not available; skipped");
    return;
  }
  mr::Outcome o = mr::resolve(mr::Schema::megatron(), inv);
  CHECK(o.exit_code() == 1);
  std::string rule;
  for (const auto& d : o.diagnostics)
    if (d.level == mr::Diagnostic::Level::Error) rule = d.rule;
  CHECK(rule == "determinism.incompatible-options");
}

// ---------------------------------------------------------------------------------------------------------------
// seed 1634-1643: query-key layer scaling, rerun tracker file

TEST_CASE("derivation: attention_softmax_in_fp32", "[part-e]") {
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
    auto r = e_with(c.extra);
    passes(r);
    CHECK(r["attention_softmax_in_fp32"] == mr::Value(c.expected));
  }
}

TEST_CASE("derivation: iterations_to_skip from the rerun tracker file", "[part-e]") {
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
  auto r = e_with({"--result-rejected-tracker-filename", path});
  passes(r);
  CHECK(r["iterations_to_skip"] == mr::Value(mr::List{mr::Value(5)}));
  r = e_with({"--result-rejected-tracker-filename", path, "--iterations-to-skip", "2", "3"});
  CHECK(r["iterations_to_skip"] == mr::Value(mr::List{mr::Value(2), mr::Value(3), mr::Value(5)}));
  CHECK_FALSE(r.warned("rerun.tracker-file-unreadable"));

  // A line that does not parse stops the reading; what was read so far still counts.
  const std::string bad = pre + "jobID=J1 rank=0 iteration=4 status=RERUN_DISABLED result=1 message=a\n" + pre +
                          "jobID=J1 rank=0 iteration=4 status=RERUN_DISABLED result=1 message=a\n" + pre +
                          "jobID=J1 rank=abc iteration=6 status=RERUN_DISABLED result=1 message=a\n" + pre +
                          "jobID=J1 rank=0 iteration=6 status=RERUN_DISABLED result=1 message=a\n" + pre +
                          "jobID=J1 rank=0 iteration=6 status=RERUN_DISABLED result=1 message=a\n";
  r = e_with({"--result-rejected-tracker-filename", write_temp("tracker_bad.txt", bad)});
  passes(r);
  CHECK(r.warned("rerun.tracker-file-unreadable"));
  CHECK(r["iterations_to_skip"] == mr::Value(mr::List{mr::Value(4)}));

  // A missing file only warns.
  r = e_with({"--result-rejected-tracker-filename", "/nonexistent/tracker.txt", "--iterations-to-skip", "8"});
  passes(r);
  CHECK(r.warned("rerun.tracker-file-unreadable"));
  CHECK(r["iterations_to_skip"] == mr::Value(mr::List{mr::Value(8)}));
  r = e_with({});
  CHECK(r["iterations_to_skip"] == mr::Value(mr::List{}));
  CHECK_FALSE(r.warned("rerun.tracker-file-unreadable"));
}

// ---------------------------------------------------------------------------------------------------------------
// seed 1645-1670: emerging optimizers, Gloo process groups, fake process group

TEST_CASE("emerging optimizers: FSDP and checkpoint formats", "[part-e]") {
  fails(e_with({"--optimizer", "muon", "--use-torch-fsdp2"}), "emerging-optimizer.no-torch-fsdp2");
  fails(e_with({"--optimizer", "lion", "--use-megatron-fsdp"}), "emerging-optimizer.no-megatron-fsdp");
  fails(e_with({"--optimizer", "soap", "--ckpt-format", "torch_dcp"}), "emerging-optimizer.ckpt-format");
  fails(e_with({"--optimizer", "muon", "--ckpt-format", "fsdp_dtensor"}), "emerging-optimizer.ckpt-format");
  passes(e_with({"--optimizer", "muon"}));
  passes(e_with({"--optimizer", "muon", "--ckpt-format", "torch"}));
  passes(e_with({"--optimizer", "adam", "--use-torch-fsdp2", "--ckpt-format", "torch_dcp"}));
  passes(e_with({"--optimizer", "sgd", "--use-megatron-fsdp", "--ckpt-format", "fsdp_dtensor"}));
}

TEST_CASE("Gloo process groups: distributed optimizer without Gloo", "[part-e]") {
  const Args no_gloo = {"--disable-gloo-process-groups", "--use-distributed-optimizer"};
  fails(e_with(concat(no_gloo, {"--ckpt-format", "torch"})), "gloo.distributed-optimizer-needs-dist-ckpt");
  passes(e_with(no_gloo));                                                             // torch_dist
  passes(e_with(concat(no_gloo, {"--ckpt-format", "torch", "--optimizer", "muon"})));  // only sgd/adam
  passes(e_with({"--use-distributed-optimizer", "--ckpt-format", "torch"}));           // Gloo available
  // The value part A derives wins over the fallback.
  fails(e_with(no_gloo, {}, nullptr, [](mr::Namespace& ns) { ns.derive("use_dist_ckpt", mr::Value(false)); }),
        "gloo.distributed-optimizer-needs-dist-ckpt");

  const Args reshard = concat(no_gloo, {"--dist-ckpt-optim-fully-reshardable"});
  fails(e_with(concat(reshard, {"--distrib-optim-fully-reshardable-mem-efficient"})),
        "gloo.fully-reshardable-mem-efficient");
  passes(e_with(reshard));
  passes(e_with(concat(no_gloo, {"--distrib-optim-fully-reshardable-mem-efficient"})));
  passes(e_with({"--dist-ckpt-optim-fully-reshardable", "--distrib-optim-fully-reshardable-mem-efficient",
                 "--use-distributed-optimizer"}));
}

TEST_CASE("fake process group", "[part-e]") {
  fails(e_with({"--fake-process-group", "--moe-token-dispatcher-type", "flex"}),
        "fake-process-group.no-flex-dispatcher");
  auto r = e_with({"--fake-process-group", "--moe-token-dispatcher-type", "alltoall"});
  passes(r);
  CHECK(r.warned("fake-process-group.nan-check-disabled"));
  CHECK(r.warned("fake-process-group.gloo-disabled"));
  passes(e_with({"--moe-token-dispatcher-type", "flex"}));
  // The Gloo check runs before the fake process group turns Gloo off.
  passes(e_with({"--fake-process-group", "--use-distributed-optimizer", "--ckpt-format", "torch"}));
}

TEST_CASE("derivation: fake process group switches", "[part-e]") {
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
    auto r = e_with(c.extra);
    passes(r);
    CHECK(r["check_for_nan_in_loss_and_grad"] == mr::Value(c.nan_check));
    CHECK(r["use_gloo_process_groups"] == mr::Value(c.gloo));
  }
}

// ---------------------------------------------------------------------------------------------------------------
// seed 1672-1784: checkpointing

TEST_CASE("checkpointing: deprecated flags and parallel save/load warnings", "[part-e]") {
  auto r = e_with({"--ckpt-fully-parallel-save"});
  passes(r);
  CHECK(r.warned("checkpointing.fully-parallel-save-deprecated"));
  CHECK_FALSE(e_with({"--ckpt-fully-parallel-save"}, {{"RANK", "1"}})
                  .warned("checkpointing.fully-parallel-save-deprecated"));  // printed on rank 0 only
  CHECK_FALSE(e_with({}).warned("checkpointing.fully-parallel-save-deprecated"));

  CHECK(e_with({"--no-ckpt-fully-parallel-save", "--use-distributed-optimizer"})
            .warned("checkpointing.non-parallel-save-distributed-optimizer"));
  CHECK_FALSE(e_with({"--no-ckpt-fully-parallel-save", "--use-distributed-optimizer", "--ckpt-format", "torch"})
                  .warned("checkpointing.non-parallel-save-distributed-optimizer"));
  CHECK_FALSE(
      e_with({"--no-ckpt-fully-parallel-save"}).warned("checkpointing.non-parallel-save-distributed-optimizer"));

  CHECK(e_with({"--use-dist-ckpt"}).warned("checkpointing.use-dist-ckpt-deprecated"));
  CHECK_FALSE(e_with({}).warned("checkpointing.use-dist-ckpt-deprecated"));
  CHECK(e_with({"--dist-ckpt-format", "zarr"}).warned("checkpointing.dist-ckpt-format-deprecated"));
  CHECK_FALSE(e_with({}).warned("checkpointing.dist-ckpt-format-deprecated"));

  r = e_with({"--ckpt-fully-parallel-load", "--ckpt-fully-parallel-load-exchange-algo", "gather_rounds"});
  passes(r);
  CHECK(r.warned("checkpointing.parallel-load-exchange-algo"));
  CHECK_FALSE(e_with({"--ckpt-fully-parallel-load"}).warned("checkpointing.parallel-load-exchange-algo"));
  CHECK_FALSE(e_with({"--ckpt-fully-parallel-load", "--ckpt-fully-parallel-load-exchange-algo", "gather_object",
                      "--ckpt-format", "torch"})
                  .warned("checkpointing.parallel-load-exchange-algo"));
}

TEST_CASE("checkpointing: the PG-distribution cache needs one group", "[part-e]") {
  const Args cache = {"--ckpt-pg-tensors-cache-path", "/cache"};
  fails(e_with(concat(cache, {"--ckpt-fully-parallel-save-process-group", "ep_dp"})),
        "checkpointing.pg-cache-same-group");
  fails(e_with(concat(cache, {"--ckpt-fully-parallel-load-process-group", "ep_dp"})),
        "checkpointing.pg-cache-same-group");
  passes(e_with(cache));
  passes(e_with(concat(cache, {"--ckpt-fully-parallel-save-process-group", "ep_dp",
                               "--ckpt-fully-parallel-load-process-group", "ep_dp"})));
  passes(e_with({"--ckpt-fully-parallel-save-process-group", "ep_dp"}));  // no cache
}

TEST_CASE("checkpointing: main params and streamed dequantisation", "[part-e]") {
  fails(e_with({"--load-main-params-from-ckpt"}), "checkpointing.main-params-needs-no-load-optim");
  passes(e_with({"--load-main-params-from-ckpt", "--no-load-optim"}));

  const Args sd = {"--stream-ckpt-dequant", "--no-load-optim"};
  fails(e_with({"--stream-ckpt-dequant"}), "checkpointing.stream-dequant-inference-only");
  fails(e_with(concat(sd, {"--finetune"})), "checkpointing.stream-dequant-inference-only");
  passes(e_with(sd));
  fails(e_with(concat(sd, {"--load-main-params-from-ckpt"})), "checkpointing.stream-dequant-no-main-params");
  fails(e_with(concat(sd, {"--fp8-format", "e4m3"})), "checkpointing.stream-dequant-no-delayed-fp8");
  passes(e_with(concat(sd, {"--fp8-format", "e4m3", "--fp8-recipe", "tensorwise"})));
  passes(e_with(concat(sd, {"--fp8-recipe", "delayed"})));  // no FP8 at all
  fails(e_with(concat(sd, {"--ckpt-fully-parallel-load", "--ckpt-fully-parallel-load-exchange-algo", "gather_rounds"})),
        "checkpointing.stream-dequant-parallel-load-broadcast");
  passes(e_with(concat(sd, {"--ckpt-fully-parallel-load"})));
  passes(e_with(concat(sd, {"--ckpt-fully-parallel-load-exchange-algo", "gather_rounds"})));
}

TEST_CASE("checkpointing: async save, logits dumps, frozen layers, iteration override", "[part-e]") {
  auto r = e_with({"--async-save"});
  passes(r);
  CHECK(r.warned("checkpointing.async-save-needs-persistent-worker"));
  r = e_with({"--async-save", "--use-persistent-ckpt-worker"});
  CHECK_FALSE(r.warned("checkpointing.async-save-needs-persistent-worker"));

  const Args logits = {"--logits-save-dir", "/logits"};
  fails(e_with(logits), "checkpointing.logits-save-dir-needs-async-save");
  // --async-save without the persistent worker is switched off first, so the logits check then fails.
  fails(e_with(concat(logits, {"--async-save"})), "checkpointing.logits-save-dir-needs-async-save");
  const Args ok = concat(logits, {"--async-save", "--use-persistent-ckpt-worker"});
  r = e_with(ok);
  passes(r);
  CHECK(r.warned("checkpointing.logits-save-dir-training"));
  r = e_with(concat(ok, {"--freeze-all-layers"}));
  passes(r);
  CHECK_FALSE(r.warned("checkpointing.logits-save-dir-training"));
  fails(e_with(concat(ok, {"--rampup-batch-size", "2", "2", "100"})), "checkpointing.logits-save-dir-no-rampup");

  r = e_with({"--freeze-all-layers", "--use-distributed-optimizer", "--overlap-param-gather"});
  passes(r);
  CHECK(r.warned("checkpointing.frozen-disables-distributed-optimizer"));
  CHECK(r.warned("checkpointing.frozen-disables-overlap-param-gather"));
  r = e_with({"--freeze-all-layers"});
  CHECK_FALSE(r.warned("checkpointing.frozen-disables-distributed-optimizer"));
  CHECK_FALSE(r.warned("checkpointing.frozen-disables-overlap-param-gather"));

  fails(e_with({"--override-ckpt-iteration", "100", "--finetune"}), "checkpointing.override-iteration-with-finetune");
  passes(e_with({"--override-ckpt-iteration", "100"}));
  passes(e_with({"--finetune"}));
}

TEST_CASE("derivation: checkpointing switches", "[part-e]") {
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
    auto r = e_with(c.extra);
    passes(r);
    CHECK(r["async_save"] == mr::Value(c.async_save));
    CHECK(r["use_distributed_optimizer"] == mr::Value(c.dist_opt));
    CHECK(r["overlap_param_gather"] == mr::Value(c.overlap_pg));
  }
}

// ---------------------------------------------------------------------------------------------------------------
// seed 1786-1830: pipeline-parallel inference, MoE upcycling, --skip-train, RL run checks, local checkpoints

TEST_CASE("pipeline-parallel microbatched inference", "[part-e]") {
  const Args thr = {"--inference-batch-times-seqlen-threshold", "512"};
  fails(e_with(thr), "pp-inference.needs-pipeline-parallel");
  passes(e_with(concat(thr, {"--pipeline-model-parallel-size", "2"})));
  fails(e_with(concat(thr, {"--pipeline-model-parallel-size", "2", "--cuda-graph-impl", "local"})),
        "pp-inference.no-cuda-graphs");
  passes(e_with({"--inference-batch-times-seqlen-threshold", "-1", "--cuda-graph-impl", "local"}));
  fails(e_with({"--inference-batch-times-seqlen-threshold", "0"}), "pp-inference.needs-pipeline-parallel");
}

TEST_CASE("MoE upcycling", "[part-e]") {
  fails(e_with({"--moe-use-upcycling"}), "upcycling.save-required");
  auto r = e_with({"--moe-use-upcycling", "--save", "/ckpt"});
  passes(r);
  CHECK(r.warned("upcycling.no-load-optim"));
  CHECK(r.warned("upcycling.no-load-rng"));
  r = e_with({"--moe-use-upcycling", "--save", "/ckpt", "--no-load-optim", "--no-load-rng"});
  passes(r);
  CHECK_FALSE(r.warned("upcycling.no-load-optim"));
  CHECK_FALSE(r.warned("upcycling.no-load-rng"));
}

TEST_CASE("skip-train turns off optimizer loading", "[part-e]") {
  auto r = e_with({"--skip-train"});
  passes(r);
  CHECK(r.warned("skip-train.no-load-optim"));
  r = e_with({"--skip-train", "--no-load-optim"});
  CHECK_FALSE(r.warned("skip-train.no-load-optim"));
  CHECK_FALSE(e_with({}).warned("skip-train.no-load-optim"));
}

TEST_CASE("derivation: no_load_optim / no_load_rng", "[part-e]") {
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
    auto r = e_with(c.extra);
    passes(r);
    CHECK(r["no_load_optim"] == c.optim);
    CHECK(r["no_load_optim"].kind() == c.optim.kind());
    CHECK(r["no_load_rng"] == c.rng);
    CHECK(r["no_load_rng"].kind() == c.rng.kind());
  }
}

TEST_CASE("RL run checks (RLConfig.validate_run)", "[part-e]") {
  // base: micro batch 2, global batch 8; GRPO defaults 32 prompts x 2 rollouts x 2 iterations = 128 samples,
  // i.e. 16 training iterations per inference step.
  const Args rl = {"--perform-rl-step"};
  passes(e_with(rl));

  fails(e_with(concat(rl, {"--rl-training-cuda-graphs"})), "rl.training-cuda-graphs-need-graphs");
  passes(e_with(concat(rl, {"--rl-training-cuda-graphs", "--cuda-graph-impl", "local"})));
  passes(e_with({"--rl-training-cuda-graphs"}));  // not an RL run

  fails(e_with(concat(rl, {"--rl-use-sequence-packing"})), "rl.sequence-packing-micro-batch-size");
  passes(e_with(concat(rl, {"--rl-use-sequence-packing", "--micro-batch-size", "1"})));

  const Args six = {"--grpo-prompts-per-step", "3", "--grpo-group-size", "2", "--grpo-iterations", "1"};
  fails(e_with(concat(concat(rl, six), {})), "rl.samples-divisible-by-global-batch-size");
  passes(e_with(concat(concat(rl, six), {"--global-batch-size", "6"})));
  passes(e_with(concat(concat(rl, six), {"--global-batch-size", "3"})));  // 2 iterations per inference step

  fails(e_with(concat(rl, {"--exit-interval", "20"})), "rl.exit-interval-divisible");
  passes(e_with(concat(rl, {"--exit-interval", "32"})));
  fails(e_with(concat(rl, {"--save-interval", "24"})), "rl.save-interval-divisible");
  passes(e_with(concat(rl, {"--save-interval", "48"})));
  passes(e_with({"--exit-interval", "20", "--save-interval", "24"}));  // not an RL run

  const Args offload = concat(rl, {"--rl-offload-optimizer-during-inference"});
  fails(e_with(concat(offload, {"--skip-train"})), "rl.offload-optimizer-needs-optimizer");
  passes(e_with(offload));
  passes(e_with({"--rl-offload-optimizer-during-inference", "--skip-train"}));

  const Args weights = concat(rl, {"--rl-offload-inference-model-weights-when-idle"});
  fails(e_with(weights), "rl.offload-inference-weights-needs-separate-model");
  passes(e_with(concat(weights, {"--rl-inference-tensor-model-parallel-size", "1"})));
  passes(e_with(concat(weights, {"--rl-inference-expert-model-parallel-size", "1"})));
  passes(e_with(concat(weights, {"--context-parallel-size", "2"})));
  passes(e_with(concat(weights, {"--inference-shards", "tp=1"})));
}

TEST_CASE("local checkpoints and replication", "[part-e]") {
  fails(e_with({"--non-persistent-ckpt-type", "local"}), "local-ckpt.dir-required");
  passes(e_with({"--non-persistent-ckpt-type", "local", "--non-persistent-local-ckpt-dir", "/local"}));
  const Args local = {"--non-persistent-ckpt-type", "local", "--non-persistent-local-ckpt-dir", "/local"};
  fails(e_with(concat(local, {"--replication"})), "local-ckpt.replication-needs-jump");
  passes(e_with(concat(local, {"--replication", "--replication-jump", "2"})));
  fails(e_with({"--replication", "--replication-jump", "2"}), "local-ckpt.replication-needs-local");
  fails(e_with({"--replication", "--replication-jump", "2", "--non-persistent-ckpt-type", "global"}),
        "local-ckpt.replication-needs-local");
  auto r = e_with({"--replication-jump", "2"});
  passes(r);
  CHECK(r.warned("local-ckpt.replication-jump-ignored"));
  CHECK_FALSE(e_with({"--replication-jump", "0"}).warned("local-ckpt.replication-jump-ignored"));
}

TEST_CASE("derivation: replication_jump", "[part-e]") {
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
    auto r = e_with(c.extra);
    passes(r);
    CHECK(r["replication_jump"] == c.expected);
    CHECK(r["replication_jump"].kind() == c.expected.kind());
  }
}

// ---------------------------------------------------------------------------------------------------------------
// seed 1832-1879: delayed wgrad, activation offloading, MTP position embeddings, cpu_offloading

TEST_CASE("delay wgrad compute", "[part-e]") {
  const Args dw = {"--delay-wgrad-compute"};
  fails(e_with(concat(dw, {"--transformer-impl", "local"})), "delay-wgrad.needs-transformer-engine");
  passes(e_with(dw));

  const Args ov = concat(dw, {"--overlap-grad-reduce"});
  auto t27 = te("2.7.0"), t28 = te("2.8.0"), t211 = te("2.11.0"), t212 = te("2.12.0"), t26 = te("2.6.0");
  fails(e_with(ov, {}, &t27), "delay-wgrad.overlap-grad-reduce-te-version");
  passes(e_with(ov, {}, &t28));
  passes(e_with(dw, {}, &t27));  // no grad-reduce overlap

  const Args attn = concat(ov, {"--cuda-graph-modules", "attn", "--disable-bias-linear"});
  fails(e_with(attn, {}, &t211), "delay-wgrad.cuda-graph-te-version");
  passes(e_with(attn, {}, &t212));
  passes(e_with(concat(ov, {"--cuda-graph-modules", "mlp"}), {}, &t211));  // no wgrad in the graph
  const Args router = concat(ov, {"--cuda-graph-modules", "moe_router", "--moe-shared-expert-intermediate-size", "64"});
  fails(e_with(router, {}, &t211), "delay-wgrad.cuda-graph-te-version");
  passes(e_with(concat(router, {"--moe-shared-expert-overlap"}), {}, &t211));
  passes(e_with(concat(ov, {"--cuda-graph-modules", "moe_router"}), {}, &t211));  // no shared expert

  fails(e_with(concat(attn, {"--no-gradient-accumulation-fusion"})),
        "delay-wgrad.cuda-graph-needs-grad-accumulation-fusion");
  fails(e_with(concat(router, {"--no-gradient-accumulation-fusion"})),
        "delay-wgrad.cuda-graph-needs-grad-accumulation-fusion");
  passes(e_with(concat(ov, {"--no-gradient-accumulation-fusion"})));

  fails(e_with(concat(ov, {"--cuda-graph-modules", "attn"})), "delay-wgrad.cuda-graph-attn-no-bias");
  fails(e_with(concat(attn, {"--add-qkv-bias"})), "delay-wgrad.cuda-graph-attn-no-bias");
  passes(e_with(router));  // biases are only checked for attention graphs

  fails(e_with(concat(dw, {"--no-gradient-accumulation-fusion"}), {}, &t26),
        "delay-wgrad.no-grad-accumulation-fusion-te-version");
  passes(e_with(concat(dw, {"--no-gradient-accumulation-fusion"}), {}, &t27));
  passes(e_with({"--no-gradient-accumulation-fusion", "--transformer-impl", "local"}, {}, &t26));
}

TEST_CASE("fine-grained activation offloading", "[part-e]") {
  const Args fg = {"--fine-grained-activation-offloading"};
  fails(e_with(concat(fg, {"--transformer-impl", "local"}), {{"NVTE_CPU_OFFLOAD_V1", "1"}}),
        "activation-offloading.needs-transformer-engine");
  fails(e_with(fg), "activation-offloading.nvte-cpu-offload-v1");
  fails(e_with(fg, {{"NVTE_CPU_OFFLOAD_V1", "0"}}), "activation-offloading.nvte-cpu-offload-v1");
  passes(e_with(fg, {{"NVTE_CPU_OFFLOAD_V1", "1"}}));
  auto t29 = te("2.9.0");
  passes(e_with(fg, {}, &t29));
}

TEST_CASE("MTP needs position_ids-based position embeddings", "[part-e]") {
  fails(e_with({"--mtp-num-layers", "1", "--position-embedding-type", "relative"}),
        "mtp-position-embedding.supported-type");
  fails(e_with({"--mtp-num-layers", "1", "--position-embedding-type", "yarn"}),
        "mtp-position-embedding.supported-type");
  for (const char* t : {"learned_absolute", "rope", "mrope", "none"})
    passes(e_with({"--mtp-num-layers", "2", "--position-embedding-type", t}));
  passes(e_with({"--mtp-num-layers", "0", "--position-embedding-type", "relative"}));
  passes(e_with({"--position-embedding-type", "yarn"}));
}

TEST_CASE("derivation: cpu_offloading", "[part-e]") {
  // seed arguments.py:1877-1879 validate_args: only set (to True) when layers are offloaded; otherwise absent.
  auto r = e_with({"--cpu-offloading-num-layers", "2"});
  passes(r);
  REQUIRE(r.has("cpu_offloading"));
  CHECK(r["cpu_offloading"] == mr::Value(true));
  CHECK_FALSE(e_with({}).has("cpu_offloading"));
  CHECK_FALSE(e_with({"--cpu-offloading-num-layers", "0"}).has("cpu_offloading"));
}

// ---------------------------------------------------------------------------------------------------------------
// seed 1881-1925: CUDA graphs, multi-latent attention, MoE latent projections

TEST_CASE("CUDA graphs: TE RNG tracker and the allocator environment", "[part-e]") {
  auto r = e_with({"--cuda-graph-impl", "local"});
  passes(r);
  CHECK(r.warned("cuda-graph-runtime.te-rng-tracker-enabled"));
  CHECK_FALSE(
      e_with({"--cuda-graph-impl", "local", "--te-rng-tracker"}).warned("cuda-graph-runtime.te-rng-tracker-enabled"));
  CHECK_FALSE(e_with({}).warned("cuda-graph-runtime.te-rng-tracker-enabled"));

  const Env expandable = {{"PYTORCH_CUDA_ALLOC_CONF", "max_split_size_mb:128,expandable_segments:True"}};
  fails(e_with({"--cuda-graph-impl", "transformer_engine"}, expandable),
        "cuda-graph-runtime.expandable-segments-nccl-register");
  Env registered = expandable;
  registered["NCCL_GRAPH_REGISTER"] = "0";
  passes(e_with({"--cuda-graph-impl", "transformer_engine"}, registered));
  passes(e_with({"--cuda-graph-impl", "local"}, expandable));
  passes(
      e_with({"--cuda-graph-impl", "transformer_engine"}, {{"PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:False"}}));
}

TEST_CASE("derivation: te_rng_tracker", "[part-e]") {
  struct Case {
    Args extra;
    bool expected;
  };
  // seed arguments.py:1882-1888 validate_args: CUDA graphs with TE (as model or graph implementation) need it
  const Case cases[] = {
      {{}, false},
      {{"--cuda-graph-impl", "local"}, true},
      {{"--cuda-graph-impl", "local", "--transformer-impl", "local"}, false},
      {{"--cuda-graph-impl", "transformer_engine", "--transformer-impl", "local"}, true},
      {{"--cuda-graph-impl", "full_iteration", "--transformer-impl", "local"}, false},
      {{"--te-rng-tracker"}, true},
  };
  for (const auto& c : cases) {
    auto r = e_with(c.extra);
    passes(r);
    CHECK(r["te_rng_tracker"] == mr::Value(c.expected));
  }
}

TEST_CASE("CUDA graphs: full iteration and the MoE shortcut connection", "[part-e]") {
  fails(e_with({"--cuda-graph-impl", "full_iteration", "--cuda-graph-modules", "attn"}),
        "cuda-graph-runtime.full-iteration-no-modules");
  passes(e_with({"--cuda-graph-impl", "full_iteration"}));
  passes(e_with({"--cuda-graph-impl", "local", "--cuda-graph-modules", "attn"}));

  fails(e_with({"--moe-shortcut-connection", "--cuda-graph-impl", "local"}),
        "cuda-graph-runtime.moe-shortcut-connection");
  fails(e_with({"--moe-shortcut-connection", "--cuda-graph-impl", "transformer_engine", "--inference-cuda-graph-scope",
                "block"}),
        "cuda-graph-runtime.moe-shortcut-connection");
  fails(e_with({"--moe-shortcut-connection", "--cuda-graph-impl", "local", "--inference-cuda-graph-scope", "layer"}),
        "cuda-graph-runtime.moe-shortcut-connection");
  passes(e_with({"--moe-shortcut-connection", "--cuda-graph-impl", "local", "--inference-cuda-graph-scope", "block"}));
  passes(e_with({"--moe-shortcut-connection"}));
  // The normalised enum spelling (part A) is recognised too.
  passes(e_with({"--moe-shortcut-connection", "--cuda-graph-impl", "local"}, {}, nullptr, [](mr::Namespace& ns) {
    ns.derive("inference_cuda_graph_scope", mr::Value("InferenceCudaGraphScope.block"));
  }));
  fails(e_with({"--moe-shortcut-connection", "--cuda-graph-impl", "local"}, {}, nullptr,
               [](mr::Namespace& ns) {
                 ns.derive("inference_cuda_graph_scope", mr::Value("InferenceCudaGraphScope.none"));
               }),
        "cuda-graph-runtime.moe-shortcut-connection");
}

TEST_CASE("multi-latent attention and MoE latent projections", "[part-e]") {
  fails(e_with({"--multi-latent-attention", "--group-query-attention"}), "latent.mla-excludes-gqa");
  passes(e_with({"--multi-latent-attention"}));
  passes(e_with({"--group-query-attention"}));
  fails(e_with({"--mla-down-proj-fusion"}), "latent.mla-down-proj-fusion-needs-mla");
  passes(e_with({"--mla-down-proj-fusion", "--multi-latent-attention"}));
  fails(e_with({"--moe-use-norm-before-up-proj", "--num-experts", "4"}),
        "latent.norm-before-up-proj-needs-latent-size");
  passes(e_with({"--moe-use-norm-before-up-proj", "--num-experts", "4", "--moe-latent-size", "16"}));
  fails(e_with({"--moe-latent-size", "0", "--num-experts", "4"}), "latent.moe-latent-size-positive");
  fails(e_with({"--moe-latent-size", "-3", "--num-experts", "4"}), "latent.moe-latent-size-positive");
  fails(e_with({"--moe-latent-size", "16"}), "latent.moe-latent-needs-experts");
  passes(e_with({"--moe-latent-size", "16", "--num-experts", "4"}));
}

TEST_CASE("part E sections are listed in seed order", "[part-e]") {
  std::vector<std::string> names;
  for (const mr::Section& s : mr::sections_part_e()) names.push_back(s.name);
  const std::vector<std::string> expected = {"data-blend",
                                             "determinism",
                                             "qk-layer-scaling",
                                             "rerun-tracker",
                                             "emerging-optimizer",
                                             "gloo-process-groups",
                                             "fake-process-group",
                                             "checkpoint-save-load",
                                             "pp-inference",
                                             "moe-upcycling",
                                             "skip-train-rl",
                                             "local-checkpointing",
                                             "delay-wgrad",
                                             "fine-grained-offloading",
                                             "mtp-position-embedding",
                                             "cpu-offloading",
                                             "cuda-graph-runtime",
                                             "latent-projections"};
  CHECK(names == expected);
}
