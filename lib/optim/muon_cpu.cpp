// Muon on the CPU: coefficient schedules, scale factors, Newton-Schulz (CBLAS GEMMs), QKV split, TP modes and
// the optimizer step.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <stdexcept>
#include <utility>

#include "optim/muon.h"
#include "optim/launch_geometry.h"
#include "optim/muon_plan.h"
#include "optim/optimizer_table.h"

#if MR_OPTIM_HAVE_CBLAS
#include <cblas.h>
#endif

namespace mr::optim {

// ---- coefficients -----------------------------------------------------------------------------------------------
// Emerging-Optimizers, emerging_optimizers/orthogonalized_optimizers/muon_utils.py, _COEFFICIENT_SETS
// (commit fd7729267109a8848709e9406bf19e53e970c3f4); the origin of each set is in docs/optim.md.
namespace {
constexpr NsCoeff kSimple[] = {{3.4445, -4.7750, 2.0315}};
constexpr NsCoeff kQuintic[] = {{4.0848, -6.8946, 2.9270},
                                {3.9505, -6.3029, 2.6377},
                                {3.7418, -5.5913, 2.3037},
                                {2.8769, -3.1427, 1.2046},
                                {2.8366, -3.0525, 1.2012}};
constexpr NsCoeff kPolarExpress[] = {{8.2051, -22.9019, 16.4607}, {4.0664, -2.8612, 0.5184},
                                     {3.9096, -2.8234, 0.5250},   {3.2856, -2.4153, 0.4853},
                                     {2.2779, -1.6198, 0.3985},   {1.8726, -1.2307, 0.3585},
                                     {1.8564, -1.2132, 0.3568},   {1.8750, -1.2500, 0.3750}};
constexpr NsCoeff kCans[] = {{8.4703, -25.1081, 18.6293},
                             {4.1828, -3.1087, 0.5806},
                             {3.9619, -2.9541, 0.5630},
                             {3.2866, -2.4647, 0.5074},
                             {2.2737, -1.6447, 0.4162}};
constexpr NsCoeff kAol[] = {{4.0098, -7.0585, 2.4635},
                            {3.4585, -5.5479, 2.5959},
                            {2.7573, -3.2939, 1.4254},
                            {2.7215, -3.0494, 1.3169}};
constexpr NsCoeff kDeepseekV4[] = {{3.4445, -4.7750, 2.0315}, {3.4445, -4.7750, 2.0315}, {3.4445, -4.7750, 2.0315},
                                   {3.4445, -4.7750, 2.0315}, {3.4445, -4.7750, 2.0315}, {3.4445, -4.7750, 2.0315},
                                   {3.4445, -4.7750, 2.0315}, {3.4445, -4.7750, 2.0315}, {2.0, -1.5, 0.5},
                                   {2.0, -1.5, 0.5}};
constexpr NsCoeff kCubic5[] = {{3.3656576, -3.3420992, 0.0},
                               {2.5744352, -1.4957376, 0.0},
                               {2.5368962, -1.4312570, 0.0},
                               {2.4418906, -1.2764040, 0.0},
                               {2.2230472, -0.9630650, 0.0}};

constexpr std::pair<std::string_view, NsCoefficients> kCoeffNames[] = {
    {"simple", NsCoefficients::Simple},   {"quintic", NsCoefficients::Quintic},
    {"polar_express", NsCoefficients::PolarExpress}, {"cans", NsCoefficients::Cans},
    {"aol", NsCoefficients::Aol},         {"deepseekv4", NsCoefficients::DeepseekV4},
    {"cubic5", NsCoefficients::Cubic5}};

template <class E, size_t N>
E parse_choice(std::string_view name, const std::pair<std::string_view, E> (&table)[N], const char* what) {
  std::string choices;
  for (const auto& [n, v] : table) {
    if (n == name) return v;
    choices += choices.empty() ? "" : ", ";
    choices += n;
  }
  throw std::invalid_argument(std::string("unsupported ") + what + " '" + std::string(name) + "' (choices: " +
                              choices + ")");
}
}  // namespace

NsCoefficients ns_coefficients_from_string(std::string_view name) {
  return parse_choice(name, kCoeffNames, "muon coefficient type");
}

std::string_view to_string(NsCoefficients c) {
  for (const auto& [n, v] : kCoeffNames)
    if (v == c) return n;
  return "?";
}

std::span<const NsCoeff> ns_coefficient_set(NsCoefficients c) {
  switch (c) {
    case NsCoefficients::Simple: return kSimple;
    case NsCoefficients::Quintic: return kQuintic;
    case NsCoefficients::PolarExpress: return kPolarExpress;
    case NsCoefficients::Cans: return kCans;
    case NsCoefficients::Aol: return kAol;
    case NsCoefficients::DeepseekV4: return kDeepseekV4;
    case NsCoefficients::Cubic5: return kCubic5;
  }
  return kQuintic;
}

std::vector<NsCoeff> ns_schedule(NsCoefficients c, int steps) {
  if (steps < 1) throw std::invalid_argument("num_ns_steps must be at least 1, got " + std::to_string(steps));
  auto set = ns_coefficient_set(c);
  if (c == NsCoefficients::Cubic5 && steps != static_cast<int>(set.size()))
    throw std::invalid_argument("cubic5 is a fixed 5-step schedule; got steps=" + std::to_string(steps));
  bool repeat_last =
      c == NsCoefficients::PolarExpress || c == NsCoefficients::Cans || c == NsCoefficients::DeepseekV4;
  std::vector<NsCoeff> out;
  for (int i = 0; i < steps; ++i) {
    size_t k = static_cast<size_t>(i);
    out.push_back(repeat_last ? set[std::min(k, set.size() - 1)] : set[k % set.size()]);
  }
  return out;
}

MatmulPrecision matmul_precision_from_string(std::string_view name) {
  // "low" is no torch precision: torch.set_float32_matmul_precision("low") only warns and keeps the ambient one,
  // torch's default "highest" (full fp32), which is what Newton-Schulz then runs at.
  static constexpr std::pair<std::string_view, MatmulPrecision> t[] = {{"highest", MatmulPrecision::Highest},
                                                                       {"high", MatmulPrecision::High},
                                                                       {"medium", MatmulPrecision::Medium},
                                                                       {"low", MatmulPrecision::Highest}};
  return parse_choice(name, t, "fp32 matmul precision");
}

MuonScaleMode muon_scale_mode_from_string(std::string_view name) {
  static constexpr std::pair<std::string_view, MuonScaleMode> t[] = {{"spectral", MuonScaleMode::Spectral},
                                                                     {"unit_rms_norm", MuonScaleMode::UnitRmsNorm},
                                                                     {"shape_scaling", MuonScaleMode::ShapeScaling}};
  return parse_choice(name, t, "muon scale mode");
}

MuonTpMode muon_tp_mode_from_string(std::string_view name) {
  static constexpr std::pair<std::string_view, MuonTpMode> t[] = {{"blockwise", MuonTpMode::Blockwise},
                                                                  {"duplicated", MuonTpMode::Duplicated},
                                                                  {"distributed", MuonTpMode::Distributed},
                                                                  {"auto", MuonTpMode::Auto},
                                                                  {"layer_sharded", MuonTpMode::LayerSharded}};
  return parse_choice(name, t, "muon tp mode");
}

Moment2Method moment2_method_from_string(std::string_view name) {
  if (name == "adamuon") return Moment2Method::AdaMuon;
  if (name == "normuon" || name == "namo")
    throw std::invalid_argument("adaptive muon moment2 method '" + std::string(name) +
                                "' is not implemented (adamuon is)");
  throw std::invalid_argument("unknown adaptive muon moment2 method '" + std::string(name) +
                              "' (choose from adamuon, normuon, namo)");
}

AdaMuonConsts adamuon_consts(const AdaptiveOptions& a) {
  AdaMuonConsts c{};
  c.one_minus_beta2 = static_cast<float>(1.0 - a.beta2);  // torch: the weight 1 - beta2 in double, used as fp32
  c.eps = static_cast<float>(a.eps);
  return c;
}

double muon_scale_factor(int64_t size_out, int64_t size_in, MuonScaleMode mode) {
  double out = static_cast<double>(size_out), in = static_cast<double>(size_in);
  switch (mode) {
    case MuonScaleMode::ShapeScaling: return std::sqrt(std::max(1.0, out / in));
    case MuonScaleMode::Spectral: return std::sqrt(std::max(out, in));
    case MuonScaleMode::UnitRmsNorm: return std::sqrt(out / in);
  }
  return 1.0;
}

MuonMomentumConsts muon_momentum_consts(const MuonOptions& o, const GroupHyper& g) {
  MuonMomentumConsts c{};
  c.one_minus_momentum = static_cast<float>(1.0 - o.momentum);
  c.momentum = static_cast<float>(o.momentum);
  c.neg_wd_lr = static_cast<float>(-g.weight_decay * g.lr);
  c.weight_decay = static_cast<float>(g.weight_decay);
  c.decoupled = o.decoupled_weight_decay;
  c.has_weight_decay = g.weight_decay != 0.0;
  c.nesterov = o.nesterov;
  return c;
}

std::vector<int64_t> qkv_split_shapes(int64_t num_attention_heads, int64_t num_query_groups, int64_t kv_channels,
                                      bool attention_output_gate) {
  int64_t q = num_attention_heads / num_query_groups * kv_channels;
  if (attention_output_gate) return {q, q, kv_channels, kv_channels};
  return {q, kv_channels, kv_channels};
}

bool muon_excluded(int64_t ndim, bool is_embedding_or_output, bool use_muon) {
  // The one predicate: the optimizer table's rule for Muon's row (the run's buffers and the estimate read it there).
  return ndim < 0 || !takes_own_rule(optimizer_info(arg::Optimizer::muon), static_cast<size_t>(ndim),
                                     is_embedding_or_output, use_muon);
}

ScalarOptimizer scalar_optimizer_from_string(std::string_view name) {
  static constexpr std::pair<std::string_view, ScalarOptimizer> t[] = {{"adam", ScalarOptimizer::Adam},
                                                                       {"lion", ScalarOptimizer::Lion}};
  return parse_choice(name, t, "muon scalar optimizer");
}

namespace cpu {

// ---- GEMM ---------------------------------------------------------------------------------------------------------

bool have_cblas() { return MR_OPTIM_HAVE_CBLAS != 0; }

void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
#if MR_OPTIM_HAVE_CBLAS
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, static_cast<int>(m),
              static_cast<int>(n), static_cast<int>(k), alpha, a, static_cast<int>(lda), b, static_cast<int>(ldb),
              beta, c, static_cast<int>(ldc));
#else
#pragma omp parallel for schedule(static) num_threads(cpu::threads())
  for (int64_t i = 0; i < m; ++i) {
    std::vector<float> acc(static_cast<size_t>(n), 0.0f);
    for (int64_t p = 0; p < k; ++p) {
      float av = ta ? a[p * lda + i] : a[i * lda + p];
      for (int64_t j = 0; j < n; ++j) acc[static_cast<size_t>(j)] += av * (tb ? b[j * ldb + p] : b[p * ldb + j]);
    }
    for (int64_t j = 0; j < n; ++j)
      c[i * ldc + j] = alpha * acc[static_cast<size_t>(j)] + (beta == 0.0f ? 0.0f : beta * c[i * ldc + j]);
  }
#endif
}

