// Part A of the validation chain (seed arguments.py 419-625 of validate_args): the section functions, one
// concern per file, plus the small Python-arithmetic helpers they share.
#pragma once

#include <cstdint>
#include <optional>

#include "config/checked.h"
#include "config/validate/context.h"
#include "config/validate/python.h"

namespace mr::part_a {

// seed 421-436: --ckpt-convert-format prerequisites and the non-persistent checkpoint kind (ckpt_conversion_prep.cpp).
void ckpt_conversion_prep(Context& ctx);
// seed 438-439 -> validate_model_config_args_from_heterogeneous_config, seed 195-267 (heterogeneous_config.cpp).
void heterogeneous_config(Context& ctx);
// seed 441: update_use_dist_ckpt (ckpt_conversion_prep.cpp).
void use_dist_ckpt(Context& ctx);
// seed 443-522: GTP shard resolution, total model size, data/batch-parallel sizes, CP checks (model_parallel_sizes.cpp).
void model_parallel_sizes(Context& ctx);
// seed 524-575: removed and renamed flags (deprecated_flags.cpp).
void deprecated_flags(Context& ctx);
// seed 577-588 with seed 286-325: CUDA-graph module and inference-scope normalisation (cuda_graph_normalize.cpp).
void cuda_graph_normalize(Context& ctx);
// seed 590-625: caller-supplied defaults, legacy --split, data-path exclusivity, phase transitions (input_defaults.cpp).
void input_defaults(Context& ctx);
// seed 590-600 on its own: validate_args's `defaults` parameter. megatron-run validates as validate_args(args, {})
// does, so input_defaults() passes an empty mapping; tests drive this directly.
void apply_input_defaults(Context& ctx, const Object& defaults);

// a * b, or nullopt when it does not fit in 64 bits (Python would go on with a big int): config/checked.h.
using ::mr::checked_mul;

}  // namespace mr::part_a
