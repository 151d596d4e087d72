// Non-persistent local checkpoints and their replication (seed arguments.py 1822-1830).
#include "config/validate/section_functions.h"

namespace mr::section {

MR_RULE(kLocalCkptDir, "local-ckpt.dir-required",
        "--non-persistent-ckpt-type local needs --non-persistent-local-ckpt-dir.");
MR_RULE(kReplicationJump, "local-ckpt.replication-needs-jump", "--replication needs --replication-jump.");
MR_RULE(kReplicationLocal, "local-ckpt.replication-needs-local",
        "--replication needs --non-persistent-ckpt-type local.");
MR_WARNING(kReplicationJumpIgnored, "local-ckpt.replication-jump-ignored",
           "--replication-jump without --replication is ignored (reset to None).");

void local_checkpointing(Context& ctx) {
  if (ctx["non_persistent_ckpt_type"] == Value("local"))
    ctx.require(!ctx.is_none("non_persistent_local_ckpt_dir"), kLocalCkptDir,
                "--non-persistent-ckpt-type local needs a directory: set --non-persistent-local-ckpt-dir",
                {"non_persistent_ckpt_type", "non_persistent_local_ckpt_dir"});
  if (ctx.on("replication")) {
    ctx.require(!ctx.is_none("replication_jump"), kReplicationJump, "--replication needs --replication-jump",
                {"replication", "replication_jump"});
    ctx.require(
        ctx["non_persistent_ckpt_type"] == Value("local"), kReplicationLocal,
        "--replication needs --non-persistent-ckpt-type local (got " + ctx["non_persistent_ckpt_type"].py_str() + ")",
        {"replication", "non_persistent_ckpt_type"});
  } else if (ctx.on("replication_jump")) {
    ctx.warn(kReplicationJumpIgnored, "--replication-jump given without --replication: ignoring it",
             {"replication_jump", "replication"});
    ctx.set("replication_jump", Value(), "--replication-jump without --replication");
  }
}

}  // namespace mr::section
