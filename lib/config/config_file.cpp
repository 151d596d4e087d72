#include "config/config_file.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "config/types.h"

namespace mr {

EnvLookup process_env_lookup() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (!v) return std::nullopt;
    return std::string(v);
  };
}

namespace {

std::string loc(const std::string& path, const YAML::Node& n) {
  return path + ":" + std::to_string(n.Mark().line + 1);
}

bool is_quoted(const YAML::Node& n) { return n.Tag() == "!"; }

// YAML 1.1 booleans, as Python's yaml loader reads them.
std::optional<bool> yaml_bool(const std::string& s) {
  static const char* const t[] = {"true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON"};
  static const char* const f[] = {"false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF"};
  for (const char* x : t)
    if (s == x) return true;
  for (const char* x : f)
    if (s == x) return false;
  return std::nullopt;
}

bool yaml_null(const std::string& s) { return s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL"; }

// YAML 1.1 number syntax (the grammar Python's yaml loader resolves plain scalars with), matched by hand:
// std::regex would cost more than the rest of a dry run.
bool digits_underscores(std::string_view s, bool (*digit)(char)) {
  if (s.empty()) return false;
  for (char c : s)
    if (!digit(c) && c != '_') return false;
  return true;
}
bool is_dec(char c) { return c >= '0' && c <= '9'; }
bool is_oct(char c) { return c >= '0' && c <= '7'; }
bool is_hex(char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; }
std::string_view unsigned_part(std::string_view t) {
  if (!t.empty() && (t[0] == '-' || t[0] == '+')) t.remove_prefix(1);
  return t;
}
// [-+]?(0|[1-9][0-9_]*)
bool yaml_dec_int(std::string_view t) {
  t = unsigned_part(t);
  if (t == "0") return true;
  return !t.empty() && t[0] >= '1' && t[0] <= '9' && digits_underscores(t, is_dec);
}
// [-+]?0x[0-9a-fA-F_]+ and [-+]?0[0-7_]+
int yaml_radix_int(std::string_view t) {
  t = unsigned_part(t);
  if (t.size() > 2 && t.substr(0, 2) == "0x" && digits_underscores(t.substr(2), is_hex)) return 16;
  if (t.size() > 1 && t[0] == '0' && digits_underscores(t.substr(1), is_oct)) return 8;
  return 0;
}
// [-+]?([0-9][0-9_]*)?\.[0-9_]*([eE][-+][0-9]+)?  with at least one digit before the point, or a point then a digit
bool yaml_float(std::string_view t) {
  t = unsigned_part(t);
  size_t e = t.find_first_of("eE");
  std::string_view mant = t.substr(0, e);
  if (e != std::string_view::npos) {
    std::string_view ex = t.substr(e + 1);
    if (ex.size() < 2 || (ex[0] != '-' && ex[0] != '+')) return false;
    for (char c : ex.substr(1))
      if (!is_dec(c)) return false;
  }
  size_t dot = mant.find('.');
  if (dot == std::string_view::npos) return false;
  std::string_view ip = mant.substr(0, dot), fp = mant.substr(dot + 1);
  if (!ip.empty() && (!is_dec(ip[0]) || !digits_underscores(ip, is_dec))) return false;
  if (!fp.empty() && !digits_underscores(fp, is_dec)) return false;
  if (ip.empty()) return !fp.empty() && is_dec(fp[0]);
  return true;
}

// A plain (unquoted) scalar as a typed value, resolved with YAML 1.1 rules as Python's yaml loader does
// (so "1e-2" stays a string while "0.00001" is a float and "yes" is a bool).
Value typed_scalar(const YAML::Node& n, const std::string& text) {
  if (is_quoted(n)) return Value(text);
  if (auto b = yaml_bool(text)) return Value(*b);
  if (yaml_null(text)) return Value();
  std::string clean = text;
  clean.erase(std::remove(clean.begin(), clean.end(), '_'), clean.end());
  try {
    if (yaml_dec_int(text)) return Value(parse_py_int(clean));
    if (int radix = yaml_radix_int(text)) {
      std::string_view u = unsigned_part(clean);
      long long v = std::stoll(std::string(u.substr(radix == 16 ? 2 : 0)), nullptr, radix);
      return Value(clean[0] == '-' ? -v : v);
    }
    if (yaml_float(text)) return Value(parse_py_float(clean));
  } catch (const std::exception&) {
    return Value(text);
  }
  std::string_view u = unsigned_part(text);
  if (u == ".inf" || u == ".Inf" || u == ".INF") return Value(text[0] == '-' ? -HUGE_VAL : HUGE_VAL);
  if (text == ".nan" || text == ".NaN" || text == ".NAN") return Value(std::nan(""));
  return Value(text);
}

// A mapping's entries in order; a repeated key keeps its first position and takes its last value, as a
// Python dict built from the YAML does.
std::vector<std::pair<YAML::Node, YAML::Node>> entries(const YAML::Node& map) {
  std::vector<std::pair<YAML::Node, YAML::Node>> out;
  for (const auto& kv : map) {
    bool dup = false;
    for (auto& e : out)
      if (e.first.Scalar() == kv.first.Scalar()) {
        e.second = kv.second;
        dup = true;
      }
    if (!dup) out.emplace_back(kv.first, kv.second);
  }
  return out;
}

Value to_value(const YAML::Node& n, const std::string& path, const ConfigOptions& opts) {
  switch (n.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined: return Value();
    case YAML::NodeType::Scalar: {
      std::string text = n.Scalar();
      if (text.find('$') != std::string::npos) text = expand_env(text, opts, loc(path, n));
      return typed_scalar(n, text);
    }
    case YAML::NodeType::Sequence: {
      List l;
      for (const auto& e : n) l.push_back(to_value(e, path, opts));
      return Value(std::move(l));
    }
    case YAML::NodeType::Map: {
      Object o;
      for (const auto& kv : n) o.emplace_back(kv.first.Scalar(), to_value(kv.second, path, opts));
      return Value::object(std::move(o));
    }
  }
  return Value();
}

// The word the CI launcher passes for a scalar: Python's str() of what the YAML loader produced.
std::string launcher_word(const Value& v) {
  if (v.is_bool()) return v.as_bool() ? "True" : "False";
  if (v.is_float()) return py_float_repr(v.as_float());
  return v.py_str();
}

UsageError file_error(const std::string& where, const std::string& msg, std::vector<std::string> flags = {}) {
  return UsageError(where + ": " + msg, std::move(flags), where);
}

void apply_model_args(const Schema& schema, const YAML::Node& args, const std::string& path,
                      const ConfigOptions& opts, ConfigResult& out, Namespace& ns) {
  if (args.IsNull()) return;  // an empty MODEL_ARGS stands for an empty command line
  if (!args.IsMap()) throw file_error(loc(path, args), "MODEL_ARGS must be a mapping of flags to values");
  std::vector<Token> tokens;
  for (const auto& kv : entries(args)) {
    std::string key = kv.first.Scalar();
    std::string where = loc(path, kv.first);
    Provenance origin{Provenance::Kind::Config, where};
    Value v = to_value(kv.second, path, opts);
    if (v.is_bool() && v.as_bool()) {
      tokens.push_back(Token{key, origin});
      continue;
    }
    if (v.is_str() && v.as_str().empty()) continue;  // the launcher drops empty values
    if (v.is_list()) {
      // A YAML sequence: one word per element.
      tokens.push_back(Token{key, origin});
      for (const Value& e : v.as_list()) tokens.push_back(Token{launcher_word(e), origin});
      continue;
    }
    std::string word = launcher_word(v);
    tokens.push_back(Token{key, origin});
    if (word.size() >= 2 && word.front() == '[' && word.back() == ']' && v.is_str()) {
      // "[a b c]": the brackets go and the rest splits into words.
      std::istringstream ss(word.substr(1, word.size() - 2));
      std::string w;
      while (ss >> w) tokens.push_back(Token{w, origin});
    } else {
      tokens.push_back(Token{word, origin});
    }
  }
  out.argv = tokens;
  ParseReport r = parse_tokens(schema, tokens, ns);
  out.report.warnings.insert(out.report.warnings.end(), r.warnings.begin(), r.warnings.end());
}

// Attributes parse_args() computes after argparse; our parsed-arguments JSON holds them, and they are recomputed
// from the environment, so a file feeding that JSON back may carry them.
bool parse_args_attribute(const std::string& key) {
  return key == "rank" || key == "world_size" || key == "_is_global_batch_size_explicitly_specified";
}

void apply_plain(const Schema& schema, const YAML::Node& root, const std::string& path, const ConfigOptions& opts,
                 ConfigResult& out, Namespace& ns) {
  for (const auto& kv : entries(root)) {
    std::string key = kv.first.Scalar();
    if (parse_args_attribute(key)) continue;
    std::string where = loc(path, kv.first);
    Provenance origin{Provenance::Kind::Config, where};
    const Arg* arg = nullptr;
    bool negate = false;
    if (key.rfind("--", 0) == 0) {
      arg = schema.find_flag(key);
    } else {
      std::string dest = key;
      for (char& c : dest)
        if (c == '-') c = '_';
      auto args = schema.find_dest(dest);
      if (!args.empty()) arg = args.front();
    }
    if (!arg) {
      std::string msg = "unknown argument '" + key + "'";
      std::string flag = key.rfind("--", 0) == 0 ? key : "--" + key;
      for (char& c : flag)
        if (c == '_') c = '-';
      auto s = schema.suggest(flag);
      if (!s.empty()) {
        msg += " (did you mean ";
        for (size_t i = 0; i < s.size(); ++i) msg += (i ? ", " : "") + s[i];
        msg += "?)";
      }
      throw file_error(where, msg, {key});
    }
    Value v = to_value(kv.second, path, opts);
    if (*arg->spec->deprecated && v != arg->def)
      out.report.warnings.push_back(where + ": " + key + " is deprecated: " + arg->spec->deprecated);
    if (arg->is_switch() && key.rfind("--", 0) == 0) {
      // Flag spelling: true applies the switch, false applies its opposite.
      if (!v.is_bool()) throw file_error(where, "switch " + key + " takes true or false, got " + v.py_repr(), {key});
      Value on = arg->spec->action == Action::BoolOptional ? Value(key.rfind("--no-", 0) != 0) : arg->konst;
      if (!on.is_bool()) throw file_error(where, "switch " + key + " cannot be set from a file", {key});
      negate = !v.as_bool();
      ns.set(arg->dest(), Value(negate ? !on.as_bool() : on.as_bool()), origin);
      continue;
    }
    assign_value(*arg, key, v, origin, ns);
  }
}

}  // namespace

std::string expand_env(const std::string& text, const ConfigOptions& opts, const std::string& where) {
  std::string out;
  for (size_t i = 0; i < text.size();) {
    if (text[i] != '$') {
      out += text[i++];
      continue;
    }
    size_t start = i;
    std::string name;
    if (i + 1 < text.size() && text[i + 1] == '{') {
      size_t close = text.find('}', i + 2);
      if (close == std::string::npos) throw UsageError(where + ": unterminated ${ in " + Value(text).py_repr(), {}, where);
      name = text.substr(i + 2, close - i - 2);
      i = close + 1;
    } else {
      out += text[i++];  // only the braced form is expanded; a bare $ stays as written
      continue;
    }
    if (auto v = opts.env(name)) {
      out += *v;
    } else if (opts.allow_unset_env) {
      out += text.substr(start, i - start);
    } else {
      throw UsageError(where + ": environment variable " + name +
                           " is not set (export it, or pass --allow-unset-env to keep it literal)",
                       {}, where);
    }
  }
  return out;
}

ConfigResult apply_config_file(const Schema& schema, const std::string& path, Namespace& ns,
                               const ConfigOptions& opts) {
  std::ifstream in(path);
  if (!in) throw UsageError(path + ": cannot read config file", {}, path);
  YAML::Node root;
  try {
    root = YAML::Load(in);
  } catch (const YAML::Exception& e) {
    std::string where = path + ":" + std::to_string(e.mark.line + 1);
    throw UsageError(where + ": invalid YAML: " + e.msg, {}, where);
  }
  ConfigResult out;
  if (root.IsNull()) return out;
  if (!root.IsMap()) throw file_error(loc(path, root), "a config file must be a mapping of arguments to values");
  if (root["MODEL_ARGS"]) {
    out.functional_test_layout = true;
    if (auto env = root["ENV_VARS"]; env && env.IsMap()) {
      for (const auto& kv : env) {
        Value v = to_value(kv.second, path, opts);
        out.env_vars[kv.first.Scalar()] = v.is_bool() ? launcher_word(v) : v.py_str();
      }
    }
    apply_model_args(schema, root["MODEL_ARGS"], path, opts, out, ns);
    return out;
  }
  apply_plain(schema, root, path, opts, out, ns);
  return out;
}

}  // namespace mr
