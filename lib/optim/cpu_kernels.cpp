// The fast CPU optimizer kernels. Same arithmetic as reference.cpp (elementwise.h), organised for speed:
//   - the tensor list is cut into a work list of chunks (kChunk elements, the last one of a tensor shorter),
//     shared by threads() OpenMP threads with a static schedule: each thread walks contiguous memory;
//   - the in-place fp32 loops prefetch kAhead elements ahead in every array they stream (see `prefetched`);
//   - all-fp32 tensors are updated in place by one SIMD loop per chunk; other precision modes go through
//     small fp32 tiles (kTile elements, L1-resident): decode, the same SIMD loop, encode;
//   - each hot loop is compiled three times (x86-64-v4 = AVX-512, x86-64-v3 = AVX2+FMA, baseline) and picked at
//     load time by GCC's target_clones dispatcher. The fma in the arithmetic is explicit (__builtin_fmaf), and
//     this file builds with -ffp-contract=off, so every variant gives the same bits;
//   - fp16 and fp8 states with a per-tensor scale need the new absmax before anything is stored: a first read-only
//     pass computes it (same arithmetic), the second pass updates.
#include <omp.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "optim/kernels.h"
#include "optim/work_list.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define MR_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define MR_CLONES
#endif
#define MR_INLINE inline __attribute__((always_inline))