namespace {

// C (n x n, row-major) = alpha * A A^T + beta * C for A n x k, written in full (both triangles).
void syrk_full(int64_t n, int64_t k, float alpha, const float* a, float beta, float* c) {
#if MR_OPTIM_HAVE_CBLAS
  cblas_ssyrk(CblasRowMajor, CblasUpper, CblasNoTrans, static_cast<int>(n), static_cast<int>(k), alpha, a,
              static_cast<int>(k), beta, c, static_cast<int>(n));
#pragma omp parallel for schedule(static) num_threads(cpu::threads())
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < i; ++j) c[i * n + j] = c[j * n + i];
#else
  gemm(false, true, n, n, k, alpha, a, k, a, k, beta, c, n);
#endif
}

void round_bf16(float* x, int64_t n) {
#pragma omp parallel for simd schedule(static) num_threads(cpu::threads())
  for (int64_t i = 0; i < n; ++i) x[i] = bf16_to_f32(f32_to_bf16(x[i]));
}

void copy(const float* src, float* dst, int64_t n) {
#pragma omp parallel for simd schedule(static) num_threads(cpu::threads())
  for (int64_t i = 0; i < n; ++i) dst[i] = src[i];
}

// dst (cols x rows) = src (rows x cols)^T, in cache blocks.
void transpose(const float* src, float* dst, int64_t rows, int64_t cols) {
  constexpr int64_t B = 32;
#pragma omp parallel for collapse(2) schedule(static) num_threads(cpu::threads())
  for (int64_t i0 = 0; i0 < rows; i0 += B)
    for (int64_t j0 = 0; j0 < cols; j0 += B)
      for (int64_t i = i0; i < std::min(rows, i0 + B); ++i)
        for (int64_t j = j0; j < std::min(cols, j0 + B); ++j) dst[j * rows + i] = src[i * cols + j];
}

