// --pipeline-model-parallel-layout strings (megatron/core/transformer/pipeline_parallel_layer_layout.py,
// PipelineParallelLayerLayout.parse_str_to_list / get_num_stages_from_str), as far as validate_args() uses them.
#pragma once

#include <string>
#include <vector>

#include "config/validate/context.h"

namespace mr::pipeline_layout {

// Expands "Ettt|(tt|)*29,m|L" the way the Python parser does (commas dropped, one pass of "(...)*n", then one
// pass of "x*n") and splits it at '|' into stages of layer characters (E embedding, L loss, t decoder, m MTP).
// Fails the chain on an unknown layer character.
std::vector<std::string> parse_stages(Context& ctx, const std::string& layout);

// Without the chain (for tests): the expanded text before splitting (empty, with *too_large set, when it
// would exceed the size we are willing to build).
std::string expand(const std::string& layout, bool* too_large = nullptr);

}  // namespace mr::pipeline_layout
