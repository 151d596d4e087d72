// The hybrid layer pattern (seed arguments.py 655-812 of validate_args): --hybrid-override-pattern
// deprecation, conversion of the legacy --mtp-hybrid-override-pattern to the unified '/' form, deriving
// --num-layers and the virtual pipeline size from the pattern, inferring --mtp-num-layers, MTP checks and
// switching on MLA for MLA-based attention symbols. The pattern helpers port hybrid_layer_allocation.py.
#include "config/validate/hybrid_pattern.h"

#include <string>
#include <vector>

#include "config/validate/section_functions.h"
#include "util/text.h"

namespace mr {
namespace {

MR_RULE(kOverrideAndLayerPattern, "hybrid-pattern.override-and-layer-pattern",
        "--hybrid-override-pattern (deprecated) and --hybrid-layer-pattern cannot both be given.");
MR_WARNING(kOverridePatternDeprecated, "hybrid-pattern.override-pattern-deprecated",
           "--hybrid-override-pattern is deprecated in favour of --hybrid-layer-pattern.");
MR_WARNING(kMtpOverridePatternDeprecated, "hybrid-pattern.mtp-override-pattern-deprecated",
           "--mtp-hybrid-override-pattern is deprecated in favour of the unified --hybrid-layer-pattern.");
MR_RULE(kInvalidSymbol, "hybrid-pattern.invalid-symbol",
        "The hybrid layer pattern may only contain valid layer symbols (and '|' in the main part).");
MR_RULE(kAttentionWithMla, "hybrid-pattern.attention-with-mla",
        "A hybrid layer pattern cannot mix standard attention ('*') with MLA/DSA attention ('+', 'D').");
MR_RULE(kMtpPatternsDiffer, "hybrid-pattern.mtp-patterns-differ",
        "Every MTP depth in the unified hybrid layer pattern must use the same pattern.");
MR_WARNING(kNumLayersOverridden, "hybrid-pattern.num-layers-overridden",
           "--num-layers differs from the layer count of --hybrid-layer-pattern; the pattern wins.");
MR_RULE(kPipesWithFirstLastStageLayers, "hybrid-pattern.pipes-with-first-last-stage-layers",
        "--decoder-first/last-pipeline-num-layers cannot be used when --hybrid-layer-pattern has '|' separators.");
MR_RULE(kLayersPerVirtualStage, "hybrid-pattern.num-layers-per-virtual-stage",
        "--num-layers-per-virtual-pipeline-stage cannot be used with --hybrid-layer-pattern.");
MR_RULE(kVirtualStagesPerRank, "hybrid-pattern.num-virtual-stages-per-rank",
        "--num-virtual-stages-per-pipeline-rank cannot be used with --hybrid-layer-pattern.");
MR_RULE(kPipelineLayout, "hybrid-pattern.pipeline-layout",
        "--pipeline-model-parallel-layout cannot be used with --hybrid-layer-pattern.");
MR_RULE(kAccountForEmbedding, "hybrid-pattern.account-for-embedding",
        "--account-for-embedding-in-pipeline-split cannot be used with --hybrid-layer-pattern.");
MR_RULE(kAccountForLoss, "hybrid-pattern.account-for-loss",
        "--account-for-loss-in-pipeline-split cannot be used with --hybrid-layer-pattern.");
MR_RULE(kSegmentsDivisible, "hybrid-pattern.segments-divisible-by-pp",
        "The number of '|' segments of --hybrid-layer-pattern must be a multiple of the pipeline size.");
MR_WARNING(kMtpNumLayersConflict, "hybrid-pattern.mtp-num-layers-conflict",
           "--mtp-num-layers differs from the MTP depth count of --hybrid-layer-pattern; the pattern wins.");
MR_RULE(kMtpPositionEmbedding, "mtp.rope-or-none-position-embedding",
        "Multi-token prediction needs --position-embedding-type rope or none.");
MR_RULE(kMtpFreezeAll, "mtp.freeze-base-model-with-freeze-all",
        "--freeze-base-model-for-mtp cannot be combined with --freeze-all-layers.");

// A pattern that would take more memory than this to spell out is refused: megatron-run's limit (Python would
// build it), so a rule of the sanity stage. 4 MiB is thousands of times any real model's pattern.
constexpr size_t kMaxPatternChars = size_t(1) << 22;
MR_SANITY_RULE(kPatternTooLarge, "hybrid-pattern.too-large",
               "The unified hybrid layer pattern built from --mtp-hybrid-override-pattern must stay within 4 MiB.");

// A pattern as messages quote it: all of a short one, the start of a long one (util/text.h).
std::string shown(std::string_view pattern) { return "'" + abbreviate(pattern, 120) + "'"; }

bool contains(std::string_view s, char c) { return s.find(c) != std::string_view::npos; }

// The whole UTF-8 character starting at s[i], for messages (Python iterates code points).
std::string char_at(const std::string& s, size_t i) {
  const unsigned char c = static_cast<unsigned char>(s[i]);
  size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 1;
  return s.substr(i, n);
}

// _validate_pattern: only valid layer symbols (and '|' when allowed); no '*' together with '+' or 'D'.
void validate_pattern(Context& ctx, const std::string& pattern, const char* which, bool allow_pipe) {
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (contains(hybrid::kValidLayers, c) || (allow_pipe && c == hybrid::kPipe)) continue;
    ctx.fail(kInvalidSymbol,
             std::string("--hybrid-layer-pattern: '") + char_at(pattern, i) + "' in the " + which + " pattern " +
                 shown(pattern) + " is not a layer symbol (valid: M G * D + - E" +
                 (allow_pipe ? ", and | between pipeline segments" : "") + ")",
             {"hybrid_layer_pattern"});
  }
  if (contains(pattern, hybrid::kAttention) &&
      (contains(pattern, hybrid::kDsAttention) || contains(pattern, hybrid::kMla)))
    ctx.fail(kAttentionWithMla,
             std::string("--hybrid-layer-pattern: the ") + which + " pattern " + shown(pattern) +
                 " mixes standard attention '*' with MLA/DSA attention ('+' or 'D'); one model supports only one",
             {"hybrid_layer_pattern"});
}


}  // namespace