namespace mr::optim::cpu {
namespace {

using detail::kChunk;
using detail::Work;
using detail::work_list;
constexpr int64_t kTile = 1024;

std::atomic<int> g_threads{0};  // 0: default_threads()

// ---- SIMD loops (fp32 spans) ---------------------------------------------------------------------------------

// Software prefetch for the in-place fp32 loops. Once a loop body carries real arithmetic (AdamW: a square root
// and two divisions per element) the hardware stream prefetchers alone leave about a tenth of the bandwidth
// unused; asking for the cache lines kAhead elements on, one block of kBlock elements at a time, closes the gap
// (docs/performance.md). `body(b, e)` runs the plain loop over [b, e); it stays a simple counted loop the
// compiler vectorises. The benchmark baseline (data_movement) uses the same skeleton, so its figure isolates
// the arithmetic.
constexpr int64_t kAhead = 512;  // 2 KiB ahead in every array (384-1536 measured; 384-512 best here)
constexpr int64_t kBlock = 64;   // 4 cache lines of each array per round
constexpr int64_t kLine = 16;    // floats per 64-byte cache line

template <class Body, class... T>
MR_INLINE void prefetched(int64_t n, Body&& body, const T*... arrays) {
  int64_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    if (i + kAhead + kBlock <= n)
      for (int64_t j = 0; j < kBlock; j += kLine) (__builtin_prefetch(arrays + i + kAhead + j), ...);
    body(i, i + kBlock);
  }
  body(i, n);
}

template <bool kWd, bool kDecoupled>
MR_INLINE void adam_run(float* __restrict p, const float* __restrict g, float* __restrict m, float* __restrict v,
                        int64_t n, AdamConsts c, float gs) {
  c.has_weight_decay = kWd;
  c.decoupled = kDecoupled;
  for (int64_t i = 0; i < n; ++i) {
    float pi = p[i], mi = m[i], vi = v[i];
    adam_element(pi, g[i] * gs, mi, vi, c);
    p[i] = pi;
    m[i] = mi;
    v[i] = vi;
  }
}
// The moments alone (adam_moments): the absmax pass of scaled states whose master is not scaled itself.
template <bool kL2>
MR_INLINE void adam_moments_run(const float* __restrict p, const float* __restrict g, float* __restrict m,
                                float* __restrict v, int64_t n, AdamConsts c, float gs) {
  c.has_weight_decay = kL2;
  c.decoupled = false;
  for (int64_t i = 0; i < n; ++i) {
    float mi = m[i], vi = v[i];
    adam_moments(kL2 ? p[i] : 0.0f, g[i] * gs, mi, vi, c);  // (without L2 p is not read: states_need_param)
    m[i] = mi;
    v[i] = vi;
  }
}
// Whether Adam's moments read the weight: only through L2 weight decay (adam_moments).
inline bool adam_moments_read_param(const AdamConsts& c) { return c.has_weight_decay && !c.decoupled; }
MR_CLONES void adam_moments_span(const float* __restrict p, const float* __restrict g, float* __restrict m,
                                 float* __restrict v, int64_t n, const AdamConsts& c, float gs) {
  if (adam_moments_read_param(c)) adam_moments_run<true>(p, g, m, v, n, c, gs);
  else adam_moments_run<false>(p, g, m, v, n, c, gs);
}

template <bool kWd, bool kDecoupled>
MR_INLINE void adam_loop(float* p, const float* g, float* m, float* v, int64_t n, const AdamConsts& c, float gs) {
  prefetched(
      n, [&](int64_t b, int64_t e) { adam_run<kWd, kDecoupled>(p + b, g + b, m + b, v + b, e - b, c, gs); }, p, g,
      m, v);
}
MR_CLONES void adam_span(float* __restrict p, const float* __restrict g, float* __restrict m, float* __restrict v,
                         int64_t n, const AdamConsts& c, float gs) {
  if (!c.has_weight_decay) adam_loop<false, false>(p, g, m, v, n, c, gs);
  else if (c.decoupled) adam_loop<true, true>(p, g, m, v, n, c, gs);
  else adam_loop<true, false>(p, g, m, v, n, c, gs);
}

template <bool kWd, bool kMomentum, bool kFirst, bool kNesterov>
MR_INLINE void sgd_run(float* __restrict p, const float* __restrict g, float* __restrict buf, int64_t n, SgdConsts c,
                       float gs) {
  c.has_weight_decay = kWd;
  c.has_momentum = kMomentum;
  c.first_step = kFirst;
  c.nesterov = kNesterov;
  for (int64_t i = 0; i < n; ++i) {
    float pi = p[i], bi = kMomentum ? buf[i] : 0.0f;
    sgd_element(pi, g[i] * gs, bi, c);
    p[i] = pi;
    if (kMomentum) buf[i] = bi;
  }
}
template <bool kWd, bool kMomentum, bool kFirst, bool kNesterov>
MR_INLINE void sgd_loop(float* p, const float* g, float* buf, int64_t n, const SgdConsts& c, float gs) {
  auto body = [&](int64_t b, int64_t e) {
    sgd_run<kWd, kMomentum, kFirst, kNesterov>(p + b, g + b, kMomentum ? buf + b : nullptr, e - b, c, gs);
  };
  if (kMomentum) prefetched(n, body, p, g, buf);
  else prefetched(n, body, p, g);
}
template <bool kWd>
MR_INLINE void sgd_dispatch(float* p, const float* g, float* buf, int64_t n, const SgdConsts& c, float gs) {
  if (!c.has_momentum) return sgd_loop<kWd, false, false, false>(p, g, buf, n, c, gs);
  if (c.first_step) return c.nesterov ? sgd_loop<kWd, true, true, true>(p, g, buf, n, c, gs)
                                      : sgd_loop<kWd, true, true, false>(p, g, buf, n, c, gs);
  return c.nesterov ? sgd_loop<kWd, true, false, true>(p, g, buf, n, c, gs)
                    : sgd_loop<kWd, true, false, false>(p, g, buf, n, c, gs);
}
MR_CLONES void sgd_span(float* __restrict p, const float* __restrict g, float* __restrict buf, int64_t n,
                        const SgdConsts& c, float gs) {
  if (c.has_weight_decay) sgd_dispatch<true>(p, g, buf, n, c, gs);
  else sgd_dispatch<false>(p, g, buf, n, c, gs);
}

template <bool kWd, bool kDecoupled>
MR_INLINE void lion_run(float* __restrict p, const float* __restrict g, float* __restrict m, int64_t n, LionConsts c,
                        float gs) {
  c.has_weight_decay = kWd;
  c.decoupled = kDecoupled;
  for (int64_t i = 0; i < n; ++i) {
    float pi = p[i], mi = m[i];
    lion_element(pi, g[i] * gs, mi, c);
    p[i] = pi;
    m[i] = mi;
  }
}
template <bool kWd, bool kDecoupled>
MR_INLINE void lion_loop(float* p, const float* g, float* m, int64_t n, const LionConsts& c, float gs) {
  prefetched(n, [&](int64_t b, int64_t e) { lion_run<kWd, kDecoupled>(p + b, g + b, m + b, e - b, c, gs); }, p, g, m);
}
MR_CLONES void lion_span(float* __restrict p, const float* __restrict g, float* __restrict m, int64_t n,
                         const LionConsts& c, float gs) {
  if (!c.has_weight_decay) lion_loop<false, false>(p, g, m, n, c, gs);
  else if (c.decoupled) lion_loop<true, true>(p, g, m, n, c, gs);
  else lion_loop<true, false>(p, g, m, n, c, gs);
}

// Whether any g[i] * gs is not finite.
MR_CLONES bool nonfinite_span(const float* __restrict g, int64_t n, float gs) {
  uint32_t bad = 0;
  for (int64_t i = 0; i < n; ++i) bad |= (f32_bits(g[i] * gs) & 0x7f800000u) == 0x7f800000u;
  return bad != 0;
}

// The largest |x[i]|, NaNs skipped (as std::max(m, |x|) and CUDA's fmaxf skip them), 0 for none. On the bit patterns:
// non-negative floats order as their bits do, and an integer max vectorises where a float max reduction does not.
MR_CLONES float absmax_span(const float* __restrict x, int64_t n) {
  uint32_t m = 0;
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t a = f32_bits(x[i]) & 0x7fffffffu;
    m = std::max(m, pick(a > 0x7f800000u, 0u, a));
  }
  return bits_f32(m);
}

