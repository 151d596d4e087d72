// Megatron's --yaml-cfg: the CLI-combination rules, load_yaml, and the rest of parse_args on the YAML namespace.
// Seed: ../shared/spec/arguments.py parse_args() 148-187; Megatron-LM megatron/training/yaml_arguments.py
// load_yaml().
#include "config/yaml_cfg.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <sstream>
#include <unordered_map>

#include "config/print.h"
#include "config/schema.h"
#include "config/types.h"
#include "config/validate/yaml_chain.h"
#include "config/yaml_doc.h"

namespace mr {

namespace {

MR_RULE(kCliTritonAutotune, "yaml.cli-triton-autotune",
        "--yaml-cfg cannot be combined with Triton autotune arguments (--triton-autotune-*) that differ from their "
        "defaults; set them in the YAML file instead.");
MR_RULE(kCliWideResidual, "yaml.cli-wide-residual",
        "--yaml-cfg cannot be combined with --wide-residual: the YAML model configuration replaces the command-line "
        "model arguments.");

// ---- YAML 1.1 implicit typing (PyYAML's SafeLoader resolvers), matched by hand -------------------------------

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_hex_digit(char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

// A cursor over a scalar's text for the resolver grammars.
struct Scan {
  std::string_view t;
  size_t p = 0;
  bool done() const { return p == t.size(); }
  bool eat(char c) {
    if (p < t.size() && t[p] == c) return ++p, true;
    return false;
  }
  bool eat_any(std::string_view cs) {
    if (p < t.size() && cs.find(t[p]) != std::string_view::npos) return ++p, true;
    return false;
  }
  bool sign() { return eat_any("+-"); }
  // [f][f_]* (need_first) or [f_]*: false only when a required first character is missing.
  bool digits_underscores(bool (*f)(char), bool need_first = true) {
    if (need_first) {
      if (p >= t.size() || !f(t[p])) return false;
      ++p;
    }
    while (p < t.size() && (f(t[p]) || t[p] == '_')) ++p;
    return true;
  }
  // (?::[0-5]?[0-9])+
  bool sexagesimal_tail() {
    bool any = false;
    while (p < t.size() && t[p] == ':') {
      size_t save = p++;
      if (p + 1 < t.size() && t[p] >= '0' && t[p] <= '5' && is_digit(t[p + 1])) {
        p += 2;
      } else if (p < t.size() && is_digit(t[p])) {
        ++p;
      } else {
        p = save;
        break;
      }
      any = true;
    }
    return any;
  }
  // (?:[eE][-+][0-9]+)?
  bool optional_exponent() {
    if (!eat_any("eE")) return true;
    if (!sign()) return false;
    size_t start = p;
    while (p < t.size() && is_digit(t[p])) ++p;
    return p > start;
  }
};

bool yaml_bool(std::string_view s, bool* out) {
  for (std::string_view w : {"yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"})
    if (s == w) return *out = true, true;
  for (std::string_view w : {"no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"})
    if (s == w) return *out = false, true;
  return false;
}

bool yaml_null(std::string_view s) { return s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL"; }

// ^(?:[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+|[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+)$
bool yaml_int_syntax(std::string_view text) {
  std::string_view u = text;
  if (!u.empty() && (u[0] == '+' || u[0] == '-')) u.remove_prefix(1);
  auto all = [](std::string_view s, bool (*f)(char)) {
    for (char c : s)
      if (!f(c) && c != '_') return false;
    return true;
  };
  if (u.size() > 2 && u.substr(0, 2) == "0b") return all(u.substr(2), [](char c) { return c == '0' || c == '1'; });
  if (u.size() > 2 && u.substr(0, 2) == "0x") return all(u.substr(2), is_hex_digit);
  if (u == "0") return true;
  if (u.size() > 1 && u[0] == '0') return all(u.substr(1), [](char c) { return c >= '0' && c <= '7'; });
  if (u.empty() || u[0] < '1' || u[0] > '9') return false;
  Scan s{u, 1};
  s.digits_underscores(is_digit, false);
  return s.done() || (s.sexagesimal_tail() && s.done());
}

// ^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?|\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?
//    |[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$
bool yaml_float_syntax(std::string_view text) {
  {
    Scan s{text};
    s.sign();
    if (s.digits_underscores(is_digit) && s.eat('.') && s.digits_underscores(is_digit, false) && s.optional_exponent() &&
        s.done())
      return true;
  }
  {
    Scan s{text};
    if (s.eat('.') && s.digits_underscores(is_digit) && s.optional_exponent() && s.done()) return true;
  }
  {
    Scan s{text};
    s.sign();
    if (s.digits_underscores(is_digit) && s.sexagesimal_tail() && s.eat('.') && s.digits_underscores(is_digit, false) &&
        s.done())
      return true;
  }
  std::string_view u = text;
  if (!u.empty() && (u[0] == '+' || u[0] == '-')) u.remove_prefix(1);
  if (u == ".inf" || u == ".Inf" || u == ".INF") return true;
  return text == ".nan" || text == ".NaN" || text == ".NAN";
}

// ^(?:[0-9]{4}-[0-9]{2}-[0-9]{2}|[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}(?:[Tt]|[ \t]+)[0-9]{1,2}:[0-9]{2}:[0-9]{2}
//    (?:\.[0-9]*)?(?:[ \t]*(?:Z|[-+][0-9]{1,2}(?::[0-9]{2})?))?)$
bool yaml_timestamp_syntax(std::string_view text) {
  auto n_digits = [](Scan& s, size_t lo, size_t hi) {
    size_t start = s.p;
    while (s.p < s.t.size() && is_digit(s.t[s.p]) && s.p - start < hi) ++s.p;
    return s.p - start >= lo;
  };
  Scan s{text};
  if (!(n_digits(s, 4, 4) && s.eat('-'))) return false;
  size_t after_year = s.p;
  if (n_digits(s, 2, 2) && s.eat('-') && n_digits(s, 2, 2) && s.done()) return true;
  s.p = after_year;
  if (!(n_digits(s, 1, 2) && s.eat('-') && n_digits(s, 1, 2))) return false;
  if (!s.eat_any("Tt")) {
    size_t start = s.p;
    while (s.eat_any(" \t")) {
    }
    if (s.p == start) return false;
  }
  if (!(n_digits(s, 1, 2) && s.eat(':') && n_digits(s, 2, 2) && s.eat(':') && n_digits(s, 2, 2))) return false;
  if (s.eat('.'))
    while (s.p < s.t.size() && is_digit(s.t[s.p])) ++s.p;
  while (s.eat_any(" \t")) {
  }
  if (s.done()) return true;
  if (s.eat('Z')) return s.done();
  if (!(s.sign() && n_digits(s, 1, 2))) return false;
  if (s.eat(':') && !n_digits(s, 2, 2)) return false;
  return s.done();
}

[[noreturn]] void file_error(const std::string& where, const std::string& msg) {
  throw UsageError(where + ": " + msg, {"--yaml-cfg"}, where);
}

// PyYAML's construct_yaml_int on text matching yaml_int_syntax.
Value construct_int(const std::string& text, const std::string& where) {
  std::string v;
  for (char c : text)
    if (c != '_') v += c;
  bool neg = false;
  if (!v.empty() && (v[0] == '-' || v[0] == '+')) {
    neg = v[0] == '-';
    v.erase(0, 1);
  }
  auto parse = [&](std::string_view digits, int base) {
    int64_t out = 0;
    auto r = std::from_chars(digits.data(), digits.data() + digits.size(), out, base);
    if (r.ec != std::errc() || r.ptr != digits.data() + digits.size())
      file_error(where, "integer " + text + " is out of range");
    return out;
  };
  int64_t n = 0;
  if (v == "0") {
    n = 0;
  } else if (v.rfind("0b", 0) == 0) {
    n = parse(std::string_view(v).substr(2), 2);
  } else if (v.rfind("0x", 0) == 0) {
    n = parse(std::string_view(v).substr(2), 16);
  } else if (v[0] == '0') {
    n = parse(v, 8);
  } else if (v.find(':') != std::string::npos) {
    // Base 60 (1:30:00 is 5400), checked: Python's ints do not wrap, ours would.
    std::stringstream ss(v);
    std::string part;
    while (std::getline(ss, part, ':'))
      if (__builtin_mul_overflow(n, int64_t{60}, &n) || __builtin_add_overflow(n, parse(part, 10), &n))
        file_error(where, "integer " + text + " is out of range (more than 64 bits)");
  } else {
    n = parse(v, 10);
  }
  return Value(neg ? -n : n);
}

// PyYAML's construct_yaml_float on text matching yaml_float_syntax.
Value construct_float(const std::string& text) {
  std::string v;
  for (char c : text)
    if (c != '_') v += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  double sign = 1;
  if (!v.empty() && (v[0] == '-' || v[0] == '+')) {
    sign = v[0] == '-' ? -1 : 1;
    v.erase(0, 1);
  }
  if (v == ".inf") return Value(sign * HUGE_VAL);
  if (v == ".nan") return Value(std::nan(""));
  if (v.find(':') != std::string::npos) {
    double n = 0;
    std::stringstream ss(v);
    std::string part;
    while (std::getline(ss, part, ':')) n = n * 60 + parse_py_float(part);
    return Value(sign * n);
  }
  return Value(sign * parse_py_float(v));
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
                            " (Python's yaml.safe_load, which Megatron's load_yaml uses, cannot construct it)");
    Value v = yaml11_plain_scalar(text, where);
    bool ok = (t == "int" && v.is_int()) || (t == "float" && (v.is_float() || v.is_int())) ||
              (t == "bool" && v.is_bool()) || (t == "null" && v.is_none());
    if (ok) return t == "float" ? Value(v.as_float()) : v;
    file_error(where, "cannot construct !!" + t + " from " + Value(text).py_repr());
  }
  file_error(where, "unsupported YAML tag " + yaml::display_tag(tag) +
                        " (Python's yaml.safe_load, which Megatron's load_yaml uses, cannot construct it)");
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
        file_error(k.where(), "the key at " + k.where() + " is not a scalar (it is " + k.kind_name() +
                                  "; Python: unhashable key)");
      }
      std::string id = dict_identity(key, i);
      if (i >= own_from) {
        auto [it, fresh] = own_seen.try_emplace(id, k);
        if (!fresh) {
          warn("[input.yaml-duplicate-key] " + k.where() + ": duplicate key " + key.py_repr() + " (also at " + it->second.where() +
               "): the value at " + k.where() + " is used, as Python's yaml.safe_load does");
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
               std::to_string(n.swallowed_line()) + ", taking in what looks like the key '" + n.swallowed_key() +
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

// Lists and tuples compare element-wise with each other (the dataclass normalises what argparse stores).
bool same_config_value(const Value& a, const Value& b) {
  if (a.is_list() && b.is_list()) {
    const List &x = a.as_list(), &y = b.as_list();
    if (x.size() != y.size()) return false;
    for (size_t i = 0; i < x.size(); ++i)
      if (!same_config_value(x[i], y[i])) return false;
    return true;
  }
  return a == b;
}

// seed 149-160: the CLI arguments the YAML would silently replace and Megatron refuses instead.
void cli_combination(Context& ctx) {
  // _default_config_from_args(AutotunePolicy, args, prefix='triton_autotune') != AutotunePolicy(): the policy's
  // fields are the triton_autotune_* dests, whose argparse defaults are the dataclass defaults.
  std::vector<std::string> changed;
  for (const Arg& a : Schema::megatron().args())
    if (std::string_view(a.dest()).rfind("triton_autotune_", 0) == 0 && ctx.has(a.dest()) &&
        !same_config_value(ctx[a.dest()], a.def))
      changed.push_back(a.dest());
  if (!changed.empty()) {
    std::string list;
    for (const auto& d : changed) list += (list.empty() ? "" : ", ") + Context::flag(d);
    try {
      ctx.fail(kCliTritonAutotune,
               "Triton autotune CLI arguments cannot be combined with --yaml-cfg; set triton_autotune in the YAML "
               "configuration instead (given: " + list + ")",
               {changed.front(), "yaml_cfg"});
    } catch (RuleFailure& f) {
      f.diag.flags.clear();
      for (const auto& d : changed) f.diag.flags.push_back(Context::flag(d));
      f.diag.flags.push_back("--yaml-cfg");
      throw;
    }
  }
  // _wide_residual_config_from_args(args) is not None: --wide-residual N was given.
  ctx.require(ctx.is_none("wide_residual_num_streams"), kCliWideResidual,
              "Wide-residual CLI arguments cannot be combined with --yaml-cfg because YAML model configuration "
              "replaces argparse model arguments (given: --wide-residual " +
                  ctx["wide_residual_num_streams"].py_str() + ")",
              {"wide_residual_num_streams", "yaml_cfg"});
}

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

Value yaml11_plain_scalar(const std::string& text, const std::string& where) {
  bool b = false;
  if (yaml_bool(text, &b)) return Value(b);
  if (yaml_null(text)) return Value();
  if (yaml_int_syntax(text)) return construct_int(text, where);
  if (yaml_float_syntax(text)) return construct_float(text);
  if (yaml_timestamp_syntax(text))
    file_error(where, "the timestamp " + text +
                          " becomes a date in Python's yaml.safe_load, which load_yaml's json.dumps cannot serialise "
                          "(quote it to make it a string)");
  if (text == "=" || text == "<<")
    file_error(where, "a plain " + text + " value has no constructor in Python's yaml.safe_load (quote it)");
  return Value(text);
}

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

void apply_yaml_cfg(Parsed& p, const ConfigOptions& opts) {
  auto cfg = std::make_shared<YamlCfg>();
  p.yaml_cfg = cfg;
  const Value& arg = p.ns["yaml_cfg"];
  cfg->path = arg.is_str() ? arg.as_str() : arg.py_str();
  const Provenance given = p.ns.provenance("yaml_cfg");

  // seed 148-160: the combinations Megatron refuses, checked on the namespace argparse produced.
  {
    std::vector<Diagnostic> none;
    Context cli(p.ns, p.env, none);
    try {
      cli_combination(cli);
    } catch (const RuleFailure& f) {
      cfg->errors.push_back(f.diag);
      return;
    }
  }
  // load_yaml prints that argparse arguments will be ignored; say which.
  std::string ignored;
  for (const auto& e : p.ns.entries())
    if ((e.prov.kind == Provenance::Kind::Cli || e.prov.kind == Provenance::Kind::Config) && e.dest != "yaml_cfg")
      ignored += (ignored.empty() ? "" : ", ") + Context::flag(e.dest);
  p.warnings.push_back("--yaml-cfg is experimental: the YAML file replaces every other Megatron argument" +
                       (ignored.empty() ? std::string() : " (ignored: " + ignored + ")"));

  // seed 163 / load_yaml: the namespace is the file's content, plus yaml_cfg and
  // _is_global_batch_size_explicitly_specified.
  Namespace ns;
  Object top = load_yaml_cfg_file(cfg->path, opts, &cfg->where, &p.warnings);
  for (auto& [k, v] : top) ns.set(k, std::move(v), Provenance{Provenance::Kind::Config, cfg->where[k]});
  ns.set("yaml_cfg", Value(cfg->path), given);
  ns.derive("_is_global_batch_size_explicitly_specified",
            Value(ns.has("global_batch_size") && !ns["global_batch_size"].is_none()), "load_yaml");

  // seed 166-168
  ns.set("rank", Value(p.env.int_var("RANK", 0)), Provenance{Provenance::Kind::Env, "RANK"});
  ns.set("world_size", Value(p.env.int_var("WORLD_SIZE", 1)), Provenance{Provenance::Kind::Env, "WORLD_SIZE"});
  p.ns = std::move(ns);

  // seed 170-187: the MSC handling reads args.disable_msc_deprecated and args.enable_msc, which a YAML namespace
  // has only when the file defines them (else Megatron's AttributeError: yaml.missing-attribute).
  std::vector<Diagnostic> diags;
  Context ctx(p.ns, p.env, diags);
  YamlArgs y(ctx, *cfg);
  try {
    if (y.truthy("disable_msc_deprecated")) {
      p.warnings.push_back("disable_msc_deprecated is deprecated: MSC is off unless enable_msc is true");
      y.set("enable_msc", Value(false), "parse_args (disable_msc_deprecated)");
    }
    (void)y.truthy("enable_msc");
  } catch (const RuleFailure& f) {
    cfg->errors.push_back(f.diag);
  }
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
