// The validation chain's checks of precision: dtype names, FP8/FP4, params dtype and fp32 accumulation,
// inference-graph precision, mixed-precision flags, deterministic mode.
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
#include "corpus.h"
#include "validate_support.h"

using namespace mrtest;

// ---------------------------------------------------------------------------------------------------------
// dtype strings (seed 957-968)

TEST_CASE("dtype names map to torch dtypes", "[validate-precision]") {
  struct Case {
    Args extra;
    const char* dest;
    mr::Value want;
  };
  const std::vector<Case> cases = {
      // seed arguments.py:958-964 validate_args: defaults 'bf16' / None map through the table
      {{}, "mamba_inference_conv_states_dtype", "torch.bfloat16"},
      {{}, "mamba_inference_ssm_states_dtype", "torch.bfloat16"},
      {{}, "mamba_training_ssm_states_dtype", mr::Value()},
      {{"--mamba-inference-conv-states-dtype", "fp16"}, "mamba_inference_conv_states_dtype", "torch.float16"},
      {{"--mamba-inference-ssm-states-dtype", "fp32"}, "mamba_inference_ssm_states_dtype", "torch.float32"},
      {{"--mamba-training-ssm-states-dtype", "bf16"}, "mamba_training_ssm_states_dtype", "torch.bfloat16"},
      // seed arguments.py:965 validate_args: logit_dtype, None unless --output-logit-dtype
      {{}, "logit_dtype", mr::Value()},
      {{"--output-logit-dtype", "fp32"}, "logit_dtype", "torch.float32"},
      {{"--output-logit-dtype", "bf16"}, "logit_dtype", "torch.bfloat16"},
      // seed arguments.py:967-969 validate_args: Megatron-FSDP dtypes, 'auto' -> None
      {{}, "megatron_fsdp_main_params_dtype", "torch.float32"},
      {{}, "megatron_fsdp_main_grads_dtype", mr::Value()},
      {{}, "megatron_fsdp_grad_comm_dtype", mr::Value()},
      {{"--megatron-fsdp-main-params-dtype", "auto"}, "megatron_fsdp_main_params_dtype", mr::Value()},
      {{"--megatron-fsdp-main-grads-dtype", "bf16"}, "megatron_fsdp_main_grads_dtype", "torch.bfloat16"},
      {{"--megatron-fsdp-grad-comm-dtype", "fp16"}, "megatron_fsdp_grad_comm_dtype", "torch.float16"},
  };
  for (const auto& c : cases) {
    INFO(c.dest << " with " << ::Catch::Detail::stringify(c.extra));
    auto r = upto_mixed_precision_with(c.extra);
    REQUIRE(r.exit == 0);
    CHECK(r[c.dest].kind() == c.want.kind());
    CHECK(r[c.dest] == c.want);
  }
}

TEST_CASE("dtype.unknown-name: a dtype outside the seed's table fails", "[validate-precision]") {
  // seed arguments.py:958-961: dtype_map has fp32/bf16/fp16/fp8/auto/None; anything else is a KeyError.
  mr::Namespace ns;
  CHECK(one_section(&mr::section::dtype_strings, mrtest::base_args(),
                    [](mr::Namespace& n) { n.derive("megatron_fsdp_grad_comm_dtype", "fp64"); }) ==
        "dtype.unknown-name");
  // Neighbour: 'fp8' is in the table (torch.uint8), and a value that is already a torch dtype is kept.
  CHECK(one_section(&mr::section::dtype_strings, mrtest::base_args(),
                    [](mr::Namespace& n) {
                      n.derive("megatron_fsdp_grad_comm_dtype", "fp8");
                      n.derive("megatron_fsdp_main_grads_dtype", "torch.float16");
                    },
                    &ns) == "");
  CHECK(ns["megatron_fsdp_grad_comm_dtype"] == mr::Value("torch.uint8"));
  CHECK(ns["megatron_fsdp_main_grads_dtype"] == mr::Value("torch.float16"));
}

// ---------------------------------------------------------------------------------------------------------
// FP8 / FP4 (seed 971-995)

