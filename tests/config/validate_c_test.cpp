// Part C of the validation chain: seed arguments.py 957-1226 of validate_args (dtype mapping, FP8/FP4,
// Megatron-FSDP, params dtype, inference graph precision, dataloader defaults, model dimensions, sequence
// lengths, save intervals, mixed-precision checks).
//
// Most cases run the chain up to and including part C (parts A, B, C), so that a check of a later part can
// not turn a neighbour config into a failure; a few cases call one part-C section directly on a namespace that
// holds a value no command line can produce at that point (an enum the earlier parts normalise, a dtype name
// argparse's choices would reject).
#include <catch2/catch.hpp>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "config/validate/part_c_sections.h"
#include "config/validate/sections.h"
#include "support.h"

namespace {

using Env = std::map<std::string, std::string>;
using Args = std::vector<std::string>;

// Parses `args` and runs the validation chain through part C.
mrtest::Run through_c(const Args& args, const Env& env = {}, const mr::TargetEnv* target = nullptr) {
  return mrtest::run_parts(args, {&mr::sections_part_a, &mr::sections_part_b, &mr::sections_part_c}, env, target);
}

mrtest::Run c_with(const Args& extra, const Env& env = {}, const mr::TargetEnv* target = nullptr) {
  return through_c(mrtest::with(extra), env, target);
}

// base_args() without `flag` and its value.
Args base_without(const std::string& flag) {
  Args a = mrtest::base_args(), out;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] == flag) {
      ++i;
      continue;
    }
    out.push_back(a[i]);
  }
  return out;
}

Args plus(Args a, const Args& extra) {
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

// Parses `args`, lets `tweak` change the namespace, then runs one part-C section; returns the failing rule id
// ("" when the section passes) and leaves the namespace in `ns_out`.
std::string one_section(void (*section)(mr::Context&), const Args& args,
                        const std::function<void(mr::Namespace&)>& tweak, mr::Namespace* ns_out = nullptr) {
  mrtest::Run r = mrtest::run_body(args, section, {}, nullptr, tweak);
  if (ns_out) *ns_out = r.out.parsed.ns;
  return r.rule;
}

const Args kMegatronFsdp = {"--use-megatron-fsdp", "--ckpt-format", "fsdp_dtensor", "--use-distributed-optimizer"};

}  // namespace

// ---------------------------------------------------------------------------------------------------------
// dtype strings (seed 957-968)

TEST_CASE("dtype names map to torch dtypes", "[part-c]") {
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
    auto r = c_with(c.extra);
    REQUIRE(r.exit == 0);
    CHECK(r[c.dest].kind() == c.want.kind());
    CHECK(r[c.dest] == c.want);
  }
}

