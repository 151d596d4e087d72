// MoE spec defaults, expert-parallel checks and router argument normalisation (seed arguments.py 1496-1513).
#include "config/validate/section_functions.h"

namespace mr::section {

MR_WARNING(kMoeFfnDefault, "moe-spec.ffn-hidden-size-default",
           "--moe-ffn-hidden-size not set: MoE experts use --ffn-hidden-size.");
MR_RULE(kEpNeedsExperts, "expert-parallel.needs-num-experts",
        "--expert-model-parallel-size > 1 needs --num-experts.");
MR_RULE(kEpDivides, "expert-parallel.experts-divisible",
        "--num-experts must be a multiple of --expert-model-parallel-size.");

void moe_spec(Context& ctx) {
  if (ctx["num_experts"] == Value(0)) ctx.set("num_experts", nullptr, "--num-experts 0 means a dense model");
  if (!ctx.is_none("num_experts") && ctx.is_none("moe_ffn_hidden_size")) {
    ctx.set("moe_ffn_hidden_size", ctx["ffn_hidden_size"], "--ffn-hidden-size (no --moe-ffn-hidden-size given)");
    ctx.warn(kMoeFfnDefault, "--moe-ffn-hidden-size not set; MoE experts use --ffn-hidden-size (" +
                                 show(ctx, "ffn_hidden_size") + ")",
             {"moe_ffn_hidden_size", "ffn_hidden_size"});
  }
}

void expert_parallel(Context& ctx) {
  const int64_t ep = ctx.i("expert_model_parallel_size");
  if (ep <= 1) return;
  ctx.require(!ctx.is_none("num_experts"), kEpNeedsExperts,
              "--expert-model-parallel-size " + std::to_string(ep) + " needs --num-experts",
              {"expert_model_parallel_size", "num_experts"});
  ctx.require(py_mod(ctx.i("num_experts"), ep) == 0, kEpDivides,
              "--num-experts (" + show(ctx, "num_experts") + ") must be divisible by --expert-model-parallel-size (" +
                  std::to_string(ep) + ")",
              {"num_experts", "expert_model_parallel_size"});
}

void moe_router(Context& ctx) {
  // nargs='+' flags given a single value collapse to that value (a list only when several are given).
  for (const char* dest : {"moe_router_load_balancing_type", "moe_aux_loss_coeff"}) {
    const Value& v = ctx[dest];
    if (v.kind() == Value::Kind::List && v.as_list().size() == 1) {
      Value single = v.as_list().front();
      ctx.set(dest, std::move(single), "single-element list unwrapped");
    }
  }
}

}  // namespace mr::section
