// --apply-query-key-layer-scaling also means an fp32 softmax (seed arguments.py 1634-1636); Megatron records it
// in attention_softmax_in_fp32 so the resolved arguments say so.
#include "config/validate/section_functions.h"

namespace mr::section {

void qk_layer_scaling(Context& ctx) {
  if (ctx.on("apply_query_key_layer_scaling"))
    assign(ctx, "attention_softmax_in_fp32", true, "--apply-query-key-layer-scaling computes the softmax in fp32");
}

}  // namespace mr::section