TEST_CASE("dtype.unknown-name: a dtype outside the seed's table fails", "[part-c]") {
  // seed arguments.py:958-961: dtype_map has fp32/bf16/fp16/fp8/auto/None; anything else is a KeyError.
  mr::Namespace ns;
  CHECK(one_section(&mr::part_c::dtype_strings, mrtest::base_args(),
                    [](mr::Namespace& n) { n.derive("megatron_fsdp_grad_comm_dtype", "fp64"); }) ==
        "dtype.unknown-name");
  // Neighbour: 'fp8' is in the table (torch.uint8), and a value that is already a torch dtype is kept.
  CHECK(one_section(&mr::part_c::dtype_strings, mrtest::base_args(),
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

TEST_CASE("precision.fp8-param-gather-needs-sharding", "[part-c]") {
  auto bad = c_with({"--fp8-format", "e4m3", "--fp8-param-gather"});
  CHECK(bad.exit == 1);
  CHECK(bad.rule == "precision.fp8-param-gather-needs-sharding");
  for (const char* flag : {"--use-distributed-optimizer", "--use-torch-fsdp2", "--use-megatron-fsdp"}) {
    INFO(flag);
    auto ok = c_with({"--fp8-format", "e4m3", "--fp8-param-gather", flag});
    CHECK(ok.rule != "precision.fp8-param-gather-needs-sharding");
  }
  CHECK(c_with({"--fp8-format", "e4m3", "--fp8-param-gather", "--use-distributed-optimizer"}).exit == 0);
}

TEST_CASE("precision.fp4-param-gather-needs-sharding", "[part-c]") {
  auto bad = c_with({"--fp4-format", "e2m1", "--fp4-param-gather"});
  CHECK(bad.exit == 1);
  CHECK(bad.rule == "precision.fp4-param-gather-needs-sharding");
  CHECK(c_with({"--fp4-format", "e2m1", "--fp4-param-gather", "--use-distributed-optimizer"}).exit == 0);
}

TEST_CASE("precision.fp4-fp8-exclusive", "[part-c]") {
  auto bad = c_with({"--fp4-format", "e2m1", "--fp8-format", "e4m3"});
  CHECK(bad.exit == 1);
  CHECK(bad.rule == "precision.fp4-fp8-exclusive");
  CHECK(c_with({"--fp4-format", "e2m1"}).exit == 0);
  CHECK(c_with({"--fp8-format", "hybrid"}).exit == 0);
}

TEST_CASE("precision.fp4-param-gather-needs-fp4", "[part-c]") {
  auto bad = c_with({"--fp4-param-gather", "--use-distributed-optimizer"});
  CHECK(bad.exit == 1);
  CHECK(bad.rule == "precision.fp4-param-gather-needs-fp4");
  CHECK(c_with({"--fp4-param-gather", "--use-distributed-optimizer", "--fp4-format", "e2m1"}).exit == 0);
}

TEST_CASE("precision.fp4-te-version", "[part-c]") {
  mr::TargetEnv old_te;
  old_te.te_version = "2.6.0";
  auto bad = c_with({"--fp4-format", "e2m1"}, {}, &old_te);
  CHECK(bad.exit == 1);
  CHECK(bad.rule == "precision.fp4-te-version");
  mr::TargetEnv new_te;
  new_te.te_version = "2.7.0";
  CHECK(c_with({"--fp4-format", "e2m1"}, {}, &new_te).exit == 0);
  CHECK(c_with({}, {}, &old_te).exit == 0);  // no FP4, no gate
}

TEST_CASE("precision.mxfp8-inference-flashinfer-version", "[part-c]") {
  const Args mx = {"--fp8-recipe", "mxfp8", "--transformer-impl", "inference_optimized"};
  mr::TargetEnv old_fi;
  old_fi.flashinfer_version = "0.6.3";
  auto bad = c_with(mx, {}, &old_fi);
  CHECK(bad.exit == 1);
  CHECK(bad.rule == "precision.mxfp8-inference-flashinfer-version");
  mr::TargetEnv no_fi;
  no_fi.flashinfer_version = "";  // not installed: the version check is False
  CHECK(c_with(mx, {}, &no_fi).rule == "precision.mxfp8-inference-flashinfer-version");
  CHECK(c_with(mx).exit == 0);  // FlashInfer 0.6.4
  CHECK(c_with({"--fp8-recipe", "mxfp8"}, {}, &old_fi).exit == 0);
}

// ---------------------------------------------------------------------------------------------------------
// MoE megakernel and Megatron-FSDP (seed 996-1078)

TEST_CASE("moe-megakernel.fsdp-unsupported", "[part-c]") {
  auto bad = c_with(plus({"--moe-megakernel-backend", "mok"}, kMegatronFsdp));
  CHECK(bad.exit == 1);
  CHECK(bad.rule == "moe-megakernel.fsdp-unsupported");
  CHECK(c_with({"--moe-megakernel-backend", "mok"}).exit == 0);
}

TEST_CASE("Megatron-FSDP derivations", "[part-c]") {
  // seed arguments.py:1003 validate_args: use_custom_fsdp appears only with Megatron-FSDP
  auto plain = c_with({"--reuse-grad-buf-for-mxfp8-param-ag"});
  REQUIRE(plain.exit == 0);
  CHECK_FALSE(plain.has("use_custom_fsdp"));
  CHECK(plain["reuse_grad_buf_for_mxfp8_param_ag"] == mr::Value(true));

  auto fsdp = c_with(plus(kMegatronFsdp, {"--reuse-grad-buf-for-mxfp8-param-ag"}));
  REQUIRE(fsdp.exit == 0);
  CHECK(fsdp["use_custom_fsdp"] == mr::Value(true));
  // seed arguments.py:1018 validate_args
  CHECK(fsdp["reuse_grad_buf_for_mxfp8_param_ag"] == mr::Value(false));
  CHECK(fsdp["fsdp_double_buffer"] == mr::Value(false));
  CHECK(fsdp["fsdp_manual_registration"] == mr::Value(false));

  // seed arguments.py:1066-1068 validate_args: the max-pool allocator is a double buffer
  auto pool = c_with(plus(kMegatronFsdp, {"--megatron-fsdp-max-pool-double-buffer"}));
  REQUIRE(pool.exit == 0);
  CHECK(pool["fsdp_double_buffer"] == mr::Value(true));
  CHECK(pool["fsdp_manual_registration"] == mr::Value(false));
}

TEST_CASE("megatron-fsdp.v2-no-distributed-optimizer", "[part-c]") {
  auto bad = c_with(plus(kMegatronFsdp, {"--megatron-fsdp-version", "2"}));
  CHECK(bad.exit == 1);
  CHECK(bad.rule == "megatron-fsdp.v2-no-distributed-optimizer");
  // seed arguments.py:1005-1007 validate_args: v2 leaves the distributed optimizer off
  auto ok = c_with({"--use-megatron-fsdp", "--ckpt-format", "fsdp_dtensor", "--megatron-fsdp-version", "2"});
  CHECK(ok.exit == 0);
  CHECK(ok["use_distributed_optimizer"] == mr::Value(false));
  CHECK_FALSE(ok.warned("megatron-fsdp.v1-enables-distributed-optimizer"));
}

TEST_CASE("megatron-fsdp.v1-enables-distributed-optimizer", "[part-c]") {
  // seed arguments.py:1008-1016 validate_args: v1 turns the distributed optimizer on, with a warning
  auto w = c_with({"--use-megatron-fsdp", "--ckpt-format", "fsdp_dtensor"});
  CHECK(w.exit == 0);
  CHECK(w.warned("megatron-fsdp.v1-enables-distributed-optimizer"));
  CHECK(w["use_distributed_optimizer"] == mr::Value(true));
  auto quiet = c_with(kMegatronFsdp);
  CHECK(quiet.exit == 0);
  CHECK_FALSE(quiet.warned("megatron-fsdp.v1-enables-distributed-optimizer"));
}

TEST_CASE("megatron-fsdp.single-grouped-moe-params", "[part-c]") {
  for (const char* flag : {"--moe-single-grouped-weight", "--moe-single-grouped-bias"}) {
    INFO(flag);
    auto bad = c_with(plus(kMegatronFsdp, {flag}));
    CHECK(bad.exit == 1);
    CHECK(bad.rule == "megatron-fsdp.single-grouped-moe-params");
    CHECK(c_with({flag}).rule != "megatron-fsdp.single-grouped-moe-params");
  }
  CHECK(c_with(kMegatronFsdp).exit == 0);
}

TEST_CASE("megatron-fsdp.optimizer-supported", "[part-c]") {
  auto bad = c_with(plus(kMegatronFsdp, {"--optimizer", "lion"}));
  CHECK(bad.exit == 1);
  CHECK(bad.rule == "megatron-fsdp.optimizer-supported");
  CHECK(c_with(plus(kMegatronFsdp, {"--optimizer", "sgd"})).exit == 0);
  CHECK(c_with(plus(kMegatronFsdp, {"--optimizer", "adam"})).exit == 0);
}

TEST_CASE("megatron-fsdp.grad-accumulation-fusion", "[part-c]") {
  // Default strategy optim_grads_params and fusion on: warned.
  CHECK(c_with(kMegatronFsdp).warned("megatron-fsdp.grad-accumulation-fusion"));
  // An expert strategy that shards gradients counts as well.
  CHECK(c_with(plus(kMegatronFsdp, {"--data-parallel-sharding-strategy", "no_shard",
                                    "--expert-data-parallel-sharding-strategy", "optim_grads"}))
            .warned("megatron-fsdp.grad-accumulation-fusion"));
  // Neighbours: fusion off, or no strategy shards gradients.
  CHECK_FALSE(c_with(plus(kMegatronFsdp, {"--no-gradient-accumulation-fusion"}))
                  .warned("megatron-fsdp.grad-accumulation-fusion"));
  CHECK_FALSE(c_with(plus(kMegatronFsdp, {"--data-parallel-sharding-strategy", "optim"}))
                  .warned("megatron-fsdp.grad-accumulation-fusion"));
  CHECK_FALSE(c_with({"--use-distributed-optimizer"}).warned("megatron-fsdp.grad-accumulation-fusion"));
}

TEST_CASE("megatron-fsdp.weight-hash-check-unsupported", "[part-c]") {
  auto bad = c_with(plus(kMegatronFsdp, {"--check-weight-hash-across-dp-replicas-interval", "10"}));
  CHECK(bad.exit == 1);
  CHECK(bad.rule == "megatron-fsdp.weight-hash-check-unsupported");
  auto expert = c_with(plus(kMegatronFsdp, {"--check-weight-hash-across-dp-replicas-interval", "10",
                                            "--data-parallel-sharding-strategy", "optim",
                                            "--expert-data-parallel-sharding-strategy", "optim_grads_params"}));
  CHECK(expert.rule == "megatron-fsdp.weight-hash-check-unsupported");
  CHECK(c_with(plus(kMegatronFsdp, {"--check-weight-hash-across-dp-replicas-interval", "10",
                                    "--data-parallel-sharding-strategy", "optim_grads"}))
            .exit == 0);
}

TEST_CASE("megatron-fsdp.cuda-device-max-connections", "[part-c]") {
  auto bad = c_with(kMegatronFsdp, {{"CUDA_DEVICE_MAX_CONNECTIONS", "1"}});
  CHECK(bad.exit == 1);
  CHECK(bad.rule == "megatron-fsdp.cuda-device-max-connections");
  CHECK(c_with(kMegatronFsdp, {{"CUDA_DEVICE_MAX_CONNECTIONS", "8"}}).exit == 0);
  CHECK(c_with(kMegatronFsdp).exit == 0);  // unset
  CHECK(c_with({}, {{"CUDA_DEVICE_MAX_CONNECTIONS", "1"}}).exit == 0);  // no FSDP
}

TEST_CASE("megatron-fsdp.ckpt-format", "[part-c]") {
  auto bad = c_with({"--use-megatron-fsdp", "--use-distributed-optimizer"});  // default torch_dist
  CHECK(bad.exit == 1);
  CHECK(bad.rule == "megatron-fsdp.ckpt-format");
  CHECK(c_with(kMegatronFsdp).exit == 0);
}

TEST_CASE("megatron-fsdp.nccl-ub-double-buffer", "[part-c]") {
  // seed arguments.py:1059-1064 validate_args: --use-nccl-ub turns both FSDP buffers options on
  auto w = c_with(plus(kMegatronFsdp, {"--use-nccl-ub"}));
  CHECK(w.exit == 0);
  CHECK(w.warned("megatron-fsdp.nccl-ub-double-buffer"));
  CHECK(w["fsdp_manual_registration"] == mr::Value(true));
  CHECK(w["fsdp_double_buffer"] == mr::Value(true));
  auto quiet = c_with(kMegatronFsdp);
  CHECK_FALSE(quiet.warned("megatron-fsdp.nccl-ub-double-buffer"));
  CHECK(c_with({"--use-nccl-ub"}).exit == 0);
  CHECK_FALSE(c_with({"--use-nccl-ub"}).warned("megatron-fsdp.nccl-ub-double-buffer"));
}

TEST_CASE("megatron-fsdp.meta-init-no-shard", "[part-c]") {
  auto bad = c_with(plus(kMegatronFsdp, {"--init-model-with-meta-device", "--data-parallel-sharding-strategy",
                                         "no_shard"}));
  CHECK(bad.exit == 1);
  CHECK(bad.rule == "megatron-fsdp.meta-init-no-shard");
  // Neighbour: an expert strategy makes the set {no_shard, optim}, which is not {no_shard}.
  CHECK(c_with(plus(kMegatronFsdp, {"--init-model-with-meta-device", "--data-parallel-sharding-strategy",
                                    "no_shard", "--expert-data-parallel-sharding-strategy", "optim"}))
            .exit == 0);
  CHECK(c_with(plus(kMegatronFsdp, {"--init-model-with-meta-device"})).exit == 0);
}

TEST_CASE("megatron-fsdp.manual-registration-needs-megatron-fsdp", "[part-c]") {
  auto bad = c_with({"--fsdp-manual-registration", "--use-nccl-ub"});
  CHECK(bad.exit == 1);
  CHECK(bad.rule == "megatron-fsdp.manual-registration-needs-megatron-fsdp");
  CHECK(c_with(plus(kMegatronFsdp, {"--fsdp-manual-registration", "--use-nccl-ub"})).exit == 0);
}

TEST_CASE("megatron-fsdp.manual-registration-needs-nccl-ub", "[part-c]") {
  auto bad = c_with(plus(kMegatronFsdp, {"--fsdp-manual-registration"}));
  CHECK(bad.exit == 1);
  CHECK(bad.rule == "megatron-fsdp.manual-registration-needs-nccl-ub");
  CHECK(c_with(plus(kMegatronFsdp, {"--use-nccl-ub"})).exit == 0);
}

// ---------------------------------------------------------------------------------------------------------
// params dtype and gradient accumulation (seed 1080-1124)

TEST_CASE("params_dtype and fp32 gradient accumulation", "[part-c]") {
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
    auto r = c_with(c.extra);
    REQUIRE(r.exit == 0);
    CHECK(r["params_dtype"] == mr::Value(c.params_dtype));
    CHECK(r["accumulate_allreduce_grads_in_fp32"] == mr::Value(c.accumulate_fp32));
    CHECK(r["check_for_nan_in_loss_and_grad"] == mr::Value(c.nan_check));
  }
}

TEST_CASE("precision.fp16-bf16-exclusive", "[part-c]") {
  auto bad = c_with({"--fp16", "--bf16"});
  CHECK(bad.exit == 1);
  CHECK(bad.rule == "precision.fp16-bf16-exclusive");
  CHECK(c_with({"--fp16"}).exit == 0);
  CHECK(c_with({"--bf16"}).exit == 0);
}

TEST_CASE("precision.fp16-dynamic-loss-scale-nan-check", "[part-c]") {
  CHECK(c_with({"--fp16"}).warned("precision.fp16-dynamic-loss-scale-nan-check"));
  CHECK_FALSE(c_with({"--fp16", "--loss-scale", "128"}).warned("precision.fp16-dynamic-loss-scale-nan-check"));
  CHECK_FALSE(c_with({"--bf16"}).warned("precision.fp16-dynamic-loss-scale-nan-check"));
}

TEST_CASE("precision.fp32-accumulation-needs-fp32-main-grads", "[part-c]") {
  auto bad = c_with({"--bf16", "--accumulate-allreduce-grads-in-fp32", "--main-grads-dtype", "bf16"});
  CHECK(bad.exit == 1);
  CHECK(bad.rule == "precision.fp32-accumulation-needs-fp32-main-grads");
  CHECK(c_with({"--bf16", "--accumulate-allreduce-grads-in-fp32", "--main-grads-dtype", "fp32"}).exit == 0);
  // Only checked under bf16.
  CHECK(c_with({"--accumulate-allreduce-grads-in-fp32", "--main-grads-dtype", "bf16"}).exit == 0);
}

TEST_CASE("precision.fp32-accumulation-reduce-scatter-redundant", "[part-c]") {
  // seed arguments.py:1110-1124 validate_args: fp32 accumulation turns both reduce-scatter options off
  for (const char* dest :
       {"ddp_reduce_scatter_with_fp32_accumulation", "gtp_remat_reduce_scatter_with_fp32_accumulation"}) {
    std::string flag = "--" + std::string(dest);
    for (char& ch : flag)
      if (ch == '_') ch = '-';
    INFO(flag);
    auto w = c_with({"--bf16", flag});
    CHECK(w.exit == 0);
    CHECK(w.warned("precision.fp32-accumulation-reduce-scatter-redundant"));
    CHECK(w[dest] == mr::Value(false));
    auto kept = c_with({"--bf16", "--grad-reduce-in-bf16", flag});
    CHECK(kept.exit == 0);
    CHECK_FALSE(kept.warned("precision.fp32-accumulation-reduce-scatter-redundant"));
    CHECK(kept[dest] == mr::Value(true));
  }
}

// ---------------------------------------------------------------------------------------------------------
// inference CUDA graphs (seed 1126-1137)

namespace {
// The scope as part A leaves it: the enum's str().
std::string block_scope(const Args& extra) {
  return one_section(&mr::part_c::inference_graph_precision, mrtest::with(plus({"--cuda-graph-impl", "local"}, extra)),
                     [](mr::Namespace& n) { n.derive("inference_cuda_graph_scope", "InferenceCudaGraphScope.block"); });
}
}  // namespace

TEST_CASE("precision.block-graph-fp8-needs-inference-optimized", "[part-c]") {
  CHECK(block_scope({"--fp8-format", "e4m3", "--fp8-recipe", "mxfp8"}) ==
        "precision.block-graph-fp8-needs-inference-optimized");
  CHECK(block_scope({"--fp8-format", "e4m3", "--fp8-recipe", "mxfp8", "--transformer-impl", "inference_optimized"}) ==
        "");
  CHECK(block_scope({}) == "");  // no FP8
}

TEST_CASE("precision.block-graph-fp8-needs-mxfp8", "[part-c]") {
  CHECK(block_scope({"--fp8-format", "e4m3", "--transformer-impl", "inference_optimized"}) ==
        "precision.block-graph-fp8-needs-mxfp8");
  CHECK(block_scope({"--fp8-format", "e4m3", "--transformer-impl", "inference_optimized", "--fp8-recipe",
                     "mxfp8"}) == "");
  // Layer scope: no constraint.
  CHECK(one_section(&mr::part_c::inference_graph_precision,
                    mrtest::with({"--cuda-graph-impl", "local", "--fp8-format", "e4m3"}),
                    [](mr::Namespace& n) { n.derive("inference_cuda_graph_scope", "InferenceCudaGraphScope.layer"); }) ==
        "");
}

TEST_CASE("dynamic-batching.num-cuda-graphs-valid", "[part-c]") {
  for (const char* n : {"0", "-2"}) {
    INFO(n);
    auto bad = c_with({"--cuda-graph-impl", "local", "--inference-dynamic-batching-num-cuda-graphs", n});
    CHECK(bad.exit == 1);
    CHECK(bad.rule == "dynamic-batching.num-cuda-graphs-valid");
  }
  CHECK(c_with({"--cuda-graph-impl", "local", "--inference-dynamic-batching-num-cuda-graphs", "-1"}).exit == 0);
  CHECK(c_with({"--cuda-graph-impl", "local"}).exit == 0);  // default 16
  CHECK(c_with({"--inference-dynamic-batching-num-cuda-graphs", "0"}).exit == 0);  // not the local impl
}

// ---------------------------------------------------------------------------------------------------------
// dataloader (seed 1139-1143, 1182-1186)

TEST_CASE("dataloader defaults and document masking", "[part-c]") {
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
    auto r = c_with(c.extra);
    REQUIRE(r.exit == 0);
    CHECK(r[c.dest] == c.want);
  }
}

TEST_CASE("dataloader.builder-threads-positive", "[part-c]") {
  auto bad = c_with({"--num-dataset-builder-threads", "0"});
  CHECK(bad.exit == 1);
  CHECK(bad.rule == "dataloader.builder-threads-positive");
  CHECK(c_with({"--num-dataset-builder-threads", "1"}).exit == 0);
}

// ---------------------------------------------------------------------------------------------------------
// model dimensions (seed 1145-1180)

TEST_CASE("derived model dimensions", "[part-c]") {
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
    auto r = c_with(c.extra);
    REQUIRE(r.exit == 0);
    CHECK(r["ffn_hidden_size"].as_int() == c.ffn);
    CHECK(r["kv_channels"].as_int() == c.kv);
  }
}

