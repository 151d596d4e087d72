// The typed view of the resolved arguments (config/args.h): config/args.def expanded into the conversions.
#include "config/args.h"

#include <unordered_map>

#include "config/schema.h"

namespace mr {

namespace arg {
#define MR_ARG_ENUM(E)               \
  std::string_view to_string(E v) { \
    switch (v) {
#define MR_ARG_ENUMERATOR(E, name, spelling) \
  case E::name: return spelling;
#define MR_ARG_ENUM_END(E) \
  }                        \
  return "?";              \
  }
#include "config/args.def"

#define MR_ARG_ENUM(E) bool from_string(std::string_view s, E& out) {
#define MR_ARG_ENUMERATOR(E, name, spelling) \
  if (s == spelling) {                       \
    out = E::name;                           \
    return true;                             \
  }
#define MR_ARG_ENUM_END(E) \
  return false;            \
  }
#include "config/args.def"
}  // namespace arg

namespace {

struct Info {
  std::string_view dest, flag, def_json;
};
const Info kInfo[] = {
#define MR_ARG(member, type, flag, def) {#member, flag, def},
#include "config/args.def"
};
static_assert(std::size(kInfo) == kArgCount);

const std::vector<Value>& defaults() {
  static const std::vector<Value>* d = [] {
    auto* v = new std::vector<Value>;
    v->reserve(kArgCount);
    for (const Info& i : kInfo) v->push_back(Value::parse_json(i.def_json));
    return v;
  }();
  return *d;
}

// Reading a Value into a member: false when its shape does not fit (the caller names the flag).
template <class T>
bool read(const Value& v, std::optional<T>& out);
template <class T>
bool read(const Value& v, std::vector<T>& out);
template <class T>
const char* shape(const std::optional<T>*);
template <class T>
const char* shape(const std::vector<T>*);
template <class T>
Value to_value(const std::optional<T>& v);
template <class T>
Value to_value(const std::vector<T>& v);

bool read(const Value& v, bool& out) {
  if (!v.is_bool()) return false;
  out = v.as_bool();
  return true;
}
bool read(const Value& v, int64_t& out) {
  if (!v.is_int() && !v.is_bool()) return false;  // Python: a bool is an int
  out = v.as_int();
  return true;
}
bool read(const Value& v, double& out) {
  if (!v.is_number() && !v.is_bool()) return false;
  out = v.is_bool() ? (v.as_bool() ? 1.0 : 0.0) : v.as_float();
  return true;
}
bool read(const Value& v, std::string& out) {
  if (!v.is_str()) return false;
  out = v.as_str();
  return true;
}
bool read(const Value& v, Value& out) {
  out = v;
  return true;
}
template <class E>
  requires std::is_enum_v<E>
bool read(const Value& v, E& out) {
  return v.is_str() && arg::from_string(v.as_str(), out);
}
template <class T>
bool read(const Value& v, std::optional<T>& out) {
  if (v.is_none()) {
    out.reset();
    return true;
  }
  T x{};
  if (!read(v, x)) return false;
  out = std::move(x);
  return true;
}
template <class T>
bool read(const Value& v, std::vector<T>& out) {
  if (!v.is_list()) return false;
  out.clear();
  out.reserve(v.as_list().size());
  for (const Value& e : v.as_list()) {
    T x{};
    if (!read(e, x)) return false;
    out.push_back(std::move(x));
  }
  return true;
}

const char* shape(const bool*) { return "a bool"; }
const char* shape(const int64_t*) { return "an integer"; }
const char* shape(const double*) { return "a number"; }
const char* shape(const std::string*) { return "a string"; }
const char* shape(const Value*) { return "a value"; }
template <class E>
  requires std::is_enum_v<E>
const char* shape(const E*) {
  return "one of its choices";
}
template <class T>
const char* shape(const std::optional<T>*) {
  return shape(static_cast<const T*>(nullptr));
}
template <class T>
const char* shape(const std::vector<T>*) {
  return "a list";
}

Value to_value(bool v) { return Value(v); }
Value to_value(int64_t v) { return Value(static_cast<long long>(v)); }
Value to_value(double v) { return Value(v); }
Value to_value(const std::string& v) { return Value(v); }
Value to_value(const Value& v) { return v; }
template <class E>
  requires std::is_enum_v<E>
Value to_value(E v) {
  return Value(std::string(arg::to_string(v)));
}
template <class T>
Value to_value(const std::optional<T>& v) {
  return v ? to_value(*v) : Value();
}
template <class T>
Value to_value(const std::vector<T>& v) {
  List l;
  l.reserve(v.size());
  for (const T& e : v) l.push_back(to_value(e));
  return Value(std::move(l));
}

std::string name_for_message(ArgId id) { return Schema::megatron().flag_for_dest(kInfo[static_cast<size_t>(id)].dest); }

template <class T>
void assign(T& member, const Value& v, ArgId id) {
  if (!read(v, member))
    throw ArgsError(name_for_message(id) + ": the resolved value " + v.py_repr() + " is not " +
                    shape(static_cast<const T*>(nullptr)));
}

void assign_by_id(Args& a, ArgId id, const Value& v) {
  // --phase-transition-iterations: validate_args parses a non-empty string into sorted ints (argsgen's kIntLists)
  // and leaves a falsy one, "", as it is (`if args.phase_transition_iterations:`): no transitions, no list.
  if (id == ArgId::phase_transition_iterations && v.is_str() && v.as_str().empty()) {
    a.phase_transition_iterations.reset();
    return;
  }
  switch (id) {
#define MR_ARG(member, type, flag, def) \
  case ArgId::member: assign(a.member, v, id); break;
#include "config/args.def"
  }
}

const std::vector<bool>& validated_ids() {
  static const std::vector<bool>* v = [] {
    auto* out = new std::vector<bool>(kArgCount, false);
#define MR_ARG_VALIDATED(member) (*out)[static_cast<size_t>(ArgId::member)] = true;
#include "config/args.def"
    return out;
  }();
  return *v;
}

// Args() and from_unvalidated(): a dest validation fills, before it has: 0 (its default, None, has no int64_t).
void zero_validated(Args& a, ArgId id) {
  switch (id) {
#define MR_ARG_VALIDATED(member) \
  case ArgId::member: a.member = 0; break;
#include "config/args.def"
    default: break;
  }
}

Args build(const Namespace& ns, bool require_validated) {
  Args a;
  std::vector<bool> given(kArgCount, false);
  for (const auto& e : ns.entries()) {
    std::optional<ArgId> id = find_arg(e.dest);
    if (!id) continue;
    if (validation_fills(*id) && e.value.is_none()) continue;  // refused below (from), or left at 0 (from_unvalidated)
    given[static_cast<size_t>(*id)] = true;
    try {
      assign_by_id(a, *id, e.value);
    } catch (const ArgsError& x) {
      // A value no flag gave (validation derived it, or --use-checkpoint-args took it from a checkpoint's file):
      // the message says where it came from, since the flag it names was not written.
      if (e.prov.kind != Provenance::Kind::Derived || e.prov.where.empty()) throw;
      throw ArgsError(std::string(x.what()) + " (set by " + e.prov.where + ")");
    }
  }
  if (require_validated)
    for (size_t i = 0; i < kArgCount; ++i)
      if (validated_ids()[i] && !given[i])
        throw ArgsError(name_for_message(static_cast<ArgId>(i)) +
                        ": the namespace has no value for it (None), though validation always gives it one: the "
                        "typed view is built from a validated namespace only");
  return a;
}

}  // namespace

