// Checkpointing (seed arguments.py 1672-1786): deprecated checkpoint flags, fully parallel save/load, the
// PG-distribution cache, loading main params / streamed dequantisation, async save, logits dumps, frozen layers
// and the checkpoint-iteration override.
#include "config/validate/section_functions.h"

namespace mr::section {

// Megatron prints these four on rank 0 (print, not warn_rank_0); they are kept as warnings here.
MR_WARNING(kFullyParallelSaveDeprecated, "checkpointing.fully-parallel-save-deprecated",
           "--ckpt-fully-parallel-save is deprecated and does nothing (parallel save is the default).");
MR_WARNING(kNonParallelSaveDistOpt, "checkpointing.non-parallel-save-distributed-optimizer",
           "--no-ckpt-fully-parallel-save with the distributed optimizer prevents resuming with other parallelism.");
MR_WARNING(kUseDistCkptDeprecated, "checkpointing.use-dist-ckpt-deprecated",
           "--use-dist-ckpt is deprecated and does nothing; --ckpt-format selects the format.");
MR_WARNING(kDistCkptFormatDeprecated, "checkpointing.dist-ckpt-format-deprecated",
           "--dist-ckpt-format is deprecated and does nothing; --ckpt-format selects the format.");
MR_WARNING(kLoadExchangeAlgo, "checkpointing.parallel-load-exchange-algo",
           "Fully parallel load is numerically safe only with --ckpt-fully-parallel-load-exchange-algo broadcast.");
MR_RULE(kPgCacheSameGroup, "checkpointing.pg-cache-same-group",
        "--ckpt-pg-tensors-cache-path needs the same save and load parallelization process group.");
MR_RULE(kMainParamsNoLoadOptim, "checkpointing.main-params-needs-no-load-optim",
        "--load-main-params-from-ckpt needs --no-load-optim.");
MR_RULE(kDequantInferenceOnly, "checkpointing.stream-dequant-inference-only",
        "--stream-ckpt-dequant needs --no-load-optim and cannot be used with --finetune.");
MR_RULE(kDequantMainParams, "checkpointing.stream-dequant-no-main-params",
        "--stream-ckpt-dequant cannot be combined with --load-main-params-from-ckpt.");
MR_RULE(kDequantDelayed, "checkpointing.stream-dequant-no-delayed-fp8",
        "--stream-ckpt-dequant does not support --fp8-recipe delayed.");
MR_RULE(kDequantExchangeAlgo, "checkpointing.stream-dequant-parallel-load-broadcast",
        "--stream-ckpt-dequant with --ckpt-fully-parallel-load needs the broadcast exchange algorithm.");
MR_WARNING(kAsyncSaveDisabled, "checkpointing.async-save-needs-persistent-worker",
           "--async-save needs --use-persistent-ckpt-worker; without it async save is turned off.");
MR_RULE(kLogitsNeedAsyncSave, "checkpointing.logits-save-dir-needs-async-save",
        "--logits-save-dir needs --async-save (and --use-persistent-ckpt-worker).");
MR_WARNING(kLogitsNotFrozen, "checkpointing.logits-save-dir-training",
           "--logits-save-dir without --freeze-all-layers keeps training the model while logits are dumped.");
MR_RULE(kLogitsNoRampup, "checkpointing.logits-save-dir-no-rampup",
        "--logits-save-dir does not support --rampup-batch-size.");
MR_WARNING(kFrozenNoDistOpt, "checkpointing.frozen-disables-distributed-optimizer",
           "--freeze-all-layers turns off --use-distributed-optimizer.");
MR_WARNING(kFrozenNoParamGather, "checkpointing.frozen-disables-overlap-param-gather",
           "--freeze-all-layers turns off --overlap-param-gather.");
MR_RULE(kOverrideIterFinetune, "checkpointing.override-iteration-with-finetune",
        "--override-ckpt-iteration cannot be combined with --finetune.");

void checkpoint_save_load(Context& ctx) {
  const bool rank0 = ctx["rank"] == Value(0);
  const bool dist_ckpt = dist_ckpt_in_use(ctx);

  // seed 1673-1691: deprecated / discouraged flags, printed on rank 0.
  if (ctx.on("ckpt_fully_parallel_save_deprecated") && rank0)
    ctx.warn(kFullyParallelSaveDeprecated,
             "--ckpt-fully-parallel-save is deprecated and has no effect; use --no-ckpt-fully-parallel-save to "
             "turn parallel save off",
             {"ckpt_fully_parallel_save_deprecated"});
  if (dist_ckpt && !ctx.on("ckpt_fully_parallel_save") && ctx.on("use_distributed_optimizer") && rank0)
    ctx.warn(kNonParallelSaveDistOpt,
             "with --no-ckpt-fully-parallel-save and the distributed optimizer, training cannot be resumed with "
             "a different parallelism; consider dropping --no-ckpt-fully-parallel-save",
             {"ckpt_fully_parallel_save", "use_distributed_optimizer"});
  if (ctx.on("use_dist_ckpt_deprecated") && rank0)
    ctx.warn(kUseDistCkptDeprecated, "--use-dist-ckpt is deprecated and has no effect; use --ckpt-format",
             {"use_dist_ckpt_deprecated"});
  if (ctx.on("dist_ckpt_format_deprecated") && rank0)
    ctx.warn(kDistCkptFormatDeprecated, "--dist-ckpt-format is deprecated and has no effect; use --ckpt-format",
             {"dist_ckpt_format_deprecated"});

  // seed 1692-1697
  if (dist_ckpt && ctx.on("ckpt_fully_parallel_load") &&
      !(ctx["ckpt_fully_parallel_load_exchange_algo"] == Value("broadcast")))
    ctx.warn(kLoadExchangeAlgo,
             "--ckpt-fully-parallel-load-exchange-algo " + ctx["ckpt_fully_parallel_load_exchange_algo"].py_str() +
                 ": only 'broadcast' is supported for fully parallel load; other algorithms are not numerically "
                 "stable yet",
             {"ckpt_fully_parallel_load_exchange_algo", "ckpt_fully_parallel_load"});

  // seed 1699-1716: the cache holds one file per group, with both distributions of that group.
  if (!ctx.is_none("ckpt_pg_tensors_cache_path")) {
    const Value& save_pg = ctx["ckpt_fully_parallel_save_process_group"];
    const Value& load_pg = ctx["ckpt_fully_parallel_load_process_group"];
    ctx.require(save_pg == load_pg, kPgCacheSameGroup,
                "--ckpt-pg-tensors-cache-path keys its files by parallelization group, so "
                "--ckpt-fully-parallel-save-process-group (" +
                    save_pg.py_str() + ") and --ckpt-fully-parallel-load-process-group (" + load_pg.py_str() +
                    ") must be the same; otherwise one side finds no cache file",
                {"ckpt_pg_tensors_cache_path", "ckpt_fully_parallel_save_process_group",
                 "ckpt_fully_parallel_load_process_group"});
  }

  // seed 1718-1719
  if (ctx.on("load_main_params_from_ckpt"))
    ctx.require(ctx.on("no_load_optim"), kMainParamsNoLoadOptim,
                "--load-main-params-from-ckpt must be combined with --no-load-optim",
                {"load_main_params_from_ckpt", "no_load_optim"});

  // seed 1720-1743: streamed dequantisation is an inference-only load path.
  if (ctx.on("stream_ckpt_dequant")) {
    ctx.require(ctx.on("no_load_optim") && !ctx.on("finetune"), kDequantInferenceOnly,
                "--stream-ckpt-dequant only loads for inference: it needs --no-load-optim and excludes --finetune",
                {"stream_ckpt_dequant", "no_load_optim", "finetune"});
    ctx.require(!ctx.on("load_main_params_from_ckpt"), kDequantMainParams,
                "--stream-ckpt-dequant cannot be used with --load-main-params-from-ckpt: main params would come "
                "from the re-quantized weights, not the high-precision checkpoint values",
                {"stream_ckpt_dequant", "load_main_params_from_ckpt"});
    ctx.require(ctx.is_none("fp8") || !(ctx["fp8_recipe"] == Value("delayed")), kDequantDelayed,
                "--stream-ckpt-dequant cannot restore delayed-scaling FP8 state: use --fp8-recipe tensorwise, "
                "mxfp8, blockwise or nvfp4",
                {"stream_ckpt_dequant", "fp8_recipe", "fp8"});
    ctx.require(
        !ctx.on("ckpt_fully_parallel_load") || ctx["ckpt_fully_parallel_load_exchange_algo"] == Value("broadcast"),
        kDequantExchangeAlgo,
        "--stream-ckpt-dequant with --ckpt-fully-parallel-load needs "
        "--ckpt-fully-parallel-load-exchange-algo broadcast (got " +
            ctx["ckpt_fully_parallel_load_exchange_algo"].py_str() + ")",
        {"stream_ckpt_dequant", "ckpt_fully_parallel_load", "ckpt_fully_parallel_load_exchange_algo"});
  }

  // seed 1745-1751
  if (dist_ckpt && ctx.on("async_save") && !ctx.on("use_persistent_ckpt_worker")) {
    ctx.warn(kAsyncSaveDisabled, "--async-save needs --use-persistent-ckpt-worker; turning --async-save off",
             {"async_save", "use_persistent_ckpt_worker"});
    ctx.set("async_save", false, "--async-save without --use-persistent-ckpt-worker");
  }

  // seed 1753-1769: logits are flushed as an async request of the checkpoint queue.
  if (!ctx.is_none("logits_save_dir")) {
    ctx.require(ctx.on("async_save"), kLogitsNeedAsyncSave,
                "--logits-save-dir writes through the async checkpoint queue: add --async-save (with "
                "--use-persistent-ckpt-worker)",
                {"logits_save_dir", "async_save"});
    if (!ctx.on("freeze_all_layers"))
      ctx.warn(kLogitsNotFrozen,
               "--logits-save-dir without --freeze-all-layers: the loss is still computed and the model keeps "
               "training while logits are dumped; add --freeze-all-layers for a frozen-teacher dump",
               {"logits_save_dir", "freeze_all_layers"});
    ctx.require(ctx.is_none("rampup_batch_size"), kLogitsNoRampup,
                "--logits-save-dir maps samples to iterations with a fixed global batch size: drop "
                "--rampup-batch-size",
                {"logits_save_dir", "rampup_batch_size"});
  }

  // seed 1771-1781
  if (ctx.on("freeze_all_layers")) {
    if (ctx.on("use_distributed_optimizer")) {
      ctx.warn(kFrozenNoDistOpt, "--freeze-all-layers is incompatible with --use-distributed-optimizer; turning it off",
               {"freeze_all_layers", "use_distributed_optimizer"});
      ctx.set("use_distributed_optimizer", false, "--freeze-all-layers");
    }
    if (ctx.on("overlap_param_gather")) {
      ctx.warn(kFrozenNoParamGather, "--freeze-all-layers is incompatible with --overlap-param-gather; turning it off",
               {"freeze_all_layers", "overlap_param_gather"});
      ctx.set("overlap_param_gather", false, "--freeze-all-layers");
    }
  }

  // seed 1783-1784
  if (!ctx.is_none("override_ckpt_iteration"))
    ctx.require(!ctx.on("finetune"), kOverrideIterFinetune,
                "--override-ckpt-iteration cannot be used together with --finetune",
                {"override_ckpt_iteration", "finetune"});
}

}  // namespace mr::section