TEST_CASE("num_layers and encoder_num_layers mirror each other", "[part-c]") {
  // seed arguments.py:1145-1148 validate_args
  auto r = through_c(mrtest::base_args());
  REQUIRE(r.exit == 0);
  CHECK(r["encoder_num_layers"].as_int() == 2);
  // seed arguments.py:1149-1152 validate_args
  auto e = through_c(plus(base_without("--num-layers"), {"--encoder-num-layers", "4"}));
  REQUIRE(e.exit == 0);
  CHECK(e["num_layers"].as_int() == 4);
  CHECK(e["encoder_num_layers"].as_int() == 4);
}

TEST_CASE("model-shape.num-layers-conflict", "[part-c]") {
  auto bad = c_with({"--encoder-num-layers", "2"});
  CHECK(bad.exit == 1);
  CHECK(bad.rule == "model-shape.num-layers-conflict");
  CHECK(through_c(plus(base_without("--num-layers"), {"--encoder-num-layers", "2"})).exit == 0);
}

TEST_CASE("model-shape.num-layers-missing", "[part-c]") {
  auto bad = through_c(base_without("--num-layers"));
  CHECK(bad.exit == 1);
  CHECK(bad.rule == "model-shape.num-layers-missing");
  CHECK(through_c(mrtest::base_args()).exit == 0);
}

