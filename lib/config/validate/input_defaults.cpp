// Seed arguments.py 590-625: defaults supplied by the calling script, the legacy --split default,
// data-path exclusivity and --phase-transition-iterations parsing.
#include <algorithm>
#include <string>
#include <vector>

#include "config/converters.h"
#include "config/validate/section_functions.h"
#include "util/text.h"

namespace mr::section {

MR_WARNING(kDefaultOverridden, "input.default-overridden",
           "A default supplied by the training script is overridden by a value given on the command line.");
MR_WARNING(kLegacySplit, "input.legacy-split-default",
           "--data-path without --split falls back to the legacy split 969, 30, 1.");
MR_RULE(kDataPathExclusive, "input.data-path-or-data-args-path",
        "--data-path and --data-args-path are mutually exclusive.");
MR_RULE(kPerSplitExclusive, "input.per-split-paths-or-args-path",
        "--train-data-path / --valid-data-path / --test-data-path and --per-split-data-args-path are mutually "
        "exclusive.");
MR_RULE(kPhaseTransitionInts, "input.phase-transition-iterations-ints",
        "--phase-transition-iterations must be a comma-separated list of integers.");

void apply_input_defaults(Context& ctx, const Object& defaults) {
  // seed 591-600: a default applies only where the argument is unset (None); otherwise say it is overridden.
  for (const auto& [key, value] : defaults) {
    if (ctx.has(key) && !ctx.is_none(key)) {
      ctx.warn(kDefaultOverridden,
               "the script's default " + key + "=" + value.py_str() + " is overridden by " + key + "=" +
                   ctx[key].py_str(),
               {key});
    } else {
      ctx.set(key, value, "input-defaults: default supplied by the training script");
    }
  }
}

void input_defaults(Context& ctx) {
  // seed 591-600: megatron-run validates as validate_args(args, {}) does: no script defaults.
  apply_input_defaults(ctx, Object{});

  // seed 602-606
  if (!ctx.is_none("data_path") && ctx.is_none("split")) {
    ctx.warn(kLegacySplit,
             "--data-path is given without --split; using the legacy default split \"969, 30, 1\" "
             "(train, validation, test)",
             {"data_path", "split"});
    ctx.set("split", "969, 30, 1", "input-defaults: legacy default split");
  }

  // seed 608-611
  ctx.require(ctx.is_none("data_path") || ctx.is_none("data_args_path"), kDataPathExclusive,
              "give the blend either with --data-path or in a file with --data-args-path, not both",
              {"data_path", "data_args_path"});

  // seed 612-620
  const bool per_split_paths =
      !ctx.is_none("train_data_path") || !ctx.is_none("valid_data_path") || !ctx.is_none("test_data_path");
  ctx.require(!per_split_paths || ctx.is_none("per_split_data_args_path"), kPerSplitExclusive,
              "give per-split blends either with --train-data-path / --valid-data-path / --test-data-path or in a "
              "file with --per-split-data-args-path, not both",
              {"per_split_data_args_path", "train_data_path", "valid_data_path", "test_data_path"});

  // seed 622-625: "a, b, c" -> sorted list of ints (Python int() of each stripped piece).
  if (ctx.on("phase_transition_iterations")) {
    const std::string text = ctx.s("phase_transition_iterations");
    std::vector<int64_t> its;
    for (const std::string& piece : split(text, ',')) {
      try {
        its.push_back(parse_py_int(piece));
      } catch (const ConvError&) {
        ctx.fail(kPhaseTransitionInts,
                 "--phase-transition-iterations " + Value(text).py_repr() + ": " + Value(piece).py_repr() +
                     " is not an integer",
                 {"phase_transition_iterations"});
      }
    }
    std::sort(its.begin(), its.end());
    List out;
    for (int64_t v : its) out.emplace_back(v);
    ctx.set("phase_transition_iterations", Value(out), "input-defaults: sorted iterations");
  }
}

}  // namespace mr::section
