// The init stage (init.h): TransformerConfig.__post_init__'s checks of activation recomputation, CPU and
// fine-grained activation offloading, the CUDA graphs that capture what those recompute or offload, and GTP's
// rematerialization opt-ins (megatron/core/transformer/transformer_config.py), with the config filled from the
// resolved arguments as core_transformer_config_from_args() (megatron/training/argument_utils.py) fills it. The
// checks run in __post_init__'s order: CPU offloading, the recomputation settings and modules, the CUDA graphs,
// fine-grained offloading, GTP rematerialization, then --moe-layer-recompute against full recomputation.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "config/validate/init.h"
#include "config/validate/python.h"
#include "util/text.h"

namespace mr::init {
namespace {

MR_INIT_RULE(kCudaGraphMoe, "init.transformer.cuda-graph-moe-modules",
             "With --cuda-graph-impl local or transformer_engine, --cuda-graph-modules moe / moe_router need an MoE "
             "model (--num-experts above 1) and exclude each other, moe_preprocess needs moe_router, moe needs "
             "drop-and-pad MoE (--moe-expert-capacity-factor with --moe-pad-expert-input-to-capacity), mlp needs dense "
             "layers (a --moe-layer-freq that leaves some), and without drop-and-pad the alltoall dispatcher with a "
             "capacity factor or --moe-router-padding-for-fp8 takes no moe_preprocess (TransformerConfig).");
MR_INIT_RULE(kCudaGraphRecompute, "init.transformer.cuda-graph-full-recompute",
             "With CUDA graphs (--cuda-graph-impl local or transformer_engine), --recompute-granularity full is not "
             "supported; only --cuda-graph-impl full_iteration takes it (TransformerConfig).");
MR_INIT_RULE(kCudaGraphRecomputeDropout, "init.transformer.cuda-graph-selective-recompute",
             "With CUDA graphs (--cuda-graph-impl other than none) and selective recomputation, a graphed module "
             "cannot be recomputed with randomness: core_attn recompute inside a graphed attention (the whole layer, "
             "full_iteration, or the attn scope) needs --attention-dropout 0, mlp / moe recompute inside a graphed "
             "MLP / MoE needs --hidden-dropout 0, moe recompute inside a graphed MoE takes no --moe-input-jitter-eps; "
             "with --cuda-graph-impl transformer_engine, moe recompute excludes the moe_router scope; with GTP, "
             "--cuda-graph-impl local capturing the shared experts under fp8/fp4 cannot recompute shared_experts "
             "(TransformerConfig).");
MR_INIT_RULE(kCudaGraphFineOffload, "init.transformer.cuda-graph-activation-offloading",
             "--fine-grained-activation-offloading with CUDA graphs: --cuda-graph-impl local captures only part of "
             "the layer (--cuda-graph-modules, not moe) and offloads only expert_fc1, moe_act or fused_group_mlp; no "
             "implementation takes the moe scope; --cuda-graph-warmup-steps must be above 0; full_iteration needs "
             "--fine-grained-offloading-max-inflight-offloads 0 or more (TransformerConfig).");
MR_INIT_RULE(kCudaGraphCpuOffload, "init.transformer.cuda-graph-cpu-offloading",
             "CPU offloading (--cpu-offloading-num-layers > 0) does not work with --cuda-graph-impl local or "
             "transformer_engine (TransformerConfig).");
MR_INIT_RULE(kCpuOffloading, "init.transformer.cpu-offloading",
             "CPU offloading (--cpu-offloading-num-layers > 0) needs fewer offloaded layers than --num-layers, no "
             "pipeline parallelism and no activation recomputation (TransformerConfig).");
MR_INIT_RULE(kRecompute, "init.transformer.recompute-settings",
             "--recompute-granularity full needs --recompute-method and --recompute-num-layers; selective takes no "
             "--recompute-num-layers; --distribute-saved-activations excludes --sequence-parallel; "
             "--moe-layer-recompute excludes full recomputation (TransformerConfig).");
MR_INIT_RULE(kRecomputeModules, "init.transformer.recompute-modules",
             "Selective --recompute-modules: each is one of core_attn, moe_act, layernorm, mla_up_proj, mlp, moe, "
             "shared_experts, gdn_norm_out, gdp_in_proj, gdp_qkv, mhc; moe_act needs --moe-grouped-gemm, mla_up_proj "
             "needs --multi-latent-attention, gdn_norm_out needs --experimental-attention-variant gdn or gdn2, "
             "shared_experts excludes --moe-shared-expert-overlap, mhc needs --enable-mhc-connections and excludes mlp "
             "(TransformerConfig).");
MR_INIT_RULE(kFineOffload, "init.transformer.fine-grained-offloading",
             "--fine-grained-activation-offloading excludes CPU offloading (--cpu-offloading-num-layers > 0) and needs "
             "--min-offloaded-tensor-size and --delta-offload-bytes-across-pp-ranks of 0 or more and "
             "--activation-offload-fraction between 0 and 1 (TransformerConfig).");
MR_INIT_RULE(kOffloadModules, "init.transformer.offload-modules",
             "With --fine-grained-activation-offloading, --offload-modules names one or more of attn_norm, "
             "qkv_linear, core_attn, attn_proj, mlp_norm, expert_fc1, moe_act, fused_group_mlp, gdp_qkv; attn_proj "
             "needs core_attn; gdp_qkv excludes selective recomputation of gdp_in_proj; expert_fc1, moe_act and "
             "fused_group_mlp exclude selective recomputation of moe; fused_group_mlp needs "
             "--use-transformer-engine-op-fuser and excludes expert_fc1 and moe_act (TransformerConfig).");
MR_INIT_RULE(kGtpRematModules, "init.transformer.gtp-remat-opt-in-modules",
             "--gtp-remat-opt-in-modules accepts only moe_latent_proj (TransformerConfig).");

const char* kTc = "TransformerConfig";

std::string v(const Context& ctx, std::string_view dest) { return ctx[dest].py_str(); }
std::string fv(const Context& ctx, std::string_view dest) { return Context::flag(dest) + " " + v(ctx, dest); }
// A list of strings as the command line gives it: "a b c", each word escaped (util/text.h echo_word), so a newline
// in a user's word starts no line of its own.
std::string words(const std::vector<std::string>& list) {
  std::string out;
  for (const std::string& w : list) out += (out.empty() ? "" : " ") + echo_word(w);
  return out;
}

// The module names TransformerConfig.__post_init__ accepts in recompute_modules (selective granularity),
// offload_modules (fine-grained activation offloading) and gtp_remat_opt_in_modules.
const std::vector<std::string> kRecomputeModuleNames = {"core_attn", "moe_act", "layernorm", "mla_up_proj",
                                                        "mlp", "moe", "shared_experts", "gdn_norm_out",
                                                        "gdp_in_proj", "gdp_qkv", "mhc"};
const std::vector<std::string> kOffloadModuleNames = {"attn_norm", "qkv_linear", "core_attn", "attn_proj", "mlp_norm",
                                                      "expert_fc1", "moe_act", "fused_group_mlp", "gdp_qkv"};
const std::vector<std::string> kGtpRematModuleNames = {"moe_latent_proj"};

// The words of `list` that `allowed` lacks, each once, in the order given.
std::vector<std::string> outside_of(const std::vector<std::string>& list, const std::vector<std::string>& allowed) {
  std::vector<std::string> out;
  for (const std::string& w : list)
    if (std::find(allowed.begin(), allowed.end(), w) == allowed.end() &&
        std::find(out.begin(), out.end(), w) == out.end())
      out.push_back(w);
  return out;
}
// The strings of a list argument ({} when it is None).
std::vector<std::string> strings(const Context& ctx, std::string_view dest) {
  std::vector<std::string> out;
  if (ctx[dest].is_list())
    for (const Value& m : ctx[dest].as_list())
      if (m.is_str()) out.push_back(m.as_str());
  return out;
}

// The experimental attention variant TransformerConfig gets: core_transformer_config_from_args sets dsa when the
// hybrid layer pattern has a D layer.
std::string effective_variant(const Context& ctx) {
  if (set(ctx, "hybrid_layer_pattern") && ctx.s("hybrid_layer_pattern").find('D') != std::string::npos) return "dsa";
  return set(ctx, "experimental_attention_variant") ? ctx.s("experimental_attention_variant") : "";
}
// is_gated_delta_net_variant (experimental_attention_variant_module_specs.py): gdn, gdn2 or the old gated_delta_net.
bool gated_delta_net(const Context& ctx) {
  const std::string variant = effective_variant(ctx);
  return variant == "gdn" || variant == "gdn2" || variant == "gated_delta_net";
}

// The steps of transformer_recompute_offload, in TransformerConfig.__post_init__'s order.

// CPU offloading: fewer offloaded layers than --num-layers, no pipeline parallelism, no recomputation.
void cpu_offloading(Context& ctx, int64_t pp, bool recompute) {
  if (ctx.has("cpu_offloading") && ctx.on("cpu_offloading") && set(ctx, "num_layers")) {
    const int64_t n = ctx.i("cpu_offloading_num_layers"), layers = ctx.i("num_layers");
    ctx.require(n >= 0 && n < layers, kCpuOffloading,
                would_fail(kTc) + "--cpu-offloading-num-layers (" + std::to_string(n) +
                    ") must be less than --num-layers (" + std::to_string(layers) + ")",
                {"cpu_offloading_num_layers", "num_layers"});
    ctx.require(pp <= 1, kCpuOffloading,
                would_fail(kTc) + "CPU offloading (--cpu-offloading-num-layers " + std::to_string(n) +
                    ") does not support pipeline parallelism (--pipeline-model-parallel-size " + std::to_string(pp) + ")",
                {"cpu_offloading_num_layers", "pipeline_model_parallel_size"});
    ctx.require(!recompute, kCpuOffloading,
                would_fail(kTc) + "CPU offloading (--cpu-offloading-num-layers " + std::to_string(n) +
                    ") does not work with activation recomputation (" + fv(ctx, "recompute_granularity") + ")",
                {"cpu_offloading_num_layers", "recompute_granularity"});
  }
}

// Selective recomputation's --recompute-modules: known names, each with what it needs.
void recompute_modules(Context& ctx) {
  // The config's default module list is [core_attn].
  std::vector<std::string> modules;
  if (set(ctx, "recompute_modules"))
    for (const Value& m : ctx["recompute_modules"].as_list())
      if (m.is_str()) modules.push_back(m.as_str());
  auto has = [&](const char* m) { return std::find(modules.begin(), modules.end(), m) != modules.end(); };
  const std::vector<std::string> unknown = outside_of(modules, kRecomputeModuleNames);
  ctx.require(unknown.empty(), kRecomputeModules,
              would_fail(kTc) + "--recompute-modules " + words(unknown) + ": not a module selective recomputation "
                  "knows (" + words(kRecomputeModuleNames) + ")",
              {"recompute_modules", "recompute_granularity"});
  ctx.require(!has("moe_act") || ctx.on("moe_grouped_gemm"), kRecomputeModules,
              would_fail(kTc) + "--recompute-modules moe_act needs --moe-grouped-gemm",
              {"recompute_modules", "moe_grouped_gemm"});
  ctx.require(!has("mla_up_proj") || ctx.on("multi_latent_attention"), kRecomputeModules,
              would_fail(kTc) + "--recompute-modules mla_up_proj needs --multi-latent-attention",
              {"recompute_modules", "multi_latent_attention"});
  ctx.require(!has("gdn_norm_out") || gated_delta_net(ctx), kRecomputeModules,
              would_fail(kTc) + "--recompute-modules gdn_norm_out needs --experimental-attention-variant gdn or "
                  "gdn2 (got " + (effective_variant(ctx).empty() ? std::string("None") : effective_variant(ctx)) +
                  ")",
              {"recompute_modules", "experimental_attention_variant", "hybrid_layer_pattern"});
  ctx.require(!(has("shared_experts") && set(ctx, "moe_shared_expert_intermediate_size") &&
                ctx.on("moe_shared_expert_overlap")),
              kRecomputeModules,
              would_fail(kTc) + "--recompute-modules shared_experts cannot be used with --moe-shared-expert-overlap",
              {"recompute_modules", "moe_shared_expert_overlap"});
  if (has("mhc")) {
    ctx.require(ctx.on("enable_mhc_connections"), kRecomputeModules,
                would_fail(kTc) + "--recompute-modules mhc needs --enable-mhc-connections",
                {"recompute_modules", "enable_mhc_connections"});
    ctx.require(!has("mlp"), kRecomputeModules,
                would_fail(kTc) + "--recompute-modules mhc and mlp cannot be used together",
                {"recompute_modules"});
  }
}

// --recompute-granularity: full needs a method and a layer count, selective takes no layer count (and its
// modules, recompute_modules); either excludes --distribute-saved-activations with --sequence-parallel.
void recompute_settings(Context& ctx) {
  const std::string gran = ctx.s("recompute_granularity");
  if (gran != "selective") {
    ctx.require(set(ctx, "recompute_method"), kRecompute,
                would_fail(kTc) + "--recompute-granularity " + gran + " needs --recompute-method uniform or block",
                {"recompute_granularity", "recompute_method"});
    ctx.require(set(ctx, "recompute_num_layers"), kRecompute,
                would_fail(kTc) + "--recompute-granularity " + gran + " needs --recompute-num-layers",
                {"recompute_granularity", "recompute_num_layers"});
  } else {
    ctx.require(!set(ctx, "recompute_num_layers"), kRecompute,
                would_fail(kTc) + "--recompute-granularity selective takes no --recompute-num-layers (got " +
                    v(ctx, "recompute_num_layers") + ")",
                {"recompute_granularity", "recompute_num_layers"});
  }
  ctx.require(!(ctx.on("distribute_saved_activations") && ctx.on("sequence_parallel")), kRecompute,
              would_fail(kTc) + "--distribute-saved-activations cannot be used with --sequence-parallel",
              {"distribute_saved_activations", "sequence_parallel"});
  if (gran == "selective") recompute_modules(ctx);
}

// The recomputation as the config leaves it for the checks after its own (CUDA graphs, fine-grained offloading):
// recompute_modules defaults to [core_attn], and --moe-layer-recompute (refused with full recomputation, last)
// makes the granularity selective and adds moe.
struct Recomputation {
  std::string gran;                 // "" without --recompute-granularity
  std::vector<std::string> modules;
  bool recomputes(const char* m) const { return std::find(modules.begin(), modules.end(), m) != modules.end(); }
};
Recomputation recomputation(const Context& ctx, bool recompute) {
  Recomputation r;
  r.gran = recompute ? ctx.s("recompute_granularity") : "";
  r.modules = {"core_attn"};
  if (set(ctx, "recompute_modules")) r.modules = strings(ctx, "recompute_modules");
  if (ctx.on("moe_layer_recompute") && r.gran != "full") {
    r.gran = "selective";
    if (std::find(r.modules.begin(), r.modules.end(), "moe") == r.modules.end()) r.modules.push_back("moe");
  }
  return r;
}

// A CUDA graph implementation (--cuda-graph-impl other than none): the start of its messages and the modules
// --cuda-graph-modules names (none: the whole layer, per layer).
struct CudaGraphs {
  std::string impl, why;
  const Value& modules;
  bool no_modules;
  bool in(const char* m) const { return enum_in(modules, "CudaGraphModule", m); }
};

// The modules --cuda-graph-impl local or transformer_engine captures in an MoE model, or in a dense one.
void cuda_graph_moe_modules(Context& ctx, const CudaGraphs& g) {
  if (g.impl == "local" || g.impl == "transformer_engine") {
    const bool moe_model = set(ctx, "num_experts") && ctx.i("num_experts") > 1;
    // The local implementation captures moe_router and moe_preprocess together when either is named.
    const bool router = g.in("moe_router") || (g.impl == "local" && g.in("moe_preprocess"));
    const bool preprocess = g.in("moe_preprocess") || (g.impl == "local" && g.in("moe_router"));
    ctx.require(!(g.in("moe") && router), kCudaGraphMoe,
                g.why + "cannot capture both --cuda-graph-modules moe and moe_router", {"cuda_graph_modules"});
    ctx.require(!preprocess || router, kCudaGraphMoe,
                g.why + "captures --cuda-graph-modules moe_preprocess only together with moe_router",
                {"cuda_graph_modules"});
    if (!moe_model) {
      ctx.require(!g.in("moe") && !router, kCudaGraphMoe,
                  g.why + "captures --cuda-graph-modules moe / moe_router only in an MoE model (--num-experts " +
                      v(ctx, "num_experts") + ")",
                  {"cuda_graph_modules", "num_experts"});
    } else {
      // moe_layer_freq == 1, or a pattern without a dense (0) layer: every layer is MoE.
      const Value& freq = ctx["moe_layer_freq"];
      bool all_moe = freq == Value(1);
      if (freq.is_list()) {
        all_moe = true;
        for (const Value& f : freq.as_list()) all_moe = all_moe && !(f == Value(0));
      }
      if (all_moe)
        ctx.require(!g.in("mlp"), kCudaGraphMoe,
                    g.why + "captures --cuda-graph-modules mlp only in dense layers, and every layer is MoE "
                          "(--moe-layer-freq " + v(ctx, "moe_layer_freq") + ")",
                    {"cuda_graph_modules", "moe_layer_freq", "num_experts"});
      // The config turns a negative capacity factor into None first.
      const bool capacity = set(ctx, "moe_expert_capacity_factor") && ctx.f("moe_expert_capacity_factor") >= 0;
      if (!(capacity && ctx.on("moe_pad_expert_input_to_capacity"))) {
        ctx.require(!g.in("moe"), kCudaGraphMoe,
                    g.why + "captures --cuda-graph-modules moe only with drop-and-pad MoE "
                          "(--moe-expert-capacity-factor and --moe-pad-expert-input-to-capacity)",
                    {"cuda_graph_modules", "moe_expert_capacity_factor", "moe_pad_expert_input_to_capacity"});
        if (ctx.s("moe_token_dispatcher_type") == "alltoall" && (capacity || ctx.on("moe_router_padding_for_fp8")))
          ctx.require(!preprocess, kCudaGraphMoe,
                      g.why + "cannot capture --cuda-graph-modules moe_preprocess with the alltoall dispatcher and " +
                          (capacity ? "--moe-expert-capacity-factor " + v(ctx, "moe_expert_capacity_factor")
                                    : std::string("--moe-router-padding-for-fp8")) +
                          ": its preprocess step copies to the host and synchronizes",
                      {"cuda_graph_modules", "moe_token_dispatcher_type", "moe_expert_capacity_factor",
                       "moe_router_padding_for_fp8"});
      }
    }
  }
}

// Recomputation inside the graphs: full only with full_iteration; selective not of a graphed module with
// randomness (dropout, MoE input jitter), nor of moe under TE's moe_router scope, nor of the shared experts GTP
// rematerializes under local graphs with fp8/fp4.
void cuda_graph_recompute(Context& ctx, const CudaGraphs& g, bool recompute, const Recomputation& r) {
  if (recompute && ctx.s("recompute_granularity") != "selective")
    ctx.require(g.impl == "full_iteration", kCudaGraphRecompute,
                g.why + "does not support --recompute-granularity " + ctx.s("recompute_granularity") +
                    ": full recomputation works only with --cuda-graph-impl full_iteration",
                {"cuda_graph_impl", "recompute_granularity"});
  if (r.gran == "selective") {
    const std::string sel = g.why + "with selective recomputation of " + words(r.modules) + " (" +
                            (set(ctx, "recompute_modules") ? "--recompute-modules" : "the default --recompute-modules") +
                            (ctx.on("moe_layer_recompute") ? "; moe from --moe-layer-recompute" : "") + ") ";
    if (g.impl == "transformer_engine" && r.recomputes("moe"))
      ctx.require(!g.in("moe_router"), kCudaGraphRecomputeDropout,
                  sel + "cannot recompute moe inside the captured --cuda-graph-modules moe_router",
                  {"cuda_graph_modules", "recompute_modules", "moe_layer_recompute"});
    // The whole layer is captured by full_iteration or by an empty per-layer scope.
    const bool whole = g.impl == "full_iteration" || g.no_modules;
    const std::string scope = whole ? std::string("captures the whole layer: no --cuda-graph-modules")
                                    : "captures --cuda-graph-modules " + v(ctx, "cuda_graph_modules");
    if (ctx.f("attention_dropout") != 0.0 && r.recomputes("core_attn"))
      ctx.require(!whole && !g.in("attn"), kCudaGraphRecomputeDropout,
                  sel + "recomputes core_attn inside a graphed attention (it " + scope +
                      "), which does not support --attention-dropout " + v(ctx, "attention_dropout") +
                      " (pass --attention-dropout 0)",
                  {"cuda_graph_impl", "cuda_graph_modules", "recompute_modules", "attention_dropout"});
    if (ctx.f("hidden_dropout") != 0.0)
      for (const char* m : {"mlp", "moe"})
        if (r.recomputes(m))
          ctx.require(!whole && !g.in(m), kCudaGraphRecomputeDropout,
                      sel + "recomputes " + m + " inside a graphed " + (std::string(m) == "mlp" ? "MLP" : "MoE") +
                          " (it " + scope + "), which does not support --hidden-dropout " +
                          v(ctx, "hidden_dropout") + " (pass --hidden-dropout 0)",
                      {"cuda_graph_impl", "cuda_graph_modules", "recompute_modules", "hidden_dropout"});
    if (set(ctx, "moe_input_jitter_eps") && r.recomputes("moe"))
      ctx.require(!whole && !g.in("moe"), kCudaGraphRecomputeDropout,
                  sel + "recomputes moe inside a graphed MoE (it " + scope +
                      "), which does not support --moe-input-jitter-eps " + v(ctx, "moe_input_jitter_eps"),
                  {"cuda_graph_impl", "cuda_graph_modules", "recompute_modules", "moe_input_jitter_eps"});
    // GTP with local graphs capturing the shared experts (the whole layer, moe or moe_router) under fp8/fp4: TE's
    // checkpoint needs .backward(), which the local graphs' warmup does not call.
    if (int_or(ctx, "gtp_weight_remat_size", 1) > 1 && g.impl == "local" && (set(ctx, "fp8") || set(ctx, "fp4")) &&
        set(ctx, "moe_shared_expert_intermediate_size") && !ctx.on("moe_shared_expert_overlap") &&
        (whole || g.in("moe") || g.in("moe_router")) && r.recomputes("shared_experts"))
      ctx.fail(kCudaGraphRecomputeDropout,
               sel + "recomputes shared_experts inside the graphs (it " + scope +
                   ") under " + (set(ctx, "fp8") ? "--fp8-format " + v(ctx, "fp8") : "--fp4-format " + v(ctx, "fp4")) +
                   " with GTP (--tensor-parallel-num-weight-shards " + v(ctx, "tensor_parallel_num_weight_shards") +
                   "): drop shared_experts from --recompute-modules, or use --cuda-graph-impl full_iteration",
               {"cuda_graph_impl", "cuda_graph_modules", "recompute_modules", "tensor_parallel_num_weight_shards",
                "fp8", "fp4", "moe_shared_expert_intermediate_size"});
  }
}

// Fine-grained activation offloading with the graphs.
void cuda_graph_offloading(Context& ctx, const CudaGraphs& g) {
  if (ctx.on("fine_grained_activation_offloading")) {
    const std::string off = g.why + "with --fine-grained-activation-offloading ";
    std::vector<std::string> offloaded, outside;
    if (ctx["offload_modules"].is_list())
      for (const Value& m : ctx["offload_modules"].as_list())
        if (m.is_str()) {
          offloaded.push_back(m.as_str());
          if (m.as_str() != "expert_fc1" && m.as_str() != "moe_act" && m.as_str() != "fused_group_mlp")
            outside.push_back(m.as_str());
        }
    if (g.impl == "local") {
      ctx.require(outside.empty(), kCudaGraphFineOffload,
                  off + "offloads only expert_fc1, moe_act or fused_group_mlp, not " + words(outside) +
                      " (--offload-modules " + words(offloaded) + ")",
                  {"cuda_graph_impl", "offload_modules", "fine_grained_activation_offloading"});
      ctx.require(!g.no_modules, kCudaGraphFineOffload,
                  off + "does not support whole-layer capture: name the captured parts with --cuda-graph-modules",
                  {"cuda_graph_impl", "cuda_graph_modules", "fine_grained_activation_offloading"});
      // Local graphs take offloading only as a partial MoE offload: some modules, all inside the MoE.
      ctx.require(!offloaded.empty(), kCudaGraphFineOffload,
                  off + "needs --offload-modules expert_fc1, moe_act or fused_group_mlp",
                  {"cuda_graph_impl", "offload_modules", "fine_grained_activation_offloading"});
    }
    ctx.require(!g.in("moe"), kCudaGraphFineOffload,
                off + "cannot capture --cuda-graph-modules moe: token-drop MoE does not support activation "
                      "offloading yet",
                {"cuda_graph_modules", "fine_grained_activation_offloading"});
    ctx.require(ctx.i("cuda_graph_warmup_steps") > 0, kCudaGraphFineOffload,
                off + "needs --cuda-graph-warmup-steps above 0 (got " + v(ctx, "cuda_graph_warmup_steps") + ")",
                {"cuda_graph_warmup_steps", "fine_grained_activation_offloading"});
    if (g.impl == "full_iteration")
      ctx.require(set(ctx, "fine_grained_offloading_max_inflight_offloads") &&
                      ctx.i("fine_grained_offloading_max_inflight_offloads") >= 0,
                  kCudaGraphFineOffload,
                  off + "needs --fine-grained-offloading-max-inflight-offloads 0 or more (got " +
                      v(ctx, "fine_grained_offloading_max_inflight_offloads") + ")",
                  {"cuda_graph_impl", "fine_grained_offloading_max_inflight_offloads",
                   "fine_grained_activation_offloading"});
  }
}

// TransformerConfig.__post_init__'s CUDA graph checks (cuda_graph_impl other than none).
void cuda_graphs(Context& ctx, bool recompute, const Recomputation& r) {
  const std::string impl = ctx.s("cuda_graph_impl");
  if (impl == "none") return;
  const CudaGraphs g{impl, would_fail(kTc) + "--cuda-graph-impl " + impl + " ", ctx["cuda_graph_modules"],
                     !ctx["cuda_graph_modules"].is_list() || ctx["cuda_graph_modules"].as_list().empty()};
  if (ctx.has("cpu_offloading") && ctx.on("cpu_offloading"))
    ctx.require(g.impl == "full_iteration", kCudaGraphCpuOffload,
                g.why + "is not supported with CPU offloading (--cpu-offloading-num-layers " +
                    v(ctx, "cpu_offloading_num_layers") + ")",
                {"cuda_graph_impl", "cpu_offloading_num_layers"});
  cuda_graph_moe_modules(ctx, g);
  cuda_graph_recompute(ctx, g, recompute, r);
  cuda_graph_offloading(ctx, g);
}

// TransformerConfig.__post_init__'s fine-grained activation offloading block.
void fine_grained_offloading(Context& ctx, const Recomputation& r) {
  if (!ctx.on("fine_grained_activation_offloading")) return;
  const std::string off = would_fail(kTc) + "--fine-grained-activation-offloading ";
  ctx.require(!(ctx.has("cpu_offloading") && ctx.on("cpu_offloading")), kFineOffload,
              off + "cannot be used with CPU offloading (--cpu-offloading-num-layers " +
                  v(ctx, "cpu_offloading_num_layers") + ")",
              {"fine_grained_activation_offloading", "cpu_offloading_num_layers"});
  const std::vector<std::string> offloaded = strings(ctx, "offload_modules");
  auto offloads = [&](const char* m) { return std::find(offloaded.begin(), offloaded.end(), m) != offloaded.end(); };
  ctx.require(!offloaded.empty(), kOffloadModules,
              off + "needs --offload-modules (one or more of " + words(kOffloadModuleNames) + ")",
              {"fine_grained_activation_offloading", "offload_modules"});
  const std::vector<std::string> unknown = outside_of(offloaded, kOffloadModuleNames);
  ctx.require(unknown.empty(), kOffloadModules,
              off + "cannot offload --offload-modules " + words(unknown) + ": not a module it knows (" +
                  words(kOffloadModuleNames) + ")",
              {"fine_grained_activation_offloading", "offload_modules"});
  ctx.require(!offloads("attn_proj") || offloads("core_attn"), kOffloadModules,
              off + "cannot offload attn_proj without core_attn (--offload-modules " + words(offloaded) +
                  "): attn_proj's input is core_attn's output, which core_attn's backward needs",
              {"offload_modules"});
  ctx.require(!(offloads("gdp_qkv") && r.gran == "selective" && r.recomputes("gdp_in_proj")), kOffloadModules,
              off + "cannot offload gdp_qkv (--offload-modules " + words(offloaded) +
                  ") while selective recomputation recomputes gdp_in_proj (--recompute-modules " + words(r.modules) +
                  ")",
              {"offload_modules", "recompute_modules", "recompute_granularity"});
  if (r.gran == "selective" && r.recomputes("moe")) {
    std::vector<std::string> inside;
    for (const char* m : {"moe_act", "expert_fc1", "fused_group_mlp"})
      if (offloads(m)) inside.push_back(m);
    ctx.require(inside.empty(), kOffloadModules,
                off + "cannot offload " + words(inside) + " inside an MoE layer that selective recomputation "
                    "recomputes whole (moe from " +
                    (ctx.on("moe_layer_recompute") ? "--moe-layer-recompute" : "--recompute-modules") + ")",
                {"offload_modules", "recompute_modules", "moe_layer_recompute"});
  }
  ctx.require(set(ctx, "min_offloaded_tensor_size") && ctx.i("min_offloaded_tensor_size") >= 0, kFineOffload,
              off + "needs --min-offloaded-tensor-size 0 or more (got " + v(ctx, "min_offloaded_tensor_size") + ")",
              {"min_offloaded_tensor_size"});
  const double fraction = set(ctx, "activation_offload_fraction") ? ctx.f("activation_offload_fraction") : NAN;
  ctx.require(fraction >= 0 && fraction <= 1, kFineOffload,
              off + "needs --activation-offload-fraction between 0 and 1 (got " +
                  v(ctx, "activation_offload_fraction") + ")",
              {"activation_offload_fraction"});
  ctx.require(set(ctx, "delta_offload_bytes_across_pp_ranks") && ctx.i("delta_offload_bytes_across_pp_ranks") >= 0,
              kFineOffload,
              off + "needs --delta-offload-bytes-across-pp-ranks 0 or more (got " +
                  v(ctx, "delta_offload_bytes_across_pp_ranks") + ")",
              {"delta_offload_bytes_across_pp_ranks"});
  if (offloads("fused_group_mlp")) {
    ctx.require(ctx.on("use_transformer_engine_op_fuser"), kOffloadModules,
                off + "offloads fused_group_mlp only with --use-transformer-engine-op-fuser",
                {"offload_modules", "use_transformer_engine_op_fuser"});
    std::vector<std::string> partial;
    for (const char* m : {"expert_fc1", "moe_act"})
      if (offloads(m)) partial.push_back(m);
    ctx.require(partial.empty(), kOffloadModules,
                off + "offloads the whole fused grouped MLP with fused_group_mlp: drop " + words(partial) +
                    " from --offload-modules " + words(offloaded),
                {"offload_modules"});
  }
}

// --gtp-remat-opt-in-modules: only moe_latent_proj.
void gtp_remat_modules(Context& ctx) {
  const std::vector<std::string> gtp_unknown =
      outside_of(strings(ctx, "gtp_remat_opt_in_modules"), kGtpRematModuleNames);
  ctx.require(gtp_unknown.empty(), kGtpRematModules,
              would_fail(kTc) + "--gtp-remat-opt-in-modules " + words(gtp_unknown) +
                  ": not a module GTP rematerialization can opt in (only moe_latent_proj)",
              {"gtp_remat_opt_in_modules"});
}

// --moe-layer-recompute excludes full recomputation.
void moe_layer_recompute(Context& ctx, bool recompute) {
  if (ctx.on("moe_layer_recompute"))
    ctx.require(!(recompute && ctx.s("recompute_granularity") == "full"), kRecompute,
                would_fail(kTc) + "--moe-layer-recompute cannot be used with --recompute-granularity full",
                {"moe_layer_recompute", "recompute_granularity"});
}

}  // namespace

void transformer_recompute_offload(Context& ctx) {
  const int64_t pp = ctx.i("pipeline_model_parallel_size");
  const bool recompute = set(ctx, "recompute_granularity");
  cpu_offloading(ctx, pp, recompute);
  if (recompute) recompute_settings(ctx);
  const Recomputation r = recomputation(ctx, recompute);
  cuda_graphs(ctx, recompute, r);
  fine_grained_offloading(ctx, r);
  gtp_remat_modules(ctx);
  moe_layer_recompute(ctx, recompute);
}

}  // namespace mr::init
