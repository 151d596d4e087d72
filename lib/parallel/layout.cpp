// Port of the group rules of megatron/core/parallel_state.py (initialize_model_parallel, RankGenerator,
// generate_masked_orthogonal_rank_groups, create_hierarchical_groups, create_hybrid_dp_cp_groups) and of
// pretrain_gpt.py's get_embedding_ranks. Only the rank lists are computed here; lib/distributed/runtime.cpp turns
// them into communicators.
#include "parallel/layout.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>
#include <sstream>

#include "config/checked.h"
#include "config/pipeline_layout.h"
#include "config/schema.h"
#include "util/text.h"

namespace mr::parallel {

namespace {

std::string str(int64_t v) { return std::to_string(v); }

// An argument's flag as a LayoutError's message names it (the error lists the ids: layout.h).
std::string flag(ArgId id) { return Schema::megatron().flag_for_dest(dest_of(id)); }

std::vector<int64_t> prefix_product(const std::vector<int64_t>& a) {
  std::vector<int64_t> r{1};
  int64_t p = 1;
  for (int64_t v : a) r.push_back(p *= v);
  return r;
}

int64_t inner_product(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  int64_t s = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) s += a[i] * b[i];
  return s;
}

// The index of each dimension of `shape` for a flat index (strides: prefix products of the shape).
std::vector<int64_t> decompose(int64_t index, const std::vector<int64_t>& shape) {
  std::vector<int64_t> stride = prefix_product(shape);
  std::vector<int64_t> idx;
  for (size_t i = 0; i < shape.size(); ++i) idx.push_back((index / stride[i]) % shape[i]);
  return idx;
}


std::string list_str(const RankList& l) {
  std::string s = "[";
  for (size_t i = 0; i < l.size(); ++i) s += (i ? ", " : "") + std::to_string(l[i]);
  return s + "]";
}

std::string groups_str(const RankGroups& g) {
  std::string s = "[";
  for (size_t i = 0; i < g.size(); ++i) s += (i ? ", " : "") + list_str(g[i]);
  return s + "]";
}

// _inject_gtp_remat_axis: put "gtp_remat" right after `after` (or after tp) unless already present.
std::string inject_gtp_remat_axis(const std::string& order, const std::string& after) {
  std::vector<std::string> toks = split(order, '-');
  if (std::find(toks.begin(), toks.end(), "gtp_remat") != toks.end()) return order;
  std::string anchor = std::find(toks.begin(), toks.end(), after) != toks.end() ? after : "tp";
  auto it = std::find(toks.begin(), toks.end(), anchor);
  size_t pos = it != toks.end() ? static_cast<size_t>(it - toks.begin()) + 1 : 0;
  toks.insert(toks.begin() + static_cast<long>(pos), "gtp_remat");
  std::string out;
  for (size_t i = 0; i < toks.size(); ++i) out += (i ? "-" : "") + toks[i];
  return out;
}

// create_hierarchical_groups: einops "(l s u) -> (l u) s" for each level's size s, u = product of the sizes
// below the level, l = product of those above.
std::vector<RankGroups> hierarchical_groups(const RankList& ranks, const std::vector<int64_t>& sizes) {
  std::vector<RankGroups> levels;
  for (size_t level = 0; level < sizes.size(); ++level) {
    // Checked products: sizes whose product overflows cannot multiply to a group size either.
    std::optional<int64_t> u = 1, l = 1;
    for (size_t i = 0; i < level && u; ++i) u = checked_mul(*u, sizes[i]);
    for (size_t i = level + 1; i < sizes.size() && l; ++i) l = checked_mul(*l, sizes[i]);
    const int64_t s = sizes[level];
    std::optional<int64_t> all = u && l ? checked_product({*l, s, *u}) : std::nullopt;
    if (s < 1 || !all || *all != static_cast<int64_t>(ranks.size()))
      throw LayoutError("hierarchical group sizes " + [&] {
        std::string t;
        for (size_t i = 0; i < sizes.size(); ++i) t += (i ? " x " : "") + str(sizes[i]);
        return t;
      }() + " do not multiply to the group size " + str(static_cast<int64_t>(ranks.size())));
    RankGroups out;
    for (int64_t li = 0; li < *l; ++li)
      for (int64_t ui = 0; ui < *u; ++ui) {
        RankList g;
        for (int64_t si = 0; si < s; ++si) g.push_back(ranks[static_cast<size_t>(li * s * *u + si * *u + ui)]);
        out.push_back(std::move(g));
      }
    levels.push_back(std::move(out));
  }
  return levels;
}

}  // namespace

