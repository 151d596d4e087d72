// The init stage (init.h): what Megatron's optimizer factory refuses once the model is built — get_megatron_optimizer
// (megatron/core/optimizer/__init__.py) sends every --optimizer but adam and sgd (muon, dist_muon, adaptive_muon,
// lion, soap, ...) down its emerging-optimizer path, and that path raises ValueError for fp16 training.
#include <string>

#include "config/validate/init.h"

namespace mr::init {
namespace {

MR_INIT_RULE(kEmergingOptimizerFp16, "init.emerging-optimizer-fp16",
             "An --optimizer other than adam or sgd (an emerging optimizer: muon, lion, soap, ...) does not train "
             "with --fp16 (get_megatron_optimizer raises ValueError); use --bf16 or adam/sgd.");

}  // namespace

void optimizer(Context& ctx) {
  const Value& opt = ctx["optimizer"];
  if (opt == Value("adam") || opt == Value("sgd")) return;
  ctx.require(!ctx.on("fp16"), kEmergingOptimizerFp16,
              would_fail("get_megatron_optimizer") + "--optimizer " + opt.py_str() +
                  " takes Megatron's emerging-optimizer path, which does not support --fp16 (\"emerging optimizer "
                  "with fp16 is not supported.\"); train with --bf16, or use --optimizer adam or sgd with --fp16",
              {"optimizer", "fp16"});
}

}  // namespace mr::init
