// OptimizerConfig (seed: ../shared/spec/optimizer_config.py): building it from the arguments, validate,
// finalize_optimizer_config, validate_run, validate_model, the precision-aware property, and ParamKey /
// fnmatch matching.
//
// Most command-line cases run only the optimizer sections on the parsed namespace (argparse defaults plus the
// flags given), so that they depend on these sections alone; a few run the whole chain end to end. Checks that no
// flag can reach (fields without a command-line argument, combinations validate_args rejects earlier) are
// exercised on the OptimizerConfig type directly.
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "config/args.h"
#include "config/optimizer_config.h"
#include "config/optimizer_config_from_args.h"
#include "config/param_key.h"
#include "config/validate/sections.h"
#include "support.h"

namespace {

using Args = std::vector<std::string>;

// Parses base_args() + `extra` and runs only the OptimizerConfig sections.
mrtest::Run opt(const Args& extra, const mr::TargetEnv* target = nullptr) {
  return mrtest::run_between("optimizer.validate", "optimizer.validate-model", mrtest::with(extra),
                             {{"WORLD_SIZE", "1"}, {"RANK", "0"}}, target);
}

mr::TargetEnv te(const std::string& version) {
  mr::TargetEnv t;
  t.te_version = version;
  return t;
}

// The id of the rule `f` fails, "" when it passes.
std::string fails(const std::function<void()>& f) {
  try {
    f();
  } catch (const mr::OptimizerConfigError& e) {
    return e.issue.rule ? e.issue.rule->id : "<no rule>";
  }
  return "";
}

// Runs validate() and returns (failed rule or "", warning ids).
std::pair<std::string, std::vector<std::string>> run_validate(const mr::OptimizerConfig& c,
                                                              const mr::TargetEnv& env = {}) {
  std::vector<mr::OptimizerConfigIssue> warnings;
  std::string rule = fails([&] { c.validate(env, &warnings); });
  std::vector<std::string> ids;
  for (const auto& w : warnings) ids.push_back(w.rule->id);
  return {rule, ids};
}

std::string run_validate_run(const mr::OptimizerConfig& c, mr::DdpConfigView ddp = {}, bool fsdp2 = false,
                         std::optional<std::string> ckpt = "torch_dist") {
  return fails([&] { c.validate_run(ddp, fsdp2, ckpt); });
}

std::string run_validate_model(const mr::OptimizerConfig& c, bool single_grouped = false,
                           std::optional<int64_t> vpp = std::nullopt) {
  return fails([&] { c.validate_model(single_grouped, vpp); });
}

const double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();

}  // namespace

// ---------------------------------------------------------------------------------------------------------
// End to end
// ---------------------------------------------------------------------------------------------------------

TEST_CASE("optimizer config: base config passes every optimizer section", "[optimizer-config]") {
  auto r = opt({});
  CHECK(r.exit == 0);
  CHECK(r.out.diagnostics.empty());
  // The optimizer sections are the chain's last four, in seed order.
  const auto& all = mr::validation_sections();
  REQUIRE(all.size() >= 4);
  CHECK(std::string(all[all.size() - 4].name) == "optimizer.validate");
  CHECK(std::string(all[all.size() - 3].name) == "optimizer.finalize");
  CHECK(std::string(all[all.size() - 2].name) == "optimizer.validate-run");
  CHECK(std::string(all[all.size() - 1].name) == "optimizer.validate-model");
}

TEST_CASE("optimizer config: the whole chain ends with the optimizer checks", "[optimizer-config]") {
  // min_lr > lr: nothing in validate_args looks at it, OptimizerConfig.validate rejects it.
  auto r = mrtest::run(mrtest::with({"--min-lr", "0.001"}), {{"WORLD_SIZE", "1"}, {"RANK", "0"}});
  CHECK(r.exit == 1);
  CHECK(r.rule == "optimizer.min-lr-above-lr");
  auto ok = mrtest::run(mrtest::with({"--min-lr", "0.00001"}), {{"WORLD_SIZE", "1"}, {"RANK", "0"}});
  CHECK(ok.rule != "optimizer.min-lr-above-lr");
}

TEST_CASE("optimizer config: the namespace is left alone", "[optimizer-config]") {
  // Megatron builds the config from a copy of the arguments' values; finalize never writes back.
  auto r = opt({"--optimizer", "muon", "--use-distributed-optimizer", "--exp-avg-dtype", "fp32"});
  REQUIRE(r.exit == 0);
  CHECK(r["optimizer"].as_str() == "muon");
  CHECK(r["use_distributed_optimizer"].as_bool() == true);
  CHECK(r["exp_avg_dtype"].as_str() == "fp32");
  CHECK_FALSE(r.has("use_layer_wise_distributed_optimizer"));
  CHECK_FALSE(r.has("store_param_remainders"));
}

// ---------------------------------------------------------------------------------------------------------
// validate()  (seed optimizer_config.py:448)
// ---------------------------------------------------------------------------------------------------------

TEST_CASE("optimizer.embedding-min-norm-invalid", "[optimizer-config]") {
  // seed optimizer_config.py:450: finite and > 0.
  CHECK(opt({"--embedding-min-norm", "0"}).rule == "optimizer.embedding-min-norm-invalid");
  CHECK(opt({"--embedding-min-norm", "-1.5"}).rule == "optimizer.embedding-min-norm-invalid");
  CHECK(opt({"--embedding-min-norm", "inf"}).rule == "optimizer.embedding-min-norm-invalid");
  CHECK(opt({"--embedding-min-norm", "nan"}).rule == "optimizer.embedding-min-norm-invalid");
  CHECK(opt({"--embedding-min-norm", "0.25"}).exit == 0);
}

