// The CUDA backend (run/backend.h): the flat buffers in device memory, the synthetic gradient, the exact
// statistics, scaling, zero counts and checksums as device kernels (run/cuda_ops.cu, run/gpu_synthetic.cu), the
// optimizer kernels of lib/optim (optim/gpu.h), NCCL collectives on the buffers. Every CUDA call and kernel
// launch is behind run/cuda_ops.h and optim/gpu.h; what is left here is shared arithmetic (run/device_plan.h,
// FlatBuffers' layout and initial values, optim's options and clip coefficient) and bookkeeping. All device work
// runs on the legacy default stream, in order; NCCL runs on its communicator's stream, so the backend waits for
// the device before each collective, and a collective returns once its stream is done (distributed/nccl.cpp).
//
// Bit-equal to the CPU backend by construction where the math is shared: the initial values (computed on the
// host by the same function and uploaded), the synthetic gradient (MR_HD element function), the exact sums
// (integers), the elementwise optimizer kernels (optim/elementwise.h, -fmad=false), unscale and scaling (one fp32
// multiply). Muon's Newton-Schulz runs on cuBLAS (bounds, docs/device.md); its tensor-parallel modes (duplicated,
// distributed) exchange device buffers over the TP group's NCCL communicator (DeviceTp). SOAP runs on cuBLAS and
// cuSOLVER (bounds as well).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "optim/clip_grads.h"
#include "optim/config.h"
#include "optim/gpu.h"
#include "run/backend.h"
#include "run/cuda_ops.h"
#include "run/device_plan.h"
#include "run/gpu_synthetic.h"
#include "util/gpu_devices.h"

namespace mr::run {

namespace {

// One device buffer, released with its owner.
class DeviceMemory {
 public:
  DeviceMemory() = default;
  explicit DeviceMemory(size_t bytes) : p_(cuda::allocate(bytes)), bytes_(bytes) {}
  ~DeviceMemory() { cuda::release(p_); }
  DeviceMemory(DeviceMemory&& o) noexcept : p_(o.p_), bytes_(o.bytes_) { o.p_ = nullptr, o.bytes_ = 0; }
  DeviceMemory& operator=(DeviceMemory&& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  template <class T = void>
  T* get() const { return static_cast<T*>(p_); }
  size_t bytes() const { return bytes_; }

 private:
  void* p_ = nullptr;
  size_t bytes_ = 0;
};

distributed::Buffer device_f32(float* x, int64_t n) {
  return {x, static_cast<size_t>(n), distributed::DType::F32, distributed::Device::Cuda};
}

template <class T>
void download(std::vector<T>& host, const DeviceMemory& d) {
  if (d.bytes()) cuda::to_host(host.data(), d.get(), std::min(d.bytes(), host.size() * sizeof(T)));
}
template <class T>
void upload(DeviceMemory& d, const std::vector<T>& host) {
  if (d.bytes()) cuda::to_device(d.get(), host.data(), std::min(d.bytes(), host.size() * sizeof(T)));
}

// Muon's view of the TP group on device buffers (optim::gpu::muon_step's duplicated and distributed modes): NCCL
// all-gather and all-reduce, after the device is done with the buffers.
class DeviceTp final : public optim::TpGroup {
 public:
  explicit DeviceTp(distributed::Group& g) : g_(g) {}
  int size() const override { return g_.size(); }
  int rank() const override { return g_.rank(); }
  void all_gather(const float* send, int64_t count, float* recv) override {
    cuda::synchronize();
    g_.all_gather(device_f32(const_cast<float*>(send), count), device_f32(recv, count * g_.size()));
  }
  void all_reduce_sum(float* data, int64_t count) override {
    cuda::synchronize();
    g_.all_reduce(device_f32(data, count), distributed::ReduceOp::Sum);
  }
  void gather(const float* send, int64_t count, float* recv, int root) override {
    cuda::synchronize();
    g_.gather(device_f32(const_cast<float*>(send), count), device_f32(recv, count * g_.size()), root);
  }
  void scatter(const float* send, int64_t count, float* recv, int root) override {
    cuda::synchronize();
    g_.scatter(device_f32(const_cast<float*>(send), count * g_.size()), device_f32(recv, count), root);
  }

 private:
  distributed::Group& g_;
};

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int local_rank) {
    device_ = device_for_local_rank(local_rank, cuda::visible_devices(), util::cuda_visible_devices_env());
    cuda::set_device(device_);
    device_name_ = cuda::device_name(device_);
  }
  ~CudaBackend() override {
    for (void* e : events_) cuda::event_destroy(e);
  }
  const char* name() const override { return "cuda"; }

