// Helpers shared by the validation tests (tests/config/validate_<subject>_test.cpp): environments, command-line
// edits, and runners for a stretch of the chain, so that a check of a later section cannot turn a neighbour
// config into a failure (or an earlier one mask what is tested).
#pragma once

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <map>
#include <string>
#include <vector>

#include "config/rule.h"
#include "support.h"

namespace mrtest {

using mr::Value;
using Env = std::map<std::string, std::string>;
using Args = std::vector<std::string>;

inline const Env kWorld1 = {{"WORLD_SIZE", "1"}};
inline const Env kWorld2 = {{"WORLD_SIZE", "2"}};
inline const Env kWorld4 = {{"WORLD_SIZE", "4"}};
inline const Env kWorld8 = {{"WORLD_SIZE", "8"}};
// TP/CP > 1 on sm_90 needs CUDA_DEVICE_MAX_CONNECTIONS=1 (cuda-max-connections checks it).
inline const Env kWorld8OneConnection = {{"WORLD_SIZE", "8"}, {"CUDA_DEVICE_MAX_CONNECTIONS", "1"}};
inline const Env kOneConnection = {{"CUDA_DEVICE_MAX_CONNECTIONS", "1"}};

inline const Args kMegatronFsdp = {"--use-megatron-fsdp", "--ckpt-format", "fsdp_dtensor",
                                   "--use-distributed-optimizer"};

// A heterogeneous-layers config (--heterogeneous-layers-config-encoded-json) that agrees with base_args() +
// kHeteroFlags: 4 heads, KV groups of 2 -> 2 query groups.
inline const char* const kHeteroJson =
    R"({"hidden_act": "silu", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
        "tie_word_embeddings": false, "rope_theta": 10000, "rope_scaling": {"factor": 8.0},
        "block_configs": [{"attention": {"n_heads_in_group": 2}}, {"attention": {"n_heads_in_group": null}}]})";
inline const Args kHeteroFlags = {
    "--swiglu", "--normalization", "RMSNorm", "--group-query-attention", "--position-embedding-type", "rope",
    "--use-rope-scaling", "--use-rotary-position-embeddings", "--untie-embeddings-and-output-weights",
    "--rotary-base", "10000", "--rope-scaling-factor", "8.0", "--num-query-groups", "2"};

// ---- command lines

// base_args() without `flag` (and its value, when it takes one), then `extra`.
inline Args without(const std::string& flag, const Args& extra = {}) {
  Args a = base_args(), out;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] == flag) {
      if (i + 1 < a.size() && a[i + 1].rfind("--", 0) != 0) ++i;
      continue;
    }
    out.push_back(a[i]);
  }
  out.insert(out.end(), extra.begin(), extra.end());
  return out;
}

inline Args plus(Args a, const Args& extra) {
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}
inline Args operator+(Args a, const Args& b) { return plus(std::move(a), b); }

// base_args() without --mock-data (a real dataset path instead).
inline Args real_data_args() {
  return without("--mock-data", {"--data-path", "/data/corpus_text_document", "--split", "99,1,0"});
}

inline Value str_list(std::vector<std::string> items) {
  mr::List l;
  for (auto& s : items) l.emplace_back(std::move(s));
  return Value(std::move(l));
}
inline Value strs(std::initializer_list<const char*> items) {
  mr::List l;
  for (const char* s : items) l.emplace_back(s);
  return Value(l);
}

inline mr::TargetEnv target(const std::string& arch, const std::string& te = "2.20.2",
                            const std::string& torch = "2.15.0") {
  mr::TargetEnv t;
  t.gpu_arch = arch;
  t.te_version = te;
  t.torch_version = torch;
  return t;
}
inline mr::TargetEnv te(const std::string& version) {
  mr::TargetEnv t;
  t.te_version = version;
  return t;
}

