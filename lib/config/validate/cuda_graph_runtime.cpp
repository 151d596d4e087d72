// CUDA graphs at run time (seed arguments.py 1881-1910): the TE RNG tracker, the allocator / NCCL registration
// environment for TE graphs, full-iteration graphs without per-module graphs, and the shortcut MoE connection.
#include <string>

#include "config/validate/section_functions.h"

namespace mr::section {

MR_WARNING(kGraphsRngTracker, "cuda-graph-runtime.te-rng-tracker-enabled",
           "CUDA graphs with Transformer Engine turn on --te-rng-tracker.");
MR_RULE(kGraphsExpandableSegments, "cuda-graph-runtime.expandable-segments-nccl-register",
        "TE CUDA graphs with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True need NCCL_GRAPH_REGISTER=0.");
MR_RULE(kGraphsFullIterationModules, "cuda-graph-runtime.full-iteration-no-modules",
        "--cuda-graph-impl full_iteration needs an empty --cuda-graph-modules.");
MR_RULE(kGraphsShortcutMoe, "cuda-graph-runtime.moe-shortcut-connection",
        "--moe-shortcut-connection supports CUDA graphs only with --cuda-graph-impl local and "
        "--inference-cuda-graph-scope block.");

void cuda_graph_runtime(Context& ctx) {
  const Value& impl = ctx["cuda_graph_impl"];
  if (!(impl == Value("none"))) {
    const Value te("transformer_engine");
    if ((ctx["transformer_impl"] == te || impl == te) && !ctx.on("te_rng_tracker")) {
      ctx.set("te_rng_tracker", true, "CUDA graphs need the TE RNG tracker");
      ctx.warn(kGraphsRngTracker, "--te-rng-tracker was off; enabling it for CUDA graphs",
               {"te_rng_tracker", "cuda_graph_impl"});
    }
    if (impl == te) {
      std::string alloc = ctx.env_var("PYTORCH_CUDA_ALLOC_CONF").value_or("");
      std::string reg = ctx.env_var("NCCL_GRAPH_REGISTER").value_or("");
      ctx.require(alloc.find("expandable_segments:True") == std::string::npos || reg == "0", kGraphsExpandableSegments,
                  "--cuda-graph-impl transformer_engine with PYTORCH_CUDA_ALLOC_CONF=" + alloc +
                      " needs NCCL_GRAPH_REGISTER=0 in the environment, or graph replay can hit illegal memory "
                      "accesses",
                  {"cuda_graph_impl"});
    }
  }
  ctx.require(!(impl == Value("full_iteration") && ctx.on("cuda_graph_modules")), kGraphsFullIterationModules,
              "--cuda-graph-impl full_iteration captures the whole iteration: --cuda-graph-modules must be empty "
              "(got " +
                  ctx["cuda_graph_modules"].py_str() + ")",
              {"cuda_graph_impl", "cuda_graph_modules"});
  const bool local_block =
      impl == Value("local") && enum_is(ctx["inference_cuda_graph_scope"], "InferenceCudaGraphScope", "block");
  ctx.require(!(ctx.on("moe_shortcut_connection") && !(impl == Value("none")) && !local_block), kGraphsShortcutMoe,
              "--moe-shortcut-connection with CUDA graphs needs --cuda-graph-impl local and "
              "--inference-cuda-graph-scope block (got --cuda-graph-impl " +
                  impl.py_str() + ", --inference-cuda-graph-scope " + ctx["inference_cuda_graph_scope"].py_str() + ")",
              {"moe_shortcut_connection", "cuda_graph_impl", "inference_cuda_graph_scope"});
}

}  // namespace mr::section