RankGroups masked_orthogonal_rank_groups(int64_t world_size, const std::vector<int64_t>& parallel_size,
                                         const std::vector<bool>& mask) {
  std::vector<int64_t> masked_shape, unmasked_shape, masked_stride, unmasked_stride;
  std::vector<int64_t> global_stride = prefix_product(parallel_size);
  for (size_t i = 0; i < parallel_size.size(); ++i) {
    (mask[i] ? masked_shape : unmasked_shape).push_back(parallel_size[i]);
    (mask[i] ? masked_stride : unmasked_stride).push_back(global_stride[i]);
  }
  int64_t group_size = prefix_product(masked_shape).back();
  if (group_size <= 0) throw LayoutError("a parallel size is not positive");
  int64_t num_groups = world_size / group_size;
  RankGroups ranks;
  ranks.reserve(static_cast<size_t>(num_groups));
  for (int64_t gi = 0; gi < num_groups; ++gi) {
    std::vector<int64_t> group_idx = decompose(gi, unmasked_shape);
    RankList g;
    g.reserve(static_cast<size_t>(group_size));
    for (int64_t ri = 0; ri < group_size; ++ri)
      g.push_back(static_cast<int>(inner_product(decompose(ri, masked_shape), masked_stride) +
                                   inner_product(group_idx, unmasked_stride)));
    ranks.push_back(std::move(g));
  }
  return ranks;
}

RankGenerator::RankGenerator(int64_t tp, int64_t ep, int64_t dp, int64_t pp, int64_t cp, const std::string& order,
                             int64_t rank_offset, int64_t gtp_remat)
    : rank_offset_(rank_offset) {
  if (ep != 1 && cp != 1)
    throw LayoutError("a rank generator cannot have both EP (" + str(ep) + ") and CP (" + str(cp) +
                      ") above 1: CP belongs to the dense generator, EP to the expert one");
  const std::optional<int64_t> world = checked_product({tp, dp, pp, cp, ep, gtp_remat});
  if (!world) throw LayoutError("the rank generator's sizes multiply beyond 64 bits");
  world_size_ = *world;
  const std::vector<std::pair<std::string, int64_t>> sizes = {{"tp", tp}, {"pp", pp}, {"dp", dp},
                                                              {"ep", ep}, {"cp", cp}, {"gtp_remat", gtp_remat}};
  std::string o = order;
  std::transform(o.begin(), o.end(), o.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const auto& [name, size] : sizes) {
    std::vector<std::string> toks = split(o, '-');
    bool present = std::find(toks.begin(), toks.end(), name) != toks.end();
    if (!present && size != 1)
      throw LayoutError("the " + name + " size is " + str(size) + " but the rank order '" + order +
                        "' does not place it");
    if (!present) o += "-" + name;
  }
  order_ = o;
  tokens_ = split(o, '-');
  for (const std::string& t : tokens_) {
    auto it = std::find_if(sizes.begin(), sizes.end(), [&](const auto& p) { return p.first == t; });
    if (it == sizes.end()) throw LayoutError("unknown dimension '" + t + "' in the rank order '" + order + "'");
    ordered_size_.push_back(it->second);
  }
}

RankGroups RankGenerator::get_ranks(const std::string& token) const {
  std::vector<bool> mask(tokens_.size(), false);
  for (const std::string& t : split(token, '-')) {
    auto it = std::find(tokens_.begin(), tokens_.end(), t);
    if (it == tokens_.end()) throw LayoutError("unknown dimension '" + t + "' in group token '" + token + "'");
    mask[static_cast<size_t>(it - tokens_.begin())] = true;
  }
  RankGroups ranks = masked_orthogonal_rank_groups(world_size_, ordered_size_, mask);
  if (rank_offset_ > 0)
    for (auto& g : ranks)
      for (int& r : g) r += static_cast<int>(rank_offset_);
  return ranks;
}

