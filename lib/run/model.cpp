#include "run/model.h"
#include "run/tokenizer_vocab.h"

#include <cmath>
#include <numeric>

#include "config/checked.h"
#include "config/pipeline_layout.h"
#include "optim/optimizer_table.h"
#include "run/heterogeneous_layers.h"
#include "run/hybrid_layers.h"
#include "run/model_plan.h"

namespace mr::run {

namespace gpt_plan {

// Sizes are products of the user's numbers: checked, a result beyond 64 bits is a RunError naming what it is.
int64_t mul(int64_t a, int64_t b, const std::string& what) {
  if (auto r = checked_mul(a, b)) return *r;
  throw RunError(what + " (" + std::to_string(a) + " x " + std::to_string(b) +
                 ") does not fit in a 64-bit integer; no model of that size can be allocated");
}
int64_t sum(int64_t a, int64_t b, const std::string& what) {
  if (auto r = checked_add(a, b)) return *r;
  throw RunError(what + " (" + std::to_string(a) + " + " + std::to_string(b) +
                 ") does not fit in a 64-bit integer; no model of that size can be allocated");
}

// A size the plan needs: at least `min` (the sanity stage refuses smaller ones before; this keeps the plan safe
// on its own).
int64_t at_least(int64_t v, int64_t min, const char* flag) {
  if (v < min)
    throw RunError(std::string(flag) + " (" + std::to_string(v) + ") must be at least " + std::to_string(min) +
                   " for the model plan");
  return v;
}

int64_t split(int64_t n, int64_t parts, const char* what) {
  if (parts < 1 || n % parts != 0)
    throw RunError(std::string(what) + " (" + std::to_string(n) + ") is not divisible by the tensor-parallel size " +
                   std::to_string(parts) + " (--tensor-model-parallel-size)");
  return n / parts;
}

}  // namespace gpt_plan

using gpt_plan::at_least;
using gpt_plan::mul;
using gpt_plan::sum;

int64_t ParamSpec::numel() const {
  int64_t n = 1;
  for (int64_t v : shape)
    if (__builtin_mul_overflow(n, v, &n))
      throw RunError("the size of " + name + " does not fit in a 64-bit integer; no model of that size can be "
                     "allocated");
  return n;
}

bool ModelPlan::has_experts() const {
  for (const ParamSpec& p : params)
    if (p.expert) return true;
  return false;
}

int64_t ModelPlan::numel() const {
  int64_t n = 0;
  for (const ParamSpec& p : params) n = sum(n, p.numel(), "the parameters of a rank");
  return n;
}

int64_t ModelPlan::megatron_numel() const {
  int64_t n = numel();
  for (const ParamSpec& p : unused) n = sum(n, p.numel(), "the parameters of a rank");
  return n;
}

int64_t padded_vocab_size(int64_t vocab_size, int64_t divisible_by, int64_t tp_size) {
  const int64_t multiple = mul(std::max<int64_t>(1, divisible_by), std::max<int64_t>(1, tp_size),
                               "--make-vocab-size-divisible-by x --tensor-model-parallel-size");
  const int64_t rounded_up = sum(vocab_size, multiple - 1, "the padded --vocab-size");
  return mul(rounded_up / multiple, multiple, "the padded --vocab-size");
}

std::vector<int64_t> pipeline_layers(int64_t num_layers, int64_t pp_rank, int64_t pp_size, int64_t vpp_size,
                                     int64_t first_stage_layers, int64_t last_stage_layers, bool embedding_in_split,
                                     bool loss_in_split) {
  std::vector<int64_t> out;
  if (num_layers < 0 || num_layers > kMaxPlanLayers)
    throw RunError("--num-layers " + std::to_string(num_layers) + " is outside what the model plan handles (0 to " +
                   std::to_string(kMaxPlanLayers) + " layers)");
  if (pp_size < 1 || pp_rank < 0 || pp_rank >= pp_size)
    throw RunError("pipeline rank " + std::to_string(pp_rank) + " of " + std::to_string(pp_size) +
                   " stages (--pipeline-model-parallel-size) does not exist");
  // Megatron's get_num_layers_to_build (how many layers a virtual chunk of a stage builds) and
  // get_transformer_layer_offset (the global index of its first), chunk by chunk.
  const int64_t vp = std::max<int64_t>(1, vpp_size);
  const bool interleaved = vpp_size > 1 && pp_size > 1;
  if (interleaved && vp > kMaxPlanLayers)  // (a stage of 0 layers would split into any number of chunks)
    throw RunError(std::to_string(vp) + " virtual pipeline chunks per stage are more than the " +
                   std::to_string(kMaxPlanLayers) + " layers the model plan handles");
  const int64_t first = pp_size > 1 ? first_stage_layers : -1, last = pp_size > 1 ? last_stage_layers : -1;
  const bool uneven = first >= 0 || last >= 0;
  if (uneven && (embedding_in_split || loss_in_split))
    throw RunError("--decoder-first/last-pipeline-num-layers cannot be combined with "
                   "--account-for-embedding/loss-in-pipeline-split");
  const int64_t first_n = std::max<int64_t>(first, 0), last_n = std::max<int64_t>(last, 0);
  if (first > num_layers || last > num_layers || first_n + last_n > num_layers)
    throw RunError(std::string(first >= 0 ? "--decoder-first-pipeline-num-layers " + std::to_string(first) : "") +
                   (first >= 0 && last >= 0 ? " and " : "") +
                   (last >= 0 ? "--decoder-last-pipeline-num-layers " + std::to_string(last) : "") +
                   " ask for more than the " + std::to_string(num_layers) + " layers of --num-layers");
  const int64_t middle_layers = num_layers - first_n - last_n;
  const int64_t middle_stages = pp_size - (first >= 0) - (last >= 0);
  // The embedding and the loss count as a layer each in the split, when asked.
  const int64_t split_layers = num_layers + (embedding_in_split ? 1 : 0) + (loss_in_split ? 1 : 0);
  int64_t per_stage = 0;  // this pipeline rank's share, before its virtual chunks
  if (uneven) {
    if (middle_stages == 0 && middle_layers != 0)
      throw RunError("the " + std::to_string(middle_layers) + " layers left after --decoder-first/last-pipeline-num-layers "
                     "have no middle pipeline stage to go to");
    if (middle_stages > 0 && middle_layers % middle_stages != 0)
      throw RunError("the layers left after --decoder-first/last-pipeline-num-layers (" + std::to_string(middle_layers) +
                     ") do not divide over the other " + std::to_string(middle_stages) + " pipeline stages");
    per_stage = middle_stages > 0 ? middle_layers / middle_stages : 0;
    if (pp_rank == 0 && first >= 0) per_stage = first;
    if (pp_rank == pp_size - 1 && last >= 0) per_stage = last;
  } else {
    const auto stages = checked_mul(pp_size, vp);
    if (!stages || split_layers % *stages != 0)
      throw RunError("--num-layers " + std::to_string(num_layers) +
                     (split_layers != num_layers ? " (+ the embedding and/or the loss: " + std::to_string(split_layers) + ")"
                                                 : std::string()) +
                     " does not divide into " + std::to_string(pp_size) + " pipeline stages x " + std::to_string(vp) +
                     " virtual chunks");
    per_stage = split_layers / pp_size;
  }
  if (interleaved && per_stage % vp != 0)
    throw RunError("pipeline stage " + std::to_string(pp_rank) + "'s " + std::to_string(per_stage) +
                   " layers do not split into " + std::to_string(vp) + " virtual chunks");
  const int64_t per_chunk_here = interleaved ? per_stage / vp : per_stage;
  for (int64_t vs = 0; vs < (interleaved ? vp : 1); ++vs) {
    const bool first_chunk = vs == 0, last_chunk = vs == (interleaved ? vp : 1) - 1;
    int64_t count = per_chunk_here;
    if (embedding_in_split && first_chunk && pp_rank == 0) --count;
    if (loss_in_split && last_chunk && pp_rank == pp_size - 1) --count;
    if (count < 0)
      throw RunError("pipeline stage " + std::to_string(pp_rank) + " has no layer left for the " +
                     (embedding_in_split && pp_rank == 0 ? "embedding" : "loss") +
                     " (--account-for-embedding/loss-in-pipeline-split)");
    int64_t offset = 0;
    if (pp_size > 1) {
      if (uneven) {
        const int64_t middle_rank = first >= 0 ? pp_rank - 1 : pp_rank;
        if (interleaved) {
          const int64_t first_chunk_n = first >= 0 ? first / vp : 0, last_chunk_n = last >= 0 ? last / vp : 0;
          const int64_t middle_chunk_n = middle_layers / vp;
          const int64_t total = first_chunk_n + middle_chunk_n + last_chunk_n;
          offset = pp_rank == 0 ? vs * total
                                : vs * total + first_chunk_n + middle_rank * (middle_stages > 0 ? middle_chunk_n / middle_stages : 0);
        } else {
          offset = pp_rank == 0 ? 0 : middle_rank * (middle_stages > 0 ? middle_layers / middle_stages : 0) + first_n;
        }
      } else {
        offset = interleaved ? vs * (split_layers / vp) + pp_rank * (per_stage / vp) : pp_rank * per_stage;
        if (embedding_in_split && !(first_chunk && pp_rank == 0)) --offset;
      }
    }
    for (int64_t i = 0; i < count; ++i) out.push_back(offset + i);
  }
  return out;
}

pipeline_layout::RankStages layout_layers(const std::string& layout, int64_t num_layers, int64_t mtp_num_layers,
                                          const RankCoord& at) {
  const std::string flag = "--pipeline-model-parallel-layout '" + layout + "'";
  const pipeline_layout::Layout parsed = pipeline_layout::parse(layout);
  if (parsed.too_large || !parsed.bad_char.empty())
    throw RunError(flag + " is not a layout the model plan can read (E, t, m, L, '|', '(...)*n', 'x*n')");
  const int64_t stages = static_cast<int64_t>(parsed.stages.size());
  if (at.pp_size < 1 || at.pp_rank < 0 || at.pp_rank >= at.pp_size || stages % at.pp_size != 0)
    throw RunError(flag + " has " + std::to_string(stages) + " stages, not a multiple of the " +
                   std::to_string(at.pp_size) + " pipeline ranks (--pipeline-model-parallel-size)");
  const pipeline_layout::Check c = pipeline_layout::check_layers(parsed.stages, at.pp_size, num_layers, mtp_num_layers);
  if (c.problem != pipeline_layout::Check::Problem::None) throw RunError(flag + ": " + c.what);
  pipeline_layout::RankStages laid = pipeline_layout::rank_stages(parsed.stages, at.pp_size, at.pp_rank);
  // Megatron would build a second embedding in the first rank's MTP chunk; the plan holds one per rank.
  if (laid.mtp_layers > 0 && at.pp_rank == 0 && at.pp_size > 1)
    throw RunError(flag + " puts the MTP layers on the first pipeline rank: the model plan does not model that");
  return laid;
}


namespace gpt_plan {

ParamSpec& Builder::add(std::string name, std::vector<int64_t> full, int split_dim) const {
  ParamSpec p;
  p.name = std::move(name);
  p.full_shape = full;
  p.shape = full;
  p.split_dim = split_dim;
  if (split_dim >= 0) p.shape[static_cast<size_t>(split_dim)] = split(full[static_cast<size_t>(split_dim)], tp, p.name.c_str());
  p.tp_duplicate = split_dim < 0 && tp > 1;
  const bool is_bias = p.name.size() >= 5 && p.name.compare(p.name.size() - 5, 5, ".bias") == 0;
  p.no_weight_decay = is_bias || p.shape.size() == 1;
  if (is_bias) p.init = ParamSpec::Init::Zero;
  p.key = p.name;
  (void)p.numel();  // a shape whose size does not fit in 64 bits is a RunError here, naming the tensor
  if (plan.params.size() >= kMaxPlanTensors)
    throw RunError("the model plan would hold more than " + std::to_string(kMaxPlanTensors) +
                   " parameter tensors per rank (--num-layers, --num-experts)");
  plan.params.push_back(std::move(p));
  return plan.params.back();
}

void Builder::norm(const std::string& prefix, int64_t width) const {
  ParamSpec& w = add(prefix + "weight", {width}, -1);
  w.init = ParamSpec::Init::One;
  w.rmsnorm_gamma = rmsnorm_mult && !layernorm;
  if (layernorm) add(prefix + "bias", {width}, -1).init = ParamSpec::Init::Zero;
}

namespace {

// The plan is the decoder pretrain_gpt.py (and pretrain_mamba.py) builds. Megatron's other model families share
// its arguments; where a config says it is one of them, refuse rather than count it as a GPT decoder (T5's decoder
// stack with cross-attention, BERT's pooler and heads would be missing). Megatron's arguments say it for these
// two only; a BERT or multimodal config that gives neither flag is counted as the GPT model of its sizes
// (docs/run.md says so).
void refuse_other_model_families(const Args& a) {
  if (a.decoder_num_layers)
    throw RunError("--decoder-num-layers (" + std::to_string(*a.decoder_num_layers) +
                   ") is an encoder-decoder model's (T5, Megatron's pretrain_t5.py): the model plan is the GPT or "
                   "hybrid decoder of pretrain_gpt.py / pretrain_mamba.py and does not model T5's encoder and decoder "
                   "stacks");
  if (!a.bert_binary_head)
    throw RunError("--bert-no-binary-head is BERT's (Megatron's pretrain_bert.py): the model plan is the GPT or "
                   "hybrid decoder of pretrain_gpt.py / pretrain_mamba.py and does not model BERT's pooler and heads");
}

// What this synthetic run does not model: say so, naming the flag.
void refuse_unmodelled_options(const Args& a) {
  if (a.multi_latent_attention && a.mla_down_proj_fusion && a.experimental_attention_variant)
    throw RunError("the training run does not model --mla-down-proj-fusion with --experimental-attention-variant yet");
  // Options that add or rename parameters in ways the plan does not know: refused rather than miscounted.
  if (a.enable_mhc_connections)
    throw RunError("the training run does not model --enable-mhc-connections (the hyper-connections' parameters) yet");
  if (a.wide_residual_num_streams)
    throw RunError("the training run does not model --wide-residual (the wide residual streams' parameters) yet");
  if (a.moe_single_grouped_weight || a.moe_single_grouped_bias)
    throw RunError("the training run does not model --moe-single-grouped-weight/--moe-single-grouped-bias (all "
                   "experts in one grouped parameter) yet");
  if (!a.csa_compress_ratios.is_none())
    throw RunError("the training run does not model --csa-compress-ratios (compressed sparse attention) yet");
}

// The decoder's sizes, each checked in this order.
struct DecoderSizes {
  int64_t L = 0, h = 0, heads = 0, kv = 0, groups = 0, ffn = 0;
};
DecoderSizes decoder_sizes(const Args& a) {
  DecoderSizes d;
  d.L = at_least(a.num_layers, 0, "--num-layers");
  if (d.L > kMaxPlanLayers)
    throw RunError("--num-layers " + std::to_string(d.L) + " is more than the " + std::to_string(kMaxPlanLayers) +
                   " layers the model plan handles");
  d.h = at_least(a.hidden_size, 1, "--hidden-size");
  d.heads = at_least(a.num_attention_heads, 1, "--num-attention-heads");
  d.kv = at_least(a.kv_channels, 1, "--kv-channels");
  d.groups = at_least(a.group_query_attention ? a.num_query_groups : d.heads, 1, "--num-query-groups");
  d.ffn = at_least(a.ffn_hidden_size, 1, "--ffn-hidden-size");
  return d;
}

// The vocabulary: what the tokenizer would report, --vocab-size where Megatron passes it on (run/tokenizer_vocab.h).
int64_t vocabulary(const Args& a) {
  if (a.vocab_size) (void)at_least(*a.vocab_size, 1, "--vocab-size");
  return tokenizer_vocab_size(a);
}

// The layers this rank builds (into plan.layers) and its MTP layers: as a hybrid model's pattern places them, as
// --pipeline-model-parallel-layout does, or Megatron's split.
struct RankLayers {
  int64_t mtp_num_layers = 0;  // --mtp-num-layers
  int64_t mtp = 0;             // MTP layers on this rank
  bool hybrid = false;         // a hybrid model (Megatron's HybridModel)
  HybridLayers hy;             // its layers' symbols and its MTP pattern
};
RankLayers rank_layers(const Args& a, const RankCoord& at, int64_t L, ModelPlan& plan) {
  RankLayers r;
  r.mtp_num_layers = at_least(a.mtp_num_layers.value_or(0), 0, "--mtp-num-layers");
  r.mtp = at.pp_rank == at.pp_size - 1 ? r.mtp_num_layers : 0;
  // A hybrid model: its pattern says which layer each index is and where it runs.
  r.hybrid = a.is_hybrid_model || a.hybrid_layer_pattern || a.hybrid_override_pattern;
  if (r.hybrid) {
    const std::optional<std::string>& pattern = a.hybrid_layer_pattern ? a.hybrid_layer_pattern : a.hybrid_override_pattern;
    if (!pattern) throw RunError("--is-hybrid-model without --hybrid-layer-pattern: the model plan needs the pattern");
    r.hy = hybrid_layers(*pattern, at.pp_rank, at.pp_size, a.decoder_first_pipeline_num_layers.value_or(-1),
                         a.decoder_last_pipeline_num_layers.value_or(-1));
    plan.layers = r.hy.index;
    if (r.mtp > 0 && r.hy.mtp_pattern.empty())
      throw RunError("--mtp-num-layers with a hybrid model needs the MTP layers' pattern after '/' in "
                     "--hybrid-layer-pattern");
  } else if (a.pipeline_model_parallel_layout && !a.pipeline_model_parallel_layout->empty()) {
    const pipeline_layout::RankStages laid = layout_layers(*a.pipeline_model_parallel_layout, L, a.mtp_num_layers.value_or(-1), at);
    plan.layers = laid.decoder_layers;
    r.mtp = laid.mtp_layers;
  } else {
    plan.layers = pipeline_layers(L, at.pp_rank, at.pp_size, a.virtual_pipeline_model_parallel_size.value_or(1),
                                  a.decoder_first_pipeline_num_layers.value_or(-1),
                                  a.decoder_last_pipeline_num_layers.value_or(-1),
                                  a.account_for_embedding_in_pipeline_split, a.account_for_loss_in_pipeline_split);
  }
  return r;
}

// The first stage's word embeddings, and its position embeddings when learned.
void add_embeddings(const Builder& b) {
  const Args& a = b.a;
  b.add("embedding.word_embeddings.weight", {b.plan.padded_vocab_size, b.h}, 0).embedding_or_output = true;
  if (a.position_embedding_type == arg::PositionEmbeddingType::learned_absolute) {
    const int64_t positions = a.max_position_embeddings;
    // Not an "embedding or output" parameter to Megatron (language_module.py marks the word embeddings and the
    // output layer only): --decoupled-lr does not apply, and Muon and lion take it as a 2-D weight.
    b.add("embedding.position_embeddings.weight", {at_least(positions, 0, "--max-position-embeddings"), b.h}, -1);
  }
}

// The Mamba layers' sizes, where the hybrid pattern has any (its MTP layers too).
MambaSizes hybrid_mamba_sizes(const Args& a, const RankLayers& r, int64_t h, int64_t tp) {
  const bool has_mamba = r.hybrid && (r.hy.symbols + r.hy.mtp_pattern).find('M') != std::string::npos;
  return has_mamba ? mamba_sizes(h, a.mamba_head_dim, a.mamba_num_groups, a.mamba_state_dim,
                                 a.mamba_num_heads.value_or(0), tp)
                   : MambaSizes{};
}

// A heterogeneous model (--heterogeneous-layers-config-path, read into --heterogeneous-layers-config-encoded-json
// by validation): each decoder layer is its block of the config (Megatron's get_gpt_heterogeneous_layer_spec):
// attention and MLP each as usual (with the block's query groups / MLP size), gone, or one hidden x hidden
// linear layer. The spec has no MoE, MLA, hybrid or experimental attention, and the plan no MTP layers for it.
// Megatron builds the heterogeneous layers only for --heterogeneous-layers-config-path (the encoded JSON alone is
// checked against the flags, and the layers stay uniform: gpt_builders.py). Empty for other models.
std::vector<HeterogeneousBlock> heterogeneous_layer_blocks(const Args& a, const DecoderSizes& d, const RankLayers& r,
                                                           int64_t experts) {
  std::vector<HeterogeneousBlock> blocks;
  if (!a.heterogeneous_layers_config_path.has_value()) return blocks;
  const char* other = r.hybrid ? "a hybrid model" : experts > 0 ? "--num-experts" : a.multi_latent_attention ? "--multi-latent-attention"
                      : a.experimental_attention_variant ? "--experimental-attention-variant" : r.mtp_num_layers > 0 ? "--mtp-num-layers" : nullptr;
  if (other)
    throw RunError(std::string("the training run does not model heterogeneous layer configs with ") + other +
                   " (Megatron's heterogeneous layer spec has none)");
  if (!a.heterogeneous_layers_config_encoded_json)
    throw RunError("the heterogeneous layers config's text is missing (validation reads "
                   "--heterogeneous-layers-config-path into --heterogeneous-layers-config-encoded-json)");
  blocks = heterogeneous_blocks(*a.heterogeneous_layers_config_encoded_json, d.heads, d.h);
  if (static_cast<int64_t>(blocks.size()) < d.L)
    throw RunError("the heterogeneous layers config has " + std::to_string(blocks.size()) +
                   " block_configs for --num-layers " + std::to_string(d.L));
  return blocks;
}

// A dense MLP with its norm. `layer_ffn`: a heterogeneous block's own MLP size (0: --ffn-hidden-size).
void add_mlp(const Layers& m, const std::string& p, int64_t layer_ffn = 0) {
  const Builder& b = m.b;
  const bool gated = b.a.swiglu;  // (Megatron has no --gated-linear-unit flag: swiglu sets gated_linear_unit)
  const int64_t f = layer_ffn > 0 ? layer_ffn : m.ffn;
  const int64_t f1 = layer_ffn > 0 ? (gated ? mul(2, f, "2 x the block's ffn_hidden_size") : f) : m.fc1_out;
  b.norm(p + (b.te ? "mlp.linear_fc1.layer_norm_" : "pre_mlp_layernorm."), b.h);
  b.add(p + "mlp.linear_fc1.weight", {f1, b.h}, 0);
  if (b.bias) b.add(p + "mlp.linear_fc1.bias", {f1}, 0);
  b.add(p + "mlp.linear_fc2.weight", {b.h, f}, 1);
  if (b.bias) b.add(p + "mlp.linear_fc2.bias", {b.h}, -1);
}

// A Mamba layer of a hybrid model (Megatron's MambaLayer with MambaMixer, the TE spec: the norm fused into
// in_proj). in_proj packs z, x, B, C and dt, conv1d x, B and C, each part split over TP on its own (Megatron's
// partition_sizes); the plan gives the shard its size.
void add_mamba(const Layers& m, const std::string& p) {
  const Builder& b = m.b;
  const MambaSizes& mamba = m.mamba;
  const std::string mx = p + "mixer.";
  b.norm(b.te ? mx + "in_proj.layer_norm_" : p + "norm.", b.h);
  // in_proj's rows z, x, B, C, dt and conv1d's channels x, B, C: TP splits each part (a rank holds its slice
  // of each, back to back, as MambaMixer splits its local in_proj output).
  const int64_t bc = mamba.groups * mamba.state;
  ParamSpec& in_proj = b.add(mx + "in_proj.weight", {mamba.in_proj, b.h}, 0);
  in_proj.use_muon = false;  // as Megatron marks it
  in_proj.split_parts = {mamba.d_inner, mamba.d_inner, bc, bc, mamba.heads};
  b.add(mx + "conv1d_weight", {mamba.conv_dim, 1, kMambaConv}, 0).split_parts = {mamba.d_inner, bc, bc};
  ParamSpec& conv_bias = b.add(mx + "conv1d_bias", {mamba.conv_dim}, 0);
  conv_bias.init = ParamSpec::Init::Zero;
  conv_bias.split_parts = {mamba.d_inner, bc, bc};
  b.add(mx + "dt_bias", {mamba.heads}, 0).init = ParamSpec::Init::Zero;
  b.add(mx + "A_log", {mamba.heads}, 0);
  b.add(mx + "D", {mamba.heads}, 0).init = ParamSpec::Init::One;
  ParamSpec& gated_norm = b.add(mx + "norm.weight", {mamba.d_inner}, 0);  // an RMSNorm whatever --normalization says
  gated_norm.init = ParamSpec::Init::One;
  gated_norm.rmsnorm_gamma = b.rmsnorm_mult;
  b.add(mx + "out_proj.weight", {b.h, mamba.d_inner}, 1);
}

// A GPT transformer layer: attention (gdn: a gated delta net in its place, its norm fused into in_proj), then a
// dense MLP or (moe) the MoE block.
void add_layer(const Layers& m, const std::string& p, bool moe, bool gdn) {
  if (gdn) add_gdn(m, p, m.gdn2);
  else add_attention(m, p, m.mla.on, true, m.dsa);
  if (moe) add_moe(m, p);
  else add_mlp(m, p);
}

// A heterogeneous model's layer (get_gpt_heterogeneous_layer_spec): a part that is gone has no parameters and no
// norm; a linear replacement is (TE) TELayerNormColumnParallelLinearGathered, hidden -> hidden with the norm in
// it, or (local) ColumnParallelLinearGathered after the layer's own norm; split by rows over TP.
void add_block(const Layers& m, const std::string& p, const HeterogeneousBlock& blk, int64_t index) {
  const Builder& b = m.b;
  const int64_t h = b.h, tp = b.tp, heads = m.qkv.heads;
  auto linear = [&](const std::string& module, const char* local_norm) {
    b.norm(b.te ? p + module + "layer_norm_" : p + local_norm, h);
    b.add(p + module + "weight", {h, h}, 0);
    if (b.bias) b.add(p + module + "bias", {h}, 0);
  };
  if (blk.attention == BlockPart::Linear) linear("self_attention.", "input_layernorm.");
  if (blk.attention == BlockPart::Normal) {
    const int64_t g = blk.num_query_groups.value_or(m.qkv.groups);
    // TransformerConfig's rules for the block's own config: heads in whole groups; groups a multiple or a
    // divisor of TP.
    if (g <= 0 || heads % g != 0 || (g % tp != 0 && tp % g != 0))
      throw RunError("block_configs[" + std::to_string(index) + "] has " + std::to_string(g) +
                     " query groups: it must divide --num-attention-heads (" + std::to_string(heads) +
                     ") and be a multiple or a divisor of --tensor-model-parallel-size (" + std::to_string(tp) + ")");
    add_attention(m, p, false, true, false,
                  mul(sum(m.qkv.q_rows, mul(2, g, "2 x the block's query groups"), "the attention heads"), m.qkv.kv,
                      "the block's QKV projection width"));
  }
  if (blk.mlp == BlockPart::Linear) linear("mlp.", "pre_mlp_layernorm.");
  if (blk.mlp == BlockPart::Normal)
    add_mlp(m, p, at_least(blk.ffn_hidden_size.value_or(m.ffn), 1,
                           ("block_configs[" + std::to_string(index) + "]'s ffn_hidden_size").c_str()));
}

// A layer of a hybrid model by its symbol (Megatron's HybridStack with hybrid_stack_spec): 'M' Mamba, 'G' gated
// delta net, '*' attention (SelfAttention), '+' multi-latent attention (MLASelfAttention with its own input norm;
// validation refuses a pattern with both), '-' MLP, 'E' MoE. The spec gives neither attention q/k norms
// (--qk-layernorm has no parameters there).
void add_hybrid_layer(const Layers& m, const std::string& p, char symbol) {
  switch (symbol) {
    case 'M': add_mamba(m, p); return;
    case 'G': add_gdn(m, p, false); return;  // (hybrid_stack_spec: GatedDeltaNet)
    case '*': add_attention(m, p, false, false); return;
    case '+':
    case 'D':
      // (Validation turns --multi-latent-attention on for a pattern with '+' or 'D', as Megatron's.)
      if (!m.mla.on)
        throw RunError(std::string("the hybrid layer symbol '") + symbol + "' (" + (symbol == 'D' ? "DSA" : "MLA") +
                       ") needs --multi-latent-attention");
      add_attention(m, p, true, false, symbol == 'D');
      return;
    case '-': add_mlp(m, p); return;
    case 'E': add_moe(m, p); return;
    default:
      throw RunError(std::string("the model plan does not model the hybrid layer symbol '") + symbol +
                     "' (--hybrid-layer-pattern; it models M, G, *, +, D, - and E)");
  }
}

// Multi-token prediction (--mtp-num-layers, Megatron's MultiTokenPredictionBlock on the last stage): each MTP
// layer normalises the embedding and the hidden states (enorm, hnorm), projects their concatenation 2h -> h
// (eh_proj, split by TP like a column-parallel linear), runs one transformer layer of the last decoder layer's kind
// (a hybrid model: a stack of the MTP pattern's layers) and its own final norm. --mtp-use-repeated-layer: one MTP
// layer, applied at every depth.
void add_mtp_layers(const Layers& m, const RankLayers& r, int64_t L, const std::vector<bool>& moe_layer,
                    const std::vector<bool>& gdn_layer) {
  const Builder& b = m.b;
  const int64_t h = b.h;
  const int64_t mtp_built = b.a.mtp_use_repeated_layer ? std::min<int64_t>(r.mtp, 1) : r.mtp;
  for (int64_t i = 0; i < mtp_built; ++i) {
    const std::string p = "mtp.layers." + std::to_string(i) + ".";
    b.norm(p + "enorm.", h);
    b.norm(p + "hnorm.", h);
    b.add(p + "eh_proj.weight", {h, mul(2, h, "2 x --hidden-size")}, 0);
    if (r.hybrid) {  // a stack of the MTP pattern's layers
      for (size_t j = 0; j < r.hy.mtp_pattern.size(); ++j)
        add_hybrid_layer(m, p + "mtp_model_layer.layers." + std::to_string(j) + ".", r.hy.mtp_pattern[j]);
    } else {
      add_layer(m, p + "mtp_model_layer.", L > 0 && moe_layer[static_cast<size_t>(L - 1)],  // the last layer's kind
                L > 0 && gdn_layer[static_cast<size_t>(L - 1)]);
    }
    b.norm(p + "final_layernorm.", h);
  }
}

// The last stage's output layer. `mtp_embedding`: this stage holds an embedding copy for its MTP layers.
void add_output_layer(const Builder& b, bool mtp_embedding) {
  const bool tied = !b.a.untie_embeddings_and_output_weights;
  ModelPlan& plan = b.plan;
  if (!tied || (b.at.pp_size > 1 && !mtp_embedding)) {
    ParamSpec& out = b.add("output_layer.weight", {plan.padded_vocab_size, b.h}, 0);
    out.embedding_or_output = true;
    // Tied weights on several stages: the last stage keeps a copy of the word embeddings, kept equal to the
    // first stage's by summing the two gradients (the "embedding" group); norms count the first stage's only.
    out.shared_copy = tied;
    if (tied) out.key = "embedding.word_embeddings.weight";
  } else if (tied && mtp_embedding) {
    // The MTP stage's embedding copy is the output weight; Megatron still allocates output_layer.weight here
    // (not the first stage) and leaves it unused (ModelPlan::unused).
    ParamSpec& out = b.add("output_layer.weight", {plan.padded_vocab_size, b.h}, 0);
    out.embedding_or_output = true;
    plan.unused.push_back(std::move(out));
    plan.params.pop_back();
  }
}

}  // namespace
}  // namespace gpt_plan

ModelPlan plan_gpt_model(const Args& a, const RankCoord& at) {
  using namespace gpt_plan;
  refuse_other_model_families(a);
  refuse_unmodelled_options(a);
  const DecoderSizes d = decoder_sizes(a);
  const int64_t vocab = vocabulary(a);
  const int64_t tp = at.tp_size;

  ModelPlan plan;
  plan.padded_vocab_size = padded_vocab_size(vocab, a.make_vocab_size_divisible_by, tp);
  const RankLayers r = rank_layers(a, at, d.L, plan);
  const bool first = at.pp_rank == 0, last = at.pp_rank == at.pp_size - 1;
  const Builder b{a,
                  at,
                  plan,
                  tp,
                  d.h,
                  a.transformer_impl == arg::TransformerImpl::transformer_engine,
                  a.add_bias_linear,
                  a.normalization == arg::Normalization::LayerNorm,
                  a.rmsnorm_weight_decay_mult.has_value()};
  if (first) add_embeddings(b);

  // The sizes of the blocks, each step with its own checks, in this order.
  const QkvSizes qkv = qkv_sizes(a, d.heads, d.kv, d.groups);
  const int64_t fc1_out = a.swiglu ? mul(2, d.ffn, "2 x --ffn-hidden-size") : d.ffn;
  const MambaSizes mamba = hybrid_mamba_sizes(a, r, d.h, tp);
  const MoeLayers moe = moe_layers(a, d.L, r.hybrid);
  const std::vector<HeterogeneousBlock> blocks = heterogeneous_layer_blocks(a, d, r, moe.experts);
  const bool hetero = a.heterogeneous_layers_config_path.has_value();
  const LinearAttention linear = linear_attention(a, d.L, r.hybrid);
  const MoeSizes experts = moe_sizes(a, at, moe.experts, d.h);
  const MlaSizes mla = mla_sizes(a, d.kv);
  const Layers m{b, qkv, mla, experts, mamba, d.ffn, fc1_out, r.hybrid, linear.dsa, linear.gdn2};

  // The decoder layers: a hybrid model's by its pattern, a heterogeneous model's by its blocks, or GPT layers.
  for (size_t i = 0; i < plan.layers.size(); ++i) {
    const int64_t layer = plan.layers[i];
    const std::string p = "decoder.layers." + std::to_string(layer) + ".";
    if (r.hybrid) add_hybrid_layer(m, p, r.hy.symbols[i]);
    else if (hetero) add_block(m, p, blocks[static_cast<size_t>(layer)], layer);
    else add_layer(m, p, moe.moe_layer[static_cast<size_t>(layer)], linear.gdn_layer[static_cast<size_t>(layer)]);
  }
  // The MTP stage also embeds the tokens for its MTP layers: with several stages a copy of the word embeddings,
  // kept equal to the first stage's through the embedding group (tied or not), which is then the output layer's
  // weight too when tied. With a layout the MTP layers sit on the rank its 'm's name (Megatron's
  // mtp_on_this_rank), which need not be the last ("standalone" MTP); that rank then joins the embedding group
  // (parallel/layout.cpp).
  const bool mtp_embedding = r.mtp > 0 && at.pp_size > 1;
  if (last) b.norm(r.hybrid ? "decoder.final_norm." : "decoder.final_layernorm.", d.h);
  if (mtp_embedding) {
    ParamSpec& e = b.add("embedding.word_embeddings.weight", {plan.padded_vocab_size, d.h}, 0);
    e.embedding_or_output = true;
    e.shared_copy = true;  // the first stage's is the one counted
  }
  add_mtp_layers(m, r, d.L, moe.moe_layer, linear.gdn_layer);
  if (last) add_output_layer(b, mtp_embedding);
  // Megatron's embedding_init_method: the word and position embeddings drawn with --embedding-init-method-std when
  // it is set (the copies on later stages too: they start equal to the first stage's).
  if (a.embedding_init_method_std)
    for (ParamSpec& p : plan.params)
      if (p.key == "embedding.word_embeddings.weight" || p.key == "embedding.position_embeddings.weight")
        p.init_std = *a.embedding_init_method_std;
  return plan;
}

}  // namespace mr::run
