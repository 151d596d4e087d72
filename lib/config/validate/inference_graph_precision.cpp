// Seed arguments.py 1126-1137 (validate_args): FP8 with block-scope inference CUDA graphs, and the number of
// CUDA graphs dynamic batching captures with the local graph implementation.
#include <string>

#include "config/validate/section_functions.h"

namespace mr::section {

MR_RULE(kBlockGraphFp8Impl, "precision.block-graph-fp8-needs-inference-optimized",
        "FP8 with --inference-cuda-graph-scope block needs --transformer-impl inference_optimized.");
MR_RULE(kBlockGraphFp8Recipe, "precision.block-graph-fp8-needs-mxfp8",
        "FP8 with --inference-cuda-graph-scope block needs --fp8-recipe mxfp8.");
MR_RULE(kNumCudaGraphs, "dynamic-batching.num-cuda-graphs-valid",
        "With --cuda-graph-impl local, --inference-dynamic-batching-num-cuda-graphs must be positive or -1.");

void inference_graph_precision(Context& ctx) {
  // seed 1126-1132: by now the scope is the normalised enum (str() form), never the raw CLI string.
  if (ctx["inference_cuda_graph_scope"] == Value("InferenceCudaGraphScope.block") && !ctx.is_none("fp8")) {
    if (ctx["transformer_impl"] != Value("inference_optimized"))
      ctx.fail(kBlockGraphFp8Impl,
               "--fp8-format with --inference-cuda-graph-scope block requires --transformer-impl "
               "inference_optimized, got " + ctx["transformer_impl"].py_str(),
               {"fp8", "inference_cuda_graph_scope", "transformer_impl"});
    if (ctx["fp8_recipe"] != Value("mxfp8"))
      ctx.fail(kBlockGraphFp8Recipe,
               "--fp8-format with --inference-cuda-graph-scope block requires --fp8-recipe mxfp8, got " +
                   ctx["fp8_recipe"].py_str(),
               {"fp8", "inference_cuda_graph_scope", "fp8_recipe"});
  }

  // seed 1134-1137: -1 lets inference pick the count from its max_requests.
  if (ctx["cuda_graph_impl"] == Value("local")) {
    const Value& n = ctx["inference_dynamic_batching_num_cuda_graphs"];
    const bool ok = n.is_number() && (n.as_float() > 0 || n == Value(-1));
    if (!ok)
      ctx.fail(kNumCudaGraphs,
               "--inference-dynamic-batching-num-cuda-graphs must be a positive integer or -1 (automatic) with "
               "--cuda-graph-impl local, got " + n.py_str(),
               {"inference_dynamic_batching_num_cuda_graphs", "cuda_graph_impl"});
  }
}

}  // namespace mr::section