LayoutSpec LayoutSpec::from_args(const Args& a, std::optional<int64_t> world_size) {
  LayoutSpec s;
  s.world_size = world_size ? *world_size : a.world_size;
  s.tp = a.tensor_model_parallel_size;
  s.pp = a.pipeline_model_parallel_size;
  s.cp = a.context_parallel_size;
  s.ep = a.expert_model_parallel_size;
  s.etp = a.expert_tensor_parallel_size;
  s.gtp_remat = a.gtp_weight_remat_size;
  s.expert_gtp_remat = a.expert_gtp_weight_remat_size;
  s.num_distributed_optimizer_instances = a.num_distributed_optimizer_instances;
  s.hierarchical_cp = a.hierarchical_context_parallel_sizes.value_or(std::vector<int64_t>{});
  // The seed renames --hybrid-context-parallel to --dynamic-context-parallel; either builds the DPxCP groups.
  s.hybrid_cp = a.hybrid_context_parallel || a.dynamic_context_parallel;
  s.tp_pp_dp_mapping = a.use_tp_pp_dp_mapping;
  s.virtual_pp = a.virtual_pipeline_model_parallel_size;
  s.use_sharp = a.use_sharp;
  if (a.sharp_enabled_group) s.sharp_enabled_group = std::string(arg::to_string(*a.sharp_enabled_group));
  s.untie_embeddings = a.untie_embeddings_and_output_weights;
  s.mtp_num_layers = a.mtp_num_layers;
  if (a.pipeline_model_parallel_layout && !a.pipeline_model_parallel_layout->empty()) {
    bool too_large = false;
    std::string expanded = pipeline_layout::expand(*a.pipeline_model_parallel_layout, &too_large);
    if (!too_large) s.pp_layout_stages = split(expanded, '|');
  }
  return s;
}

const RankList* GroupSet::find(int rank) const {
  for (const RankList& g : groups)
    if (std::find(g.begin(), g.end(), rank) != g.end()) return &g;
  return nullptr;
}

const GroupSet* Layout::find(const std::string& name) const {
  for (const GroupSet& s : sets)
    if (s.name == name) return &s;
  return nullptr;
}

const GroupSet& Layout::at(const std::string& name) const {
  if (const GroupSet* s = find(name)) return *s;
  throw std::out_of_range("no process group kind '" + name + "' in this layout");
}

const std::vector<std::string>& primary_group_names() {
  static const std::vector<std::string> names = {"tp", "pp",  "dp",        "cp",        "dp-cp",     "tp-pp",
                                                 "ep", "expert-tp", "expert-dp", "embedding", "position-embedding"};
  return names;
}

