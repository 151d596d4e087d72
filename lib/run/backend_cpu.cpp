// The CPU backend (run/backend.h): the flat buffers in host vectors (FlatBuffers), lib/optim's OpenMP kernels,
// the collectives on host buffers (Gloo).
#include <chrono>
#include <cmath>
#include <cstring>
#include <vector>

#include "optim/elementwise_step.h"
#include "run/abs_max.h"
#include "run/backend.h"
#include "run/grad_round_cpu.h"
#include "run/tp_adapter.h"

namespace mr::run {

namespace {

template <class T>
T* or_null(std::vector<T>& v) {
  return v.empty() ? nullptr : v.data();
}

class CpuBackend final : public Backend {
 public:
  const char* name() const override { return "cpu"; }

  void build(FlatBuffers& b, const ModelPlan& plan, const optim::OptimizerInfo& opt, const BufferDtypes& dtypes,
             const ShardGroups& shards, int64_t tp_rank, int64_t etp_rank, uint64_t seed, double init_std,
             bool decoupled_lr) override {
    b_ = &b;
    b.build(plan, opt, dtypes, shards, tp_rank, etp_rank, seed, init_std, decoupled_lr);
  }
  BufferPtrs ptrs() override {
    FlatBuffers& b = *b_;
    return {b.model.data(), b.grad.data(), or_null(b.grad_shard), or_null(b.main), b.exp_avg.data(),
            or_null(b.exp_avg_sq), or_null(b.state_scale), b.target.data(), or_null(b.kronecker)};
  }

  float synthetic_grads(const ParamSpec& p, int64_t tp_rank, uint32_t key, const SampleTable& samples, int bits,
                        bool zero, const GradTensor& t) override {
    return run::synthetic_grads(p, tp_rank, key, samples, bits, zero, t);
  }
  void set_grad(int64_t i, float v) override { b_->grad[static_cast<size_t>(i)] = v; }

  Fixed sum_squares(const float* x, int64_t n, int e) override { return run::sum_squares(x, n, e); }
  double max_abs(const float* x, int64_t n) override { return run::max_abs(x, n); }
  Fixed sum_squares_model(int64_t lo, int64_t hi, int e) override {
    const FlatBuffers& b = *b_;
    return sum_fixed_squares(hi - lo, e, optim::cpu::threads(),
                             [&b, lo](int64_t i) { return optim::load_element(b.model.data(), b.model_dtype, lo + i); });
  }
  float max_abs_model(int64_t begin, int64_t end) override {
    const FlatBuffers& b = *b_;
    uint32_t m = 0;  // as bits: a NaN is the max (run/abs_max.h)
    for (int64_t i = begin; i < end; ++i) m = max_bits(m, abs_bits(optim::load_element(b.model.data(), b.model_dtype, i)));
    return abs_of_bits(m);
  }
  Fixed sum_squares_model_minus_target(int64_t base, int64_t end, int e) override {
    const FlatBuffers& b = *b_;
    return sum_fixed_squares(end - base, e, optim::cpu::threads(), [&b, base](int64_t i) {
      return optim::load_element(b.model.data(), b.model_dtype, base + i) - b.target[static_cast<size_t>(base + i)];
    });
  }

  void all_reduce_sum(distributed::Group& g, float* x, int64_t n) override {
    g.all_reduce(distributed::Buffer::cpu(x, static_cast<size_t>(n)), distributed::ReduceOp::Sum);
  }
  void reduce_scatter_sum(distributed::Group& g, float* in, int64_t in_n, float* out, int64_t out_n) override {
    g.reduce_scatter(distributed::Buffer::cpu(in, static_cast<size_t>(in_n)),
                     distributed::Buffer::cpu(out, static_cast<size_t>(out_n)), distributed::ReduceOp::Sum);
  }
  void all_gather_model(distributed::Group& g, int64_t begin, int64_t lo, int64_t hi) override {
    FlatBuffers& b = *b_;
    const size_t w = dtype_bytes(b.model_dtype);
    const size_t bytes = static_cast<size_t>(hi - lo) * w;
    std::vector<uint8_t> mine(b.model.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(lo) * w),
                              b.model.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(lo) * w + bytes));
    g.all_gather(distributed::Buffer{mine.data(), bytes, distributed::DType::U8, distributed::Device::Cpu},
                 distributed::Buffer{b.model.data() + static_cast<size_t>(begin) * w, bytes * static_cast<size_t>(g.size()),
                                     distributed::DType::U8, distributed::Device::Cpu});
  }

  void broadcast_model(distributed::Group& g, int64_t lo, int64_t hi, int root) override {
    FlatBuffers& b = *b_;
    const size_t w = dtype_bytes(b.model_dtype);
    g.broadcast(distributed::Buffer{b.model.data() + static_cast<size_t>(lo) * w, static_cast<size_t>(hi - lo) * w,
                                    distributed::DType::U8, distributed::Device::Cpu},
                root);
  }