  void build(FlatBuffers& b, const ModelPlan& plan, const optim::OptimizerInfo& opt, const BufferDtypes& dtypes,
             const ShardGroups& shards, int64_t tp_rank, int64_t etp_rank, uint64_t seed, double init_std,
             bool decoupled_lr) override {
    b_ = &b;
    b.set_layout(plan, opt, dtypes, shards, decoupled_lr);
    const optim::DType dtype = dtypes.model;
    // Rule run.device-memory: the buffers against the device's free memory, before anything is allocated.
    const BufferBytes need = b.bytes();
    double free_bytes = 0, total_bytes = 0;
    cuda::memory_info(&free_bytes, &total_bytes);
    const std::string refusal = device_memory_refusal(need, free_bytes, total_bytes, b.numel, device_, device_name_);
    if (!refusal.empty()) throw RunError(refusal);
    model_ = DeviceMemory(static_cast<size_t>(need.model));
    grad_ = DeviceMemory(static_cast<size_t>(need.grad));
    grad_shard_ = DeviceMemory(static_cast<size_t>(need.grad_shard));
    main_ = DeviceMemory(static_cast<size_t>(need.main));
    exp_avg_ = DeviceMemory(static_cast<size_t>(b.shard()) * optim::dtype_size(b.exp_avg_dtype));
    // The second moment of the parameters that keep one only (FlatBuffers::sq_numel, packed).
    if (b.has_exp_avg_sq)
      exp_avg_sq_ = DeviceMemory(static_cast<size_t>(b.sq_numel) * optim::dtype_size(b.exp_avg_sq_dtype));
    state_scale_ = DeviceMemory(b.scales() * 4);  // the zero moments' scales are zero; the main params' below
    target_ = DeviceMemory(static_cast<size_t>(need.target));
    // SOAP's preconditioners (FlatBuffers::kronecker_at), zero as the step expects before its first.
    kronecker_ = DeviceMemory(static_cast<size_t>(b.kronecker_numel) * 4);
    // The initial values and targets as the CPU backend computes them (FlatBuffers::initial_values, on the host:
    // the same bits), uploaded one parameter at a time; the padding stays zero.
    const size_t w = dtype_bytes(dtype);
    std::vector<uint8_t> model;
    std::vector<float> init, target, scales(b.scales(), 0.0f);
    std::vector<std::pair<int64_t, std::vector<uint8_t>>> main;  // a parameter's encoded main-param pieces
    for (size_t k = 0; k < plan.params.size(); ++k) {
      const ParamSpec& p = plan.params[k];
      const int64_t base = b.offset[k], cnt = p.numel();
      model.resize(static_cast<size_t>(cnt) * w);
      target.resize(static_cast<size_t>(cnt));
      main.clear();
      b.initial_param(k, p, seed, init_std, p.expert ? etp_rank : tp_rank, model.data(), target.data(), init,
                      [&](int64_t lo, int64_t hi) {
                        main.emplace_back(lo, std::vector<uint8_t>(static_cast<size_t>((hi - lo) * b.main_bytes())));
                        return static_cast<void*>(main.back().second.data());
                      },
                      scales.data());
      for (const auto& [lo, bytes] : main) cuda::to_device(b.main_at(main_.get(), lo), bytes.data(), bytes.size());
      cuda::to_device(model_.get<uint8_t>() + static_cast<size_t>(base) * w, model.data(), model.size());
      cuda::to_device(target_.get<float>() + base, target.data(), target.size() * 4);
    }
    if (!scales.empty()) cuda::to_device(state_scale_.get(), scales.data(), scales.size() * 4);
  }
  BufferPtrs ptrs() override {
    return {model_.get(),   grad_.get<float>(), grad_shard_.get<float>(),  main_.get(),
            exp_avg_.get(), exp_avg_sq_.get(),  state_scale_.get<float>(), target_.get<float>(),
            kronecker_.get<float>()};
  }

  float synthetic_grads(const ParamSpec& p, int64_t tp_rank, uint32_t key, const SampleTable& samples, int bits,
                        bool zero, const GradTensor& t) override {
    return gpu::synthetic_grads(p, tp_rank, key, samples, bits, zero, t);
  }
  void set_grad(int64_t i, float v) override { cuda::to_device(grad_.get<float>() + i, &v, sizeof v); }