namespace {

// ---- Layout::build, by group family ------------------------------------------------------------------------------

// Appends one kind of group (each group sorted ascending), in initialize_model_parallel()'s creation order.
void add(Layout& L, std::string name, std::string megatron, RankGroups groups) {
  for (RankList& g : groups) std::sort(g.begin(), g.end());
  L.sets.push_back(GroupSet{std::move(name), std::move(megatron), std::move(groups)});
}

// The sizes every size-dependent rule needs: each at least 1, the world within kMaxLayoutRanks, a valid SHARP
// group choice (initialize_model_parallel's first checks), no GTP with several distributed-optimizer instances.
void check_sizes(const LayoutSpec& spec) {
  const int64_t world = spec.world_size, instances = spec.num_distributed_optimizer_instances;
  const int64_t gtp = spec.gtp_remat, egtp = spec.expert_gtp_remat;
  if (world < 1) throw LayoutError("the world size must be at least 1 (got " + str(world) + ")");
  if (world > kMaxLayoutRanks)
    throw LayoutLimitError("the world size " + str(world) + " is beyond the " + str(kMaxLayoutRanks) +
                           " ranks megatron-run lays out (every process group is listed rank by rank); a limit of "
                           "megatron-run, not of Megatron");
  for (auto [id, v] : std::initializer_list<std::pair<ArgId, int64_t>>{
           {ArgId::tensor_model_parallel_size, spec.tp}, {ArgId::pipeline_model_parallel_size, spec.pp},
           {ArgId::context_parallel_size, spec.cp}, {ArgId::expert_model_parallel_size, spec.ep},
           {ArgId::num_distributed_optimizer_instances, instances}})
    if (v < 1) throw LayoutError(flag(id) + " must be at least 1 (got " + str(v) + ")", {id});
  for (auto [name, v] : std::initializer_list<std::pair<const char*, int64_t>>{
           {"the GTP weight-remat size", gtp}, {"the expert GTP weight-remat size", egtp}})
    if (v < 1) throw LayoutError(std::string(name) + " must be at least 1 (got " + str(v) + ")");

  if (spec.use_sharp) {
    if (spec.sharp_enabled_group && *spec.sharp_enabled_group != "dp" && *spec.sharp_enabled_group != "dp_replica")
      throw LayoutError(flag(ArgId::sharp_enabled_group) + " must be dp or dp_replica (got " +
                            *spec.sharp_enabled_group + ")",
                        {ArgId::sharp_enabled_group});
    if (spec.sharp_enabled_group == std::optional<std::string>("dp_replica") && instances <= 1)
      throw LayoutError(flag(ArgId::sharp_enabled_group) + " dp_replica needs " +
                            flag(ArgId::num_distributed_optimizer_instances) + " > 1",
                        {ArgId::sharp_enabled_group, ArgId::num_distributed_optimizer_instances});
  } else if (spec.sharp_enabled_group) {
    throw LayoutError(flag(ArgId::sharp_enabled_group) + " is only valid together with " + flag(ArgId::use_sharp),
                      {ArgId::sharp_enabled_group, ArgId::use_sharp});
  }
  if ((gtp > 1 || egtp > 1) && instances > 1)
    throw LayoutError("GTP weight rematerialization does not support " +
                          flag(ArgId::num_distributed_optimizer_instances) + " > 1",
                      {ArgId::num_distributed_optimizer_instances});
}

// initialize_model_parallel's two rank generators: the dense layers' (TP, CP, DP, PP and the GTP weight-remat
// axis) and the expert layers' (expert TP, EP, expert DP, PP and the expert GTP axis), with the data-parallel
// sizes they imply, and the rules that tie them together.
struct Generators {
  RankGenerator dense, expert;
  int64_t dp, etp, edp;
};

Generators make_generators(const LayoutSpec& spec) {
  const int64_t world = spec.world_size, tp = spec.tp, pp = spec.pp, cp = spec.cp, ep = spec.ep;
  const int64_t gtp = spec.gtp_remat, egtp = spec.expert_gtp_remat;
  // Every size is at least 1 here; a product beyond 64 bits cannot divide the world size.
  const std::optional<int64_t> model_size_ = checked_product({tp, pp, cp, gtp});
  if (!model_size_ || world % *model_size_ != 0)
    throw LayoutError("world size (" + str(world) + ") is not divisible by TP x PP x CP" + (gtp > 1 ? " x GTP" : "") +
                      " = " + (model_size_ ? str(*model_size_) : "a product beyond 64 bits"));
  const int64_t dp = world / *model_size_;
  if (spec.virtual_pp && pp <= 1)
    throw LayoutError("the interleaved schedule (virtual pipeline size " + str(*spec.virtual_pp) +
                      ") needs " + flag(ArgId::pipeline_model_parallel_size) + " > 1",
                      {ArgId::pipeline_model_parallel_size});

  const std::string order = spec.order();
  RankGenerator dense(tp, 1, dp, pp, cp, inject_gtp_remat_axis(order, "tp"), 0, gtp);

  const int64_t etp = spec.etp ? *spec.etp : tp;
  if (etp < 1)
    throw LayoutError(flag(ArgId::expert_tensor_parallel_size) + " must be at least 1 (got " + str(etp) + ")",
                      {ArgId::expert_tensor_parallel_size});
  const std::optional<int64_t> expert_tmp_ = checked_product({etp, ep, pp, egtp});
  if (!expert_tmp_ || world % *expert_tmp_ != 0)
    throw LayoutError("world size (" + str(world) + ") is not divisible by expert TP x EP x PP" +
                      (egtp > 1 ? " x expert GTP" : "") + " = " +
                      (expert_tmp_ ? str(*expert_tmp_) : "a product beyond 64 bits") +
                      " (" + flag(ArgId::expert_tensor_parallel_size) + " " + str(etp) + ", " +
                      flag(ArgId::expert_model_parallel_size) + " " + str(ep) + ", " +
                      flag(ArgId::pipeline_model_parallel_size) + " " + str(pp) + ")",
                      {ArgId::expert_tensor_parallel_size, ArgId::expert_model_parallel_size,
                       ArgId::pipeline_model_parallel_size});
  const int64_t edp = world / *expert_tmp_;
  RankGenerator expert(etp, ep, edp, pp, 1, inject_gtp_remat_axis(order, "ep"), 0, egtp);

  if (!(order.size() >= 2 && order.substr(order.size() - 2) == "pp") && pp != 1 && edp != dp)
    throw LayoutError("with " + flag(ArgId::use_tp_pp_dp_mapping) + " the data-parallel sizes of the dense (" +
                          str(dp) + ") and expert (" + str(edp) + ") layers must be equal",
                      {ArgId::use_tp_pp_dp_mapping});
  if (dense.get_ranks("pp") != expert.get_ranks("pp"))
    throw LayoutError("the pipeline groups of the dense layers " + groups_str(dense.get_ranks("pp")) +
                      " and the expert layers " + groups_str(expert.get_ranks("pp")) + " differ");
  return Generators{std::move(dense), std::move(expert), dp, etp, edp};
}

// create_hybrid_dp_cp_groups: contiguous slices of each DPxCP group, for every power of two from 2 up to
// (excluding) 2^floor(log2(n)); one list per slice size, ascending.
std::vector<std::pair<int64_t, RankGroups>> hybrid_dp_cp_groups(const RankGroups& dp_cp) {
  std::vector<std::pair<int64_t, RankGroups>> by_size;
  for (const RankList& g : dp_cp) {
    if (g.size() % 2 != 0)
      throw LayoutError("hybrid context parallelism needs an even DP x CP size (got " + str(static_cast<int64_t>(g.size())) + ")");
    int64_t levels = static_cast<int64_t>(std::log2(static_cast<double>(g.size())));
    for (int64_t i = 1; i < levels; ++i) {
      int64_t size = int64_t{1} << i;
      auto it = std::find_if(by_size.begin(), by_size.end(), [&](const auto& p) { return p.first == size; });
      if (it == by_size.end()) {
        by_size.emplace_back(size, RankGroups{});
        it = by_size.end() - 1;
      }
      for (size_t b = 0; b < g.size(); b += static_cast<size_t>(size))
        it->second.emplace_back(g.begin() + static_cast<long>(b),
                                g.begin() + static_cast<long>(std::min(g.size(), b + static_cast<size_t>(size))));
    }
  }
  return by_size;
}

// The data-parallel groups of the dense layers: GTP, DP x CP, its slices per distributed-optimizer instance,
// the hybrid DP x CP groups, DP, and DP with the GTP axis.
void add_data_parallel_groups(Layout& L, const RankGenerator& dense, const LayoutSpec& spec) {
  const int64_t instances = spec.num_distributed_optimizer_instances, gtp = spec.gtp_remat;
  if ((L.dp * spec.cp) % instances != 0)
    throw LayoutError("DP x CP (" + str(L.dp * spec.cp) + ") is not divisible by " +
                          flag(ArgId::num_distributed_optimizer_instances) + " (" + str(instances) + ")",
                      {ArgId::num_distributed_optimizer_instances});
  const int64_t intra_dp_cp = L.dp * spec.cp / instances;
  if (gtp > 1) add(L, "gtp", "GTP_WEIGHT_REMAT_GROUP", dense.get_ranks("gtp_remat"));
  RankGroups dp_cp = dense.get_ranks("dp-cp");
  add(L, "dp-cp", "DATA_PARALLEL_GROUP_WITH_CP", dp_cp);
  if (instances > 1) {
    RankGroups intra;
    for (const RankList& g : dp_cp)
      for (int64_t i = 0; i < instances; ++i)
        intra.emplace_back(g.begin() + i * intra_dp_cp, g.begin() + (i + 1) * intra_dp_cp);
    add(L, "intra-dp-cp", "INTRA_PARTIAL_DATA_PARALLEL_GROUP_WITH_CP", std::move(intra));
  }
  if (spec.hybrid_cp)
    for (auto& [size, groups] : hybrid_dp_cp_groups(dp_cp))
      add(L, "hybrid-dp-cp-" + str(size), "HYBRID_DP_CP_GROUP_" + str(size), std::move(groups));
  add(L, "dp", "DATA_PARALLEL_GROUP", dense.get_ranks("dp"));
  if (gtp > 1) {
    add(L, "gtp-dp", "DATA_PARALLEL_GROUP_WITH_GTP_REMAT", dense.get_ranks("gtp_remat-dp"));
    add(L, "gtp-dp-cp", "DATA_PARALLEL_GROUP_WITH_CP_WITH_GTP_REMAT", dense.get_ranks("gtp_remat-dp-cp"));
  }
}

// The context-parallel groups, and their hierarchical levels (--hierarchical-context-parallel-sizes).
void add_context_parallel_groups(Layout& L, const RankGenerator& dense, const LayoutSpec& spec) {
  RankGroups cp_groups = dense.get_ranks("cp");
  add(L, "cp", "CONTEXT_PARALLEL_GROUP", cp_groups);
  if (spec.hierarchical_cp.empty()) return;
  std::optional<int64_t> prod = 1;
  for (int64_t v : spec.hierarchical_cp)
    if (prod) prod = v >= 1 ? checked_mul(*prod, v) : std::nullopt;
  if (!prod || *prod != spec.cp)
    throw LayoutError(flag(ArgId::hierarchical_context_parallel_sizes) + " multiply to " +
                          (prod ? str(*prod) : std::string("a non-positive or beyond-64-bit product")) +
                          ", not the context-parallel size " + str(spec.cp),
                      {ArgId::hierarchical_context_parallel_sizes});
  std::vector<RankGroups> levels(spec.hierarchical_cp.size());
  for (const RankList& g : cp_groups) {
    std::vector<RankGroups> h = hierarchical_groups(g, spec.hierarchical_cp);
    for (size_t i = 0; i < h.size(); ++i) levels[i].insert(levels[i].end(), h[i].begin(), h[i].end());
  }
  for (size_t i = 0; i < levels.size(); ++i)
    add(L, "hierarchical-cp-" + str(static_cast<int64_t>(i)), "HIERARCHICAL_CONTEXT_PARALLEL_GROUP_L" + str(static_cast<int64_t>(i)),
        std::move(levels[i]));
}

// The embedding group of one pipeline group `ranks` (its stages in order).
RankList embedding_ranks(const RankList& ranks, const LayoutSpec& spec) {
  // megatron.core default_embedding_ranks: the first and last stage.
  if (spec.core_embedding_ranks) return ranks.size() == 1 ? RankList{ranks.front()} : RankList{ranks.front(), ranks.back()};
  // pretrain_gpt.py get_embedding_ranks: the first stage; the last with tied embeddings; MTP stages.
  RankList e = {ranks.front()};
  if (ranks.size() > 1) {
    if (!spec.untie_embeddings) e.push_back(ranks.back());
    if (spec.mtp_num_layers) {
      if (spec.pp_layout_stages.empty()) {
        e.push_back(ranks.back());
      } else {
        // Stage i of the flattened layout belongs to pipeline rank i % PP (vpp-major order).
        for (size_t i = 0; i < spec.pp_layout_stages.size(); ++i)
          if (spec.pp_layout_stages[i].find('m') != std::string::npos) e.push_back(ranks[i % ranks.size()]);
      }
    }
  }
  std::set<int> uniq(e.begin(), e.end());
  e.assign(uniq.begin(), uniq.end());
  return e;
}

// The pipeline groups and, from each, the embedding group and the position-embedding group (its first stage).
void add_pipeline_and_embedding_groups(Layout& L, const RankGenerator& dense, const LayoutSpec& spec) {
  RankGroups pp_groups = dense.get_ranks("pp");
  RankGroups embedding, position_embedding;
  for (const RankList& ranks : pp_groups) {
    embedding.push_back(embedding_ranks(ranks, spec));
    position_embedding.push_back({ranks.front()});
  }
  add(L, "pp", "PIPELINE_MODEL_PARALLEL_GROUP", pp_groups);
  add(L, "embedding", "EMBEDDING_GROUP", std::move(embedding));
  add(L, "position-embedding", "POSITION_EMBEDDING_GROUP", std::move(position_embedding));
}

// The expert layers' groups (EP, expert TP, expert DP and their combinations; the expert DP slices per
// distributed-optimizer instance). Returns the expert TP x EP x PP groups, from which the distributed-optimizer
// instance group is made.
RankGroups add_expert_groups(Layout& L, const RankGenerator& expert, const LayoutSpec& spec) {
  const int64_t instances = spec.num_distributed_optimizer_instances, egtp = spec.expert_gtp_remat;
  if (egtp > 1) add(L, "expert-gtp", "EXPERT_GTP_WEIGHT_REMAT_GROUP", expert.get_ranks("gtp_remat"));
  add(L, "ep", "EXPERT_MODEL_PARALLEL_GROUP", expert.get_ranks("ep"));
  add(L, "expert-tp", "EXPERT_TENSOR_PARALLEL_GROUP", expert.get_ranks("tp"));
  add(L, "expert-tp-ep", "EXPERT_TENSOR_AND_MODEL_PARALLEL_GROUP", expert.get_ranks("tp-ep"));
  RankGroups tp_ep_pp = expert.get_ranks("tp-ep-pp");
  add(L, "expert-tp-ep-pp", "EXPERT_TENSOR_MODEL_PIPELINE_PARALLEL_GROUP", tp_ep_pp);
  if (egtp > 1)
    add(L, "expert-tp-ep-gtp-pp", "EXPERT_TENSOR_MODEL_PIPELINE_PARALLEL_GROUP_WITH_EGTP",
        expert.get_ranks("tp-ep-gtp_remat-pp"));
  if (L.expert_dp % instances != 0)
    throw LayoutError("the expert data-parallel size (" + str(L.expert_dp) + ") is not divisible by " +
                          flag(ArgId::num_distributed_optimizer_instances) + " (" + str(instances) + ")",
                      {ArgId::num_distributed_optimizer_instances});
  const int64_t intra_edp = L.expert_dp / instances;
  RankGroups expert_dp = expert.get_ranks("dp");
  add(L, "expert-dp", "EXPERT_DATA_PARALLEL_GROUP", expert_dp);
  if (instances > 1) {
    RankGroups intra, inter;
    for (const RankList& g : expert_dp) {
      std::vector<RankGroups> h = hierarchical_groups(g, {intra_edp, instances});
      intra.insert(intra.end(), h[0].begin(), h[0].end());
      inter.insert(inter.end(), h[1].begin(), h[1].end());
    }
    add(L, "intra-expert-dp", "INTRA_PARTIAL_EXPERT_DATA_PARALLEL_GROUP", std::move(intra));
    // Megatron's inter distributed-optimizer-instance group (shared by the dense and expert layers).
    add(L, "inter-expert-dp", "INTER_PARTIAL_EXPERT_DATA_PARALLEL_GROUP", std::move(inter));
  }
  if (egtp > 1) add(L, "expert-gtp-dp", "EXPERT_DATA_PARALLEL_GROUP_WITH_GTP_REMAT", expert.get_ranks("gtp_remat-dp"));
  return tp_ep_pp;
}

// The intra distributed-optimizer instance group: runs of expert-DP / instances consecutive expert
// TP x EP x PP groups (all of them in one group with GTP).
void add_distributed_optimizer_group(Layout& L, const RankGroups& tp_ep_pp, const LayoutSpec& spec) {
  const int64_t intra_edp = L.expert_dp / spec.num_distributed_optimizer_instances;
  RankGroups intra_opt;
  if (spec.gtp_remat > 1 || spec.expert_gtp_remat > 1) {
    RankList all;
    for (const RankList& g : tp_ep_pp) all.insert(all.end(), g.begin(), g.end());
    intra_opt.push_back(std::move(all));
  } else {
    RankList acc;
    int64_t n = 0;
    for (const RankList& g : tp_ep_pp) {
      ++n;
      acc.insert(acc.end(), g.begin(), g.end());
      if (n % intra_edp == 0) {
        intra_opt.push_back(acc);
        acc.clear();
      }
    }
  }
  add(L, "intra-dist-opt", "INTRA_DISTRIBUTED_OPTIMIZER_INSTANCE_GROUP", std::move(intra_opt));
}

}  // namespace