TEST_CASE("optimizer.embedding-min-norm-with-cuda-graph", "[optimizer-config]") {
  auto r = opt({"--embedding-min-norm", "0.25", "--optimizer-cuda-graph"});
  CHECK(r.rule == "optimizer.embedding-min-norm-with-cuda-graph");
  CHECK(opt({"--optimizer-cuda-graph"}).exit == 0);
}

TEST_CASE("optimizer.embedding-min-norm-with-cpu-offload", "[optimizer-config]") {
  auto r = opt({"--embedding-min-norm", "0.25", "--optimizer-cpu-offload", "--use-precision-aware-optimizer"});
  CHECK(r.rule == "optimizer.embedding-min-norm-with-cpu-offload");
  CHECK(opt({"--optimizer-cpu-offload", "--use-precision-aware-optimizer"}).exit == 0);
}

TEST_CASE("optimizer.rmsnorm-weight-decay-mult-invalid", "[optimizer-config]") {
  // seed optimizer_config.py:462: finite and >= 0 (0 is allowed).
  CHECK(opt({"--rmsnorm-weight-decay-mult", "-0.5"}).rule == "optimizer.rmsnorm-weight-decay-mult-invalid");
  CHECK(opt({"--rmsnorm-weight-decay-mult", "inf"}).rule == "optimizer.rmsnorm-weight-decay-mult-invalid");
  CHECK(opt({"--rmsnorm-weight-decay-mult", "0"}).exit == 0);
  CHECK(opt({"--rmsnorm-weight-decay-mult", "0.5"}).exit == 0);
}

TEST_CASE("optimizer.dist-muon-deprecated", "[optimizer-config]") {
  auto r = opt({"--optimizer", "dist_muon"});
  CHECK(r.exit == 0);
  CHECK(r.warned("optimizer.dist-muon-deprecated"));
  auto m = opt({"--optimizer", "muon"});
  CHECK(m.exit == 0);
  CHECK_FALSE(m.warned("optimizer.dist-muon-deprecated"));
}

TEST_CASE("optimizer.min-lr-above-lr", "[optimizer-config]") {
  auto r = opt({"--lr", "0.0001", "--min-lr", "0.001"});
  CHECK(r.rule == "optimizer.min-lr-above-lr");
  CHECK(r.message.find("--min-lr") != std::string::npos);
  CHECK(opt({"--lr", "0.0001", "--min-lr", "0.0001"}).exit == 0);  // equal is fine
  // Only checked when both are set.
  mr::OptimizerConfig c;
  c.min_lr = 1.0;
  CHECK(run_validate(c).first == "");
  c.lr = 0.5;
  CHECK(run_validate(c).first == "optimizer.min-lr-above-lr");
  c.lr = kNaN;  // Python: 1.0 <= nan is False
  CHECK(run_validate(c).first == "optimizer.min-lr-above-lr");
  // A NaN is named as such (review user39 #3: "--min-lr (0.0) must not be greater than --lr (nan)" pointed at
  // --min-lr).
  auto lr_nan = opt({"--lr", "nan", "--min-lr", "0"});
  CHECK(lr_nan.rule == "optimizer.min-lr-above-lr");
  CHECK(lr_nan.message.find("--lr is not a number (nan)") != std::string::npos);
  auto min_nan = opt({"--lr", "0.1", "--min-lr", "nan"});
  CHECK(min_nan.message.find("--min-lr is not a number (nan)") != std::string::npos);
  CHECK(opt({"--lr", "nan", "--min-lr", "nan"}).message.find("--lr and --min-lr are not a number") !=
        std::string::npos);
}

TEST_CASE("optimizer.mxfp8-without-reuse-grad-buf", "[optimizer-config]") {
  mr::OptimizerConfig c;
  c.fp8_recipe = "mxfp8";
  auto [rule, warnings] = run_validate(c);
  CHECK(rule == "");
  CHECK(warnings == std::vector<std::string>{"optimizer.mxfp8-without-reuse-grad-buf"});
  c.reuse_grad_buf_for_mxfp8_param_ag = true;
  CHECK(run_validate(c).second.empty());
  c.reuse_grad_buf_for_mxfp8_param_ag = false;
  c.fp8_recipe = "delayed";
  CHECK(run_validate(c).second.empty());
}

TEST_CASE("optimizer.reuse-grad-buf-with-overlap-param-gather-step", "[optimizer-config]") {
  mr::OptimizerConfig c;
  c.reuse_grad_buf_for_mxfp8_param_ag = true;
  c.overlap_param_gather_with_optimizer_step = true;
  c.use_distributed_optimizer = c.overlap_param_gather = true;
  CHECK(run_validate(c).first == "optimizer.reuse-grad-buf-with-overlap-param-gather-step");
  c.reuse_grad_buf_for_mxfp8_param_ag = false;
  CHECK(run_validate(c).first == "");
}

TEST_CASE("optimizer.cuda-graph-with-grad-norm-skip", "[optimizer-config]") {
  // grad_norm_skip_threshold has no flag: only a directly built config can set it.
  mr::OptimizerConfig c;
  c.optimizer_cuda_graph = true;
  c.grad_norm_skip_threshold = 10.0;
  CHECK(run_validate(c).first == "optimizer.cuda-graph-with-grad-norm-skip");
  c.grad_norm_skip_threshold = kInf;
  CHECK(run_validate(c).first == "");
  c.grad_norm_skip_threshold = kNaN;  // not finite either
  CHECK(run_validate(c).first == "");
  c.optimizer_cuda_graph = false;
  c.grad_norm_skip_threshold = 10.0;
  CHECK(run_validate(c).first == "");
}