TEST_CASE("precision.fp8-param-gather-needs-sharding", "[validate-precision]") {
  auto bad = upto_mixed_precision_with({"--fp8-format", "e4m3", "--fp8-param-gather"});
  CHECK(bad.exit == 1);
  CHECK(bad.rule == "precision.fp8-param-gather-needs-sharding");
  for (const char* flag : {"--use-distributed-optimizer", "--use-torch-fsdp2", "--use-megatron-fsdp"}) {
    INFO(flag);
    auto ok = upto_mixed_precision_with({"--fp8-format", "e4m3", "--fp8-param-gather", flag});
    CHECK(ok.rule != "precision.fp8-param-gather-needs-sharding");
  }
  CHECK(upto_mixed_precision_with({"--fp8-format", "e4m3", "--fp8-param-gather", "--use-distributed-optimizer"}).exit ==
        0);
}

TEST_CASE("precision.fp4-param-gather-needs-sharding", "[validate-precision]") {
  auto bad = upto_mixed_precision_with({"--fp4-format", "e2m1", "--fp4-param-gather"});
  CHECK(bad.exit == 1);
  CHECK(bad.rule == "precision.fp4-param-gather-needs-sharding");
  CHECK(upto_mixed_precision_with({"--fp4-format", "e2m1", "--fp4-param-gather", "--use-distributed-optimizer"}).exit ==
        0);
}

TEST_CASE("precision.fp4-fp8-exclusive", "[validate-precision]") {
  auto bad = upto_mixed_precision_with({"--fp4-format", "e2m1", "--fp8-format", "e4m3"});
  CHECK(bad.exit == 1);
  CHECK(bad.rule == "precision.fp4-fp8-exclusive");
  CHECK(upto_mixed_precision_with({"--fp4-format", "e2m1"}).exit == 0);
  CHECK(upto_mixed_precision_with({"--fp8-format", "hybrid"}).exit == 0);
}

TEST_CASE("precision.fp4-param-gather-needs-fp4", "[validate-precision]") {
  auto bad = upto_mixed_precision_with({"--fp4-param-gather", "--use-distributed-optimizer"});
  CHECK(bad.exit == 1);
  CHECK(bad.rule == "precision.fp4-param-gather-needs-fp4");
  CHECK(upto_mixed_precision_with({"--fp4-param-gather", "--use-distributed-optimizer", "--fp4-format", "e2m1"}).exit ==
        0);
}

TEST_CASE("precision.fp4-te-version", "[validate-precision]") {
  mr::TargetEnv old_te;
  old_te.te_version = "2.6.0";
  auto bad = upto_mixed_precision_with({"--fp4-format", "e2m1"}, {}, &old_te);
  CHECK(bad.exit == 1);
  CHECK(bad.rule == "precision.fp4-te-version");
  mr::TargetEnv new_te;
  new_te.te_version = "2.7.0";
  CHECK(upto_mixed_precision_with({"--fp4-format", "e2m1"}, {}, &new_te).exit == 0);
  CHECK(upto_mixed_precision_with({}, {}, &old_te).exit == 0);  // no FP4, no gate
}

TEST_CASE("precision.mxfp8-inference-flashinfer-version", "[validate-precision]") {
  const Args mx = {"--fp8-recipe", "mxfp8", "--transformer-impl", "inference_optimized"};
  mr::TargetEnv old_fi;
  old_fi.flashinfer_version = "0.6.3";
  auto bad = upto_mixed_precision_with(mx, {}, &old_fi);
  CHECK(bad.exit == 1);
  CHECK(bad.rule == "precision.mxfp8-inference-flashinfer-version");
  mr::TargetEnv no_fi;
  no_fi.flashinfer_version = "";  // not installed: the version check is False
  CHECK(upto_mixed_precision_with(mx, {}, &no_fi).rule == "precision.mxfp8-inference-flashinfer-version");
  CHECK(upto_mixed_precision_with(mx).exit == 0);  // FlashInfer 0.6.4
  CHECK(upto_mixed_precision_with({"--fp8-recipe", "mxfp8"}, {}, &old_fi).exit == 0);
}

