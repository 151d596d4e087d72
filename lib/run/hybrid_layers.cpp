// A hybrid model's layers per pipeline rank and the Mamba mixer's sizes (run/hybrid_layers.h).
#include "run/hybrid_layers.h"

#include "config/checked.h"
#include "run/model.h"
#include "util/text.h"

namespace mr::run {

namespace {
std::string str(int64_t v) { return std::to_string(v); }
[[noreturn]] void too_large() {
  throw RunError("the Mamba layer sizes (--mamba-num-heads, --mamba-head-dim, --mamba-num-groups, "
                 "--mamba-state-dim, --hidden-size) do not fit in 64 bits");
}
int64_t mul(int64_t a, int64_t b) {
  if (auto r = checked_mul(a, b)) return *r;
  too_large();
}
int64_t add(int64_t a, int64_t b) {
  if (auto r = checked_add(a, b)) return *r;
  too_large();
}
}  // namespace

HybridLayers hybrid_layers(const std::string& pattern, int64_t pp_rank, int64_t pp_size, int64_t first_stage_layers,
                           int64_t last_stage_layers) {
  HybridLayers out;
  const std::vector<std::string> parts = split(pattern, '/');
  if (parts.size() > 1) out.mtp_pattern = parts[1];
  if (pp_size < 1 || pp_rank < 0 || pp_rank >= pp_size)
    throw RunError("pipeline rank " + str(pp_rank) + " of " + str(pp_size) + " stages does not exist");
  const std::vector<std::string> segments = split(parts[0], '|');
  const int64_t n = static_cast<int64_t>(segments.size());
  auto take = [&](const std::string& layers, int64_t offset) {
    for (size_t i = 0; i < layers.size(); ++i) {
      out.index.push_back(offset + static_cast<int64_t>(i));
      out.symbols += layers[i];
    }
  };
  if (n > 1) {  // pipe segments: segment v x PP + rank is this rank's virtual chunk v
    if (first_stage_layers >= 0 || last_stage_layers >= 0)
      throw RunError("--decoder-first/last-pipeline-num-layers cannot be used when --hybrid-layer-pattern has '|'");
    if (n % pp_size != 0)
      throw RunError("--hybrid-layer-pattern has " + str(n) + " '|' segments, not a multiple of the " + str(pp_size) +
                     " pipeline stages");
    int64_t offset = 0;
    for (int64_t s = 0; s < n; ++s) {
      const std::string& seg = segments[static_cast<size_t>(s)];
      if (s % pp_size == pp_rank) take(seg, offset);
      offset += static_cast<int64_t>(seg.size());
    }
    return out;
  }
  // Without '|': Megatron's even or --decoder-first/last split of the layer count, as for a GPT decoder.
  const std::string& all = segments[0];
  const int64_t layers = static_cast<int64_t>(all.size());
  const bool uneven = first_stage_layers >= 0 || last_stage_layers >= 0;
  if (pp_size > 1 && !uneven && layers % pp_size != 0)
    throw RunError("the " + str(layers) + " layers of --hybrid-layer-pattern do not divide over " + str(pp_size) +
                   " pipeline stages (add '|' separators to place them)");
  for (int64_t i : pipeline_layers(layers, pp_rank, pp_size, 1, first_stage_layers, last_stage_layers)) {
    out.index.push_back(i);
    out.symbols += all[static_cast<size_t>(i)];
  }
  return out;
}

MambaSizes mamba_sizes(int64_t hidden, int64_t head_dim, int64_t num_groups, int64_t state_dim, int64_t num_heads,
                       int64_t tp) {
  if (head_dim <= 0 || num_groups <= 0 || state_dim <= 0 || hidden <= 0 || tp <= 0)
    throw RunError("--mamba-head-dim, --mamba-num-groups and --mamba-state-dim must be positive");
  MambaSizes m;
  m.groups = num_groups;
  m.state = state_dim;
  if (num_heads > 0) {
    m.heads = num_heads;
    m.d_inner = mul(num_heads, head_dim);
  } else {
    m.d_inner = mul(2, hidden);
    if (m.d_inner % head_dim != 0)
      throw RunError("the Mamba inner size 2 x --hidden-size (" + str(m.d_inner) + ") is not divisible by "
                     "--mamba-head-dim (" + str(head_dim) + ")");
    m.heads = m.d_inner / head_dim;
  }
  if (m.heads % tp != 0 || m.groups % tp != 0)
    throw RunError("the Mamba heads (" + str(m.heads) + ") and --mamba-num-groups (" + str(m.groups) +
                   ") must be divisible by the tensor-parallel size " + str(tp));
  if (m.heads % m.groups != 0)
    throw RunError("the Mamba heads (" + str(m.heads) + ") must be divisible by --mamba-num-groups (" +
                   str(m.groups) + ")");
  const int64_t bc = mul(2, mul(m.groups, m.state));  // B and C
  m.in_proj = add(add(mul(2, m.d_inner), bc), m.heads);
  m.conv_dim = add(m.d_inner, bc);
  return m;
}

}  // namespace mr::run
