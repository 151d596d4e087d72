// Seed arguments.py 577-588 with _normalize_cuda_graph_modules_args / _normalize_inference_cuda_graph_scope_arg
// (seed 286-325) and their helpers in megatron/core/transformer/cuda_graph_config.py: --cuda-graph-modules becomes
// a list of CudaGraphModule members (deprecated whole-graph words are migrated to --cuda-graph-impl /
// --inference-cuda-graph-scope), and --inference-cuda-graph-scope becomes an InferenceCudaGraphScope member.
//
// Enum members are held as Python's str() of them: "CudaGraphModule.attn", "InferenceCudaGraphScope.layer".
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/validate/section_functions.h"
#include "util/text.h"

namespace mr::section {

MR_RULE(kKnownModule, "cuda-graph-modules.known-module",
        "--cuda-graph-modules values must be CudaGraphModule names (attn, mlp, moe, moe_router, moe_preprocess, "
        "mamba) or one of the deprecated words full, full_iteration, full_iteration_inference.");
MR_RULE(kFullAlone, "cuda-graph-modules.full-alone", "--cuda-graph-modules full cannot be combined with other modules.");
MR_RULE(kOneDeprecatedWord, "cuda-graph-modules.one-deprecated-word",
        "--cuda-graph-modules may hold only one kind of deprecated word (full_iteration or full_iteration_inference).");
MR_RULE(kFullIterationImpl, "cuda-graph-modules.full-iteration-impl",
        "--cuda-graph-modules full_iteration needs --cuda-graph-impl none, local or full_iteration.");
MR_RULE(kFullIterationScope, "cuda-graph-modules.full-iteration-scope-none",
        "--cuda-graph-modules full_iteration cannot be combined with an --inference-cuda-graph-scope other than none.");
MR_RULE(kFullIterationInferenceImpl, "cuda-graph-modules.full-iteration-inference-impl",
        "--cuda-graph-modules full_iteration_inference needs --cuda-graph-impl none or local.");
MR_RULE(kFullIterationInferenceScope, "cuda-graph-modules.full-iteration-inference-scope-block",
        "--cuda-graph-modules full_iteration_inference cannot be combined with an --inference-cuda-graph-scope "
        "other than block.");
MR_WARNING(kFullDeprecated, "cuda-graph-modules.full-deprecated",
           "--cuda-graph-modules full is deprecated; an empty module list captures the whole layer.");
MR_WARNING(kDeprecatedNoEffect, "cuda-graph-modules.deprecated-no-effect",
           "--cuda-graph-modules full_iteration_inference does nothing with --cuda-graph-impl none.");
MR_WARNING(kDeprecatedMigrated, "cuda-graph-modules.deprecated-migrated",
           "A deprecated --cuda-graph-modules word was translated to --cuda-graph-impl / --inference-cuda-graph-scope.");
MR_RULE(kInferenceScopeForImpl, "cuda-graph-modules.inference-scope-for-impl",
        "--inference-cuda-graph-scope must suit --cuda-graph-impl: layer or block with local, none otherwise.");

namespace {

constexpr std::string_view kModulePrefix = "CudaGraphModule.";
constexpr std::string_view kScopePrefix = "InferenceCudaGraphScope.";
const char* const kModuleNames[] = {"attn", "mlp", "moe", "moe_router", "moe_preprocess", "mamba"};
const char* const kScopeNames[] = {"none", "layer", "block"};

bool starts_with(const std::string& s, std::string_view p) { return s.compare(0, p.size(), p) == 0; }

bool is_module_member(const Value& v) {
  if (!v.is_str() || !starts_with(v.as_str(), kModulePrefix)) return false;
  std::string name = v.as_str().substr(kModulePrefix.size());
  for (const char* m : kModuleNames)
    if (name == m) return true;
  return false;
}

// InferenceCudaGraphScope member name of a value (None stays None); a plain string is looked up by name.
std::optional<std::string> scope_name(Context& ctx, const Value& v) {
  if (v.is_none()) return std::nullopt;
  std::string name = v.is_str() ? v.as_str() : v.py_str();
  if (v.is_str() && starts_with(name, kScopePrefix)) name = name.substr(kScopePrefix.size());
  for (const char* s : kScopeNames)
    if (name == s) return name;
  ctx.fail(kInferenceScopeForImpl, "--inference-cuda-graph-scope " + v.py_repr() + " is not one of none, layer, block",
           {"inference_cuda_graph_scope"});
}

struct Deprecated {
  std::string word;   // full_iteration / full_iteration_inference
  const char* dest;   // what it migrates
  Value value;        // to what
};

}  // namespace

void cuda_graph_normalize(Context& ctx) {
  // --- seed 288-289 -> normalize_cuda_graph_modules ---
  const Value modules = ctx["cuda_graph_modules"];
  List raw;
  if (modules.is_none()) {
  } else if (modules.is_list()) {
    raw = modules.as_list();
  } else if (modules.is_str() && !is_module_member(modules)) {
    const std::string& s = modules.as_str();  // a comma-separated string ("" is no module)
    if (!s.empty())
      for (std::string& piece : split(s, ',')) raw.emplace_back(std::move(piece));
  } else {
    raw.push_back(modules);
  }

  List normalized;
  std::vector<Deprecated> deprecated;
  bool used_full = false;
  bool has_full = false;
  for (const Value& v : raw) has_full = has_full || v == Value("full");
  if (has_full) {
    ctx.require(raw.size() == 1, kFullAlone,
                "--cuda-graph-modules " + modules.py_str() + ": full (the whole layer) cannot be listed with other modules",
                {"cuda_graph_modules"});
    used_full = true;
  } else {
    for (const Value& v : raw) {
      if (is_module_member(v)) {
        normalized.push_back(v);
        continue;
      }
      if (!v.is_str())
        ctx.fail(kKnownModule, "--cuda-graph-modules value " + v.py_repr() + " is neither a name nor a CudaGraphModule",
                 {"cuda_graph_modules"});
      const std::string& w = v.as_str();
      if (w == "full_iteration") {
        deprecated.push_back({w, "cuda_graph_impl", Value("full_iteration")});
      } else if (w == "full_iteration_inference") {
        deprecated.push_back({w, "inference_cuda_graph_scope", Value(std::string(kScopePrefix) + "block")});
      } else {
        Value member(std::string(kModulePrefix) + w);
        ctx.require(is_module_member(member), kKnownModule,
                    "--cuda-graph-modules value " + v.py_repr() + " is not a CudaGraphModule name",
                    {"cuda_graph_modules"});
        normalized.push_back(member);
      }
    }
  }

  // --- seed 291-295 -> validate_deprecated_cuda_graph_modules_migration_inputs ---
  if (!deprecated.empty()) {
    std::string names;
    bool mixed = false;
    for (const Deprecated& d : deprecated) {
      names += (names.empty() ? "" : ", ") + d.word;
      mixed = mixed || d.word != deprecated.front().word;
    }
    ctx.require(!mixed, kOneDeprecatedWord,
                "--cuda-graph-modules lists several deprecated words (" + names + "); give at most one of them",
                {"cuda_graph_modules"});
    const std::string& impl = ctx.s("cuda_graph_impl");
    std::optional<std::string> scope = scope_name(ctx, ctx["inference_cuda_graph_scope"]);
    std::string scope_text = scope ? *scope : "None";
    if (deprecated.front().word == "full_iteration") {
      ctx.require(impl == "none" || impl == "local" || impl == "full_iteration", kFullIterationImpl,
                  "--cuda-graph-modules full_iteration cannot be used with --cuda-graph-impl " + impl,
                  {"cuda_graph_modules", "cuda_graph_impl"});
      ctx.require(!scope || *scope == "none", kFullIterationScope,
                  "--cuda-graph-modules full_iteration cannot be used with --inference-cuda-graph-scope " + scope_text,
                  {"cuda_graph_modules", "inference_cuda_graph_scope"});
    } else {
      ctx.require(impl == "none" || impl == "local", kFullIterationInferenceImpl,
                  "--cuda-graph-modules full_iteration_inference cannot be used with --cuda-graph-impl " + impl,
                  {"cuda_graph_modules", "cuda_graph_impl"});
      ctx.require(!scope || *scope == "block", kFullIterationInferenceScope,
                  "--cuda-graph-modules full_iteration_inference cannot be used with --inference-cuda-graph-scope " +
                      scope_text,
                  {"cuda_graph_modules", "inference_cuda_graph_scope"});
    }
  }

  // seed 296-297
  if (used_full)
    ctx.warn(kFullDeprecated, "--cuda-graph-modules full is deprecated; leave --cuda-graph-modules empty to capture "
             "the whole layer", {"cuda_graph_modules"});

  // seed 299-317 -> get_deprecated_cuda_graph_modules_migration, applied in order.
  for (const Deprecated& d : deprecated) {
    if (d.word == "full_iteration_inference" && ctx.s("cuda_graph_impl") == "none") {
      ctx.warn(kDeprecatedNoEffect,
               "--cuda-graph-modules full_iteration_inference is deprecated and ignored with --cuda-graph-impl none; "
               "for inference CUDA graphs use --cuda-graph-impl local --inference-cuda-graph-scope block",
               {"cuda_graph_modules", "cuda_graph_impl"});
      continue;
    }
    ctx.warn(kDeprecatedMigrated,
             "--cuda-graph-modules " + d.word + " is deprecated; using " + Context::flag(d.dest) + "=" +
                 d.value.py_str() + " in its place",
             {"cuda_graph_modules", d.dest});
    ctx.set(d.dest, d.value, "cuda-graph-normalize: deprecated --cuda-graph-modules " + d.word);
  }

  // seed 319
  ctx.set("cuda_graph_modules", Value(normalized), "cuda-graph-normalize: normalized CUDA graph modules");

  // --- seed 580 -> seed 322-325 -> normalize_inference_cuda_graph_scope: unset means layer for local graphs ---
  const std::string& impl = ctx.s("cuda_graph_impl");
  std::optional<std::string> scope = scope_name(ctx, ctx["inference_cuda_graph_scope"]);
  std::string resolved = scope ? *scope : (impl == "local" ? "layer" : "none");
  ctx.set("inference_cuda_graph_scope", std::string(kScopePrefix) + resolved,
          scope ? "cuda-graph-normalize: as InferenceCudaGraphScope" : "cuda-graph-normalize: default for --cuda-graph-impl");

  // seed 581-588 -> ALLOWED_INFERENCE_SCOPES
  bool allowed = false;
  if (impl == "local") allowed = resolved == "layer" || resolved == "block";
  else if (impl == "none" || impl == "transformer_engine" || impl == "full_iteration") allowed = resolved == "none";
  ctx.require(allowed, kInferenceScopeForImpl,
              "--inference-cuda-graph-scope " + resolved + " does not work with --cuda-graph-impl " + impl +
                  (impl == "local" ? " (use layer or block)" : " (only none is allowed)"),
              {"inference_cuda_graph_scope", "cuda_graph_impl"});
}

}  // namespace mr::section