  Fixed sum_squares(const float* x, int64_t n, int e) override { return cuda::sum_squares(x, n, std::ldexp(1.0, e)); }
  double max_abs(const float* x, int64_t n) override { return cuda::max_abs(x, n); }
  Fixed sum_squares_model(int64_t lo, int64_t hi, int e) override {
    return cuda::sum_squares_model(model_.get(), b_->model_dtype, lo, hi, std::ldexp(1.0, e));
  }
  float max_abs_model(int64_t begin, int64_t end) override {
    return cuda::max_abs_model(model_.get(), b_->model_dtype, begin, end);
  }
  Fixed sum_squares_model_minus_target(int64_t base, int64_t end, int e) override {
    return cuda::sum_squares_model_minus_target(model_.get(), b_->model_dtype, target_.get<float>(), base, end,
                                                std::ldexp(1.0, e));
  }

  // NCCL runs on its communicator's stream: the device is done with the buffer first.
  void all_reduce_sum(distributed::Group& g, float* x, int64_t n) override {
    cuda::synchronize();
    g.all_reduce(device_f32(x, n), distributed::ReduceOp::Sum);
  }
  void reduce_scatter_sum(distributed::Group& g, float* in, int64_t in_n, float* out, int64_t out_n) override {
    cuda::synchronize();
    g.reduce_scatter(device_f32(in, in_n), device_f32(out, out_n), distributed::ReduceOp::Sum);
  }
  void all_gather_model(distributed::Group& g, int64_t begin, int64_t lo, int64_t hi) override {
    cuda::synchronize();
    const size_t w = dtype_bytes(b_->model_dtype);
    uint8_t* m = model_.get<uint8_t>();
    const size_t block = static_cast<size_t>(hi - lo) * w;
    // In place: this rank's block [lo, hi) already sits at its place in the output (NCCL's in-place all-gather).
    g.all_gather({m + static_cast<size_t>(lo) * w, block, distributed::DType::U8, distributed::Device::Cuda},
                 {m + static_cast<size_t>(begin) * w, block * static_cast<size_t>(g.size()), distributed::DType::U8,
                  distributed::Device::Cuda});
  }

  void broadcast_model(distributed::Group& g, int64_t lo, int64_t hi, int root) override {
    cuda::synchronize();
    const size_t w = dtype_bytes(b_->model_dtype);
    g.broadcast({model_.get<uint8_t>() + static_cast<size_t>(lo) * w, static_cast<size_t>(hi - lo) * w,
                 distributed::DType::U8, distributed::Device::Cuda},
                root);
  }

  bool unscale_and_check(std::span<const optim::GradSlot> grads, float inv_scale) override {
    return optim::gpu::unscale_and_check(grads, inv_scale, /*in_place=*/true).found_inf;
  }
  void finish_grads(float* x, int64_t n, float factor, GradFormat f) override { cuda::finish_grads(x, n, factor, f); }
  void clip(std::span<const optim::ClipSlot> slots, double max_norm, double total_norm) override {
    const double coeff = optim::clip_coefficient(max_norm, total_norm);
    if (!(coeff < 1.0)) return;  // Megatron scales only below 1 (and not for a NaN coefficient)
    const float c = static_cast<float>(coeff);
    for (const optim::ClipSlot& s : slots) cuda::scale(static_cast<float*>(s.grad.grad), s.grad.numel, c);
  }
  double count_zeros(std::span<const optim::ClipSlot> slots, const optim::ReduceFn& reduce) override {
    int64_t local = 0;
    for (const optim::ClipSlot& s : slots)
      if (s.counted) local += cuda::count_zeros(static_cast<const float*>(s.grad.grad), s.grad.numel);
    double v = static_cast<double>(local);
    if (reduce) reduce(std::span<double>(&v, 1), optim::ReduceOp::Sum);
    return v;
  }

  void elementwise_step(optim::Kernel k, std::span<const optim::TensorSlot> slots,
                        std::span<const optim::GroupHyper> groups, const OptimizerConfig& cfg) override {
    switch (k) {
      // One case per elementwise kernel (optim/elementwise_kernels.def), as the CPU's dispatch (optim/elementwise_step.cpp).
#define MR_ELEMENTWISE_KERNEL(Name, name)                                                              \
  case optim::Kernel::Name: return optim::gpu::name##_step(slots, groups, optim::name##_options(cfg));
#include "optim/elementwise_kernels.def"
#undef MR_ELEMENTWISE_KERNEL
      case optim::Kernel::Muon:
      case optim::Kernel::Soap:
      case optim::Kernel::None: break;
    }
    throw std::logic_error("the CUDA backend's elementwise step: no kernel for this optimizer");
  }
  void muon_step(std::span<const optim::MuonParam> mats, std::span<const optim::GroupHyper> groups,
                 const optim::MuonOptions& o, distributed::Group* tp) override {
    if (!tp) return optim::gpu::muon_step(mats, groups, o);  // one TP rank: each shard is the whole matrix
    DeviceTp dtp(*tp);
    optim::gpu::muon_step(mats, groups, o, &dtp);
  }
  void soap_step(std::span<const optim::SoapParam> mats, std::span<const optim::GroupHyper> groups,
                 const optim::SoapOptions& o) override {
    optim::gpu::soap_step(mats, groups, o);
  }

