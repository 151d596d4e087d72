// RLConfig.__post_init__ (seed 497: validate_args builds RLConfig from the arguments): the GRPO loop's
// generation settings, checked only for an RL run (--perform-rl-step). RLConfig is not in the public Megatron-LM
// tree the seed imports; the checks are what the seed's help texts of these flags state and a later RLConfig
// asserts: a lag of at least -1 and above 0 only with partial rollouts, an in-flight cap of at least 1 and above
// one training batch only with partial rollouts, the two exclusive unless they agree, rollouts submitted other
// than by batch only with partial rollouts, no consumption by rollout (R). The derived values stay on the config
// (validate_args does not copy them back to the arguments).
#include <string>

#include "config/validate/section_functions.h"

namespace mr::section {

MR_RULE(kRlGenerationLag, "rl.generation-lag",
        "--rl-generation-lag must be at least -1, and above 0 it needs --rl-partial-rollouts (RLConfig).");
MR_RULE(kRlInflight, "rl.max-inflight-requests",
        "--rl-max-inflight-requests must be at least 1; above one training batch (--grpo-prompts-per-step x "
        "--grpo-group-size requests) it needs --rl-partial-rollouts; it excludes a --rl-generation-lag it does not "
        "imply (RLConfig).");
MR_RULE(kRlGranularity, "rl.rollout-granularity",
        "--rl-submission-granularity R or G needs --rl-partial-rollouts; --rl-consumption-granularity R is not "
        "supported (RLConfig).");

void rl_config(Context& ctx) {
  if (!ctx.on("perform_rl_step")) return;
  const bool partial = ctx.on("rl_partial_rollouts");
  const std::string cfg = "RLConfig would fail: ";
  std::optional<double> lag;
  if (!ctx.is_none("rl_generation_lag")) lag = ctx.f("rl_generation_lag");
  if (!ctx.is_none("rl_max_inflight_requests")) {
    const int64_t inflight = ctx.i("rl_max_inflight_requests");
    ctx.require(inflight >= 1, kRlInflight,
                cfg + "--rl-max-inflight-requests (" + std::to_string(inflight) + ") must be at least 1",
                {"rl_max_inflight_requests"});
    const int64_t batch = ctx.mul(ctx.i("grpo_prompts_per_step"), ctx.i("grpo_group_size"),
                                  "--grpo-prompts-per-step x --grpo-group-size",
                                  {"grpo_prompts_per_step", "grpo_group_size"});
    if (inflight > batch)
      ctx.require(partial, kRlInflight,
                  cfg + "--rl-max-inflight-requests (" + std::to_string(inflight) +
                      ") above one training batch (--grpo-prompts-per-step x --grpo-group-size = " +
                      std::to_string(batch) + " requests) needs --rl-partial-rollouts",
                  {"rl_max_inflight_requests", "rl_partial_rollouts", "grpo_prompts_per_step", "grpo_group_size"});
    if (batch != 0) {
      // In flight: (lag + 1) training batches of P x G requests each.
      const double implied = static_cast<double>(inflight) / static_cast<double>(batch) - 1.0;
      ctx.require(!lag || *lag == implied, kRlInflight,
                  cfg + "--rl-generation-lag (" + ctx["rl_generation_lag"].py_str() +
                      ") and --rl-max-inflight-requests (" + std::to_string(inflight) + ", a lag of " +
                      Value(implied).py_str() + ") exclude each other: give one",
                  {"rl_generation_lag", "rl_max_inflight_requests"});
      lag = implied;
    }
  }
  if (lag) {
    ctx.require(*lag >= -1, kRlGenerationLag,
                cfg + "--rl-generation-lag (" + Value(*lag).py_str() + ") must be at least -1",
                {"rl_generation_lag", "rl_max_inflight_requests"});
    if (*lag > 0)
      ctx.require(partial, kRlGenerationLag,
                  cfg + "a generation lag above 0 (" + Value(*lag).py_str() +
                      (ctx.is_none("rl_generation_lag") ? ", from --rl-max-inflight-requests" : "") +
                      ") needs --rl-partial-rollouts",
                  {"rl_generation_lag", "rl_partial_rollouts"});
  }
  const std::string submit = ctx.s("rl_submission_granularity");
  ctx.require(submit == "B" || partial, kRlGranularity,
              cfg + "--rl-submission-granularity " + submit + " needs --rl-partial-rollouts",
              {"rl_submission_granularity", "rl_partial_rollouts"});
  ctx.require(ctx.s("rl_consumption_granularity") != "R", kRlGranularity,
              cfg + "--rl-consumption-granularity R is not supported", {"rl_consumption_granularity"});
}

}  // namespace mr::section
