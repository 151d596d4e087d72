// The init stage (rule ids `init.*`): what Megatron would refuse only once its ranks have started, after
// validate_args() passed — the checks of the model's construction (TransformerConfig and ModelParallelConfig's
// __post_init__ as core_transformer_config_from_args() fills them, the layer count each pipeline stage builds)
// that the resolved arguments decide on their own. A job that fails one would start every rank, import torch,
// initialise the process groups and then fail on every rank; megatron-run refuses it before anything starts.
//
// The stage runs after the sanity stage (validation_stages(), sections.h), so Megatron's validate_args verdict
// is never pre-empted. Its diagnostics say "Megatron would fail at initialisation (<where>): ...", carry stage
// "init", and name the flags and values. The checks of initialize_model_parallel() (the process groups) need
// the rank layout and run after this stage, in the launcher (init.process-groups, apps/megatron-run/launch.h).
//
// Files by subject: init_startup.cpp (the number-of-microbatches calculator, the exit signal handler, the seed),
// init_transformer_config.cpp (attention, activation, RoPE, pipeline communication),
// init_transformer_recompute.cpp (recompute, CPU and fine-grained offloading, the CUDA graphs that capture them),
// init_moe.cpp (MoE router, dispatcher, capacity), init_pipeline_layers.cpp (layers per
// pipeline stage), init_pipeline_layout.cpp (--pipeline-model-parallel-layout), init_optimizer.cpp (the optimizer
// factory, which runs once the model is built), init_train_loop.cpp (the datasets' sample counts, and what the training
// loop then fails on).
#pragma once

#include <string>
#include <vector>

#include "config/rule.h"
#include "config/validate/sections.h"

// Declares an error rule of the init stage: MR_INIT_RULE(kName, "init.subject.rule-id", "What it checks.").
#define MR_INIT_RULE(var, id, desc) \
  static const ::mr::Rule var{id, ::mr::Rule::Level::Error, desc, __FILE__, __LINE__, ::mr::kStageInit}

namespace mr::init {

// The sections of the init stage, in the order Megatron meets them.
std::vector<Section> sections();

// The message prefix every init rule uses; `where` names Megatron's class or function ("TransformerConfig").
inline std::string would_fail(const char* where) {
  return std::string("Megatron would fail at initialisation (") + where + "): ";
}

// init_startup.cpp (set_global_variables: the number-of-microbatches calculator, the signal handler; _set_random_seed)
void startup(Context& ctx);
// init_transformer_config.cpp
void transformer_attention(Context& ctx);
void transformer_activation(Context& ctx);  // and the FP8 first/last BF16 layers, --init-method-xavier-uniform
void transformer_rope(Context& ctx);
void model_parallel_config(Context& ctx);
// init_transformer_recompute.cpp (and the CUDA graphs that capture what it recomputes or offloads)
void transformer_recompute_offload(Context& ctx);
// init_moe.cpp
void moe_config(Context& ctx);
// init_pipeline_layers.cpp
void pipeline_layers(Context& ctx);
// init_pipeline_layout.cpp
void pipeline_layout(Context& ctx);
// init_optimizer.cpp (get_megatron_optimizer: the emerging-optimizer path)
void optimizer(Context& ctx);
// init_train_loop.cpp (the sample counts the datasets are built with; what the training loop divides by)
void datasets(Context& ctx);
void train_loop(Context& ctx);

}  // namespace mr::init
