#include "run/train.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <vector>

#include "config/optimizer_config.h"
#include "optim/clip_grads.h"
#include "optim/config.h"
#include "optim/grad_scaler.h"
#include "optim/kernels.h"
#include "optim/muon.h"
#include "optim/schedule.h"
#include "run/model.h"

namespace mr::run {

namespace {

using Clock = std::chrono::steady_clock;

// ---- deterministic synthetic values ----------------------------------------------------------------------------

uint64_t mix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
uint64_t fnv1a(const void* data, size_t n, uint64_t h = 0xcbf29ce484222325ull) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}
uint64_t name_key(const std::string& s, uint64_t seed) { return fnv1a(s.data(), s.size(), mix64(seed)); }
// Uniform in [-1, 1) and standard normal (Box-Muller), from a key.
float uniform(uint64_t key) { return static_cast<float>(mix64(key) >> 40) * (2.0f / 16777216.0f) - 1.0f; }
float normal(uint64_t key) {
  double u1 = (static_cast<double>(mix64(key) >> 11) + 1.0) / 9007199254740993.0;  // (0, 1]
  double u2 = static_cast<double>(mix64(key ^ 0x5bd1e995ull) >> 11) / 9007199254740992.0;
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
}

// The element's index in the whole (unsplit) tensor, so that values do not depend on the TP layout.
int64_t global_index(const ParamSpec& p, int64_t tp_rank, int64_t local) {
  if (p.split_dim < 0) return local;
  if (p.shape.size() == 1) return tp_rank * p.shape[0] + local;
  const int64_t cols = p.shape[1], r = local / cols, c = local % cols;
  if (p.split_dim == 0) return (tp_rank * p.shape[0] + r) * p.full_shape[1] + c;
  return r * p.full_shape[1] + tp_rank * cols + c;
}

bool ends_with(const std::string& s, const char* suffix) {
  size_t k = std::strlen(suffix);
  return s.size() >= k && s.compare(s.size() - k, k, suffix) == 0;
}

// ---- precision -------------------------------------------------------------------------------------------------

float to_float(const void* buf, optim::DType d, int64_t i) {
  switch (d) {
    case optim::DType::F32: return static_cast<const float*>(buf)[i];
    case optim::DType::BF16: return optim::bf16_to_f32(static_cast<const uint16_t*>(buf)[i]);
    case optim::DType::F16: return optim::f16_to_f32(static_cast<const uint16_t*>(buf)[i]);
  }
  return 0.0f;
}
void store(void* buf, optim::DType d, int64_t i, float v) {
  switch (d) {
    case optim::DType::F32: static_cast<float*>(buf)[i] = v; break;
    case optim::DType::BF16: static_cast<uint16_t*>(buf)[i] = optim::f32_to_bf16(v); break;
    case optim::DType::F16: static_cast<uint16_t*>(buf)[i] = optim::f32_to_f16(v); break;
  }
}
size_t dtype_bytes(optim::DType d) { return d == optim::DType::F32 ? 4 : 2; }

std::set<int64_t> iterations_from_env(const char* name) {
  std::set<int64_t> out;
  const char* v = std::getenv(name);
  if (!v) return out;
  std::stringstream ss(v);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.insert(std::stoll(item));
  return out;
}

std::string format(const char* fmt, double v) {
  char b[64];
  std::snprintf(b, sizeof b, fmt, v);
  return b;
}
std::string mib(double bytes) { return format("%.1f MiB", bytes / (1024.0 * 1024.0)); }

// ---- the run ---------------------------------------------------------------------------------------------------

class Run {
 public:
  Run(distributed::Runtime& rt, const Namespace& args, std::ostream& log, std::string prefix)
      : rt_(rt), args_(args), log_(log), prefix_(std::move(prefix)),
        tp_(rt.group("tp")), pp_(rt.group("pp")), dp_(rt.group("dp-cp")), mp_(rt.group("tp-pp")),
        edp_(rt.group("expert-dp")), etp_(rt.group("expert-tp")), emp_(rt.group("expert-tp-ep-pp")) {
    cfg_ = OptimizerConfig::from_args(args);
    if (cfg_.optimizer != "adam" && cfg_.optimizer != "sgd" && cfg_.optimizer != "lion" && cfg_.optimizer != "muon")
      throw RunError("the training run steps adam, sgd, lion and muon; --optimizer " + cfg_.optimizer +
                     " is not supported yet");
    muon_ = cfg_.optimizer == "muon";
    if (muon_ && cfg_.use_distributed_optimizer)
      throw RunError("the training run does not shard Muon's state: --optimizer muon with --use-distributed-optimizer "
                     "(Megatron's layer-wise distributed optimizer) is not supported yet");
    if (muon_ && cfg_.fp16)
      throw RunError("--optimizer muon does not run with --fp16 (Megatron gives Muon's parameters no loss scaler)");
    if (args.has("rampup_batch_size") && !args["rampup_batch_size"].is_none())
      throw RunError("the training run does not model --rampup-batch-size yet");
    global_batch_ = args["global_batch_size"].as_int();
    if (args.has("train_iters") && !args["train_iters"].is_none() && args["train_iters"].as_int() > 0) {
      train_iters_ = args["train_iters"].as_int();
    } else if (args.has("train_samples") && !args["train_samples"].is_none()) {
      // Sample-based (Megatron's update_train_iters without ramp-up): whole global batches.
      train_iters_ = args["train_samples"].as_int() / global_batch_;
    } else {
      throw RunError("the training run needs --train-iters or --train-samples");
    }
    log_interval_ = std::max<int64_t>(1, args.has("log_interval") ? args["log_interval"].as_int() : 100);
    seed_ = static_cast<uint64_t>(args.has("seed") ? args["seed"].as_int() : 1234);
    init_std_ = args.has("init_method_std") ? args["init_method_std"].as_float() : 0.02;
    if (!(init_std_ > 0)) init_std_ = 0.02;

    RankCoord at{tp_.rank(), tp_.size(), pp_.rank(), pp_.size(), rt.group("ep").size(), rt.group("ep").rank(),
                 etp_.rank(), etp_.size()};
    plan_ = plan_gpt_model(args, at);
    if (plan_.has_experts() && (cfg_.use_distributed_optimizer || muon_))
      throw RunError(std::string("the training run does not shard or orthogonalise routed experts yet: --num-experts with ") +
                     (muon_ ? "--optimizer muon" : "--use-distributed-optimizer") + " is not supported");
    // Routed experts last: their gradients reduce over the expert data-parallel group, the rest over DP x CP.
    std::stable_partition(plan_.params.begin(), plan_.params.end(), [](const ParamSpec& p) { return !p.expert; });
    tied_ = !(args.has("untie_embeddings_and_output_weights") && args["untie_embeddings_and_output_weights"].truthy());
    dist_opt_ = cfg_.use_distributed_optimizer && dp_.size() > 1;
    model_dtype_ = cfg_.bf16 ? optim::DType::BF16 : cfg_.fp16 ? optim::DType::F16 : optim::DType::F32;
    scaler_ = optim::make_grad_scaler(cfg_);
    schedule_.emplace(optim::ScheduleConfig::from_args(args));
    layout_buffers();
  }

