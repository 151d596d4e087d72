// The init stage's TransformerConfig checks of recomputation, CPU and fine-grained activation offloading, the CUDA
// graphs that capture them and GTP rematerialization (lib/config/validate/init_transformer_recompute.cpp): each rule
// fires on a config Megatron's validate_args accepts but its model construction refuses, next to a neighbour that
// passes.
#include "init_support.h"

namespace {

using mrtest::InitCase;
using Env = std::map<std::string, std::string>;

// Tensor/context parallelism on a CPU target needs CUDA_DEVICE_MAX_CONNECTIONS=1 (validate_args).
Env ws(const char* n) { return {{"WORLD_SIZE", n}, {"CUDA_DEVICE_MAX_CONNECTIONS", "1"}}; }

const std::vector<InitCase> kCases = {
    {"init.transformer.cuda-graph-moe-modules", {"--cuda-graph-impl", "transformer_engine", "--cuda-graph-modules", "moe"},
     {"--cuda-graph-impl", "transformer_engine", "--cuda-graph-modules", "attn"}, {},
     "captures --cuda-graph-modules moe / moe_router only in an MoE model"},
    {"init.transformer.cuda-graph-moe-modules", {"--cuda-graph-impl", "local", "--cuda-graph-modules", "moe_router"},
     {"--cuda-graph-impl", "local", "--cuda-graph-modules", "attn"}, {}, "only in an MoE model (--num-experts None)"},
    {"init.transformer.cuda-graph-moe-modules",
     {"--num-experts", "4", "--cuda-graph-impl", "local", "--cuda-graph-modules", "moe"},
     {"--num-experts", "4", "--cuda-graph-impl", "local", "--cuda-graph-modules", "moe", "--moe-token-dispatcher-type",
      "alltoall", "--moe-expert-capacity-factor", "1.0", "--moe-pad-expert-input-to-capacity"},
     {}, "captures --cuda-graph-modules moe only with drop-and-pad MoE"},
    {"init.transformer.cuda-graph-full-recompute",
     {"--cuda-graph-impl", "transformer_engine", "--recompute-granularity", "full", "--recompute-method", "uniform",
      "--recompute-num-layers", "1"},
     {"--cuda-graph-impl", "full_iteration", "--recompute-granularity", "full", "--recompute-method", "uniform",
      "--recompute-num-layers", "1"},
     {}, "--cuda-graph-impl transformer_engine does not support --recompute-granularity full"},
    {"init.transformer.cuda-graph-cpu-offloading", {"--cuda-graph-impl", "local", "--cpu-offloading-num-layers", "1"},
     {"--cuda-graph-impl", "full_iteration", "--cpu-offloading-num-layers", "1"}, {},
     "--cuda-graph-impl local is not supported with CPU offloading"},
    // The TransformerConfig CUDA-graph checks the parity review parity31c found missing (finding 3).
    {"init.transformer.cuda-graph-moe-modules",
     {"--num-experts", "4", "--cuda-graph-impl", "transformer_engine", "--cuda-graph-modules", "moe_preprocess"},
     {"--num-experts", "4", "--cuda-graph-impl", "transformer_engine", "--cuda-graph-modules", "moe_router",
      "moe_preprocess"},
     {}, "captures --cuda-graph-modules moe_preprocess only together with moe_router"},
    {"init.transformer.cuda-graph-moe-modules", {"--num-experts", "4", "--cuda-graph-impl", "local", "--cuda-graph-modules", "mlp"},
     {"--num-experts", "4", "--cuda-graph-impl", "local", "--cuda-graph-modules", "mlp", "--moe-layer-freq", "2"}, {},
     "captures --cuda-graph-modules mlp only in dense layers, and every layer is MoE (--moe-layer-freq 1)"},
    // The local implementation adds moe_preprocess to moe_router; alltoall with a capacity factor syncs there.
    {"init.transformer.cuda-graph-moe-modules",
     {"--num-experts", "4", "--cuda-graph-impl", "local", "--cuda-graph-modules", "moe_router",
      "--moe-token-dispatcher-type", "alltoall", "--moe-expert-capacity-factor", "1.0"},
     {"--num-experts", "4", "--cuda-graph-impl", "local", "--cuda-graph-modules", "moe_router",
      "--moe-token-dispatcher-type", "alltoall"},
     {}, "cannot capture --cuda-graph-modules moe_preprocess with the alltoall dispatcher and --moe-expert-capacity-factor 1.0"},
    {"init.transformer.cuda-graph-selective-recompute", {"--cuda-graph-impl", "local", "--recompute-granularity", "selective"},
     {"--cuda-graph-impl", "local", "--recompute-granularity", "selective", "--attention-dropout", "0"}, {},
     "with selective recomputation of core_attn (the default --recompute-modules) recomputes core_attn inside a "
     "graphed attention (it captures the whole layer: no --cuda-graph-modules), which does not support "
     "--attention-dropout 0.1"},
    {"init.transformer.cuda-graph-selective-recompute",
     {"--cuda-graph-impl", "transformer_engine", "--cuda-graph-modules", "mlp", "--recompute-granularity", "selective",
      "--recompute-modules", "mlp"},
     {"--cuda-graph-impl", "transformer_engine", "--cuda-graph-modules", "attn", "--recompute-granularity", "selective",
      "--recompute-modules", "mlp"},
     {}, "recomputes mlp inside a graphed MLP"},
    {"init.transformer.cuda-graph-selective-recompute",
     {"--num-experts", "4", "--cuda-graph-impl", "transformer_engine", "--cuda-graph-modules", "moe_router",
      "--recompute-granularity", "selective", "--recompute-modules", "moe"},
     {"--num-experts", "4", "--cuda-graph-impl", "local", "--cuda-graph-modules", "moe_router",
      "--recompute-granularity", "selective", "--recompute-modules", "moe"},
     {}, "cannot recompute moe inside the captured --cuda-graph-modules moe_router"},
    // GTP + local graphs of the shared experts under fp8 (TC:2908-2926); the neighbour graphs only the attention.
    {"init.transformer.cuda-graph-selective-recompute",
     {"--tensor-parallel-num-weight-shards", "2", "--num-experts", "4", "--moe-shared-expert-intermediate-size", "64",
      "--cuda-graph-impl", "local", "--cuda-graph-modules", "moe_router", "--recompute-granularity", "selective",
      "--recompute-modules", "shared_experts", "--fp8-format", "hybrid", "--bf16"},
     {"--tensor-parallel-num-weight-shards", "2", "--num-experts", "4", "--moe-shared-expert-intermediate-size", "64",
      "--cuda-graph-impl", "local", "--cuda-graph-modules", "attn", "--recompute-granularity", "selective",
      "--recompute-modules", "shared_experts", "--fp8-format", "hybrid", "--bf16", "--attention-dropout", "0"},
     ws("2"), "recomputes shared_experts inside the graphs (it captures --cuda-graph-modules "
     "['CudaGraphModule.moe_router']) under --fp8-format hybrid with GTP (--tensor-parallel-num-weight-shards 2)"},
    {"init.transformer.cuda-graph-activation-offloading",
     {"--fine-grained-activation-offloading", "--offload-modules", "core_attn", "--cuda-graph-impl", "local"},
     {"--fine-grained-activation-offloading", "--offload-modules", "core_attn", "--cuda-graph-impl", "transformer_engine"},
     {{"NVTE_CPU_OFFLOAD_V1", "1"}}, "offloads only expert_fc1, moe_act or fused_group_mlp, not core_attn (--offload-modules core_attn)"},
    {"init.transformer.cuda-graph-activation-offloading",
     {"--fine-grained-activation-offloading", "--offload-modules", "core_attn", "--cuda-graph-impl", "transformer_engine",
      "--cuda-graph-warmup-steps", "0"},
     {"--fine-grained-activation-offloading", "--offload-modules", "core_attn", "--cuda-graph-impl", "transformer_engine",
      "--cuda-graph-warmup-steps", "1"},
     {{"NVTE_CPU_OFFLOAD_V1", "1"}}, "needs --cuda-graph-warmup-steps above 0 (got 0)"},
    {"init.transformer.cuda-graph-activation-offloading",
     {"--fine-grained-activation-offloading", "--offload-modules", "core_attn", "--cuda-graph-impl", "full_iteration"},
     {"--fine-grained-activation-offloading", "--offload-modules", "core_attn", "--cuda-graph-impl", "full_iteration",
      "--fine-grained-offloading-max-inflight-offloads", "0"},
     {{"NVTE_CPU_OFFLOAD_V1", "1"}}, "needs --fine-grained-offloading-max-inflight-offloads 0 or more (got None)"},
    {"init.transformer.cpu-offloading", {"--cpu-offloading-num-layers", "2"}, {"--cpu-offloading-num-layers", "1"}, {},
     "--cpu-offloading-num-layers (2) must be less than --num-layers (2)"},
    {"init.transformer.recompute-settings", {"--recompute-granularity", "full"},
     {"--recompute-granularity", "full", "--recompute-method", "uniform", "--recompute-num-layers", "1"}, {},
     "--recompute-granularity full needs --recompute-method"},
    {"init.transformer.recompute-settings", {"--recompute-granularity", "selective", "--recompute-num-layers", "1"},
     {"--recompute-granularity", "selective"}, {}, "selective takes no --recompute-num-layers (got 1)"},
    {"init.transformer.recompute-modules", {"--recompute-granularity", "selective", "--recompute-modules", "moe_act"},
     {"--recompute-granularity", "selective", "--recompute-modules", "core_attn"}, {}, "moe_act needs --moe-grouped-gemm"},
    {"init.transformer.recompute-modules", {"--recompute-granularity", "selective", "--recompute-modules", "mhc"},
     {"--recompute-granularity", "selective", "--recompute-modules", "mhc", "--enable-mhc-connections"}, {},
     "--recompute-modules mhc needs --enable-mhc-connections"},
    // Module names and preconditions the parity review (parity33) found unmodelled. With the full granularity the
    // names are not checked, as in TransformerConfig.
    {"init.transformer.recompute-modules",
     {"--recompute-granularity", "selective", "--recompute-modules", "core_attn", "core_atn", "core_atn"},
     {"--recompute-granularity", "full", "--recompute-method", "uniform", "--recompute-num-layers", "1",
      "--recompute-modules", "core_atn"},
     {}, "--recompute-modules core_atn: not a module selective recomputation knows (core_attn moe_act"},
    {"init.transformer.recompute-modules",
     {"--recompute-granularity", "selective", "--recompute-modules", "gdn_norm_out"},
     {"--recompute-granularity", "selective", "--recompute-modules", "gdn_norm_out", "--experimental-attention-variant",
      "gdn2", "--linear-num-key-heads", "4"},
     {}, "--recompute-modules gdn_norm_out needs --experimental-attention-variant gdn or gdn2 (got None)"},
    {"init.transformer.fine-grained-offloading",
     {"--fine-grained-activation-offloading", "--offload-modules", "core_attn", "--cpu-offloading-num-layers", "1"},
     {"--fine-grained-activation-offloading", "--offload-modules", "core_attn"}, {{"NVTE_CPU_OFFLOAD_V1", "1"}},
     "--fine-grained-activation-offloading cannot be used with CPU offloading (--cpu-offloading-num-layers 1)"},
    {"init.transformer.fine-grained-offloading",
     {"--fine-grained-activation-offloading", "--offload-modules", "core_attn", "--activation-offload-fraction", "1.5"},
     {"--fine-grained-activation-offloading", "--offload-modules", "core_attn", "--activation-offload-fraction", "0.5"},
     {{"NVTE_CPU_OFFLOAD_V1", "1"}}, "needs --activation-offload-fraction between 0 and 1 (got 1.5)"},
    {"init.transformer.fine-grained-offloading",
     {"--fine-grained-activation-offloading", "--offload-modules", "core_attn", "--min-offloaded-tensor-size", "-1"},
     {"--fine-grained-activation-offloading", "--offload-modules", "core_attn", "--min-offloaded-tensor-size", "0"},
     {{"NVTE_CPU_OFFLOAD_V1", "1"}}, "needs --min-offloaded-tensor-size 0 or more (got -1)"},
    {"init.transformer.fine-grained-offloading",
     {"--fine-grained-activation-offloading", "--offload-modules", "core_attn", "--delta-offload-bytes-across-pp-ranks",
      "-1"},
     {"--fine-grained-activation-offloading", "--offload-modules", "core_attn", "--delta-offload-bytes-across-pp-ranks",
      "0"},
     {{"NVTE_CPU_OFFLOAD_V1", "1"}}, "needs --delta-offload-bytes-across-pp-ranks 0 or more (got -1)"},
    {"init.transformer.offload-modules", {"--fine-grained-activation-offloading"},
     {"--fine-grained-activation-offloading", "--offload-modules", "attn_norm", "qkv_linear", "mlp_norm"},
     {{"NVTE_CPU_OFFLOAD_V1", "1"}}, "--fine-grained-activation-offloading needs --offload-modules (one or more of"},
    {"init.transformer.offload-modules",
     {"--fine-grained-activation-offloading", "--offload-modules", "core_attn", "mlp"},
     {"--fine-grained-activation-offloading", "--offload-modules", "core_attn", "mlp_norm"},
     {{"NVTE_CPU_OFFLOAD_V1", "1"}}, "cannot offload --offload-modules mlp: not a module it knows (attn_norm"},
    {"init.transformer.offload-modules", {"--fine-grained-activation-offloading", "--offload-modules", "attn_proj"},
     {"--fine-grained-activation-offloading", "--offload-modules", "attn_proj", "core_attn"},
     {{"NVTE_CPU_OFFLOAD_V1", "1"}}, "cannot offload attn_proj without core_attn (--offload-modules attn_proj)"},
    {"init.transformer.offload-modules",
     {"--fine-grained-activation-offloading", "--offload-modules", "gdp_qkv", "--recompute-granularity", "selective",
      "--recompute-modules", "gdp_in_proj"},
     {"--fine-grained-activation-offloading", "--offload-modules", "gdp_qkv", "--recompute-granularity", "selective",
      "--recompute-modules", "gdp_qkv"},
     {{"NVTE_CPU_OFFLOAD_V1", "1"}},
     "cannot offload gdp_qkv (--offload-modules gdp_qkv) while selective recomputation recomputes gdp_in_proj"},
    // --moe-layer-recompute makes the granularity selective and adds moe before the offloading checks.
    {"init.transformer.offload-modules",
     {"--num-experts", "4", "--fine-grained-activation-offloading", "--offload-modules", "expert_fc1",
      "--moe-layer-recompute"},
     {"--num-experts", "4", "--fine-grained-activation-offloading", "--offload-modules", "expert_fc1"},
     {{"NVTE_CPU_OFFLOAD_V1", "1"}},
     "cannot offload expert_fc1 inside an MoE layer that selective recomputation recomputes whole (moe from "
     "--moe-layer-recompute)"},
    {"init.transformer.offload-modules",
     {"--num-experts", "4", "--moe-grouped-gemm", "--fine-grained-activation-offloading", "--offload-modules",
      "fused_group_mlp"},
     {"--num-experts", "4", "--moe-grouped-gemm", "--fine-grained-activation-offloading", "--offload-modules",
      "fused_group_mlp", "--use-transformer-engine-op-fuser"},
     {{"NVTE_CPU_OFFLOAD_V1", "1"}}, "offloads fused_group_mlp only with --use-transformer-engine-op-fuser"},
    {"init.transformer.offload-modules",
     {"--num-experts", "4", "--moe-grouped-gemm", "--fine-grained-activation-offloading", "--offload-modules",
      "fused_group_mlp", "moe_act", "--use-transformer-engine-op-fuser"},
     {"--num-experts", "4", "--moe-grouped-gemm", "--fine-grained-activation-offloading", "--offload-modules",
      "expert_fc1", "moe_act", "--use-transformer-engine-op-fuser"},
     {{"NVTE_CPU_OFFLOAD_V1", "1"}},
     "with fused_group_mlp: drop moe_act from --offload-modules fused_group_mlp moe_act"},
    {"init.transformer.gtp-remat-opt-in-modules", {"--gtp-remat-opt-in-modules", "bogus"},
     {"--gtp-remat-opt-in-modules", "moe_latent_proj"}, {},
     "--gtp-remat-opt-in-modules bogus: not a module GTP rematerialization can opt in (only moe_latent_proj)"},
};

}  // namespace

