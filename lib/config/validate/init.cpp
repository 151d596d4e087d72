// The sections of the init stage (init.h), in the order Megatron meets them: its start-up (the global variables,
// the seeds), ModelParallelConfig's checks
// (run first by TransformerConfig.__post_init__), TransformerConfig's own in the order its __post_init__ makes
// them, the layers each pipeline stage builds (TransformerBlock), the optimizer factory that runs on the built model,
// the datasets pretrain builds next, and the training loop.
#include "config/validate/init.h"

namespace mr::init {

std::vector<Section> sections() {
  return {
      {"init-startup", &startup},
      {"init-model-parallel-config", &model_parallel_config},
      {"init-attention-heads", &transformer_attention},
      {"init-moe-config", &moe_config},
      {"init-recompute-offloading", &transformer_recompute_offload},
      {"init-pipeline-layers", &pipeline_layers},
      {"init-pipeline-layout", &pipeline_layout},
      {"init-activation-fp8-layers", &transformer_activation},
      {"init-rope-cp-comm", &transformer_rope},
      {"init-optimizer", &optimizer},
      {"init-datasets", &datasets},
      {"init-train-loop", &train_loop},
  };
}

}  // namespace mr::init