namespace hybrid {

std::string main_part(const std::string& pattern) { return pattern.substr(0, pattern.find(kMtpSeparator)); }

int64_t total_layer_count(Context& ctx, const std::string& pattern) {
  const std::string main = main_part(pattern);
  validate_pattern(ctx, main, "main", /*allow_pipe=*/true);
  int64_t n = 0;
  for (char c : main) n += c != kPipe;
  return n;
}

int64_t total_pipeline_segment_count(const std::string& pattern) {
  int64_t pipes = 0;
  for (char c : main_part(pattern)) pipes += c == kPipe;
  return pipes + 1;
}

ParsedPattern parse(Context& ctx, const std::string& pattern) {
  // pattern.split('/') without holding the parts: a pattern from a file may have millions of '/', and each part
  // is only compared with the first MTP part (time linear in the pattern, memory constant).
  ParsedPattern out;
  const size_t first_sep = pattern.find(kMtpSeparator);
  const std::string main = pattern.substr(0, first_sep);
  if (first_sep == std::string::npos) {
    validate_pattern(ctx, main, "main", true);
    out.main_pattern = main;
    return out;
  }
  if (!main.empty()) {
    validate_pattern(ctx, main, "main", true);
    out.main_pattern = main;
  }
  // The MTP parts: pattern[first_sep + 1 ...], separated by '/'.
  const std::string_view rest = std::string_view(pattern).substr(first_sep + 1);
  if (rest.find_first_not_of(kMtpSeparator) == std::string_view::npos) return out;  // every MTP part is empty
  const size_t mtp_end = rest.find(kMtpSeparator);
  const std::string mtp(rest.substr(0, mtp_end));
  int64_t depths = 1;
  for (size_t at = mtp_end; at != std::string_view::npos;) {
    const size_t next = rest.find(kMtpSeparator, at + 1);
    const std::string_view part = rest.substr(at + 1, next == std::string_view::npos ? rest.npos : next - at - 1);
    ++depths;
    if (part != mtp)
      ctx.fail(kMtpPatternsDiffer,
               "--hybrid-layer-pattern " + shown(pattern) + ": MTP depth 1 has pattern " + shown(mtp) +
                   " but depth " + std::to_string(depths) + " has " + shown(part) +
                   "; every MTP depth must repeat the same pattern",
               {"hybrid_layer_pattern"});
    at = next;
  }
  validate_pattern(ctx, mtp, "MTP", /*allow_pipe=*/false);
  out.mtp_pattern = mtp;
  out.mtp_num_depths = depths;
  return out;
}

}  // namespace hybrid