double sum_sq(const float* x, int64_t n) {
  double s = 0.0;
#pragma omp parallel for simd reduction(+ : s) schedule(static) num_threads(cpu::threads())
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(x[i]) * static_cast<double>(x[i]);
  return s;
}

void divide(float* x, int64_t n, float d) {
#pragma omp parallel for simd schedule(static) num_threads(cpu::threads())
  for (int64_t i = 0; i < n; ++i) x[i] = ns_normalize_element(x[i], d);
}

// The NS iterations on W (m x n, normalised, m <= n usually) in place. `tp`: all-reduce the Gram matrices
// (distributed mode, W holds this rank's columns).
void ns_iterate(float* w, int64_t m, int64_t n, const NsOptions& o, TpGroup* tp) {
  const bool bf16 = o.precision == MatmulPrecision::Medium;
  std::vector<float> y(static_cast<size_t>(m * n)), a(static_cast<size_t>(m * m)), b(static_cast<size_t>(m * m));
  if (bf16) round_bf16(w, m * n);
  for (const NsCoeff& k : ns_schedule(o.coefficients, o.steps)) {
    const float fa = static_cast<float>(k.a), fb = static_cast<float>(k.b), fc = static_cast<float>(k.c);
    // A = W W^T
    if (o.use_syrk) syrk_full(m, n, 1.0f, w, 0.0f, a.data());
    else gemm(false, true, m, m, n, 1.0f, w, n, w, n, 0.0f, a.data(), m);
    if (tp) tp->all_reduce_sum(a.data(), m * m);
    if (bf16) round_bf16(a.data(), m * m);
    copy(w, y.data(), m * n);
    if (k.c != 0.0) {
      // B = b A + c A A ; W = a W + B W
      copy(a.data(), b.data(), m * m);
      if (o.use_syrk) syrk_full(m, m, fc, a.data(), fb, b.data());
      else gemm(false, false, m, m, m, fc, a.data(), m, a.data(), m, fb, b.data(), m);
      if (bf16) round_bf16(b.data(), m * m);
      gemm(false, false, m, n, m, 1.0f, b.data(), m, w, n, fa, y.data(), n);
    } else {
      // W = a W + b A W
      gemm(false, false, m, n, m, fb, a.data(), m, w, n, fa, y.data(), n);
    }
    if (bf16) round_bf16(y.data(), m * n);
    copy(y.data(), w, m * n);
  }
}

}  // namespace