TEST_CASE("optimizer.layer-sharded-requires-muon", "[optimizer-config]") {
  auto r = opt({"--muon-tp-mode", "layer_sharded", "--optimizer", "adaptive_muon", "--use-distributed-optimizer",
                "--muon-no-split-qkv"});
  CHECK(r.rule == "optimizer.layer-sharded-requires-muon");
  CHECK(opt({"--muon-tp-mode", "layer_sharded", "--optimizer", "muon", "--use-distributed-optimizer",
             "--muon-no-split-qkv"})
            .exit == 0);
  // dist_muon is the deprecated alias: accepted (with its warning), even without --use-distributed-optimizer.
  auto d = opt({"--muon-tp-mode", "layer_sharded", "--optimizer", "dist_muon", "--muon-no-split-qkv"});
  CHECK(d.exit == 0);
  CHECK(d.warned("optimizer.dist-muon-deprecated"));
}

TEST_CASE("optimizer.layer-sharded-requires-layer-wise", "[optimizer-config]") {
  auto r = opt({"--muon-tp-mode", "layer_sharded", "--optimizer", "muon", "--muon-no-split-qkv"});
  CHECK(r.rule == "optimizer.layer-sharded-requires-layer-wise");
  // Already on the layer-wise path (a directly built, finalized config).
  mr::OptimizerConfig c;
  c.optimizer = "muon";
  c.muon_tp_mode = "layer_sharded";
  c.muon_split_qkv = false;
  CHECK(run_validate(c).first == "optimizer.layer-sharded-requires-layer-wise");
  c.use_layer_wise_distributed_optimizer = true;
  CHECK(run_validate(c).first == "");
}

TEST_CASE("optimizer.layer-sharded-split-qkv", "[optimizer-config]") {
  auto r = opt({"--muon-tp-mode", "layer_sharded", "--optimizer", "muon", "--use-distributed-optimizer"});
  CHECK(r.rule == "optimizer.layer-sharded-split-qkv");
  CHECK(opt({"--muon-tp-mode", "blockwise", "--optimizer", "muon", "--use-distributed-optimizer"}).exit == 0);
}

TEST_CASE("optimizer.precision-aware-requires-adam", "[optimizer-config]") {
  auto r = opt({"--use-precision-aware-optimizer", "--optimizer", "sgd"});
  CHECK(r.rule == "optimizer.precision-aware-requires-adam");
  CHECK(opt({"--use-precision-aware-optimizer", "--optimizer", "adam"}).exit == 0);
}

TEST_CASE("optimizer.precision-aware-requires-te", "[optimizer-config]") {
  auto none = te("none");
  auto r = opt({"--use-precision-aware-optimizer"}, &none);
  CHECK(r.rule == "optimizer.precision-aware-requires-te");
  // The CPU-offload hybrid optimizer does not need TE's FusedAdam.
  CHECK(opt({"--use-precision-aware-optimizer", "--optimizer-cpu-offload"}, &none).exit == 0);
}

TEST_CASE("optimizer.precision-aware-te-fused-adam-outdated", "[optimizer-config]") {
  // TE's FusedAdam gained the four low-precision keyword arguments in 1.13.
  auto old = te("1.12.0");
  CHECK(opt({"--use-precision-aware-optimizer"}, &old).rule == "optimizer.precision-aware-te-fused-adam-outdated");
  auto ok = te("1.13.0");
  CHECK(opt({"--use-precision-aware-optimizer"}, &ok).exit == 0);
}

TEST_CASE("optimizer.dtype-requires-precision-aware", "[optimizer-config]") {
  // seed optimizer_config.py:557-569: each of the four dtypes must be fp32 without the precision-aware optimizer.
  for (const char* flag : {"--main-grads-dtype", "--main-params-dtype", "--exp-avg-dtype", "--exp-avg-sq-dtype"}) {
    std::string low = std::string(flag) == "--main-params-dtype" ? "fp16" : "bf16";
    auto r = opt({flag, low});
    CHECK(r.rule == "optimizer.dtype-requires-precision-aware");
    CHECK(r.message.find(flag) != std::string::npos);
    CHECK(opt({flag, low, "--use-precision-aware-optimizer"}).exit == 0);
    CHECK(opt({flag, "fp32"}).exit == 0);
  }
  // Already-mapped torch dtypes count as fp32 too; None does not.
  mr::OptimizerConfig c;
  c.exp_avg_dtype = "torch.float32";
  CHECK(run_validate(c).first == "");
  c.exp_avg_dtype = std::nullopt;
  CHECK(run_validate(c).first == "optimizer.dtype-requires-precision-aware");
}

TEST_CASE("optimizer.cpu-offload-requires-precision-aware", "[optimizer-config]") {
  CHECK(opt({"--optimizer-cpu-offload"}).rule == "optimizer.cpu-offload-requires-precision-aware");
  CHECK(opt({"--optimizer-cpu-offload", "--use-precision-aware-optimizer"}).exit == 0);
}

TEST_CASE("optimizer.overlap-param-gather-step-requires-dist-opt", "[optimizer-config]") {
  const Args step = {"--overlap-param-gather-with-optimizer-step", "--overlap-param-gather",
                     "--overlap-grad-reduce", "--ckpt-format", "torch"};
  CHECK(opt(step).rule == "optimizer.overlap-param-gather-step-requires-dist-opt");
  // Neighbour: with the distributed optimizer it gets through validate (and on to validate_model's VPP check).
  Args dist = step;
  dist.push_back("--use-distributed-optimizer");
  CHECK(opt(dist).rule == "optimizer.overlap-param-gather-step-requires-vpp");
}