  bool unscale_and_check(std::span<const optim::GradSlot> grads, float inv_scale) override {
    return optim::cpu::unscale_and_check(grads, inv_scale, /*in_place=*/true).found_inf;
  }
  void finish_grads(float* x, int64_t n, float factor, GradFormat f) override { finish_grads_cpu(x, n, factor, f); }
  void clip(std::span<const optim::ClipSlot> slots, double max_norm, double total_norm) override {
    optim::cpu::clip_grads_by_total_norm(slots, max_norm, total_norm);
  }
  double count_zeros(std::span<const optim::ClipSlot> slots, const optim::ReduceFn& reduce) override {
    return optim::cpu::count_zeros(slots, reduce);
  }

  void elementwise_step(optim::Kernel k, std::span<const optim::TensorSlot> slots,
                        std::span<const optim::GroupHyper> groups, const OptimizerConfig& cfg) override {
    optim::cpu::elementwise_step(k, slots, groups, cfg);
  }
  void muon_step(std::span<const optim::MuonParam> mats, std::span<const optim::GroupHyper> groups,
                 const optim::MuonOptions& o, distributed::Group* tp) override {
    if (!tp) return optim::cpu::muon_step(mats, groups, o, nullptr);
    TpAdapter a(*tp);
    optim::cpu::muon_step(mats, groups, o, &a);
  }
  void soap_step(std::span<const optim::SoapParam> mats, std::span<const optim::GroupHyper> groups,
                 const optim::SoapOptions& o) override {
    optim::cpu::soap_step(mats, groups, o);
  }

  // --embedding-min-norm's rows: a row per iteration of an OpenMP loop (run/row_rescale.h's element math; integer
  // sums and maxima, so the same bits as the CUDA kernels).
  void row_max_bits(const RowPiece& p, uint32_t* out) override {
    const int64_t rows = p.rows(), first = p.first_row();
#pragma omp parallel for schedule(static) num_threads(optim::cpu::threads())
    for (int64_t r = 0; r < rows; ++r) {
      uint32_t m = 0;
      for (int64_t i = p.row_begin(first + r); i < p.row_end(first + r); ++i) m = max_bits(m, abs_bits(p.load(i)));
      out[r] = max_bits(out[r], m);
    }
  }
  void row_sum_squares(const RowPiece& p, const double* scale, Fixed* out) override {
    const int64_t rows = p.rows(), first = p.first_row();
#pragma omp parallel for schedule(static) num_threads(optim::cpu::threads())
    for (int64_t r = 0; r < rows; ++r) {
      Fixed acc = 0;
      for (int64_t i = p.row_begin(first + r); i < p.row_end(first + r); ++i) acc += row_square_term(p.load(i), scale[r]);
      out[r] += acc;
    }
  }
  void scale_rows(const RowPiece& p, const float* factor) override {
    const int64_t rows = p.rows(), first = p.first_row();
#pragma omp parallel for schedule(static) num_threads(optim::cpu::threads())
    for (int64_t r = 0; r < rows; ++r) {
      if (factor[r] == 1.0f) continue;  // a factor of 1 leaves the row as it is
      for (int64_t i = p.row_begin(first + r); i < p.row_end(first + r); ++i) p.scale(i, factor[r]);
    }
  }

  uint64_t checksum(int64_t begin, int64_t end) override {
    const FlatBuffers& b = *b_;
    const size_t w = dtype_bytes(b.model_dtype);
    return fnv1a(b.model.data() + static_cast<size_t>(begin) * w, static_cast<size_t>(end - begin) * w);
  }
  uint64_t model_checksum_part(uint64_t key, const ShardIndex& where, int64_t base, int64_t n) override {
    const FlatBuffers& b = *b_;
    uint64_t sum = 0;
#pragma omp parallel for schedule(static) num_threads(optim::cpu::threads()) reduction(+ : sum)
    for (int64_t i = 0; i < n; ++i) {
      uint32_t bits = 0;
      if (b.model_dtype == optim::DType::F32)
        std::memcpy(&bits, b.model.data() + static_cast<size_t>(base + i) * 4, 4);
      else
        bits = reinterpret_cast<const uint16_t*>(b.model.data())[base + i];
      sum += checksum_term(key, whole_index(where, i), bits);  // wraps: mod 2^64
    }
    return sum;
  }

  void start_timing() override { last_ = Clock::now(); }
  void end_phase(Phase p) override {
    const Clock::time_point now = Clock::now();
    ms_[static_cast<size_t>(p)] += std::chrono::duration<double, std::milli>(now - last_).count();
    last_ = now;
  }
  PhaseTimes take_phase_ms() override {
    const PhaseTimes out = ms_;
    ms_ = {};
    return out;
  }
  const char* clock() const override { return "host clock"; }

  // The host vectors are the storage.
  void to_host(FlatBuffers&) override {}
  void from_host(FlatBuffers&) override {}
  void release_host(FlatBuffers&) override {}

 private:
  using Clock = std::chrono::steady_clock;
  FlatBuffers* b_ = nullptr;
  Clock::time_point last_{};
  PhaseTimes ms_{};
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace mr::run
