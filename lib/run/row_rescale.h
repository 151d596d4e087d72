// --embedding-min-norm's arithmetic (Megatron's OptimizerConfig.embedding_min_norm): after the optimizer step,
// each row of the input word embeddings whose L2 norm is nonzero and below the threshold is multiplied by
// 2 * threshold / norm; zero rows (no direction to rescale along) and rows at or above the threshold are left as
// they are. One place for the per-element math, shared by the CPU loop (run/backend_cpu.cpp) and the CUDA kernels
// (run/cuda_ops.cu); the loop side (the row norms over the shard group, the rows' factors) is run/embedding_norm.h.
// No CUDA header needed. Internal to lib/run.
//
// The rule works on the fp32 values the optimizer keeps as its master copy: the main params (an fp32 master, or
// Transformer Engine's bf16 + 16-bit remainder pair, which is the fp32 master's exact bits), or the model itself in
// fp32 training (no main params). The model param is then what the optimizer's step stores from the master (one
// rounding to the model dtype), so the two stay as a step leaves them.
#pragma once

#include <cmath>
#include <cstdint>

#include "optim/dtype.h"
#include "run/fixed_point.h"

namespace mr::run {

// Where a row's fp32 values live.
enum class RowStore : uint8_t {
  Model,      // the model buffer is fp32 and is the master (no main params)
  Master,     // an fp32 main param per element; the model param is its rounding to the model dtype
  Remainder,  // bf16 model param + 16-bit remainder (optim::split_remainder): together the fp32 master's bits
};

// A piece [begin, end) (model-buffer element indices) of this rank's shard of a matrix whose rows of `width`
// elements start at model element `row0`: the piece may start or end inside a row (the distributed optimizer's
// shard boundaries fall anywhere). `main` is the main param of element `begin` (null for RowStore::Model).
struct RowPiece {
  void* model = nullptr;
  optim::DType model_dtype = optim::DType::F32;
  void* main = nullptr;
  RowStore store = RowStore::Model;
  int64_t row0 = 0, begin = 0, end = 0, width = 1;

  // The matrix row of element i, the first row the piece touches and how many it touches.
  MR_HD int64_t row_of(int64_t i) const { return (i - row0) / width; }
  MR_HD int64_t first_row() const { return row_of(begin); }
  MR_HD int64_t rows() const { return end > begin ? row_of(end - 1) - first_row() + 1 : 0; }
  // The part of matrix row r inside the piece: [row_begin(r), row_end(r)).
  MR_HD int64_t row_begin(int64_t r) const { return row0 + r * width > begin ? row0 + r * width : begin; }
  MR_HD int64_t row_end(int64_t r) const { return row0 + (r + 1) * width < end ? row0 + (r + 1) * width : end; }

  // Element i's fp32 master value (exact).
  MR_HD float load(int64_t i) const {
    switch (store) {
      case RowStore::Model: return optim::load_element(model, model_dtype, i);
      case RowStore::Master: return static_cast<const float*>(main)[i - begin];
      case RowStore::Remainder:
        return optim::join_remainder(static_cast<const uint16_t*>(model)[i], static_cast<const uint16_t*>(main)[i - begin]);
    }
    return 0.0f;
  }
  // Element i times the row's factor: one fp32 rounding of the master (x * factor, as torch's in-place mul_ of
  // fp32 rows by an fp32 factor), then the model param from it as the optimizer stores one (round to nearest even
  // to bf16/fp16; the remainder split for TE's pair).
  MR_HD void scale(int64_t i, float factor) const {
    const float x = load(i) * factor;
    switch (store) {
      case RowStore::Model: optim::store_element(model, model_dtype, i, x); break;
      case RowStore::Master:
        static_cast<float*>(main)[i - begin] = x;
        optim::store_element(model, model_dtype, i, x);
        break;
      case RowStore::Remainder:
        optim::split_remainder(x, static_cast<uint16_t*>(model)[i], static_cast<uint16_t*>(main)[i - begin]);
        break;
    }
  }
};

// One element's term of its row's exact sum of squares (run/exact_stats.h) at the row's scale 2^E; scale 0 marks a
// row that is not summed (all zero, or holding an inf/NaN: left unchanged), whose terms are 0.
MR_HD int64_t row_square_term(float x, double scale) { return scale > 0 ? fixed_square_bits(x, scale) : 0; }

// The factor of a row from its norm (the exact sum of squares' square root, the same bits under every layout):
// 2 * min_norm / norm, rounded once to fp32, for a nonzero norm below min_norm; 1 (unchanged) otherwise, a NaN or
// inf norm included.
inline float row_factor(double norm, double min_norm) {
  if (!(norm > 0.0) || !(norm < min_norm)) return 1.0f;
  return static_cast<float>(2.0 * min_norm / norm);
}

}  // namespace mr::run
