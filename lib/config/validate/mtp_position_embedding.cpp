// Multi-token prediction needs a position embedding driven by position_ids (seed arguments.py 1869-1875).
#include "config/validate/section_functions.h"

namespace mr::section {

MR_RULE(kMtpPositionEmbedding, "mtp-position-embedding.supported-type",
        "--mtp-num-layers needs --position-embedding-type learned_absolute, rope, mrope or none.");

void mtp_position_embedding(Context& ctx) {
  if (!ctx.on("mtp_num_layers")) return;
  const Value& pe = ctx["position_embedding_type"];
  bool ok = false;
  for (const char* t : {"learned_absolute", "rope", "mrope", "none"}) ok = ok || pe == Value(t);
  ctx.require(ok, kMtpPositionEmbedding,
              "multi-token prediction (--mtp-num-layers) does not support --position-embedding-type " + pe.py_str() +
                  "; use learned_absolute, rope, mrope or none",
              {"mtp_num_layers", "position_embedding_type"});
}

}  // namespace mr::section