MR_CLONES void bf16_decode_span(const uint16_t* __restrict src, float* __restrict dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(src[i]);
}
MR_CLONES void bf16_encode_span(const float* __restrict src, uint16_t* __restrict dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = f32_to_bf16(src[i]);
}
MR_CLONES void f16_decode_span(const uint16_t* __restrict src, float* __restrict dst, int64_t n, float scale) {
  for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_f32(src[i]) * scale;
}
MR_CLONES void f16_encode_span(const float* __restrict src, uint16_t* __restrict dst, int64_t n, float rscale) {
  for (int64_t i = 0; i < n; ++i) dst[i] = f32_to_f16(src[i] * rscale);
}
MR_CLONES void e4m3_decode_span(const uint8_t* __restrict src, float* __restrict dst, int64_t n, float scale) {
  for (int64_t i = 0; i < n; ++i) dst[i] = e4m3_to_f32(src[i]) * scale;
}
MR_CLONES void e4m3_encode_span(const float* __restrict src, uint8_t* __restrict dst, int64_t n, float enc) {
  for (int64_t i = 0; i < n; ++i) dst[i] = f32_to_e4m3(src[i] * enc);
}
MR_CLONES void remainder_join_span(const uint16_t* __restrict p, const uint16_t* __restrict r, float* __restrict dst,
                                   int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = join_remainder(p[i], r[i]);
}
MR_CLONES void remainder_split_span(const float* __restrict src, uint16_t* __restrict p, uint16_t* __restrict r,
                                    int64_t n) {
  for (int64_t i = 0; i < n; ++i) split_remainder(src[i], p[i], r[i]);
}

