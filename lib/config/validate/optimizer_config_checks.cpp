// The OptimizerConfig checks, run after validate_args (sections.cpp): Megatron builds an OptimizerConfig
// from the resolved arguments (copying every field whose name is an argument) and then runs validate,
// finalize_optimizer_config, validate_run and validate_model, in that order. The config lives on the
// optimizer side only: none of this writes to the namespace. The logic is in config/optimizer_config.cpp.
#include <string_view>
#include <vector>

#include "config/optimizer_config.h"
#include "config/validate/section_functions.h"

namespace mr::section {

namespace {

// The dests of an issue that exist as arguments (fields such as grad_norm_skip_threshold have no flag).
std::vector<std::string_view> known_dests(const Context& ctx, const OptimizerConfigIssue& issue) {
  std::vector<std::string_view> d;
  for (const std::string& f : issue.fields)
    if (ctx.has(f) && d.size() < 4) d.push_back(f);
  return d;
}

// The OptimizerConfig checks count their rule hits where they fail (optimizer_config.cpp), so the issues are
// reported with the *_counted forms, which do not count them again.
void report_warning(Context& ctx, const OptimizerConfigIssue& w) {
  auto d = known_dests(ctx, w);
  switch (d.size()) {
    case 0: ctx.warn_counted(*w.rule, w.message); break;
    case 1: ctx.warn_counted(*w.rule, w.message, {d[0]}); break;
    case 2: ctx.warn_counted(*w.rule, w.message, {d[0], d[1]}); break;
    case 3: ctx.warn_counted(*w.rule, w.message, {d[0], d[1], d[2]}); break;
    default: ctx.warn_counted(*w.rule, w.message, {d[0], d[1], d[2], d[3]}); break;
  }
}

[[noreturn]] void report_failure(Context& ctx, const OptimizerConfigIssue& e) {
  auto d = known_dests(ctx, e);
  switch (d.size()) {
    case 0: ctx.fail_counted(*e.rule, e.message);
    case 1: ctx.fail_counted(*e.rule, e.message, {d[0]});
    case 2: ctx.fail_counted(*e.rule, e.message, {d[0], d[1]});
    case 3: ctx.fail_counted(*e.rule, e.message, {d[0], d[1], d[2]});
    default: ctx.fail_counted(*e.rule, e.message, {d[0], d[1], d[2], d[3]});
  }
}

// The config after finalize_optimizer_config(), which the later sections check (rebuilt from the arguments:
// sections share nothing but the namespace, and building is cheap and deterministic).
OptimizerConfig finalized(Context& ctx) {
  OptimizerConfig c = OptimizerConfig::from_args(ctx.args());
  try {
    c.finalize_optimizer_config(ctx.env());
  } catch (const OptimizerConfigError& e) {
    report_failure(ctx, e.issue);
  }
  return c;
}

}  // namespace

// seed optimizer_config.py:448 validate (warnings raised before a failure are kept, as Megatron logs them).
void optimizer_validate(Context& ctx) {
  const OptimizerConfig c = OptimizerConfig::from_args(ctx.args());
  std::vector<OptimizerConfigIssue> warnings;
  try {
    c.validate(ctx.env(), &warnings);
  } catch (const OptimizerConfigError& e) {
    for (const auto& w : warnings) report_warning(ctx, w);
    report_failure(ctx, e.issue);
  }
  for (const auto& w : warnings) report_warning(ctx, w);
}

// seed optimizer_config.py:667 finalize_optimizer_config
void optimizer_finalize(Context& ctx) { finalized(ctx); }

// seed optimizer_config.py:587 validate_run, with the DDP config Megatron builds from the arguments.
void optimizer_validate_run(Context& ctx) {
  const OptimizerConfig c = finalized(ctx);
  const Namespace& args = ctx.args();
  bool use_torch_fsdp2 = args.has("use_torch_fsdp2") && args.get("use_torch_fsdp2").truthy();
  std::optional<std::string> ckpt_format;
  if (args.has("ckpt_format") && args.get("ckpt_format").is_str()) ckpt_format = args.get("ckpt_format").as_str();
  try {
    c.validate_run(DdpConfigView::from_args(args), use_torch_fsdp2, ckpt_format);
  } catch (const OptimizerConfigError& e) {
    report_failure(ctx, e.issue);
  }
}

// seed optimizer_config.py:628 validate_model
void optimizer_validate_model(Context& ctx) {
  const OptimizerConfig c = finalized(ctx);
  const Namespace& args = ctx.args();
  bool single_grouped = args.has("moe_single_grouped_weight") && args.get("moe_single_grouped_weight").truthy();
  std::optional<int64_t> vpp;
  if (args.has("virtual_pipeline_model_parallel_size") && !args.get("virtual_pipeline_model_parallel_size").is_none())
    vpp = args.get("virtual_pipeline_model_parallel_size").as_int();
  try {
    c.validate_model(single_grouped, vpp);
  } catch (const OptimizerConfigError& e) {
    report_failure(ctx, e.issue);
  }
}

}  // namespace mr::section