  TrainResult run() {
    TrainResult res;
    announce();
    const std::set<int64_t> inject = iterations_from_env("MR_RUN_NONFINITE_AT");
    int64_t consumed = 0, skipped_total = 0, steps_done = 0;
    double elapsed_ms_window = 0;
    int64_t window_iters = 0, window_skipped = 0;
    for (int64_t it = 1; it <= train_iters_; ++it) {
      auto t0 = Clock::now();
      const double loss = forward_and_grads(it, inject.count(it) && rt_.rank() == 0);
      if (it == 1) res.first_loss = loss;
      res.last_loss = loss;
      reduce_grads();
      // Unscale and look for inf/NaN (mixed precision with a loss scaler only, as Megatron).
      bool found_inf = false;
      if (scaler_) {
        auto u = optim::cpu::unscale_and_check(grad_slots(), scaler_->inv_scale(), /*in_place=*/true);
        double f = u.found_inf ? 1.0 : 0.0;
        stats_reduce(std::span<double>(&f, 1), optim::ReduceOp::Max);
        found_inf = f > 0;
        scaler_->update(found_inf);
      }
      double grad_norm = std::nan("");
      if (!found_inf) {
        std::vector<optim::ClipSlot> experts;
        auto dense = clip_slots(&experts);
        auto reduce = [this](std::span<double> v, optim::ReduceOp op) { stats_reduce(v, op); };
        if (plan_.has_experts()) {
          // Megatron's chained optimizer: the dense norm over the model-parallel group, the experts' over the
          // expert model-parallel group, combined; one clip coefficient for both.
          auto reduce_experts = [this](std::span<double> v, optim::ReduceOp op) {
            emp_.all_reduce(distributed::Buffer::cpu(v.data(), v.size()),
                            op == optim::ReduceOp::Max ? distributed::ReduceOp::Max : distributed::ReduceOp::Sum);
          };
          const double d = optim::cpu::grad_norm(dense, 2.0, reduce), e = optim::cpu::grad_norm(experts, 2.0, reduce_experts);
          grad_norm = std::sqrt(d * d + e * e);
          if (cfg_.clip_grad > 0) {
            optim::cpu::clip_grads_by_total_norm(dense, cfg_.clip_grad, grad_norm);
            optim::cpu::clip_grads_by_total_norm(experts, cfg_.clip_grad, grad_norm);
          }
        } else {
          grad_norm = optim::cpu::clip_grad_norm(dense, cfg_.clip_grad, 2.0, reduce);
        }
        step(++steps_done);
        schedule_->step(global_batch_);
        publish_params();
      } else {
        ++skipped_total;
        ++window_skipped;
      }
      consumed += global_batch_;
      res.last_grad_norm = grad_norm;
      elapsed_ms_window += std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      ++window_iters;
      if (it % log_interval_ == 0 || it == train_iters_) {
        if (rt_.rank() == rt_.world_size() - 1) {
          std::ostringstream line;
          char head[128];
          std::snprintf(head, sizeof head, " iteration %8lld/%8lld | consumed samples: %12lld |",
                        static_cast<long long>(it), static_cast<long long>(train_iters_),
                        static_cast<long long>(consumed));
          line << prefix_ << head << " elapsed time per iteration (ms): " << format("%.1f", elapsed_ms_window / window_iters)
               << " | learning rate: " << format("%.6E", schedule_->lr()) << " | global batch size: "
               << format("%5.0f", static_cast<double>(global_batch_)) << " | synthetic loss: " << format("%.6E", loss)
               << " |";
          if (scaler_) line << " loss scale: " << format("%.1f", scaler_->scale()) << " |";
          if (!found_inf) line << " grad norm: " << format("%.3f", grad_norm) << " |";
          line << " number of skipped iterations: " << format("%3.0f", static_cast<double>(window_skipped))
               << " | number of nan iterations: " << format("%3.0f", 0.0) << " |";
          log_ << line.str() << std::endl;
        }
        elapsed_ms_window = 0;
        window_iters = window_skipped = 0;
      }
    }
    res.iterations = train_iters_;
    res.skipped = skipped_total;
    res.params_checksum = check_replicas();
    if (rt_.rank() == rt_.world_size() - 1) {
      char b[64];
      std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(res.params_checksum));
      log_ << prefix_ << "megatron-run: training run finished: " << res.iterations << " iterations (" << res.skipped
           << " skipped), synthetic loss " << format("%.6E", res.first_loss) << " -> " << format("%.6E", res.last_loss)
           << (dp_.size() > 1 ? "; the " + std::to_string(dp_.size()) + " data-parallel replicas hold identical parameters"
                              : std::string())
           << " (parameter checksum " << b << ")" << std::endl;
    }
    return res;
  }

