// The init stage (init.h): --pipeline-model-parallel-layout as TransformerConfig.__post_init__ checks it
// (megatron/core/transformer/transformer_config.py, "PP layout"): no other way of splitting the layers beside it,
// then PipelineParallelLayerLayout.validate_layer_layout — the embedding first and the loss last, once each, one
// 't' per decoder layer of --num-layers, one 'm' per --mtp-num-layers, the MTP layers after every decoder layer
// and all in the last virtual chunk of one pipeline rank. validate_args() checks only the stage count
// (validate/virtual_pipeline.cpp). The layout's arithmetic is config/pipeline_layout.cpp's.
#include <string>

#include "config/pipeline_layout.h"
#include "config/validate/init.h"
#include "config/validate/python.h"

namespace mr::init {
namespace {

MR_INIT_RULE(kLayoutConflict, "init.pipeline.layout-with-other-split",
             "--pipeline-model-parallel-layout cannot be combined with --decoder-first/last-pipeline-num-layers or "
             "--account-for-embedding/loss-in-pipeline-split (TransformerConfig).");
MR_INIT_RULE(kLayoutEnds, "init.pipeline.layout-embedding-and-loss",
             "--pipeline-model-parallel-layout starts with the embedding (E) and ends with the loss (L), each given "
             "once (PipelineParallelLayerLayout.validate_layer_layout).");
MR_INIT_RULE(kLayoutLayers, "init.pipeline.layout-layer-count",
             "--pipeline-model-parallel-layout holds one 't' per layer of --num-layers and one 'm' per layer of "
             "--mtp-num-layers (PipelineParallelLayerLayout.validate_layer_layout).");
MR_INIT_RULE(kLayoutMtp, "init.pipeline.layout-mtp-placement",
             "In --pipeline-model-parallel-layout the MTP layers (m) come after every decoder layer and all sit in "
             "the last virtual chunk of one pipeline rank (PipelineParallelLayerLayout.validate_layer_layout).");


}  // namespace

void pipeline_layout(Context& ctx) {
  if (!set(ctx, "pipeline_model_parallel_layout") || !set(ctx, "num_layers")) return;
  const std::string text = ctx.s("pipeline_model_parallel_layout");
  for (const char* dest : {"decoder_first_pipeline_num_layers", "decoder_last_pipeline_num_layers"})
    ctx.require(!set(ctx, dest), kLayoutConflict,
                would_fail("TransformerConfig") + "--pipeline-model-parallel-layout cannot be set with " +
                    Context::flag(dest) + " (" + ctx[dest].py_str() + ")",
                {"pipeline_model_parallel_layout", dest});
  for (const char* dest : {"account_for_embedding_in_pipeline_split", "account_for_loss_in_pipeline_split"})
    ctx.require(!ctx.on(dest), kLayoutConflict,
                would_fail("TransformerConfig") + "--pipeline-model-parallel-layout cannot be set with " +
                    Context::flag(dest),
                {"pipeline_model_parallel_layout", dest});

  // validate_args has parsed it and checked its stage count against the pipeline size.
  const pipeline_layout::Layout parsed = pipeline_layout::parse(text);
  const int64_t pp = ctx.i("pipeline_model_parallel_size");
  if (parsed.too_large || !parsed.bad_char.empty() || pp < 1) return;
  const int64_t mtp = set(ctx, "mtp_num_layers") ? ctx.i("mtp_num_layers") : -1;
  const pipeline_layout::Check c = pipeline_layout::check_layers(parsed.stages, pp, ctx.i("num_layers"), mtp);
  using P = pipeline_layout::Check::Problem;
  if (c.problem == P::None) return;
  const std::string msg = would_fail("PipelineParallelLayerLayout") + "--pipeline-model-parallel-layout '" + text +
                          "': " + c.what;
  if (c.problem == P::Ends) ctx.fail(kLayoutEnds, msg, {"pipeline_model_parallel_layout"});
  if (c.problem == P::MtpPlacement) ctx.fail(kLayoutMtp, msg, {"pipeline_model_parallel_layout", "mtp_num_layers"});
  ctx.fail(kLayoutLayers, msg,
           {"pipeline_model_parallel_layout", c.problem == P::DecoderCount ? "num_layers" : "mtp_num_layers"});
}

}  // namespace mr::init
