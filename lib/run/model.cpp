#include "run/model.h"
#include "run/tokenizer_vocab.h"

#include <cmath>
#include <numeric>

#include "config/checked.h"
#include "config/pipeline_layout.h"
#include "optim/optimizer_table.h"
#include "run/heterogeneous_layers.h"
#include "run/hybrid_layers.h"

namespace mr::run {

namespace {

int64_t need(const std::optional<int64_t>& v, const char* flag) {
  if (!v) throw RunError(std::string("the training run needs ") + flag);
  return *v;
}

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

}  // namespace

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

ModelPlan plan_gpt_model(const Args& a, const RankCoord& at) {
  // The plan is the decoder pretrain_gpt.py (and pretrain_mamba.py) builds. Megatron's other model families share
  // its arguments; where a config says it is one of them, refuse rather than count it as a GPT decoder (T5's decoder
  // stack with cross-attention, BERT's pooler and heads would be missing). Megatron's arguments say it for these
  // two only; a BERT or multimodal config that gives neither flag is counted as the GPT model of its sizes
  // (docs/run.md says so).
  if (a.decoder_num_layers)
    throw RunError("--decoder-num-layers (" + std::to_string(*a.decoder_num_layers) +
                   ") is an encoder-decoder model's (T5, Megatron's pretrain_t5.py): the model plan is the GPT or "
                   "hybrid decoder of pretrain_gpt.py / pretrain_mamba.py and does not model T5's encoder and decoder "
                   "stacks");
  if (!a.bert_binary_head)
    throw RunError("--bert-no-binary-head is BERT's (Megatron's pretrain_bert.py): the model plan is the GPT or "
                   "hybrid decoder of pretrain_gpt.py / pretrain_mamba.py and does not model BERT's pooler and heads");
  // What this synthetic run does not model: say so, naming the flag.
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

  const int64_t L = at_least(need(a.num_layers, "--num-layers"), 0, "--num-layers");
  if (L > kMaxPlanLayers)
    throw RunError("--num-layers " + std::to_string(L) + " is more than the " + std::to_string(kMaxPlanLayers) +
                   " layers the model plan handles");
  const int64_t h = at_least(need(a.hidden_size, "--hidden-size"), 1, "--hidden-size");
  const int64_t heads = at_least(need(a.num_attention_heads, "--num-attention-heads"), 1, "--num-attention-heads");
  const int64_t kv = at_least(a.kv_channels.value_or(h / heads), 1, "--kv-channels");
  const int64_t groups = at_least(a.group_query_attention ? a.num_query_groups : heads, 1, "--num-query-groups");
  const int64_t ffn = at_least(a.ffn_hidden_size ? *a.ffn_hidden_size : mul(4, h, "4 x --hidden-size"), 1,
                               "--ffn-hidden-size");
  const bool gated = a.swiglu;  // (Megatron has no --gated-linear-unit flag: swiglu sets gated_linear_unit)
  const bool layernorm = a.normalization == arg::Normalization::LayerNorm;
  const bool bias = a.add_bias_linear;
  const bool qkv_bias = bias || a.add_qkv_bias;
  const bool qk_norm = a.qk_layernorm;
  const bool wd_on_qk_norm = a.apply_wd_to_qk_layernorm;
  const bool te = a.transformer_impl == arg::TransformerImpl::transformer_engine;
  const bool tied = !a.untie_embeddings_and_output_weights;
  const bool learned_positions = a.position_embedding_type == arg::PositionEmbeddingType::learned_absolute;
  // The vocabulary: what the tokenizer would report, --vocab-size where Megatron passes it on (run/tokenizer_vocab.h).
  if (a.vocab_size) (void)at_least(*a.vocab_size, 1, "--vocab-size");
  const int64_t vocab = tokenizer_vocab_size(a);
  const int64_t tp = at.tp_size;

  ModelPlan plan;
  plan.padded_vocab_size = padded_vocab_size(vocab, a.make_vocab_size_divisible_by, tp);
  // The layers this rank builds: as --pipeline-model-parallel-layout places them, or Megatron's split.
  const int64_t mtp_num_layers = at_least(a.mtp_num_layers.value_or(0), 0, "--mtp-num-layers");
  int64_t mtp = at.pp_rank == at.pp_size - 1 ? mtp_num_layers : 0;  // MTP layers on this rank
  // A hybrid model (Megatron's HybridModel): its pattern says which layer each index is and where it runs.
  const bool hybrid = a.is_hybrid_model || a.hybrid_layer_pattern || a.hybrid_override_pattern;
  HybridLayers hy;
  if (hybrid) {
    const std::optional<std::string>& pattern = a.hybrid_layer_pattern ? a.hybrid_layer_pattern : a.hybrid_override_pattern;
    if (!pattern) throw RunError("--is-hybrid-model without --hybrid-layer-pattern: the model plan needs the pattern");
    hy = hybrid_layers(*pattern, at.pp_rank, at.pp_size, a.decoder_first_pipeline_num_layers.value_or(-1),
                       a.decoder_last_pipeline_num_layers.value_or(-1));
    plan.layers = hy.index;
    if (mtp > 0 && hy.mtp_pattern.empty())
      throw RunError("--mtp-num-layers with a hybrid model needs the MTP layers' pattern after '/' in "
                     "--hybrid-layer-pattern");
  } else if (a.pipeline_model_parallel_layout && !a.pipeline_model_parallel_layout->empty()) {
    const pipeline_layout::RankStages laid = layout_layers(*a.pipeline_model_parallel_layout, L, a.mtp_num_layers.value_or(-1), at);
    plan.layers = laid.decoder_layers;
    mtp = laid.mtp_layers;
  } else {
    plan.layers = pipeline_layers(L, at.pp_rank, at.pp_size, a.virtual_pipeline_model_parallel_size.value_or(1),
                                  a.decoder_first_pipeline_num_layers.value_or(-1),
                                  a.decoder_last_pipeline_num_layers.value_or(-1),
                                  a.account_for_embedding_in_pipeline_split, a.account_for_loss_in_pipeline_split);
  }
  const bool first = at.pp_rank == 0, last = at.pp_rank == at.pp_size - 1;

  auto add = [&](std::string name, std::vector<int64_t> full, int split_dim) -> ParamSpec& {
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
  };
  // --rmsnorm-weight-decay-mult: every RMSNorm's gamma takes the scheduled weight decay times it.
  const bool rmsnorm_mult = a.rmsnorm_weight_decay_mult.has_value();
  auto norm = [&](const std::string& prefix, int64_t width) {
    ParamSpec& w = add(prefix + "weight", {width}, -1);
    w.init = ParamSpec::Init::One;
    w.rmsnorm_gamma = rmsnorm_mult && !layernorm;
    if (layernorm) add(prefix + "bias", {width}, -1).init = ParamSpec::Init::Zero;
  };

  if (first) {
    add("embedding.word_embeddings.weight", {plan.padded_vocab_size, h}, 0).embedding_or_output = true;
    if (learned_positions) {
      const int64_t positions = a.max_position_embeddings.value_or(a.seq_length.value_or(0));
      // Not an "embedding or output" parameter to Megatron (language_module.py marks the word embeddings and the
      // output layer only): --decoupled-lr does not apply, and Muon and lion take it as a 2-D weight.
      add("embedding.position_embeddings.weight", {at_least(positions, 0, "--max-position-embeddings"), h}, -1);
    }
  }
  // --attention-output-gate: a gate per query head, in each query group's rows after its queries (so TP still
  // splits whole groups).
  const int64_t q_rows = a.attention_output_gate ? mul(2, heads, "2 x --num-attention-heads") : heads;
  const int64_t qkv_out = mul(sum(q_rows, mul(2, groups, "2 x --num-query-groups"), "the attention heads"), kv,
                              "the QKV projection width ((heads (x 2 with the output gate) + 2 x query groups) x "
                              "--kv-channels)");
  const int64_t fc1_out = gated ? mul(2, ffn, "2 x --ffn-hidden-size") : ffn;
  const bool has_mamba = hybrid && (hy.symbols + hy.mtp_pattern).find('M') != std::string::npos;  // (MTP layers too)
  const MambaSizes mamba = has_mamba ? mamba_sizes(h, a.mamba_head_dim, a.mamba_num_groups, a.mamba_state_dim,
                                                   a.mamba_num_heads.value_or(0), tp)
                                     : MambaSizes{};

  // MoE: which layers, how many experts here, their sizes.
  const int64_t experts = at_least(a.num_experts.value_or(0), 0, "--num-experts");
  std::vector<bool> moe_layer(static_cast<size_t>(L), experts > 0);
  if (experts > 0 && !hybrid) {  // (a hybrid model's MoE layers are its pattern's 'E's)
    const Value& f = a.moe_layer_freq;
    if (f.is_list()) {
      if (static_cast<int64_t>(f.as_list().size()) != L)
        throw RunError("--moe-layer-freq lists " + std::to_string(f.as_list().size()) + " layers, --num-layers is " +
                       std::to_string(L));
      for (int64_t i = 0; i < L; ++i) moe_layer[static_cast<size_t>(i)] = f.as_list()[static_cast<size_t>(i)].truthy();
    } else if (f.is_int() && f.as_int() > 0) {
      for (int64_t i = 0; i < L; ++i) moe_layer[static_cast<size_t>(i)] = i % f.as_int() == 0;
    }
  }
  // A heterogeneous model (--heterogeneous-layers-config-path, read into --heterogeneous-layers-config-encoded-json
  // by validation): each decoder layer is its block of the config (Megatron's get_gpt_heterogeneous_layer_spec):
  // attention and MLP each as usual (with the block's query groups / MLP size), gone, or one hidden x hidden
  // linear layer. The spec has no MoE, MLA, hybrid or experimental attention, and the plan no MTP layers for it.
  // Megatron builds the heterogeneous layers only for --heterogeneous-layers-config-path (the encoded JSON alone is
  // checked against the flags, and the layers stay uniform: gpt_builders.py).
  const bool hetero = a.heterogeneous_layers_config_path.has_value();
  std::vector<HeterogeneousBlock> blocks;
  if (hetero) {
    const char* other = hybrid ? "a hybrid model" : experts > 0 ? "--num-experts" : a.multi_latent_attention ? "--multi-latent-attention"
                        : a.experimental_attention_variant ? "--experimental-attention-variant" : mtp_num_layers > 0 ? "--mtp-num-layers" : nullptr;
    if (other)
      throw RunError(std::string("the training run does not model heterogeneous layer configs with ") + other +
                     " (Megatron's heterogeneous layer spec has none)");
    if (!a.heterogeneous_layers_config_encoded_json)
      throw RunError("the heterogeneous layers config's text is missing (validation reads "
                     "--heterogeneous-layers-config-path into --heterogeneous-layers-config-encoded-json)");
    blocks = heterogeneous_blocks(*a.heterogeneous_layers_config_encoded_json, heads, h);
    if (static_cast<int64_t>(blocks.size()) < L)
      throw RunError("the heterogeneous layers config has " + std::to_string(blocks.size()) +
                     " block_configs for --num-layers " + std::to_string(L));
  }
  // --experimental-attention-variant gdn (or its old name gated_delta_net) and gdn2: the layers
  // --linear-attention-freq marks use a gated delta net as their self-attention (Megatron's
  // get_linear_attention_pattern: N, every N-th layer keeps standard attention; or a list, 1 for linear attention).
  std::vector<bool> gdn_layer(static_cast<size_t>(L), false);
  using Variant = arg::ExperimentalAttentionVariant;
  // dsa: every layer's attention is MLA with DeepSeek sparse attention (Megatron asserts --multi-latent-attention).
  const bool dsa = !hybrid && a.experimental_attention_variant == Variant::dsa;
  if (dsa && !a.multi_latent_attention)
    throw RunError("--experimental-attention-variant dsa needs --multi-latent-attention");
  const bool gdn2 = !hybrid && a.experimental_attention_variant == Variant::gdn2;
  if (!hybrid && a.experimental_attention_variant && !dsa) {
    const Value& f = a.linear_attention_freq;
    if (f.is_list()) {
      if (static_cast<int64_t>(f.as_list().size()) != L)
        throw RunError("--linear-attention-freq lists " + std::to_string(f.as_list().size()) +
                       " layers, --num-layers is " + std::to_string(L));
      for (int64_t i = 0; i < L; ++i) gdn_layer[static_cast<size_t>(i)] = f.as_list()[static_cast<size_t>(i)].truthy();
    } else if (f.is_int() && f.as_int() > 0) {
      for (int64_t i = 0; i < L; ++i) gdn_layer[static_cast<size_t>(i)] = (i + 1) % f.as_int() != 0;
    } else {
      throw RunError(std::string("--experimental-attention-variant ") + (gdn2 ? "gdn2" : "gdn") +
                     " needs --linear-attention-freq (N, or a list of 0/1 per layer)");
    }
  }
  const int64_t ep = std::max<int64_t>(1, at.ep_size);
  const int64_t etp = at.etp_size > 0 ? at.etp_size : std::max<int64_t>(1, a.expert_tensor_parallel_size.value_or(tp));
  if (experts > 0 && experts % ep != 0)
    throw RunError("--num-experts " + std::to_string(experts) + " is not divisible by --expert-model-parallel-size " +
                   std::to_string(ep));
  const int64_t local_experts = experts > 0 ? experts / ep : 0;
  if (local_experts > kMaxPlanTensors)
    throw RunError("--num-experts " + std::to_string(experts) + " puts more than " + std::to_string(kMaxPlanTensors) +
                   " experts on a rank, more than the model plan handles");
  const int64_t moe_ffn = at_least(a.moe_ffn_hidden_size.value_or(ffn), 1, "--moe-ffn-hidden-size");
  // Latent MoE (--moe-latent-size): the routed experts work in a smaller space, projected into and out of by two
  // replicated linears of the MoE layer (fc1/fc2_latent_proj); the router and the shared experts keep h.
  const int64_t latent = a.moe_latent_size ? at_least(*a.moe_latent_size, 1, "--moe-latent-size") : 0;
  const int64_t expert_h = latent > 0 ? latent : h;
  const int64_t moe_fc1 = gated ? mul(2, moe_ffn, "2 x --moe-ffn-hidden-size") : moe_ffn;
  const int64_t shared_ffn =
      at_least(a.moe_shared_expert_intermediate_size.value_or(0), 0, "--moe-shared-expert-intermediate-size");
  const bool grouped = a.moe_grouped_gemm;
  auto split_by = [](int64_t n, int64_t parts, const std::string& what) {
    if (n % parts != 0)
      throw RunError(what + " (" + std::to_string(n) + ") is not divisible by the expert tensor-parallel size " +
                     std::to_string(parts) + " (--expert-tensor-parallel-size)");
    return n / parts;
  };
  auto add_expert = [&](std::string name, std::string key, std::vector<int64_t> full, int split_dim) {
    ParamSpec p;
    p.name = std::move(name);
    p.key = std::move(key);
    p.full_shape = full;
    p.shape = full;
    p.split_dim = split_dim;
    if (split_dim >= 0) p.shape[static_cast<size_t>(split_dim)] = split_by(full[static_cast<size_t>(split_dim)], etp, p.name);
    p.tp_duplicate = split_dim < 0 && etp > 1;
    p.expert = true;
    (void)p.numel();
    if (plan.params.size() >= kMaxPlanTensors)
      throw RunError("the model plan would hold more than " + std::to_string(kMaxPlanTensors) +
                     " parameter tensors per rank (--num-layers, --num-experts)");
    p.no_weight_decay = p.shape.size() == 1;
    if (p.shape.size() == 1) p.init = ParamSpec::Init::Zero;  // the experts' 1-D parameters are their biases
    plan.params.push_back(std::move(p));
  };

  // Multi-latent attention (Megatron's MLASelfAttention with its GPT layer spec): queries projected at full rank
  // (--q-lora-rank unset) or down to --q-lora-rank and up again; keys and values down to --kv-lora-rank plus the
  // rotary part and up again per head; the down projections replicated over TP, the up projections split by
  // heads; with --qk-layernorm a norm on each latent (TE: fused into the up projection). No biases but the output's.
  // --mla-down-proj-fusion fuses the two down projections and the input norm (add_attention).
  const bool mla = a.multi_latent_attention;
  const int64_t q_lora = mla && a.q_lora_rank ? at_least(*a.q_lora_rank, 1, "--q-lora-rank") : 0;
  const int64_t kv_lora = mla ? at_least(a.kv_lora_rank, 1, "--kv-lora-rank") : 0;
  const int64_t rope_dim = mla ? at_least(a.qk_pos_emb_head_dim, 0, "--qk-pos-emb-head-dim") : 0;
  const int64_t q_head = mla ? sum(at_least(a.qk_head_dim, 1, "--qk-head-dim"), rope_dim, "the MLA query head") : 0;
  const int64_t v_head = mla ? at_least(a.v_head_dim, 1, "--v-head-dim") : kv;
  auto latent_norm = [&](const std::string& prefix, int64_t width) {
    const size_t before = plan.params.size();
    norm(prefix, width);
    if (wd_on_qk_norm)
      for (size_t i = before; i < plan.params.size(); ++i) plan.params[i].no_weight_decay = false;
  };

  // The parts of a layer under `p` ("decoder.layers.3.", or an MTP layer's "mtp.layers.0.mtp_model_layer."):
  // the attention with its input norm, a dense MLP or the MoE block with their norms. `use_mla`: multi-latent
  // attention; `qk_norms`: the norms --qk-layernorm adds (on q and k, or on MLA's latents; a hybrid model's
  // attention layers have none).
  // `sparse`: MLA with DeepSeek sparse attention (AbsorbedMLASelfAttention: the same projections, its latent norms
  // never fused, and the DSA indexer's projections and key norm, replicated over TP).
  // `qkv_rows`: the QKV projection's rows when a heterogeneous block sets its own query groups (0: qkv_out).
  auto add_attention = [&](const std::string& p, bool use_mla, bool qk_norms, bool sparse = false,
                           int64_t qkv_rows = 0) {
    const std::string att = p + "self_attention.";
    const bool qk_norm_here = qk_norm && qk_norms;
    const bool fused = te && !sparse;  // TE fuses the latent norms into the up projections, but not for DSA
    // --mla-down-proj-fusion (FusedMLASelfAttention; TE's GPT layer spec, and every MLA layer of a hybrid model,
    // which is always TE): one column-parallel down projection for the q latent, the kv latent and the rotary part,
    // split by TP (each rank's rows: its share of the q latent, then of the rest), with the input norm fused in.
    const bool fuse_down = use_mla && !sparse && a.mla_down_proj_fusion && (te || hybrid);
    if (fuse_down) {
      if (q_lora == 0)
        throw RunError("--mla-down-proj-fusion needs --q-lora-rank (Megatron's FusedMLASelfAttention asserts it)");
      const int64_t rest = sum(kv_lora, rope_dim, "--kv-lora-rank + --qk-pos-emb-head-dim");
      (void)split(q_lora, tp, "--q-lora-rank, with --mla-down-proj-fusion,");
      (void)split(rest, tp, "--kv-lora-rank + --qk-pos-emb-head-dim, with --mla-down-proj-fusion,");
      norm(att + "linear_qkv_down_proj.layer_norm_", h);
      add(att + "linear_qkv_down_proj.weight", {sum(q_lora, rest, "the fused MLA down projection"), h}, 0).split_parts =
          {q_lora, rest};
      const int64_t q_out = mul(heads, q_head, "--num-attention-heads x (--qk-head-dim + --qk-pos-emb-head-dim)");
      if (qk_norm_here) latent_norm(att + (fused ? "linear_q_up_proj.layer_norm_" : "q_layernorm."), q_lora);
      add(att + "linear_q_up_proj.weight", {q_out, q_lora}, 0);
      if (qk_norm_here) latent_norm(att + (fused ? "linear_kv_up_proj.layer_norm_" : "kv_layernorm."), kv_lora);
      add(att + "linear_kv_up_proj.weight",
          {mul(heads, sum(a.qk_head_dim, v_head, "--qk-head-dim + --v-head-dim"), "the MLA key/value up projection"),
           kv_lora},
          0);
    } else if (use_mla) {
      norm(p + "input_layernorm.", h);
      const int64_t q_out = mul(heads, q_head, "--num-attention-heads x (--qk-head-dim + --qk-pos-emb-head-dim)");
      if (q_lora == 0) {
        add(att + "linear_q_proj.weight", {q_out, h}, 0);
      } else {
        add(att + "linear_q_down_proj.weight", {q_lora, h}, -1);
        if (qk_norm_here) latent_norm(att + (fused ? "linear_q_up_proj.layer_norm_" : "q_layernorm."), q_lora);
        add(att + "linear_q_up_proj.weight", {q_out, q_lora}, 0);
      }
      add(att + "linear_kv_down_proj.weight", {sum(kv_lora, rope_dim, "--kv-lora-rank + --qk-pos-emb-head-dim"), h}, -1);
      if (qk_norm_here) latent_norm(att + (fused ? "linear_kv_up_proj.layer_norm_" : "kv_layernorm."), kv_lora);
      add(att + "linear_kv_up_proj.weight",
          {mul(heads, sum(a.qk_head_dim, v_head, "--qk-head-dim + --v-head-dim"), "the MLA key/value up projection"),
           kv_lora},
          0);
      if (sparse) {  // DSAIndexer: queries from the q latent (or the hidden state at full rank), one key head
        const std::string ix = att + "core_attention.indexer.";
        const int64_t ix_heads = at_least(a.dsa_indexer_n_heads.value_or(0), 1, "--dsa-indexer-n-heads");
        const int64_t ix_dim = at_least(a.dsa_indexer_head_dim.value_or(0), 1, "--dsa-indexer-head-dim");
        add(ix + "linear_wq_b.weight", {mul(ix_heads, ix_dim, "--dsa-indexer-n-heads x --dsa-indexer-head-dim"),
                                        q_lora > 0 ? q_lora : h}, -1);
        add(ix + "linear_wk.weight", {ix_dim, h}, -1);
        add(ix + "k_norm.weight", {ix_dim}, -1).init = ParamSpec::Init::One;  // always a LayerNorm
        add(ix + "k_norm.bias", {ix_dim}, -1).init = ParamSpec::Init::Zero;
        add(ix + "linear_weights_proj.weight", {ix_heads, h}, -1);
      }
    } else {
      norm(te ? att + "linear_qkv.layer_norm_" : p + "input_layernorm.", h);
      const int64_t rows = qkv_rows > 0 ? qkv_rows : qkv_out;
      add(att + "linear_qkv.weight", {rows, h}, 0);
      if (qkv_bias) add(att + "linear_qkv.bias", {rows}, 0);
      if (qk_norm_here)
        for (const char* which : {"q_layernorm.", "k_layernorm."}) latent_norm(att + which, kv);
    }
    add(att + "linear_proj.weight",
        {h, mul(heads, use_mla ? v_head : kv, "--num-attention-heads x the value head size")}, 1);
    if (bias) add(att + "linear_proj.bias", {h}, -1);
    // --softmax-type learnable: the dot-product attention's per-head softmax offset, split with the heads (DSA's
    // own core attention has none).
    if (a.softmax_type == arg::SoftmaxType::learnable && !sparse) add(att + "core_attention.softmax_offset", {heads}, 0);
  };
  // `layer_ffn`: a heterogeneous block's own MLP size (0: --ffn-hidden-size).
  auto add_mlp = [&](const std::string& p, int64_t layer_ffn = 0) {
    const int64_t f = layer_ffn > 0 ? layer_ffn : ffn;
    const int64_t f1 = layer_ffn > 0 ? (gated ? mul(2, f, "2 x the block's ffn_hidden_size") : f) : fc1_out;
    norm(p + (te ? "mlp.linear_fc1.layer_norm_" : "pre_mlp_layernorm."), h);
    add(p + "mlp.linear_fc1.weight", {f1, h}, 0);
    if (bias) add(p + "mlp.linear_fc1.bias", {f1}, 0);
    add(p + "mlp.linear_fc2.weight", {h, f}, 1);
    if (bias) add(p + "mlp.linear_fc2.bias", {h}, -1);
  };
  // An MoE block: its own norm, the router (replicated), the local routed experts, the shared experts.
  auto add_moe = [&](const std::string& p) {
    if (experts == 0) throw RunError("an MoE layer ('E' in --hybrid-layer-pattern) needs --num-experts");
    norm(p + "pre_mlp_layernorm.", h);
    add(p + "mlp.router.weight", {experts, h}, -1);
    if (bias) add(p + "mlp.router.bias", {experts}, -1);
    for (int64_t e = 0; e < local_experts; ++e) {
      const std::string i = std::to_string(e);
      const std::string fc1 = grouped ? p + "mlp.experts.linear_fc1." : p + "mlp.experts.local_experts." + i + ".linear_fc1.";
      const std::string fc2 = grouped ? p + "mlp.experts.linear_fc2." : p + "mlp.experts.local_experts." + i + ".linear_fc2.";
      const std::string w = grouped ? "weight" + i : "weight", b = grouped ? "bias" + i : "bias";
      const std::string global = p + "mlp.expert" + std::to_string(at.ep_rank * local_experts + e) + ".";
      add_expert(fc1 + w, global + "fc1.weight", {moe_fc1, expert_h}, 0);
      if (bias) add_expert(fc1 + b, global + "fc1.bias", {moe_fc1}, 0);
      add_expert(fc2 + w, global + "fc2.weight", {expert_h, moe_ffn}, 1);
      if (bias) add_expert(fc2 + b, global + "fc2.bias", {expert_h}, -1);
    }
    if (latent > 0) {
      add(p + "mlp.fc1_latent_proj.weight", {latent, h}, -1);
      if (bias) add(p + "mlp.fc1_latent_proj.bias", {latent}, -1);
      add(p + "mlp.fc2_latent_proj.weight", {h, latent}, -1);
      if (bias) add(p + "mlp.fc2_latent_proj.bias", {h}, -1);
    }
    const std::string what = "the routed experts' parameters (--num-experts, --moe-ffn-hidden-size, --hidden-size)";
    const int64_t per_expert = sum(sum(mul(moe_fc1, expert_h, what), mul(expert_h, moe_ffn, what), what),
                                   bias ? sum(moe_fc1, expert_h, what) : 0, what);
    plan.expert_numel_total = sum(plan.expert_numel_total, mul(experts, per_expert, what), what);
    if (shared_ffn > 0) {
      const int64_t s1 = gated ? mul(2, shared_ffn, "2 x --moe-shared-expert-intermediate-size") : shared_ffn;
      add(p + "mlp.shared_experts.linear_fc1.weight", {s1, h}, 0);
      if (bias) add(p + "mlp.shared_experts.linear_fc1.bias", {s1}, 0);
      add(p + "mlp.shared_experts.linear_fc2.weight", {h, shared_ffn}, 1);
      if (bias) add(p + "mlp.shared_experts.linear_fc2.bias", {h}, -1);
      if (a.moe_shared_expert_gate) add(p + "mlp.shared_experts.gate_weight", {1, h}, -1);
    }
  };
  // A Mamba layer of a hybrid model (Megatron's MambaLayer with MambaMixer, the TE spec: the norm fused into
  // in_proj). in_proj packs z, x, B, C and dt, conv1d x, B and C, each part split over TP on its own (Megatron's
  // partition_sizes); the plan gives the shard its size.
  auto add_mamba = [&](const std::string& p) {
    const std::string m = p + "mixer.";
    norm(te ? m + "in_proj.layer_norm_" : p + "norm.", h);
    // in_proj's rows z, x, B, C, dt and conv1d's channels x, B, C: TP splits each part (a rank holds its slice
    // of each, back to back, as MambaMixer splits its local in_proj output).
    const int64_t bc = mamba.groups * mamba.state;
    ParamSpec& in_proj = add(m + "in_proj.weight", {mamba.in_proj, h}, 0);
    in_proj.use_muon = false;  // as Megatron marks it
    in_proj.split_parts = {mamba.d_inner, mamba.d_inner, bc, bc, mamba.heads};
    add(m + "conv1d_weight", {mamba.conv_dim, 1, kMambaConv}, 0).split_parts = {mamba.d_inner, bc, bc};
    ParamSpec& conv_bias = add(m + "conv1d_bias", {mamba.conv_dim}, 0);
    conv_bias.init = ParamSpec::Init::Zero;
    conv_bias.split_parts = {mamba.d_inner, bc, bc};
    add(m + "dt_bias", {mamba.heads}, 0).init = ParamSpec::Init::Zero;
    add(m + "A_log", {mamba.heads}, 0);
    add(m + "D", {mamba.heads}, 0).init = ParamSpec::Init::One;
    ParamSpec& gated_norm = add(m + "norm.weight", {mamba.d_inner}, 0);  // an RMSNorm whatever --normalization says
    gated_norm.init = ParamSpec::Init::One;
    gated_norm.rmsnorm_gamma = rmsnorm_mult;
    add(m + "out_proj.weight", {h, mamba.d_inner}, 1);
  };
  // A gated delta net layer: a hybrid model's 'G', or a layer --linear-attention-freq marks (Megatron's
  // TransformerLayer with GatedDeltaNet as its self-attention: the norm fused into in_proj, no biases, no conv1d bias). in_proj packs q, k, v, the gate z,
  // beta and alpha, conv1d q, k and v, each part split over TP on its own; dt_bias and A_log per value head; the
  // output norm over one value head (replicated); out_proj from all value heads. `two`: GatedDeltaNet2
  // (--experimental-attention-variant gdn2), whose in_proj adds the decay f, the erase gate b (q-sized each) and the
  // write gate w (v-sized) in place of beta and alpha, dt_bias per key channel and A_log per key head.
  auto add_gdn = [&](const std::string& p, bool two) {
    const std::string m = p + "self_attention.";
    const int64_t key_heads = at_least(a.linear_num_key_heads, 1, "--linear-num-key-heads");
    const int64_t value_heads = at_least(a.linear_num_value_heads, 1, "--linear-num-value-heads");
    if (key_heads % tp != 0 || value_heads % tp != 0)
      throw RunError("--linear-num-key-heads (" + std::to_string(key_heads) + ") and --linear-num-value-heads (" +
                     std::to_string(value_heads) + ") must be divisible by the tensor-parallel size " +
                     std::to_string(tp) + " (gated delta net layers)");
    const int64_t qk = mul(at_least(a.linear_key_head_dim, 1, "--linear-key-head-dim"), key_heads,
                           "--linear-key-head-dim x --linear-num-key-heads");
    const int64_t v = mul(at_least(a.linear_value_head_dim, 1, "--linear-value-head-dim"), value_heads,
                          "--linear-value-head-dim x --linear-num-value-heads");
    const int64_t kernel = at_least(a.linear_conv_kernel_dim, 1, "--linear-conv-kernel-dim");
    norm(m + "in_proj.layer_norm_", h);
    const int64_t in_rows = sum(sum(mul(2, qk, "the gated delta net q and k"), mul(2, v, "its v and z"), "its in_proj"),
                                mul(2, value_heads, "its beta and alpha"), "its in_proj");
    if (two) {
      const int64_t rows2 = sum(mul(4, qk, "the gated delta net 2's q, k, f and b"), mul(3, v, "its v, z and w"),
                                "its in_proj");
      add(m + "in_proj.weight", {rows2, h}, 0).split_parts = {qk, qk, v, v, qk, qk, v};
    } else {
      add(m + "in_proj.weight", {in_rows, h}, 0).split_parts = {qk, qk, v, v, value_heads, value_heads};
    }
    add(m + "conv1d.weight", {sum(mul(2, qk, "its q and k"), v, "its conv1d"), 1, kernel}, 0).split_parts = {qk, qk, v};
    add(m + "dt_bias", {two ? qk : value_heads}, 0);
    add(m + "A_log", {two ? key_heads : value_heads}, 0);
    norm(m + "out_norm.", a.linear_value_head_dim);
    add(m + "out_proj.weight", {h, v}, 1);
  };
  // A GPT transformer layer: attention (gdn: a gated delta net in its place, its norm fused into in_proj), then a
  // dense MLP or (moe) the MoE block.
  auto add_layer = [&](const std::string& p, bool moe, bool gdn) {
    if (gdn) add_gdn(p, gdn2);
    else add_attention(p, mla, true, dsa);
    if (moe) add_moe(p);
    else add_mlp(p);
  };
  // A heterogeneous model's layer (get_gpt_heterogeneous_layer_spec): a part that is gone has no parameters and no
  // norm; a linear replacement is (TE) TELayerNormColumnParallelLinearGathered, hidden -> hidden with the norm in
  // it, or (local) ColumnParallelLinearGathered after the layer's own norm; split by rows over TP.
  auto add_block = [&](const std::string& p, const HeterogeneousBlock& b, int64_t index) {
    auto linear = [&](const std::string& module, const char* local_norm) {
      norm(te ? p + module + "layer_norm_" : p + local_norm, h);
      add(p + module + "weight", {h, h}, 0);
      if (bias) add(p + module + "bias", {h}, 0);
    };
    if (b.attention == BlockPart::Linear) linear("self_attention.", "input_layernorm.");
    if (b.attention == BlockPart::Normal) {
      const int64_t g = b.num_query_groups.value_or(groups);
      // TransformerConfig's rules for the block's own config: heads in whole groups; groups a multiple or a
      // divisor of TP.
      if (g <= 0 || heads % g != 0 || (g % tp != 0 && tp % g != 0))
        throw RunError("block_configs[" + std::to_string(index) + "] has " + std::to_string(g) +
                       " query groups: it must divide --num-attention-heads (" + std::to_string(heads) +
                       ") and be a multiple or a divisor of --tensor-model-parallel-size (" + std::to_string(tp) + ")");
      add_attention(p, false, true, false,
                    mul(sum(q_rows, mul(2, g, "2 x the block's query groups"), "the attention heads"), kv,
                        "the block's QKV projection width"));
    }
    if (b.mlp == BlockPart::Linear) linear("mlp.", "pre_mlp_layernorm.");
    if (b.mlp == BlockPart::Normal)
      add_mlp(p, at_least(b.ffn_hidden_size.value_or(ffn), 1,
                          ("block_configs[" + std::to_string(index) + "]'s ffn_hidden_size").c_str()));
  };
  // A layer of a hybrid model by its symbol (Megatron's HybridStack with hybrid_stack_spec): 'M' Mamba, 'G' gated
  // delta net, '*' attention (SelfAttention), '+' multi-latent attention (MLASelfAttention with its own input norm; validation
  // refuses a pattern with both), '-' MLP, 'E' MoE. The spec gives neither attention q/k norms (--qk-layernorm has
  // no parameters there).
  auto add_hybrid_layer = [&](const std::string& p, char symbol) {
    switch (symbol) {
      case 'M': add_mamba(p); return;
      case 'G': add_gdn(p, false); return;  // (hybrid_stack_spec: GatedDeltaNet)
      case '*': add_attention(p, false, false); return;
      case '+':
      case 'D':
        // (Validation turns --multi-latent-attention on for a pattern with '+' or 'D', as Megatron's.)
        if (!mla)
          throw RunError(std::string("the hybrid layer symbol '") + symbol + "' (" + (symbol == 'D' ? "DSA" : "MLA") +
                         ") needs --multi-latent-attention");
        add_attention(p, true, false, symbol == 'D');
        return;
      case '-': add_mlp(p); return;
      case 'E': add_moe(p); return;
      default:
        throw RunError(std::string("the model plan does not model the hybrid layer symbol '") + symbol +
                       "' (--hybrid-layer-pattern; it models M, G, *, +, D, - and E)");
    }
  };
  for (size_t i = 0; i < plan.layers.size(); ++i) {
    const std::string p = "decoder.layers." + std::to_string(plan.layers[i]) + ".";
    if (hybrid) add_hybrid_layer(p, hy.symbols[i]);
    else if (hetero) add_block(p, blocks[static_cast<size_t>(plan.layers[i])], plan.layers[i]);
    else add_layer(p, moe_layer[static_cast<size_t>(plan.layers[i])], gdn_layer[static_cast<size_t>(plan.layers[i])]);
  }
  // Multi-token prediction (--mtp-num-layers, Megatron's MultiTokenPredictionBlock on the last stage): each MTP
  // layer normalises the embedding and the hidden states (enorm, hnorm), projects their concatenation 2h -> h
  // (eh_proj, split by TP like a column-parallel linear), runs one transformer layer of the last decoder layer's kind
  // and its own final norm. The stage also embeds the tokens for them: with several stages a copy of the word
  // embeddings, kept equal to the first stage's through the embedding group (tied or not), which is then the
  // output layer's weight too when tied.
  // With a layout the MTP layers sit on the rank its 'm's name (Megatron's mtp_on_this_rank), which need not be
  // the last ("standalone" MTP); that rank then joins the embedding group (parallel/layout.cpp).
  const bool mtp_embedding = mtp > 0 && at.pp_size > 1;
  if (last) norm(hybrid ? "decoder.final_norm." : "decoder.final_layernorm.", h);
  if (mtp_embedding) {
    ParamSpec& e = add("embedding.word_embeddings.weight", {plan.padded_vocab_size, h}, 0);
    e.embedding_or_output = true;
    e.shared_copy = true;  // the first stage's is the one counted
  }
  // --mtp-use-repeated-layer: one MTP layer, applied at every depth.
  const int64_t mtp_built = a.mtp_use_repeated_layer ? std::min<int64_t>(mtp, 1) : mtp;
  for (int64_t i = 0; i < mtp_built; ++i) {
    const std::string p = "mtp.layers." + std::to_string(i) + ".";
    norm(p + "enorm.", h);
    norm(p + "hnorm.", h);
    add(p + "eh_proj.weight", {h, mul(2, h, "2 x --hidden-size")}, 0);
    if (hybrid) {  // a stack of the MTP pattern's layers
      for (size_t j = 0; j < hy.mtp_pattern.size(); ++j)
        add_hybrid_layer(p + "mtp_model_layer.layers." + std::to_string(j) + ".", hy.mtp_pattern[j]);
    } else {
      add_layer(p + "mtp_model_layer.", L > 0 && moe_layer[static_cast<size_t>(L - 1)],  // the last layer's kind
                L > 0 && gdn_layer[static_cast<size_t>(L - 1)]);
    }
    norm(p + "final_layernorm.", h);
  }
  if (last) {
    if (!tied || (at.pp_size > 1 && !mtp_embedding)) {
      ParamSpec& out = add("output_layer.weight", {plan.padded_vocab_size, h}, 0);
      out.embedding_or_output = true;
      // Tied weights on several stages: the last stage keeps a copy of the word embeddings, kept equal to the
      // first stage's by summing the two gradients (the "embedding" group); norms count the first stage's only.
      out.shared_copy = tied;
      if (tied) out.key = "embedding.word_embeddings.weight";
    } else if (tied && mtp_embedding) {
      // The MTP stage's embedding copy is the output weight; Megatron still allocates output_layer.weight here
      // (not the first stage) and leaves it unused (ModelPlan::unused).
      ParamSpec& out = add("output_layer.weight", {plan.padded_vocab_size, h}, 0);
      out.embedding_or_output = true;
      plan.unused.push_back(std::move(out));
      plan.params.pop_back();
    }
  }
  // Megatron's embedding_init_method: the word and position embeddings drawn with --embedding-init-method-std when
  // it is set (the copies on later stages too: they start equal to the first stage's).
  if (a.embedding_init_method_std)
    for (ParamSpec& p : plan.params)
      if (p.key == "embedding.word_embeddings.weight" || p.key == "embedding.position_embeddings.weight")
        p.init_std = *a.embedding_init_method_std;
  return plan;
}

}  // namespace mr::run
