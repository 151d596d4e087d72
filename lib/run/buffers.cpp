// The training run's flat buffers (run/buffers.h).
#include "run/buffers.h"
#include "run/run_support.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>

#include "optim/kernels.h"
#include "optim/state_codec.h"
#include "util/byte_size.h"
#include "util/resources.h"
#include "util/rule_id.h"

namespace mr::run {

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
  s.ndim = p.shape.size() > 1 ? 2 : 1;
  s.shape0 = p.shape.empty() ? 1 : p.shape[0];
  for (size_t d = 1; d < p.shape.size(); ++d) {  // the rest, folded (whole beyond dimension 1)
    s.shape1 *= p.shape[d];
    s.full1 *= p.full_shape[d];
  }
  s.tp_rank = tp_rank;
  if (p.split_dim >= 0 && p.shape[static_cast<size_t>(p.split_dim)] > 0)
    s.tp_size = p.full_shape[static_cast<size_t>(p.split_dim)] / p.shape[static_cast<size_t>(p.split_dim)];
  if (p.split_dim == 0 && p.split_parts.size() > 1) {
    if (p.split_parts.size() > static_cast<size_t>(kMaxSplitParts))
      throw std::logic_error("shard_index: more split parts than kMaxSplitParts for " + p.name);
    s.nparts = static_cast<int>(p.split_parts.size());
    for (int k = 0; k < s.nparts; ++k) s.part_rows[k] = p.split_parts[static_cast<size_t>(k)] / s.tp_size;
  }
  return s;
}

int64_t global_index(const ParamSpec& p, int64_t tp_rank, int64_t local) {
  return whole_index(shard_index(p, tp_rank), local);
}

void FlatBuffers::store_initial(void* m, int64_t i, float v) const {
  if (has_main && main_storage == MainStorage::Remainder) {
    uint16_t rem = 0;
    optim::split_remainder(v, static_cast<uint16_t*>(m)[i], rem);
  } else {
    optim::store_element(m, model_dtype, i, v);
  }
}

void FlatBuffers::encode_main(const float* x, int64_t n, void* out, float* scale, void* model_bf16) const {
  if (main_storage != MainStorage::Remainder) return optim::encode_state(x, n, master_dtype(), out, scale);
  for (int64_t i = 0; i < n; ++i)
    optim::split_remainder(x[i], static_cast<uint16_t*>(model_bf16)[i], static_cast<uint16_t*>(out)[i]);
}

void FlatBuffers::decode_main(const void* in, int64_t n, const float* scale, const void* model_bf16, float* out) const {
  if (main_storage != MainStorage::Remainder) return optim::decode_state(in, n, master_dtype(), scale, out);
  for (int64_t i = 0; i < n; ++i)
    out[i] = optim::join_remainder(static_cast<const uint16_t*>(model_bf16)[i], static_cast<const uint16_t*>(in)[i]);
}

