// The MoE block of the model plan (model_plan.h): which layers are MoE layers, the experts a rank holds (split over
// EP, each split over expert TP), latent MoE's projections and the shared experts.
#include "run/model_plan.h"

#include <algorithm>

namespace mr::run::gpt_plan {

MoeLayers moe_layers(const Args& a, int64_t L, bool hybrid) {
  MoeLayers s;
  s.experts = at_least(a.num_experts.value_or(0), 0, "--num-experts");
  s.moe_layer.assign(static_cast<size_t>(L), s.experts > 0);
  if (s.experts > 0 && !hybrid) {  // (a hybrid model's MoE layers are its pattern's 'E's)
    const Value& f = a.moe_layer_freq;
    if (f.is_list()) {
      if (static_cast<int64_t>(f.as_list().size()) != L)
        throw RunError("--moe-layer-freq lists " + std::to_string(f.as_list().size()) + " layers, --num-layers is " +
                       std::to_string(L));
      for (int64_t i = 0; i < L; ++i) s.moe_layer[static_cast<size_t>(i)] = f.as_list()[static_cast<size_t>(i)].truthy();
    } else if (f.is_int() && f.as_int() > 0) {
      for (int64_t i = 0; i < L; ++i) s.moe_layer[static_cast<size_t>(i)] = i % f.as_int() == 0;
    }
  }
  return s;
}

MoeSizes moe_sizes(const Args& a, const RankCoord& at, int64_t experts, int64_t h) {
  MoeSizes s;
  s.experts = experts;
  const int64_t ep = std::max<int64_t>(1, at.ep_size);
  s.etp = at.etp_size > 0 ? at.etp_size : std::max<int64_t>(1, a.expert_tensor_parallel_size);
  if (experts > 0 && experts % ep != 0)
    throw RunError("--num-experts " + std::to_string(experts) + " is not divisible by --expert-model-parallel-size " +
                   std::to_string(ep));
  s.local_experts = experts > 0 ? experts / ep : 0;
  if (s.local_experts > kMaxPlanTensors)
    throw RunError("--num-experts " + std::to_string(experts) + " puts more than " + std::to_string(kMaxPlanTensors) +
                   " experts on a rank, more than the model plan handles");
  // Validation gives --moe-ffn-hidden-size --ffn-hidden-size's value whenever --num-experts is set (moe-spec); a
  // model without experts has no expert MLP, and no size for it.
  if (experts > 0) {
    if (!a.moe_ffn_hidden_size)
      throw RunError("internal error: --moe-ffn-hidden-size is None with --num-experts " + std::to_string(experts) +
                     " (validation gives it --ffn-hidden-size's value): the model plan takes validated arguments");
    s.moe_ffn = at_least(*a.moe_ffn_hidden_size, 1, "--moe-ffn-hidden-size");
  }
  // Latent MoE (--moe-latent-size): the routed experts work in a smaller space, projected into and out of by two
  // replicated linears of the MoE layer (fc1/fc2_latent_proj); the router and the shared experts keep h.
  s.latent = a.moe_latent_size ? at_least(*a.moe_latent_size, 1, "--moe-latent-size") : 0;
  s.expert_h = s.latent > 0 ? s.latent : h;
  s.moe_fc1 = a.swiglu ? mul(2, s.moe_ffn, "2 x --moe-ffn-hidden-size") : s.moe_ffn;
  s.shared_ffn =
      at_least(a.moe_shared_expert_intermediate_size.value_or(0), 0, "--moe-shared-expert-intermediate-size");
  s.grouped = a.moe_grouped_gemm;
  return s;
}

namespace {

int64_t split_by(int64_t n, int64_t parts, const std::string& what) {
  if (n % parts != 0)
    throw RunError(what + " (" + std::to_string(n) + ") is not divisible by the expert tensor-parallel size " +
                   std::to_string(parts) + " (--expert-tensor-parallel-size)");
  return n / parts;
}

// A routed expert's parameter: split over expert TP (`etp`), keyed by its global expert index.
void add_expert(const Builder& b, int64_t etp, std::string name, std::string key, std::vector<int64_t> full,
                int split_dim) {
  ParamSpec p;
  p.name = std::move(name);
  p.key = std::move(key);
  p.full_shape = full;
  p.shape = full;
  p.split_dim = split_dim;
  if (split_dim >= 0) p.shape[static_cast<size_t>(split_dim)] = split_by(full[static_cast<size_t>(split_dim)], etp, p.name);
  p.tp_duplicate = split_dim < 0 && etp > 1;
  p.expert = true;
  (void)p.numel();
  if (b.plan.params.size() >= kMaxPlanTensors)
    throw RunError("the model plan would hold more than " + std::to_string(kMaxPlanTensors) +
                   " parameter tensors per rank (--num-layers, --num-experts)");
  p.no_weight_decay = p.shape.size() == 1;
  if (p.shape.size() == 1) p.init = ParamSpec::Init::Zero;  // the experts' 1-D parameters are their biases
  b.plan.params.push_back(std::move(p));
}

// The local routed experts: grouped (one fc1/fc2 with weight<i>) or each its own module.
void add_routed_experts(const Builder& b, const MoeSizes& s, const std::string& p) {
  const bool bias = b.bias;
  for (int64_t e = 0; e < s.local_experts; ++e) {
    const std::string i = std::to_string(e);
    const std::string fc1 = s.grouped ? p + "mlp.experts.linear_fc1." : p + "mlp.experts.local_experts." + i + ".linear_fc1.";
    const std::string fc2 = s.grouped ? p + "mlp.experts.linear_fc2." : p + "mlp.experts.local_experts." + i + ".linear_fc2.";
    const std::string w = s.grouped ? "weight" + i : "weight", bi = s.grouped ? "bias" + i : "bias";
    const std::string global = p + "mlp.expert" + std::to_string(b.at.ep_rank * s.local_experts + e) + ".";
    add_expert(b, s.etp, fc1 + w, global + "fc1.weight", {s.moe_fc1, s.expert_h}, 0);
    if (bias) add_expert(b, s.etp, fc1 + bi, global + "fc1.bias", {s.moe_fc1}, 0);
    add_expert(b, s.etp, fc2 + w, global + "fc2.weight", {s.expert_h, s.moe_ffn}, 1);
    if (bias) add_expert(b, s.etp, fc2 + bi, global + "fc2.bias", {s.expert_h}, -1);
  }
}

// The shared experts (--moe-shared-expert-intermediate-size), split over TP like a dense MLP, and their gate.
void add_shared_experts(const Builder& b, const MoeSizes& s, const std::string& p) {
  const bool bias = b.bias;
  const int64_t h = b.h;
  const int64_t s1 = b.a.swiglu ? mul(2, s.shared_ffn, "2 x --moe-shared-expert-intermediate-size") : s.shared_ffn;
  b.add(p + "mlp.shared_experts.linear_fc1.weight", {s1, h}, 0);
  if (bias) b.add(p + "mlp.shared_experts.linear_fc1.bias", {s1}, 0);
  b.add(p + "mlp.shared_experts.linear_fc2.weight", {h, s.shared_ffn}, 1);
  if (bias) b.add(p + "mlp.shared_experts.linear_fc2.bias", {h}, -1);
  if (b.a.moe_shared_expert_gate) b.add(p + "mlp.shared_experts.gate_weight", {1, h}, -1);
}

}  // namespace

// An MoE block: its own norm, the router (replicated), the local routed experts, the shared experts.
void add_moe(const Layers& m, const std::string& p) {
  const Builder& b = m.b;
  const MoeSizes& s = m.moe;
  const bool bias = b.bias;
  const int64_t h = b.h;
  if (s.experts == 0) throw RunError("an MoE layer ('E' in --hybrid-layer-pattern) needs --num-experts");
  b.norm(p + "pre_mlp_layernorm.", h);
  b.add(p + "mlp.router.weight", {s.experts, h}, -1);
  if (bias) b.add(p + "mlp.router.bias", {s.experts}, -1);
  add_routed_experts(b, s, p);
  if (s.latent > 0) {
    b.add(p + "mlp.fc1_latent_proj.weight", {s.latent, h}, -1);
    if (bias) b.add(p + "mlp.fc1_latent_proj.bias", {s.latent}, -1);
    b.add(p + "mlp.fc2_latent_proj.weight", {h, s.latent}, -1);
    if (bias) b.add(p + "mlp.fc2_latent_proj.bias", {h}, -1);
  }
  const std::string what = "the routed experts' parameters (--num-experts, --moe-ffn-hidden-size, --hidden-size)";
  const int64_t per_expert = sum(sum(mul(s.moe_fc1, s.expert_h, what), mul(s.expert_h, s.moe_ffn, what), what),
                                 bias ? sum(s.moe_fc1, s.expert_h, what) : 0, what);
  b.plan.expert_numel_total = sum(b.plan.expert_numel_total, mul(s.experts, per_expert, what), what);
  if (s.shared_ffn > 0) add_shared_experts(b, s, p);
}

}  // namespace mr::run::gpt_plan
