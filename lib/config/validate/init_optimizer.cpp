// The init stage (init.h): what Megatron's optimizer factory refuses once the model is built — get_megatron_optimizer
// (megatron/core/optimizer/__init__.py) sends every --optimizer but adam and sgd (muon, dist_muon, adaptive_muon,
// lion, soap, ...) down its emerging-optimizer path, and that path raises ValueError for fp16 training; on its
// standard path (adam, sgd) it raises ValueError for the precision-aware optimizer without the distributed one
// (unless the model is wrapped by Megatron-FSDP v2, which takes the other branch of that check).
#include <string>

#include "config/validate/init.h"

namespace mr::init {
namespace {

MR_INIT_RULE(kEmergingOptimizerFp16, "init.emerging-optimizer-fp16",
             "An --optimizer other than adam or sgd (an emerging optimizer: muon, lion, soap, ...) does not train "
             "with --fp16 (get_megatron_optimizer raises ValueError); use --bf16 or adam/sgd.");

MR_INIT_RULE(kPrecisionAwareDistOpt, "init.precision-aware-needs-distributed-optimizer",
             "--use-precision-aware-optimizer needs --use-distributed-optimizer (get_megatron_optimizer raises "
             "ValueError otherwise; Megatron-FSDP v2 models excepted).");

}  // namespace

void optimizer(Context& ctx) {
  const Value& opt = ctx["optimizer"];
  if (opt == Value("adam") || opt == Value("sgd")) {
    // get_megatron_optimizer: `if is_mfsdp_v2: ... elif use_precision_aware_optimizer and not
    // use_distributed_optimizer: raise ValueError(...)`; the model is FullyShardedDataParallelV2 with
    // --use-megatron-fsdp --megatron-fsdp-version 2.
    const bool mfsdp_v2 = ctx.on("use_megatron_fsdp") && ctx["megatron_fsdp_version"] == Value(2);
    ctx.require(mfsdp_v2 || !ctx.on("use_precision_aware_optimizer") || ctx.on("use_distributed_optimizer"),
                kPrecisionAwareDistOpt,
                would_fail("get_megatron_optimizer") +
                    "--use-precision-aware-optimizer is only supported with the distributed optimizer "
                    "(\"--use-precision-aware-optimizer only supported with distributed optimizer\"); add "
                    "--use-distributed-optimizer",
                {"use_precision_aware_optimizer", "use_distributed_optimizer"});
    return;
  }
  ctx.require(!ctx.on("fp16"), kEmergingOptimizerFp16,
              would_fail("get_megatron_optimizer") + "--optimizer " + opt.py_str() +
                  " takes Megatron's emerging-optimizer path, which does not support --fp16 (\"emerging optimizer "
                  "with fp16 is not supported.\"); train with --bf16, or use --optimizer adam or sgd with --fp16",
              {"optimizer", "fp16"});
}

}  // namespace mr::init
