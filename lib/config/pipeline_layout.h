// --pipeline-model-parallel-layout strings (megatron/core/transformer/pipeline_parallel_layer_layout.py,
// PipelineParallelLayerLayout.parse_str_to_list / get_num_stages_from_str), as far as validate_args() and the
// rank layout use them. No rules here: the validation chain refuses a bad layout (validate/virtual_pipeline.cpp).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace mr::pipeline_layout {

// Python would try to build the string and run out of memory; we refuse beyond this many characters.
inline constexpr size_t kMaxChars = size_t(1) << 26;

struct Layout {
  std::vector<std::string> stages;  // layer characters of each stage (E embedding, L loss, t decoder, m MTP)
  bool too_large = false;           // the expansion would exceed kMaxChars (stages is then empty)
  std::string bad_char;             // the first character that is not a layer character (the UTF-8 sequence)
};

// Expands "Ettt|(tt|)*29,m|L" the way the Python parser does (commas dropped, one pass of "(...)*n", then one
// pass of "x*n") and splits it at '|' into stages. Stops at the first character that is not a layer character.
Layout parse(const std::string& layout);

// The expanded text before splitting (empty, with *too_large set, when it would exceed kMaxChars).
std::string expand(const std::string& layout, bool* too_large = nullptr);

}  // namespace mr::pipeline_layout