void FlatBuffers::set_layout(const ModelPlan& plan, const optim::OptimizerInfo& opt, const BufferDtypes& dtypes,
                            const ShardGroups& g, bool decoupled_lr) {
  model_dtype = dtypes.model;
  exp_avg_dtype = dtypes.exp_avg;
  exp_avg_sq_dtype = dtypes.exp_avg_sq;
  // Remainders need bf16 params (Transformer Engine's FusedAdam keeps an fp32 master otherwise).
  main_storage = dtypes.main == MainStorage::Remainder && model_dtype != optim::DType::BF16 ? MainStorage::F32 : dtypes.main;
  sharded = g.distributed;
  layer_wise = g.distributed && g.layer_wise;
  bounds.clear();
  expert_bounds.clear();
  offset.clear();
  group_of.clear();
  auto round_up = [](int64_t n, int64_t m) { return (n + m - 1) / m * m; };
  int64_t n = 0;
  dense_end = -1;
  for (const ParamSpec& p : plan.params) {
    if (p.expert && dense_end < 0) {  // the dense part ends (padded to the data-parallel size when sharded)
      dense_end = n;
      if (sharded && !layer_wise) n = round_up(n, g.dp);
    }
    offset.push_back(n);
    n += p.numel();
  }
  if (dense_end < 0) dense_end = n;
  expert_begin = std::max(dense_end, sharded && !layer_wise ? round_up(dense_end, g.dp) : dense_end);
  numel = n;  // without experts, the dense part's padding is not counted (it is in `padded`)
  const int64_t experts = std::max<int64_t>(0, numel - expert_begin);
  experts_scattered = sharded && !layer_wise && g.edp > 1 && experts > 0;
  if (layer_wise) {
    // Whole parameters in contiguous runs, balanced by elements: the dense part over the data-parallel group, the
    // routed experts over the expert data-parallel group. Rank r of a group of n owns the parameters of the region
    // [begin, end) that start in [r, r + 1) x (end - begin) / n: the same cut on every rank of the group and on every
    // TP peer (their shard sizes are equal).
    auto runs = [&](int64_t begin, int64_t end, int64_t n) {
      std::vector<int64_t> at(static_cast<size_t>(n) + 1, end);
      at[0] = begin;
      const int64_t len = end - begin;
      for (int64_t r = 1; r < n; ++r) {
        const int64_t target = begin + len / n * r + std::min(len % n, r);
        int64_t cut = end;
        for (int64_t o : offset)
          if (o >= target && o < end) {
            cut = o;
            break;
          }
        at[static_cast<size_t>(r)] = std::max(cut, at[static_cast<size_t>(r) - 1]);
      }
      return at;
    };
    bounds = runs(0, dense_end, g.dp);
    expert_bounds = runs(expert_begin, numel, g.edp);
    padded = numel;
    lo = bounds[static_cast<size_t>(g.dp_rank)];
    hi = bounds[static_cast<size_t>(g.dp_rank) + 1];
    elo = expert_bounds[static_cast<size_t>(g.edp_rank)];
    ehi = expert_bounds[static_cast<size_t>(g.edp_rank) + 1];
  } else if (!sharded) {
    padded = numel;
    lo = 0;
    hi = numel;
    elo = ehi = numel;
  } else {
    lo = expert_begin / g.dp * g.dp_rank;
    hi = lo + expert_begin / g.dp;
    const int64_t block = experts_scattered ? round_up(experts, g.edp) / g.edp : experts;
    padded = expert_begin + (experts_scattered ? block * g.edp : experts);
    elo = expert_begin + (experts_scattered ? block * g.edp_rank : 0);
    ehi = elo + block;
  }
  has_main = model_dtype != optim::DType::F32;
  // Adam/Lion first moment, SGD/Muon momentum: allocated for every optimizer the run steps; the second moment
  // only for the parameters whose rule keeps one (Adam; Muon's and lion's Adam part; Adaptive Muon's matrices),
  // packed: this rank's pieces of them in parameter order.
  keeps_sq.assign(plan.params.size(), 0);
  sq_shift.assign(plan.params.size(), 0);
  sq_numel = 0;
  has_exp_avg_sq = false;
  for (size_t k = 0; k < plan.params.size(); ++k) {
    const ParamSpec& p = plan.params[k];
    const bool own = optim::takes_own_rule(opt, p.shape.size(), p.embedding_or_output, p.use_muon);
    keeps_sq[k] = optim::state_of(opt, own).exp_avg_sq ? 1 : 0;
    has_exp_avg_sq = has_exp_avg_sq || keeps_sq[k];
  }
  for_each_piece(plan, [&](size_t k, int64_t b, int64_t e) {  // a parameter's one piece (dense or expert)
    if (!keeps_sq[k]) return;
    sq_shift[k] = sq_numel - local(b);
    sq_numel += e - b;
  });
  kronecker_at.assign(plan.params.size(), -1);
  kronecker_numel = 0;
  soap_work_bytes = 0;
  for (size_t k = 0; k < plan.params.size(); ++k) {
    const ParamSpec& p = plan.params[k];
    const bool own = optim::takes_own_rule(opt, p.shape.size(), p.embedding_or_output, p.use_muon);
    const bool mine = (offset[k] >= lo && offset[k] < hi) || (offset[k] >= elo && offset[k] < ehi);
    if (!optim::state_of(opt, own).kronecker || p.shape.size() != 2 || !mine) continue;
    kronecker_at[k] = kronecker_numel;
    kronecker_numel += optim::kronecker_floats(p.shape[0], p.shape[1]);
    soap_work_bytes = std::max(soap_work_bytes, static_cast<double>(optim::soap_work_bytes(p.shape[0], p.shape[1])));
  }
  // Parameter groups: (weight decay, none, RMSNorm gamma's multiple) x (--decoupled-lr or not); run/step.cpp.
  for (size_t k = 0; k < plan.params.size(); ++k) {
    const ParamSpec& p = plan.params[k];
    const bool decoupled = p.embedding_or_output && decoupled_lr;
    group_of.push_back((p.rmsnorm_gamma ? 2 : p.no_weight_decay ? 1 : 0) + (decoupled ? 3 : 0));
  }
}

