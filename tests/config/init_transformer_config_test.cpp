// The init stage's TransformerConfig / ModelParallelConfig checks (lib/config/validate/init_transformer_config.cpp;
// recomputation and offloading: init_transformer_recompute_test.cpp): each rule fires on a config Megatron's
// validate_args accepts but its model construction refuses, next to a neighbour that passes.
#include <fstream>
#include <iterator>

#include "binary.h"
#include "init_support.h"

namespace {

using mrtest::InitCase;
using Env = std::map<std::string, std::string>;

// Tensor/context parallelism on a CPU target needs CUDA_DEVICE_MAX_CONNECTIONS=1 (validate_args).
Env ws(const char* n) { return {{"WORLD_SIZE", n}, {"CUDA_DEVICE_MAX_CONNECTIONS", "1"}}; }

const std::vector<InitCase> kCases = {
    // core_transformer_config_from_args: a Kitchen recipe, then a truthy --te-precision-config-file asserts there is
    // none yet (review diff33). The files are not read here (launch/program_inputs.h checks them at launch).
    {"init.transformer.quant-recipe-already-configured",
     {"--kitchen-config-file", "/nonexistent/k.yaml", "--te-precision-config-file", "/nonexistent/te.yaml"},
     {"--kitchen-config-file", "/nonexistent/k.yaml", "--te-precision-config-file", ""}, {},
     "--te-precision-config-file /nonexistent/te.yaml cannot be used with --kitchen-config-file /nonexistent/k.yaml"},
    {"init.transformer.quant-recipe-already-configured",
     {"--kitchen-recipe-number", "2", "--te-precision-config-file", "te.yaml"},
     {"--te-precision-config-file", "te.yaml"}, {},
     "--te-precision-config-file te.yaml cannot be used with --kitchen-recipe-number 2: both configure"},
    {"init.transformer.heads-divisible-by-tp", {"--tensor-model-parallel-size", "8"},
     {"--tensor-model-parallel-size", "4"}, ws("8"), "--num-attention-heads (4) must be a multiple of --tensor-model-parallel-size (8)"},
    {"init.transformer.query-groups-vs-tp",
     {"--hidden-size", "96", "--num-attention-heads", "6", "--tensor-model-parallel-size", "2", "--group-query-attention",
      "--num-query-groups", "3"},
     {"--hidden-size", "96", "--num-attention-heads", "6", "--tensor-model-parallel-size", "2", "--group-query-attention",
      "--num-query-groups", "6"},
     ws("2"), "--num-query-groups (3) must be a multiple or a divisor of --tensor-model-parallel-size (2)"},
    // A hybrid pattern without an attention layer ('*') builds no query groups (review parity31c).
    {"init.transformer.heads-divisible-by-query-groups",
     {"--hybrid-layer-pattern", "M*M-", "--group-query-attention", "--num-query-groups", "3"},
     {"--hybrid-layer-pattern", "M-M-", "--group-query-attention", "--num-query-groups", "3"}, {},
     "--num-attention-heads (4) must be a multiple of --num-query-groups (3)"},
    // With a 'D' layer in the hybrid pattern the variant is dsa: the gdn checks do not run (review parity31c).
    {"init.transformer.gated-delta-net", {"--experimental-attention-variant", "gdn"},
     {"--experimental-attention-variant", "gdn", "--hybrid-layer-pattern", "M+-D", "--disable-bias-linear",
      "--no-rope-fusion", "--position-embedding-type", "rope", "--kv-lora-rank", "32", "--qk-head-dim", "16",
      "--qk-pos-emb-head-dim", "8", "--v-head-dim", "16", "--q-lora-rank", "48", "--dsa-indexer-n-heads", "4",
      "--dsa-indexer-head-dim", "32", "--dsa-indexer-topk", "16"},
     {}, "needs --linear-attention-freq"},
    {"init.transformer.heads-divisible-by-query-groups", {"--group-query-attention", "--num-query-groups", "3"},
     {"--group-query-attention", "--num-query-groups", "2"}, {},
     "--num-attention-heads (4) must be a multiple of --num-query-groups (3): each query group's keys and values serve a "
     "whole number of query heads"},
    // TransformerConfig checks the parity review (today's harness over mutated corpus configs) found missing.
    {"init.transformer.gdp-householder-positive", {"--gdp-num-householder", "0"}, {"--gdp-num-householder", "1"}, {},
     "--gdp-num-householder must be positive (got 0)"},
    {"init.transformer.mhc-no-pipeline", {"--enable-mhc-connections", "--pipeline-model-parallel-size", "2"},
     {"--enable-mhc-connections"}, ws("2"), "--enable-mhc-connections does not support --pipeline-model-parallel-size above 1"},
    {"init.transformer.fp8-output-proj", {"--fp8-output-proj"},
     {"--fp8-output-proj", "--fp8-format", "e4m3", "--fp8-recipe", "mxfp8", "--bf16"}, {},
     "--fp8-output-proj must be used together with fp8 mode"},
    {"init.transformer.fp8-output-proj", {"--fp8-output-proj", "--fp8-format", "e4m3", "--bf16"},
     {"--fp8-output-proj", "--fp8-format", "e4m3", "--fp8-recipe", "mxfp8", "--bf16"}, {},
     "--fp8-output-proj needs --fp8-recipe mxfp8 (got delayed)"},
    {"init.transformer.batch-invariant-mode", {"--batch-invariant-mode"},
     {"--batch-invariant-mode", "--bf16", "--attention-backend", "flash", "--flash-attention-version", "3",
      "--attention-dropout", "0"},
     {}, "--batch-invariant-mode supports bf16 model parameters only"},
    {"init.transformer.batch-invariant-mode",
     {"--batch-invariant-mode", "--bf16", "--attention-backend", "flash", "--flash-attention-version", "2",
      "--attention-dropout", "0"},
     {"--batch-invariant-mode", "--bf16", "--attention-backend", "flash", "--flash-attention-version", "4",
      "--attention-dropout", "0"},
     {}, "needs --flash-attention-version 3 or 4 (got 2)"},
    {"init.transformer.nvls-kernels-need-inference-optimized", {"--inference-disable-triton-nvls-kernels"},
     {"--inference-disable-triton-nvls-kernels", "--transformer-impl", "inference_optimized", "--normalization",
      "RMSNorm", "--disable-bias-linear", "--no-bias-gelu-fusion"},
     {},
     "--inference-disable-triton-nvls-kernels is only supported with --transformer-impl inference_optimized"},
    // Batch-invariant MoE (transformer_config.py, the (num_moe_experts or 0) > 0 branch).
    {"init.transformer.batch-invariant-mode",
     {"--num-experts", "4", "--batch-invariant-mode", "--bf16", "--attention-backend", "flash",
      "--flash-attention-version", "3", "--attention-dropout", "0"},
     {"--num-experts", "4", "--batch-invariant-mode", "--bf16", "--attention-backend", "flash",
      "--flash-attention-version", "3", "--attention-dropout", "0", "--moe-token-dispatcher-type", "alltoall"},
     {}, "with MoE (--num-experts 4) needs --moe-token-dispatcher-type alltoall (got allgather)"},
    {"init.transformer.batch-invariant-mode",
     {"--num-experts", "4", "--batch-invariant-mode", "--bf16", "--attention-backend", "flash",
      "--flash-attention-version", "3", "--attention-dropout", "0", "--moe-token-dispatcher-type", "alltoall",
      "--moe-permute-fusion"},
     {"--num-experts", "4", "--batch-invariant-mode", "--bf16", "--attention-backend", "flash",
      "--flash-attention-version", "3", "--attention-dropout", "0", "--moe-token-dispatcher-type", "alltoall"},
     {}, "needs the unfused permute path: drop --moe-permute-fusion"},
    {"init.transformer.inference-optimized-layers", {"--transformer-impl", "inference_optimized"},
     {"--transformer-impl", "inference_optimized", "--normalization", "RMSNorm", "--disable-bias-linear",
      "--no-bias-gelu-fusion"},
     {}, "--transformer-impl inference_optimized needs --normalization RMSNorm (got LayerNorm)"},
    {"init.transformer.fp8-param-gather-needs-fp8", {"--use-distributed-optimizer", "--fp8-param-gather"},
     {"--use-distributed-optimizer", "--fp8-param-gather", "--bf16", "--fp8-format", "e4m3"}, {},
     "--fp8-param-gather must be used together with fp8 mode"},
    {"init.transformer.custom-recipe-quantizer-factory", {"--bf16", "--fp8-format", "hybrid", "--fp8-recipe", "custom"},
     {"--bf16", "--fp8-format", "hybrid", "--fp8-recipe", "custom", "--fp8-quantizer-factory", "pkg.mod.fn"}, {},
     "--fp8-recipe custom needs --fp8-quantizer-factory"},
    {"init.transformer.custom-recipe-quantizer-factory", {"--bf16", "--fp4-format", "e2m1", "--fp4-recipe", "custom"},
     {"--bf16", "--fp4-format", "e2m1", "--fp4-recipe", "custom", "--fp4-quantizer-factory", "pkg.mod.fn"}, {},
     "--fp4-recipe custom needs --fp4-quantizer-factory"},
    {"init.transformer.gated-delta-net", {"--experimental-attention-variant", "gdn"},
     {"--experimental-attention-variant", "gdn", "--linear-attention-freq", "2"}, {}, "gdn needs --linear-attention-freq"},
    {"init.transformer.gated-delta-net", {"--experimental-attention-variant", "gdn2", "--linear-num-key-heads", "3"},
     {"--experimental-attention-variant", "gdn2", "--linear-num-key-heads", "4"}, {},
     "needs --linear-num-value-heads (32) a multiple of --linear-num-key-heads (3)"},
    {"init.transformer.dsa-attention", {"--experimental-attention-variant", "dsa"},
     {"--experimental-attention-variant", "dsa", "--disable-bias-linear", "--no-bias-gelu-fusion"}, {},
     "requires add_bias_linear=False: pass --disable-bias-linear"},
    {"init.transformer.dsa-attention",
     {"--experimental-attention-variant", "dsa", "--disable-bias-linear", "--no-bias-gelu-fusion",
      "--position-embedding-type", "rope"},
     {"--experimental-attention-variant", "dsa", "--disable-bias-linear", "--no-bias-gelu-fusion",
      "--position-embedding-type", "rope", "--no-rope-fusion"},
     {}, "does not support RoPE fusion: pass --no-rope-fusion"},
    // A D layer in the hybrid pattern makes core_transformer_config_from_args pick the DSA variant.
    {"init.transformer.dsa-attention", {"--hybrid-layer-pattern", "MD"},
     {"--hybrid-layer-pattern", "MD", "--disable-bias-linear", "--no-bias-gelu-fusion"}, {},
     "DSA attention (--hybrid-layer-pattern MD) requires add_bias_linear=False"},
    {"init.transformer.mhc-exclusions", {"--enable-mhc-connections", "--mtp-num-layers", "1", "--position-embedding-type", "rope"},
     {"--enable-mhc-connections", "--position-embedding-type", "rope"}, {},
     "--enable-mhc-connections is not compatible with multi-token prediction (--mtp-num-layers 1"},
    {"init.transformer.mhc-exclusions",
     {"--enable-mhc-connections", "--recompute-granularity", "full", "--recompute-method", "uniform",
      "--recompute-num-layers", "1"},
     {"--enable-mhc-connections", "--recompute-granularity", "selective", "--recompute-modules", "mhc"}, {},
     "is not yet compatible with --recompute-granularity full"},
    {"init.transformer.inference-fuse-tp-communication", {"--inference-fuse-tp-communication"},
     {"--inference-fuse-tp-communication", "--transformer-impl", "inference_optimized", "--normalization", "RMSNorm",
      "--disable-bias-linear", "--no-bias-gelu-fusion"},
     {}, "--inference-fuse-tp-communication is only supported with --transformer-impl inference_optimized"},
    {"init.transformer.inference-optimized-layers",
     {"--transformer-impl", "inference_optimized", "--normalization", "RMSNorm", "--disable-bias-linear",
      "--no-bias-gelu-fusion", "--num-experts", "4"},
     {"--transformer-impl", "inference_optimized", "--normalization", "RMSNorm", "--disable-bias-linear",
      "--no-bias-gelu-fusion", "--num-experts", "4", "--moe-router-dtype", "fp32"},
     {}, "with MoE (--num-experts 4) needs --moe-router-dtype fp32 (got None)"},
    {"init.transformer.gated-delta-net", {"--experimental-attention-variant", "gdn2", "--linear-num-key-heads", "0"},
     {"--experimental-attention-variant", "gdn2", "--linear-num-key-heads", "4"}, {},
     "needs a non-zero --linear-num-key-heads (got 0: ZeroDivisionError)"},
    {"init.transformer.rope-type-needs-mla", {"--rope-type", "yarn"}, {"--rope-type", "rope"}, {},
     "--rope-type yarn needs --multi-latent-attention"},
    {"init.transformer.mtp-hsm-needs-two-layers", {"--mtp-hsm", "--mtp-num-layers", "1", "--position-embedding-type", "rope"},
     {"--mtp-hsm", "--mtp-num-layers", "2", "--position-embedding-type", "rope"}, {}, "--mtp-num-layers 2 or more (got 1)"},
    {"init.transformer.xavier-uniform", {"--init-method-xavier-uniform"}, {"--init-method-std", "0.01"}, {},
     "--init-method-xavier-uniform passes scaled_init_method=xavier_uniform_ to TransformerConfig"},
    {"init.transformer.one-activation", {"--swiglu", "--squared-relu"}, {"--squared-relu", "--no-bias-gelu-fusion"}, {},
     "--squared-relu cannot be combined with --swiglu"},
    {"init.transformer.bias-activation-fusion", {"--squared-relu"}, {"--squared-relu", "--no-bias-gelu-fusion"}, {},
     "not --squared-relu"},
    {"init.transformer.bias-activation-fusion", {"--glu-linear-offset", "1.0"},
     {"--glu-linear-offset", "1.0", "--quick-geglu"}, {}, "--glu-linear-offset 1.0 needs --quick-geglu"},
    {"init.transformer.fused-residual-rmsnorm", {"--fused-residual-rmsnorm"},
     {"--fused-residual-rmsnorm", "--normalization", "RMSNorm"}, {}, "needs --normalization RMSNorm (got LayerNorm)"},
    {"init.transformer.te-activation-func", {"--use-te-activation-func", "--squared-relu", "--no-bias-gelu-fusion"},
     {"--use-te-activation-func", "--no-bias-gelu-fusion"}, {}, "not --squared-relu"},
    {"init.transformer.swiglu-clamp", {"--swiglu", "--activation-func-clamp-value", "7.0"},
     {"--swiglu", "--activation-func-clamp-value", "7.0", "--num-experts", "4"}, {}, "only supported in MoE models"},
    {"init.transformer.fp8-bf16-layers", {"--bf16", "--fp8-format", "e4m3", "--first-last-layers-bf16"},
     {"--bf16", "--fp8-format", "e4m3", "--first-last-layers-bf16", "--fp8-recipe", "tensorwise"}, {},
     "--first-last-layers-bf16 does not work with --fp8-recipe delayed"},
    {"init.transformer.fp8-bf16-layers",
     {"--bf16", "--fp8-format", "e4m3", "--first-last-layers-bf16", "--fp8-recipe", "tensorwise",
      "--num-layers-at-start-in-bf16", "3"},
     {"--bf16", "--fp8-format", "e4m3", "--first-last-layers-bf16", "--fp8-recipe", "tensorwise",
      "--num-layers-at-start-in-bf16", "2"},
     {}, "--num-layers-at-start-in-bf16 (3) must be between 0 and the layers per pipeline stage (2)"},
    {"init.transformer.mla-rotary-interleaved",
     {"--multi-latent-attention", "--position-embedding-type", "rope", "--rotary-interleaved"},
     {"--multi-latent-attention", "--position-embedding-type", "rope"}, {}, "--rotary-interleaved does not work"},
    {"init.transformer.mla-rope-fusion-needs-yarn",
     {"--multi-latent-attention", "--position-embedding-type", "rope", "--rope-type", "rope"},
     {"--multi-latent-attention", "--position-embedding-type", "rope", "--rope-type", "rope", "--no-rope-fusion"}, {},
     "needs --rope-type yarn (got --rope-type rope"},
    {"init.transformer.no-rope-freq-layers", {"--position-embedding-type", "rope", "--no-rope-freq", "3"},
     {"--position-embedding-type", "rope", "--no-rope-freq", "2"}, {}, "--no-rope-freq 3 must divide --num-layers (2)"},
    {"init.transformer.no-rope-freq-layers", {"--position-embedding-type", "rope", "--no-rope-freq", "[0,0,1]"},
     {"--position-embedding-type", "rope", "--no-rope-freq", "[0,1]"}, {}, "has 3 entries but the model has 2 layers"},
    {"init.transformer.cp-comm-type-per-layer", {"--context-parallel-size", "2", "--cp-comm-type", "p2p", "p2p", "p2p"},
     {"--context-parallel-size", "2", "--cp-comm-type", "p2p", "a2a"}, ws("2"), "--cp-comm-type has 3 values"},
    {"init.model-parallel.defer-embedding-wgrad", {"--defer-embedding-wgrad-compute"},
     {"--defer-embedding-wgrad-compute", "--pipeline-model-parallel-size", "2"}, ws("2"),
     "needs pipeline parallelism (--pipeline-model-parallel-size is 1)"},
    {"init.model-parallel.p2p-warmup-flush",
     {"--pipeline-model-parallel-size", "2", "--num-layers", "4", "--overlap-p2p-communication-warmup-flush"},
     {"--pipeline-model-parallel-size", "2", "--num-layers", "4", "--num-layers-per-virtual-pipeline-stage", "1",
      "--overlap-p2p-communication-warmup-flush"},
     ws("2"), "--overlap-p2p-communication-warmup-flush needs P2P communication overlap"},
};

}  // namespace