TEST_CASE("model-shape.required-argument", "[part-c]") {
  for (const char* flag : {"--hidden-size", "--num-attention-heads", "--max-position-embeddings"}) {
    INFO(flag);
    auto bad = through_c(base_without(flag));
    CHECK(bad.exit == 1);
    CHECK(bad.rule == "model-shape.required-argument");
  }
  CHECK(through_c(mrtest::base_args()).exit == 0);
}

TEST_CASE("model-shape.hidden-size-divisible-by-heads", "[part-c]") {
  auto bad = c_with({"--num-attention-heads", "3"});
  CHECK(bad.exit == 1);
  CHECK(bad.rule == "model-shape.hidden-size-divisible-by-heads");
  CHECK(c_with({"--num-attention-heads", "3", "--kv-channels", "16"}).exit == 0);
  CHECK(c_with({"--num-attention-heads", "8"}).exit == 0);
}

TEST_CASE("seq-length.context-parallel-divisible", "[part-c]") {
  const Env ws2 = {{"WORLD_SIZE", "2"}};
  auto bad = c_with({"--context-parallel-size", "2", "--seq-length", "130", "--max-position-embeddings", "130"}, ws2);
  CHECK(bad.exit == 1);
  CHECK(bad.rule == "seq-length.context-parallel-divisible");
  // 128 % (2 * 2) == 0
  CHECK(c_with({"--context-parallel-size", "2"}, ws2).exit == 0);
  // CP 1: no constraint
  CHECK(c_with({"--seq-length", "130", "--max-position-embeddings", "130"}).exit == 0);
}

