// The init stage (init.h): how many transformer layers each pipeline stage builds. Megatron checks the uneven
// first/last stages and the embedding/loss accounting in TransformerConfig.__post_init__
// (megatron/core/transformer/transformer_config.py), and the layers per pipeline rank and per virtual stage in
// get_num_layers_to_build (megatron/core/transformer/transformer_block.py, used by the GPT and BERT models'
// TransformerBlock). validate_args() checks only some of these: the even split, and the virtual stages given as
// --num-layers-per-virtual-pipeline-stage; not the uneven split, nor --num-virtual-stages-per-pipeline-rank.
//
// The config's num_layers_in_first/last_pipeline_stage are --decoder-first/last-pipeline-num-layers
// (core_transformer_config_from_args). With --pipeline-model-parallel-layout Megatron validates the layout
// instead (init_pipeline_layout.cpp); hybrid models (--hybrid-layer-pattern) split their layers by the pattern, not by
// get_num_layers_to_build.
#include <string>

#include "config/validate/init.h"
#include "config/validate/python.h"

namespace mr::init {
namespace {

MR_INIT_RULE(kUnevenAccount, "init.pipeline.uneven-with-account-for",
             "--decoder-first/last-pipeline-num-layers cannot be combined with --account-for-embedding-in-pipeline-"
             "split or --account-for-loss-in-pipeline-split (TransformerConfig).");
MR_INIT_RULE(kUneven, "init.pipeline.uneven-stage-layers",
             "With --decoder-first/last-pipeline-num-layers: each is at least 1 and a multiple of the virtual pipeline "
             "size, and the remaining layers divide evenly over the middle stages, per middle rank a multiple of the "
             "virtual pipeline size (TransformerConfig).");
MR_INIT_RULE(kLayersPerStage, "init.pipeline.layers-per-stage",
             "The layers of each pipeline rank (--num-layers, plus one for each --account-for-*-in-pipeline-split) "
             "must split evenly into its virtual pipeline stages (TransformerConfig, get_num_layers_to_build).");

const char* kTc = "TransformerConfig";
std::string s(int64_t n) { return std::to_string(n); }

}  // namespace

void pipeline_layers(Context& ctx) {
  if (!set(ctx, "num_layers") || set(ctx, "pipeline_model_parallel_layout")) return;
  const int64_t layers = ctx.i("num_layers");
  const int64_t pp = ctx.i("pipeline_model_parallel_size");
  if (pp < 1) return;
  // validate_args derives the virtual pipeline size (None without the interleaved schedule).
  const int64_t vpp = set(ctx, "virtual_pipeline_model_parallel_size") ? ctx.i("virtual_pipeline_model_parallel_size") : 0;
  const std::string vpp_s = "the virtual pipeline size (" + s(vpp) + ")";
  const bool first = set(ctx, "decoder_first_pipeline_num_layers");
  const bool last = set(ctx, "decoder_last_pipeline_num_layers");
  const bool acc_emb = ctx.on("account_for_embedding_in_pipeline_split");
  const bool acc_loss = ctx.on("account_for_loss_in_pipeline_split");

  if (first || last) {
    ctx.require(!(acc_emb || acc_loss), kUnevenAccount,
                would_fail(kTc) + "--decoder-first/last-pipeline-num-layers cannot be combined with " +
                    (acc_emb ? "--account-for-embedding-in-pipeline-split" : "--account-for-loss-in-pipeline-split"),
                {"decoder_first_pipeline_num_layers", "decoder_last_pipeline_num_layers",
                 "account_for_embedding_in_pipeline_split", "account_for_loss_in_pipeline_split"});
    int64_t rest = layers, stages = pp;
    for (const char* dest : {"decoder_first_pipeline_num_layers", "decoder_last_pipeline_num_layers"}) {
      if (!set(ctx, dest)) continue;
      const int64_t n = ctx.i(dest);
      ctx.require(n > 0, kUneven, would_fail(kTc) + Context::flag(dest) + " (" + s(n) + ") must be at least 1",
                  {dest});
      if (vpp)
        ctx.require(py_mod(n, vpp) == 0, kUneven,
                    would_fail(kTc) + Context::flag(dest) + " (" + s(n) + ") must be a multiple of " + vpp_s,
                    {dest, "num_virtual_stages_per_pipeline_rank"});
      rest = ctx.add(rest, -n, "--num-layers less the first/last pipeline stages' layers", {"num_layers", dest});
      stages -= 1;
    }
    ctx.require((rest != 0) == (stages != 0), kUneven,
                would_fail(kTc) + s(rest) + " layers remain for " + s(stages) +
                    " middle pipeline stages (--num-layers " + s(layers) + ", --pipeline-model-parallel-size " + s(pp) +
                    ", --decoder-first/last-pipeline-num-layers)",
                {"num_layers", "pipeline_model_parallel_size", "decoder_first_pipeline_num_layers",
                 "decoder_last_pipeline_num_layers"});
    if (stages > 0) {
      ctx.require(py_mod(rest, stages) == 0, kUneven,
                  would_fail(kTc) + "the " + s(rest) + " layers of the middle pipeline stages must divide evenly over " +
                      s(stages) + " stages (--num-layers " + s(layers) + ", --pipeline-model-parallel-size " + s(pp) +
                      ", --decoder-first/last-pipeline-num-layers)",
                  {"num_layers", "pipeline_model_parallel_size", "decoder_first_pipeline_num_layers",
                   "decoder_last_pipeline_num_layers"});
      if (vpp)
        ctx.require(py_mod(rest / stages, vpp) == 0, kUneven,
                    would_fail(kTc) + "each middle pipeline rank holds " + s(rest / stages) +
                        " layers, which must be a multiple of " + vpp_s,
                    {"num_layers", "decoder_first_pipeline_num_layers", "decoder_last_pipeline_num_layers",
                     "num_virtual_stages_per_pipeline_rank"});
    }
    return;
  }

  // Even split: TransformerConfig checks it with the embedding/loss accounting; get_num_layers_to_build (GPT and
  // BERT, not hybrid models) also without.
  const bool transformer_block = !set(ctx, "hybrid_layer_pattern");
  if (!(acc_emb || acc_loss) && !transformer_block) return;
  const int64_t total = ctx.add(layers, (acc_emb ? 1 : 0) + (acc_loss ? 1 : 0),
                                "--num-layers plus the embedding/loss stages", {"num_layers"});
  const std::string counted = "--num-layers " + s(layers) + (acc_emb ? " + 1 (embedding)" : "") +
                              (acc_loss ? " + 1 (loss)" : "");
  ctx.require(py_mod(total, pp) == 0, kLayersPerStage,
              would_fail(kTc) + counted + " must be divisible by --pipeline-model-parallel-size (" + s(pp) + ")",
              {"num_layers", "pipeline_model_parallel_size", "account_for_embedding_in_pipeline_split",
               "account_for_loss_in_pipeline_split"});
  if (vpp && pp > 1)
    ctx.require(py_mod(total / pp, vpp) == 0, kLayersPerStage,
                would_fail(acc_emb || acc_loss ? kTc : "get_num_layers_to_build") + "each pipeline rank holds " +
                    s(total / pp) + " layers (" + counted + " over " + s(pp) +
                    " pipeline stages), which must be a multiple of " + vpp_s,
                {"num_layers", "pipeline_model_parallel_size", "num_virtual_stages_per_pipeline_rank"});
}

}  // namespace mr::init