// The benchmark baseline's loops: the optimizer loops' skeleton (prefetch included) with an add for the math.
MR_INLINE void move_run(float* __restrict p, const float* __restrict g, float* __restrict m, float* __restrict v,
                        int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    float gi = g[i];
    p[i] += gi;
    m[i] += gi;
    v[i] += gi;
  }
}
MR_INLINE void move_run1(float* __restrict p, const float* __restrict g, float* __restrict m, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    float gi = g[i];
    p[i] += gi;
    m[i] += gi;
  }
}
MR_CLONES void move_span(float* p, const float* g, float* m, float* v, int64_t n) {
  prefetched(n, [&](int64_t b, int64_t e) { move_run(p + b, g + b, m + b, v + b, e - b); }, p, g, m, v);
}
MR_CLONES void move_span1(float* p, const float* g, float* m, int64_t n) {
  prefetched(n, [&](int64_t b, int64_t e) { move_run1(p + b, g + b, m + b, e - b); }, p, g, m);
}

MR_CLONES double unscale_span(float* __restrict g, int64_t n, float inv, bool in_place, bool* bad) {
  double sum = 0.0;
  uint32_t nf = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float y = unscale_element(g[i], inv, sum, nf);  // the flag as an integer: no branch in the loop
    if (in_place) g[i] = y;
  }
  *bad = *bad || nf != 0;
  return sum;
}

// ---- decode / encode of one tile -----------------------------------------------------------------------------

void decode(const void* buf, DType d, int64_t off, int64_t n, float* dst, float scale = 1.0f) {
  switch (d) {
    case DType::F32: std::memcpy(dst, static_cast<const float*>(buf) + off, static_cast<size_t>(n) * 4); break;
    case DType::BF16: bf16_decode_span(static_cast<const uint16_t*>(buf) + off, dst, n); break;
    case DType::F16: f16_decode_span(static_cast<const uint16_t*>(buf) + off, dst, n, scale); break;
    case DType::E4M3: e4m3_decode_span(static_cast<const uint8_t*>(buf) + off, dst, n, scale); break;
  }
}
// F16 buffers here are scaled states (rscale: state_scale's enc) or parameters (rscale 1); E4M3 ones are states.
void encode(const float* src, void* buf, DType d, int64_t off, int64_t n, float rscale = 1.0f) {
  switch (d) {
    case DType::F32: std::memcpy(static_cast<float*>(buf) + off, src, static_cast<size_t>(n) * 4); break;
    case DType::BF16: bf16_encode_span(src, static_cast<uint16_t*>(buf) + off, n); break;
    case DType::F16: f16_encode_span(src, static_cast<uint16_t*>(buf) + off, n, rscale); break;
    case DType::E4M3: e4m3_encode_span(src, static_cast<uint8_t*>(buf) + off, n, rscale); break;
  }
}

// Per-slot scales of the scaled fp16 / fp8 buffers: [0] exp_avg, [1] exp_avg_sq, [2] master. The scales read
// (old_scale) and written (new_scale) are state_scale's dec, new_rscale its enc.
struct Scales {
  std::array<float, 3> old_scale{1.0f, 1.0f, 1.0f};
  std::array<float, 3> new_scale{1.0f, 1.0f, 1.0f};
  std::array<float, 3> new_rscale{1.0f, 1.0f, 1.0f};
  std::array<bool, 3> scaled{false, false, false};
};

// What an optimizer looks like to the engine: its kernels.h description (name, states, consts) and the
// vectorised spans of its element function.
struct AdamOp : AdamKernel {
  static void span(float* p, const float* g, float* s0, float* s1, int64_t n, const Consts& c, float gs) {
    adam_span(p, g, s0, s1, n, c, gs);
  }
  // The states' new values only (p is left as it is): the absmax pass where the master carries no scale.
  static void states_span(float* p, const float* g, float* s0, float* s1, int64_t n, const Consts& c, float gs) {
    adam_moments_span(p, g, s0, s1, n, c, gs);
  }
  // Whether states_span reads p: only Adam's L2 decay passes the weight into the moments.
  static bool states_need_param(const Consts& c) { return adam_moments_read_param(c); }
};
struct SgdOp : SgdKernel {
  static void span(float* p, const float* g, float* s0, float*, int64_t n, const Consts& c, float gs) {
    sgd_span(p, g, s0, n, c, gs);
  }
  static void states_span(float* p, const float* g, float* s0, float* s1, int64_t n, const Consts& c, float gs) {
    span(p, g, s0, s1, n, c, gs);  // (p is a tile copy in the absmax pass)
  }
  static bool states_need_param(const Consts&) { return true; }
};
struct LionOp : LionKernel {
  static void span(float* p, const float* g, float* s0, float*, int64_t n, const Consts& c, float gs) {
    lion_span(p, g, s0, n, c, gs);
  }
  static void states_span(float* p, const float* g, float* s0, float* s1, int64_t n, const Consts& c, float gs) {
    span(p, g, s0, s1, n, c, gs);  // (p is a tile copy in the absmax pass)
  }
  static bool states_need_param(const Consts&) { return true; }
};

