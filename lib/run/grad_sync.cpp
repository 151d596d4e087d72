// The training run's collectives (run/grad_sync.h): the buffers' through the backend (run/backend.h), the
// scalars' on the host.
#include "run/host_collectives.h"
#include "run/grad_sync.h"
#include "run/run_support.h"

#include <string>
#include <vector>

#include "util/rule_id.h"

namespace mr::run {

namespace {
// The stages that hold the word embeddings (the first; the last as the tied output layer; a stage with MTP layers,
// for them) keep their copies equal through the embedding group; a group of one has nothing to keep equal.
distributed::Group* tied_group(RunContext& c) {
  distributed::Group* e = c.rt.find_group("embedding");
  return e && e->size() > 1 ? e : nullptr;
}
bool is_tied_copy(const ParamSpec& p) { return p.name == "embedding.word_embeddings.weight" || p.shared_copy; }
}  // namespace

void reduce_grads(RunContext& c) {
  FlatBuffers& b = c.buf;
  Backend& dev = *c.backend;
  const BufferPtrs d = dev.ptrs();
  if (distributed::Group* e = tied_group(c)) {
    for (size_t k = 0; k < c.plan.params.size(); ++k) {
      const ParamSpec& p = c.plan.params[k];
      if (is_tied_copy(p)) dev.all_reduce_sum(*e, d.grad + b.offset[k], p.numel());
    }
  }
  // Sum over the group (exact: run/synthetic_grad.h), then the average over the global batch (the rank's parts
  // are 8x the sum over its samples) and the loss scale, in one rounding, the same under every layout.
  const float factor =
      static_cast<float>((c.scaler ? static_cast<double>(c.scaler->scale()) : 1.0) / (8.0 * static_cast<double>(c.global_batch)));
  // Routed experts (the tail of the buffer) sum over their own data-parallel group: reduce-scattered with the
  // distributed optimizer (this rank's block after the dense shard), else all-reduced in place.
  if (b.expert_begin < b.numel) {
    float* e = d.grad + b.expert_begin;
    if (b.experts_scattered) {
      float* out = d.grad_shard + (b.hi - b.lo);
      dev.reduce_scatter_sum(c.edp, e, b.padded - b.expert_begin, out, b.ehi - b.elo);
      dev.finish_grads(out, b.ehi - b.elo, factor, c.grad_format);
    } else {
      if (c.edp.size() > 1) dev.all_reduce_sum(c.edp, e, b.numel - b.expert_begin);
      dev.finish_grads(e, b.numel - b.expert_begin, factor, c.grad_format);
    }
  }
  if (c.dist_opt && !b.layer_wise) {
    dev.reduce_scatter_sum(c.dp, d.grad, b.expert_begin, d.grad_shard, b.hi - b.lo);
    dev.finish_grads(d.grad_shard, b.hi - b.lo, factor, c.grad_format);
  } else {
    if (c.dp.size() > 1) dev.all_reduce_sum(c.dp, d.grad, b.dense_end);
    dev.finish_grads(d.grad, b.dense_end, factor, c.grad_format);
  }
}

void stats_reduce(RunContext& c, std::span<double> v, optim::ReduceOp op) {
  distributed::Group& g = c.dist_opt ? c.rt.group("world") : c.mp;
  host_all_reduce(g, distributed::Buffer::cpu(v.data(), v.size()),
               op == optim::ReduceOp::Max ? distributed::ReduceOp::Max : distributed::ReduceOp::Sum);
}

void publish_params(RunContext& c) {
  if (!c.dist_opt) return;
  if (c.buf.layer_wise) {  // every rank's whole parameters from it, in place
    auto from_owners = [&](distributed::Group& g, const std::vector<int64_t>& at) {
      for (size_t r = 0; r + 1 < at.size(); ++r)
        if (at[r] < at[r + 1]) c.backend->broadcast_model(g, at[r], at[r + 1], static_cast<int>(r));
    };
    from_owners(c.dp, c.buf.bounds);
    if (c.edp.size() > 1) from_owners(c.edp, c.buf.expert_bounds);
    return;
  }
  c.backend->all_gather_model(c.dp, 0, c.buf.lo, c.buf.hi);
  if (c.buf.experts_scattered) c.backend->all_gather_model(c.edp, c.buf.expert_begin, c.buf.elo, c.buf.ehi);
}

// Rule run.replica-divergence (kReplicaDivergenceRule, run/run_support.h): replicas that should hold the same
// parameters do not (docs/run.md).

void compare_replicas(RunContext& c, const std::string& when) {
  const FlatBuffers& b = c.buf;
  if (distributed::Group* e = tied_group(c)) {
    for (size_t k = 0; k < c.plan.params.size(); ++k) {
      const ParamSpec& p = c.plan.params[k];
      if (!is_tied_copy(p)) continue;
      int64_t h = static_cast<int64_t>(c.backend->checksum(b.offset[k], b.offset[k] + p.numel()));
      std::vector<int64_t> all(static_cast<size_t>(e->size()));
      host_all_gather(*e, distributed::Buffer::cpu(&h, 1), distributed::Buffer::cpu(all.data(), all.size()));
      for (int64_t x : all)
        if (x != h)
          throw RunError(with_rule_id(kReplicaDivergenceRule.id, when + "the word embeddings' copies diverged between the "
                                                                 "pipeline stages of the embedding group"));
    }
  }
  auto compare = [&](distributed::Group& g, int64_t begin, int64_t end, const char* what) {
    int64_t mine = static_cast<int64_t>(c.backend->checksum(begin, end));
    std::vector<int64_t> all(static_cast<size_t>(g.size()));
    host_all_gather(g, distributed::Buffer::cpu(&mine, 1), distributed::Buffer::cpu(all.data(), all.size()));
    for (size_t i = 0; i < all.size(); ++i)
      if (all[i] != mine)
        throw RunError(with_rule_id(kReplicaDivergenceRule.id, when + what + " replicas diverged: rank " +
                                                            std::to_string(g.ranks()[i]) +
                                                            " holds different parameters than rank " +
                                                            std::to_string(c.rt.rank())));
  };
  compare(c.dp, 0, b.dense_end, "data-parallel");
  if (b.expert_begin < b.numel) compare(c.edp, b.expert_begin, b.numel, "expert data-parallel");
}

uint64_t check_replicas(RunContext& c) {
  compare_replicas(c);
  return model_checksum(c);
}

uint64_t model_checksum(RunContext& c) {
  const FlatBuffers& b = c.buf;
  uint64_t mine = 0;
  for (size_t k = 0; k < c.plan.params.size(); ++k) {
    const ParamSpec& p = c.plan.params[k];
    if (!c.owns(p)) continue;  // every element once
    const uint64_t key = name_key(p.key, 0x636b73756dull);
    const int64_t base = b.offset[k], n = p.numel();
    const ShardIndex where = shard_index(p, c.tp_rank_of(p));
    mine += c.backend->model_checksum_part(key, where, base, n);  // wraps: mod 2^64
  }
  // Across ranks as two 32-bit halves in doubles (exact below 2^21 ranks).
  double half[2] = {static_cast<double>(mine & 0xffffffffull), static_cast<double>(mine >> 32)};
  host_all_reduce(c.rt.group("world"), distributed::Buffer::cpu(half, 2), distributed::ReduceOp::Sum);
  return static_cast<uint64_t>(half[0]) + (static_cast<uint64_t>(half[1]) << 32);
}

}  // namespace mr::run