TEST_CASE("optimizer.overlap-param-gather-step-requires-overlap-param-gather", "[optimizer-config]") {
  auto r = opt({"--overlap-param-gather-with-optimizer-step", "--use-distributed-optimizer", "--ckpt-format",
                "torch"});
  CHECK(r.rule == "optimizer.overlap-param-gather-step-requires-overlap-param-gather");
  // Neighbour: everything validate, validate_run and validate_model want (the VPP size is what the chain would
  // derive from --num-virtual-stages-per-pipeline-rank; the optimizer sections only read it).
  mr::OptimizerConfig c;
  c.overlap_param_gather_with_optimizer_step = c.use_distributed_optimizer = c.overlap_param_gather = true;
  CHECK(run_validate(c).first == "");
  CHECK(run_validate_run(c, {.overlap_grad_reduce = true}, false, "torch") == "");
  CHECK(run_validate_model(c, false, 2) == "");
}

// ---------------------------------------------------------------------------------------------------------
// finalize_optimizer_config()  (seed optimizer_config.py:667)
// ---------------------------------------------------------------------------------------------------------

TEST_CASE("optimizer config: finalize maps dtypes", "[optimizer-config]") {
  // seed optimizer_config.py:670-683: 'fp32'/'bf16'/'fp16'/'fp8' -> torch dtypes, 'auto'/None -> None, a torch
  // dtype stays.
  struct Case {
    mr::DtypeSpec in, out;
  };
  const Case cases[] = {
      {"fp32", "torch.float32"},        {"bf16", "torch.bfloat16"},           {"fp16", "torch.float16"},
      {"fp8", "torch.uint8"},           {"auto", std::nullopt},               {std::nullopt, std::nullopt},
      {"torch.float32", "torch.float32"}, {"torch.bfloat16", "torch.bfloat16"},
  };
  for (const auto& k : cases) {
    INFO((k.in ? *k.in : "None"));
    mr::OptimizerConfig c;
    c.main_grads_dtype = c.main_params_dtype = c.exp_avg_dtype = c.exp_avg_sq_dtype = k.in;
    c.finalize_optimizer_config();
    CHECK(c.main_grads_dtype == k.out);
    CHECK(c.main_params_dtype == k.out);
    CHECK(c.exp_avg_dtype == k.out);
    CHECK(c.exp_avg_sq_dtype == k.out);
  }
}

TEST_CASE("optimizer.unknown-dtype", "[optimizer-config]") {
  // seed optimizer_config.py:679: dtype_map[d] raises KeyError for a spelling it does not know (argparse's
  // choices keep the command line from getting here).
  mr::OptimizerConfig c;
  c.exp_avg_dtype = "float32";
  CHECK(fails([&] { c.finalize_optimizer_config(); }) == "optimizer.unknown-dtype");
  c.exp_avg_dtype = "fp32";
  CHECK(fails([&] { c.finalize_optimizer_config(); }) == "");
}

TEST_CASE("optimizer config: finalize store_param_remainders", "[optimizer-config]") {
  // seed optimizer_config.py:684-685: off with the precision-aware optimizer on TE < 2.1.0.
  struct Case {
    bool precision_aware;
    const char* te_version;
    bool remainders;
  };
  const Case cases[] = {
      {true, "2.0.0", false}, {true, "2.1.0", true}, {true, "2.20.2", true}, {false, "2.0.0", true},
      {true, "none", false},  // TE absent reads as version 0.0.0 (seed's is_te_min_version helper)
  };
  for (const auto& k : cases) {
    INFO(k.te_version << " precision_aware=" << k.precision_aware);
    mr::OptimizerConfig c;
    c.use_precision_aware_optimizer = k.precision_aware;
    c.finalize_optimizer_config(te(k.te_version));
    CHECK(c.store_param_remainders == k.remainders);
  }
}

TEST_CASE("optimizer config: finalize emerging optimizers", "[optimizer-config]") {
  // seed optimizer_config.py:688-695.
  struct Case {
    const char* optimizer;
    bool dist;
    const char* out_optimizer;
    bool out_dist, out_layer_wise;
  };
  const Case cases[] = {
      {"adam", true, "adam", true, false},      {"sgd", true, "sgd", true, false},
      {"adam", false, "adam", false, false},    {"muon", true, "muon", false, true},
      {"muon", false, "muon", false, false},    {"dist_muon", false, "muon", false, true},
      {"dist_muon", true, "muon", false, true}, {"lion", true, "lion", false, true},
      {"soap", false, "soap", false, false},
  };
  for (const auto& k : cases) {
    INFO(k.optimizer << " dist=" << k.dist);
    mr::OptimizerConfig c;
    c.optimizer = k.optimizer;
    c.use_distributed_optimizer = k.dist;
    bool predicted = c.will_be_layer_wise();
    c.finalize_optimizer_config();
    CHECK(c.optimizer == k.out_optimizer);
    CHECK(c.use_distributed_optimizer == k.out_dist);
    CHECK(c.use_layer_wise_distributed_optimizer == k.out_layer_wise);
    CHECK(predicted == k.out_layer_wise);  // validate's look-ahead agrees with what finalize does
  }
}