struct StateRef {
  void* buf;
  DType dtype;
};

template <class Op>
class Engine {
 public:
  Engine(std::span<const TensorSlot> slots, std::span<const GroupHyper> groups, const typename Op::Options& o,
         const StepControl& ctl)
      : slots_(slots), o_(o), ctl_(ctl) {
    check_slots(slots, groups, Op::kName, Op::uses_state(o, 0), Op::kStates > 1 && Op::uses_state(o, 1));
    for (const auto& g : groups) consts_.push_back(Op::consts(o, g));
  }

  void run() {
    if (ctl_.noop_flag && *ctl_.noop_flag) return;
    auto work = work_list(slots_);
    scales_.assign(slots_.size(), Scales{});
    bool any_scaled = false;
    for (size_t i = 0; i < slots_.size(); ++i) {
      const TensorSlot& s = slots_[i];
      Scales& sc = scales_[i];
      float* ptr[3] = {s.exp_avg_scale, s.exp_avg_sq_scale, s.master_scale};
      DType dt[3] = {s.exp_avg_dtype, s.exp_avg_sq_dtype, s.master_dtype};
      bool used[3] = {Op::uses_state(o_, 0), Op::kStates > 1 && Op::uses_state(o_, 1), s.master != nullptr};
      for (int k = 0; k < 3; ++k) {
        sc.scaled[k] = s.numel > 0 && used[k] && scaled_state(dt[k]);
        if (sc.scaled[k]) sc.old_scale[k] = *ptr[k];
        any_scaled = any_scaled || sc.scaled[k];
      }
    }
    const int64_t nw = static_cast<int64_t>(work.size());
    if (any_scaled) {
      std::vector<std::array<float, 3>> wmax(work.size(), {0.0f, 0.0f, 0.0f});
#pragma omp parallel for schedule(static) num_threads(threads())
      for (int64_t w = 0; w < nw; ++w) {
        const Scales& sc = scales_[static_cast<size_t>(work[w].slot)];
        if (sc.scaled[0] || sc.scaled[1] || sc.scaled[2]) wmax[static_cast<size_t>(w)] = absmax_pass(work[w]);
      }
      // Per slot: absmax over its work items, then TE's scale (dtype.h's state_scale).
      std::vector<std::array<float, 3>> smax(slots_.size(), {0.0f, 0.0f, 0.0f});
      for (int64_t w = 0; w < nw; ++w)
        for (int k = 0; k < 3; ++k)
          smax[static_cast<size_t>(work[w].slot)][k] =
              std::max(smax[static_cast<size_t>(work[w].slot)][k], wmax[static_cast<size_t>(w)][k]);
      for (size_t i = 0; i < slots_.size(); ++i)
        for (int k = 0; k < 3; ++k)
          if (scales_[i].scaled[k]) {
            const DType d = k == 0 ? slots_[i].exp_avg_dtype : k == 1 ? slots_[i].exp_avg_sq_dtype : slots_[i].master_dtype;
            const StateScale ns = state_scale(d, smax[i][k]);
            scales_[i].new_scale[k] = ns.dec;
            scales_[i].new_rscale[k] = ns.enc;
          }
    }
    bool bad = false;
#pragma omp parallel for schedule(static) num_threads(threads()) reduction(|| : bad)
    for (int64_t w = 0; w < nw; ++w) bad = update_pass(work[w]) || bad;
    for (size_t i = 0; i < slots_.size(); ++i) {
      const TensorSlot& s = slots_[i];
      float* ptr[3] = {s.exp_avg_scale, s.exp_avg_sq_scale, s.master_scale};
      for (int k = 0; k < 3; ++k)
        if (scales_[i].scaled[k]) *ptr[k] = scales_[i].new_scale[k];
    }
    if (bad && ctl_.found_inf) *ctl_.found_inf = 1;
  }

