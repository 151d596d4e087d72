// The hybrid layer pattern language (megatron/core/models/hybrid/hybrid_layer_allocation.py): layer symbols,
// '|' pipeline-segment separators and '/' MTP separators, as validate_args() uses it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "config/validate/context.h"

namespace mr::hybrid {

// Symbols (HEAD of Megatron-LM's hybrid_layer_allocation.py).
inline constexpr char kMamba = 'M', kGdn = 'G', kAttention = '*', kDsAttention = 'D', kMla = '+', kMlp = '-',
                      kMoe = 'E', kPipe = '|', kMtpSeparator = '/';
inline constexpr std::string_view kValidLayers = "MG*D+-E";
// Symbols.MLA_ATTENTION is not in Megatron-LM HEAD; the seed's use implies "the MLA-based attention symbols",
// which at HEAD are MLA ('+') and DeepSeek sparse attention ('D').
inline constexpr std::string_view kMlaAttention = "+D";

struct ParsedPattern {
  std::optional<std::string> main_pattern;
  std::optional<std::string> mtp_pattern;
  int64_t mtp_num_depths = 0;
};

// The part before the first '/' (Python's pattern.split('/')[0]).
std::string main_part(const std::string& pattern);
// get_hybrid_total_layer_count: validates the main part (pipes allowed) and counts its layers.
int64_t total_layer_count(Context& ctx, const std::string& pattern);
// get_hybrid_total_pipeline_segment_count: number of '|' in the main part + 1.
int64_t total_pipeline_segment_count(const std::string& pattern);
// parse_hybrid_pattern: splits main and MTP parts; every MTP part must be identical and valid.
ParsedPattern parse(Context& ctx, const std::string& pattern);

}  // namespace mr::hybrid
