// Megatron's rank layout (megatron/core/parallel_state.py): the rank generator and every process group of a job,
// computed without starting anything. Torch-free: `megatron-run topology` and config checking use it.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "config/args.h"

namespace mr::parallel {

using RankList = std::vector<int>;
using RankGroups = std::vector<RankList>;

// A layout rule of initialize_model_parallel() failed (e.g. the world size is not a multiple of TP x PP x CP).
// `args`: the arguments the message names, in its order, each once (the message spells them by their flags,
// Schema::flag_for_dest(dest_of(id))); a diagnostic lists their flags and places itself at the first a file set.
struct LayoutError : std::runtime_error {
  explicit LayoutError(const std::string& what, std::vector<ArgId> named = {})
      : std::runtime_error(what), args(std::move(named)) {}
  std::vector<ArgId> args;
};
// A world beyond kMaxLayoutRanks: megatron-run's own limit, not a verdict on the job (callers make it a usage error).
struct LayoutLimitError : LayoutError {
  using LayoutError::LayoutError;
};

// generate_masked_orthogonal_rank_groups: the groups spanned by the dimensions of `parallel_size` selected by
// `mask`, for rank = sum(index[i] * stride[i]) with strides the prefix products of `parallel_size`.
RankGroups masked_orthogonal_rank_groups(int64_t world_size, const std::vector<int64_t>& parallel_size,
                                         const std::vector<bool>& mask);

// Megatron's RankGenerator: sizes of tp, ep, dp, pp, cp (and the GTP weight-remat axis) laid out in `order`
// ("tp-cp-ep-dp-pp"); dimensions missing from the order must have size 1 and are appended.
class RankGenerator {
 public:
  RankGenerator(int64_t tp, int64_t ep, int64_t dp, int64_t pp, int64_t cp, const std::string& order,
                int64_t rank_offset = 0, int64_t gtp_remat = 1);
  // The groups spanning the '-'-separated dimensions of `token` ("tp", "dp-cp", "tp-gtp_remat-pp", ...).
  RankGroups get_ranks(const std::string& token) const;
  const std::string& order() const { return order_; }
  int64_t world_size() const { return world_size_; }

 private:
  std::string order_;
  std::vector<std::string> tokens_;
  std::vector<int64_t> ordered_size_;
  int64_t world_size_ = 1;
  int64_t rank_offset_ = 0;
};

// What the layout depends on: the parallel sizes of the resolved arguments (initialize_megatron's arguments).
struct LayoutSpec {
  int64_t world_size = 1;
  int64_t tp = 1, pp = 1, cp = 1, ep = 1;
  std::optional<int64_t> etp;  // None: defaults to tp (as initialize_model_parallel does)
  int64_t gtp_remat = 1, expert_gtp_remat = 1;
  int64_t num_distributed_optimizer_instances = 1;
  std::vector<int64_t> hierarchical_cp;  // --hierarchical-context-parallel-sizes
  bool hybrid_cp = false;                // --hybrid-context-parallel / --dynamic-context-parallel
  bool tp_pp_dp_mapping = false;         // order tp-cp-ep-pp-dp instead of tp-cp-ep-dp-pp
  std::optional<int64_t> virtual_pp;     // virtual_pipeline_model_parallel_size
  bool use_sharp = false;
  std::optional<std::string> sharp_enabled_group;
  // Embedding ranks follow pretrain_gpt.py's get_embedding_ranks (first stage; the last one too unless
  // --untie-embeddings-and-output-weights; plus the stages holding MTP layers).
  bool untie_embeddings = false;
  std::optional<int64_t> mtp_num_layers;
  std::vector<std::string> pp_layout_stages;  // --pipeline-model-parallel-layout split into stages (pp x vpp)
  bool core_embedding_ranks = false;          // megatron.core's default_embedding_ranks instead of GPT's

  // From the resolved arguments. `world_size` overrides args.world_size.
  static LayoutSpec from_args(const Args& args, std::optional<int64_t> world_size = std::nullopt);
  std::string order() const { return tp_pp_dp_mapping ? "tp-cp-ep-pp-dp" : "tp-cp-ep-dp-pp"; }
};

// The largest world size Layout::build lays out: every group is listed rank by rank (about 25 kinds of groups,
// each covering every rank), so 2^20 ranks take about 1 GiB and 10 s; a larger world is a LayoutError.
inline constexpr int64_t kMaxLayoutRanks = int64_t{1} << 20;

// One kind of process group ("tp", "dp-cp", ...): every group of that kind in the job.
struct GroupSet {
  std::string name;
  std::string megatron;  // the group's name in parallel_state.py (group_desc), e.g. TENSOR_MODEL_PARALLEL_GROUP
  RankGroups groups;     // each sorted ascending
  // The group of this kind that `rank` belongs to (nullptr if none, e.g. a rank outside every embedding group).
  const RankList* find(int rank) const;
};

// Every process group of a job, in the order initialize_model_parallel() creates them.
struct Layout {
  LayoutSpec spec;
  int64_t dp = 1, expert_dp = 1, etp = 1;
  std::vector<GroupSet> sets;

  static Layout build(const LayoutSpec& spec);  // throws LayoutError
  const GroupSet* find(const std::string& name) const;
  const GroupSet& at(const std::string& name) const;  // throws std::out_of_range

  // {"world_size": N, "groups": {"tp": [[0, 1], ...], ...}}
  std::string json() const;
  // Human-readable: the sizes, then one line per group kind.
  std::string text() const;
};

// The group kinds `megatron-run topology` always prints, in this order (the others follow when present).
const std::vector<std::string>& primary_group_names();

}  // namespace mr::parallel