 private:
  // The flat buffers: every local parameter back to back (`offset_`), padded to a multiple of the data-parallel
  // size; this rank's shard of main params / optimizer states is [lo_, hi_) (everything without the
  // distributed optimizer).
  void layout_buffers() {
    int64_t n = 0;
    for (const ParamSpec& p : plan_.params) {
      offset_.push_back(n);
      n += p.numel();
    }
    numel_ = n;
    dense_end_ = n;
    for (size_t k = 0; k < plan_.params.size(); ++k)
      if (plan_.params[k].expert) {
        dense_end_ = offset_[k];
        break;
      }
    const int64_t dp = dp_.size();
    padded_ = dist_opt_ ? (n + dp - 1) / dp * dp : n;
    lo_ = dist_opt_ ? padded_ / dp * dp_.rank() : 0;
    hi_ = dist_opt_ ? lo_ + padded_ / dp : padded_;
    const int64_t shard = hi_ - lo_;
    check_memory(shard);
    model_.assign(static_cast<size_t>(padded_) * dtype_bytes(model_dtype_), 0);
    grad_.assign(static_cast<size_t>(padded_), 0.0f);
    if (dist_opt_) grad_shard_.assign(static_cast<size_t>(shard), 0.0f);
    if (model_dtype_ != optim::DType::F32) main_.assign(static_cast<size_t>(shard), 0.0f);
    exp_avg_.assign(static_cast<size_t>(shard), 0.0f);  // Adam/Lion first moment, SGD/Muon momentum
    if (cfg_.optimizer == "adam" || muon_) exp_avg_sq_.assign(static_cast<size_t>(shard), 0.0f);
    target_.assign(static_cast<size_t>(n), 0.0f);

    // Initial values and targets: Megatron's init (normal with --init-method-std for matrices, ones for norm
    // weights, zeros for biases), keyed by the element's index in the whole tensor.
    for (size_t k = 0; k < plan_.params.size(); ++k) {
      const ParamSpec& p = plan_.params[k];
      const uint64_t key = name_key(p.key, seed_);
      const bool one = p.init == ParamSpec::Init::One, zero = p.init == ParamSpec::Init::Zero;
      const int64_t cnt = p.numel(), base = offset_[k];
#pragma omp parallel for schedule(static) num_threads(optim::cpu::threads())
      for (int64_t i = 0; i < cnt; ++i) {
        const uint64_t gi = static_cast<uint64_t>(global_index(p, tp_.rank(), i));
        const float init = one ? 1.0f : zero ? 0.0f : static_cast<float>(init_std_) * normal(mix64(key ^ gi));
        const float target = init + static_cast<float>(init_std_) * normal(mix64(key ^ gi) ^ 0x7f4a7c15ull);
        store(model_.data(), model_dtype_, base + i, init);
        target_[static_cast<size_t>(base + i)] = target;
        if (base + i >= lo_ && base + i < hi_ && !main_.empty()) main_[static_cast<size_t>(base + i - lo_)] = init;
      }
    }
    // Parameter groups: (weight decay or not) x (--decoupled-lr or not).
    for (size_t k = 0; k < plan_.params.size(); ++k) {
      const ParamSpec& p = plan_.params[k];
      const bool decoupled = p.embedding_or_output && cfg_.decoupled_lr.has_value();
      group_of_.push_back((p.no_weight_decay ? 1 : 0) + (decoupled ? 2 : 0));
    }
  }

