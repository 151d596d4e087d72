// TargetEnv::load_file (config/target_env.h): --target-env FILE.yaml, read with the checks of
// config/parse/yaml_doc.h. The rest of TargetEnv is core (config/target_env.cpp); reading a file is parsing.
#include <map>
#include <string>
#include <vector>

#include "config/parse/yaml_doc.h"
#include "config/target_env.h"

namespace mr {

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
        throw UsageError(k.where() + ": duplicate key '" + k.scalar() + "' (also at " + it->second.where() + ")", flags,
                         k.where(), "input.yaml-duplicate-key");
    }
  };
  keys_once(root);
  for (std::size_t i = 0; i < root.size(); ++i) {
    yaml::Node key = root.key(i), val = root.value(i);
    std::string k = key.scalar();
    if (k == "env" || k == "ENV_VARS") {
      if (val.is_null()) continue;
      if (!val.is_map()) fail(key, "'" + k + "' must be a mapping");
      keys_once(val);
      for (std::size_t j = 0; j < val.size(); ++j) {
        std::string name = val.key(j).scalar();
        vars[name] = text(val.value(j), k + "." + name);
        var_where[name] = val.key(j).where();
      }
      continue;
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