  // --embedding-min-norm's rows (run/cuda_ops.cu: a thread per row for the maxima and sums, per element for the
  // rescale).
  void row_max_bits(const RowPiece& p, uint32_t* out) override { cuda::row_max_bits(p, out); }
  void row_sum_squares(const RowPiece& p, const double* scale, Fixed* out) override {
    cuda::row_sum_squares(p, scale, out);
  }
  void scale_rows(const RowPiece& p, const float* factor) override { cuda::scale_rows(p, factor); }

  uint64_t checksum(int64_t begin, int64_t end) override {
    // FNV-1a is sequential: the bytes come to the host in chunks.
    const size_t w = dtype_bytes(b_->model_dtype);
    const uint8_t* from = model_.get<uint8_t>() + static_cast<size_t>(begin) * w;
    std::vector<uint8_t> host;
    uint64_t h = 0xcbf29ce484222325ull;
    for (auto [lo, hi] : byte_chunks(static_cast<size_t>(end - begin) * w, size_t{64} << 20)) {
      host.resize(hi - lo);
      cuda::to_host(host.data(), from + lo, hi - lo);
      h = fnv1a(host.data(), host.size(), h);
    }
    return h;
  }
  uint64_t model_checksum_part(uint64_t key, const ShardIndex& where, int64_t base, int64_t n) override {
    return cuda::checksum_part(model_.get(), b_->model_dtype, base, n, key, where);
  }

  void start_timing() override {
    fold();
    last_ = next_event();
    cuda::event_record(last_);
  }
  void end_phase(Phase p) override {
    if (!last_) return;
    void* e = next_event();
    cuda::event_record(e);
    marks_.push_back({p, last_, e});
    last_ = e;
  }
  PhaseTimes take_phase_ms() override {
    fold();
    const PhaseTimes out = ms_;
    ms_ = {};
    return out;
  }
  const char* clock() const override { return "cuda events"; }

  // Only the buffers a checkpoint reads and writes travel (FlatBuffers::allocate_checkpoint_host): the gradients
  // and the targets stay on the device, never downloaded and never overwritten. Rule run.host-memory first, for
  // those bytes on every local rank at once (they save and load together); a refusal fails the save or the load
  // alike on every rank (checkpoint.cpp's verdict).
  void to_host(FlatBuffers& b) override {
    b.check_checkpoint_memory("the checkpoint's host copy (--save, --load on the cuda backend)");
    b.allocate_checkpoint_host();
    each_checkpoint_buffer(b, [](auto& host, DeviceMemory& d) { download(host, d); });
  }
  void from_host(FlatBuffers& b) override {
    each_checkpoint_buffer(b, [](auto& host, DeviceMemory& d) {
      if (!host.empty()) upload(d, host);  // a buffer to_host did not download is not written back
    });
    b.release_host();
  }
  void release_host(FlatBuffers& b) override { b.release_host(); }

 private:
  // The device buffers behind FlatBuffers' checkpoint copies, one by one (to_host, from_host).
  template <class F>
  void each_checkpoint_buffer(FlatBuffers& b, F&& f) {
    f(b.model, model_);
    f(b.main, main_);
    f(b.exp_avg, exp_avg_);
    f(b.exp_avg_sq, exp_avg_sq_);
    f(b.state_scale, state_scale_);
    f(b.kronecker, kronecker_);
  }
  // Events are reused: the marks of the iterations so far are resolved (the device has passed them: every
  // iteration ends with host synchronisations) and their times added up.
  void* next_event() {
    if (used_ == events_.size()) events_.push_back(cuda::event_create());
    return events_[used_++];
  }
  void fold() {
    for (const Mark& m : marks_) ms_[static_cast<size_t>(m.phase)] += cuda::event_elapsed_ms(m.from, m.to);
    marks_.clear();
    used_ = 0;
    last_ = nullptr;
  }

  struct Mark {
    Phase phase;
    void* from;
    void* to;
  };
  int device_ = 0;
  std::string device_name_;
  FlatBuffers* b_ = nullptr;
  DeviceMemory model_, grad_, grad_shard_, main_, exp_avg_, exp_avg_sq_, state_scale_, target_, kronecker_;
  std::vector<void*> events_;
  size_t used_ = 0;
  void* last_ = nullptr;
  std::vector<Mark> marks_;
  PhaseTimes ms_{};
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(int local_rank) { return std::make_unique<CudaBackend>(local_rank); }

}  // namespace mr::run
