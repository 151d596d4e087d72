// YamlArgs (yaml_args.h): the typed reader of a --yaml-cfg namespace, with Python's attribute semantics.
#include "config/validate/yaml_args.h"

#include <cctype>
#include <stdexcept>

#include "config/validate/python.h"

namespace mr {

namespace {

MR_RULE(kMissing, "yaml.missing-attribute",
        "--yaml-cfg: a key that parse_args / validate_yaml reads is not defined in the YAML file (Megatron: "
        "AttributeError).");
MR_RULE(kWrongType, "yaml.wrong-type",
        "--yaml-cfg: a value validate_yaml computes with has the wrong type, e.g. a string or null where a number "
        "is needed (Megatron: TypeError).");
MR_RULE(kDivZero, "yaml.division-by-zero",
        "--yaml-cfg: a parallel size, head count or batch size of 0 that validate_yaml divides by (Megatron: "
        "ZeroDivisionError).");
std::pair<std::string_view, std::string_view> split_path(std::string_view path) {
  auto dot = path.find('.');
  if (dot == std::string_view::npos) return {path, {}};
  return {path.substr(0, dot), path.substr(dot + 1)};
}

// type(v).__name__ for the AttributeError / TypeError messages.
std::string py_type(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::None: return "NoneType";
    case Value::Kind::Bool: return "bool";
    case Value::Kind::Int: return "int";
    case Value::Kind::Float: return "float";
    case Value::Kind::Str: return "str";
    case Value::Kind::List: return "list";
    case Value::Kind::Tuple: return "tuple";
    case Value::Kind::Object: return "types.SimpleNamespace";
  }
  return "object";
}

bool same(const Value& a, const Value& b) { return a.kind() == b.kind() && a == b; }

std::string q(std::string_view path) { return "`" + std::string(path) + "`"; }

}  // namespace

const Value* YamlArgs::find(std::string_view path) const {
  const Namespace& ns = ctx_.args();
  auto [head, key] = split_path(path);
  if (!ns.has(head)) return nullptr;
  const Value& top = ns.get(head);
  if (key.empty()) return &top;
  if (!top.is_object()) return nullptr;
  for (const auto& [k, v] : top.as_object())
    if (k == key) return &v;
  return nullptr;
}

bool YamlArgs::has(std::string_view path) const { return find(path) != nullptr; }

const Value& YamlArgs::get(std::string_view path) {
  if (const Value* v = find(path)) return *v;
  auto [head, key] = split_path(path);
  const Namespace& ns = ctx_.args();
  std::string missing(key.empty() || !ns.has(head) ? head : key);
  std::string owner = "types.SimpleNamespace";
  std::string what = "the YAML file defines no " + q(key.empty() || !ns.has(head) ? head : path);
  if (!key.empty() && ns.has(head) && !ns.get(head).is_object()) {
    owner = py_type(ns.get(head));
    what = q(head) + " is " + ns.get(head).py_repr() + ", not a section, so it has no " + q(key);
  }
  what += " (Megatron: AttributeError: '" + owner + "' object has no attribute '" + missing + "')";
  // A --config file given to --yaml-cfg: its keys are flags (sorted first: '-' before any letter), or it holds the
  // functional tests' MODEL_ARGS section, or a model size at the top with no language_model section (a --yaml-cfg
  // file keeps num_layers and hidden_size in language_model).
  std::string sign;
  if (const std::vector<Namespace::Entry> keys = ns.entries(); !keys.empty() && keys.front().dest.rfind("--", 0) == 0)
    sign = "the file's keys are flags (" + keys.front().dest + ")";
  if (sign.empty() && ns.has("MODEL_ARGS")) sign = "the file has a MODEL_ARGS section";
  if (sign.empty() && !ns.has("language_model"))
    for (const char* top : {"num_layers", "hidden_size", "num_attention_heads"})
      if (ns.has(top)) {
        sign = std::string("the file sets ") + top + " at the top, with no language_model section";
        break;
      }
  if (!sign.empty())
    what += "; " + sign + ": this looks like a megatron-run --config file, not a Megatron --yaml-cfg file "
            "(language_model: and model_parallel: sections): give it with --config FILE";
  fail(kMissing, what, {path});
}

Value YamlArgs::get_or(std::string_view key, const Value& fallback) const {
  const Value* v = find(key);
  return v ? *v : fallback;
}

namespace {
// The source of a derived value as the user reads it: "py 58: ..." (how yaml_arguments.cpp cites Megatron's
// megatron/training/yaml_arguments.py) becomes "yaml_arguments.py:58: ...".
std::string cited(std::string_view why) {
  if (why.substr(0, 3) == "py " && why.size() > 3 && std::isdigit(static_cast<unsigned char>(why[3])))
    return "yaml_arguments.py:" + std::string(why.substr(3));
  return std::string(why);
}
}  // namespace

