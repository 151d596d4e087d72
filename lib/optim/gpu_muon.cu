// The CUDA Muon path (gpu.h): Newton-Schulz with cuBLAS (strided-batched over same-shape matrices; bf16, TF32 or
// fp32 GEMMs by MatmulPrecision) and the Muon step, whose jobs come from the planner the CPU step uses
// (muon_plan.h). The elementwise parts (momentum, scale, Adaptive Muon's second moment, apply) are elementwise.h's,
// compiled with -fmad=false.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "optim/gpu.h"
#include "optim/gpu_device.cuh"
#include "optim/muon_plan.h"

namespace mr::optim::gpu {
namespace {

using detail::blas;
using detail::check;
using detail::check_launch;
using detail::to_int32;
using detail::grid_for;
using detail::kThreads;
using detail::to_dim3;
namespace geom = ::mr::optim::geom;
using detail::Scratch;
using detail::scratch;

// ---- Newton-Schulz -------------------------------------------------------------------------------------------

__global__ void sumsq_kernel(const float* x, int64_t per, int64_t blocks_per, double* partial) {
  const int64_t b = blockIdx.y;
  const float* xb = x + b * per;
  double s = 0.0;
  for (int64_t i = geom::sumsq_first(blockIdx.x, threadIdx.x); i < per; i += geom::sumsq_step(blocks_per))
    s += static_cast<double>(xb[i]) * static_cast<double>(xb[i]);
  __shared__ double red[kThreads];
  red[threadIdx.x] = s;
  __syncthreads();
  for (int off = kThreads / 2; off > 0; off /= 2) {
    if (static_cast<int>(threadIdx.x) < off) red[threadIdx.x] += red[threadIdx.x + off];
    __syncthreads();
  }
  if (threadIdx.x == 0) partial[b * blocks_per + blockIdx.x] = red[0];
}

__global__ void norm_kernel(const double* partial, int64_t blocks_per, int64_t batch, float eps, float* denom) {
  const int64_t b = geom::grid_stride_first(blockIdx.x, blockDim.x, threadIdx.x);
  if (b >= batch) return;
  double s = 0.0;
  for (int64_t i = 0; i < blocks_per; ++i) s += partial[b * blocks_per + i];
  denom[b] = ns_denom(s, eps);  // the CPU's element function
}

// Distributed NS, one matrix: this rank's sum of squares as fp32 (the CPU's float(sum_sq)), summed over the TP
// group next, then max(sqrt(total), eps).
__global__ void total_kernel(const double* partial, int64_t blocks_per, float* total) {
  double s = 0.0;
  for (int64_t i = 0; i < blocks_per; ++i) s += partial[i];  // the blocks in order, as norm_kernel
  *total = static_cast<float>(s);
}
__global__ void denom_kernel(const float* total, float eps, float* denom) { *denom = ns_denom_f32(*total, eps); }
// The all-reduced fp32 Gram matrix rounded to bf16 (the CPU rounds it after the all-reduce).
__global__ void to_bf16_kernel(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = geom::grid_stride_first(blockIdx.x, blockDim.x, threadIdx.x); i < n;
       i += geom::grid_stride_step(gridDim.x, blockDim.x))
    y[i] = f32_to_bf16(x[i]);
}

// out[b] (m x n, T) = (transpose ? x[b]^T : x[b]) / denom[b]; x[b] is rows x cols.
template <class T>
__global__ void prepare_kernel(const float* x, T* out, int64_t rows, int64_t cols, bool transpose, const float* denom) {
  __shared__ float tile[geom::kTile][geom::kTile + 1];
  const int64_t b = blockIdx.z;
  const float* xb = x + b * rows * cols;
  T* ob = out + b * rows * cols;
  const float d = denom[b];
  // The tile of the *source* at (blockIdx.y*32, blockIdx.x*32).
  const int64_t r0 = geom::tile_origin(blockIdx.y), c0 = geom::tile_origin(blockIdx.x);
  for (int k = threadIdx.y; k < geom::kTile; k += blockDim.y) {
    int64_t r = r0 + k, c = c0 + threadIdx.x;
    if (r < rows && c < cols) tile[k][threadIdx.x] = ns_normalize_element(xb[r * cols + c], d);
  }
  __syncthreads();
  for (int k = threadIdx.y; k < geom::kTile; k += blockDim.y) {
    float v;
    int64_t idx;
    if (transpose) {  // out is cols x rows: out[c][r]
      int64_t c = c0 + k, r = r0 + threadIdx.x;
      if (c >= cols || r >= rows) continue;
      v = tile[threadIdx.x][k];
      idx = c * rows + r;
    } else {
      int64_t r = r0 + k, c = c0 + threadIdx.x;
      if (r >= rows || c >= cols) continue;
      v = tile[k][threadIdx.x];
      idx = r * cols + c;
    }
    if constexpr (sizeof(T) == 2) reinterpret_cast<uint16_t*>(ob)[idx] = f32_to_bf16(v);
    else ob[idx] = v;
  }
}

// out[b] (rows x cols fp32) = (transpose ? w[b]^T : w[b]) with w[b] m x n.
template <class T>
__global__ void finish_kernel(const T* w, float* out, int64_t rows, int64_t cols, bool transpose) {
  __shared__ float tile[geom::kTile][geom::kTile + 1];
  const int64_t b = blockIdx.z;
  const int64_t m = transpose ? cols : rows, n = transpose ? rows : cols;
  const T* wb = w + b * rows * cols;
  float* ob = out + b * rows * cols;
  const int64_t r0 = geom::tile_origin(blockIdx.y), c0 = geom::tile_origin(blockIdx.x);  // tile of w (m x n)
  for (int k = threadIdx.y; k < geom::kTile; k += blockDim.y) {
    int64_t r = r0 + k, c = c0 + threadIdx.x;
    if (r < m && c < n) {
      float v;
      if constexpr (sizeof(T) == 2) v = bf16_to_f32(reinterpret_cast<const uint16_t*>(wb)[r * n + c]);
      else v = wb[r * n + c];
      tile[k][threadIdx.x] = v;
    }
  }
  __syncthreads();
  for (int k = threadIdx.y; k < geom::kTile; k += blockDim.y) {
    if (transpose) {
      int64_t c = c0 + k, r = r0 + threadIdx.x;  // out[c][r] = w[r][c]
      if (c < n && r < m) ob[c * m + r] = tile[threadIdx.x][k];
    } else {
      int64_t r = r0 + k, c = c0 + threadIdx.x;
      if (r < m && c < n) ob[r * n + c] = tile[k][threadIdx.x];
    }
  }
}

struct GemmTypes {
  cudaDataType_t data;
  cublasComputeType_t compute;
  size_t elem;
};
GemmTypes gemm_types(MatmulPrecision p) {
  switch (p) {
    case MatmulPrecision::Medium: return {CUDA_R_16BF, CUBLAS_COMPUTE_32F, 2};
    case MatmulPrecision::High: return {CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32, 4};
    case MatmulPrecision::Highest: return {CUDA_R_32F, CUBLAS_COMPUTE_32F, 4};
  }
  return {CUDA_R_32F, CUBLAS_COMPUTE_32F, 4};
}

// Column-major strided-batched GEMM helper. C has the inputs' type unless `c_type` says otherwise (the
// distributed mode's Gram matrix: bf16 inputs, an fp32 C to all-reduce).
void gemm_cm(cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n, int64_t k, float alpha, const void* a,
             int64_t lda, int64_t sa, const void* b, int64_t ldb, int64_t sb, float beta, void* c, int64_t ldc,
             int64_t sc, int64_t batch, const GemmTypes& t, std::optional<cudaDataType_t> c_type = std::nullopt) {
  const char* what = "a Newton-Schulz GEMM's size";
  check(cublasGemmStridedBatchedEx(blas(), ta, tb, to_int32(m, what), to_int32(n, what), to_int32(k, what), &alpha, a,
                                   t.data, to_int32(lda, what), sa, b, t.data, to_int32(ldb, what), sb, &beta, c,
                                   c_type.value_or(t.data), to_int32(ldc, what), sc,
                                   to_int32(batch, "a Newton-Schulz batch"), t.compute, CUBLAS_GEMM_DEFAULT),
        "cublasGemmStridedBatchedEx");
}

// Newton-Schulz on `batch` rows x cols matrices. With `tp` (distributed mode, batch 1): x is this rank's shard,
// split along `pdim` of the whole matrix; the norm and every Gram matrix are summed over the TP group, as
// cpu::newton_schulz_distributed does (a shard split along rows is worked on transposed).
void ns_device(const float* x, float* out, int64_t batch, int64_t rows, int64_t cols, const NsOptions& o,
               TpGroup* tp = nullptr, int pdim = -1) {
  if (tp && (batch != 1 || (pdim != 0 && pdim != 1)))
    throw std::invalid_argument("distributed Newton-Schulz on the GPU: one matrix, partition_dim 0 or 1");
  // An empty matrix has nothing to orthogonalise (and no launch may have a zero-sized grid). TP shards of one
  // matrix have equal shapes, so every rank of the group returns here alike and no collective is left waiting.
  if (batch <= 0 || rows <= 0 || cols <= 0) return;
  const auto sched = ns_schedule(o.coefficients, o.steps);
  const bool transpose = tp ? pdim == 0 : rows > cols;
  const int64_t m = transpose ? cols : rows, n = transpose ? rows : cols, mn = m * n, mm = m * m;
  const GemmTypes t = gemm_types(o.precision);
  const int64_t blocks_per = geom::sumsq_blocks(mn);
  char* w = static_cast<char*>(scratch(Scratch::NsW, static_cast<size_t>(batch * mn) * t.elem));
  char* y = static_cast<char*>(scratch(Scratch::NsY, static_cast<size_t>(batch * mn) * t.elem));
  char* a = static_cast<char*>(scratch(Scratch::NsA, static_cast<size_t>(batch * mm) * t.elem));
  char* bm = static_cast<char*>(scratch(Scratch::NsB, static_cast<size_t>(batch * mm) * t.elem));
  auto* partial = static_cast<double*>(scratch(Scratch::NsPartial, static_cast<size_t>(batch * blocks_per) * sizeof(double)));
  auto* denom = static_cast<float*>(scratch(Scratch::NsDenom, static_cast<size_t>(batch) * sizeof(float)));
  sumsq_kernel<<<to_dim3(geom::sumsq_grid(mn, batch)), kThreads>>>(x, mn, blocks_per, partial);
  check_launch("NS sum of squares");
  if (tp) {
    auto* total = static_cast<float*>(scratch(Scratch::NsTotal, sizeof(float)));
    total_kernel<<<1, 1>>>(partial, blocks_per, total);
    check_launch("NS distributed sum of squares");
    tp->all_reduce_sum(total, 1);
    denom_kernel<<<1, 1>>>(total, o.eps, denom);
    check_launch("NS distributed norm");
  } else {
    norm_kernel<<<geom::blocks_per_item(batch), geom::kNormThreads>>>(partial, blocks_per, batch, o.eps, denom);
    check_launch("NS norm");
  }
  const dim3 tb(geom::kTile, geom::kTileRows), tg = to_dim3(geom::tile_grid(rows, cols, batch));
  if (t.elem == 2) prepare_kernel<uint16_t><<<tg, tb>>>(x, reinterpret_cast<uint16_t*>(w), rows, cols, transpose, denom);
  else prepare_kernel<float><<<tg, tb>>>(x, reinterpret_cast<float*>(w), rows, cols, transpose, denom);
  check_launch("NS prepare");
  // Row-major W (m x n) is the column-major n x m matrix Wc = W^T.
  //   A = W W^T      -> A = Wc^T Wc                    (symmetric: layouts agree)
  //   B = b A + c A A
  //   Y = a W + B W  -> Yc = a Wc + Wc B               (B symmetric)
  for (const NsCoeff& k : sched) {
    const float fa = static_cast<float>(k.a), fb = static_cast<float>(k.b), fc = static_cast<float>(k.c);
    if (!tp) {
      gemm_cm(CUBLAS_OP_T, CUBLAS_OP_N, m, m, n, 1.0f, w, n, mn, w, n, mn, 0.0f, a, m, mm, batch, t);
    } else if (t.elem == 4) {  // this rank's part of A, summed over the group
      gemm_cm(CUBLAS_OP_T, CUBLAS_OP_N, m, m, n, 1.0f, w, n, mn, w, n, mn, 0.0f, a, m, mm, 1, t);
      tp->all_reduce_sum(reinterpret_cast<float*>(a), mm);
    } else {  // bf16: the part in fp32, summed, then rounded to bf16
      auto* a32 = static_cast<float*>(scratch(Scratch::NsGram32, static_cast<size_t>(mm) * 4));
      gemm_cm(CUBLAS_OP_T, CUBLAS_OP_N, m, m, n, 1.0f, w, n, mn, w, n, mn, 0.0f, a32, m, mm, 1, t, CUDA_R_32F);
      tp->all_reduce_sum(a32, mm);
      to_bf16_kernel<<<grid_for(mm), kThreads>>>(a32, reinterpret_cast<uint16_t*>(a), mm);
      check_launch("NS Gram matrix to bf16");
    }
    check(cudaMemcpyAsync(y, w, static_cast<size_t>(batch * mn) * t.elem, cudaMemcpyDeviceToDevice), "NS copy");
    if (k.c != 0.0) {
      check(cudaMemcpyAsync(bm, a, static_cast<size_t>(batch * mm) * t.elem, cudaMemcpyDeviceToDevice), "NS copy");
      gemm_cm(CUBLAS_OP_N, CUBLAS_OP_N, m, m, m, fc, a, m, mm, a, m, mm, fb, bm, m, mm, batch, t);
      gemm_cm(CUBLAS_OP_N, CUBLAS_OP_N, n, m, m, 1.0f, w, n, mn, bm, m, mm, fa, y, n, mn, batch, t);
    } else {
      gemm_cm(CUBLAS_OP_N, CUBLAS_OP_N, n, m, m, fb, w, n, mn, a, m, mm, fa, y, n, mn, batch, t);
    }
    std::swap(w, y);
  }
  const dim3 fg = to_dim3(geom::tile_grid(m, n, batch));  // the tiles of the m x n iterate
  if (t.elem == 2) finish_kernel<uint16_t><<<fg, tb>>>(reinterpret_cast<const uint16_t*>(w), out, rows, cols, transpose);
  else finish_kernel<float><<<fg, tb>>>(reinterpret_cast<const float*>(w), out, rows, cols, transpose);
  check_launch("NS finish");
}

// ---- Muon elementwise ----------------------------------------------------------------------------------------

__global__ void muon_momentum_kernel(float* p, const float* g, float* m, float* u, int64_t n, MuonMomentumConsts c) {
  for (int64_t i = geom::grid_stride_first(blockIdx.x, blockDim.x, threadIdx.x); i < n;
       i += geom::grid_stride_step(gridDim.x, blockDim.x)) {
    float pi = p[i], mi = m[i];
    u[i] = muon_momentum_element(pi, g[i], mi, c);
    p[i] = pi;
    m[i] = mi;
  }
}
__global__ void muon_scale_kernel(float* x, int64_t n, float sf, float esf) {
  for (int64_t i = geom::grid_stride_first(blockIdx.x, blockDim.x, threadIdx.x); i < n;
       i += geom::grid_stride_step(gridDim.x, blockDim.x))
    x[i] = muon_scale_element(x[i], sf, esf);
}
// Adaptive Muon: the second moment over the (whole-matrix scaled) orthogonal update, then the shard-shape scale.
__global__ void adamuon_kernel(float* o, float* v, int64_t n, AdaMuonConsts c, float sf, float esf) {
  for (int64_t i = geom::grid_stride_first(blockIdx.x, blockDim.x, threadIdx.x); i < n;
       i += geom::grid_stride_step(gridDim.x, blockDim.x)) {
    float vi = v[i];
    o[i] = muon_scale_element(adamuon_element(o[i], vi, c), sf, esf);
    v[i] = vi;
  }
}
__global__ void muon_apply_kernel(float* p, const float* o, int64_t n, float neg_lr, uint16_t* lowp) {
  for (int64_t i = geom::grid_stride_first(blockIdx.x, blockDim.x, threadIdx.x); i < n;
       i += geom::grid_stride_step(gridDim.x, blockDim.x)) {
    float pi = p[i];
    muon_apply_element(pi, o[i], neg_lr);
    p[i] = pi;
    if (lowp) lowp[i] = f32_to_bf16(pi);
  }
}

}  // namespace