// ---------------------------------------------------------------------------------------------------------
// params dtype and gradient accumulation (seed 1080-1124)

TEST_CASE("params_dtype and fp32 gradient accumulation", "[validate-precision]") {
  struct Case {
    Args extra;
    const char* params_dtype;
    bool accumulate_fp32;
    bool nan_check;
  };
  const std::vector<Case> cases = {
      // seed arguments.py:1081 validate_args: fp32 by default, nothing else changes
      {{}, "torch.float32", false, true},
      // seed arguments.py:1082-1091: fp16 -> torch.float16; dynamic loss scaling turns the NaN check off
      {{"--fp16"}, "torch.float16", false, false},
      {{"--fp16", "--loss-scale", "1024"}, "torch.float16", false, true},
      // seed arguments.py:1095-1108: bf16 -> torch.bfloat16, fp32 main grads -> accumulate in fp32
      {{"--bf16"}, "torch.bfloat16", true, true},
      {{"--bf16", "--grad-reduce-in-bf16"}, "torch.bfloat16", false, true},
      {{"--bf16", "--main-grads-dtype", "bf16"}, "torch.bfloat16", false, true},
      {{"--bf16", "--accumulate-allreduce-grads-in-fp32"}, "torch.bfloat16", true, true},
      // seed arguments.py:1104: grad_reduce_in_bf16 wins over an explicit fp32 accumulation
      {{"--bf16", "--accumulate-allreduce-grads-in-fp32", "--grad-reduce-in-bf16"}, "torch.bfloat16", false, true},
      // without bf16 the flag is kept as given
      {{"--accumulate-allreduce-grads-in-fp32"}, "torch.float32", true, true},
  };
  for (const auto& c : cases) {
    INFO(::Catch::Detail::stringify(c.extra));
    auto r = upto_mixed_precision_with(c.extra);
    REQUIRE(r.exit == 0);
    CHECK(r["params_dtype"] == mr::Value(c.params_dtype));
    CHECK(r["accumulate_allreduce_grads_in_fp32"] == mr::Value(c.accumulate_fp32));
    CHECK(r["check_for_nan_in_loss_and_grad"] == mr::Value(c.nan_check));
  }
}

TEST_CASE("precision.fp16-bf16-exclusive", "[validate-precision]") {
  auto bad = upto_mixed_precision_with({"--fp16", "--bf16"});
  CHECK(bad.exit == 1);
  CHECK(bad.rule == "precision.fp16-bf16-exclusive");
  CHECK(upto_mixed_precision_with({"--fp16"}).exit == 0);
  CHECK(upto_mixed_precision_with({"--bf16"}).exit == 0);
}

TEST_CASE("precision.fp16-dynamic-loss-scale-nan-check", "[validate-precision]") {
  CHECK(upto_mixed_precision_with({"--fp16"}).warned("precision.fp16-dynamic-loss-scale-nan-check"));
  CHECK_FALSE(upto_mixed_precision_with({"--fp16", "--loss-scale", "128"})
                  .warned("precision.fp16-dynamic-loss-scale-nan-check"));
  CHECK_FALSE(upto_mixed_precision_with({"--bf16"}).warned("precision.fp16-dynamic-loss-scale-nan-check"));
}

TEST_CASE("precision.fp32-accumulation-needs-fp32-main-grads", "[validate-precision]") {
  auto bad =
      upto_mixed_precision_with({"--bf16", "--accumulate-allreduce-grads-in-fp32", "--main-grads-dtype", "bf16"});
  CHECK(bad.exit == 1);
  CHECK(bad.rule == "precision.fp32-accumulation-needs-fp32-main-grads");
  CHECK(upto_mixed_precision_with({"--bf16", "--accumulate-allreduce-grads-in-fp32", "--main-grads-dtype", "fp32"})
            .exit == 0);
  // Only checked under bf16.
  CHECK(upto_mixed_precision_with({"--accumulate-allreduce-grads-in-fp32", "--main-grads-dtype", "bf16"}).exit == 0);
}

