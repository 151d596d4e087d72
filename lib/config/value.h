// A dynamically typed value with Python's data model: what one resolved Megatron argument holds.
//
// Kinds mirror what argparse produces: None, bool, int, float, str, list, tuple and dict (JSON objects).
// Two renderings matter: JSON (our machine-readable output) and Python's str() (Megatron's printed table).
#pragma once

#include "config/limits.h"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mr {

class Value;
using List = std::vector<Value>;
using Object = std::vector<std::pair<std::string, Value>>;  // keeps insertion order, like a Python dict

class Value {
 public:
  enum class Kind { None, Bool, Int, Float, Str, List, Tuple, Object };

  Value() noexcept {}
  Value(std::nullptr_t) noexcept {}
  Value(bool b) noexcept : kind_(Kind::Bool) { u_.i = b; }
  Value(int v) noexcept : kind_(Kind::Int) { u_.i = v; }
  Value(long v) noexcept : kind_(Kind::Int) { u_.i = v; }
  Value(long long v) noexcept : kind_(Kind::Int) { u_.i = v; }
  Value(double v) noexcept : kind_(Kind::Float) { u_.f = v; }
  Value(const char* s);
  Value(std::string s);
  Value(List l, bool tuple = false);
  static Value object(Object o);

  // A string, list or object is shared between copies (a copy costs one reference count, as a shared_ptr's);
  // mutable_list() is the one way to change a shared one, and it copies first when another Value holds it.
  Value(const Value& o) noexcept : kind_(o.kind_), u_(o.u_) {
    if (boxed(kind_)) retain(u_.box);
  }
  Value(Value&& o) noexcept : kind_(o.kind_), u_(o.u_) {
    if (boxed(kind_)) o.kind_ = Kind::None;  // a moved-from string, list or object is None
  }
  Value& operator=(const Value& o) noexcept {
    const Kind k = o.kind_;  // read before releasing: `o` may live inside the tree this value lets go of
    const Payload u = o.u_;
    if (boxed(k)) retain(u.box);
    if (boxed(kind_)) release();
    kind_ = k;
    u_ = u;
    return *this;
  }
  Value& operator=(Value&& o) noexcept {
    if (this == &o) return *this;
    const Kind k = o.kind_;
    const Payload u = o.u_;
    if (boxed(k)) o.kind_ = Kind::None;
    if (boxed(kind_)) release();
    kind_ = k;
    u_ = u;
    return *this;
  }
  ~Value() {
    if (boxed(kind_)) release();
  }

  Kind kind() const { return kind_; }
  bool is_none() const { return kind_ == Kind::None; }
  bool is_bool() const { return kind_ == Kind::Bool; }
  bool is_int() const { return kind_ == Kind::Int; }
  bool is_float() const { return kind_ == Kind::Float; }
  bool is_number() const { return kind_ == Kind::Int || kind_ == Kind::Float; }
  bool is_str() const { return kind_ == Kind::Str; }
  bool is_list() const { return kind_ == Kind::List || kind_ == Kind::Tuple; }
  bool is_object() const { return kind_ == Kind::Object; }

  bool as_bool() const;        // the value must be a bool
  int64_t as_int() const;      // int (or bool, as in Python)
  double as_float() const;     // int or float
  const std::string& as_str() const;
  const List& as_list() const;
  List& mutable_list();
  const Object& as_object() const;

  // Python truthiness: None, False, 0, 0.0, "", [] and {} are false.
  bool truthy() const;

  // Python equality: 1 == 1.0 == True; lists and tuples compare element-wise only with their own kind.
  friend bool operator==(const Value& a, const Value& b);
  friend bool operator!=(const Value& a, const Value& b) { return !(a == b); }

  // Serialisations.
  std::string json() const;  // compact JSON; tuples become arrays, non-finite floats NaN/Infinity
  std::string py_str() const;   // Python str(): None, True, 1e-05, ['a', 'b'], (1, 2), {'k': 1}
  std::string py_repr() const;  // Python repr(): strings quoted

  // Strict JSON (plus NaN/Infinity); throws JsonError. At most `max_values` values (objects, lists, strings,
  // numbers, literals; an object's keys are not counted) are built: the parser counts them as it goes and throws
  // JsonTooManyValues when the next would pass the bound, so memory stays bounded by the tree of `max_values`
  // values (16 bytes each, plus 48-64 bytes for each string, list and object) whatever the length of the text.
  static Value parse_json(std::string_view text, std::uint64_t max_values = limits::kMaxJsonValues);

 private:
  // 16 bytes: the kind and one 8-byte payload (a bool or int in `i`, a float in `f`, else a reference-counted box
  // holding the std::string, List or Object; value.cpp defines the three).
  struct Box {
    std::atomic<std::size_t> refs{1};
  };
  union Payload {
    int64_t i;
    double f;
    Box* box;
  };
  static bool boxed(Kind k) { return k >= Kind::Str; }
  static void retain(Box* b) { b->refs.fetch_add(1, std::memory_order_relaxed); }
  void release() noexcept {
    if (u_.box->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) destroy();
  }
  void destroy() noexcept;  // frees the box of a string, list or object whose last reference went
  struct StrBox;
  struct ListBox;
  struct ObjectBox;
  const std::string& str_() const;  // unchecked: the kind is known
  const List& list_() const;
  const Object& object_() const;

  Kind kind_ = Kind::None;
  Payload u_{0};
};

struct JsonError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Value::parse_json's refusal of a document of more than `limit` values, thrown where the value one past the limit
// starts (`offset`, a byte offset into the text), before it is built. A reader turns it into its own message.
struct JsonTooManyValues : JsonError {
  JsonTooManyValues(std::uint64_t limit, std::size_t offset);
  std::uint64_t limit;
  std::size_t offset;
};

// Python's repr() of a float: the shortest round-trip digits, in Python's layout ("1e-05", "0.0001", "3.0").
std::string py_float_repr(double v);
// JSON string literal with escapes. `ascii_only`: every character outside printable ASCII as \uXXXX (a surrogate pair
// above U+FFFF), as Python's json.dumps writes it by default (ensure_ascii).
std::string json_quote(std::string_view s, bool ascii_only = false);

}  // namespace mr