// ---------------------------------------------------------------------------------------------------------
// sequence lengths (seed 1188-1200)

TEST_CASE("seq_length and encoder_seq_length mirror each other", "[part-c]") {
  // seed arguments.py:1188-1190 validate_args
  auto r = through_c(mrtest::base_args());
  REQUIRE(r.exit == 0);
  CHECK(r["encoder_seq_length"].as_int() == 128);
  // seed arguments.py:1191-1193 validate_args
  auto e = through_c(plus(base_without("--seq-length"), {"--encoder-seq-length", "64"}));
  REQUIRE(e.exit == 0);
  CHECK(e["seq_length"].as_int() == 64);
  CHECK(e["encoder_seq_length"].as_int() == 64);
}

TEST_CASE("seq-length.encoder-seq-length-conflict", "[part-c]") {
  auto bad = c_with({"--encoder-seq-length", "128"});
  CHECK(bad.exit == 1);
  CHECK(bad.rule == "seq-length.encoder-seq-length-conflict");
  CHECK(through_c(plus(base_without("--seq-length"), {"--encoder-seq-length", "128"})).exit == 0);
}

TEST_CASE("seq-length.missing", "[part-c]") {
  auto bad = through_c(base_without("--seq-length"));
  CHECK(bad.exit == 1);
  CHECK(bad.rule == "seq-length.missing");
  CHECK(through_c(mrtest::base_args()).exit == 0);
}