TEST_CASE("precision.fp32-accumulation-reduce-scatter-redundant", "[validate-precision]") {
  // seed arguments.py:1110-1124 validate_args: fp32 accumulation turns both reduce-scatter options off
  for (const char* dest :
       {"ddp_reduce_scatter_with_fp32_accumulation", "gtp_remat_reduce_scatter_with_fp32_accumulation"}) {
    std::string flag = "--" + std::string(dest);
    for (char& ch : flag)
      if (ch == '_') ch = '-';
    INFO(flag);
    auto w = upto_mixed_precision_with({"--bf16", flag});
    CHECK(w.exit == 0);
    CHECK(w.warned("precision.fp32-accumulation-reduce-scatter-redundant"));
    CHECK(w[dest] == mr::Value(false));
    auto kept = upto_mixed_precision_with({"--bf16", "--grad-reduce-in-bf16", flag});
    CHECK(kept.exit == 0);
    CHECK_FALSE(kept.warned("precision.fp32-accumulation-reduce-scatter-redundant"));
    CHECK(kept[dest] == mr::Value(true));
  }
}

// ---------------------------------------------------------------------------------------------------------
// inference CUDA graphs (seed 1126-1137)

namespace {
// The scope as cuda-graph-normalize leaves it: the enum's str().
std::string block_scope(const Args& extra) {
  return one_section(&mr::section::inference_graph_precision, mrtest::with(plus({"--cuda-graph-impl", "local"}, extra)),
                     [](mr::Namespace& n) { n.derive("inference_cuda_graph_scope", "InferenceCudaGraphScope.block"); });
}
}  // namespace

TEST_CASE("precision.block-graph-fp8-needs-inference-optimized", "[validate-precision]") {
  CHECK(block_scope({"--fp8-format", "e4m3", "--fp8-recipe", "mxfp8"}) ==
        "precision.block-graph-fp8-needs-inference-optimized");
  CHECK(block_scope({"--fp8-format", "e4m3", "--fp8-recipe", "mxfp8", "--transformer-impl", "inference_optimized"}) ==
        "");
  CHECK(block_scope({}) == "");  // no FP8
}

TEST_CASE("precision.block-graph-fp8-needs-mxfp8", "[validate-precision]") {
  CHECK(block_scope({"--fp8-format", "e4m3", "--transformer-impl", "inference_optimized"}) ==
        "precision.block-graph-fp8-needs-mxfp8");
  CHECK(block_scope({"--fp8-format", "e4m3", "--transformer-impl", "inference_optimized", "--fp8-recipe",
                     "mxfp8"}) == "");
  // Layer scope: no constraint.
  CHECK(one_section(&mr::section::inference_graph_precision,
                    mrtest::with({"--cuda-graph-impl", "local", "--fp8-format", "e4m3"}), [](mr::Namespace& n) {
                      n.derive("inference_cuda_graph_scope", "InferenceCudaGraphScope.layer");
                    }) == "");
}

TEST_CASE("dynamic-batching.num-cuda-graphs-valid", "[validate-precision]") {
  for (const char* n : {"0", "-2"}) {
    INFO(n);
    auto bad =
        upto_mixed_precision_with({"--cuda-graph-impl", "local", "--inference-dynamic-batching-num-cuda-graphs", n});
    CHECK(bad.exit == 1);
    CHECK(bad.rule == "dynamic-batching.num-cuda-graphs-valid");
  }
  CHECK(upto_mixed_precision_with({"--cuda-graph-impl", "local", "--inference-dynamic-batching-num-cuda-graphs", "-1"})
            .exit == 0);
  CHECK(upto_mixed_precision_with({"--cuda-graph-impl", "local"}).exit == 0);  // default 16
  CHECK(upto_mixed_precision_with({"--inference-dynamic-batching-num-cuda-graphs", "0"}).exit ==
        0);  // not the local impl
}

// ---------------------------------------------------------------------------------------------------------
// mixed precision (seed 1209-1224)

