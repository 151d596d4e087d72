// Pipeline-parallel microbatched inference (seed arguments.py 1788-1794): --inference-batch-times-seqlen-threshold
// splits inference batches into microbatches, which needs pipeline parallelism and no CUDA graphs.
#include "config/validate/section_functions.h"

namespace mr::section {

MR_RULE(kPpInferenceNeedsPp, "pp-inference.needs-pipeline-parallel",
        "--inference-batch-times-seqlen-threshold needs --pipeline-model-parallel-size > 1.");
MR_RULE(kPpInferenceNoGraphs, "pp-inference.no-cuda-graphs",
        "Pipeline-parallel microbatched inference cannot be combined with CUDA graphs.");

void pp_inference(Context& ctx) {
  if (!(ctx.i("inference_batch_times_seqlen_threshold") > -1)) return;
  ctx.require(ctx.i("pipeline_model_parallel_size") > 1, kPpInferenceNeedsPp,
              "--inference-batch-times-seqlen-threshold (" + ctx["inference_batch_times_seqlen_threshold"].py_str() +
                  ") needs --pipeline-model-parallel-size > 1 (got " + ctx["pipeline_model_parallel_size"].py_str() +
                  ")",
              {"inference_batch_times_seqlen_threshold", "pipeline_model_parallel_size"});
  ctx.require(ctx["cuda_graph_impl"] == Value("none"), kPpInferenceNoGraphs,
              "--inference-batch-times-seqlen-threshold (pipeline-parallel microbatched inference) needs "
              "--cuda-graph-impl none (got " +
                  ctx["cuda_graph_impl"].py_str() + ")",
              {"inference_batch_times_seqlen_threshold", "cuda_graph_impl"});
}

}  // namespace mr::section
