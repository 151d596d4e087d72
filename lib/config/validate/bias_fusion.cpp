// Bias fusions follow --disable-bias-linear; add_qkv_bias follows add_bias_linear (seed arguments.py 1453-1459).
#include "config/validate/section_functions.h"

namespace mr::section {

void bias_fusion(Context& ctx) {
  // No bias at all: nothing for the bias-GeLU fusion to fuse.
  if (!ctx.on("add_bias_linear")) ctx.set("bias_gelu_fusion", false, "--disable-bias-linear");
  // add_qkv_bias is the narrower switch; a linear bias implies it.
  if (ctx.on("add_bias_linear")) ctx.set("add_qkv_bias", true, "add_bias_linear implies add_qkv_bias");
}

}  // namespace mr::section