BufferBytes FlatBuffers::bytes() const {
  const double f = 4.0, s = static_cast<double>(shard());
  BufferBytes b;
  b.model = static_cast<double>(padded) * static_cast<double>(dtype_bytes(model_dtype));
  b.grad = static_cast<double>(padded) * f;
  b.grad_shard = static_cast<double>(scattered()) * f;
  b.main = has_main ? s * static_cast<double>(main_bytes()) : 0.0;
  // The scaled states' scales (12 bytes per parameter tensor, state_scale) are left out, as the estimate leaves them
  // out.
  b.state = s * optim::dtype_size(exp_avg_dtype) + static_cast<double>(sq_numel) * optim::dtype_size(exp_avg_sq_dtype) +
            static_cast<double>(kronecker_numel) * f;
  b.target = static_cast<double>(numel) * f;
  b.work = soap_work_bytes + muon_work_bytes;
  return b;
}

void FlatBuffers::allocate_host() {
  const size_t s = static_cast<size_t>(shard());
  model.assign(static_cast<size_t>(padded) * dtype_bytes(model_dtype), 0);
  grad.assign(static_cast<size_t>(padded), 0.0f);
  if (scattered() > 0) grad_shard.assign(static_cast<size_t>(scattered()), 0.0f);
  if (has_main) main.assign(s * static_cast<size_t>(main_bytes()), 0);
  exp_avg.assign(s * optim::dtype_size(exp_avg_dtype), 0);  // zero in every dtype
  if (has_exp_avg_sq) exp_avg_sq.assign(static_cast<size_t>(sq_numel) * optim::dtype_size(exp_avg_sq_dtype), 0);
  state_scale.assign(scales(), 0.0f);
  kronecker.assign(static_cast<size_t>(kronecker_numel), 0.0f);
  target.assign(static_cast<size_t>(numel), 0.0f);
}

double FlatBuffers::checkpoint_host_bytes() const {
  const double s = static_cast<double>(shard());
  return static_cast<double>(padded) * static_cast<double>(dtype_bytes(model_dtype)) +
         (has_main ? s * static_cast<double>(main_bytes()) : 0.0) + s * optim::dtype_size(exp_avg_dtype) +
         (has_exp_avg_sq ? static_cast<double>(sq_numel) * optim::dtype_size(exp_avg_sq_dtype) : 0.0) +
         static_cast<double>(scales() + static_cast<size_t>(kronecker_numel)) * 4.0;
}

