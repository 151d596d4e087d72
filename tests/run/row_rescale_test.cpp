// --embedding-min-norm's row arithmetic (run/row_rescale.h) through the CPU backend's row passes and the loop's
// factors (run/embedding_norm.h): rows below, at and above the threshold, a zero row, a row with an inf, rows cut by
// a shard boundary, and each kind of master storage.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <vector>

#include "optim/dtype.h"
#include "run/backend.h"
#include "run/embedding_norm.h"
#include "run/row_rescale.h"

using namespace mr::run;

namespace {

// The whole host pipeline over `pieces` of one matrix (as apply_embedding_min_norm runs it, with the pieces'
// partial results combined as the shard group's reductions would): maxima, scales, sums, factors, rescale.
std::vector<float> rescale(Backend& dev, const std::vector<RowPiece>& pieces, int64_t rows, double min_norm) {
  std::vector<uint32_t> max_bits(static_cast<size_t>(rows), 0);
  for (const RowPiece& s : pieces) dev.row_max_bits(s, max_bits.data() + s.first_row());
  const std::vector<double> scales = row_scales(max_bits);
  std::vector<Fixed> sums(static_cast<size_t>(rows), 0);
  for (const RowPiece& s : pieces) dev.row_sum_squares(s, scales.data() + s.first_row(), sums.data() + s.first_row());
  const std::vector<float> f = row_factors(sums, scales, min_norm);
  for (const RowPiece& s : pieces) dev.scale_rows(s, f.data() + s.first_row());
  return f;
}

RowPiece piece(float* x, int64_t row0, int64_t begin, int64_t end, int64_t width) {
  RowPiece p;
  p.model = x;
  p.row0 = row0;
  p.begin = begin;
  p.end = end;
  p.width = width;
  return p;
}

double norm(const float* row, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(row[i]) * row[i];
  return std::sqrt(s);
}

}  // namespace

TEST_CASE("row_factor: 2 x min / norm below the threshold, 1 at or above it, for zero and non-finite norms",
          "[run][embedding-norm]") {
  CHECK(row_factor(0.25, 1.0) == 8.0f);
  CHECK(row_factor(0.5, 2.0) == 8.0f);
  CHECK(row_factor(1.0, 1.0) == 1.0f);  // at the threshold: unchanged
  CHECK(row_factor(3.0, 1.0) == 1.0f);
  CHECK(row_factor(0.0, 1.0) == 1.0f);  // an exact-zero row has no direction
  CHECK(row_factor(INFINITY, 1.0) == 1.0f);
  CHECK(row_factor(std::nan(""), 1.0) == 1.0f);
  CHECK(row_factor(0.3, 1.0) == static_cast<float>(2.0 / 0.3));  // one rounding to fp32
}

