// Megatron's --yaml-cfg: load_yaml and the rest of parse_args on the YAML namespace. The rules of that path (the
// CLI combinations Megatron refuses, the attributes parse_args reads) are validation: config/validate/.
// Seed: ../shared/spec/arguments.py parse_args() 148-187; Megatron-LM megatron/training/yaml_arguments.py
// load_yaml().
#include "config/parse/yaml_cfg.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <sstream>
#include <unordered_map>

#include "config/parse/invocation.h"
#include "config/print.h"
#include "config/schema.h"
#include "config/converters.h"
#include "config/parse/yaml11.h"
#include "config/parse/yaml_doc.h"
#include "util/text.h"

namespace mr {

const Rule kExperimentalFlagRule{
    "parse.experimental-flag", Rule::Level::Warning,
    "--yaml-cfg is given: Megatron's experimental path, where the YAML file replaces every other Megatron argument; "
    "the warning names the arguments it ignores.",
    __FILE__, __LINE__, kStageParse};

namespace {

// A mistake in the file's YAML, with the input.* id a --config file's same mistake has.
[[noreturn]] void file_error(const std::string& where, const std::string& msg, const char* id = "") {
  throw UsageError(where + ": " + msg, {"--yaml-cfg"}, where, id);
}

const char* const kTagPrefix = "tag:yaml.org,2002:";

// A scalar node as safe_load constructs it: quoted and block scalars are strings, plain ones go through the
// implicit resolvers, explicit standard tags (!!str, !!int, ...) construct their type.
Value typed_scalar(const yaml::Node& n, const std::string& text, const std::string& where) {
  const std::string& tag = n.tag();
  if (tag == "!") return Value(text);  // quoted, block, or the non-specific "!" tag
  if (tag == "?" || tag.empty()) return yaml11_plain_scalar(text, where);
  if (tag.rfind(kTagPrefix, 0) == 0) {
    std::string t = tag.substr(std::string(kTagPrefix).size());
    if (t == "str") return Value(text);
    if (t != "int" && t != "float" && t != "bool" && t != "null")
      file_error(where, "unsupported YAML tag " + yaml::display_tag(tag) +
                            " (Python's yaml.safe_load, which Megatron's load_yaml uses, cannot construct it)",
                 "input.yaml-tag");
    if (std::optional<Value> v = yaml11_tagged_scalar(t, text, where)) return *v;
    file_error(where,
               "cannot construct !!" + t + " from " + Value(abbreviate(text)).py_repr() +
                   " (Python's yaml.safe_load cannot either)",
               "input.yaml-tag");
  }
  file_error(where, "unsupported YAML tag " + yaml::display_tag(tag) +
                        " (Python's yaml.safe_load, which Megatron's load_yaml uses, cannot construct it)",
             "input.yaml-tag");
}

// A mapping key as the string json.dumps makes of the typed key.
std::string json_key(const Value& k) {
  if (k.is_str()) return k.as_str();
  return k.json();  // null, true/false, ints, floats as repr (NaN/Infinity)
}

const std::vector<std::string> kYamlCfgFlags = {"--yaml-cfg"};

// The identity of a key in the dict safe_load builds: Python's ==, so 1, 1.0 and True are one key; each NaN is
// its own.
std::string dict_identity(const Value& k, std::size_t position) {
  if (k.is_none()) return "n";
  if (k.is_bool()) return k.as_bool() ? "i:1" : "i:0";
  if (k.is_int()) return "i:" + std::to_string(k.as_int());
  if (k.is_float()) {
    double f = k.as_float();
    if (std::isnan(f)) return "nan:" + std::to_string(position);
    if (f == std::floor(f) && std::fabs(f) < 9.2e18) return "i:" + std::to_string(static_cast<long long>(f));
    return "f:" + py_float_repr(f);
  }
  return "s:" + k.py_str();
}

struct Converter {
  const ConfigOptions& opts;
  std::vector<std::string>* warnings;

  void warn(const std::string& w) const {
    if (warnings) warnings->push_back(w);
  }