void FlatBuffers::allocate_checkpoint_host() {
  release_host();  // the gradients and the targets stay empty
  const size_t s = static_cast<size_t>(shard());
  model.assign(static_cast<size_t>(padded) * dtype_bytes(model_dtype), 0);
  if (has_main) main.assign(s * static_cast<size_t>(main_bytes()), 0);
  exp_avg.assign(s * optim::dtype_size(exp_avg_dtype), 0);
  if (has_exp_avg_sq) exp_avg_sq.assign(static_cast<size_t>(sq_numel) * optim::dtype_size(exp_avg_sq_dtype), 0);
  state_scale.assign(scales(), 0.0f);
  kronecker.assign(static_cast<size_t>(kronecker_numel), 0.0f);
}

void FlatBuffers::release_host() {
  for (auto* v : {&grad, &grad_shard, &target, &state_scale, &kronecker}) std::vector<float>().swap(*v);
  for (auto* v : {&model, &main, &exp_avg, &exp_avg_sq}) std::vector<uint8_t>().swap(*v);
}

void FlatBuffers::build(const ModelPlan& plan, const optim::OptimizerInfo& opt, const BufferDtypes& dtypes,
                        const ShardGroups& shards, int64_t tp_rank, int64_t etp_rank, uint64_t seed, double init_std,
                        bool decoupled_lr) {
  set_layout(plan, opt, dtypes, shards, decoupled_lr);
  allocate_host();  // the caller checked the memory first (check_memory: train.cpp, every rank before any allocates)
  std::vector<float> init;
  for (size_t k = 0; k < plan.params.size(); ++k) {
    const ParamSpec& p = plan.params[k];
    initial_param(k, p, seed, init_std, p.expert ? etp_rank : tp_rank,
                  model.data() + static_cast<size_t>(offset[k]) * dtype_bytes(model_dtype), target.data() + offset[k], init,
                  [&](int64_t b, int64_t) { return main_at(main.data(), b); }, state_scale.data());
  }
}

void FlatBuffers::initial_param(size_t k, const ParamSpec& p, uint64_t seed, double init_std, int64_t tp_rank,
                                void* model_k, float* target_k, std::vector<float>& init,
                                const std::function<void*(int64_t, int64_t)>& main_out, float* scales) const {
  init.resize(static_cast<size_t>(p.numel()));
  initial_values(p, seed, init_std, tp_rank, [&](int64_t i, float v, float t) {
    store_initial(model_k, i, v);
    target_k[i] = t;
    init[static_cast<size_t>(i)] = v;
  });
  if (!has_main) return;
  // This rank's main params: the initial values, kept as main_storage says (remainders set the bf16 params too).
  const int64_t base = offset[k];
  pieces_of(k, p.numel(), [&](size_t, int64_t b, int64_t e) {
    encode_main(init.data() + (b - base), e - b, main_out(b, e), scale_at(scales, Scaled::Main, k),
                static_cast<uint8_t*>(model_k) + static_cast<size_t>(b - base) * dtype_bytes(model_dtype));
  });
}

void FlatBuffers::main_from_model(const ModelPlan& plan) {
  if (!has_main) return;
  std::vector<float> x;
  for_each_piece(plan, [&](size_t k, int64_t lo, int64_t hi) {
    x.resize(static_cast<size_t>(hi - lo));
    for (int64_t i = lo; i < hi; ++i) x[static_cast<size_t>(i - lo)] = optim::load_element(model.data(), model_dtype, i);
    encode_main(x.data(), hi - lo, main_at(main.data(), lo), scale_at(state_scale.data(), Scaled::Main, k),
                model.data() + static_cast<size_t>(lo) * dtype_bytes(model_dtype));
  });
}

namespace {

// The first number after `key` in a /proc-style file ("MemAvailable:", "VmSize:"), times `unit`; 0 when absent.
double proc_field(const char* path, const std::string& key, double unit) {
  std::ifstream in(path);
  std::string k;
  for (std::string line; std::getline(in, line);) {
    std::istringstream ls(line);
    double v = 0;
    if (ls >> k >> v && k == key) return v * unit;
  }
  return 0;
}

// One number from a cgroup v2 file ("max" or absent: none).
std::optional<double> cgroup_value(const std::string& path) {
  std::ifstream in(path);
  std::string v;
  if (!(in >> v) || v == "max") return std::nullopt;
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  return end && *end == '\0' ? std::optional<double>(x) : std::nullopt;
}

}  // namespace