namespace {
thread_local int64_t t_ns_count = 0;
}  // namespace

int64_t newton_schulz_count() { return t_ns_count; }

void newton_schulz(const float* x, float* out, int64_t rows, int64_t cols, const NsOptions& o) {
  ++t_ns_count;
  const int64_t n_el = rows * cols;
  const bool transpose_in = rows > cols;
  const int64_t m = transpose_in ? cols : rows, n = transpose_in ? rows : cols;
  std::vector<float> w(static_cast<size_t>(n_el));
  if (transpose_in) transpose(x, w.data(), rows, cols);
  else copy(x, w.data(), n_el);
  divide(w.data(), n_el, ns_denom(sum_sq(w.data(), n_el), o.eps));
  ns_iterate(w.data(), m, n, o, nullptr);
  if (transpose_in) transpose(w.data(), out, m, n);
  else copy(w.data(), out, n_el);
}

void newton_schulz_batched(const float* x, float* out, int64_t batch, int64_t rows, int64_t cols,
                           const NsOptions& o) {
  for (int64_t i = 0; i < batch; ++i) newton_schulz(x + i * rows * cols, out + i * rows * cols, rows, cols, o);
}

void newton_schulz_distributed(const float* x, float* out, int64_t rows, int64_t cols, int partition_dim,
                               const NsOptions& o, TpGroup& tp) {
  if (partition_dim != 0 && partition_dim != 1)
    throw std::invalid_argument("distributed Newton-Schulz: invalid partition_dim " + std::to_string(partition_dim));
  ++t_ns_count;
  // Sharded along rows: work on the transpose, so the Gram matrix (cols x cols) sums over the shards.
  const bool transpose_in = partition_dim == 0;
  const int64_t n_el = rows * cols;
  const int64_t m = transpose_in ? cols : rows, n = transpose_in ? rows : cols;
  std::vector<float> w(static_cast<size_t>(n_el));
  if (transpose_in) transpose(x, w.data(), rows, cols);
  else copy(x, w.data(), n_el);
  float sq = static_cast<float>(sum_sq(w.data(), n_el));
  tp.all_reduce_sum(&sq, 1);
  divide(w.data(), n_el, ns_denom_f32(sq, o.eps));
  ns_iterate(w.data(), m, n, o, &tp);
  if (transpose_in) transpose(w.data(), out, m, n);
  else copy(w.data(), out, n_el);
}

