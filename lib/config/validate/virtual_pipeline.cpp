// Virtual pipeline parallelism (seed arguments.py 814-909 of validate_args): at most one way of asking for it
// (--num-layers-per-virtual-pipeline-stage, --num-virtual-stages-per-pipeline-rank,
// --pipeline-model-parallel-layout), the virtual pipeline size each implies, layer divisibility over the
// pipeline stages (counting embedding/loss when asked), and what the interleaved schedule needs.
#include <string>
#include <vector>

#include "config/pipeline_layout.h"
#include "config/validate/section_functions.h"

namespace mr {
namespace {

MR_RULE(kInvalidLayerChar, "pipeline-layout.invalid-layer-character",
        "--pipeline-model-parallel-layout may only use E, L, t, m, '|', ',', '(...)*n' and 'x*n'.");
MR_RULE(kLayoutTooLarge, "pipeline-layout.too-large",
        "--pipeline-model-parallel-layout expands to more layers than can be held.");
MR_RULE(kOneVirtualPipelineOption, "virtual-pipeline.one-option",
        "At most one of --num-layers-per-virtual-pipeline-stage, --num-virtual-stages-per-pipeline-rank and "
        "--pipeline-model-parallel-layout may be given.");
MR_RULE(kLayoutStagesDivisible, "pipeline-layout.stages-divisible-by-pp",
        "The number of stages in --pipeline-model-parallel-layout must be a multiple of the pipeline size.");
MR_RULE(kUnevenNeedsVirtualStages, "virtual-pipeline.uneven-needs-num-virtual-stages",
        "Uneven pipeline stages (--decoder-first/last-pipeline-num-layers) with virtual pipelining need "
        "--num-virtual-stages-per-pipeline-rank.");
MR_RULE(kNumLayersMissing, "virtual-pipeline.num-layers-missing",
        "--num-layers-per-virtual-pipeline-stage needs --num-layers or --decoder-num-layers.");
MR_RULE(kLayersDivisibleByPp, "pipeline-split.num-layers-divisible-by-pp",
        "The number of layers (+1 for embedding / loss when accounted for) must be a multiple of the pipeline "
        "size.");
MR_RULE(kStageLayersDivisible, "virtual-pipeline.stage-layers-divisible",
        "The layers per pipeline stage must be a multiple of --num-layers-per-virtual-pipeline-stage.");
MR_RULE(kInterleavedNeedsPp2, "virtual-pipeline.interleaved-needs-pp-gt-1",
        "The interleaved schedule needs --pipeline-model-parallel-size > 1.");
MR_RULE(kInterleavedNeedsPp3, "virtual-pipeline.interleaved-without-p2p-overlap-needs-pp-gt-2",
        "The interleaved schedule without P2P overlap needs --pipeline-model-parallel-size > 2.");
MR_WARNING(kP2pOverlapOff, "virtual-pipeline.p2p-overlap-and-param-gather-alignment-off",
           "Without the interleaved schedule, P2P overlap and aligned param all-gather are switched off.");

std::string num(int64_t v) { return std::to_string(v); }

// `layers` (+1 for each pipeline split accounting) must divide evenly over `pp` stages.
void require_layers_divisible(Context& ctx, int64_t layers, int64_t pp, const char* what) {
  ctx.require(pp != 0 && py_mod(layers, pp) == 0, kLayersDivisibleByPp,
              std::string(what) + " (" + num(layers) +
                  ", counting embedding/loss layers when "
                  "--account-for-embedding/loss-in-pipeline-split is set) must be divisible by "
                  "--pipeline-model-parallel-size (" +
                  num(pp) + ")",
              {"num_layers", "pipeline_model_parallel_size", "account_for_embedding_in_pipeline_split",
               "account_for_loss_in_pipeline_split"});
}

// The stages of --pipeline-model-parallel-layout (config/pipeline_layout.h); fails the chain on a layout that
// is too large or uses a character that is not a layer.
std::vector<std::string> layout_stages(Context& ctx, const std::string& layout) {
  const pipeline_layout::Layout parsed = pipeline_layout::parse(layout);
  if (parsed.too_large)
    ctx.fail(kLayoutTooLarge,
             "--pipeline-model-parallel-layout '" + layout + "' unrolls to more than " +
                 std::to_string(pipeline_layout::kMaxChars) + " layers",
             {"pipeline_model_parallel_layout"});
  if (!parsed.bad_char.empty())
    ctx.fail(kInvalidLayerChar,
             "--pipeline-model-parallel-layout '" + layout + "': '" + parsed.bad_char +
                 "' is not a layer character (E embedding, L loss, t decoder layer, m MTP layer; stages are "
                 "separated by '|', '(...)*n' and 'x*n' repeat)",
             {"pipeline_model_parallel_layout"});
  return parsed.stages;
}

}  // namespace

namespace section {

void virtual_pipeline(Context& ctx) {
  // seed 815-826
  const bool per_stage = !ctx.is_none("num_layers_per_virtual_pipeline_stage");
  const bool per_rank = !ctx.is_none("num_virtual_stages_per_pipeline_rank");
  const bool layout = !ctx.is_none("pipeline_model_parallel_layout");
  ctx.require(int(per_stage) + int(per_rank) + int(layout) <= 1, kOneVirtualPipelineOption,
              "give at most one of --num-layers-per-virtual-pipeline-stage (" +
                  ctx["num_layers_per_virtual_pipeline_stage"].py_str() +
                  "), --num-virtual-stages-per-pipeline-rank (" + ctx["num_virtual_stages_per_pipeline_rank"].py_str() +
                  ") and --pipeline-model-parallel-layout (" + ctx["pipeline_model_parallel_layout"].py_str() + ")",
              {"num_layers_per_virtual_pipeline_stage", "num_virtual_stages_per_pipeline_rank",
               "pipeline_model_parallel_layout"});

  const int64_t tpp = ctx.i("transformer_pipeline_model_parallel_size");
  if (layout) {
    // seed 828-839: the layout's stage count is PP x VPP (the full layout check is TransformerConfig's).
    const int64_t stages =
        static_cast<int64_t>(layout_stages(ctx, ctx.s("pipeline_model_parallel_layout")).size());
    const int64_t pp = ctx.i("pipeline_model_parallel_size");
    ctx.require(pp != 0 && py_mod(stages, pp) == 0, kLayoutStagesDivisible,
                "--pipeline-model-parallel-layout has " + num(stages) +
                    " stages, which is not a multiple of --pipeline-model-parallel-size (" + num(pp) + ")",
                {"pipeline_model_parallel_layout", "pipeline_model_parallel_size"});
    const int64_t vpp = py_floordiv(stages, pp);
    ctx.set("virtual_pipeline_model_parallel_size", vpp == 1 ? Value() : Value(vpp),
            "stages of --pipeline-model-parallel-layout per pipeline rank");
  } else if (per_stage || per_rank) {
    // seed 840-866
    if (!per_rank) {
      ctx.require(ctx.is_none("decoder_first_pipeline_num_layers") && ctx.is_none("decoder_last_pipeline_num_layers"),
                  kUnevenNeedsVirtualStages,
                  "with uneven pipeline stages (--decoder-first/last-pipeline-num-layers), give the virtual "
                  "pipeline degree with --num-virtual-stages-per-pipeline-rank, not "
                  "--num-layers-per-virtual-pipeline-stage",
                  {"num_layers_per_virtual_pipeline_stage", "decoder_first_pipeline_num_layers",
                   "decoder_last_pipeline_num_layers"});
      const char* source = !ctx.is_none("num_layers") ? "num_layers" : "decoder_num_layers";
      // Both None: Megatron fails with a TypeError on the arithmetic below.
      ctx.require(!ctx.is_none(source), kNumLayersMissing,
                  "--num-layers-per-virtual-pipeline-stage needs the number of layers (--num-layers or "
                  "--decoder-num-layers)",
                  {"num_layers_per_virtual_pipeline_stage", "num_layers"});
      int64_t layers = ctx.i(source);
      if (ctx.on("account_for_embedding_in_pipeline_split")) layers += 1;
      if (ctx.on("account_for_loss_in_pipeline_split")) layers += 1;
      require_layers_divisible(ctx, layers, tpp, "the number of layers");
      const int64_t stage_layers = py_floordiv(layers, tpp);
      const int64_t per_vstage = ctx.i("num_layers_per_virtual_pipeline_stage");
      ctx.require(per_vstage != 0 && py_mod(stage_layers, per_vstage) == 0, kStageLayersDivisible,
                  "the layers per pipeline stage (" + num(stage_layers) +
                      ") must be divisible by --num-layers-per-virtual-pipeline-stage (" + num(per_vstage) + ")",
                  {"num_layers_per_virtual_pipeline_stage", "num_layers", "pipeline_model_parallel_size"});
      const int64_t vpp = py_floordiv(stage_layers, per_vstage);
      ctx.set("virtual_pipeline_model_parallel_size", vpp == 1 ? Value() : Value(vpp),
              "layers per pipeline stage / --num-layers-per-virtual-pipeline-stage");
    } else {
      const Value& vpp = ctx["num_virtual_stages_per_pipeline_rank"];
      ctx.set("virtual_pipeline_model_parallel_size", vpp == Value(1) ? Value() : vpp,
              "--num-virtual-stages-per-pipeline-rank");
    }
  } else {
    // seed 867-885: no virtual pipelining asked for (a hybrid pattern may have derived it already).
    if (ctx.is_none("hybrid_layer_pattern"))
      ctx.set("virtual_pipeline_model_parallel_size", Value(), "no virtual pipeline option given");
    if (ctx.is_none("decoder_first_pipeline_num_layers") && ctx.is_none("decoder_last_pipeline_num_layers") &&
        !ctx.is_none("num_layers") && ctx.is_none("hybrid_layer_pattern")) {
      int64_t layers = ctx.i("num_layers");
      if (ctx.on("account_for_embedding_in_pipeline_split")) layers += 1;
      if (ctx.on("account_for_loss_in_pipeline_split")) layers += 1;
      require_layers_divisible(ctx, layers, tpp, "--num-layers");
    }
  }

  // seed 887-905
  const int64_t pp = ctx.i("pipeline_model_parallel_size");
  if (!ctx.is_none("virtual_pipeline_model_parallel_size")) {
    if (ctx.on("overlap_p2p_comm"))
      ctx.require(pp > 1, kInterleavedNeedsPp2,
                  "the interleaved schedule (virtual pipeline size " +
                      ctx["virtual_pipeline_model_parallel_size"].py_str() +
                      ") needs --pipeline-model-parallel-size > 1 (got " + num(pp) + ")",
                  {"pipeline_model_parallel_size"});
    else
      ctx.require(pp > 2, kInterleavedNeedsPp3,
                  "the interleaved schedule (virtual pipeline size " +
                      ctx["virtual_pipeline_model_parallel_size"].py_str() +
                      ") with --no-overlap-p2p-communication needs --pipeline-model-parallel-size > 2 (got " + num(pp) +
                      "), so that no two ranks exchange several sends/receives per communication batch",
                  {"pipeline_model_parallel_size", "overlap_p2p_comm"});
  } else {
    ctx.set("overlap_p2p_comm", Value(false), "non-interleaved schedule");
    ctx.set("align_param_gather", Value(false), "non-interleaved schedule");
    // Megatron prints this (a plain print, rank 0 only) when PP > 1.
    if (ctx["rank"] == Value(0) && pp > 1)
      ctx.warn(kP2pOverlapOff,
               "P2P communication overlap and aligned param all-gather are off: the non-interleaved pipeline "
               "schedule supports neither",
               {"overlap_p2p_comm", "align_param_gather"});
  }
}

}  // namespace section
}  // namespace mr