namespace section {

void hybrid_pattern(Context& ctx) {
  // seed 657-669: the deprecated spelling becomes --hybrid-layer-pattern.
  if (!ctx.is_none("hybrid_override_pattern")) {
    ctx.require(ctx.is_none("hybrid_layer_pattern"), kOverrideAndLayerPattern,
                "--hybrid-override-pattern and --hybrid-layer-pattern are both given; --hybrid-override-pattern "
                "is deprecated, keep only --hybrid-layer-pattern",
                {"hybrid_override_pattern", "hybrid_layer_pattern"});
    warn_rank_0(ctx, kOverridePatternDeprecated,
                        "--hybrid-override-pattern is deprecated; use --hybrid-layer-pattern instead",
                        {"hybrid_override_pattern"});
    ctx.set("hybrid_layer_pattern", ctx["hybrid_override_pattern"], "--hybrid-override-pattern (deprecated)");
  }

  // seed 671-679
  if (!ctx.is_none("mtp_hybrid_override_pattern"))
    warn_rank_0(ctx, kMtpOverridePatternDeprecated,
                        "--mtp-hybrid-override-pattern is deprecated and kept only to load old checkpoints; new hybrid "
                        "models with MTP spell the MTP layers in --hybrid-layer-pattern after '/' once per depth (e.g. "
                        "'M*M*/MM/MM': main 'M*M*', MTP pattern 'MM', 2 depths)",
                        {"mtp_hybrid_override_pattern"});

  // seed 689-699: legacy MTP pattern -> unified "<main>/<mtp>/<mtp>..." (one copy per MTP depth).
  const auto pattern_has_sep = [&] {
    return !ctx.is_none("hybrid_layer_pattern") && contains(ctx.s("hybrid_layer_pattern"), hybrid::kMtpSeparator);
  };
  if (!ctx.is_none("mtp_hybrid_override_pattern") && !ctx.is_none("mtp_num_layers") && ctx.i("mtp_num_layers") > 0 &&
      !pattern_has_sep()) {
    const std::string main = ctx.on("hybrid_layer_pattern") ? ctx.s("hybrid_layer_pattern") : std::string();
    const std::string mtp = ctx.s("mtp_hybrid_override_pattern");
    const int64_t depths = ctx.i("mtp_num_layers");
    if (static_cast<uint64_t>(depths) > kMaxPatternChars / (mtp.size() + 1))
      ctx.fail(kPatternTooLarge,
               "--mtp-num-layers (" + std::to_string(depths) +
                   ") copies of --mtp-hybrid-override-pattern would make a hybrid layer pattern longer than "
                   "megatron-run's limit of " + std::to_string(kMaxPatternChars) + " characters",
               {"mtp_num_layers", "mtp_hybrid_override_pattern"});
    std::string unified = main;
    for (int64_t d = 0; d < depths; ++d) unified += hybrid::kMtpSeparator + mtp;
    ctx.set("hybrid_layer_pattern", Value(unified), "--mtp-hybrid-override-pattern converted to the unified form");
    ctx.set("mtp_hybrid_override_pattern", Value(), "converted into --hybrid-layer-pattern");
  }

  // seed 701-776
  if (!ctx.is_none("hybrid_layer_pattern")) {
    const std::string pattern = ctx.s("hybrid_layer_pattern");
    const int64_t layers = hybrid::total_layer_count(ctx, pattern);
    if (!ctx.is_none("num_layers") && ctx.i("num_layers") != layers)
      warn_rank_0(ctx, kNumLayersOverridden,
                          "--hybrid-layer-pattern is given, so --num-layers (" + std::to_string(ctx.i("num_layers")) +
                              ") is ignored in favour of the pattern's layer count (" + std::to_string(layers) + ")",
                          {"num_layers", "hybrid_layer_pattern"});
    ctx.set("num_layers", Value(layers), "layer count of --hybrid-layer-pattern");

    // Pipe separators lay the stages out themselves; first/last stage sizes only apply to pipe-free patterns.
    if (contains(hybrid::main_part(pattern), hybrid::kPipe)) {
      ctx.require(ctx.is_none("decoder_first_pipeline_num_layers"), kPipesWithFirstLastStageLayers,
                  "--decoder-first-pipeline-num-layers cannot be used when --hybrid-layer-pattern has '|' "
                  "separators: they already define the pipeline stages",
                  {"decoder_first_pipeline_num_layers", "hybrid_layer_pattern"});
      ctx.require(ctx.is_none("decoder_last_pipeline_num_layers"), kPipesWithFirstLastStageLayers,
                  "--decoder-last-pipeline-num-layers cannot be used when --hybrid-layer-pattern has '|' "
                  "separators: they already define the pipeline stages",
                  {"decoder_last_pipeline_num_layers", "hybrid_layer_pattern"});
    }
    ctx.require(ctx.is_none("num_layers_per_virtual_pipeline_stage"), kLayersPerVirtualStage,
                "--num-layers-per-virtual-pipeline-stage cannot be used with --hybrid-layer-pattern; for virtual "
                "pipelining give the pattern a number of '|' segments that is a multiple (> 1) of "
                "--pipeline-model-parallel-size",
                {"num_layers_per_virtual_pipeline_stage", "hybrid_layer_pattern"});
    ctx.require(ctx.is_none("num_virtual_stages_per_pipeline_rank"), kVirtualStagesPerRank,
                "--num-virtual-stages-per-pipeline-rank cannot be used with --hybrid-layer-pattern; the virtual "
                "stages follow from the '|' segments of the pattern",
                {"num_virtual_stages_per_pipeline_rank", "hybrid_layer_pattern"});
    ctx.require(ctx.is_none("pipeline_model_parallel_layout"), kPipelineLayout,
                "--pipeline-model-parallel-layout cannot be used with --hybrid-layer-pattern; the '|' separators "
                "of the pattern lay out the pipeline stages",
                {"pipeline_model_parallel_layout", "hybrid_layer_pattern"});
    ctx.require(!ctx.on("account_for_embedding_in_pipeline_split"), kAccountForEmbedding,
                "--account-for-embedding-in-pipeline-split cannot be used with --hybrid-layer-pattern; the '|' "
                "separators of the pattern lay out the pipeline stages",
                {"account_for_embedding_in_pipeline_split", "hybrid_layer_pattern"});
    ctx.require(!ctx.on("account_for_loss_in_pipeline_split"), kAccountForLoss,
                "--account-for-loss-in-pipeline-split cannot be used with --hybrid-layer-pattern; the '|' "
                "separators of the pattern lay out the pipeline stages",
                {"account_for_loss_in_pipeline_split", "hybrid_layer_pattern"});

    // Virtual pipeline size from the '|' segments.
    const int64_t segments = hybrid::total_pipeline_segment_count(pattern);
    const int64_t pp = ctx.i("transformer_pipeline_model_parallel_size");
    if (segments == 1 && pp > 1) {
      // No pipes: the model splits the layers over the pipeline stages itself.
      ctx.set("virtual_pipeline_model_parallel_size", Value(), "--hybrid-layer-pattern without '|' segments");
    } else {
      ctx.require(pp != 0 && py_mod(segments, pp) == 0, kSegmentsDivisible,
                  "--hybrid-layer-pattern has " + std::to_string(segments) +
                      " pipeline segments, which is not a multiple of --pipeline-model-parallel-size (" +
                      std::to_string(pp) + ")",
                  {"hybrid_layer_pattern", "pipeline_model_parallel_size"});
      if (segments > pp)
        ctx.set("virtual_pipeline_model_parallel_size", Value(py_floordiv(segments, pp)),
                "'|' segments of --hybrid-layer-pattern per pipeline stage");
      else
        ctx.set("virtual_pipeline_model_parallel_size", Value(), "one '|' segment per pipeline stage");
    }
  }

  // seed 778-796: the MTP depth count of a unified pattern decides --mtp-num-layers.
  if (ctx.on("hybrid_layer_pattern") && pattern_has_sep()) {
    const std::string pattern = ctx.s("hybrid_layer_pattern");
    const hybrid::ParsedPattern parsed = hybrid::parse(ctx, pattern);
    if (parsed.mtp_pattern && !parsed.mtp_pattern->empty() && parsed.mtp_num_depths > 0) {
      const int64_t inferred = parsed.mtp_num_depths;
      if (ctx.is_none("mtp_num_layers")) {
        ctx.set("mtp_num_layers", Value(inferred), "MTP depths of --hybrid-layer-pattern");
      } else if (ctx.i("mtp_num_layers") != inferred) {
        warn_rank_0(ctx, kMtpNumLayersConflict,
                            "--mtp-num-layers (" + std::to_string(ctx.i("mtp_num_layers")) + ") disagrees with the " +
                                std::to_string(inferred) + " MTP depth(s) of --hybrid-layer-pattern " +
                                shown(pattern) + "; using " + std::to_string(inferred),
                            {"mtp_num_layers", "hybrid_layer_pattern"});
        ctx.set("mtp_num_layers", Value(inferred), "MTP depths of --hybrid-layer-pattern");
      }
    }
  }

  // seed 798-805: MTP checks.
  if (ctx.on("mtp_num_layers")) {
    const Value& pos = ctx["position_embedding_type"];
    ctx.require(pos == Value("rope") || pos == Value("none"), kMtpPositionEmbedding,
                "multi-token prediction (--mtp-num-layers " + ctx["mtp_num_layers"].py_str() +
                    ") does not support --position-embedding-type " + pos.py_str() + "; use rope or none",
                {"mtp_num_layers", "position_embedding_type"});
  }
  if (ctx.on("freeze_base_model_for_mtp"))
    ctx.require(!ctx.on("freeze_all_layers"), kMtpFreezeAll,
                "--freeze-base-model-for-mtp and --freeze-all-layers cannot be used together",
                {"freeze_base_model_for_mtp", "freeze_all_layers"});

  // seed 807-810: any MLA-based attention symbol in the pattern means MLA projections.
  if (ctx.on("hybrid_layer_pattern")) {
    const std::string& pattern = ctx.s("hybrid_layer_pattern");
    for (char sym : hybrid::kMlaAttention)
      if (contains(pattern, sym)) {
        ctx.set("multi_latent_attention", Value(true), "MLA-based attention symbol in --hybrid-layer-pattern");
        break;
      }
  }
}

}  // namespace section
}  // namespace mr
