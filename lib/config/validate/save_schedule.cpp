// Seed arguments.py 1201-1208 (validate_args): with --save, the save / retain / params-save intervals.
#include <string>

#include "config/validate/section_functions.h"

namespace mr::section {

MR_RULE(kIntervalRequired, "save-schedule.interval-required", "--save needs --save-interval.");
MR_RULE(kIntervalPositive, "save-schedule.interval-positive", "--save-interval must be positive.");
MR_RULE(kRetainPositive, "save-schedule.retain-interval-positive", "--save-retain-interval must be positive.");
MR_RULE(kRetainMultiple, "save-schedule.retain-interval-multiple",
        "--save-retain-interval must be a multiple of --save-interval.");
MR_RULE(kParamsIntervalOverlap, "save-schedule.params-interval-overlap-param-gather",
        "--save-params-interval cannot be combined with --overlap-param-gather.");

void save_schedule(Context& ctx) {
  if (ctx.is_none("save")) return;
  // seed 1201-1203
  ctx.require(!ctx.is_none("save_interval"), kIntervalRequired,
              "--save is set but --save-interval is not: give the checkpoint interval", {"save", "save_interval"});
  const int64_t every = ctx.i("save_interval");
  ctx.require(every > 0, kIntervalPositive, "--save-interval must be positive, got " + std::to_string(every),
              {"save_interval"});
  // seed 1204-1206
  if (!ctx.is_none("save_retain_interval")) {
    const int64_t retain = ctx.i("save_retain_interval");
    ctx.require(retain > 0, kRetainPositive, "--save-retain-interval must be positive, got " + std::to_string(retain),
                {"save_retain_interval"});
    ctx.require(retain % every == 0, kRetainMultiple,
                "--save-retain-interval (" + std::to_string(retain) + ") must be a multiple of --save-interval (" +
                    std::to_string(every) + ")",
                {"save_retain_interval", "save_interval"});
  }
  // seed 1207-1208
  if (!ctx.is_none("save_params_interval"))
    ctx.require(!ctx.on("overlap_param_gather"), kParamsIntervalOverlap,
                "--save-params-interval does not work with --overlap-param-gather", {"save_params_interval",
                "overlap_param_gather"});
}

}  // namespace mr::section
