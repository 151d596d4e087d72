// Typed values against the schema (config/arg_fit.h).
#include "config/arg_fit.h"

#include <cmath>

#include "config/args.h"
#include "config/schema.h"

namespace mr {

namespace {

bool is_int_list(const Value& v) {
  if (!v.is_list()) return false;
  for (const Value& e : v.as_list())
    if (!e.is_int()) return false;
  return true;
}

// What one value (an item of a list argument) of type `t` is after conversion; nullopt when `v` is that.
std::optional<std::string> scalar_misfit(ArgType t, const Value& v) {
  switch (t) {
    case ArgType::Int:
    case ArgType::SignalEnum:
      if (v.is_int()) return std::nullopt;
      if (v.is_float() && std::isfinite(v.as_float()) && v.as_float() == std::floor(v.as_float()) &&
          std::fabs(v.as_float()) >= 9.2e18)
        return std::string("an integer of 64 bits");
      return std::string("an integer");
    case ArgType::Float:
      if (v.is_number()) return std::nullopt;
      return std::string("a number");
    case ArgType::PyBool:
      if (v.is_bool()) return std::nullopt;
      return std::string("true or false");
    case ArgType::Json: return std::nullopt;
    case ArgType::MoeFreq:
    case ArgType::LaFreq:
    case ArgType::NoRopeFreq:
      if (v.is_int() || is_int_list(v)) return std::nullopt;
      return std::string("an integer or a list of integers");
    case ArgType::CompressRatios:
    case ArgType::IntTuple:
      if (is_int_list(v)) return std::nullopt;
      return std::string("a list of integers");
    case ArgType::TritonBlockSize:
      if (v.is_list() || v.is_str()) return std::nullopt;
      return std::string("a list");
    case ArgType::None:
    case ArgType::Str:
    case ArgType::Path:
    case ArgType::CudaGraphModule:
    case ArgType::AttnBackendEnum:
      if (v.is_str()) return std::nullopt;
      return std::string("a string");
  }
  return std::nullopt;
}

std::optional<std::string> choice_misfit(const Arg& arg, const Value& v) {
  if (arg.choices.empty()) return std::nullopt;
  for (const Value& c : arg.choices)
    if (c == v && c.kind() == v.kind()) return std::nullopt;
  std::string s = "one of ";
  for (size_t i = 0; i < arg.choices.size(); ++i) s += (i ? ", " : "") + arg.choices[i].py_repr();
  return s;
}

std::optional<std::string> one_misfit(const Arg& arg, const Value& v) {
  if (auto m = scalar_misfit(arg.spec->type, v)) return m;
  return choice_misfit(arg, v);
}

std::optional<std::string> schema_misfit(const Arg& arg, const Value& v) {
  if (v.is_none() || (v == arg.def && v.kind() == arg.def.kind())) return std::nullopt;
  if (arg.is_switch()) {
    // A switch stores its constant (true/false, or another value for store_const) or its default.
    if (arg.konst.is_bool() || arg.spec->action == Action::BoolOptional) {
      if (v.is_bool()) return std::nullopt;
      return std::string("true or false");
    }
    if (v == arg.konst && v.kind() == arg.konst.kind()) return std::nullopt;
    return arg.konst.py_repr() + " or " + arg.def.py_repr();
  }
  const bool list = arg.spec->action == Action::Append || arg.nargs_kind == '*' || arg.nargs_kind == '+' ||
                    arg.nargs_kind == 'N';
  if (!list) return one_misfit(arg, v);
  if (!v.is_list()) return std::string("a list");
  if (arg.nargs_kind == 'N' && arg.spec->action != Action::Append &&
      v.as_list().size() != static_cast<size_t>(arg.nargs_count))
    return "a list of " + std::to_string(arg.nargs_count);
  for (const Value& e : v.as_list())
    if (auto m = one_misfit(arg, e)) return "a list of which each item is " + *m;
  return std::nullopt;
}

}  // namespace

std::optional<std::string> arg_value_misfit(std::string_view dest, const Value& v) {
  const std::vector<const Arg*> args = Schema::megatron().find_dest(dest);
  if (!args.empty())
    if (auto m = schema_misfit(*args.front(), v)) return m;
  if (std::optional<ArgId> id = find_arg(dest))
    if (const char* m = misfit(*id, v)) return std::string(m);
  return std::nullopt;
}

}  // namespace mr
