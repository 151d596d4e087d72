// The training run's optimizer step (run/step.h): slots over the backend's buffers (run/backend.h), the work
// done by the backend.
#include "run/host_collectives.h"
#include "run/step.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "optim/clip_grads.h"
#include "optim/config.h"
#include "optim/muon.h"
#include "optim/muon_plan.h"
#include "optim/soap.h"
#include "run/abs_max.h"
#include "run/exact_stats.h"
#include "run/grad_sync.h"

namespace mr::run {

namespace {

bool ends_with(const std::string& s, const char* suffix) {
  size_t k = std::strlen(suffix);
  return s.size() >= k && s.compare(s.size() - k, k, suffix) == 0;
}

// The gradients for the norm and the clip: the dense part, and the routed experts into `experts`.
std::vector<optim::ClipSlot> clip_slots(RunContext& c, std::vector<optim::ClipSlot>* experts) {
  std::vector<optim::ClipSlot> out;
  const BufferPtrs d = c.backend->ptrs();
  c.buf.for_each_piece(c.plan, [&](size_t k, int64_t b, int64_t e) {
    const ParamSpec& p = c.plan.params[k];
    optim::ClipSlot s;
    s.grad = {e - b, c.buf.grad_at(d.grad, d.grad_shard, b), optim::DType::F32};
    s.counted = c.is_counted(p);
    (p.expert ? *experts : out).push_back(s);
  });
  return out;
}

// Parameter k's optimizer state from element i on (in this rank's shard) in slot s: the main params, the first moment,
// the second where k keeps one, in their dtypes, with the fp16 / fp8 states' scales.
void set_states(optim::TensorSlot& s, const FlatBuffers& b, const BufferPtrs& d, size_t k, int64_t i) {
  using Scaled = FlatBuffers::Scaled;
  if (d.main) {  // the main params: an fp32 or fp16 master, or the remainders beside the bf16 params
    void* m = b.main_at(d.main, i);
    if (b.main_storage == MainStorage::Remainder) {
      s.remainder = static_cast<uint16_t*>(m);
    } else {
      s.master = m;
      s.master_dtype = b.master_dtype();
      s.master_scale = b.scale_at(d.state_scale, Scaled::Main, k);
    }
  }
  s.exp_avg = b.exp_avg_at(d.exp_avg, i);
  s.exp_avg_dtype = b.exp_avg_dtype;
  s.exp_avg_scale = b.scale_at(d.state_scale, Scaled::ExpAvg, k);
  s.exp_avg_sq = b.sq_at(d.exp_avg_sq, k, i);  // Adam's; Lion keeps none
  s.exp_avg_sq_dtype = b.exp_avg_sq_dtype;
  s.exp_avg_sq_scale = b.scale_at(d.state_scale, Scaled::ExpAvgSq, k);
}

// The optimizers that step whole matrices (Muon, SOAP): each parameter this rank steps (all of them; with the
// layer-wise distributed optimizer the whole parameters it owns, [lo, hi) and [elo, ehi)) either to `own(k, p,
// offset, fp32 master)` where the optimizer's own rule takes it, or as an elementwise slot into `scalars` for its
// scalar rule. The matrices' main params and moments must be fp32: the precision-aware optimizer is Adam's only
// (rule optimizer.precision-aware-requires-adam; buffer_dtypes keeps fp32 otherwise).
template <class Own>
void whole_params(RunContext& c, const BufferPtrs& d, std::vector<optim::TensorSlot>& scalars, Own&& own) {
  const FlatBuffers& b = c.buf;
  if (b.main_storage != MainStorage::F32 || b.exp_avg_dtype != optim::DType::F32 || b.exp_avg_sq_dtype != optim::DType::F32)
    throw std::logic_error("optimizer step: the buffers hold main params or moments below fp32");
  for (size_t k = 0; k < c.plan.params.size(); ++k) {
    const ParamSpec& p = c.plan.params[k];
    const int64_t off = b.offset[k];
    if (!((off >= b.lo && off < b.hi) || (off >= b.elo && off < b.ehi))) continue;
    if (optim::takes_own_rule(c.optimizer, p.shape.size(), p.embedding_or_output, p.use_muon)) {
      own(k, p, off, d.main ? static_cast<float*>(b.main_at(d.main, off)) : static_cast<float*>(d.model) + off);
      continue;
    }
    optim::TensorSlot s;
    s.numel = p.numel();
    s.param = static_cast<uint8_t*>(d.model) + static_cast<size_t>(off) * dtype_bytes(b.model_dtype);
    s.param_dtype = b.model_dtype;
    s.grad = b.grad_at(d.grad, d.grad_shard, off);
    set_states(s, b, d, k, off);
    s.group = b.group_of[k];
    scalars.push_back(s);
  }
}

// Muon (Megatron's get_megatron_muon_optimizer): the 2-D weights of the transformer layers go to Muon, with this
// rank's TP shard and the --muon-tp-mode collectives over the TP group (routed experts: over the expert TP group,
// as Megatron's TensorParallelMuon picks `expt_tp` for them); the rest (embeddings, output layer, norms, biases) to
// --muon-scalar-optimizer. --optimizer adaptive_muon is the same with a second moment per matrix (exp_avg_sq).
// The rows of Q, K, V per query group from the model config (Megatron's _get_qkv_split_shapes), for every QKV
// weight. The plan has checked these (run/model.cpp).
std::vector<int64_t> muon_split_shapes(const Args& a) {
  const int64_t heads = a.num_attention_heads;
  const int64_t kv = a.kv_channels;
  const int64_t query_groups = a.group_query_attention ? a.num_query_groups : heads;
  return optim::qkv_split_shapes(heads, query_groups, kv, a.attention_output_gate);
}

// A Muon matrix's shape and how it is orthogonalised (the buffers are the caller's).
optim::MuonParam muon_matrix(const ParamSpec& p, int64_t split_total) {
  optim::MuonParam m;
  m.rows = p.shape[0];
  m.cols = p.shape[1];
  // Megatron marks a QKV weight for the split only when its rows are whole groups of the split
  // (param.shape[0] % sum(qkv_split_shapes) == 0); otherwise Muon orthogonalises it whole.
  m.is_qkv = ends_with(p.name, "linear_qkv.weight") && split_total > 0 && m.rows % split_total == 0;
  m.partition_dim = p.split_dim;
  return m;
}

void muon_step(RunContext& c, const std::vector<optim::GroupHyper>& groups) {
  FlatBuffers& b = c.buf;
  const BufferPtrs d = c.backend->ptrs();
  const std::vector<int64_t> split_shapes = muon_split_shapes(c.args);
  const int64_t split_total = std::accumulate(split_shapes.begin(), split_shapes.end(), int64_t{0});
  std::vector<optim::MuonParam> mats, expert_mats;
  std::vector<optim::TensorSlot> scalars;
  whole_params(c, d, scalars, [&](size_t k, const ParamSpec& p, int64_t off, float* master) {
    optim::MuonParam m = muon_matrix(p, split_total);
    m.param = master;
    m.grad = b.grad_at(d.grad, d.grad_shard, off);
    m.momentum_buffer = static_cast<float*>(b.exp_avg_at(d.exp_avg, off));
    m.moment2_buffer = static_cast<float*>(b.sq_at(d.exp_avg_sq, k, off));  // adaptive_muon's (muon: none)
    m.group = b.group_of[k];
    if (b.model_dtype == optim::DType::BF16) m.param_bf16 = static_cast<uint16_t*>(d.model) + off;
    (p.expert ? expert_mats : mats).push_back(std::move(m));
  });
  optim::MuonOptions mo = optim::muon_options(c.cfg, split_shapes);
  // The QKV split is per TP shard: each rank holds query_groups / tp whole groups.
  if (!mats.empty()) c.backend->muon_step(mats, groups, mo, c.tp.size() > 1 ? &c.tp : nullptr);
  if (!expert_mats.empty()) c.backend->muon_step(expert_mats, groups, mo, c.etp.size() > 1 ? &c.etp : nullptr);
  const optim::Kernel scalar =
      optim::muon_scalar_optimizer(c.cfg) == optim::ScalarOptimizer::Lion ? optim::Kernel::Lion : optim::Kernel::Adam;
  c.backend->elementwise_step(scalar, scalars, groups, c.cfg);
}

// SOAP (Megatron's emerging-optimizer path, Emerging-Optimizers' SOAP): the 2-D weights that are not embeddings or
// the output layer, each TP shard a matrix of its own (SOAP is not tensor-parallel aware: Megatron hands it the
// local parameter), with its preconditioner in `kronecker`; the rest to Adam. With the distributed optimizer the
// layer-wise path: this rank steps the whole parameters it owns.
void soap_step(RunContext& c, const std::vector<optim::GroupHyper>& groups) {
  FlatBuffers& b = c.buf;
  const BufferPtrs d = c.backend->ptrs();
  std::vector<optim::SoapParam> mats;
  std::vector<optim::TensorSlot> scalars;
  whole_params(c, d, scalars, [&](size_t k, const ParamSpec& p, int64_t off, float* master) {
    if (b.kronecker_at[k] < 0 || !d.kronecker) throw std::logic_error("soap_step: a matrix without its preconditioner");
    optim::SoapParam m;
    m.param = master;
    m.grad = b.grad_at(d.grad, d.grad_shard, off);
    m.exp_avg = static_cast<float*>(b.exp_avg_at(d.exp_avg, off));
    m.exp_avg_sq = static_cast<float*>(b.sq_at(d.exp_avg_sq, k, off));
    m.kronecker = d.kronecker + b.kronecker_at[k];
    m.rows = p.shape[0];
    m.cols = p.shape[1];
    m.group = b.group_of[k];
    if (b.model_dtype == optim::DType::BF16) m.param_bf16 = static_cast<uint16_t*>(d.model) + off;
    mats.push_back(m);
  });
  if (!mats.empty()) c.backend->soap_step(mats, groups, optim::soap_options(c.cfg));
  c.backend->elementwise_step(optim::Kernel::Adam, scalars, groups, c.cfg);
}

}  // namespace

double muon_device_work_bytes(const RunContext& c) {
  if (c.optimizer.kernel != optim::Kernel::Muon) return 0;
  const std::vector<int64_t> split_shapes = muon_split_shapes(c.args);
  const int64_t split_total = std::accumulate(split_shapes.begin(), split_shapes.end(), int64_t{0});
  // Every Muon matrix of this rank's model part, owned or not (an owned subset cannot need more of any area).
  std::vector<optim::MuonParam> mats, expert_mats;
  for (const ParamSpec& p : c.plan.params)
    if (optim::takes_own_rule(c.optimizer, p.shape.size(), p.embedding_or_output, p.use_muon) && p.shape.size() == 2)
      (p.expert ? expert_mats : mats).push_back(muon_matrix(p, split_total));
  const optim::MuonOptions mo = optim::muon_options(c.cfg, split_shapes);
  optim::MuonDeviceWork work;
  work.add(mats, mo, static_cast<int>(c.tp.size()));
  work.add(expert_mats, mo, static_cast<int>(c.etp.size()));
  return static_cast<double>(work.bytes());
}

namespace {
// The gradient pieces holding every element of the model once: counted (not a TP or tied copy), on the first
// (expert) data-parallel replica, or in this rank's shard with the distributed optimizer.
std::vector<const optim::ClipSlot*> owned(RunContext& c, const std::vector<optim::ClipSlot>& dense,
                                          const std::vector<optim::ClipSlot>& experts) {
  std::vector<const optim::ClipSlot*> out;
  for (const auto& s : dense)
    if (s.counted && (c.dist_opt || c.dp.rank() == 0)) out.push_back(&s);
  for (const auto& s : experts)
    if (s.counted && (c.dist_opt || c.edp.rank() == 0)) out.push_back(&s);
  return out;
}
}  // namespace

bool unscale_and_check(RunContext& c) {
  std::vector<optim::GradSlot> grads;
  const BufferPtrs d = c.backend->ptrs();
  c.buf.for_each_piece(c.plan, [&](size_t, int64_t b, int64_t e) {
    grads.push_back({e - b, c.buf.grad_at(d.grad, d.grad_shard, b), optim::DType::F32});
  });
  return c.backend->unscale_and_check(grads, c.scaler->inv_scale());
}

double clip_grad_norm(RunContext& c) {
  std::vector<optim::ClipSlot> experts;
  auto dense = clip_slots(c, &experts);
  const std::vector<const optim::ClipSlot*> mine = owned(c, dense, experts);
  distributed::Group& world = c.rt.group("world");
  double m = 0.0;
  for (const optim::ClipSlot* s : mine) {
    const double x = c.backend->max_abs(static_cast<const float*>(s->grad.grad), s->grad.numel);
    m = std::isnan(x) || std::isnan(m) ? std::nan("") : std::max(m, x);
  }
  m = all_reduce_max(world, m);
  double norm = m;  // inf or NaN: Megatron's norm is inf/NaN too
  if (std::isfinite(m)) {
    const int e = fixed_exponent(m);
    Fixed sum = 0;
    for (const optim::ClipSlot* s : mine) sum += c.backend->sum_squares(static_cast<const float*>(s->grad.grad), s->grad.numel, e);
    norm = std::sqrt(to_double(all_reduce_sum(world, sum), e));
  }
  if (c.cfg.clip_grad > 0) {
    c.backend->clip(dense, c.cfg.clip_grad, norm);
    c.backend->clip(experts, c.cfg.clip_grad, norm);
  }
  return norm;
}

int64_t count_zeros_in_grad(RunContext& c) {
  std::vector<optim::ClipSlot> experts;
  auto dense = clip_slots(c, &experts);
  std::vector<optim::ClipSlot> mine;
  for (const optim::ClipSlot* s : owned(c, dense, experts)) mine.push_back(*s);
  for (auto& s : mine) s.counted = true;
  // The optimizer library's count (exact in a double up to 2^53), summed over the world.
  return static_cast<int64_t>(c.backend->count_zeros(mine, [&c](std::span<double> v, optim::ReduceOp) {
    host_all_reduce(c.rt.group("world"), distributed::Buffer::cpu(v.data(), v.size()), distributed::ReduceOp::Sum);
  }));
}

double params_norm(RunContext& c) {
  const FlatBuffers& b = c.buf;
  std::vector<std::pair<int64_t, int64_t>> mine;  // [begin, end) in the model buffer
  uint32_t m = 0;  // as bits: a NaN is the max (run/abs_max.h)
  for (size_t k = 0; k < c.plan.params.size(); ++k) {
    const ParamSpec& p = c.plan.params[k];
    if (!c.owns(p)) continue;
    mine.emplace_back(b.offset[k], b.offset[k] + p.numel());
    m = max_bits(m, abs_bits(c.backend->max_abs_model(mine.back().first, mine.back().second)));
  }
  distributed::Group& world = c.rt.group("world");
  const double top = all_reduce_max(world, static_cast<double>(abs_of_bits(m)));
  if (!std::isfinite(top)) return top;
  const int e = fixed_exponent(top);
  Fixed sum = 0;
  for (auto [lo, hi] : mine) sum += c.backend->sum_squares_model(lo, hi, e);
  return std::sqrt(to_double(all_reduce_sum(world, sum), e));
}

void optimizer_step(RunContext& c, int64_t step_number) {
  // Groups 0-5: (weight decay, none, RMSNorm gamma's --rmsnorm-weight-decay-mult times it) x (default,
  // --decoupled-lr for embeddings and output); FlatBuffers::group_of.
  std::vector<optim::GroupHyper> groups(6);
  const double wd = c.schedule->weight_decay();
  const double wd_of[3] = {wd, 0.0, wd * c.cfg.rmsnorm_weight_decay_mult.value_or(1.0)};
  const optim::GroupOverride emb = c.schedule->config().embedding_output_group();
  for (int g = 0; g < 6; ++g)
    groups[static_cast<size_t>(g)] = {g >= 3 ? c.schedule->lr(emb) : c.schedule->lr(), wd_of[g % 3], step_number};
  if (c.muon()) return muon_step(c, groups);
  if (c.optimizer.kernel == optim::Kernel::Soap) return soap_step(c, groups);
  FlatBuffers& b = c.buf;
  const BufferPtrs d = c.backend->ptrs();
  std::vector<optim::TensorSlot> slots, scalar_slots;  // the optimizer's own rule; its scalar rule (lion: Adam)
  b.for_each_piece(c.plan, [&](size_t k, int64_t lo, int64_t hi) {
    const ParamSpec& p = c.plan.params[k];
    optim::TensorSlot s;
    s.numel = hi - lo;
    s.param = static_cast<uint8_t*>(d.model) + static_cast<size_t>(lo) * dtype_bytes(b.model_dtype);
    s.param_dtype = b.model_dtype;
    s.grad = b.grad_at(d.grad, d.grad_shard, lo);
    set_states(s, b, d, k, lo);
    s.group = b.group_of[k];
    (optim::takes_own_rule(c.optimizer, p.shape.size(), p.embedding_or_output, p.use_muon) ? slots : scalar_slots)
        .push_back(s);
  });
  if (c.optimizer.scalar_rule == optim::ScalarRule::EmergingAdam) {
    // Megatron's lion (the emerging-optimizer path): Lion's keyword mapping passes betas=(adam_beta1, adam_beta2);
    // --lion-beta1/2 reach Lion only as Muon's scalar optimizer. The rest steps with Adam.
    OptimizerConfig lion = c.cfg;
    lion.lion_beta1 = c.cfg.adam_beta1;
    lion.lion_beta2 = c.cfg.adam_beta2;
    if (!slots.empty()) c.backend->elementwise_step(c.optimizer.kernel, slots, groups, lion);
    if (!scalar_slots.empty()) c.backend->elementwise_step(optim::Kernel::Adam, scalar_slots, groups, c.cfg);
    return;
  }
  c.backend->elementwise_step(c.optimizer.kernel, slots, groups, c.cfg);
}

}  // namespace mr::run
