// Validation rules: each check has a stable id, a level and a one-line description.
//
// Rules are declared once at file scope with MR_RULE and register themselves, so `megatron-run rules` and
// docs/validation.md are generated from the code.
//
// Each rule belongs to a stage, whose name every diagnostic carries (`stage` in the JSON outputs), so that a CI
// can tell Megatron's own verdict from megatron-run's: "validate_args" for the port of Megatron's validate_args()
// (and its OptimizerConfig checks, and validate_yaml() for --yaml-cfg), "sanity" for megatron-run's own checks of
// values Megatron accepts but no job can run with (MR_SANITY_RULE, ids `sanity.*`; see
// lib/config/validate/sanity.cpp). Stages run in the order validation_stages() lists (sections.h). The refusals
// of bad input (a UsageError with an id, exit 2) are rules of the "input" stage (config/input_rules.cpp).
//
// Each rule also counts how often its failing branch fired in this process (a failed require, a fail, a warn,
// or an OptimizerConfig check raising/warning). When the environment variable MR_RULE_HITS_FILE names a file,
// the ids of the rules that fired are appended to it at process exit, one "<id> <count>" line each (the
// `rules_all_tested` test uses this to prove every rule has a triggering test). Counting is one relaxed
// atomic increment; without the variable nothing is written.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mr {

// Stage names (Rule::stage, Diagnostic::stage, validation_stages()).
inline constexpr const char* kStageValidateArgs = "validate_args";  // Megatron's own checks, ported
inline constexpr const char* kStageSanity = "sanity";               // megatron-run's: values no job can run with
inline constexpr const char* kStageParse = "parse";                 // argparse's refusals (exit 2), parser warnings
inline constexpr const char* kStageInput = "input";                 // bad input refused with an id (exit 2)
// The stage of a usage error (exit 2) with rule id `rule`: its registered rule's (input for the input.* ids, launch for
// the launcher's refusals of its environment, ...; "parse" for the parser's, parse.unknown-argument ...), else "parse"
// (the usage errors without an id, "usage").
const char* usage_stage(std::string_view rule);
// What Megatron would refuse at initialisation: a validation stage (rules `init.*`, MR_INIT_RULE in
// config/validate/init.h: the model's construction), then the process-group layout the launcher checks
// (init.process-groups; `topology`, `params`).
inline constexpr const char* kStageInit = "init";
// Not a validation stage: diagnostics of the model plan (`params`) and of the schedule command.
inline constexpr const char* kStagePlan = "plan";
// Not validation stages either: the rules of the launcher's own errors, warnings and notices (ids `launch.*`,
// declared where the launcher raises them) and of the training run's workers (ids `run.*`, `checkpoint.*` and
// `dist.*` that a rank raises, declared in the torch-free library of their layer so that `megatron-run rules`
// lists them). Their tests run processes or need LibTorch, so `rules_all_tested` does not count their hits:
// `runtime_rules_tested` checks that a test names each of them (tests/runtime_rules_tested.sh).
inline constexpr const char* kStageLaunch = "launch";
inline constexpr const char* kStageRun = "run";
// A bug of megatron-run caught where it would otherwise escape (rule kInternalRule, id "internal").
inline constexpr const char* kStageInternal = "internal";

struct Rule {
  enum class Level { Error, Warning };
  const char* id;           // "parallel.world-size-divisible"
  Level level;
  const char* description;  // one line, for docs/validation.md
  const char* file;
  int line;
  const char* stage;        // kStageValidateArgs, kStageSanity, kStageInit, kStageInput; kStageParse, kStagePlan,
                            // kStageLaunch, kStageRun (not validation's)

  Rule(const char* id_, Level level_, const char* description_, const char* file_, int line_,
       const char* stage_ = kStageValidateArgs);
  Rule(const Rule&) = delete;
  Rule& operator=(const Rule&) = delete;

  // Records that the rule's failing branch fired (called by Context::fail/warn and the OptimizerConfig checks).
  void record_hit() const noexcept;
  // How often it fired in this process.
  std::uint64_t hit_count() const noexcept { return hits_.load(std::memory_order_relaxed); }

 private:
  mutable std::atomic<std::uint64_t> hits_{0};
};

// "internal": an exception of ours that no layer turned into a refusal, or a validated value the typed view cannot
// hold (config/args.h): reported as "internal error: ..." rather than escaping (check: exit 3 for the run).
extern const Rule& kInternalRule;

// Every registered rule, sorted by id.
std::vector<const Rule*> all_rules();
// Records a hit of the rule with this id, if one is registered (UsageError's id: the input stage).
void record_rule_hit(const char* id) noexcept;

}  // namespace mr

#define MR_RULE_CAT2(a, b) a##b
#define MR_RULE_CAT(a, b) MR_RULE_CAT2(a, b)
// Declares an error rule: MR_RULE(kName, "section.rule-id", "What it checks.")
#define MR_RULE(var, id, desc) static const ::mr::Rule var{id, ::mr::Rule::Level::Error, desc, __FILE__, __LINE__}
// Declares a warning rule (Megatron's warn_rank_0): printed, not fatal.
#define MR_WARNING(var, id, desc) \
  static const ::mr::Rule var{id, ::mr::Rule::Level::Warning, desc, __FILE__, __LINE__}
// Declares an error rule of megatron-run's own sanity stage: MR_SANITY_RULE(kName, "sanity.rule-id", "...").
#define MR_SANITY_RULE(var, id, desc) \
  static const ::mr::Rule var{id, ::mr::Rule::Level::Error, desc, __FILE__, __LINE__, ::mr::kStageSanity}