Layout Layout::build(const LayoutSpec& spec) {
  check_sizes(spec);
  const Generators gen = make_generators(spec);
  Layout L;
  L.spec = spec;
  L.dp = gen.dp, L.etp = gen.etp, L.expert_dp = gen.edp;
  // Creation order of initialize_model_parallel(): the dense layers' groups, the pipeline and embedding groups,
  // the dense combinations, the expert groups, the distributed-optimizer instance group.
  add_data_parallel_groups(L, gen.dense, spec);
  add_context_parallel_groups(L, gen.dense, spec);
  add(L, "tp-pp", "MODEL_PARALLEL_GROUP", gen.dense.get_ranks("tp-gtp_remat-pp"));
  add(L, "tp", "TENSOR_MODEL_PARALLEL_GROUP", gen.dense.get_ranks("tp"));
  add_pipeline_and_embedding_groups(L, gen.dense, spec);
  add(L, "tp-dp-cp", "TENSOR_AND_DATA_PARALLEL_GROUP_WITH_CP", gen.dense.get_ranks("tp-gtp_remat-dp-cp"));
  add(L, "tp-dp", "TENSOR_AND_DATA_PARALLEL_GROUP", gen.dense.get_ranks("tp-gtp_remat-dp"));
  add(L, "tp-cp", "TENSOR_AND_CONTEXT_PARALLEL_GROUP", gen.dense.get_ranks("tp-cp"));
  const RankGroups tp_ep_pp = add_expert_groups(L, gen.expert, spec);
  add_distributed_optimizer_group(L, tp_ep_pp, spec);
  return L;
}