 private:
  StateRef state(const TensorSlot& s, int k) const {
    if (k == 0) return {s.exp_avg, s.exp_avg_dtype};
    return {s.exp_avg_sq, s.exp_avg_sq_dtype};
  }
  bool state_used(int k) const { return k < Op::kStates && Op::uses_state(o_, k); }

  // The fp32 master values of [off, off + n) into dst.
  void load_master(const TensorSlot& s, const Scales& sc, int64_t off, int64_t n, float* dst) const {
    if (s.remainder)
      remainder_join_span(static_cast<const uint16_t*>(s.param) + off, s.remainder + off, dst, n);
    else if (s.master)
      decode(s.master, s.master_dtype, off, n, dst, sc.old_scale[2]);
    else
      decode(s.param, s.param_dtype, off, n, dst);
  }

  // The tile loops stream several arrays of mixed widths through small tiles, where the hardware prefetchers alone
  // leave bandwidth unused (as in the fp32 loops, `prefetched`): ask for the next tile's lines of each array while
  // this one is computed (the update pass and the absmax pass of scaled states). Elements [off, off + n) of
  // every buffer the slot streams; nothing when n <= 0.
  void prefetch_next_tile(const TensorSlot& s, int64_t off, int64_t n) const {
    if (n <= 0) return;
    auto ahead = [&](const void* buf, DType d) {
      if (!buf) return;
      const int64_t w = dtype_size(d);
      const char* b = static_cast<const char*>(buf) + off * w;
      for (int64_t i = 0; i < n * w; i += 64) __builtin_prefetch(b + i);
    };
    ahead(s.grad, s.grad_dtype);
    ahead(s.param, s.param_dtype);
    ahead(s.master, s.master_dtype);
    ahead(s.remainder, DType::BF16);  // 2 bytes an element
    for (int k = 0; k < 2; ++k)
      if (state_used(k)) ahead(state(s, k).buf, state(s, k).dtype);
  }

  // Pass 1 (fp16 / fp8 scaled states only): the largest magnitude of each new scaled value, nothing stored.
  std::array<float, 3> absmax_pass(const Work& w) const {
    const TensorSlot& s = slots_[static_cast<size_t>(w.slot)];
    const Scales& sc = scales_[static_cast<size_t>(w.slot)];
    const auto& c = consts_[static_cast<size_t>(s.group)];
    alignas(64) float pt[kTile], gt[kTile], st[2][kTile];
    std::array<float, 3> mx{0.0f, 0.0f, 0.0f};
    for (int64_t off = w.begin; off < w.begin + w.len; off += kTile) {
      int64_t n = std::min(kTile, w.begin + w.len - off);
      prefetch_next_tile(s, off + kTile, std::min(kTile, w.begin + w.len - (off + kTile)));
      decode(s.grad, s.grad_dtype, off, n, gt);
      if (sc.scaled[2] || Op::states_need_param(c)) load_master(s, sc, off, n, pt);  // (else pt goes unread)
      for (int k = 0; k < 2; ++k)
        if (state_used(k)) decode(state(s, k).buf, state(s, k).dtype, off, n, st[k], sc.old_scale[k]);
      if (sc.scaled[2]) Op::span(pt, gt, st[0], st[1], n, c, ctl_.grad_scale);  // the new master's absmax too
      else Op::states_span(pt, gt, st[0], st[1], n, c, ctl_.grad_scale);
      for (int k = 0; k < 2; ++k)
        if (sc.scaled[k]) mx[k] = std::max(mx[k], absmax_span(st[k], n));
      if (sc.scaled[2]) mx[2] = std::max(mx[2], absmax_span(pt, n));
    }
    return mx;
  }