TEST_CASE("precision.fp16-lm-cross-entropy-needs-fp16", "[validate-precision]") {
  auto bad = upto_mixed_precision_with({"--fp16-lm-cross-entropy"});
  CHECK(bad.exit == 1);
  CHECK(bad.rule == "precision.fp16-lm-cross-entropy-needs-fp16");
  CHECK(upto_mixed_precision_with({"--fp16-lm-cross-entropy", "--fp16"}).exit == 0);
  CHECK(upto_mixed_precision_with({"--fp16-lm-cross-entropy", "--bf16"}).rule ==
        "precision.fp16-lm-cross-entropy-needs-fp16");
}

TEST_CASE("precision.fp32-residual-needs-half-precision", "[validate-precision]") {
  auto bad = upto_mixed_precision_with({"--fp32-residual-connection"});
  CHECK(bad.exit == 1);
  CHECK(bad.rule == "precision.fp32-residual-needs-half-precision");
  CHECK(upto_mixed_precision_with({"--fp32-residual-connection", "--bf16"}).exit == 0);
  CHECK(upto_mixed_precision_with({"--fp32-residual-connection", "--fp16"}).exit == 0);
}

TEST_CASE("grouped-gemm.compute-capability", "[validate-precision]") {
  mr::TargetEnv turing;
  turing.gpu_arch = "sm_75";
  auto bad = upto_mixed_precision_with({"--moe-grouped-gemm"}, {}, &turing);
  CHECK(bad.exit == 1);
  CHECK(bad.rule == "grouped-gemm.compute-capability");
  mr::TargetEnv ampere;
  ampere.gpu_arch = "sm_80";
  CHECK(upto_mixed_precision_with({"--moe-grouped-gemm"}, {}, &ampere).exit == 0);
  CHECK(upto_mixed_precision_with({}, {}, &turing).exit == 0);
}

TEST_CASE("no_persist_layer_norm follows the torch version", "[validate-precision]") {
  // seed arguments.py:1220-1224 validate_args: torch older than 1.11 has no persistent layer norm kernel
  mr::TargetEnv old_torch;
  old_torch.torch_version = "1.10.2";
  auto r = upto_mixed_precision_with({}, {}, &old_torch);
  REQUIRE(r.exit == 0);
  CHECK(r["no_persist_layer_norm"] == mr::Value(true));
  auto now = upto_mixed_precision_with({});
  REQUIRE(now.exit == 0);
  CHECK(now["no_persist_layer_norm"] == mr::Value(false));
}

// ---------------------------------------------------------------------------------------------------------------
// seed 1627-1632: deterministic mode (megatron/training/determinism.py)

TEST_CASE("determinism: options that must be off", "[validate-precision]") {
  auto r = from_data_blend_with({"--deterministic-mode", "--tp-comm-overlap"});
  fails(r, "determinism.incompatible-options");
  CHECK(r.message.find("tp_comm_overlap=False (got True)") != std::string::npos);
  r = from_data_blend_with({"--deterministic-mode", "--cross-entropy-loss-fusion", "--tp-comm-overlap"});
  fails(r, "determinism.incompatible-options");
  CHECK(r.message.find("cross_entropy_loss_fusion=False (got True), tp_comm_overlap=False (got True)") !=
        std::string::npos);
  passes(from_data_blend_with({"--deterministic-mode"}));
  passes(from_data_blend_with({"--tp-comm-overlap", "--cross-entropy-loss-fusion"}));  // not in deterministic mode
  // The option check comes before the environment checks.
  fails(from_data_blend_with({"--deterministic-mode", "--tp-comm-overlap"}, {{"NCCL_ALGO", "Tree"}}),
        "determinism.incompatible-options");
}