TEST_CASE("init stage, TransformerConfig: each rule fires next to a neighbour that passes", "[init]") {
  mrtest::check_init_table(kCases, "validate/init_transformer_config.cpp");
}

TEST_CASE("init stage: --dry-run and check refuse a model Megatron would fail to build, naming the stage",
          "[init][cli]") {
  const std::string cfg = std::string(MR_SOURCE_DIR) + "/configs/default.yaml";
  const std::string env = "CUDA_DEVICE_MAX_CONNECTIONS=1";
  // 4 attention heads cannot be split over 8 tensor-parallel ranks; validate_args does not check it.
  auto dry = mrtest::megatron_run("--dry-run --world-size 8 --config '" + cfg + "' --tensor-model-parallel-size 8", env);
  CHECK(dry.exit == 1);
  CHECK(dry.all().find("error[init.transformer.heads-divisible-by-tp]: Megatron would fail at initialisation "
                       "(TransformerConfig): --num-attention-heads (4)") != std::string::npos);
  auto dry_json = mrtest::megatron_run(
      "--dry-run --format json --world-size 8 --config '" + cfg + "' --tensor-model-parallel-size 8", env);
  CHECK(dry_json.exit == 1);
  CHECK(dry_json.out.find("\"init.transformer.heads-divisible-by-tp\"") != std::string::npos);
  CHECK(dry_json.out.find("\"stage\": \"init\"") != std::string::npos);
  // check: the same config as a file; with 4-way tensor parallelism it passes.
  std::string text;
  {
    std::ifstream in(cfg);
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  const std::string bad = mrtest::write_file("init-tp8.yaml", text + "--tensor-model-parallel-size: 8\n", "init");
  const std::string good = mrtest::write_file("init-tp4.yaml", text + "--tensor-model-parallel-size: 4\n", "init");
  auto json = mrtest::megatron_run("check --format json --world-size 8 '" + bad + "' '" + good + "'", env);
  CHECK(json.exit == 1);
  CHECK(json.out.find("\"init.transformer.heads-divisible-by-tp\"") != std::string::npos);
  CHECK(json.out.find("\"stage\": \"init\"") != std::string::npos);
  auto ok = mrtest::megatron_run("check --world-size 8 '" + good + "'", env);
  CHECK(ok.exit == 0);
}