void YamlArgs::set(std::string_view path, Value v, std::string_view why_cited) {
  const std::string why = cited(why_cited);
  Namespace& ns = ctx_.args();
  auto [head, key] = split_path(path);
  if (key.empty()) {
    if (ns.has(head) && same(ns.get(head), v)) return;
    ctx_.set(head, std::move(v), why);
    return;
  }
  const Value& section = get(head);
  if (!section.is_object())
    fail(kMissing,
         q(head) + " is " + section.py_repr() + ", not a section, so " + q(key) +
             " cannot be set on it (Megatron: AttributeError: '" + py_type(section) + "' object has no attribute '" +
             std::string(key) + "')",
         {path});
  Object o = section.as_object();
  bool found = false;
  for (auto& [k, e] : o)
    if (k == key) {
      if (same(e, v)) return;
      e = v;
      found = true;
    }
  if (!found) o.emplace_back(std::string(key), v);
  Provenance p = ns.provenance(head);
  ns.set(head, Value::object(std::move(o)), p);
  derived_[std::string(path)] = std::string(why);
}

int64_t YamlArgs::integer(std::string_view path) {
  const Value& v = get(path);
  if (!v.is_int() && !v.is_bool()) wrong_type(path, "an integer");
  return v.as_int();
}

double YamlArgs::number(std::string_view path) {
  const Value& v = get(path);
  if (!v.is_number() && !v.is_bool()) wrong_type(path, "a number");
  return v.as_float();
}

int64_t YamlArgs::mod(int64_t a, int64_t b, const std::string& what, std::initializer_list<std::string_view> paths) {
  if (b == 0) {
    const std::string msg = "integer modulo by zero: " + what + " is 0 (Megatron: ZeroDivisionError)";
    if (paths.size() == 0) fail(kDivZero, msg, {what});
    fail(kDivZero, msg, paths);
  }
  return py_mod(a, b);
}

int64_t YamlArgs::floordiv(int64_t a, int64_t b, const std::string& what,
                           std::initializer_list<std::string_view> paths) {
  if (b == 0) {
    const std::string msg = "integer division by zero: " + what + " is 0 (Megatron: ZeroDivisionError)";
    if (paths.size() == 0) fail(kDivZero, msg, {what});
    fail(kDivZero, msg, paths);
  }
  return py_floordiv(a, b);
}

void YamlArgs::place(Diagnostic& d, std::initializer_list<std::string_view> paths) const {
  d.flags.assign(paths.begin(), paths.end());
  for (std::string_view p : paths) {
    auto it = cfg_.where.find(std::string(p));
    if (it == cfg_.where.end()) it = cfg_.where.find(std::string(split_path(p).first));
    if (it != cfg_.where.end()) {
      d.where = it->second;
      break;
    }
  }
  if (d.where.empty()) d.where = cfg_.path;
}

void YamlArgs::fail(const Rule& rule, const std::string& message, std::initializer_list<std::string_view> paths) {
  try {
    ctx_.fail(rule, message);  // counts the hit, builds the diagnostic
  } catch (RuleFailure& f) {
    place(f.diag, paths);
    throw;
  }
  throw std::logic_error("unreachable");
}

void YamlArgs::warn(const Rule& rule, const std::string& message, std::initializer_list<std::string_view> paths) {
  ctx_.warn(rule, message);  // counts the hit, appends the diagnostic
  place(ctx_.diagnostics().back(), paths);
}

void YamlArgs::wrong_type(std::string_view path, const std::string& expected) {
  const Value* v = find(path);
  std::string got = v ? v->py_repr() + " (" + py_type(*v) + ")" : "nothing";
  // A float where an integer is needed: Python carries it through validate_yaml's arithmetic (2.0 * 4 = 8.0) and
  // Megatron does not refuse it there; megatron-run takes integers only (docs/yaml-cfg.md).
  const bool float_value = v && v->kind() == Value::Kind::Float;
  fail(kWrongType,
       q(path) + " must be " + expected + ", got " + got +
           (float_value ? " (Megatron would carry the float through its arithmetic; megatron-run takes integers "
                          "only: write it without a fraction)"
                        : " (Megatron: TypeError)"),
       {path});
}

void YamlArgs::require_section(std::string_view section) {
  const Value& s = get(section);
  if (!s.is_object())
    fail(kMissing,
         q(section) + " is " + s.py_repr() + ", not a section (Megatron: AttributeError: '" + py_type(s) +
             "' object has no attribute '__dict__')",
         {section});
}

}  // namespace mr
