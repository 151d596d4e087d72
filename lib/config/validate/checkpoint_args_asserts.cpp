// Seed arguments.py 101-112 (parse_and_validate_args, before validate_args): what --use-checkpoint-args needs.
// Megatron asserts these before it reads the checkpoint's arguments; a dry run reads no checkpoint (megatron-run's
// own run does: lib/run/checkpoint_args.h), so it validates the values given.
#include "config/validate/section_functions.h"

namespace mr::section {

MR_RULE(kNeedsLoad, "checkpoint-args.needs-load",
        "--use-checkpoint-args needs --load or --pretrained-checkpoint (the checkpoint whose arguments it takes).");
MR_RULE(kNotLocal, "checkpoint-args.not-local",
        "--use-checkpoint-args does not go with --non-persistent-ckpt-type local.");

void checkpoint_args_asserts(Context& ctx) {
  if (!ctx.on("use_checkpoint_args")) return;
  ctx.require(!ctx.is_none("load") || !ctx.is_none("pretrained_checkpoint"), kNeedsLoad,
              "--use-checkpoint-args requires --load or --pretrained-checkpoint: the arguments come from the "
              "checkpoint that would be loaded",
              {"use_checkpoint_args", "load"});
  ctx.require(ctx["non_persistent_ckpt_type"] != Value("local"), kNotLocal,
              "--use-checkpoint-args is not supported with --non-persistent-ckpt-type local: two-stage checkpoint "
              "loading is not implemented, and every argument must be known before the local checkpoint manager "
              "starts",
              {"use_checkpoint_args", "non_persistent_ckpt_type"});
}

}  // namespace mr::section
