// TargetEnv::load_file (config/target_env.h): --target-env FILE.yaml, read with the checks of
// config/parse/yaml_doc.h. The rest of TargetEnv is core (config/target_env.cpp); reading a file is parsing.
//
// The format (docs/config-files.md, "Target environment files"): the top-level keys gpu_arch, te_version,
// torch_version, flashinfer_version, and env: (or ENV_VARS:, the functional-test layout's name) holding the
// environment variables. A top-level key spelled like an environment variable (upper case, digits, underscore:
// CUDA_DEVICE_MAX_CONNECTIONS) is one too; any other key is refused (input.target-env-key), so that a typo such
// as `gpu-arch:` or `target-gpu-arch:` cannot quietly become a variable and leave the target unchanged.
#include <algorithm>
#include <cctype>
#include <map>
#include <string>
#include <vector>

#include "config/parse/yaml_doc.h"
#include "config/target_env.h"
#include "util/text.h"

namespace mr {
namespace {

const std::vector<std::string> kTargetKeys = {"gpu_arch", "te_version", "torch_version", "flashinfer_version", "env"};

// NAME as a shell would take it for a variable and as people write one: [A-Z_][A-Z0-9_]*.
bool looks_like_env_var(const std::string& k) {
  if (k.empty() || std::isdigit(static_cast<unsigned char>(k[0]))) return false;
  return std::all_of(k.begin(), k.end(), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  });
}

// The known key an unknown one most likely meant: the option's spelling (`--target-gpu-arch`, `gpu-arch`,
// `GPU_ARCH`) reduced to the file's, else the closest by edits. Empty when nothing is close.
std::string meant_key(const std::string& key) {
  std::string k = key;
  k.erase(0, k.find_first_not_of('-'));
  for (char& c : k) c = c == '-' ? '_' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (k.rfind("target_", 0) == 0) k.erase(0, 7);
  if (std::find(kTargetKeys.begin(), kTargetKeys.end(), k) != kTargetKeys.end()) return k;
  const std::vector<std::string> near = closest_words(k, kTargetKeys, 3);
  return near.empty() ? std::string() : near.front();
}

}  // namespace

void TargetEnv::load_file(const std::string& path) {
  static const std::vector<std::string> flags = {"--target-env"};
  yaml::Document doc = yaml::load_file(path, "target environment file", flags);
  yaml::Node root = doc.root();
  if (!root.is_map())
    throw UsageError(root.where() + ": a target environment file must be a mapping", flags, root.where());
  auto fail = [&](const yaml::Node& n, const std::string& msg) {
    throw UsageError(n.where() + ": " + msg, flags, n.where());
  };
  // A scalar's text; a tag other than !!str cannot be meant (the values are strings).
  auto text = [&](const yaml::Node& n, const std::string& what) -> std::string {
    if (n.is_null()) return {};
    if (!n.is_scalar()) fail(n, "'" + what + "' must be a scalar, not " + n.kind_name());
    if (!n.plain() && n.tag() != "!" && !yaml::standard_tag(n.tag(), "str")) yaml::unsupported_tag(n, flags);
    return n.scalar();
  };
  // Each key once: this is megatron-run's own format.
  auto keys_once = [&](const yaml::Node& map) {
    std::map<std::string, yaml::Node> seen;
    for (std::size_t i = 0; i < map.size(); ++i) {
      yaml::Node k = map.key(i);
      if (!k.is_scalar()) yaml::non_scalar_key(k, flags);
      auto [it, fresh] = seen.emplace(k.scalar(), k);
      if (!fresh)
        throw UsageError(k.where() + ": duplicate key '" + echo_word(k.scalar()) + "' (also at " + printable(it->second.where(), false) + ")", flags,
                         k.where(), "input.yaml-duplicate-key");
    }
  };
  keys_once(root);
  for (std::size_t i = 0; i < root.size(); ++i) {
    yaml::Node key = root.key(i), val = root.value(i);
    std::string k = key.scalar();
    if (k == "env" || k == "ENV_VARS") {
      if (val.is_null()) continue;
      if (!val.is_map()) fail(key, "'" + echo_word(k) + "' must be a mapping");
      keys_once(val);
      for (std::size_t j = 0; j < val.size(); ++j) {
        std::string name = val.key(j).scalar();
        vars[name] = text(val.value(j), k + "." + name);
        var_where[name] = val.key(j).where();
      }
      continue;
    }
    const bool target_key = std::find(kTargetKeys.begin(), kTargetKeys.end(), k) != kTargetKeys.end();
    if (!target_key && !looks_like_env_var(k)) {
      const std::string meant = meant_key(k);
      throw UsageError(key.where() + ": unknown key '" + echo_word(k) + "' in the target environment file" +
                           (meant.empty() ? std::string() : " (did you mean '" + meant + "'?)") +
                           "; its keys are gpu_arch, te_version, torch_version, flashinfer_version and env: (the "
                           "environment variables, e.g. env: {CUDA_DEVICE_MAX_CONNECTIONS: '1'})",
                       flags, key.where(), "input.target-env-key");
    }
    std::string v = text(val, k);
    if (k == "gpu_arch") {
      try {
        TargetEnv probe;
        probe.gpu_arch = v;
        (void)probe.arch_major();  // throws UsageError for an architecture it cannot read
      } catch (const UsageError& e) {
        fail(val, e.what());
      }
      gpu_arch = v;
    } else if (k == "te_version" || k == "torch_version" || k == "flashinfer_version") {
      if (v.empty()) fail(val, k + ": expected a version (e.g. 2.9.0) or none, got '' (an empty value; none says "
                                   "the package is not installed)");
      try {
        check_version(v);
      } catch (const UsageError& e) {
        fail(val, k + ": " + e.what());
      }
      (k == "te_version" ? te_version : k == "torch_version" ? torch_version : flashinfer_version) = v;
    } else {
      vars[k] = v;
      var_where[k] = key.where();
    }
  }
}

}  // namespace mr
