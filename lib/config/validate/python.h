// Python's semantics where the validation chain ports Megatron's Python: integer // and % (floor division,
// the remainder taking the divisor's sign), assignment that leaves provenance alone when the value does not
// change, getattr with a default, `x in list`, str() of a value, comparisons with an enum's str(), and
// Megatron's warn_rank_0. One header for every section (they once had a copy each).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include "config/validate/context.h"

namespace mr {

// a // b for ints: rounds toward negative infinity. `b` must be non-zero (Python raises ZeroDivisionError);
// callers check first.
inline int64_t py_floordiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if (a % b != 0 && ((a < 0) != (b < 0))) --q;
  return q;
}

// a % b for ints: the result has the divisor's sign. `b` must be non-zero.
inline int64_t py_mod(int64_t a, int64_t b) {
  int64_t m = a % b;
  if (m != 0 && ((m < 0) != (b < 0))) m += b;
  return m;
}

// `args.dest = v`: sets `dest` unless it already holds exactly that value (same kind and equal), so a value
// shows as derived only when validation really changed it.
inline void assign(Context& ctx, std::string_view dest, const Value& v, std::string_view why) {
  if (ctx.has(dest)) {
    const Value& cur = ctx[dest];
    if (cur.kind() == v.kind() && cur == v) return;
  }
  ctx.set(dest, v, why);
}

// getattr(args, name, False)-style read: a dest Megatron reads with a default when it may be absent.
// Python's `args.x is not None` for an attribute the namespace may lack: set, and not None.
inline bool set(const Context& ctx, std::string_view dest) { return ctx.has(dest) && !ctx.is_none(dest); }
inline bool on_or(const Context& ctx, std::string_view dest, bool fallback = false) {
  return ctx.has(dest) ? ctx.on(dest) : fallback;
}
inline int64_t int_or(const Context& ctx, std::string_view dest, int64_t fallback) {
  return ctx.has(dest) && !ctx.is_none(dest) ? ctx.i(dest) : fallback;
}

// `x in args.<dest>` for a list of strings.
inline bool list_has(const Context& ctx, std::string_view dest, const std::string& item) {
  const Value& v = ctx[dest];
  if (!v.is_list()) return false;
  for (const Value& e : v.as_list())
    if (e == Value(item)) return true;
  return false;
}

// args.<dest>.append(item) on a list-valued dest (e.g. high_priority_stream_groups).
inline void list_append(Context& ctx, std::string_view dest, const std::string& item, std::string_view why) {
  List l = ctx[dest].is_list() ? ctx[dest].as_list() : List{};
  l.push_back(Value(item));
  ctx.set(dest, Value(std::move(l)), why);
}

// Value's Python str() in a message: 4, None, 'rope' shown as rope.
inline std::string show(const Context& ctx, std::string_view dest) { return ctx[dest].py_str(); }

// `value == EnumClass.member` for an enum stored as Python's str() ("CudaGraphModule.attn"); the bare member
// name is accepted too, for a value not yet normalised by an earlier section.
inline bool enum_is(const Value& v, std::string_view enum_class, std::string_view member) {
  if (!v.is_str()) return false;
  const std::string& s = v.as_str();
  if (s == member) return true;
  return s.size() == enum_class.size() + 1 + member.size() && s.compare(0, enum_class.size(), enum_class) == 0 &&
         s[enum_class.size()] == '.' && s.compare(enum_class.size() + 1, std::string::npos, member) == 0;
}

// `EnumClass.member in value` for a list of such enums (None or a non-list: false).
inline bool enum_in(const Value& list, std::string_view enum_class, std::string_view member) {
  if (!list.is_list()) return false;
  for (const Value& v : list.as_list())
    if (enum_is(v, enum_class, member)) return true;
  return false;
}

// warn_rank_0(message, args.rank): the warning is only given on rank 0.
inline void warn_rank_0(Context& ctx, const Rule& rule, const std::string& message,
                        std::initializer_list<std::string_view> dests = {}) {
  if (ctx["rank"] == Value(0)) ctx.warn(rule, message, dests);
}

}  // namespace mr
