// Optimizers other than sgd and adam ("emerging" optimizers: muon, lion, soap, ...) (seed arguments.py
// 1645-1648): no Torch-FSDP2, no Megatron-FSDP, and only the torch / torch_dist checkpoint formats.
#include "config/validate/section_functions.h"

namespace mr::section {

MR_RULE(kEmergingFsdp2, "emerging-optimizer.no-torch-fsdp2",
        "Optimizers other than sgd/adam do not support --use-torch-fsdp2.");
MR_RULE(kEmergingMegatronFsdp, "emerging-optimizer.no-megatron-fsdp",
        "Optimizers other than sgd/adam do not support --use-megatron-fsdp.");
MR_RULE(kEmergingCkptFormat, "emerging-optimizer.ckpt-format",
        "Optimizers other than sgd/adam need --ckpt-format torch or torch_dist.");

void emerging_optimizer(Context& ctx) {
  const Value& opt = ctx["optimizer"];
  if (opt == Value("sgd") || opt == Value("adam")) return;
  const std::string name = opt.py_str();
  ctx.require(!ctx.on("use_torch_fsdp2"), kEmergingFsdp2,
              "--optimizer " + name + " does not support --use-torch-fsdp2 yet", {"optimizer", "use_torch_fsdp2"});
  ctx.require(!ctx.on("use_megatron_fsdp"), kEmergingMegatronFsdp,
              "--optimizer " + name + " does not support --use-megatron-fsdp yet", {"optimizer", "use_megatron_fsdp"});
  const Value& fmt = ctx["ckpt_format"];
  ctx.require(fmt == Value("torch") || fmt == Value("torch_dist"), kEmergingCkptFormat,
              "--optimizer " + name + " saves only with --ckpt-format torch or torch_dist (got " + fmt.py_str() + ")",
              {"optimizer", "ckpt_format"});
}

}  // namespace mr::section
