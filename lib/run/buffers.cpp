// The training run's flat buffers (run/buffers.h).
#include "run/buffers.h"

#include <omp.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "optim/kernels.h"

namespace mr::run {

uint64_t mix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
uint64_t fnv1a(const void* data, size_t n, uint64_t h) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}
uint64_t name_key(const std::string& s, uint64_t seed) { return fnv1a(s.data(), s.size(), mix64(seed)); }
float uniform(uint64_t key) { return static_cast<float>(mix64(key) >> 40) * (2.0f / 16777216.0f) - 1.0f; }
float normal(uint64_t key) {
  double u1 = (static_cast<double>(mix64(key) >> 11) + 1.0) / 9007199254740993.0;  // (0, 1]
  double u2 = static_cast<double>(mix64(key ^ 0x5bd1e995ull) >> 11) / 9007199254740992.0;
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
}

ShardIndex shard_index(const ParamSpec& p, int64_t tp_rank) {
  ShardIndex s;
  s.split_dim = p.split_dim;
  s.ndim = static_cast<int>(p.shape.size());
  s.shape0 = p.shape.empty() ? 1 : p.shape[0];
  s.shape1 = p.shape.size() > 1 ? p.shape[1] : 1;
  s.full1 = p.full_shape.size() > 1 ? p.full_shape[1] : 1;
  s.tp_rank = tp_rank;
  return s;
}

int64_t global_index(const ParamSpec& p, int64_t tp_rank, int64_t local) {
  return whole_index(shard_index(p, tp_rank), local);
}

size_t dtype_bytes(optim::DType d) { return d == optim::DType::F32 ? 4 : 2; }

void FlatBuffers::build(const ModelPlan& plan, const optim::OptimizerInfo& opt, optim::DType dtype,
                        bool distributed_optimizer, int64_t dp, int64_t dp_rank, int64_t tp_rank, int64_t etp_rank, uint64_t seed,
                        double init_std, bool decoupled_lr) {
  model_dtype = dtype;
  sharded = distributed_optimizer;
  int64_t n = 0;
  for (const ParamSpec& p : plan.params) {
    offset.push_back(n);
    n += p.numel();
  }
  numel = n;
  dense_end = n;
  for (size_t k = 0; k < plan.params.size(); ++k)
    if (plan.params[k].expert) {
      dense_end = offset[k];
      break;
    }
  padded = sharded ? (n + dp - 1) / dp * dp : n;
  lo = sharded ? padded / dp * dp_rank : 0;
  hi = sharded ? lo + padded / dp : padded;
  const int64_t shard = hi - lo;
  check_memory(opt, shard);
  model.assign(static_cast<size_t>(padded) * dtype_bytes(model_dtype), 0);
  grad.assign(static_cast<size_t>(padded), 0.0f);
  if (sharded) grad_shard.assign(static_cast<size_t>(shard), 0.0f);
  if (model_dtype != optim::DType::F32) main.assign(static_cast<size_t>(shard), 0.0f);
  // Adam/Lion first moment, SGD/Muon momentum: allocated for every optimizer the run steps.
  exp_avg.assign(static_cast<size_t>(shard), 0.0f);
  if (opt.state.exp_avg_sq || opt.scalar_state.exp_avg_sq) exp_avg_sq.assign(static_cast<size_t>(shard), 0.0f);
  target.assign(static_cast<size_t>(n), 0.0f);

  for (size_t k = 0; k < plan.params.size(); ++k) {
    const ParamSpec& p = plan.params[k];
    const uint64_t key = name_key(p.key, seed);
    const bool one = p.init == ParamSpec::Init::One, zero = p.init == ParamSpec::Init::Zero;
    const int64_t cnt = p.numel(), base = offset[k];
    const ShardIndex where = shard_index(p, p.expert ? etp_rank : tp_rank);
#pragma omp parallel for schedule(static) num_threads(optim::cpu::threads())
    for (int64_t i = 0; i < cnt; ++i) {
      const uint64_t gi = static_cast<uint64_t>(whole_index(where, i));
      const float init = one ? 1.0f : zero ? 0.0f : static_cast<float>(init_std) * normal(mix64(key ^ gi));
      const float t = init + static_cast<float>(init_std) * normal(mix64(key ^ gi) ^ 0x7f4a7c15ull);
      store(model.data(), model_dtype, base + i, init);
      target[static_cast<size_t>(base + i)] = t;
      if (base + i >= lo && base + i < hi && !main.empty()) main[static_cast<size_t>(base + i - lo)] = init;
    }
  }
  // Parameter groups: (weight decay or not) x (--decoupled-lr or not).
  for (size_t k = 0; k < plan.params.size(); ++k) {
    const ParamSpec& p = plan.params[k];
    const bool decoupled = p.embedding_or_output && decoupled_lr;
    group_of.push_back((p.no_weight_decay ? 1 : 0) + (decoupled ? 2 : 0));
  }
}

namespace {
std::string gib_text(double bytes) {
  char b[64];
  std::snprintf(b, sizeof b, "%.1f", bytes / (1024.0 * 1024.0 * 1024.0));
  return b;
}
}  // namespace

// What the buffers take, against what this machine has for all its local ranks: a model that does not fit is an
// error naming the sizes, not an out-of-memory kill.
void FlatBuffers::check_memory(const optim::OptimizerInfo& opt, int64_t shard) const {
  const double f = 4.0;
  const int state_buffers = 1 + ((opt.state.exp_avg_sq || opt.scalar_state.exp_avg_sq) ? 1 : 0);  // as allocated
  double need = static_cast<double>(padded) * (static_cast<double>(dtype_bytes(model_dtype)) + f) +  // params, grads
                static_cast<double>(numel) * f +                                                    // targets
                static_cast<double>(shard) * f *
                    ((sharded ? 1 : 0) + (model_dtype != optim::DType::F32 ? 1 : 0) +
                     state_buffers);  // grad shard, main params, states
  int64_t local = 1;
  if (const char* l = std::getenv("LOCAL_WORLD_SIZE")) local = std::max<int64_t>(1, std::atoll(l));
  double avail = 0;
  std::ifstream mi("/proc/meminfo");
  std::string key;
  double kb = 0;
  std::string unit;
  while (mi >> key >> kb >> unit)
    if (key == "MemAvailable:") avail = kb * 1024.0;
  if (avail > 0 && need * static_cast<double>(local) > 0.9 * avail) {
    throw RunError("the training run needs " + gib_text(need) + " GiB on each of the " + std::to_string(local) +
                   " ranks of this machine for " + std::to_string(numel) +
                   " parameters (params, gradients, main params and optimizer state; host memory), but only " +
                   gib_text(avail) +
                   " GiB are available: use a smaller model (--num-layers, --hidden-size), more ranks "
                   "(--tensor/--pipeline-model-parallel-size, --use-distributed-optimizer) or --dry-run");
  }
}

}  // namespace mr::run
