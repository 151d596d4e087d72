// Python's semantics where the validation chain ports Megatron's Python: integer // and % (floor division,
// the remainder taking the divisor's sign), and assignment that leaves provenance alone when the value does
// not change. One header for every section (they once had a copy each).
#pragma once

#include <cstdint>
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

}  // namespace mr
