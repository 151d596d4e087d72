// What `topology`, `params` and a launch share: the arguments resolved for a world size, and the rank layout.
#include <algorithm>
#include <iostream>

#include "cli.h"
#include "config/rule.h"
#include "launch.h"
#include "optim/schedule.h"
#include "run/checkpoint_format.h"
#include "run/model.h"
#include "run/run_support.h"
#include "util/log.h"

namespace mr::app {
namespace {

// The rank layout's checks as a rule of the init stage, so that `megatron-run rules` and docs/validation.md list it
// (its failing branch is layout_diagnostic below).
const Rule kProcessGroupsRule{kInitProcessGroups, Rule::Level::Error,
                              "The process-group layout for the world size: the sizes Megatron's "
                              "initialize_model_parallel() divides the world by, the expert groups, the rank order.",
                              __FILE__, __LINE__, kStageInit};

// The learning-rate / weight-decay scheduler's checks (Megatron's OptimizerParamScheduler asserts them when its
// training builds the scheduler, after the model; optim/schedule.h).
const Rule kLrScheduleRule{kInitLrSchedule, Rule::Level::Error,
                           "The learning-rate and weight-decay schedule a training run builds: warmup shorter than "
                           "the decay, lr and weight-decay ranges, WSD's annealing phase, train length given.",
                           __FILE__, __LINE__, kStageInit};

// What megatron-run's own training run cannot run (run/run_support.h), before its workers start.
const Rule kTrainingRunRule{kInitTrainingRun, Rule::Level::Error,
                            "What megatron-run's own training run cannot run (an optimizer without a kernel of ours, "
                            "a --muon-tp-mode it does not implement, a model it does not plan, a --yaml-cfg file, "
                            "...): refused before its workers start.",
                            __FILE__, __LINE__, kStageInit};

}  // namespace

std::optional<Diagnostic> training_run_check(const Outcome& out) {
  // --yaml-cfg: Megatron's GPT builder cannot build a model from any such file as read (docs/yaml-cfg.md, warning
  // yaml.model-config.fields-incomplete), and its namespace holds sections, not the flags our run reads.
  if (out.parsed.yaml_cfg) {
    kTrainingRunRule.record_hit();
    return Diagnostic{Diagnostic::Level::Error, kInitTrainingRun,
                      "--yaml-cfg: megatron-run's own training run does not take a --yaml-cfg file: Megatron's GPT "
                      "builder cannot build a model from any --yaml-cfg file as read (docs/yaml-cfg.md, warning "
                      "yaml.model-config.fields-incomplete), and the file's sections are not the flags the run "
                      "reads; `megatron-run --dry-run --yaml-cfg FILE` and `megatron-run check --yaml-cfg FILE` "
                      "validate it, a program given to launch (megatron-run --yaml-cfg FILE SCRIPT) receives it, "
                      "and the run takes the same settings as flags (--config FILE)",
                      {"--yaml-cfg"}, {}, kStageInit};
  }
  try {
    run::check_run_supported(Args::from(out.parsed.ns));
  } catch (const ArgsError&) {
    return std::nullopt;  // init_check reports it
  } catch (const run::RunError& e) {
    kTrainingRunRule.record_hit();
    return Diagnostic{Diagnostic::Level::Error, kInitTrainingRun, e.what(), {}, {}, kStageInit};
  }
  return std::nullopt;
}

std::optional<Diagnostic> save_settings_check(const Outcome& out, bool trains) {
  if (out.parsed.yaml_cfg) return std::nullopt;
  std::optional<run::SaveSettingsRefusal> r;
  try {
    r = run::save_settings_refusal(Args::from(out.parsed.ns));
  } catch (const ArgsError&) {
    return std::nullopt;  // init_check reports it
  }
  // A dry run (any program): what Megatron's own save fails on is said; what only our run does not model is not.
  if (!r || (!trains && !r->megatron_fails)) return std::nullopt;
  r->rule->record_hit();
  return Diagnostic{trains ? Diagnostic::Level::Error : Diagnostic::Level::Warning, r->rule->id,
                    trains ? r->message
                           : "Megatron's training would fail when it saves (a program that does not save is not "
                             "affected): " + r->message,
                    r->flags, {}, kStageRun};
}

std::optional<Diagnostic> schedule_check(const Outcome& out, bool trains) {
  if (out.parsed.yaml_cfg) return std::nullopt;
  try {
    (void)optim::ScheduleConfig::from_args(Args::from(out.parsed.ns));
  } catch (const ArgsError&) {
    return std::nullopt;  // init_check reports it
  } catch (const std::invalid_argument& e) {
    return lr_schedule_diagnostic(e.what(), trains);
  }
  return std::nullopt;
}

Diagnostic lr_schedule_diagnostic(const std::string& what, bool trains) {
  kLrScheduleRule.record_hit();
  Diagnostic d;
  d.level = trains ? Diagnostic::Level::Error : Diagnostic::Level::Warning;
  d.rule = kInitLrSchedule;
  d.message = std::string(trains ? "the training run would fail when it builds its learning-rate scheduler: "
                                 : "Megatron's training would fail when it builds its learning-rate scheduler "
                                   "(a program that does not train is not affected): ") +
              what;
  d.stage = kStageInit;
  return d;
}

Diagnostic layout_diagnostic(const parallel::LayoutError& e, const Namespace* ns) {
  kProcessGroupsRule.record_hit();
  Diagnostic d;
  d.rule = kInitProcessGroups;
  d.message = std::string("Megatron would fail at initialisation (initialize_model_parallel): ") + e.what();
  d.stage = kStageInit;
  if (!ns) return d;
  // The flags of the arguments the error names ("... (--expert-tensor-parallel-size 1, --expert-model-parallel-size
  // 8, ...)"), in its order; placed, as the other rules are, at the first one a config file set.
  const Schema& schema = Schema::megatron();
  for (const ArgId id : e.args) {
    const std::string_view dest = dest_of(id);
    const std::string flag = schema.flag_for_dest(dest);
    if (std::find(d.flags.begin(), d.flags.end(), flag) != d.flags.end()) continue;
    d.flags.push_back(flag);
    if (d.where.empty() && ns->has(dest) && ns->provenance(dest).kind == Provenance::Kind::Config)
      d.where = ns->provenance(dest).where;
  }
  return d;
}

namespace {

// Megatron's layout of the ranks. A world beyond what megatron-run lays out is the user's input, refused as
// input.layout-ranks (exit 2); a layout Megatron would refuse stays a LayoutError for the caller.
parallel::Layout build_layout(const Args& args) {
  try {
    return parallel::Layout::build(parallel::LayoutSpec::from_args(args));
  } catch (const parallel::LayoutLimitError& e) {
    throw UsageError(e.what(), {"--world-size"}, {}, "input.layout-ranks");
  }
}

}  // namespace

std::optional<Diagnostic> init_check(const Outcome& out) {
  if (out.parsed.yaml_cfg) return std::nullopt;  // a --yaml-cfg namespace holds sections, not flags
  try {
    (void)build_layout(Args::from(out.parsed.ns));
  } catch (const parallel::LayoutError& e) {
    return layout_diagnostic(e, &out.parsed.ns);
  } catch (const ArgsError& e) {
    kInternalRule.record_hit();
    return Diagnostic{Diagnostic::Level::Error, kInternalRule.id, std::string("internal error: ") + e.what(), {}, {},
                      kInternalRule.stage};
  }
  return std::nullopt;
}

int resolve_job_layout(const char* cmd, const CommonOptions& common, const std::vector<Token>& rest, Outcome& out,
                       Args& args, parallel::Layout& layout, const std::vector<std::string>& extra_formats) {
  Invocation inv = common.invocation(extra_formats);
  inv.cli = rest;
  if (!inv.world_size && !inv.env.vars.count("WORLD_SIZE")) {
    // A word that is no flag comes first (`--world-sise 2` is a misspelt --world-size, not a missing one): the
    // parse refuses it (unrecognized arguments), else the world size is what is missing.
    (void)parse_arguments(Schema::megatron(), inv);
    throw UsageError(std::string(cmd) + ": --world-size N is required (or WORLD_SIZE in the environment)", {"--world-size"});
  }
  if (const std::optional<Diagnostic> d = world_size_not_job(inv)) print_warning_diagnostic(*d);
  out = resolve(Schema::megatron(), inv);
  log_warnings(out);
  if (!out.ok()) return report_failure(common, out.diagnostics);
  try {
    args = Args::from(out.parsed.ns);
  } catch (const ArgsError& e) {
    kInternalRule.record_hit();
    return report_failure(common, Diagnostic{Diagnostic::Level::Error, kInternalRule.id,
                                             std::string("internal error: ") + e.what(), {}, {}, kInternalRule.stage});
  }
  try {
    layout = build_layout(args);
  } catch (const parallel::LayoutError& e) {
    return report_failure(common, layout_diagnostic(e, &out.parsed.ns));
  }
  return 0;
}

}  // namespace mr::app