TEST_CASE("seq-length.exceeds-max-position-embeddings", "[part-c]") {
  auto bad = c_with({"--max-position-embeddings", "64"});
  CHECK(bad.exit == 1);
  CHECK(bad.rule == "seq-length.exceeds-max-position-embeddings");
  CHECK(c_with({"--max-position-embeddings", "128"}).exit == 0);  // equal is fine
  CHECK(through_c(plus(base_without("--seq-length"), {"--encoder-seq-length", "256"})).rule ==
        "seq-length.exceeds-max-position-embeddings");
}

TEST_CASE("seq-length.decoder-exceeds-max-position-embeddings", "[part-c]") {
  auto bad = c_with({"--decoder-seq-length", "256"});
  CHECK(bad.exit == 1);
  CHECK(bad.rule == "seq-length.decoder-exceeds-max-position-embeddings");
  CHECK(c_with({"--decoder-seq-length", "128"}).exit == 0);
}

// ---------------------------------------------------------------------------------------------------------
// save intervals (seed 1201-1208)

TEST_CASE("save-schedule.interval-required", "[part-c]") {
  auto bad = c_with({"--save", "/tmp/ckpt"});
  CHECK(bad.exit == 1);
  CHECK(bad.rule == "save-schedule.interval-required");
  CHECK(c_with({"--save", "/tmp/ckpt", "--save-interval", "5"}).exit == 0);
  CHECK(c_with({"--save-retain-interval", "7"}).exit == 0);  // no --save: nothing checked
}

