// The init stage's MoE checks (lib/config/validate/init_moe.cpp): each rule fires on an MoE config Megatron's
// validate_args accepts but TransformerConfig refuses, next to a neighbour that passes.
#include "init_support.h"

namespace {

using mrtest::InitCase;
using Env = std::map<std::string, std::string>;

std::vector<std::string> moe(std::vector<std::string> extra) {
  std::vector<std::string> a = {"--num-experts", "4"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

const std::vector<InitCase> kCases = {
    {"init.moe.grouped-tensor-needs-grouped-gemm", moe({"--moe-use-grouped-tensor"}),
     moe({"--moe-use-grouped-tensor", "--moe-grouped-gemm"}), {}, "--moe-use-grouped-tensor needs --moe-grouped-gemm"},
    {"init.moe.single-grouped-needs-grouped-gemm", moe({"--moe-single-grouped-weight"}),
     moe({"--moe-single-grouped-weight", "--moe-grouped-gemm"}), {}, "--moe-single-grouped-weight requires --moe-grouped-gemm"},
    {"init.moe.rank-capacity-factor-backend", moe({"--moe-expert-rank-capacity-factor", "1.5"}),
     moe({"--moe-expert-rank-capacity-factor", "1.5", "--moe-flex-dispatcher-backend", "hybridep"}), {},
     "--moe-expert-rank-capacity-factor requires --moe-flex-dispatcher-backend hybridep or ncclep (got deepep)"},
    {"init.moe.ffn-hidden-size-needs-experts", {"--moe-ffn-hidden-size", "128"}, moe({"--moe-ffn-hidden-size", "128"}),
     {}, "--moe-ffn-hidden-size 128 is set but --num-experts is not"},
    {"init.moe.flex-dispatcher-backend", moe({"--moe-enable-deepep"}),
     moe({"--moe-token-dispatcher-type", "alltoall"}), {}, "--moe-enable-deepep needs --moe-token-dispatcher-type flex"},
    {"init.moe.flex-dispatcher-backend", moe({"--moe-flex-dispatcher-backend", "ncclep"}),
     moe({"--moe-flex-dispatcher-backend", "hybridep"}), {}, "ncclep needs --moe-token-dispatcher-type flex"},
    {"init.moe.shared-expert-overlap-dispatcher",
     moe({"--moe-shared-expert-intermediate-size", "64", "--moe-shared-expert-overlap"}),
     moe({"--moe-shared-expert-intermediate-size", "64", "--moe-shared-expert-overlap", "--moe-token-dispatcher-type",
          "alltoall"}),
     {}, "needs --moe-token-dispatcher-type alltoall or flex (got allgather)"},
    {"init.moe.capacity-factor-load-balancing",
     moe({"--moe-token-dispatcher-type", "alltoall", "--moe-expert-capacity-factor", "1.0",
          "--moe-router-load-balancing-type", "sinkhorn"}),
     moe({"--moe-token-dispatcher-type", "alltoall", "--moe-expert-capacity-factor", "1.0"}), {},
     "--moe-router-load-balancing-type sinkhorn"},
    // A negative factor means no capacity, but TransformerConfig checks the load balancing before it drops it.
    {"init.moe.capacity-factor-load-balancing",
     moe({"--moe-token-dispatcher-type", "alltoall", "--moe-expert-capacity-factor", "-1.0",
          "--moe-router-load-balancing-type", "sinkhorn"}),
     moe({"--moe-token-dispatcher-type", "alltoall", "--moe-router-load-balancing-type", "sinkhorn"}), {},
     "--moe-expert-capacity-factor -1.0 works only with"},
    {"init.moe.pad-needs-capacity-factor",
     moe({"--moe-token-dispatcher-type", "alltoall", "--moe-pad-expert-input-to-capacity"}),
     moe({"--moe-token-dispatcher-type", "alltoall", "--moe-pad-expert-input-to-capacity", "--moe-expert-capacity-factor",
          "1.0"}),
     {}, "needs --moe-expert-capacity-factor 0 or more (got None)"},
    {"init.moe.bias-needs-etp-1", moe({"--tensor-model-parallel-size", "2"}),
     moe({"--tensor-model-parallel-size", "2", "--expert-tensor-parallel-size", "1"}),
     {{"WORLD_SIZE", "2"}, {"CUDA_DEVICE_MAX_CONNECTIONS", "1"}}, "expert tensor-parallel size of 1 (got 2)"},
    {"init.moe.expert-bias-score-function", moe({"--moe-router-enable-expert-bias"}),
     moe({"--moe-router-enable-expert-bias", "--moe-router-score-function", "sigmoid"}), {}, "(got softmax)"},
    {"init.moe.router-padding-quantization", moe({"--moe-router-padding-for-quantization"}),
     moe({"--moe-router-padding-for-quantization", "--fp8-format", "e4m3", "--bf16", "--moe-token-dispatcher-type",
          "alltoall"}),
     {}, "--moe-router-padding-for-quantization needs --fp8-format or --fp4-format"},
    {"init.moe.topk-1-needs-pre-softmax", moe({"--moe-router-topk", "1"}),
     moe({"--moe-router-topk", "1", "--moe-router-pre-softmax"}), {}, "needs --moe-router-pre-softmax"},
    {"init.moe.group-limited-routing", moe({"--moe-router-group-topk", "1"}),
     moe({"--moe-router-group-topk", "1", "--moe-router-num-groups", "2"}), {}, "needs --moe-router-num-groups"},
    {"init.moe.group-limited-routing", moe({"--moe-router-group-topk", "1", "--moe-router-num-groups", "3"}),
     moe({"--moe-router-group-topk", "2", "--moe-router-num-groups", "4"}), {},
     "--num-experts (4) must be divisible by --moe-router-num-groups (3)"},
    {"init.moe.ep-comm-overlap", moe({"--bf16", "--moe-token-dispatcher-type", "alltoall",
                                      "--overlap-moe-expert-parallel-comm"}),
     moe({"--bf16", "--moe-token-dispatcher-type", "alltoall", "--overlap-moe-expert-parallel-comm",
          "--expert-model-parallel-size", "2"}),
     {{"WORLD_SIZE", "2"}}, "needs --expert-model-parallel-size > 1 (got 1)"},
    {"init.moe.ep-comm-overlap",
     moe({"--bf16", "--expert-model-parallel-size", "2", "--overlap-moe-expert-parallel-comm"}),
     moe({"--bf16", "--expert-model-parallel-size", "2", "--overlap-moe-expert-parallel-comm",
          "--moe-token-dispatcher-type", "flex"}),
     {{"WORLD_SIZE", "2"}}, "needs --moe-token-dispatcher-type alltoall or flex (got allgather)"},
    {"init.moe.allgather-variable-seq-lengths",
     moe({"--sequence-packing-scheduler", "dp_balanced", "--calculate-per-token-loss"}),
     moe({"--sequence-packing-scheduler", "dp_balanced", "--calculate-per-token-loss", "--moe-token-dispatcher-type",
          "alltoall"}),
     {}, "allgather does not support variable sequence lengths"},
};

}  // namespace

TEST_CASE("init stage, MoE: each rule fires next to a neighbour that passes", "[init]") {
  mrtest::check_init_table(kCases, "validate/init_moe.cpp");
}