bool validation_fills(ArgId id) { return validated_ids()[static_cast<size_t>(id)]; }

Args::Args() {
  const std::vector<Value>& d = defaults();
  for (size_t i = 0; i < kArgCount; ++i) {
    const ArgId id = static_cast<ArgId>(i);
    if (validation_fills(id))
      zero_validated(*this, id);
    else
      assign_by_id(*this, id, d[i]);
  }
}

Args Args::from(const Namespace& ns) { return build(ns, /*require_validated=*/true); }
Args Args::from_unvalidated(const Namespace& ns) { return build(ns, /*require_validated=*/false); }

Value Args::value(ArgId id) const {
  switch (id) {
#define MR_ARG(member, type, flag, def) \
  case ArgId::member: return to_value(member);
#include "config/args.def"
  }
  return Value();
}

const char* misfit(ArgId id, const Value& v) {
  if (validation_fills(id) && v.is_none()) return nullptr;  // before validation fills it
  switch (id) {
#define MR_ARG(member, type, flag, def)                            \
  case ArgId::member: {                                            \
    type x{};                                                      \
    return read(v, x) ? nullptr : shape(static_cast<const type*>(nullptr)); \
  }
#include "config/args.def"
  }
  return nullptr;
}

std::string_view dest_of(ArgId id) { return kInfo[static_cast<size_t>(id)].dest; }
const Value& default_of(ArgId id) { return defaults()[static_cast<size_t>(id)]; }

std::optional<ArgId> find_arg(std::string_view dest) {
  static const auto* index = [] {
    auto* m = new std::unordered_map<std::string_view, ArgId>;
    m->reserve(kArgCount);
    for (size_t i = 0; i < kArgCount; ++i) m->emplace(kInfo[i].dest, static_cast<ArgId>(i));
    return m;
  }();
  auto it = index->find(dest);
  if (it == index->end()) return std::nullopt;
  return it->second;
}

}  // namespace mr