TEST_CASE("save-schedule.interval-positive", "[part-c]") {
  auto bad = c_with({"--save", "/tmp/ckpt", "--save-interval", "0"});
  CHECK(bad.exit == 1);
  CHECK(bad.rule == "save-schedule.interval-positive");
  CHECK(c_with({"--save", "/tmp/ckpt", "--save-interval", "1"}).exit == 0);
}

TEST_CASE("save-schedule.retain-interval-positive", "[part-c]") {
  auto bad = c_with({"--save", "/tmp/ckpt", "--save-interval", "5", "--save-retain-interval", "0"});
  CHECK(bad.exit == 1);
  CHECK(bad.rule == "save-schedule.retain-interval-positive");
  CHECK(c_with({"--save", "/tmp/ckpt", "--save-interval", "5", "--save-retain-interval", "5"}).exit == 0);
}

TEST_CASE("save-schedule.retain-interval-multiple", "[part-c]") {
  auto bad = c_with({"--save", "/tmp/ckpt", "--save-interval", "5", "--save-retain-interval", "7"});
  CHECK(bad.exit == 1);
  CHECK(bad.rule == "save-schedule.retain-interval-multiple");
  CHECK(c_with({"--save", "/tmp/ckpt", "--save-interval", "5", "--save-retain-interval", "10"}).exit == 0);
}