TEST_CASE("optimizer config: use_precision_aware_optimizer_no_fp8_or_ds_fp8", "[optimizer-config]") {
  // seed optimizer_config.py:648-665.
  struct Case {
    bool precision_aware;
    mr::DtypeSpec main_params;
    std::optional<std::string> fp8_recipe;
    bool offload, expected;
  };
  const Case cases[] = {
      {false, "fp32", std::nullopt, false, false},
      {true, "fp32", std::nullopt, false, true},             // no FP8
      {true, "fp32", "delayed", false, true},                // delayed scaling is the exception
      {true, "fp32", "tensorwise", false, false},            // other FP8 recipes
      {true, "torch.float32", "blockwise", false, false},
      {true, "fp16", "tensorwise", false, true},             // low-precision main params
      {true, "torch.float16", "mxfp8", false, true},
      {true, std::nullopt, "mxfp8", false, true},            // None is not fp32
      {true, "fp32", "tensorwise", true, true},              // CPU offload
  };
  for (const auto& k : cases) {
    mr::OptimizerConfig c;
    c.use_precision_aware_optimizer = k.precision_aware;
    c.main_params_dtype = k.main_params;
    c.fp8_recipe = k.fp8_recipe;
    c.optimizer_cpu_offload = k.offload;
    CHECK(c.use_precision_aware_optimizer_no_fp8_or_ds_fp8() == k.expected);
  }
}

// ---------------------------------------------------------------------------------------------------------
// validate_run()  (seed optimizer_config.py:587)
// ---------------------------------------------------------------------------------------------------------

TEST_CASE("optimizer.cpu-offload-fp8-param-gather-requires-delayed", "[optimizer-config]") {
  mr::OptimizerConfig c;
  c.optimizer_cpu_offload = c.use_precision_aware_optimizer = true;
  c.fp8_recipe = "tensorwise";
  CHECK(run_validate_run(c, {.fp8_param_gather = true}) == "optimizer.cpu-offload-fp8-param-gather-requires-delayed");
  CHECK(run_validate_run(c, {.fp8_param_gather = false}) == "");
  c.fp8_recipe = "delayed";
  CHECK(run_validate_run(c, {.fp8_param_gather = true}) == "");
  // From the command line (the DDP config copies fp8_param_gather from the arguments).
  auto r = opt({"--optimizer-cpu-offload", "--use-precision-aware-optimizer", "--fp8-param-gather",
                "--fp8-recipe", "tensorwise"});
  CHECK(r.rule == "optimizer.cpu-offload-fp8-param-gather-requires-delayed");
  CHECK(opt({"--optimizer-cpu-offload", "--use-precision-aware-optimizer", "--fp8-param-gather", "--fp8-recipe",
             "delayed"})
            .exit == 0);
}

TEST_CASE("optimizer.overlap-param-gather-requires-dist-opt", "[optimizer-config]") {
  CHECK(opt({"--overlap-param-gather", "--overlap-grad-reduce"}).rule ==
        "optimizer.overlap-param-gather-requires-dist-opt");
  CHECK(opt({"--overlap-param-gather", "--overlap-grad-reduce", "--use-distributed-optimizer"}).exit == 0);
  // Also accepted: Megatron FSDP, the layer-wise optimizer finalize switches muon to, and dist_muon.
  mr::OptimizerConfig c;
  c.overlap_param_gather = true;
  CHECK(run_validate_run(c, {.use_megatron_fsdp = true, .overlap_grad_reduce = true}) == "");
  c.use_layer_wise_distributed_optimizer = true;
  CHECK(run_validate_run(c, {.overlap_grad_reduce = true}) == "");
  CHECK(opt({"--overlap-param-gather", "--overlap-grad-reduce", "--optimizer", "muon", "--use-distributed-optimizer"})
            .exit == 0);
}

TEST_CASE("optimizer.overlap-param-gather-requires-overlap-grad-reduce", "[optimizer-config]") {
  CHECK(opt({"--overlap-param-gather", "--use-distributed-optimizer"}).rule ==
        "optimizer.overlap-param-gather-requires-overlap-grad-reduce");
  CHECK(opt({"--overlap-param-gather", "--use-distributed-optimizer", "--overlap-grad-reduce"}).exit == 0);
}

TEST_CASE("optimizer.dist-opt-with-torch-fsdp2", "[optimizer-config]") {
  mr::OptimizerConfig c;
  c.use_distributed_optimizer = true;
  CHECK(run_validate_run(c, {}, true) == "optimizer.dist-opt-with-torch-fsdp2");
  CHECK(run_validate_run(c, {}, false) == "");
  CHECK(opt({"--use-distributed-optimizer", "--use-torch-fsdp2"}).rule == "optimizer.dist-opt-with-torch-fsdp2");
  // A muon config has moved to the layer-wise path by then.
  CHECK(opt({"--use-distributed-optimizer", "--use-torch-fsdp2", "--optimizer", "muon"}).exit == 0);
}