TEST_CASE("rows below the threshold end at twice it; at, above, zero and non-finite rows are unchanged; a row cut "
          "by a shard boundary gives the same bits",
          "[run][embedding-norm]") {
  const int64_t w = 4, rows = 6, off = 3;  // the matrix starts at model element 3 (after another parameter)
  std::vector<float> m(static_cast<size_t>(off + rows * w), 7.0f);
  float* x = m.data() + off;
  const float init[rows][w] = {
      {0.1f, -0.2f, 0.05f, 0.0f},   // norm 0.229: below 1
      {0.0f, -1.0f, 0.0f, 0.0f},    // norm 1 exactly: at the threshold
      {3.0f, -4.0f, 0.0f, 0.0f},    // norm 5: above
      {0.0f, -0.0f, 0.0f, 0.0f},    // zero: unchanged
      {1e-30f, 0.0f, 0.0f, 2e-30f}, // tiny but nonzero: below (its own exponent keeps it)
      {INFINITY, 0.1f, 0.0f, 0.0f}, // non-finite: unchanged
  };
  std::memcpy(x, init, sizeof init);
  const std::vector<float> before = m;
  auto dev = make_cpu_backend();
  const std::vector<float> f = rescale(*dev, {piece(m.data(), off, off, off + rows * w, w)}, rows, 1.0);
  CHECK(f[0] != 1.0f);
  CHECK(f[1] == 1.0f);
  CHECK(f[2] == 1.0f);
  CHECK(f[3] == 1.0f);
  CHECK(f[4] != 1.0f);
  CHECK(f[5] == 1.0f);
  for (int64_t r : {0, 4}) {
    INFO("row " << r);
    CHECK(norm(x + r * w, w) == Approx(2.0).epsilon(1e-6));
    for (int64_t j = 0; j < w; ++j) CHECK(x[r * w + j] == init[r][j] * f[static_cast<size_t>(r)]);  // one fp32 product
  }
  for (int64_t r : {1, 2, 3, 5})
    CHECK(std::memcmp(x + r * w, before.data() + off + r * w, sizeof(float) * w) == 0);
  CHECK(m[0] == 7.0f);  // outside the matrix: untouched
  CHECK(m[2] == 7.0f);

  // The same matrix cut at elements 5 and 14 of the buffer (inside rows 0 and 2), partial results combined: the same bits.
  std::vector<float> cut(before);
  const std::vector<float> g = rescale(*dev,
                                       {piece(cut.data(), off, off, 5, w), piece(cut.data(), off, 5, 14, w),
                                        piece(cut.data(), off, 14, off + rows * w, w)},
                                       rows, 1.0);
  CHECK(g == f);
  CHECK(std::memcmp(cut.data(), m.data(), sizeof(float) * m.size()) == 0);
  // A piece knows the rows it touches.
  CHECK(piece(cut.data(), off, 5, 14, w).first_row() == 0);
  CHECK(piece(cut.data(), off, 5, 14, w).rows() == 3);
  CHECK(piece(cut.data(), off, 14, 27, w).first_row() == 2);
  CHECK(piece(cut.data(), off, 14, 27, w).rows() == 4);
}

TEST_CASE("the masters are rescaled and the model params stored from them: fp32 master + bf16, remainders",
          "[run][embedding-norm]") {
  using mr::optim::DType;
  const int64_t w = 3, rows = 2;
  const float init[rows * w] = {0.1f, 0.2f, -0.3f, 2.0f, 1.0f, 0.5f};  // norms 0.374 (below 1), 2.29 (above)
  auto dev = make_cpu_backend();
  // An fp32 master beside bf16 model params.
  std::vector<float> master(init, init + rows * w);
  std::vector<uint16_t> model(rows * w);
  for (size_t i = 0; i < model.size(); ++i) model[i] = mr::optim::f32_to_bf16(master[i]);
  RowPiece p;
  p.model = model.data();
  p.model_dtype = DType::BF16;
  p.main = master.data();
  p.store = RowStore::Master;
  p.end = rows * w;
  p.width = w;
  const std::vector<float> f = rescale(*dev, {p}, rows, 1.0);
  CHECK(f[1] == 1.0f);
  CHECK(norm(master.data(), w) == Approx(2.0).epsilon(1e-6));
  for (size_t i = 0; i < model.size(); ++i) {
    CHECK(master[i] == init[i] * f[i / w]);
    CHECK(model[i] == mr::optim::f32_to_bf16(master[i]));
  }
  // Transformer Engine's pair: bf16 param + remainder are the fp32 master's bits before and after.
  std::vector<uint16_t> param(rows * w), rem(rows * w);
  for (size_t i = 0; i < param.size(); ++i) mr::optim::split_remainder(init[i], param[i], rem[i]);
  RowPiece q = p;
  q.model = param.data();
  q.main = rem.data();
  q.store = RowStore::Remainder;
  CHECK(rescale(*dev, {q}, rows, 1.0) == f);
  for (size_t i = 0; i < param.size(); ++i) CHECK(mr::optim::join_remainder(param[i], rem[i]) == master[i]);
}
