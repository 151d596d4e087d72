// Pictures of a rank layout (`megatron-run topology --format svg|dot`): the GPUs as a grid, one row per node and
// one column per local rank, each marked with its tensor-parallel group, pipeline stage, data-parallel replica
// and (with MoE expert parallelism) expert-parallel group. Drawn from the same Layout the text output prints.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "parallel/layout.h"

namespace mr::parallel {

// The largest world a picture draws (a 4096-GPU grid is already 512 rows of 8); `topology` refuses more.
inline constexpr int64_t kMaxPictureRanks = 4096;

// Where one rank sits in each kind of group the pictures show.
struct RankPlace {
  int rank = 0;
  int64_t node = 0, local = 0;  // rank / gpus_per_node, rank % gpus_per_node
  int64_t tp_group = 0;         // index of its "tp" group in the layout
  int64_t tp_rank = 0;          // its position in its "tp" group (its tensor-parallel rank)
  int64_t pp_stage = 0;         // its position in its "pp" group
  int64_t dp_replica = 0;       // its position in its "dp" group: which copy of the model it holds
  int64_t cp_rank = 0;          // its position in its "cp" group
  int64_t ep_group = -1;        // index of its "ep" group (-1: the layout has no expert groups)
};

// Every rank's place, rank by rank. `gpus_per_node` must be at least 1.
std::vector<RankPlace> rank_places(const Layout& layout, int64_t gpus_per_node);

// A self-contained SVG: the grid with a legend. `title` heads the picture (e.g. the config's name).
std::string layout_svg(const Layout& layout, int64_t gpus_per_node, const std::string& title);
// Graphviz DOT: one cluster per node, one box per GPU filled by its TP group, TP groups joined by solid edges,
// pipeline stages by dashed ones.
std::string layout_dot(const Layout& layout, int64_t gpus_per_node, const std::string& title);

}  // namespace mr::parallel
