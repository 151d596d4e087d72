// Sequence parallelism: off without tensor parallelism; TP comm overlap needs it (seed arguments.py 1248-1260).
#include "config/validate/section_functions.h"

namespace mr::section {

MR_WARNING(kSpDisabledWithoutTp, "sequence-parallel.disabled-without-tp",
           "--sequence-parallel is turned off when --tensor-model-parallel-size is 1.");
MR_RULE(kTpCommOverlapNeedsSp, "sequence-parallel.tp-comm-overlap-needs-sp",
        "--tp-comm-overlap needs sequence parallelism.");

void sequence_parallel(Context& ctx) {
  // With tp=1 sequence parallelism would only change numerics, so Megatron forces it off.
  if (ctx.i("tensor_model_parallel_size") == 1) {
    if (ctx.on("sequence_parallel"))
      ctx.warn(kSpDisabledWithoutTp,
               "--sequence-parallel ignored: tensor model parallelism is off (--tensor-model-parallel-size 1)",
               {"sequence_parallel", "tensor_model_parallel_size"});
    ctx.set("sequence_parallel", false, "sequence parallelism off with tensor-model-parallel-size 1");
  }

  if (ctx.on("tp_comm_overlap")) {
    ctx.require(ctx["sequence_parallel"] == Value(true), kTpCommOverlapNeedsSp,
                "--tp-comm-overlap overlaps tensor-parallel communication with GEMMs only under sequence "
                "parallelism: add --sequence-parallel (with --tensor-model-parallel-size > 1)",
                {"tp_comm_overlap", "sequence_parallel"});
  }
}

}  // namespace mr::section
