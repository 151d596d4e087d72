// Activation offloading (seed arguments.py 1862-1867 and 1877-1879): fine-grained offloading is a Transformer
// Engine feature that, from TE 2.10.0, needs NVTE_CPU_OFFLOAD_V1=1; --cpu-offloading-num-layers turns on
// cpu_offloading.
#include "config/validate/section_functions.h"

namespace mr::section {

MR_RULE(kFineGrainedTe, "activation-offloading.needs-transformer-engine",
        "--fine-grained-activation-offloading needs --transformer-impl transformer_engine.");
MR_RULE(kFineGrainedEnv, "activation-offloading.nvte-cpu-offload-v1",
        "--fine-grained-activation-offloading with Transformer Engine >= 2.10.0 needs NVTE_CPU_OFFLOAD_V1=1.");

void fine_grained_offloading(Context& ctx) {
  if (!ctx.on("fine_grained_activation_offloading")) return;
  ctx.require(ctx["transformer_impl"] == Value("transformer_engine"), kFineGrainedTe,
              "--fine-grained-activation-offloading is only implemented for --transformer-impl transformer_engine "
              "(got " +
                  ctx["transformer_impl"].py_str() + ")",
              {"fine_grained_activation_offloading", "transformer_impl"});
  if (ctx.te_min("2.10.0")) {
    std::string v = ctx.env_var("NVTE_CPU_OFFLOAD_V1").value_or("0");
    ctx.require(v == "1", kFineGrainedEnv,
                "--fine-grained-activation-offloading with Transformer Engine " + ctx.env().te_version +
                    " needs NVTE_CPU_OFFLOAD_V1=1 in the environment (got '" + v + "'), or weights are offloaded too",
                {"fine_grained_activation_offloading"});
  }
}

void cpu_offloading(Context& ctx) {
  if (ctx.i("cpu_offloading_num_layers") > 0) ctx.set("cpu_offloading", true, "--cpu-offloading-num-layers > 0");
}

}  // namespace mr::section
