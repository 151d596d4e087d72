// The init stage (init.h): what Megatron's optimizer factory refuses once the model is built — get_megatron_optimizer
// (megatron/core/optimizer/__init__.py) sends every --optimizer but adam and sgd (muon, dist_muon, adaptive_muon,
// lion, soap, ...) down its emerging-optimizer path, and that path raises ValueError for fp16 training; on its
// standard path (adam, sgd) it raises ValueError for the precision-aware optimizer without the distributed one
// (unless the model is wrapped by Megatron-FSDP v2, which takes the other branch of that check), and its fp16
// dynamic loss scaler asserts that the floor is not above the start.
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

MR_INIT_RULE(kMinLossScale, "init.fp16-min-loss-scale-above-initial",
             "With --fp16 and no --loss-scale, --min-loss-scale must not exceed --initial-loss-scale "
             "(DynamicGradScaler asserts min_scale <= initial_scale).");

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
    // _get_megatron_optimizer_based_on_param_groups: `if config.loss_scale: ConstantGradScaler(...) elif
    // config.fp16: DynamicGradScaler(initial_scale=initial_loss_scale, min_scale=min_loss_scale, ...)`.
    const bool constant = !ctx.is_none("loss_scale") && ctx.f("loss_scale") != 0.0;
    if (ctx.on("fp16") && !constant && !ctx.is_none("min_loss_scale") && !ctx.is_none("initial_loss_scale"))
      ctx.require(!(ctx.f("min_loss_scale") > ctx.f("initial_loss_scale")), kMinLossScale,
                  would_fail("get_megatron_optimizer") + "--min-loss-scale (" + ctx["min_loss_scale"].py_str() +
                      ") is above --initial-loss-scale (" + ctx["initial_loss_scale"].py_str() +
                      "): the fp16 dynamic loss scaler asserts min_scale <= initial_scale",
                  {"min_loss_scale", "initial_loss_scale", "fp16"});
    return;
  }
  ctx.require(!ctx.on("fp16"), kEmergingOptimizerFp16,
              would_fail("get_megatron_optimizer") + "--optimizer " + opt.py_str() +
                  " takes Megatron's emerging-optimizer path, which does not support --fp16 (\"emerging optimizer "
                  "with fp16 is not supported.\"); train with --bf16, or use --optimizer adam or sgd with --fp16",
              {"optimizer", "fp16"});
}

}  // namespace mr::init
