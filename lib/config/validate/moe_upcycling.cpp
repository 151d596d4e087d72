// MoE upcycling (seed arguments.py 1796-1802): a dense checkpoint is turned into an MoE one and saved, so the
// dense run's optimizer and RNG states are not loaded.
#include "config/validate/section_functions.h"

namespace mr::section {

MR_RULE(kUpcyclingNeedsSave, "upcycling.save-required", "--moe-use-upcycling needs --save.");
MR_WARNING(kUpcyclingNoLoadOptim, "upcycling.no-load-optim", "--moe-use-upcycling turns on --no-load-optim.");
MR_WARNING(kUpcyclingNoLoadRng, "upcycling.no-load-rng", "--moe-use-upcycling turns on --no-load-rng.");

void moe_upcycling(Context& ctx) {
  if (!ctx.on("moe_use_upcycling")) return;
  ctx.require(!ctx.is_none("save"), kUpcyclingNeedsSave,
              "--moe-use-upcycling writes the upcycled model: --save must be given", {"moe_use_upcycling", "save"});
  if (!ctx.on("no_load_optim")) {
    ctx.set("no_load_optim", true, "--moe-use-upcycling");
    ctx.warn(kUpcyclingNoLoadOptim, "--moe-use-upcycling: enabling --no-load-optim",
             {"moe_use_upcycling", "no_load_optim"});
  }
  if (!ctx.on("no_load_rng")) {
    ctx.set("no_load_rng", true, "--moe-use-upcycling");
    ctx.warn(kUpcyclingNoLoadRng, "--moe-use-upcycling: enabling --no-load-rng", {"moe_use_upcycling", "no_load_rng"});
  }
}

}  // namespace mr::section