TEST_CASE("determinism: NCCL_ALGO tokens", "[validate-precision]") {
  const Args det = {"--deterministic-mode"};
  fails(from_data_blend_with(det, {{"NCCL_ALGO", "Tree"}}), "determinism.nccl-algo");
  fails(from_data_blend_with(det, {{"NCCL_ALGO", "Ring,Tree"}}), "determinism.nccl-algo");
  fails(from_data_blend_with(det, {{"NCCL_ALGO", ""}}), "determinism.nccl-algo");      // no token at all
  fails(from_data_blend_with(det, {{"NCCL_ALGO", " , "}}), "determinism.nccl-algo");   // blank tokens only
  fails(from_data_blend_with(det, {{"NCCL_ALGO", "ring"}}), "determinism.nccl-algo");  // case matters
  passes(from_data_blend_with(det, {{"NCCL_ALGO", "Ring"}}));
  passes(from_data_blend_with(det, {{"NCCL_ALGO", "^NVLS"}}));
  passes(from_data_blend_with(det, {{"NCCL_ALGO", " Ring , CollnetDirect,CollnetChain,"}}));
  passes(from_data_blend_with(det));                          // unset: Megatron fills in Ring
  passes(from_data_blend_with({}, {{"NCCL_ALGO", "Tree"}}));  // not in deterministic mode
}

TEST_CASE("determinism: exact-value environment variables", "[validate-precision]") {
  const Args det = {"--deterministic-mode"};
  fails(from_data_blend_with(det, {{"NVTE_ALLOW_NONDETERMINISTIC_ALGO", "1"}}), "determinism.env-value");
  fails(from_data_blend_with(det, {{"NVTE_ALLOW_NONDETERMINISTIC_ALGO", "00"}}), "determinism.env-value");
  passes(from_data_blend_with(det, {{"NVTE_ALLOW_NONDETERMINISTIC_ALGO", "0"}}));
  fails(from_data_blend_with(det, {{"CUBLAS_WORKSPACE_CONFIG", ":4096:2"}}), "determinism.env-value");
  passes(from_data_blend_with(det, {{"CUBLAS_WORKSPACE_CONFIG", ":4096:8"}}));
  passes(from_data_blend_with(det, {{"CUBLAS_WORKSPACE_CONFIG", ":16:8"}}));
  passes(from_data_blend_with({}, {{"CUBLAS_WORKSPACE_CONFIG", ":4096:2"}, {"NVTE_ALLOW_NONDETERMINISTIC_ALGO", "1"}}));
}

TEST_CASE("determinism: SSM determinism variables", "[validate-precision]") {
  const Args det = {"--deterministic-mode"};
  fails(from_data_blend_with(det, {{"MAMBA_DETERMINISTIC", "0"}}), "determinism.ssm-env");
  fails(from_data_blend_with(det, {{"CAUSAL_CONV1D_DETERMINISTIC", "true"}}), "determinism.ssm-env");
  passes(from_data_blend_with(det, {{"MAMBA_DETERMINISTIC", "1"}}));
  passes(from_data_blend_with(det, {{"CAUSAL_CONV1D_DETERMINISTIC", "1yes"}}));  // only the first character counts
  passes(from_data_blend_with(det, {{"MAMBA_DETERMINISTIC", ""}}));              // empty counts as unset
  passes(from_data_blend_with({}, {{"MAMBA_DETERMINISTIC", "0"}}));
}

TEST_CASE("determinism: the TP-overlap corpus config is rejected by the whole chain", "[validate-precision]") {
  // seed 1631-1632: the file asks for --deterministic-mode together with --tp-comm-overlap.
  // As the reference was run (corpus.h).
  const mr::Invocation inv = mrtest::reference_invocation(
      std::string(MR_DATA_DIR) +
      "/corpus/functional-tests/gpt__gpt3_weekly_mcore_tp2_pp2_current_scaling_native_fp8_tp_pp_sp_tp_overlap.yaml");
  REQUIRE(std::filesystem::is_regular_file(inv.config_files[0]));
  mr::Outcome o = mr::resolve(mr::Schema::megatron(), inv);
  CHECK(o.exit_code() == 1);
  std::string rule;
  for (const auto& d : o.diagnostics)
    if (d.level == mr::Diagnostic::Level::Error) rule = d.rule;
  CHECK(rule == "determinism.incompatible-options");
}
