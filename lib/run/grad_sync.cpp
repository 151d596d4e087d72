// The training run's collectives (run/grad_sync.h).
#include "run/grad_sync.h"

#include <cstring>
#include <string>
#include <vector>

#include "optim/kernels.h"

namespace mr::run {

namespace {
bool holds_tied_copy(const RunContext& c) {
  return c.tied && c.pp.size() > 1 && (c.pp.rank() == 0 || c.pp.rank() == c.pp.size() - 1);
}
bool is_tied_copy(const ParamSpec& p) { return p.name == "embedding.word_embeddings.weight" || p.shared_copy; }
}  // namespace

void reduce_grads(RunContext& c) {
  FlatBuffers& b = c.buf;
  if (holds_tied_copy(c)) {
    for (size_t k = 0; k < c.plan.params.size(); ++k) {
      const ParamSpec& p = c.plan.params[k];
      if (is_tied_copy(p))
        c.rt.group("embedding").all_reduce(distributed::Buffer::cpu(b.grad.data() + b.offset[k], static_cast<size_t>(p.numel())),
                                           distributed::ReduceOp::Sum);
    }
  }
  // Sum over the group (exact: run/synthetic_grad.h), then the average over the global batch (the rank's parts
  // are 8x the sum over its samples) and the loss scale, in one rounding, the same under every layout.
  const float factor =
      static_cast<float>((c.scaler ? static_cast<double>(c.scaler->scale()) : 1.0) / (8.0 * static_cast<double>(c.global_batch)));
  auto scale = [factor](float* g, int64_t n) {
    optim::cpu::scale_grads(std::vector<optim::GradSlot>{{n, g, optim::DType::F32}}, factor);
  };
  // Routed experts (the tail of the buffer) sum over their own data-parallel group.
  if (b.dense_end < b.numel) {
    float* e = b.grad.data() + b.dense_end;
    if (c.edp.size() > 1)
      c.edp.all_reduce(distributed::Buffer::cpu(e, static_cast<size_t>(b.numel - b.dense_end)), distributed::ReduceOp::Sum);
    scale(e, b.numel - b.dense_end);
  }
  if (c.dist_opt) {
    c.dp.reduce_scatter(distributed::Buffer::cpu(b.grad.data(), static_cast<size_t>(b.padded)),
                        distributed::Buffer::cpu(b.grad_shard.data(), b.grad_shard.size()), distributed::ReduceOp::Sum);
    scale(b.grad_shard.data(), static_cast<int64_t>(b.grad_shard.size()));
  } else {
    if (c.dp.size() > 1)
      c.dp.all_reduce(distributed::Buffer::cpu(b.grad.data(), static_cast<size_t>(b.dense_end)), distributed::ReduceOp::Sum);
    scale(b.grad.data(), b.dense_end);
  }
}

void stats_reduce(RunContext& c, std::span<double> v, optim::ReduceOp op) {
  distributed::Group& g = c.dist_opt ? c.rt.group("world") : c.mp;
  g.all_reduce(distributed::Buffer::cpu(v.data(), v.size()),
               op == optim::ReduceOp::Max ? distributed::ReduceOp::Max : distributed::ReduceOp::Sum);
}

void publish_params(RunContext& c) {
  if (!c.dist_opt) return;
  FlatBuffers& b = c.buf;
  const size_t w = dtype_bytes(b.model_dtype);
  const size_t bytes = static_cast<size_t>(b.hi - b.lo) * w;
  std::vector<uint8_t> mine(b.model.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(b.lo) * w),
                            b.model.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(b.lo) * w + bytes));
  c.dp.all_gather(distributed::Buffer{mine.data(), bytes, distributed::DType::U8, distributed::Device::Cpu},
                  distributed::Buffer{b.model.data(), b.model.size(), distributed::DType::U8, distributed::Device::Cpu});
}

uint64_t check_replicas(RunContext& c) {
  const FlatBuffers& b = c.buf;
  if (holds_tied_copy(c)) {
    for (size_t k = 0; k < c.plan.params.size(); ++k) {
      const ParamSpec& p = c.plan.params[k];
      if (!is_tied_copy(p)) continue;
      int64_t h = static_cast<int64_t>(b.checksum(b.offset[k], b.offset[k] + p.numel()));
      distributed::Group& e = c.rt.group("embedding");
      std::vector<int64_t> all(static_cast<size_t>(e.size()));
      e.all_gather(distributed::Buffer::cpu(&h, 1), distributed::Buffer::cpu(all.data(), all.size()));
      for (int64_t x : all)
        if (x != h) throw RunError("the tied word embeddings diverged between the first and the last pipeline stage");
    }
  }
  auto compare = [&](distributed::Group& g, int64_t begin, int64_t end, const char* what) {
    int64_t mine = static_cast<int64_t>(b.checksum(begin, end));
    std::vector<int64_t> all(static_cast<size_t>(g.size()));
    g.all_gather(distributed::Buffer::cpu(&mine, 1), distributed::Buffer::cpu(all.data(), all.size()));
    for (size_t i = 0; i < all.size(); ++i)
      if (all[i] != mine)
        throw RunError(std::string(what) + " replicas diverged: rank " + std::to_string(g.ranks()[i]) +
                       " holds different parameters than rank " + std::to_string(c.rt.rank()));
  };
  compare(c.dp, 0, b.dense_end, "data-parallel");
  if (b.dense_end < b.numel) compare(c.edp, b.dense_end, b.numel, "expert data-parallel");
  return model_checksum(c);
}

uint64_t model_checksum(RunContext& c) {
  const FlatBuffers& b = c.buf;
  uint64_t mine = 0;
  for (size_t k = 0; k < c.plan.params.size(); ++k) {
    const ParamSpec& p = c.plan.params[k];
    if (!c.is_counted(p) || (p.expert ? c.edp.rank() : c.dp.rank()) != 0) continue;  // every element once
    const uint64_t key = name_key(p.key, 0x636b73756dull);
    const int64_t base = b.offset[k], n = p.numel();
    const ShardIndex where = shard_index(p, p.expert ? c.etp.rank() : c.tp.rank());
    uint64_t sum = 0;
#pragma omp parallel for schedule(static) num_threads(optim::cpu::threads()) reduction(+ : sum)
    for (int64_t i = 0; i < n; ++i) {
      uint32_t bits = 0;
      if (b.model_dtype == optim::DType::F32)
        std::memcpy(&bits, b.model.data() + static_cast<size_t>(base + i) * 4, 4);
      else
        bits = reinterpret_cast<const uint16_t*>(b.model.data())[base + i];
      sum += mix64(mix64(key ^ static_cast<uint64_t>(whole_index(where, i))) ^ bits);  // wraps: mod 2^64
    }
    mine += sum;
  }
  // Across ranks as two 32-bit halves in doubles (exact below 2^21 ranks).
  double half[2] = {static_cast<double>(mine & 0xffffffffull), static_cast<double>(mine >> 32)};
  c.rt.group("world").all_reduce(distributed::Buffer::cpu(half, 2), distributed::ReduceOp::Sum);
  return static_cast<uint64_t>(half[0]) + (static_cast<uint64_t>(half[1]) << 32);
}

}  // namespace mr::run