namespace {

// cudaMemcpy2D on the host: `rows` rows of `width` bytes, `dpitch` / `spitch` bytes apart.
void copy_2d(float* dst, size_t dpitch, const float* src, size_t spitch, size_t width, size_t rows) {
  for (size_t i = 0; i < rows; ++i)
    std::memcpy(reinterpret_cast<char*>(dst) + i * dpitch, reinterpret_cast<const char*>(src) + i * spitch, width);
}

// Orthogonalise one block (a matrix, a QKV part, or a shard) with the TP mode, then scale.
void orthogonalize_block(const float* x, float* out, int64_t rows, int64_t cols, int pdim, const MuonOptions& o,
                         TpGroup* tp, int home) {
  int64_t size_out = rows, size_in = cols;
  if (pdim < 0) {
    newton_schulz(x, out, rows, cols, o.ns);
  } else {
    const int world = tp->size(), rank = tp->rank();
    (pdim == 0 ? size_out : size_in) *= world;
    if (o.tp_mode == MuonTpMode::Distributed) {
      newton_schulz_distributed(x, out, rows, cols, pdim, o.ns, *tp);
    } else {  // duplicated: all-gather, whole-matrix NS, keep this rank's part
      // (layer-sharded: the shards gathered on the home rank, the NS there, its result scattered back)
      const bool sharded = o.tp_mode == MuonTpMode::LayerSharded;
      const bool ns_here = !sharded || rank == home;
      const int64_t n_el = rows * cols;
      std::vector<float> gathered(ns_here ? static_cast<size_t>(n_el * world) : 0), full(gathered.size());
      if (sharded) tp->gather(x, n_el, gathered.data(), home);
      else tp->all_gather(x, n_el, gathered.data());
      if (pdim == 0) {  // the shards stacked by rows are the whole matrix
        if (ns_here) newton_schulz(gathered.data(), full.data(), rows * world, cols, o.ns);
        if (sharded) tp->scatter(full.data(), n_el, out, home);
        else copy(full.data() + rank * n_el, out, n_el);
      } else {
        // Each shard is a column block of the whole matrix: the 2-D copies of the CUDA step (launch_geometry.h).
        std::vector<float> orth(full.size());
        if (ns_here) {
          for (int r = 0; r < world; ++r) {
            const geom::ColumnBlockCopy c = geom::column_block_copy(rows, cols, world, r);
            copy_2d(full.data() + c.full_offset, c.full_pitch, gathered.data() + c.shard_offset, c.shard_pitch,
                    c.width, c.rows);
          }
          newton_schulz(full.data(), orth.data(), rows, cols * world, o.ns);
        }
        if (sharded) {  // the home cuts the result back into shards, in the gathered layout, and scatters them
          for (int r = 0; ns_here && r < world; ++r) {
            const geom::ColumnBlockCopy c = geom::column_block_copy(rows, cols, world, r);
            copy_2d(gathered.data() + c.shard_offset, c.shard_pitch, orth.data() + c.full_offset, c.full_pitch,
                    c.width, c.rows);
          }
          tp->scatter(gathered.data(), n_el, out, home);
        } else {
          const geom::ColumnBlockCopy c = geom::column_block_copy(rows, cols, world, rank);
          copy_2d(out, c.shard_pitch, orth.data() + c.full_offset, c.full_pitch, c.width, c.rows);
        }
      }
    }
  }
  const float sf = static_cast<float>(muon_scale_factor(size_out, size_in, o.scale_mode));
  const float esf = static_cast<float>(o.extra_scale_factor);
  const int64_t n_el = rows * cols;
#pragma omp parallel for simd schedule(static) num_threads(cpu::threads())
  for (int64_t i = 0; i < n_el; ++i) out[i] = muon_scale_element(out[i], sf, esf);
}

int tp_size(const TpGroup* tp) { return tp ? tp->size() : 1; }


}  // namespace