  Value convert_map(const yaml::Node& n, const std::string& prefix, std::map<std::string, std::string>* where) const {
    if (!n.plain() && n.tag() != "!" && !yaml::standard_tag(n.tag(), "map")) yaml::unsupported_tag(n, kYamlCfgFlags);
    std::size_t own_from = 0;
    auto pairs = yaml::merged_pairs(n, kYamlCfgFlags, &own_from);
    // safe_load builds a dict: keys compare as Python values (1 == 1.0 == True), the first spelling stays, the
    // last value wins. json.dumps then writes the keys as strings, and json.loads dedups those again.
    std::vector<std::pair<Value, size_t>> dict;  // key -> index of the pair holding its last value
    std::unordered_map<std::string, size_t> dict_at;       // identity -> position in dict
    std::unordered_map<std::string, yaml::Node> own_seen;  // identity -> the mapping's own last key
    for (size_t i = 0; i < pairs.size(); ++i) {
      const yaml::Node& k = pairs[i].first;
      Value key;  // a null key (`~:`, `null:`) is None
      if (k.is_scalar()) {
        key = k.plain() && k.scalar() == "=" ? Value("=") : typed_scalar(k, k.scalar(), k.where());
      } else if (!k.is_null()) {
        file_error(k.where(),
                   "the key at " + k.where() + " is not a scalar (it is " + k.kind_name() + "; Python: unhashable key)",
                   "input.yaml-non-scalar-key");
      }
      std::string id = dict_identity(key, i);
      if (i >= own_from) {
        auto [it, fresh] = own_seen.try_emplace(id, k);
        if (!fresh) {
          const std::string here = printable(k.where(), false);  // a file name's newline stays in this line
          warn("[input.yaml-duplicate-key] " + here + ": duplicate key " + abbreviate(key.py_repr()) + " (also at " +
               printable(it->second.where(), false) + "): the value at " + here + " is used, as Python's "
               "yaml.safe_load does");
          it->second = k;
        }
      }
      auto [it, fresh] = dict_at.try_emplace(id, dict.size());
      if (fresh)
        dict.emplace_back(std::move(key), i);
      else
        dict[it->second].second = i;
    }
    Object out;
    out.reserve(dict.size());
    std::unordered_map<std::string, size_t> out_at;
    for (const auto& [key, index] : dict) {
      const yaml::Node& key_node = pairs[index].first;
      const yaml::Node& value_node = pairs[index].second;
      std::string name = json_key(key);
      std::string full = prefix.empty() ? name : prefix + "." + name;
      Value val = convert(value_node, full, where);
      auto [it, fresh] = out_at.try_emplace(name, out.size());
      if (fresh)
        out.emplace_back(name, std::move(val));
      else
        out[it->second].second = std::move(val);
      if (where) (*where)[full] = key_node.where();
    }
    return Value::object(std::move(out));
  }

