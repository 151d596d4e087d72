// Part B of the validation chain (seed arguments.py 626-956 of validate_args): the section functions and
// the small helpers they share.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include "config/validate/context.h"
#include "config/validate/python.h"

namespace mr::part_b {

// Sections, in seed order.
void batch_size(Context& ctx);        // seed 626-653: global/micro batch, eval batch sizes
void hybrid_pattern(Context& ctx);    // seed 655-812: hybrid layer pattern, MTP pattern, MLA symbols
void virtual_pipeline(Context& ctx);  // seed 814-909: uneven/virtual pipeline, layout, layer divisibility
void torch_fsdp2(Context& ctx);       // seed 911-956: MoE shortcut vs FSDP, --use-torch-fsdp2 requirements

// warn_rank_0(message, args.rank): the warning is only given on rank 0.
inline void warn_rank_0(Context& ctx, const Rule& rule, const std::string& message,
                        std::initializer_list<std::string_view> dests = {}) {
  if (ctx["rank"] == Value(0)) ctx.warn(rule, message, dests);
}


}  // namespace mr::part_b