  // Pass 2: the update. Returns whether a non-finite scaled gradient was seen (only looked for on request).
  bool update_pass(const Work& w) const {
    const TensorSlot& s = slots_[static_cast<size_t>(w.slot)];
    const Scales& sc = scales_[static_cast<size_t>(w.slot)];
    const auto& c = consts_[static_cast<size_t>(s.group)];
    const float gs = ctl_.grad_scale;
    const bool check = ctl_.found_inf != nullptr;
    bool bad = false;
    bool states_f32 = true;
    for (int k = 0; k < 2; ++k) states_f32 = states_f32 && (!state_used(k) || state(s, k).dtype == DType::F32);
    if (s.param_dtype == DType::F32 && s.grad_dtype == DType::F32 && states_f32) {
      // All fp32: in place, one SIMD loop over the chunk.
      float* p = static_cast<float*>(s.param) + w.begin;
      const float* g = static_cast<const float*>(s.grad) + w.begin;
      float* s0 = state_used(0) ? static_cast<float*>(s.exp_avg) + w.begin : nullptr;
      float* s1 = state_used(1) ? static_cast<float*>(s.exp_avg_sq) + w.begin : nullptr;
      if (check) bad = nonfinite_span(g, w.len, gs);
      Op::span(p, g, s0, s1, w.len, c, gs);
      return bad;
    }
    alignas(64) float pt[kTile], gt[kTile], st[2][kTile];
    for (int64_t off = w.begin; off < w.begin + w.len; off += kTile) {
      int64_t n = std::min(kTile, w.begin + w.len - off);
      prefetch_next_tile(s, off + kTile, std::min(kTile, w.begin + w.len - (off + kTile)));
      const float* g;
      if (s.grad_dtype == DType::F32) {
        g = static_cast<const float*>(s.grad) + off;
      } else {
        decode(s.grad, s.grad_dtype, off, n, gt);
        g = gt;
      }
      if (check) bad = nonfinite_span(g, n, gs) || bad;
      // The fp32 master: in place when it is an fp32 buffer, else a tile.
      float* p;
      if (s.master && s.master_dtype == DType::F32) {
        p = static_cast<float*>(s.master) + off;
      } else if (!s.master && !s.remainder && s.param_dtype == DType::F32) {
        p = static_cast<float*>(s.param) + off;
      } else {
        load_master(s, sc, off, n, pt);
        p = pt;
      }
      float* sp[2] = {nullptr, nullptr};
      for (int k = 0; k < 2; ++k) {
        if (!state_used(k)) continue;
        StateRef r = state(s, k);
        if (r.dtype == DType::F32) {
          sp[k] = static_cast<float*>(r.buf) + off;
        } else {
          decode(r.buf, r.dtype, off, n, st[k], sc.old_scale[k]);
          sp[k] = st[k];
        }
      }
      Op::span(p, g, sp[0], sp[1], n, c, gs);
      for (int k = 0; k < 2; ++k) {
        if (!state_used(k)) continue;
        StateRef r = state(s, k);
        if (r.dtype != DType::F32) encode(st[k], r.buf, r.dtype, off, n, sc.new_rscale[k]);
      }
      if (s.remainder) {
        remainder_split_span(p, static_cast<uint16_t*>(s.param) + off, s.remainder + off, n);
      } else {
        if (s.master && s.master_dtype == DType::F16) encode(p, s.master, DType::F16, off, n, sc.new_rscale[2]);
        if (s.param_dtype != DType::F32 || s.master) encode(p, s.param, s.param_dtype, off, n);
      }
    }
    return bad;
  }

  std::span<const TensorSlot> slots_;
  const typename Op::Options& o_;
  const StepControl& ctl_;
  std::vector<typename Op::Consts> consts_;
  std::vector<Scales> scales_;
};

}  // namespace