void muon_orthogonalize(const MuonParam& p, const float* x, float* out, const MuonOptions& o, TpGroup* tp, int home) {
  const int pdim = muon_partition_dim(p, o, tp_size(tp));
  if (!(o.split_qkv && p.is_qkv)) return orthogonalize_block(x, out, p.rows, p.cols, pdim, o, tp, home);
  const std::vector<int64_t>& shapes = p.qkv_split_shapes.empty() ? o.qkv_split_shapes : p.qkv_split_shapes;
  if (shapes.empty()) throw std::runtime_error("Muon QKV split requested but qkv_split_shapes is not set");
  const int64_t total = std::accumulate(shapes.begin(), shapes.end(), int64_t{0});
  if (total <= 0 || p.rows % total != 0)
    throw std::runtime_error("Muon QKV split shape mismatch: grad rows " + std::to_string(p.rows) +
                             " not a multiple of the split total " + std::to_string(total));
  const int64_t groups = p.rows / total, cols = p.cols;
  int64_t off = 0;
  for (int64_t s : shapes) {
    // The rows of this part in every query group, stacked: (groups * s) x cols.
    std::vector<float> block(static_cast<size_t>(groups * s * cols)), orth(block.size());
    for (int64_t g = 0; g < groups; ++g)
      std::memcpy(block.data() + g * s * cols, x + (g * total + off) * cols, static_cast<size_t>(s * cols) * 4);
    orthogonalize_block(block.data(), orth.data(), groups * s, cols, pdim, o, tp, home);
    for (int64_t g = 0; g < groups; ++g)
      std::memcpy(out + (g * total + off) * cols, orth.data() + g * s * cols, static_cast<size_t>(s * cols) * 4);
    off += s;
  }
}

