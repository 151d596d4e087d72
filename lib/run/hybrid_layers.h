// Which layers of a hybrid model (--hybrid-layer-pattern: M Mamba, G gated delta net, * attention, D DSA,
// + MLA, - MLP, E MoE; '|' pipeline segments, '/' before each MTP depth's pattern) a pipeline rank builds, as
// Megatron's select_pipeline_segment picks them (megatron/core/models/hybrid/hybrid_layer_allocation.py), and the
// Mamba mixer's sizes (megatron/core/ssm/mamba_mixer.py). Torch-free; the validation chain has checked the
// pattern's symbols and its segment count against the pipeline size before.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mr::run {

struct HybridLayers {
  std::vector<int64_t> index;  // this rank's layers' global indices, in the order its chunks run
  std::string symbols;         // their symbols, one per index
  std::string mtp_pattern;     // one MTP depth's layers (the part after the first '/'), empty without MTP;
                               // the number of depths is --mtp-num-layers, which validation derives from the '/'s
};

// `first_stage_layers` / `last_stage_layers`: --decoder-first/last-pipeline-num-layers (-1 unset), for a pattern
// without '|' only. RunError (model.h) for a split that does not divide, as Megatron's ValueError.
HybridLayers hybrid_layers(const std::string& pattern, int64_t pp_rank, int64_t pp_size, int64_t first_stage_layers,
                           int64_t last_stage_layers);

// The Mamba mixer's sizes: d_inner = --mamba-num-heads x --mamba-head-dim, or 2 x hidden (expand 2) split into
// heads of --mamba-head-dim; in_proj's rows z, x (d_inner each), B, C (groups x state each) and dt (heads);
// conv1d's channels x, B and C. Each part must split over TP (heads and groups divisible by the TP size).
inline constexpr int64_t kMambaConv = 4;  // MambaMixer's d_conv
struct MambaSizes {
  int64_t d_inner = 0, heads = 0, groups = 0, state = 0, in_proj = 0, conv_dim = 0;
};
MambaSizes mamba_sizes(int64_t hidden, int64_t head_dim, int64_t num_groups, int64_t state_dim, int64_t num_heads,
                       int64_t tp);  // num_heads <= 0: unset

}  // namespace mr::run