// What the buffers take, against what this process and machine have for all its local ranks: a model that does
// not fit is an error naming the sizes, not an out-of-memory kill or an allocation failure. Three limits: the
// machine's available memory and the cgroup's memory.max (cgroup v2, as a container sees it) for all local ranks
// together, and this process's address space (RLIMIT_AS, ulimit -v, less what is mapped already) for its own share.
namespace {

// Rule run.host-memory: `need` bytes on each of this machine's local ranks (LOCAL_WORLD_SIZE) against its available
// memory, the cgroup's memory.max, and this process's address space. `the_run` says who needs them, `what` for what
// ("... for " + what + "but ..."), `advice` how to need less (": ...").
void check_host_bytes(double need, const std::string& the_run, const std::string& what, const std::string& advice) {
  int64_t local = 1;
  if (const char* l = std::getenv("LOCAL_WORLD_SIZE")) local = std::max<int64_t>(1, std::atoll(l));
  auto refuse = [](const std::string& text) { return RunError(with_rule_id(kHostMemoryRule.id, text)); };
  const double all = need * static_cast<double>(local);
  // MR_RUN_MEM_AVAILABLE_BYTES: this machine's available memory as the check reads it (tests; default MemAvailable).
  const char* knob = std::getenv("MR_RUN_MEM_AVAILABLE_BYTES");
  const double avail = knob ? std::strtod(knob, nullptr) : proc_field("/proc/meminfo", "MemAvailable:", 1024.0);
  if (avail > 0 && all > 0.9 * avail)
    throw refuse(the_run + " needs " + format_gib(need) + " on each of the " + std::to_string(local) +
                 " ranks of this machine for " + what + "only " + format_gib(avail) + " are available" + advice);
  const std::string cg = "/sys/fs/cgroup/";
  // The cgroup's limit itself, not less memory.current: that counts page cache the kernel would reclaim.
  if (const std::optional<double> max = cgroup_value(cg + "memory.max"); max && all > 0.9 * *max)
    throw refuse(the_run + " needs " + format_gib(need) + " on each of the " + std::to_string(local) +
                 " ranks of this machine for " + what + "their cgroup's memory.max is " + format_gib(*max) + advice);
  if (const std::optional<uint64_t> as = util::address_space_limit()) {
    const double left = static_cast<double>(*as) - proc_field("/proc/self/status", "VmSize:", 1024.0);
    if (need > 0.9 * left)
      throw refuse(the_run + " needs " + format_gib(need) + " in this rank for " + what +
                   "its address-space limit (RLIMIT_AS, ulimit -v " + std::to_string(*as / 1024) + ") leaves " +
                   format_gib(std::max(0.0, left)) + ": raise the limit (ulimit -v), or" + advice.substr(1));
  }
}

}  // namespace

void FlatBuffers::check_memory() const {
  check_host_bytes(bytes().total(), "the training run",  // params, grads, targets, grad shard, main params, states
                   std::to_string(numel) +
                       " parameters (params, gradients, main params, optimizer state and the step's scratch; host "
                       "memory), but ",
                   ": use a smaller model (--num-layers, --hidden-size), more ranks "
                   "(--tensor/--pipeline-model-parallel-size, --use-distributed-optimizer) or --dry-run");
}

void FlatBuffers::check_checkpoint_memory(const std::string& what) const {
  const double need = checkpoint_host_bytes();
  check_host_bytes(need, what,
                   "the host copy of the device buffers a checkpoint holds (" +
                       std::to_string(static_cast<uint64_t>(need)) + " bytes: params, main params and optimizer "
                       "state of " + std::to_string(numel) + " parameters), but ",
                   ": use more ranks (--tensor/--pipeline-model-parallel-size, --use-distributed-optimizer), fewer "
                   "ranks on this machine, or --no-save-optim / --no-load-optim");
}

}  // namespace mr::run
