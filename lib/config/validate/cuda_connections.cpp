// CUDA_DEVICE_MAX_CONNECTIONS with tensor/context parallelism before Blackwell, and FSDP's high-priority
// communication streams (seed arguments.py 1313-1350, validate_args).
#include "config/validate/section_functions.h"

namespace mr::section {

MR_WARNING(kFsdpWithTpCp, "cuda-connections.fsdp-with-tp-cp",
           "TP/CP with FSDP before Blackwell: the two prefer different CUDA_DEVICE_MAX_CONNECTIONS settings.");
MR_WARNING(kEpOverlapWithTpCp, "cuda-connections.ep-overlap-with-tp-cp",
           "TP/CP with --overlap-moe-expert-parallel-comm before Blackwell: they prefer different "
           "CUDA_DEVICE_MAX_CONNECTIONS settings.");
MR_RULE(kMaxConnectionsOne, "cuda-connections.max-connections-one",
        "Tensor or context parallelism before Blackwell needs CUDA_DEVICE_MAX_CONNECTIONS=1.");

void cuda_max_connections(Context& ctx) {
  // From Blackwell (compute capability 10) on, the single-connection requirement is gone; a target without a
  // GPU (launching on a CPU machine) has no CUDA connections at all.
  if (ctx.env().no_gpu()) return;
  if (!((ctx.i("tensor_model_parallel_size") > 1 || ctx.i("context_parallel_size") > 1) && ctx.arch_major() < 10))
    return;
  if (ctx.on("use_torch_fsdp2") || ctx.on("use_megatron_fsdp")) {
    const std::string impl = ctx.on("use_torch_fsdp2") ? "--use-torch-fsdp2" : "--use-megatron-fsdp";
    ctx.warn(kFsdpWithTpCp,
             "tensor/context parallelism together with " + impl +
                 " is not recommended: sequence parallelism wants CUDA_DEVICE_MAX_CONNECTIONS=1 while FSDP "
                 "overlaps better with more connections",
             {"tensor_model_parallel_size", "context_parallel_size",
              ctx.on("use_torch_fsdp2") ? "use_torch_fsdp2" : "use_megatron_fsdp"});
  } else if (ctx.on("overlap_moe_expert_parallel_comm")) {
    ctx.warn(kEpOverlapWithTpCp,
             "on Hopper and older GPUs, tensor/context parallelism wants CUDA_DEVICE_MAX_CONNECTIONS=1 while "
             "--overlap-moe-expert-parallel-comm wants more connections; set it to 1 or 32 depending on which "
             "to favour",
             {"tensor_model_parallel_size", "context_parallel_size", "overlap_moe_expert_parallel_comm"});
  } else {
    const auto v = ctx.env_var("CUDA_DEVICE_MAX_CONNECTIONS");
    ctx.require(v && *v == "1", kMaxConnectionsOne,
                "--tensor-model-parallel-size " + show(ctx, "tensor_model_parallel_size") +
                    " / --context-parallel-size " + show(ctx, "context_parallel_size") +
                    " need the environment variable CUDA_DEVICE_MAX_CONNECTIONS=1 on " + ctx.env().gpu_arch +
                    " (before Blackwell); it is " + (v ? "'" + *v + "'" : "unset") +
                    ". Set it where the job runs (export CUDA_DEVICE_MAX_CONNECTIONS=1, or ENV_VARS in the config); "
                    "for a command that starts nothing (check, --dry-run, topology, params), describe the cluster "
                    "instead: --target-env FILE with `env: {CUDA_DEVICE_MAX_CONNECTIONS: '1'}`, or --target-gpu-arch "
                    "sm_100 or newer (Blackwell needs none)",
                {"tensor_model_parallel_size", "context_parallel_size"});
  }
}

void fsdp_high_priority_streams(Context& ctx) {
  // Operator precedence as in the seed: torch FSDP2 always, Megatron-FSDP only from Blackwell on.
  if (!(ctx.on("use_torch_fsdp2") || (ctx.on("use_megatron_fsdp") && !ctx.env().no_gpu() && ctx.arch_major() >= 10))) return;
  if (!list_has(ctx, "high_priority_stream_groups", "dp_cp"))
    list_append(ctx, "high_priority_stream_groups", "dp_cp", "FSDP communication on high-priority streams");
  if (ctx.i("expert_model_parallel_size") > 1 && !list_has(ctx, "high_priority_stream_groups", "ep_dp"))
    list_append(ctx, "high_priority_stream_groups", "ep_dp", "FSDP expert communication on high-priority streams");
}

}  // namespace mr::section
