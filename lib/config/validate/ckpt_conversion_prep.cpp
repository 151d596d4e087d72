// Seed arguments.py 421-441: checkpoint-conversion prerequisites, the non-persistent checkpoint kind
// and update_use_dist_ckpt.
#include "config/validate/section_functions.h"

namespace mr::section {

MR_RULE(kConvertNeedsSave, "ckpt-convert.requires-save",
        "--ckpt-convert-format needs --ckpt-convert-save (where the converted checkpoint goes).");
MR_RULE(kConvertNeedsLoad, "ckpt-convert.requires-load",
        "--ckpt-convert-format needs --load (the checkpoint to convert).");
MR_RULE(kNonPersistentKind, "ckpt-nonpersistent.supported-type",
        "--non-persistent-ckpt-type must be global or local (in_memory is not supported yet).");

void ckpt_conversion_prep(Context& ctx) {
  // seed 422-425: converting a checkpoint loads one and writes it elsewhere; a missing checkpoint is fatal.
  if (!ctx.is_none("ckpt_convert_format")) {
    ctx.require(!ctx.is_none("ckpt_convert_save"), kConvertNeedsSave,
                "--ckpt-convert-format " + ctx["ckpt_convert_format"].py_str() +
                    " converts a checkpoint, so --ckpt-convert-save must name the output directory",
                {"ckpt_convert_format", "ckpt_convert_save"});
    ctx.require(!ctx.is_none("load"), kConvertNeedsLoad,
                "--ckpt-convert-format " + ctx["ckpt_convert_format"].py_str() +
                    " converts a checkpoint, so --load must name the checkpoint to read",
                {"ckpt_convert_format", "load"});
    ctx.set("exit_on_missing_checkpoint", true, "ckpt-conversion-prep: checkpoint conversion");
  }

  // seed 428-429: only global and local non-persistent checkpoints exist for now.
  const Value& kind = ctx["non_persistent_ckpt_type"];
  ctx.require(kind.is_none() || kind == Value("global") || kind == Value("local"), kNonPersistentKind,
              "--non-persistent-ckpt-type " + kind.py_str() +
                  " is not supported; use global or local (or leave it unset)",
              {"non_persistent_ckpt_type"});
  // seed 430-436: local checkpointing imports nvidia_resiliency_ext. megatron-run assumes the standard cluster
  // image, which ships it, so the import always succeeds and there is nothing to check here.
}

void update_use_dist_ckpt(Context& ctx) {
  // seed 441 -> megatron/training/utils/common_utils.py update_use_dist_ckpt: every format but torch is distributed.
  ctx.set("use_dist_ckpt", ctx["ckpt_format"] != Value("torch"), "use-dist-ckpt: --ckpt-format");
}

}  // namespace mr::section