  // What the buffers below take, against what this machine has for all its local ranks: a model that does not
  // fit is an error naming the sizes, not an out-of-memory kill.
  void check_memory(int64_t shard) const {
    const double f = 4.0;
    double need = static_cast<double>(padded_) * (static_cast<double>(dtype_bytes(model_dtype_)) + f) +  // params, grads
                  static_cast<double>(numel_) * f +                                                     // targets
                  static_cast<double>(shard) * f *
                      ((dist_opt_ ? 1 : 0) + (model_dtype_ != optim::DType::F32 ? 1 : 0) + 1 +
                       (cfg_.optimizer == "adam" || muon_ ? 1 : 0));  // grad shard, main params, states
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
      const double gib = 1024.0 * 1024.0 * 1024.0;
      throw RunError("the training run needs " + format("%.1f", need / gib) + " GiB on each of the " +
                     std::to_string(local) + " ranks of this machine for " + std::to_string(numel_) +
                     " parameters (params, gradients, main params and optimizer state; host memory), but only " +
                     format("%.1f", avail / gib) +
                     " GiB are available: use a smaller model (--num-layers, --hidden-size), more ranks "
                     "(--tensor/--pipeline-model-parallel-size, --use-distributed-optimizer) or --dry-run");
    }
  }

  void announce() {
    const double model_bytes = static_cast<double>(numel_) * static_cast<double>(dtype_bytes(model_dtype_));
    const double state_bytes = 4.0 * static_cast<double>(main_.size() + exp_avg_.size() + exp_avg_sq_.size());
    std::ostringstream s;
    s << prefix_ << " > number of parameters on (tensor, pipeline) model parallel rank (" << tp_.rank() << ", "
      << pp_.rank() << "): " << numel_ << " (" << plan_.layers.size() << " layers; model params "
      << mib(model_bytes) << ", main params + optimizer state " << mib(state_bytes)
      << (dist_opt_ ? " (distributed optimizer shard)" : "") << ")";
    // One line per (tp, pp) coordinate, from its first data-parallel rank, as Megatron prints it.
    if (dp_.rank() == 0) log_ << s.str() << std::endl;
    if (rt_.rank() == rt_.world_size() - 1)
      log_ << prefix_ << "megatron-run: synthetic training run: " << train_iters_ << " iterations, "
           << cfg_.optimizer << ", " << (model_dtype_ == optim::DType::F32 ? "fp32" : cfg_.bf16 ? "bf16" : "fp16")
           << (dist_opt_ ? ", distributed optimizer" : "") << "; gradients are synthetic (no model forward/backward)"
           << std::endl;
  }

  // Loss of the current parameters (before this iteration's step) and this rank's gradients into grad_.
  double forward_and_grads(int64_t it, bool inject_nonfinite) {
    const float scale = scaler_ ? scaler_->scale() : 1.0f;
    const float noise = static_cast<float>(init_std_);
    double sum_sq = 0.0, count = 0.0, expert_sum_sq = 0.0, expert_count = 0.0;
    for (size_t k = 0; k < plan_.params.size(); ++k) {
      const ParamSpec& p = plan_.params[k];
      // The noise differs per data-parallel replica (of the dense part, or of this expert).
      const uint64_t replica = static_cast<uint64_t>(p.expert ? edp_.rank() : dp_.rank());
      const uint64_t key = name_key(p.key, seed_ ^ mix64(static_cast<uint64_t>(it) * 0x9e37ull + replica));
      const bool counted = is_counted(p);
      const int64_t cnt = p.numel(), base = offset_[k];
      double local = 0.0;
#pragma omp parallel for schedule(static) num_threads(optim::cpu::threads()) reduction(+ : local)
      for (int64_t i = 0; i < cnt; ++i) {
        const float w = to_float(model_.data(), model_dtype_, base + i);
        const float d = w - target_[static_cast<size_t>(base + i)];
        const uint64_t gi = static_cast<uint64_t>(global_index(p, tp_.rank(), i));
        grad_[static_cast<size_t>(base + i)] = (d + noise * uniform(key ^ mix64(gi))) * scale;
        local += static_cast<double>(d) * static_cast<double>(d);
      }
      if (counted) {
        (p.expert ? expert_sum_sq : sum_sq) += local;
        (p.expert ? expert_count : count) += static_cast<double>(cnt);
      }
    }
    if (inject_nonfinite && numel_ > 0) grad_[0] = INFINITY;
    // The dense part once per model-parallel group; every routed expert once per expert model-parallel group.
    double v[2] = {sum_sq, count};
    mp_.all_reduce(distributed::Buffer::cpu(v, 2), distributed::ReduceOp::Sum);
    if (plan_.has_experts()) {
      double e[2] = {expert_sum_sq, expert_count};
      emp_.all_reduce(distributed::Buffer::cpu(e, 2), distributed::ReduceOp::Sum);
      v[0] += e[0];
      v[1] += e[1];
    }
    return v[1] > 0 ? 0.5 * v[0] / v[1] : 0.0;
  }

  // The tied word embeddings' two copies sum their gradients; then the data-parallel average.
  void reduce_grads() {
    if (tied_ && pp_.size() > 1 && (pp_.rank() == 0 || pp_.rank() == pp_.size() - 1)) {
      for (size_t k = 0; k < plan_.params.size(); ++k) {
        const ParamSpec& p = plan_.params[k];
        if (p.name == "embedding.word_embeddings.weight" || p.shared_copy)
          rt_.group("embedding").all_reduce(distributed::Buffer::cpu(grad_.data() + offset_[k], static_cast<size_t>(p.numel())),
                                            distributed::ReduceOp::Sum);
      }
    }
    // Sum over the group, then the average (the optimizer library's threaded gradient scaling).
    auto scale = [](float* g, int64_t n, int64_t group_size) {
      optim::cpu::scale_grads(std::vector<optim::GradSlot>{{n, g, optim::DType::F32}}, 1.0f / static_cast<float>(group_size));
    };
    // Routed experts (the tail of the buffer) average over their own data-parallel group.
    if (dense_end_ < numel_ && edp_.size() > 1) {
      float* e = grad_.data() + dense_end_;
      edp_.all_reduce(distributed::Buffer::cpu(e, static_cast<size_t>(numel_ - dense_end_)), distributed::ReduceOp::Sum);
      scale(e, numel_ - dense_end_, edp_.size());
    }
    if (dp_.size() == 1) return;
    if (dist_opt_) {
      dp_.reduce_scatter(distributed::Buffer::cpu(grad_.data(), static_cast<size_t>(padded_)),
                         distributed::Buffer::cpu(grad_shard_.data(), grad_shard_.size()), distributed::ReduceOp::Sum);
      scale(grad_shard_.data(), static_cast<int64_t>(grad_shard_.size()), dp_.size());
    } else {
      dp_.all_reduce(distributed::Buffer::cpu(grad_.data(), static_cast<size_t>(dense_end_)), distributed::ReduceOp::Sum);
      scale(grad_.data(), dense_end_, dp_.size());
    }
  }

  float* shard_grad() { return dist_opt_ ? grad_shard_.data() : grad_.data(); }

  // The parts of each parameter inside this rank's shard.
  template <class F>
  void for_each_piece(F&& f) const {
    for (size_t k = 0; k < plan_.params.size(); ++k) {
      const int64_t b = std::max(offset_[k], lo_), e = std::min(offset_[k] + plan_.params[k].numel(), hi_);
      if (b < e) f(k, b, e);
    }
  }

  std::vector<optim::GradSlot> grad_slots() {
    std::vector<optim::GradSlot> out;
    float* g = shard_grad();
    for_each_piece([&](size_t, int64_t b, int64_t e) { out.push_back({e - b, g + (b - lo_), optim::DType::F32}); });
    return out;
  }

  // The gradients for the norm and the clip: the dense part, and the routed experts into `experts`.
  std::vector<optim::ClipSlot> clip_slots(std::vector<optim::ClipSlot>* experts) {
    std::vector<optim::ClipSlot> out;
    float* g = shard_grad();
    for_each_piece([&](size_t k, int64_t b, int64_t e) {
      const ParamSpec& p = plan_.params[k];
      optim::ClipSlot s;
      s.grad = {e - b, g + (b - lo_), optim::DType::F32};
      s.counted = is_counted(p);
      (p.expert ? *experts : out).push_back(s);
    });
    return out;
  }

  // Counted once in losses and norms: not a TP copy (expert TP for routed experts), not the tied output copy.
  bool is_counted(const ParamSpec& p) const {
    if (p.expert) return !(p.tp_duplicate && etp_.rank() != 0);
    return !(p.tp_duplicate && tp_.rank() != 0) && !p.shared_copy;
  }

  // Gradient statistics (found-inf, norm): the model-parallel group, or everyone with the distributed optimizer
  // (the shards are spread over the data-parallel ranks as well).
  void stats_reduce(std::span<double> v, optim::ReduceOp op) {
    distributed::Group& g = dist_opt_ ? rt_.group("world") : mp_;
    g.all_reduce(distributed::Buffer::cpu(v.data(), v.size()), op == optim::ReduceOp::Max ? distributed::ReduceOp::Max : distributed::ReduceOp::Sum);
  }

  void step(int64_t step_number) {
    // Groups 0-3: (weight decay, no weight decay) x (default, --decoupled-lr for embeddings and output).
    std::vector<optim::GroupHyper> groups(4);
    const double wd = schedule_->weight_decay();
    const optim::GroupOverride emb = schedule_->config().embedding_output_group();
    for (int g = 0; g < 4; ++g)
      groups[static_cast<size_t>(g)] = {g >= 2 ? schedule_->lr(emb) : schedule_->lr(), (g % 2 == 1) ? 0.0 : wd,
                                        step_number};
    if (muon_) return muon_step(groups);
    std::vector<optim::TensorSlot> slots;
    float* g = shard_grad();
    for_each_piece([&](size_t k, int64_t b, int64_t e) {
      optim::TensorSlot s;
      s.numel = e - b;
      s.param = model_.data() + static_cast<size_t>(b) * dtype_bytes(model_dtype_);
      s.param_dtype = model_dtype_;
      s.grad = g + (b - lo_);
      if (!main_.empty()) s.master = main_.data() + (b - lo_);
      s.exp_avg = exp_avg_.data() + (b - lo_);
      if (!exp_avg_sq_.empty()) s.exp_avg_sq = exp_avg_sq_.data() + (b - lo_);
      s.group = group_of_[k];
      slots.push_back(s);
    });
    if (cfg_.optimizer == "adam") optim::cpu::adam_step(slots, groups, optim::adam_options(cfg_));
    else if (cfg_.optimizer == "sgd") optim::cpu::sgd_step(slots, groups, optim::sgd_options(cfg_));
    else if (cfg_.optimizer == "lion") optim::cpu::lion_step(slots, groups, optim::lion_options(cfg_));
  }

  // Muon (Megatron's get_megatron_muon_optimizer): the 2-D weights of the transformer layers go to Muon, with
  // this rank's TP shard and the --muon-tp-mode collectives over the TP group; the rest (embeddings, output
  // layer, norms, biases) to --muon-scalar-optimizer.
  void muon_step(const std::vector<optim::GroupHyper>& groups) {
    std::vector<optim::MuonParam> mats;
    std::vector<optim::TensorSlot> scalars;
    for (size_t k = 0; k < plan_.params.size(); ++k) {
      const ParamSpec& p = plan_.params[k];
      const int64_t off = offset_[k];
      float* master = main_.empty() ? reinterpret_cast<float*>(model_.data()) + off : main_.data() + off;
      if (!optim::muon_excluded(static_cast<int64_t>(p.shape.size()), p.embedding_or_output)) {
        optim::MuonParam m;
        m.param = master;
        m.grad = grad_.data() + off;
        m.momentum_buffer = exp_avg_.data() + off;
        m.rows = p.shape[0];
        m.cols = p.shape[1];
        m.group = group_of_[k];
        m.is_qkv = ends_with(p.name, "linear_qkv.weight");
        m.partition_dim = p.split_dim;
        if (model_dtype_ == optim::DType::BF16) m.param_bf16 = reinterpret_cast<uint16_t*>(model_.data()) + off;
        mats.push_back(std::move(m));
      } else {
        optim::TensorSlot s;
        s.numel = p.numel();
        s.param = model_.data() + static_cast<size_t>(off) * dtype_bytes(model_dtype_);
        s.param_dtype = model_dtype_;
        s.grad = grad_.data() + off;
        if (!main_.empty()) s.master = main_.data() + off;
        s.exp_avg = exp_avg_.data() + off;
        s.exp_avg_sq = exp_avg_sq_.data() + off;
        s.group = group_of_[k];
        scalars.push_back(s);
      }
    }
    const int64_t heads = args_["num_attention_heads"].as_int();
    const int64_t kv = args_["kv_channels"].as_int();
    const bool gqa = args_.has("group_query_attention") && args_["group_query_attention"].truthy();
    const int64_t query_groups = gqa ? args_["num_query_groups"].as_int() : heads;
    optim::MuonOptions mo = optim::muon_options(cfg_, optim::qkv_split_shapes(heads, query_groups, kv));
    // The QKV split is per TP shard: each rank holds query_groups / tp whole groups.
    TpAdapter tp(tp_);
    optim::cpu::muon_step(mats, groups, mo, tp_.size() > 1 ? &tp : nullptr);
    if (optim::muon_scalar_optimizer(cfg_) == optim::ScalarOptimizer::Lion)
      optim::cpu::lion_step(scalars, groups, optim::lion_options(cfg_));
    else
      optim::cpu::adam_step(scalars, groups, optim::adam_options(cfg_));
  }

  // Muon's view of the TP group.
  class TpAdapter : public optim::TpGroup {
   public:
    explicit TpAdapter(distributed::Group& g) : g_(g) {}
    int size() const override { return g_.size(); }
    int rank() const override { return g_.rank(); }
    void all_gather(const float* send, int64_t count, float* recv) override {
      g_.all_gather(distributed::Buffer::cpu(const_cast<float*>(send), static_cast<size_t>(count)),
                    distributed::Buffer::cpu(recv, static_cast<size_t>(count) * static_cast<size_t>(g_.size())));
    }
    void all_reduce_sum(float* data, int64_t count) override {
      g_.all_reduce(distributed::Buffer::cpu(data, static_cast<size_t>(count)), distributed::ReduceOp::Sum);
    }

   private:
    distributed::Group& g_;
  };

  // The distributed optimizer's parameter all-gather: every rank's updated shard to every data-parallel rank.
  void publish_params() {
    if (!dist_opt_) return;
    const size_t bytes = static_cast<size_t>(hi_ - lo_) * dtype_bytes(model_dtype_);
    std::vector<uint8_t> mine(model_.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(lo_) * dtype_bytes(model_dtype_)),
                              model_.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(lo_) * dtype_bytes(model_dtype_) + bytes));
    dp_.all_gather(distributed::Buffer{mine.data(), bytes, distributed::DType::U8, distributed::Device::Cpu},
                   distributed::Buffer{model_.data(), model_.size(), distributed::DType::U8, distributed::Device::Cpu});
  }

  // Every data-parallel replica must hold the same parameters, and the two copies of tied word embeddings the
  // same values; returns this rank's checksum.
  uint64_t check_replicas() {
    if (tied_ && pp_.size() > 1 && (pp_.rank() == 0 || pp_.rank() == pp_.size() - 1)) {
      for (size_t k = 0; k < plan_.params.size(); ++k) {
        const ParamSpec& p = plan_.params[k];
        if (p.name != "embedding.word_embeddings.weight" && !p.shared_copy) continue;
        const size_t w = dtype_bytes(model_dtype_);
        int64_t h = static_cast<int64_t>(fnv1a(model_.data() + static_cast<size_t>(offset_[k]) * w, static_cast<size_t>(p.numel()) * w));
        distributed::Group& e = rt_.group("embedding");
        std::vector<int64_t> all(static_cast<size_t>(e.size()));
        e.all_gather(distributed::Buffer::cpu(&h, 1), distributed::Buffer::cpu(all.data(), all.size()));
        for (int64_t x : all)
          if (x != h) throw RunError("the tied word embeddings diverged between the first and the last pipeline stage");
      }
    }
    const size_t w = dtype_bytes(model_dtype_);
    auto compare = [&](distributed::Group& g, int64_t begin, int64_t end, const char* what) {
      int64_t mine = static_cast<int64_t>(fnv1a(model_.data() + static_cast<size_t>(begin) * w, static_cast<size_t>(end - begin) * w));
      std::vector<int64_t> all(static_cast<size_t>(g.size()));
      g.all_gather(distributed::Buffer::cpu(&mine, 1), distributed::Buffer::cpu(all.data(), all.size()));
      for (size_t i = 0; i < all.size(); ++i)
        if (all[i] != mine)
          throw RunError(std::string(what) + " replicas diverged: rank " + std::to_string(g.ranks()[i]) +
                         " holds different parameters than rank " + std::to_string(rt_.rank()));
    };
    compare(dp_, 0, dense_end_, "data-parallel");
    if (dense_end_ < numel_) compare(edp_, dense_end_, numel_, "expert data-parallel");
    return fnv1a(model_.data(), static_cast<size_t>(numel_) * w);
  }

  distributed::Runtime& rt_;
  const Namespace& args_;
  std::ostream& log_;
  std::string prefix_;
  distributed::Group &tp_, &pp_, &dp_, &mp_;
  distributed::Group &edp_, &etp_, &emp_;  // expert data-parallel, expert tensor-parallel, expert model-parallel
  OptimizerConfig cfg_;
  ModelPlan plan_;
  int64_t train_iters_ = 0, global_batch_ = 1, log_interval_ = 100;
  uint64_t seed_ = 1234;
  double init_std_ = 0.02;
  bool tied_ = true, dist_opt_ = false, muon_ = false;
  optim::DType model_dtype_ = optim::DType::F32;
  std::optional<optim::GradScaler> scaler_;
  std::optional<optim::ParamScheduler> schedule_;
  std::vector<int64_t> offset_;
  std::vector<int32_t> group_of_;
  int64_t numel_ = 0, padded_ = 0, lo_ = 0, hi_ = 0;
  int64_t dense_end_ = 0;  // routed experts occupy [dense_end_, numel_)
  std::vector<uint8_t> model_;
  std::vector<float> grad_, grad_shard_, main_, exp_avg_, exp_avg_sq_, target_;
};

}  // namespace

TrainResult train(distributed::Runtime& rt, const Namespace& args, std::ostream& log, const std::string& prefix) {
  Run r(rt, args, log, prefix);
  return r.run();
}

}  // namespace mr::run
