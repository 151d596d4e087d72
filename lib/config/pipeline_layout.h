// --pipeline-model-parallel-layout strings (megatron/core/transformer/pipeline_parallel_layer_layout.py,
// PipelineParallelLayerLayout.parse_str_to_list / get_num_stages_from_str), as far as validate_args() and the
// rank layout use them. No rules here: the validation chain refuses a bad layout (validate/virtual_pipeline.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
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

// What one pipeline rank builds under a layout of `stages` (PP x VPP of them, in the layout's order: stage s is
// virtual chunk s / pp of pipeline rank s % pp). The decoder layers are numbered in that order, so a rank's
// layers are, chunk by chunk, the 't's counted before its stage onwards (get_layer_id_list). `pp` >= 1, `pp_rank`
// in [0, pp); the stage count a multiple of `pp` (the validation chain checks both).
struct RankStages {
  std::vector<int64_t> decoder_layers;  // global decoder layer indices, in the order the chunks run
  int64_t mtp_layers = 0;               // 'm' on this rank (all in its last chunk in a valid layout)
  std::vector<int64_t> mtp_chunks;      // the chunks holding an 'm'
};
RankStages rank_stages(const std::vector<std::string>& stages, int64_t pp, int64_t pp_rank);

// How the layout breaks TransformerConfig's check (PipelineParallelLayerLayout.validate_layer_layout), or
// Problem::None. `mtp_num_layers` < 0: --mtp-num-layers unset.
struct Check {
  enum class Problem { None, Ends, DecoderCount, MtpCount, MtpPlacement };
  Problem problem = Problem::None;
  std::string what;  // the reason, for the message
};
Check check_layers(const std::vector<std::string>& stages, int64_t pp, int64_t num_layers, int64_t mtp_num_layers);

}  // namespace mr::pipeline_layout
