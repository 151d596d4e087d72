// --embedding-min-norm's loop side (run/embedding_norm.h): which rows, their norms over the shard group, their
// factors; the element work is the backend's (run/backend.h).
#include "run/embedding_norm.h"

#include <cmath>
#include <stdexcept>

#include "run/abs_max.h"
#include "run/host_collectives.h"

namespace mr::run {

bool is_input_embedding(const ParamSpec& p) { return p.key == "embedding.word_embeddings.weight"; }

std::vector<double> row_scales(const std::vector<uint32_t>& max_bits) {
  std::vector<double> s(max_bits.size(), 0.0);
  for (size_t r = 0; r < s.size(); ++r) {
    const float m = abs_of_bits(max_bits[r]);
    // A row's own exponent (run/exact_stats.h: its terms below 2^62), so a small row keeps its precision; 0 marks
    // an all-zero row or one with an inf/NaN, left unchanged.
    if (m > 0.0f && std::isfinite(m)) s[r] = std::ldexp(1.0, fixed_exponent(m));
  }
  return s;
}

std::vector<float> row_factors(const std::vector<Fixed>& sums, const std::vector<double>& scales, double min_norm) {
  std::vector<float> f(sums.size(), 1.0f);
  for (size_t r = 0; r < f.size(); ++r)
    if (scales[r] > 0) f[r] = row_factor(std::sqrt(static_cast<double>(sums[r]) / scales[r]), min_norm);
  return f;
}

void apply_embedding_min_norm(RunContext& c) {
  if (!c.cfg.embedding_min_norm) return;
  const double min_norm = *c.cfg.embedding_min_norm;
  const FlatBuffers& b = c.buf;
  Backend& dev = *c.backend;
  const BufferPtrs d = dev.ptrs();
  RowStore store = RowStore::Model;
  if (d.main) {
    if (b.main_storage == MainStorage::F16)  // refused before the run (run/run_support.h)
      throw std::logic_error("--embedding-min-norm: fp16 main params have no fp32 master to rescale");
    store = b.main_storage == MainStorage::Remainder ? RowStore::Remainder : RowStore::Master;
  } else if (b.model_dtype != optim::DType::F32) {
    throw std::logic_error("--embedding-min-norm: 16-bit params without main params");
  }
  for (size_t k = 0; k < c.plan.params.size(); ++k) {
    const ParamSpec& p = c.plan.params[k];
    if (!is_input_embedding(p) || p.shape.size() != 2) continue;
    const int64_t rows = p.shape[0], width = p.shape[1];
    std::vector<RowPiece> pieces;
    b.pieces_of(k, p.numel(), [&](size_t, int64_t lo, int64_t hi) {
      RowPiece s;
      s.model = d.model;
      s.model_dtype = b.model_dtype;
      s.main = store == RowStore::Model ? nullptr : b.main_at(d.main, lo);
      s.store = store;
      s.row0 = b.offset[k];
      s.begin = lo;
      s.end = hi;
      s.width = width;
      pieces.push_back(s);
    });
    // Every rank of the shard group takes part in the reductions, with or without pieces of this matrix.
    const bool across = c.dist_opt;
    std::vector<uint32_t> max_bits(static_cast<size_t>(rows), 0);
    for (const RowPiece& s : pieces) dev.row_max_bits(s, max_bits.data() + s.first_row());
    if (across) {  // as doubles (exact below 2^53): the larger bits are the larger |x|, NaN above all
      std::vector<double> v(max_bits.begin(), max_bits.end());
      host_all_reduce(c.dp, distributed::Buffer::cpu(v.data(), v.size()), distributed::ReduceOp::Max);
      for (size_t r = 0; r < v.size(); ++r) max_bits[r] = static_cast<uint32_t>(v[r]);
    }
    const std::vector<double> scales = row_scales(max_bits);
    std::vector<Fixed> sums(static_cast<size_t>(rows), 0);
    for (const RowPiece& s : pieces) dev.row_sum_squares(s, scales.data() + s.first_row(), sums.data() + s.first_row());
    if (across) all_reduce_sums(c.dp, sums);
    const std::vector<float> factors = row_factors(sums, scales, min_norm);
    for (const RowPiece& s : pieces) dev.scale_rows(s, factors.data() + s.first_row());
  }
}

}  // namespace mr::run