TEST_CASE("optimizer.overlap-param-gather-step-requires-torch-ckpt", "[optimizer-config]") {
  const Args step = {"--overlap-param-gather-with-optimizer-step", "--use-distributed-optimizer",
                     "--overlap-param-gather", "--overlap-grad-reduce"};
  auto with = [&](Args extra) {
    Args a = step;
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  CHECK(opt(step).rule == "optimizer.overlap-param-gather-step-requires-torch-ckpt");  // default torch_dist
  CHECK(opt(with({"--ckpt-format", "torch_dist"})).rule == "optimizer.overlap-param-gather-step-requires-torch-ckpt");
  // With torch checkpoints it gets past validate_run (and stops at validate_model: no VPP here).
  CHECK(opt(with({"--ckpt-format", "torch"})).rule == "optimizer.overlap-param-gather-step-requires-vpp");
  mr::OptimizerConfig c;
  c.overlap_param_gather_with_optimizer_step = true;
  CHECK(run_validate_run(c, {}, false, std::nullopt) == "optimizer.overlap-param-gather-step-requires-torch-ckpt");
}

// ---------------------------------------------------------------------------------------------------------
// validate_model()  (seed optimizer_config.py:628)
// ---------------------------------------------------------------------------------------------------------

TEST_CASE("optimizer.layer-wise-with-moe-single-grouped-weight", "[optimizer-config]") {
  mr::OptimizerConfig c;
  c.optimizer = "muon";
  c.use_distributed_optimizer = true;
  CHECK(run_validate_model(c, true) == "optimizer.layer-wise-with-moe-single-grouped-weight");
  CHECK(run_validate_model(c, false) == "");
  c.finalize_optimizer_config();  // now on the layer-wise path explicitly
  CHECK(run_validate_model(c, true) == "optimizer.layer-wise-with-moe-single-grouped-weight");
  mr::OptimizerConfig adam;
  adam.use_distributed_optimizer = true;
  CHECK(run_validate_model(adam, true) == "");
  CHECK(opt({"--optimizer", "muon", "--use-distributed-optimizer", "--moe-single-grouped-weight"}).rule ==
        "optimizer.layer-wise-with-moe-single-grouped-weight");
  CHECK(opt({"--use-distributed-optimizer", "--moe-single-grouped-weight"}).exit == 0);
}

TEST_CASE("optimizer.overlap-param-gather-step-requires-vpp", "[optimizer-config]") {
  mr::OptimizerConfig c;
  c.overlap_param_gather_with_optimizer_step = true;
  CHECK(run_validate_model(c, false, std::nullopt) == "optimizer.overlap-param-gather-step-requires-vpp");
  CHECK(run_validate_model(c, false, 2) == "");
  mr::OptimizerConfig off;
  CHECK(run_validate_model(off, false, std::nullopt) == "");
}

// ---------------------------------------------------------------------------------------------------------
// Building from the arguments
// ---------------------------------------------------------------------------------------------------------

TEST_CASE("optimizer config: from_args copies fields by name", "[optimizer-config]") {
  mr::Namespace ns;
  auto set = [&](const char* k, mr::Value v) { ns.set(k, std::move(v), {}); };
  set("lr", 0.0003);
  set("min_lr", 3e-05);
  set("params_dtype", "torch.bfloat16");
  set("bf16", true);
  set("main_grads_dtype", "bf16");
  set("exp_avg_dtype", "fp8");
  set("fp8_recipe", mr::Value());
  set("optimizer", "muon");
  set("muon_momentum", 0.9);  // the argparse default differs from the dataclass's 0.95
  set("muon_split_qkv", false);
  set("muon_num_ns_steps", 7);
  set("loss_scale_window", 1000);  // an int argument into a float field
  set("use_distributed_optimizer", true);
  set("barrier_with_L1_time", true);
  set("not_an_optimizer_field", 42);
  auto c = mr::OptimizerConfig::from_args(ns);
  CHECK(c.lr == 0.0003);
  CHECK(c.min_lr == 3e-05);
  CHECK(c.params_dtype == "torch.bfloat16");
  CHECK(c.bf16);
  CHECK(c.main_grads_dtype == "bf16");  // still the command-line spelling until finalize
  CHECK(c.exp_avg_dtype == "fp8");
  CHECK(c.exp_avg_sq_dtype == "fp32");  // not in the namespace: the argument's default, as Megatron's args hold it
  CHECK_FALSE(c.fp8_recipe.has_value());
  CHECK(c.optimizer == "muon");
  CHECK(c.muon_momentum == 0.9);
  CHECK_FALSE(c.muon_split_qkv);
  CHECK(c.muon_num_ns_steps == 7);
  CHECK(c.loss_scale_window == 1000.0);
  CHECK(c.use_distributed_optimizer);
  CHECK(c.barrier_with_L1_time);
  CHECK(c.optimizer_offload_fraction == 1.0);  // absent: the argument's default, not the dataclass's 0.0
  // Fields without an argument keep the dataclass defaults.
  CHECK(c.weight_decay == 0.01);
  CHECK(std::isinf(c.grad_norm_skip_threshold));
  CHECK_FALSE(c.dsa_indexer_clip_grad.has_value());
  CHECK(c.decoupled_weight_decay);
  CHECK(c.store_param_remainders);
  CHECK(c.soap_shampoo_beta == 0.95);
  CHECK_FALSE(c.use_layer_wise_distributed_optimizer);
  CHECK(c.initial_loss_scale == 4294967296.0);
  CHECK_FALSE(c.timers);

  c.finalize_optimizer_config();
  CHECK(c.main_grads_dtype == "torch.bfloat16");
  CHECK(c.exp_avg_dtype == "torch.uint8");
  CHECK(c.use_layer_wise_distributed_optimizer);
  CHECK_FALSE(c.use_distributed_optimizer);
}

namespace {
// Every field the builders copy from the arguments is the same in `x` and `y`.
void check_same_argument_fields(const mr::OptimizerConfig& x, const mr::OptimizerConfig& y) {
#define MR_SAME(field) \
  {                    \
    INFO(#field);      \
    CHECK(x.field == y.field); \
  }
  MR_OPTIMIZER_CONFIG_ARGS(MR_SAME)
#undef MR_SAME
}
}  // namespace

// Megatron's get_megatron_optimizer_config copies every field the args have, and its args have every dest, so a
// dest's absent value is the argument's default (the schema's), never the dataclass's: --muon-momentum 0.9 (dataclass
// 0.95), --optimizer-offload-fraction 1.0 (dataclass 0.0). Both builders say so.
TEST_CASE("optimizer config: the namespace and typed-view builders agree on absent dests", "[optimizer-config]") {
  SECTION("an empty namespace: every field at the schema's default") {
    const mr::OptimizerConfig x = mr::OptimizerConfig::from_args(mr::Namespace{});
    const mr::OptimizerConfig y = mr::optimizer_config_from(mr::Args());
    check_same_argument_fields(x, y);
    CHECK(x.muon_momentum == 0.9);
    CHECK(x.optimizer_offload_fraction == 1.0);
    CHECK(x.main_grads_dtype == "fp32");
    CHECK(x.fp8_recipe == "delayed");
    CHECK(x.params_dtype == "torch.float32");
    const mr::DdpConfigView d = mr::DdpConfigView::from_args(mr::Namespace{}), e = mr::ddp_config_view_from(mr::Args());
    CHECK(d.fp8_param_gather == e.fp8_param_gather);
    CHECK(d.use_megatron_fsdp == e.use_megatron_fsdp);
    CHECK(d.overlap_grad_reduce == e.overlap_grad_reduce);
  }
  SECTION("a partial namespace: the given dests, the schema's defaults for the rest") {
    mr::Namespace ns;
    mr::Args a;
    ns.set("optimizer", "muon", {});
    a.optimizer = mr::arg::Optimizer::muon;
    ns.set("lr", 0.0003, {});
    a.lr = 0.0003;
    ns.set("muon_split_qkv", false, {});
    a.muon_split_qkv = false;
    ns.set("main_grads_dtype", "bf16", {});
    a.main_grads_dtype = mr::arg::MainGradsDtype::bf16;
    ns.set("loss_scale_window", 500, {});  // an int argument into a float field
    a.loss_scale_window = 500;
    const mr::OptimizerConfig x = mr::OptimizerConfig::from_args(ns), y = mr::optimizer_config_from(a);
    check_same_argument_fields(x, y);
    CHECK(x.optimizer == "muon");
    CHECK(x.main_grads_dtype == "bf16");
    CHECK(x.muon_momentum == 0.9);
    CHECK(x.optimizer_offload_fraction == 1.0);
  }
}

TEST_CASE("optimizer config: from_args on the parsed defaults", "[optimizer-config]") {
  auto r = opt({});
  auto c = mr::OptimizerConfig::from_args(r.out.parsed.ns);
  CHECK(c.lr == 0.0001);     // base_args' --lr
  CHECK(c.min_lr == 0.0);    // argparse default
  CHECK(c.muon_momentum == 0.9);
  CHECK(c.optimizer_offload_fraction == 1.0);
  CHECK(c.main_grads_dtype == "fp32");
  CHECK(c.optimizer == "adam");
  auto ddp = mr::DdpConfigView::from_args(r.out.parsed.ns);
  CHECK_FALSE(ddp.overlap_grad_reduce);
  auto r2 = opt({"--overlap-grad-reduce", "--use-torch-fsdp2"});
  CHECK_FALSE(mr::DdpConfigView::from_args(r2.out.parsed.ns).overlap_grad_reduce);  // FSDP2 config: defaults
  auto r3 = opt({"--overlap-grad-reduce", "--fp8-param-gather"});
  auto d3 = mr::DdpConfigView::from_args(r3.out.parsed.ns);
  CHECK(d3.overlap_grad_reduce);
  CHECK(d3.fp8_param_gather);
}

// ---------------------------------------------------------------------------------------------------------
// fnmatch and ParamKey  (seed optimizer_config.py:69-140)
// ---------------------------------------------------------------------------------------------------------

TEST_CASE("optimizer config: fnmatch matches like Python's fnmatch.fnmatch", "[optimizer-config]") {
  // Expected values: CPython 3 fnmatch.fnmatch on POSIX.
  struct Case {
    const char* name;
    const char* pattern;
    bool match;
  };
  const Case cases[] = {
      {"decoder.layers.0.self_attention.linear_qkv.weight", "*.linear_qkv.weight", true},
      {"decoder.layers.0.self_attention.linear_qkv.weight", "*linear_qkv*", true},
      {"embedding.word_embeddings.weight", "*.bias", false},
      {"a/b/c", "a*c", true},          // '*' crosses '/'
      {"a\nb", "a*b", true},           // and newlines
      {"abc", "a?c", true},
      {"ac", "a?c", false},
      {"layer1", "layer[0-9]", true},
      {"layerx", "layer[0-9]", false},
      {"layerx", "layer[!0-9]", true},
      {"layer5", "layer[!0-9]", false},
      {"a]", "a[]]", true},            // ']' first in a set is literal
      {"a!", "a[!]", false},           // "[!]" is unterminated: a literal "[!]"
      {"a[!]", "a[!]", true},
      {"a[", "a[", true},              // unterminated '[' is literal
      {"a[x", "a[x", true},
      {"a-", "a[a-]", true},           // trailing '-' is literal
      {"a-", "a[-a]", true},           // leading '-' is literal
      {"b", "a[-a]", false},
      {"b", "[z-a]", false},           // reversed range: empty set
      {"z", "[z-a]", false},
      {"q", "[!z-a]", true},           // negated empty set: any character
      {"b", "[a--b]", true},           // range a..'-' is reversed and dropped, 'b' stays
      {"-", "[a--b]", false},
      {"a", "[a--b]", false},
      {"-", "[!-a]", false},
      {"b", "[!-a]", true},
      {"^", "[^a]", true},             // '^' is not negation in fnmatch
      {"b", "[^a]", false},
      {"\\", "[\\]", true},            // backslash is literal
      {"\\x", "\\x", true},
      {"c", "[a-cz-a]", true},
      {"z", "[a-cz-a]", false},
      {"-", "[a-b-c]", true},          // hyphen right after a range is literal
      {"c", "[a-b-c]", true},
      {"d", "[a-b-c]", false},
      {"x.weight", "x.*", true},       // '.' is literal
      {"xyweight", "x.*", false},
      {"", "*", true},
      {"", "?", false},
      {"abc", "abc*", true},
      {"abcd", "*b*d", true},
      {"aXbYd", "a*b*d", true},
      {"\xc3\xa9", "?", true},         // one code point
      {"\xc3\xa9", "[\xc3\xa9]", true},
      {"ABC", "abc", false},           // case-sensitive on POSIX
      {"&", "[&&]", true},
      {"|", "[a||]", true},
  };
  for (const auto& k : cases) {
    INFO(k.name << " ~ " << k.pattern);
    CHECK(mr::fnmatch(k.name, k.pattern) == k.match);
  }
}

TEST_CASE("optimizer config: ParamKey matching", "[optimizer-config]") {
  mr::ParamView bias{{10}, {}};
  mr::ParamView weight{{10, 20}, {{"is_embedding_or_output_parameter", mr::Value(true)}}};
  mr::ParamView expert{{4, 8}, {{"allreduce", mr::Value(false)}, {"shared", mr::Value(0)}}};

  // Name globs (a single string or a tuple).
  mr::ParamKey by_name{.name = "*.bias"};
  CHECK(by_name.matches(bias, "decoder.layers.0.mlp.linear_fc1.bias"));
  CHECK_FALSE(by_name.matches(bias, "decoder.layers.0.mlp.linear_fc1.weight"));
  mr::ParamKey by_names{.name = {"*.bias", "embedding.*"}};
  CHECK(by_names.matches(weight, "embedding.word_embeddings.weight"));
  CHECK_FALSE(by_names.matches(weight, "output_layer.weight"));

  // Attributes: getattr(param, attr, False) must be truthy.
  mr::ParamKey by_attr{.attr = "is_embedding_or_output_parameter"};
  CHECK(by_attr.matches(weight, "output_layer.weight"));
  CHECK_FALSE(by_attr.matches(bias, "x"));
  mr::ParamKey falsy_attrs{.attr = {"allreduce", "shared", "missing"}};
  CHECK_FALSE(falsy_attrs.matches(expert, "x"));

  // Predicates: any may match.
  mr::ParamPredicate one_dim{"s1", [](const mr::ParamView& p) { return p.shape.size() == 1; }};
  mr::ParamKey by_pred{.predicate = one_dim};
  CHECK(by_pred.matches(bias, "anything"));
  CHECK_FALSE(by_pred.matches(weight, "anything"));
  mr::ParamPredicate never{"never", [](const mr::ParamView&) { return false; }};
  mr::ParamKey by_preds{.predicate = {never, one_dim}};
  CHECK(by_preds.matches(bias, "anything"));

  // Predicates on parameter and name (the seed's example: 1-D or a non-qk-layernorm bias).
  mr::ParamWithNamePredicate s1_not_qkln{"s1_not_qkln", [](const mr::ParamView& p, std::string_view n) {
                                           auto ends = [&](std::string_view s) {
                                             return n.size() >= s.size() && n.substr(n.size() - s.size()) == s;
                                           };
                                           bool qk = n.find("q_layernorm.") != std::string_view::npos ||
                                                     n.find("k_layernorm.") != std::string_view::npos;
                                           return p.shape.size() == 1 || (ends(".bias") && !qk);
                                         }};
  mr::ParamKey by_name_pred{.with_name_predicate = s1_not_qkln};
  CHECK(by_name_pred.matches(bias, "interesting.bias"));
  CHECK(by_name_pred.matches(weight, "interesting.bias"));
  CHECK_FALSE(by_name_pred.matches(weight, "interesting.q_layernorm.bias"));

  // An empty key matches nothing; any one of the parts is enough.
  CHECK_FALSE(mr::ParamKey{}.matches(bias, "x.bias"));
  mr::ParamKey mixed{.name = "nothing", .attr = "nothing", .predicate = never, .with_name_predicate = s1_not_qkln};
  CHECK(mixed.matches(bias, "x"));
}

TEST_CASE("optimizer config: ParamKey equality and hashing", "[optimizer-config]") {
  // Predicates compare (and hash) by name only; a string and a 1-tuple are different keys.
  mr::ParamPredicate a{"s1", [](const mr::ParamView& p) { return p.shape.size() == 1; }};
  mr::ParamPredicate a_copy{"s1", [](const mr::ParamView&) { return false; }};
  mr::ParamPredicate b{"s2", [](const mr::ParamView&) { return false; }};
  CHECK(a == a_copy);
  CHECK_FALSE(a == b);
  CHECK(mr::ParamKey{.predicate = a} == mr::ParamKey{.predicate = a_copy});
  CHECK_FALSE(mr::ParamKey{.predicate = a} == mr::ParamKey{.predicate = b});
  CHECK(mr::ParamKey{.name = "x"} == mr::ParamKey{.name = "x"});
  CHECK_FALSE(mr::ParamKey{.name = "x"} == mr::ParamKey{.name = {"x"}});
  CHECK_FALSE(mr::ParamKey{.name = "x"} == mr::ParamKey{.attr = "x"});

  std::unordered_set<mr::ParamKey> keys;
  keys.insert(mr::ParamKey{.predicate = a});
  keys.insert(mr::ParamKey{.predicate = a_copy});
  keys.insert(mr::ParamKey{.name = {"*.bias", "*.norm"}});
  keys.insert(mr::ParamKey{.name = {"*.bias", "*.norm"}});
  keys.insert(mr::ParamKey{.name = "*.bias"});
  CHECK(keys.size() == 3);
}