void muon_step(std::span<const MuonParam> params, std::span<const GroupHyper> groups, const MuonOptions& o,
               TpGroup* tp) {
  check_muon_params(params, groups, o);
  const std::vector<MuonJob> jobs = plan_muon_jobs(params, o, tp_size(tp));
  std::vector<float> u, orth;
  for (const MuonJob& job : jobs) {
    const MuonParam& first = params[job.members.front()];
    const int64_t n_el = job.rows * job.cols;
    u.resize(static_cast<size_t>(n_el) * job.members.size());
    orth.resize(u.size());
    for (size_t j = 0; j < job.members.size(); ++j) {
      const MuonParam& p = params[job.members[j]];
      const MuonMomentumConsts c = muon_momentum_consts(o, groups[static_cast<size_t>(p.group)]);
      float* uj = u.data() + static_cast<int64_t>(j) * n_el;
#pragma omp parallel for simd schedule(static) num_threads(cpu::threads())
      for (int64_t e = 0; e < n_el; ++e) uj[e] = muon_momentum_element(p.param[e], p.grad[e], p.momentum_buffer[e], c);
    }
    if (!job.batched()) {
      muon_orthogonalize(first, u.data(), orth.data(), o, tp, job.home);
    } else {
      newton_schulz_batched(u.data(), orth.data(), static_cast<int64_t>(job.members.size()), job.rows, job.cols, o.ns);
      const float sf = static_cast<float>(muon_scale_factor(job.rows, job.cols, o.scale_mode));
      const float esf = static_cast<float>(o.extra_scale_factor);
      const int64_t total = static_cast<int64_t>(orth.size());
#pragma omp parallel for simd schedule(static) num_threads(cpu::threads())
      for (int64_t e = 0; e < total; ++e) orth[static_cast<size_t>(e)] = muon_scale_element(orth[static_cast<size_t>(e)], sf, esf);
    }
    for (size_t j = 0; j < job.members.size(); ++j) {
      const MuonParam& p = params[job.members[j]];
      const float neg_lr = static_cast<float>(-groups[static_cast<size_t>(p.group)].lr);
      float* oj = orth.data() + static_cast<int64_t>(j) * n_el;
      if (o.adaptive.method == Moment2Method::AdaMuon) {
        // Adaptive Muon: the second moment, then AdaptiveMuon's Muon scale by this shard's own shape.
        const AdaMuonConsts ac = adamuon_consts(o.adaptive);
        const float sf = static_cast<float>(muon_scale_factor(p.rows, p.cols, o.scale_mode));
        const float esf = static_cast<float>(o.extra_scale_factor);
        float* v = p.moment2_buffer;
#pragma omp parallel for simd schedule(static) num_threads(cpu::threads())
        for (int64_t e = 0; e < n_el; ++e) oj[e] = muon_scale_element(adamuon_element(oj[e], v[e], ac), sf, esf);
      }
      uint16_t* lowp = p.param_bf16;
#pragma omp parallel for simd schedule(static) num_threads(cpu::threads())
      for (int64_t e = 0; e < n_el; ++e) {
        muon_apply_element(p.param[e], oj[e], neg_lr);
        if (lowp) lowp[e] = f32_to_bf16(p.param[e]);
      }
    }
  }
}

}  // namespace cpu
}  // namespace mr::optim
