// Legacy RoPE flag, RoPE fusion, relative and multimodal rotary embeddings (seed arguments.py 1474-1494).
#include "config/validate/section_functions.h"

namespace mr::section {

MR_RULE(kNoPositionEmbedding, "position-embedding.no-position-embedding-deprecated",
        "--no-position-embedding is deprecated (outside RoPE); use --position-embedding-type.");
MR_RULE(kRelativeNeedsTe, "position-embedding.relative-needs-te",
        "--position-embedding-type relative needs --transformer-impl transformer_engine.");
MR_RULE(kMropeSection, "position-embedding.mrope-section",
        "--position-embedding-type mrope needs --mrope-section.");

void position_embedding(Context& ctx) {
  if (ctx.on("use_rotary_position_embeddings"))
    ctx.set("position_embedding_type", "rope", "--use-rotary-position-embeddings (legacy spelling)");
  const Value type = ctx["position_embedding_type"];
  if (type != Value("rope")) ctx.set("apply_rope_fusion", false, "RoPE fusion needs --position-embedding-type rope");

  if (!ctx.on("add_position_embedding") && type != Value("rope"))
    ctx.fail(kNoPositionEmbedding,
             "--no-position-embedding is deprecated; choose the embedding with --position-embedding-type (here " +
                 type.py_str() + ")",
             {"add_position_embedding", "position_embedding_type"});

  if (type == Value("relative"))
    ctx.require(ctx["transformer_impl"] == Value("transformer_engine"), kRelativeNeedsTe,
                "--position-embedding-type relative (attention-bias position embeddings) needs --transformer-impl "
                "transformer_engine (got " + show(ctx, "transformer_impl") + ")",
                {"position_embedding_type", "transformer_impl"});

  if (type == Value("mrope"))
    ctx.require(!ctx.is_none("mrope_section"), kMropeSection,
                "--position-embedding-type mrope needs --mrope-section", {"position_embedding_type", "mrope_section"});
}

}  // namespace mr::section