// adam_step, sgd_step, lion_step (elementwise_kernels.def): the engine over <Name>Op.
#define MR_ELEMENTWISE_KERNEL(Name, name)                                                                         \
  void name##_step(std::span<const TensorSlot> slots, std::span<const GroupHyper> groups, const Name##Options& o, \
                   const StepControl& ctl) {                                                                      \
    Engine<Name##Op>(slots, groups, o, ctl).run();                                                                \
  }
#include "optim/elementwise_kernels.def"
#undef MR_ELEMENTWISE_KERNEL

UnscaleResult unscale_and_check(std::span<const GradSlot> grads, float inv_scale, bool in_place) {
  auto work = work_list(grads);
  const int64_t nw = static_cast<int64_t>(work.size());
  std::vector<double> partial(work.size(), 0.0);
  bool bad = false;
#pragma omp parallel for schedule(static) num_threads(threads()) reduction(|| : bad)
  for (int64_t w = 0; w < nw; ++w) {
    const Work& wk = work[static_cast<size_t>(w)];
    const GradSlot& g = grads[static_cast<size_t>(wk.slot)];
    bool b = false;
    if (g.dtype == DType::F32) {
      partial[static_cast<size_t>(w)] = unscale_span(static_cast<float*>(g.grad) + wk.begin, wk.len, inv_scale, in_place, &b);
    } else {
      alignas(64) float t[kTile];
      double sum = 0.0;
      for (int64_t off = wk.begin; off < wk.begin + wk.len; off += kTile) {
        int64_t n = std::min(kTile, wk.begin + wk.len - off);
        decode(g.grad, g.dtype, off, n, t);
        sum += unscale_span(t, n, inv_scale, in_place, &b);
        if (in_place) encode(t, g.grad, g.dtype, off, n);
      }
      partial[static_cast<size_t>(w)] = sum;
    }
    bad = bad || b;
  }
  UnscaleResult r;
  r.found_inf = bad;
  for (double p : partial) r.sum_sq += p;  // fixed order: independent of the thread count
  return r;
}

void data_movement(std::span<const TensorSlot> slots) {
  auto work = work_list(slots);
  const int64_t nw = static_cast<int64_t>(work.size());
#pragma omp parallel for schedule(static) num_threads(threads())
  for (int64_t w = 0; w < nw; ++w) {
    const Work& wk = work[static_cast<size_t>(w)];
    const TensorSlot& s = slots[static_cast<size_t>(wk.slot)];
    float* p = static_cast<float*>(s.param) + wk.begin;
    const float* g = static_cast<const float*>(s.grad) + wk.begin;
    if (s.exp_avg && s.exp_avg_sq)
      move_span(p, g, static_cast<float*>(s.exp_avg) + wk.begin, static_cast<float*>(s.exp_avg_sq) + wk.begin, wk.len);
    else if (s.exp_avg)
      move_span1(p, g, static_cast<float*>(s.exp_avg) + wk.begin, wk.len);
  }
}

int threads_from(const char* omp_num_threads, int processors) {
  if (omp_num_threads) {
    char* end = nullptr;
    long n = std::strtol(omp_num_threads, &end, 10);
    // "8" or "8,4" (nested levels: the first is ours); anything else is ignored, as OpenMP itself does.
    if (end != omp_num_threads && (*end == '\0' || *end == ',') && n > 0 && n <= 1 << 16) return static_cast<int>(n);
  }
  return std::max(1, processors);
}

int default_threads() {
  static const int n = threads_from(std::getenv("OMP_NUM_THREADS"), omp_get_num_procs());
  return n;
}

int threads() {
  int n = g_threads.load(std::memory_order_relaxed);
  return n > 0 ? n : default_threads();
}

void set_threads(int n) { g_threads.store(n > 0 ? n : 0, std::memory_order_relaxed); }

std::string simd_level() {
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("x86-64-v4")) return "x86-64-v4";
  if (__builtin_cpu_supports("x86-64-v3")) return "x86-64-v3";
#endif
  return "default";
}

}  // namespace mr::optim::cpu
