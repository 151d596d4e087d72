// Gradient norm, clipping and zero count (lib/optim/clip_grads.h) against torch::nn::utils::clip_grad_norm_ and
// spelled-out LibTorch arithmetic: fp32 / bf16 / fp16 gradients, norm 2 and inf, the cross-rank reduce callback,
// the duplicate flag, zero and non-finite gradients, and thread-count independence.
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "optim/clip_grads.h"
#include "optim/torch_adapter.h"
#include "optim_test_util.h"

using namespace mr::optim;
using mr::optim::test::agreement;
using mr::optim::test::bit_equal;

namespace {

const std::vector<int64_t> kClipSizes = {1, 3, 1000, 65537};
constexpr double kInf = std::numeric_limits<double>::infinity();

// Random gradients of the given sizes, each tensor with its own magnitude.
std::vector<torch::Tensor> random_grads(const std::vector<int64_t>& sizes, torch::ScalarType dtype) {
  std::vector<torch::Tensor> g;
  double mag = 0.01;
  for (int64_t n : sizes) {
    g.push_back((torch::randn({n}) * mag).to(dtype));
    mag *= 7.0;
  }
  return g;
}

std::vector<torch::Tensor> clones(const std::vector<torch::Tensor>& v) {
  std::vector<torch::Tensor> c;
  for (const auto& t : v) c.push_back(t.clone());
  return c;
}

std::vector<ClipSlot> slots_of(std::vector<torch::Tensor>& v, bool counted = true) {
  std::vector<ClipSlot> s;
  for (auto& t : v) s.push_back(ClipSlot{make_grad_slot(t), counted});
  return s;
}

// torch::nn::utils::clip_grad_norm_ on fp32 copies of `grads` (as parameters' .grad); returns its total norm and
// leaves the clipped gradients in `out`.
double torch_clip(const std::vector<torch::Tensor>& grads, double max_norm, double norm_type,
                  std::vector<torch::Tensor>& out) {
  std::vector<torch::Tensor> params;
  for (const auto& g : grads) {
    auto p = torch::zeros({g.numel()}, torch::requires_grad());
    p.mutable_grad() = g.to(torch::kFloat).clone();
    params.push_back(p);
  }
  double n = torch::nn::utils::clip_grad_norm_(params, max_norm, norm_type);
  out.clear();
  for (auto& p : params) out.push_back(p.grad().clone());
  return n;
}

// The exact norm in double (for checking our double accumulation more tightly than torch's fp32 allows).
double exact_norm(const std::vector<torch::Tensor>& grads, double norm_type) {
  if (norm_type == kInf) {
    double m = 0.0;
    for (const auto& g : grads) m = std::max(m, g.to(torch::kDouble).abs().max().item<double>());
    return m;
  }
  double s = 0.0;
  for (const auto& g : grads) s += g.to(torch::kDouble).pow(2).sum().item<double>();
  return std::sqrt(s);
}

// Bit-equal element by element, except that any two NaNs match (NaN sign and payload are not part of the
// contract: LibTorch's vectorised bf16 conversion keeps a NaN's sign, ours gives 0x7FC0 as c10's scalar one does).
bool equal_or_both_nan(const torch::Tensor& a_, const torch::Tensor& b_) {
  auto a = a_.to(torch::kFloat).contiguous(), b = b_.to(torch::kFloat).contiguous();
  if (a.numel() != b.numel()) return false;
  const float *pa = a.data_ptr<float>(), *pb = b.data_ptr<float>();
  for (int64_t i = 0; i < a.numel(); ++i)
    if (!(std::isnan(pa[i]) && std::isnan(pb[i])) && std::memcmp(pa + i, pb + i, 4) != 0) return false;
  return true;
}

bool same_double(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// A reduce callback that records what it was asked and leaves the values alone (one rank's local partial).
struct Recorder {
  int calls = 0;
  ReduceOp op = ReduceOp::Sum;
  double value = 0.0;
  ReduceFn fn() {
    return [this](std::span<double> v, ReduceOp o) {
      ++calls;
      op = o;
      REQUIRE(v.size() == 1);
      value = v[0];
    };
  }
};

}  // namespace

TEST_CASE("grad norm and clip against torch::nn::utils::clip_grad_norm_", "[optim][clip]") {
  torch::manual_seed(20261201);
  for (auto dtype : {torch::kFloat, torch::kBFloat16}) {
    for (double norm_type : {2.0, kInf}) {
      auto grads = random_grads(kClipSizes, dtype);
      const double exact = exact_norm(grads, norm_type);
      for (double ratio : {0.25, 4.0}) {  // max_norm below the norm (clips) and above it (no scaling)
        DYNAMIC_SECTION(c10::toString(dtype) << " norm " << norm_type << " max_norm/norm " << ratio) {
          const double max_norm = exact * ratio;
          std::vector<torch::Tensor> theirs;
          const double torch_norm = torch_clip(grads, max_norm, norm_type, theirs);
          auto ours = clones(grads);
          auto slots = slots_of(ours);
          const double norm = cpu::clip_grad_norm(slots, max_norm, norm_type);
          if (norm_type == kInf) {
            REQUIRE(norm == exact);  // max |g| is exact in every dtype
            REQUIRE(norm == torch_norm);
          } else {
            REQUIRE(norm == Approx(exact).epsilon(1e-12));
            REQUIRE(norm == Approx(torch_norm).epsilon(1e-5));  // torch sums in fp32
          }
          const double coeff = clip_coefficient(max_norm, norm);
          for (size_t i = 0; i < grads.size(); ++i) {
            if (coeff >= 1.0) {
              REQUIRE(bit_equal(ours[i], grads[i]));  // untouched
              REQUIRE(bit_equal(theirs[i], grads[i].to(torch::kFloat)));
              continue;
            }
            // Ours: the gradient times fp32(coeff), rounded back to the grad dtype.
            auto expect = (grads[i].to(torch::kFloat) * static_cast<float>(coeff)).to(dtype);
            REQUIRE(bit_equal(ours[i], expect));
            // torch's coefficient is formed in fp32 from its fp32 norm: a rounding apart at most.
            auto a = agreement(ours[i].to(torch::kFloat), theirs[i].to(dtype).to(torch::kFloat), 1e-30);
            INFO("tensor " << i << ": bit-equal " << a.bit_equal << "/" << a.n << ", max rel " << a.max_rel);
            REQUIRE(a.max_rel <= (dtype == torch::kFloat ? 1e-5 : 1.0 / 128));
          }
        }
      }
    }
  }
}

TEST_CASE("clip: fp16 gradients and the unscaled norm", "[optim][clip]") {
  torch::manual_seed(5);
  auto g16 = random_grads(kClipSizes, torch::kHalf);
  auto slots = slots_of(g16);
  REQUIRE(cpu::grad_norm(slots, 2.0) == Approx(exact_norm(g16, 2.0)).epsilon(1e-12));
  REQUIRE(cpu::grad_norm(slots, kInf) == exact_norm(g16, kInf));
  auto before = clones(g16);
  const float c = cpu::clip_grads_by_total_norm(slots, 1.0, 10.0 * cpu::grad_norm(slots, 2.0));
  REQUIRE(c < 0.11f);
  for (size_t i = 0; i < g16.size(); ++i) REQUIRE(bit_equal(g16[i], (before[i].to(torch::kFloat) * c).to(torch::kHalf)));

  // With inv_scale the norm is the norm of the unscaled gradients, bit-equal to unscaling in place first.
  auto scaled = random_grads(kClipSizes, torch::kFloat);
  for (auto& t : scaled) t.mul_(65536.0f);
  auto s_slots = slots_of(scaled);
  const float inv = 1.0f / 65536.0f;
  const double n2 = cpu::grad_norm(s_slots, 2.0, {}, inv), ninf = cpu::grad_norm(s_slots, kInf, {}, inv);
  auto unscaled = clones(scaled);
  for (auto& t : unscaled) t.mul_(inv);
  auto u_slots = slots_of(unscaled);
  REQUIRE(same_double(n2, cpu::grad_norm(u_slots, 2.0)));
  REQUIRE(same_double(ninf, cpu::grad_norm(u_slots, kInf)));

  REQUIRE_THROWS_AS(cpu::grad_norm(slots, 1.0), std::invalid_argument);
  REQUIRE(clip_factor(1.0, 0.5) == 1.0f);
  REQUIRE(clip_factor(1.0, 4.0) == static_cast<float>(1.0 / (4.0 + 1e-6)));
}

TEST_CASE("clip: the reduce callback combines two ranks' partial results", "[optim][clip]") {
  torch::manual_seed(11);
  for (auto dtype : {torch::kFloat, torch::kBFloat16}) {
    for (double norm_type : {2.0, kInf}) {
      DYNAMIC_SECTION(c10::toString(dtype) << " norm " << norm_type) {
        auto a = random_grads({1000, 3, 65537}, dtype);
        auto b = random_grads({1, 65537, 17}, dtype);
        std::vector<torch::Tensor> all = a;
        all.insert(all.end(), b.begin(), b.end());
        const double max_norm = 0.3 * exact_norm(all, norm_type);
        std::vector<torch::Tensor> theirs;
        const double torch_norm = torch_clip(all, max_norm, norm_type, theirs);

        // "Rank 1": its local partial, as the collective would see it.
        auto b_slots = slots_of(b);
        Recorder rank1;
        cpu::grad_norm(b_slots, norm_type, rank1.fn());
        REQUIRE(rank1.calls == 1);
        REQUIRE(rank1.op == (norm_type == kInf ? ReduceOp::Max : ReduceOp::Sum));

        // "Rank 0": the callback adds rank 1's partial (Sum) or takes the larger (Max).
        int calls = 0;
        ReduceFn all_reduce = [&](std::span<double> v, ReduceOp op) {
          ++calls;
          REQUIRE(v.size() == 1);
          v[0] = op == ReduceOp::Sum ? v[0] + rank1.value : std::max(v[0], rank1.value);
        };
        auto a_ours = clones(a);
        auto a_slots = slots_of(a_ours);
        const double norm = cpu::clip_grad_norm(a_slots, max_norm, norm_type, all_reduce);
        REQUIRE(calls == 1);
        if (norm_type == kInf) {
          REQUIRE(norm == torch_norm);
        } else {
          REQUIRE(norm == Approx(exact_norm(all, 2.0)).epsilon(1e-12));
          REQUIRE(norm == Approx(torch_norm).epsilon(1e-5));
        }
        // Rank 0's gradients are clipped with the global norm.
        const float c = static_cast<float>(clip_coefficient(max_norm, norm));
        for (size_t i = 0; i < a.size(); ++i) {
          REQUIRE(bit_equal(a_ours[i], (a[i].to(torch::kFloat) * c).to(dtype)));
          auto ag = agreement(a_ours[i].to(torch::kFloat), theirs[i].to(dtype).to(torch::kFloat), 1e-30);
          REQUIRE(ag.max_rel <= (dtype == torch::kFloat ? 1e-5 : 1.0 / 128));
        }
        // Without a callback the norm is rank 0's alone.
        auto a_again = clones(a);
        auto a_slots2 = slots_of(a_again);
        REQUIRE(cpu::grad_norm(a_slots2, norm_type) == Approx(exact_norm(a, norm_type)).epsilon(1e-12));
      }
    }
  }
  // The zero count is summed over the ranks; an empty rank still takes part in the collective.
  auto z = torch::zeros({10});
  std::vector<torch::Tensor> one = {z};
  auto z_slots = slots_of(one);
  int calls = 0;
  ReduceFn add7 = [&](std::span<double> v, ReduceOp op) {
    ++calls;
    REQUIRE(op == ReduceOp::Sum);
    v[0] += 7.0;
  };
  REQUIRE(cpu::count_zeros(z_slots, add7) == 17.0);
  std::vector<ClipSlot> none;
  REQUIRE(cpu::count_zeros(none, add7) == 7.0);
  REQUIRE(cpu::grad_norm(none, 2.0, add7) == std::sqrt(7.0));
  REQUIRE(cpu::grad_norm(none, 2.0) == 0.0);
  REQUIRE(cpu::grad_norm(none, kInf) == 0.0);
  REQUIRE(calls == 3);
}

TEST_CASE("clip: duplicated parameters are left out of the norm and the zero count, but clipped", "[optim][clip]") {
  torch::manual_seed(13);
  auto grads = random_grads(kClipSizes, torch::kFloat);
  auto dup = random_grads({1000, 65537}, torch::kFloat);  // TP duplicates / shared copies
  dup[0].index_put_({torch::indexing::Slice(0, 100)}, 0.0f);
  std::vector<torch::Tensor> ours = clones(grads), ours_dup = clones(dup);
  std::vector<ClipSlot> slots = slots_of(ours);
  for (auto& s : slots_of(ours_dup, false)) slots.push_back(s);
  for (double norm_type : {2.0, kInf}) REQUIRE(cpu::grad_norm(slots, norm_type) == Approx(exact_norm(grads, norm_type)).epsilon(1e-12));
  REQUIRE(cpu::count_zeros(slots) == 0.0);  // the zeros are in a duplicate only

  const double norm = exact_norm(grads, 2.0);
  const double total = cpu::clip_grad_norm(slots, 0.5 * norm);
  const float c = static_cast<float>(clip_coefficient(0.5 * norm, total));
  for (size_t i = 0; i < grads.size(); ++i) REQUIRE(bit_equal(ours[i], grads[i] * c));
  for (size_t i = 0; i < dup.size(); ++i) REQUIRE(bit_equal(ours_dup[i], dup[i] * c));

  // max_norm <= 0: the norm only, no clip (Megatron clips only when clip_grad > 0).
  auto again = clones(grads);
  auto s2 = slots_of(again);
  REQUIRE(cpu::clip_grad_norm(s2, 0.0) == Approx(norm).epsilon(1e-12));
  for (size_t i = 0; i < grads.size(); ++i) REQUIRE(bit_equal(again[i], grads[i]));
}

TEST_CASE("clip: zero, inf and NaN gradients; count_zeros", "[optim][clip]") {
  // All zeros: norm 0, coefficient max_norm / 1e-6 >= 1, nothing scaled; -0 counts as a zero.
  auto z = torch::zeros({65537});
  z.index_put_({5}, -0.0f);
  std::vector<torch::Tensor> zs = {z.clone(), torch::zeros({3}, torch::kBFloat16), torch::zeros({1}, torch::kHalf)};
  auto z_slots = slots_of(zs);
  REQUIRE(cpu::clip_grad_norm(z_slots, 1.0) == 0.0);
  REQUIRE(bit_equal(zs[0], z));
  REQUIRE(cpu::count_zeros(z_slots) == 65541.0);
  REQUIRE(cpu::grad_norm(z_slots, kInf) == 0.0);

  // count_zeros in each dtype, against numel - count_nonzero (NaN is not zero).
  torch::manual_seed(17);
  for (auto dtype : {torch::kFloat, torch::kBFloat16, torch::kHalf}) {
    auto g = random_grads(kClipSizes, dtype);
    g[3].index_put_({torch::indexing::Slice(100, 40000, 3)}, 0.0);
    g[2].index_put_({7}, NAN);
    g[2].index_put_({8}, -0.0);
    auto s = slots_of(g);
    double expect = 0.0;
    for (auto& t : g) expect += double(t.numel() - torch::count_nonzero(t).item<int64_t>());
    REQUIRE(cpu::count_zeros(s) == expect);
  }

  torch::manual_seed(19);
  for (auto dtype : {torch::kFloat, torch::kBFloat16}) {
    for (float bad : {INFINITY, -INFINITY}) {
      // An infinite gradient: infinite norm, coefficient 0: finite grads become (signed) zeros, infinite ones
      // NaN -- what torch's clip_grad_norm_ gives as well.
      auto g = random_grads(kClipSizes, dtype);
      g[3].index_put_({4242}, bad);
      for (double norm_type : {2.0, kInf}) {
        auto ours = clones(g);
        auto s = slots_of(ours);
        std::vector<torch::Tensor> theirs;
        const double torch_norm = torch_clip(g, 1.0, norm_type, theirs);
        const double norm = cpu::clip_grad_norm(s, 1.0, norm_type);
        REQUIRE(std::isinf(norm));
        REQUIRE(std::isinf(torch_norm));
        for (size_t i = 0; i < g.size(); ++i) REQUIRE(equal_or_both_nan(ours[i], theirs[i].to(dtype)));
      }
    }
    // A NaN gradient: NaN norm (both norm types); NaN < 1 is false, so Megatron does not scale (torch's clamp
    // would multiply everything by NaN: the one place where the two differ).
    auto g = random_grads(kClipSizes, dtype);
    g[2].index_put_({17}, NAN);
    g[3].index_put_({4242}, INFINITY);  // NaN wins over inf in the max
    for (double norm_type : {2.0, kInf}) {
      auto ours = clones(g);
      auto s = slots_of(ours);
      REQUIRE(std::isnan(cpu::clip_grad_norm(s, 1.0, norm_type)));
      for (size_t i = 0; i < g.size(); ++i) REQUIRE(bit_equal(ours[i], g[i]));
      std::vector<torch::Tensor> theirs;
      REQUIRE(std::isnan(torch_clip(g, 1.0, norm_type, theirs)));
    }
  }
}

TEST_CASE("clip: results do not depend on the thread count", "[optim][clip]") {
  torch::manual_seed(23);
  // Several 64 Ki-element chunks per tensor, mixed dtypes.
  std::vector<torch::Tensor> grads = random_grads({1, 3, 1000, 65537, 300001}, torch::kFloat);
  for (auto& t : random_grads({65537, 200003}, torch::kBFloat16)) grads.push_back(t);
  for (auto& t : random_grads({131073}, torch::kHalf)) grads.push_back(t);
  grads[4].index_put_({torch::indexing::Slice(0, 5000)}, 0.0f);
  struct Result {
    double n2, ninf, zeros, clipped_norm;
    std::vector<torch::Tensor> clipped;
  };
  auto run = [&](int threads) {
    cpu::set_threads(threads);
    Result r;
    auto g = clones(grads);
    auto s = slots_of(g);
    s[1].counted = false;
    r.n2 = cpu::grad_norm(s, 2.0);
    r.ninf = cpu::grad_norm(s, kInf);
    r.zeros = cpu::count_zeros(s);
    r.clipped_norm = cpu::clip_grad_norm(s, 0.1 * r.n2);
    r.clipped = g;
    return r;
  };
  Result one = run(1), three = run(3);
  cpu::set_threads(0);
  REQUIRE(same_double(one.n2, three.n2));
  REQUIRE(same_double(one.ninf, three.ninf));
  REQUIRE(one.zeros == three.zeros);
  REQUIRE(one.zeros >= 5000.0);
  REQUIRE(same_double(one.clipped_norm, three.clipped_norm));
  for (size_t i = 0; i < grads.size(); ++i) REQUIRE(bit_equal(one.clipped[i], three.clipped[i]));
  REQUIRE_FALSE(bit_equal(one.clipped[4], grads[4]));  // the clip did happen
}