// A file under the temporary directory, per process (ctest may run two test_config processes at once).
inline std::string write_temp(const std::string& name, const std::string& text) {
  std::string path =
      (std::filesystem::temp_directory_path() / ("mr_validate_" + std::to_string(::getpid()) + "_" + name)).string();
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

// ---- verdicts

inline bool fails_with(const Run& r, const std::string& rule) { return r.exit == 1 && r.rule == rule; }
inline void fails(const Run& r, const std::string& rule) {
  INFO(r.message);
  CHECK(r.exit == 1);
  CHECK(r.rule == rule);
}
inline void passes(const Run& r) {
  INFO(r.rule << ": " << r.message);
  CHECK(r.exit == 0);
}

// The rule ids of the chain's opening sections (seed 419-625: ckpt-conversion-prep through input-defaults).
inline bool is_opening_rule(const std::string& id) {
  for (const char* p : {"ckpt-convert.", "ckpt-nonpersistent.", "heterogeneous.", "parallel.", "deprecated.",
                        "cuda-graph-modules.", "input."})
    if (id.rfind(p, 0) == 0) return true;
  return false;
}
// The opening sections accepted the config (later sections may still refuse it for their own reasons).
inline bool passes_opening(const Run& r) { return r.exit == 0 || (r.exit == 1 && !is_opening_rule(r.rule)); }

// The rule ids of the batch-size, hybrid-pattern, virtual-pipeline and torch-fsdp2 sections (seed 626-956).
inline bool is_batch_or_layout_rule(const std::string& id) {
  for (const char* p : {"batch-size.", "hybrid-pattern.", "mtp.rope-or-none", "mtp.freeze-base", "virtual-pipeline.",
                        "pipeline-layout.", "pipeline-split.", "fsdp.", "torch-fsdp2."})
    if (id.rfind(p, 0) == 0) return true;
  return false;
}
// Those sections accepted the config (a later section may still refuse it for reasons of its own).
#define CHECK_BATCH_OR_LAYOUT_PASSES(r)             \
  do {                                              \
    CHECK((r).exit != 2);                           \
    CHECK_FALSE(mrtest::is_batch_or_layout_rule((r).rule)); \
  } while (0)

// ---- stretches of the chain

// The chain through mixed-precision-checks (seed 419-1226).
inline Run upto_mixed_precision(const Args& args, const Env& env = {}, const mr::TargetEnv* target = nullptr) {
  return run_through("mixed-precision-checks", args, env, target);
}
inline Run upto_mixed_precision_with(const Args& extra, const Env& env = {}, const mr::TargetEnv* target = nullptr) {
  return upto_mixed_precision(with(extra), env, target);
}

// The chain through sequence-packing (seed 419-1596).
inline Run upto_sequence_packing(const Args& args, const Env& env = {}, const mr::TargetEnv* target = nullptr) {
  return run_through("sequence-packing", args, env, target);
}

// Only the sections from data-blend through latent-projections (seed 1597-1931), which depend on the argparse
// defaults and on what the command line gives (values an earlier section derives are given where it matters).
// `tweak` edits the namespace first (values no command line can produce).
inline Run from_data_blend(const Args& args, const Env& env = {}, const mr::TargetEnv* target = nullptr,
                           const Tweak& tweak = {}) {
  return run_between("data-blend", "latent-projections", args, env, target, tweak);
}
inline Run from_data_blend_with(const Args& extra, const Env& env = {}, const mr::TargetEnv* target = nullptr,
                                const Tweak& tweak = {}) {
  return from_data_blend(with(extra), env, target, tweak);
}

// ---- one section on its own, on a parsed (not yet validated) namespace: for inputs the command line cannot
// produce at that point of the chain

// Runs `section` after `edit` changed the namespace.
inline Run direct(const std::function<void(mr::Context&)>& section, const Args& args,
                  const std::function<void(mr::Namespace&)>& edit = {}) {
  return run_body(args, section, {}, nullptr, edit);
}

// The failing rule id ("" when the section passes); leaves the namespace in `ns_out`.
inline std::string one_section(void (*section)(mr::Context&), const Args& args,
                               const std::function<void(mr::Namespace&)>& tweak, mr::Namespace* ns_out = nullptr) {
  Run r = run_body(args, section, {}, nullptr, tweak);
  if (ns_out) *ns_out = r.out.parsed.ns;
  return r.rule;
}

// On base_args() with some dests overridden; the failing rule id ("" when it passes).
inline std::string run_section(void (*section)(mr::Context&), const std::map<std::string, Value>& overrides) {
  return one_section(section, base_args(), [&](mr::Namespace& ns) {
    for (const auto& [k, v] : overrides) ns.derive(k, v, "test");
  });
}

}  // namespace mrtest
