// Part D of the validation chain (seed arguments.py 1227-1596 of validate_args): the section functions,
// one concern per file, and small helpers they share.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "config/validate/context.h"
#include "config/validate/python.h"

namespace mr::part_d {

// recompute.cpp (seed 1227-1246)
void activation_recompute(Context& ctx);
// sequence_parallel.cpp (seed 1248-1260)
void sequence_parallel(Context& ctx);
// dynamic_context_parallel.cpp (seed 1262-1294)
void dynamic_context_parallel(Context& ctx);
// sequence_packing.cpp (seed 1296-1312: variable_seq_lengths reset, SFT mock-dataset default)
void variable_seq_lengths(Context& ctx);
// cuda_connections.cpp (seed 1313-1350: CUDA_DEVICE_MAX_CONNECTIONS, FSDP high-priority streams)
void cuda_max_connections(Context& ctx);
void fsdp_high_priority_streams(Context& ctx);
// expert_gtp.cpp (seed 1353-1451: expert GTP weight shards, GTP weight-rematerialisation checks)
void expert_gtp_weight_shards(Context& ctx);
void gtp_remat_checks(Context& ctx);
// bias_fusion.cpp (seed 1453-1459)
void bias_fusion(Context& ctx);
// qk_clip.cpp (seed 1461-1472)
void qk_clip(Context& ctx);
// position_embedding.cpp (seed 1474-1494)
void position_embedding(Context& ctx);
// moe_spec.cpp (seed 1496-1513: MoE spec, expert parallelism, router)
void moe_spec(Context& ctx);
void expert_parallel(Context& ctx);
void moe_router(Context& ctx);
// dcp_dtensor_formats.cpp (seed 1515-1525)
void dcp_dtensor_formats(Context& ctx);
// sequence_packing.cpp (seed 1527-1595: --use-varlen-dataset, packing scheduler, buffer size)
void varlen_dataset(Context& ctx);
void sequence_packing(Context& ctx);

// getattr(args, name, False)-style read: a dest Megatron reads with a default when it may be absent.
inline bool on_or(const Context& ctx, std::string_view dest, bool fallback = false) {
  return ctx.has(dest) ? ctx.on(dest) : fallback;
}
inline int64_t int_or(const Context& ctx, std::string_view dest, int64_t fallback) {
  return ctx.has(dest) && !ctx.is_none(dest) ? ctx.i(dest) : fallback;
}
// `x in args.<dest>` for a list of strings.
inline bool list_has(const Context& ctx, std::string_view dest, const std::string& item) {
  const Value& v = ctx[dest];
  if (!v.is_list()) return false;
  for (const Value& e : v.as_list())
    if (e == Value(item)) return true;
  return false;
}
// args.<dest>.append(item) on a list-valued dest (e.g. high_priority_stream_groups).
inline void list_append(Context& ctx, std::string_view dest, const std::string& item, std::string_view why) {
  List l = ctx[dest].is_list() ? ctx[dest].as_list() : List{};
  l.push_back(Value(item));
  ctx.set(dest, Value(std::move(l)), why);
}
// Value's Python str() in a message: 4, None, 'rope' shown as rope.
inline std::string show(const Context& ctx, std::string_view dest) { return ctx[dest].py_str(); }

}  // namespace mr::part_d
