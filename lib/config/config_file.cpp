#include "config/config_file.h"

#include <yaml-cpp/yaml.h>

#include <cctype>
#include <cstdlib>
#include <fstream>
#include <regex>
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

// A plain (unquoted) scalar as a typed value: bool, null, int, float or string.
Value typed_scalar(const YAML::Node& n, const std::string& text) {
  if (is_quoted(n)) return Value(text);
  if (auto b = yaml_bool(text)) return Value(*b);
  if (yaml_null(text)) return Value();
  static const std::regex int_re(R"([-+]?(0|[1-9][0-9_]*))");
  static const std::regex float_re(R"([-+]?(\.[0-9]+|[0-9][0-9_]*(\.[0-9_]*)?)([eE][-+]?[0-9]+)?|[-+]?\.(inf|Inf|INF)|\.(nan|NaN|NAN))");
  if (std::regex_match(text, int_re)) {
    try {
      return Value(parse_py_int(text));
    } catch (const ConvError&) {
    }
  }
  if (std::regex_match(text, float_re)) {
    std::string t = text;
    if (t.find(".inf") != std::string::npos || t.find(".Inf") != std::string::npos || t.find(".INF") != std::string::npos)
      return Value(t[0] == '-' ? -HUGE_VAL : HUGE_VAL);
    if (t.find(".nan") != std::string::npos || t.find(".NaN") != std::string::npos || t.find(".NAN") != std::string::npos)
      return Value(std::nan(""));
    try {
      return Value(parse_py_float(t));
    } catch (const ConvError&) {
    }
  }
  return Value(text);
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
  if (!args.IsMap()) throw file_error(loc(path, args), "MODEL_ARGS must be a mapping of flags to values");
  std::vector<Token> tokens;
  for (const auto& kv : args) {
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

void apply_plain(const Schema& schema, const YAML::Node& root, const std::string& path, const ConfigOptions& opts,
                 ConfigResult& out, Namespace& ns) {
  for (const auto& kv : root) {
    std::string key = kv.first.Scalar();
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
    if (*arg->spec->deprecated) out.report.warnings.push_back(key + " is deprecated: " + arg->spec->deprecated);
    Value v = to_value(kv.second, path, opts);
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
      size_t j = i + 1;
      while (j < text.size() && (std::isalnum(static_cast<unsigned char>(text[j])) || text[j] == '_')) ++j;
      if (j == i + 1) {
        out += text[i++];
        continue;
      }
      name = text.substr(i + 1, j - i - 1);
      i = j;
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