TEST_CASE("save-schedule.params-interval-overlap-param-gather", "[part-c]") {
  const Args save = {"--save", "/tmp/ckpt", "--save-interval", "5", "--save-params-interval", "5",
                     "--use-distributed-optimizer"};
  auto bad = c_with(plus(save, {"--overlap-param-gather"}));
  CHECK(bad.exit == 1);
  CHECK(bad.rule == "save-schedule.params-interval-overlap-param-gather");
  CHECK(c_with(save).exit == 0);
  // Without --save the combination is not checked here.
  CHECK(c_with({"--save-params-interval", "5", "--use-distributed-optimizer", "--overlap-param-gather"}).rule !=
        "save-schedule.params-interval-overlap-param-gather");
}

// ---------------------------------------------------------------------------------------------------------
// mixed precision (seed 1209-1224)

TEST_CASE("precision.fp16-lm-cross-entropy-needs-fp16", "[part-c]") {
  auto bad = c_with({"--fp16-lm-cross-entropy"});
  CHECK(bad.exit == 1);
  CHECK(bad.rule == "precision.fp16-lm-cross-entropy-needs-fp16");
  CHECK(c_with({"--fp16-lm-cross-entropy", "--fp16"}).exit == 0);
  CHECK(c_with({"--fp16-lm-cross-entropy", "--bf16"}).rule == "precision.fp16-lm-cross-entropy-needs-fp16");
}

TEST_CASE("precision.fp32-residual-needs-half-precision", "[part-c]") {
  auto bad = c_with({"--fp32-residual-connection"});
  CHECK(bad.exit == 1);
  CHECK(bad.rule == "precision.fp32-residual-needs-half-precision");
  CHECK(c_with({"--fp32-residual-connection", "--bf16"}).exit == 0);
  CHECK(c_with({"--fp32-residual-connection", "--fp16"}).exit == 0);
}

TEST_CASE("grouped-gemm.compute-capability", "[part-c]") {
  mr::TargetEnv turing;
  turing.gpu_arch = "sm_75";
  auto bad = c_with({"--moe-grouped-gemm"}, {}, &turing);
  CHECK(bad.exit == 1);
  CHECK(bad.rule == "grouped-gemm.compute-capability");
  mr::TargetEnv ampere;
  ampere.gpu_arch = "sm_80";
  CHECK(c_with({"--moe-grouped-gemm"}, {}, &ampere).exit == 0);
  CHECK(c_with({}, {}, &turing).exit == 0);
}

TEST_CASE("no_persist_layer_norm follows the torch version", "[part-c]") {
  // seed arguments.py:1220-1224 validate_args: torch older than 1.11 has no persistent layer norm kernel
  mr::TargetEnv old_torch;
  old_torch.torch_version = "1.10.2";
  auto r = c_with({}, {}, &old_torch);
  REQUIRE(r.exit == 0);
  CHECK(r["no_persist_layer_norm"] == mr::Value(true));
  auto now = c_with({});
  REQUIRE(now.exit == 0);
  CHECK(now["no_persist_layer_norm"] == mr::Value(false));
}

// ---------------------------------------------------------------------------------------------------------
// The whole chain on the base config: part C's derived values survive the later parts.

TEST_CASE("base config through the whole chain keeps part C's values", "[part-c]") {
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