void newton_schulz(const float* x, float* out, int64_t rows, int64_t cols, const NsOptions& o) {
  ns_device(x, out, 1, rows, cols, o);
}

void newton_schulz_batched(const float* x, float* out, int64_t batch, int64_t rows, int64_t cols,
                           const NsOptions& o) {
  if (batch > 0) ns_device(x, out, batch, rows, cols, o);
}

void muon_step(std::span<const MuonParam> params, std::span<const GroupHyper> groups, const MuonOptions& o,
               TpGroup* tp) {
  check_muon_params(params, groups, o);
  // The jobs as on the CPU: up to ns_batch_size same-shape matrices share one strided-batched NS; a TP shard
  // (duplicated and distributed modes) is a job of its own, orthogonalised across the group.
  const std::vector<MuonJob> jobs = plan_muon_jobs(params, o, tp ? tp->size() : 1);
  const float esf = static_cast<float>(o.extra_scale_factor);
  // out = NS(x) * scale * extra for `batch` r x cc blocks; with pdim >= 0, this rank's shard of a matrix split
  // along pdim over the TP group (cpu::orthogonalize_block's two TP modes).
  auto orthogonalize = [&](const float* x, float* out, int64_t batch, int64_t r, int64_t cc, int pdim, int home) {
    int64_t size_out = r, size_in = cc;
    if (pdim < 0) {
      ns_device(x, out, batch, r, cc, o.ns);
    } else {
      const int64_t world = tp->size(), rank = tp->rank(), n = r * cc;
      (pdim == 0 ? size_out : size_in) *= world;
      if (o.tp_mode == MuonTpMode::Distributed) {
        ns_device(x, out, 1, r, cc, o.ns, tp, pdim);
      } else {  // duplicated: all-gather the shards, NS on the whole matrix, keep this rank's part
        // (layer-sharded: the shards gathered on the home rank, the NS there, its result scattered back)
        const bool sharded = o.tp_mode == MuonTpMode::LayerSharded;
        const bool ns_here = !sharded || rank == home;
        const size_t whole_bytes = ns_here ? static_cast<size_t>(n * world) * 4 : 0;  // none off the home
        auto* gathered = static_cast<float*>(scratch(Scratch::MuonTpGathered, whole_bytes));
        auto* whole = static_cast<float*>(scratch(Scratch::MuonTpWhole, whole_bytes));
        if (sharded) tp->gather(x, n, gathered, home);
        else tp->all_gather(x, n, gathered);
        if (pdim == 0) {  // the shards stacked by rows are the whole matrix already
          if (ns_here) ns_device(gathered, whole, 1, r * world, cc, o.ns);
          if (sharded)
            tp->scatter(whole, n, out, home);
          else
            check(cudaMemcpyAsync(out, whole + rank * n, static_cast<size_t>(n) * 4, cudaMemcpyDeviceToDevice),
                  "muon TP keep");
        } else {  // by columns: each shard is a column block of the whole matrix (launch_geometry.h)
          auto* orth = static_cast<float*>(scratch(Scratch::MuonTpWholeOrth, whole_bytes));
          auto assemble = [&](int64_t q) {  // gathered shard q into its column block of `whole`
            const geom::ColumnBlockCopy c = geom::column_block_copy(r, cc, world, q);
            check(cudaMemcpy2DAsync(whole + c.full_offset, c.full_pitch, gathered + c.shard_offset, c.shard_pitch,
                                    c.width, c.rows, cudaMemcpyDeviceToDevice),
                  "muon TP assemble");
          };
          auto cut = [&](float* dst, int64_t q) {  // column block q of `orth` into a shard
            const geom::ColumnBlockCopy c = geom::column_block_copy(r, cc, world, q);
            check(cudaMemcpy2DAsync(dst, c.shard_pitch, orth + c.full_offset, c.full_pitch, c.width, c.rows,
                                    cudaMemcpyDeviceToDevice),
                  "muon TP keep");
          };
          if (ns_here) {
            for (int64_t q = 0; q < world; ++q) assemble(q);
            ns_device(whole, orth, 1, r, cc * world, o.ns);
          }
          if (sharded) {  // the home cuts the result back into shards, in the gathered layout, and scatters them
            for (int64_t q = 0; ns_here && q < world; ++q) cut(gathered + q * n, q);
            tp->scatter(gathered, n, out, home);
          } else {
            cut(out, rank);
          }
        }
      }
    }
    const float sf = static_cast<float>(muon_scale_factor(size_out, size_in, o.scale_mode));
    muon_scale_kernel<<<grid_for(batch * r * cc), kThreads>>>(out, batch * r * cc, sf, esf);
    check_launch("muon scale");
  };
  for (const MuonJob& job : jobs) {
    const MuonParam& first = params[job.members.front()];
    const int64_t n = job.rows * job.cols, nb = n * static_cast<int64_t>(job.members.size());
    auto* u = static_cast<float*>(scratch(Scratch::MuonUpdate, static_cast<size_t>(nb) * 4));
    auto* orth = static_cast<float*>(scratch(Scratch::MuonOrth, static_cast<size_t>(nb) * 4));
    for (size_t j = 0; j < job.members.size(); ++j) {
      const MuonParam& p = params[job.members[j]];
      const MuonMomentumConsts c = muon_momentum_consts(o, groups[static_cast<size_t>(p.group)]);
      muon_momentum_kernel<<<grid_for(n), kThreads>>>(p.param, p.grad, p.momentum_buffer, u + static_cast<int64_t>(j) * n, n, c);
      check_launch("muon momentum");
    }
    if (job.split_qkv) {
      const std::vector<int64_t>& shapes = first.qkv_split_shapes.empty() ? o.qkv_split_shapes : first.qkv_split_shapes;
      if (shapes.empty()) throw std::runtime_error("Muon QKV split requested but qkv_split_shapes is not set");
      const int64_t total = std::accumulate(shapes.begin(), shapes.end(), int64_t{0});
      if (total <= 0 || first.rows % total != 0) throw std::runtime_error("Muon QKV split shape mismatch");
      const int64_t ng = first.rows / total;
      auto* bin = static_cast<float*>(scratch(Scratch::MuonQkvIn, static_cast<size_t>(n) * 4));
      auto* bout = static_cast<float*>(scratch(Scratch::MuonQkvOut, static_cast<size_t>(n) * 4));
      int64_t off = 0;
      for (int64_t s : shapes) {
        // The rows of this part in every query group, stacked: one 2-D strided copy each way.
        const geom::PartCopy c = geom::qkv_part_copy(first.cols, total, s, off, ng);
        check(cudaMemcpy2DAsync(bin, c.width, u + c.src_offset, c.pitch, c.width, c.rows, cudaMemcpyDeviceToDevice),
              "qkv gather");
        orthogonalize(bin, bout, 1, ng * s, first.cols, job.partition_dim, job.home);
        check(cudaMemcpy2DAsync(orth + c.src_offset, c.pitch, bout, c.width, c.width, c.rows, cudaMemcpyDeviceToDevice),
              "qkv scatter");
        off += s;
      }
    } else {
      orthogonalize(u, orth, static_cast<int64_t>(job.members.size()), job.rows, job.cols, job.partition_dim, job.home);
    }
    for (size_t j = 0; j < job.members.size(); ++j) {
      const MuonParam& p = params[job.members[j]];
      if (o.adaptive.method == Moment2Method::AdaMuon) {
        const float sf = static_cast<float>(muon_scale_factor(p.rows, p.cols, o.scale_mode));
        adamuon_kernel<<<grid_for(n), kThreads>>>(orth + static_cast<int64_t>(j) * n, p.moment2_buffer, n,
                                                  adamuon_consts(o.adaptive), sf, esf);
        check_launch("adaptive muon moment2");
      }
      muon_apply_kernel<<<grid_for(n), kThreads>>>(p.param, orth + static_cast<int64_t>(j) * n, n,
                                              static_cast<float>(-groups[static_cast<size_t>(p.group)].lr), p.param_bf16);
      check_launch("muon apply");
    }
  }
}

void gemm(int64_t m, int64_t n, int64_t k, const void* a, const void* b, void* c, MatmulPrecision precision) {
  // Row-major C = A B is column-major C^T = B^T A^T.
  gemm_cm(CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, 1.0f, b, n, 0, a, k, 0, 0.0f, c, n, 0, 1, gemm_types(precision));
}

}  // namespace mr::optim::gpu