TEST_CASE("init stage, TransformerConfig recomputation and offloading: each rule fires next to a neighbour that passes",
          "[init]") {
  mrtest::check_init_table(kCases, "validate/init_transformer_recompute.cpp");
}

TEST_CASE("init stage, TransformerConfig: the module-name rules escape the words they echo", "[init]") {
  // A newline in a word would start a line of its own in `check --format text` (review diff33 #3).
  const std::string w = "x\n::error::inj";
  const std::vector<mrtest::InitCase> cases = {
      {"init.transformer.recompute-modules", {"--recompute-granularity", "selective", "--recompute-modules", w}, {}, {},
       "--recompute-modules x\\x0a::error::inj: not a module"},
      {"init.transformer.gtp-remat-opt-in-modules", {"--gtp-remat-opt-in-modules", w}, {}, {},
       "--gtp-remat-opt-in-modules x\\x0a::error::inj: not a module"},
      {"init.transformer.offload-modules", {"--fine-grained-activation-offloading", "--offload-modules", "core_attn", w},
       {}, {{"NVTE_CPU_OFFLOAD_V1", "1"}}, "cannot offload --offload-modules x\\x0a::error::inj: not a module"},
  };
  for (const mrtest::InitCase& c : cases) {
    std::map<std::string, std::string> env = {{"WORLD_SIZE", "1"}};
    env.insert(c.env.begin(), c.env.end());
    mrtest::Run r = mrtest::run(mrtest::with(c.bad), env);
    INFO(r.rule << ": " << r.message);
    CHECK(r.rule == c.rule);
    CHECK(r.message.find('\n') == std::string::npos);
    CHECK(r.message.find(c.fragment) != std::string::npos);
    for (const mr::Diagnostic& d : r.out.diagnostics) CHECK(d.message.find('\n') == std::string::npos);
  }
}
