// Part E of the validation chain (seed arguments.py 1597-1931 of validate_args): the section functions, one
// concern per file. Only part_e.cpp lists them; they live in their own namespace so no other part collides.
#pragma once

#include <string>
#include <string_view>

#include "config/validate/context.h"
#include "config/validate/python.h"

namespace mr::part_e {

// data_blend.cpp: seed 1597-1629, one data source, FIM dataset arguments, TE cross-entropy fusion gate.
void data_blend(Context& ctx);
// determinism.cpp: seed 1631-1632 (megatron/training/determinism.py apply_determinism_to_args).
void determinism(Context& ctx);
// qk_layer_scaling.cpp: seed 1634-1636, --apply-query-key-layer-scaling implies fp32 softmax.
void qk_layer_scaling(Context& ctx);
// rerun_tracker.cpp: seed 1638-1643, iterations to skip read from the result-rejected tracker file.
void rerun_tracker(Context& ctx);
// emerging_optimizer.cpp: seed 1645-1648, limits of the optimizers other than sgd/adam.
void emerging_optimizer(Context& ctx);
// process_groups.cpp: seed 1651-1670, without Gloo process groups; the fake process group.
void gloo_process_groups(Context& ctx);
void fake_process_group(Context& ctx);
// checkpoint_save_load.cpp: seed 1672-1786, deprecated checkpoint flags, parallel save/load, the PG cache,
// main-param / streamed dequant loading, async save, logits dumps, frozen layers, iteration override.
void checkpoint_save_load(Context& ctx);
// pp_inference.cpp: seed 1788-1794, pipeline-parallel microbatched inference.
void pp_inference(Context& ctx);
// moe_upcycling.cpp: seed 1796-1802.
void moe_upcycling(Context& ctx);
// skip_train_rl.cpp: seed 1804-1820, --skip-train and RLConfig.validate_run.
void skip_train_rl(Context& ctx);
// local_checkpointing.cpp: seed 1822-1830, non-persistent local checkpoints and replication.
void local_checkpointing(Context& ctx);
// delay_wgrad.cpp: seed 1832-1860, --delay-wgrad-compute requirements.
void delay_wgrad(Context& ctx);
// activation_offloading.cpp: seed 1862-1867 (fine-grained offloading) and 1877-1879 (cpu_offloading).
void fine_grained_offloading(Context& ctx);
void cpu_offloading(Context& ctx);
// mtp_position_embedding.cpp: seed 1869-1875, MTP needs position_ids-based embeddings.
void mtp_position_embedding(Context& ctx);
// cuda_graph_runtime.cpp: seed 1881-1910, RNG tracker, allocator/NCCL env, full-iteration, shortcut MoE.
void cuda_graph_runtime(Context& ctx);
// latent_projections.cpp: seed 1912-1925, multi-latent attention and MoE latent projections.
void latent_projections(Context& ctx);

// ---- small helpers shared by the part E files ----


// use_dist_ckpt is derived by part A (seed 441, update_use_dist_ckpt: ckpt_format != "torch"); when that
// section has not run, derive it the same way so part E reads the value Megatron would.
inline bool use_dist_ckpt(const Context& ctx) {
  if (ctx.has("use_dist_ckpt")) return ctx.on("use_dist_ckpt");
  return !(ctx["ckpt_format"] == Value("torch"));
}

// `value == EnumClass.member` for an enum stored as Python's str() ("CudaGraphModule.attn"); the bare member
// name is accepted too, for a value not yet normalised by an earlier section.
inline bool enum_is(const Value& v, std::string_view enum_class, std::string_view member) {
  if (!v.is_str()) return false;
  const std::string& s = v.as_str();
  if (s == member) return true;
  return s.size() == enum_class.size() + 1 + member.size() && s.compare(0, enum_class.size(), enum_class) == 0 &&
         s[enum_class.size()] == '.' && s.compare(enum_class.size() + 1, std::string::npos, member) == 0;
}

// `EnumClass.member in value` for a list of such enums (None or a non-list: false).
inline bool enum_in(const Value& list, std::string_view enum_class, std::string_view member) {
  if (!list.is_list()) return false;
  for (const Value& v : list.as_list())
    if (enum_is(v, enum_class, member)) return true;
  return false;
}

}  // namespace mr::part_e