std::string Layout::json() const {
  std::string out = "{\"world_size\": " + str(spec.world_size) + ", \"groups\": {";
  std::vector<const GroupSet*> ordered;
  for (const std::string& n : primary_group_names())
    if (const GroupSet* s = find(n)) ordered.push_back(s);
  for (const GroupSet& s : sets)
    if (std::find(ordered.begin(), ordered.end(), &s) == ordered.end()) ordered.push_back(&s);
  for (size_t i = 0; i < ordered.size(); ++i) {
    out += (i ? ", \"" : "\"") + ordered[i]->name + "\": [";
    for (size_t g = 0; g < ordered[i]->groups.size(); ++g) out += (g ? ", " : "") + list_str(ordered[i]->groups[g]);
    out += "]";
  }
  return out + "}}";
}

std::string Layout::text() const {
  std::ostringstream os;
  os << "world size " << spec.world_size << ", rank order " << spec.order() << ": TP=" << spec.tp
     << " PP=" << spec.pp << " CP=" << spec.cp << " DP=" << dp << " | EP=" << spec.ep << " expert TP=" << etp
     << " expert DP=" << expert_dp;
  if (spec.gtp_remat > 1) os << " GTP=" << spec.gtp_remat;
  if (spec.expert_gtp_remat > 1) os << " expert GTP=" << spec.expert_gtp_remat;
  if (spec.num_distributed_optimizer_instances > 1)
    os << " | distributed-optimizer instances=" << spec.num_distributed_optimizer_instances;
  os << "\n";
  std::vector<const GroupSet*> ordered;
  for (const std::string& n : primary_group_names())
    if (const GroupSet* s = find(n)) ordered.push_back(s);
  for (const GroupSet& s : sets)
    if (std::find(ordered.begin(), ordered.end(), &s) == ordered.end()) ordered.push_back(&s);
  size_t width = 0;
  for (const GroupSet* s : ordered) width = std::max(width, s->name.size());
  for (const GroupSet* s : ordered) {
    os << s->name << std::string(width - s->name.size() + 2, ' ');
    for (size_t g = 0; g < s->groups.size(); ++g) os << (g ? " " : "") << list_str(s->groups[g]);
    os << "\n";
  }
  return os.str();
}

}  // namespace mr::parallel