  Value convert(const yaml::Node& n, const std::string& prefix, std::map<std::string, std::string>* where) const {
    switch (n.type()) {
      case yaml::Node::Type::Null:
      case yaml::Node::Type::Undefined: return Value();
      case yaml::Node::Type::Scalar: {
        std::string text = n.scalar();
        std::string at = n.where();
        if (n.swallowed_line())
          warn("[input.yaml-multiline-quoted] " + at + ": the quoted value starting here runs on to " + n.where().substr(0, at.rfind(':') + 1) +
               std::to_string(n.swallowed_line()) + ", taking in what looks like the key '" + echo_word(n.swallowed_key()) +
               "' (a missing closing quote?); Python's yaml.safe_load reads it as one value too");
        // Megatron's env constructor is registered on PyYAML's default loaders, not on safe_load's: ${VAR} is
        // expanded here by choice, with --config's rules (docs/yaml-cfg.md).
        if (text.find('$') != std::string::npos) text = expand_env(text, opts, at);
        return typed_scalar(n, text, at);
      }
      case yaml::Node::Type::Sequence: {
        if (!n.plain() && n.tag() != "!" && !yaml::standard_tag(n.tag(), "seq")) yaml::unsupported_tag(n, kYamlCfgFlags);
        List l;
        l.reserve(n.size());
        for (size_t i = 0; i < n.size(); ++i) l.push_back(convert(n.item(i), prefix, nullptr));
        return Value(std::move(l));
      }
      case yaml::Node::Type::Map: return convert_map(n, prefix, where);
    }
    return Value();
  }
};

bool torch_dtype_name(const std::string& s) {
  return s == "torch.float16" || s == "torch.bfloat16" || s == "torch.float32";
}

std::string repr(const Value& v, std::string_view key) {
  switch (v.kind()) {
    case Value::Kind::Object: {
      std::string out = "namespace(";
      bool first = true;
      for (const auto& [k, e] : v.as_object()) {
        out += (first ? "" : ", ") + k + "=" + repr(e, k);
        first = false;
      }
      return out + ")";
    }
    case Value::Kind::List:
    case Value::Kind::Tuple: {
      bool tuple = v.kind() == Value::Kind::Tuple;
      std::string out = tuple ? "(" : "[";
      const List& l = v.as_list();
      for (size_t i = 0; i < l.size(); ++i) out += (i ? ", " : "") + repr(l[i], {});
      if (tuple && l.size() == 1) out += ",";
      return out + (tuple ? ")" : "]");
    }
    case Value::Kind::Str:
      // validate_yaml stores torch.half / torch.bfloat16 objects, whose repr is unquoted.
      if (key == "params_dtype" && torch_dtype_name(v.as_str())) return v.as_str();
      return v.py_repr();
    default: return v.py_repr();
  }
}

}  // namespace

bool yaml_cfg_requested(const Namespace& ns) { return ns.has("yaml_cfg") && !ns["yaml_cfg"].is_none(); }

Object load_yaml_cfg_file(const std::string& path, const ConfigOptions& opts, std::map<std::string, std::string>* where,
                          std::vector<std::string>* warnings) {
  yaml::Document doc = yaml::load_file(path, "--yaml-cfg file", kYamlCfgFlags);
  yaml::Node root = doc.root();
  if (root.is_null())
    file_error(path + ":1", "the --yaml-cfg file is empty; Megatron's load_yaml needs a mapping of arguments");
  if (!root.is_map())
    file_error(root.where(), "a --yaml-cfg file must be a mapping of arguments and sections (Megatron's "
                             "load_yaml sets attributes on it)");
  std::size_t from = warnings ? warnings->size() : 0;
  Object top = Converter{opts, warnings}.convert(root, "", where).as_object();
  if (warnings) yaml::cap_warnings(*warnings, from, path);
  return top;
}

std::string yaml_cfg_path(const Namespace& argparse_ns) {
  const Value& arg = argparse_ns["yaml_cfg"];
  return arg.is_str() ? arg.as_str() : arg.py_str();
}

Namespace load_yaml_cfg(const Namespace& argparse_ns, const TargetEnv& env, const ConfigOptions& opts, YamlCfg& cfg,
                        std::vector<std::string>& warnings) {
  cfg.path = yaml_cfg_path(argparse_ns);
  const Provenance given = argparse_ns.provenance("yaml_cfg");

  // load_yaml prints that argparse arguments will be ignored; say which.
  std::string ignored;
  for (const auto& e : argparse_ns.entries())
    if ((e.prov.kind == Provenance::Kind::Cli || e.prov.kind == Provenance::Kind::Config) && e.dest != "yaml_cfg")
      ignored += (ignored.empty() ? "" : ", ") + Schema::megatron().flag_for_dest(e.dest);
  warnings.push_back(with_rule_id(kExperimentalFlagRule.id, "--yaml-cfg is experimental: the YAML file replaces every "
                                  "other Megatron argument") +
                       (ignored.empty() ? std::string() : " (ignored: " + ignored + ")"));

  // seed 163 / load_yaml: the namespace is the file's content, plus yaml_cfg and
  // _is_global_batch_size_explicitly_specified.
  Namespace ns;
  Object top = load_yaml_cfg_file(cfg.path, opts, &cfg.where, &warnings);
  for (auto& [k, v] : top) ns.set(k, std::move(v), Provenance{Provenance::Kind::Config, cfg.where[k]});
  ns.set("yaml_cfg", Value(cfg.path), given);
  ns.derive("_is_global_batch_size_explicitly_specified",
            Value(ns.has("global_batch_size") && !ns["global_batch_size"].is_none()), "load_yaml");

  // seed 166-168
  ns.set("rank", Value(env.int_var("RANK", 0)), env_provenance(env, "RANK"));
  ns.set("world_size", Value(env.int_var("WORLD_SIZE", 1)), env_provenance(env, "WORLD_SIZE"));

  // seed 170-187: the MSC handling. A YAML namespace has args.disable_msc_deprecated and args.enable_msc only
  // when the file defines them; the validation of a --yaml-cfg run reports Megatron's AttributeError
  // (yaml.missing-attribute, config/validate/yaml_arguments.h) when one is missing.
  if (ns.has("disable_msc_deprecated") && ns["disable_msc_deprecated"].truthy()) {
    warnings.push_back("disable_msc_deprecated is deprecated: MSC is off unless enable_msc is true");
    const bool unchanged = ns.has("enable_msc") && ns["enable_msc"].kind() == Value::Kind::Bool &&
                           ns["enable_msc"] == Value(false);
    if (!unchanged) ns.derive("enable_msc", Value(false), "parse_args (disable_msc_deprecated)");
  }
  return ns;
}

std::string yaml_namespace_repr(const Value& v) { return repr(v, {}); }

void print_yaml_table(std::ostream& os, const Namespace& ns, const std::string& title) {
  // After validate_yaml, the model_parallel and language_model keys are also top-level copies (its last step);
  // Megatron printed the table before that step. `num_experts` derived there marks a flattened namespace.
  bool flattened = ns.has("num_experts") && ns.provenance("num_experts").kind == Provenance::Kind::Derived;
  auto in_section = [&](const std::string& key) {
    for (const char* s : {"model_parallel", "language_model"}) {
      if (!ns.has(s) || !ns[s].is_object()) continue;
      for (const auto& e : ns[s].as_object())
        if (e.first == key) return true;
    }
    return false;
  };
  Namespace shown;
  for (const auto& e : ns.entries()) {
    if (flattened && (e.dest == "num_experts" || in_section(e.dest))) continue;
    // str(value): strings as they are, containers with repr() of their items (sections as namespace(...)).
    Value text = e.value.is_str() ? e.value : Value(repr(e.value, e.dest));
    shown.set(e.dest, std::move(text), e.prov);
  }
  print_megatron_table(os, shown, title);
}

}  // namespace mr
