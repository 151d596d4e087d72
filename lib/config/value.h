// A dynamically typed value with Python's data model: what one resolved Megatron argument holds.
//
// Kinds mirror what argparse produces: None, bool, int, float, str, list, tuple and dict (JSON objects).
// Two renderings matter: JSON (our machine-readable output) and Python's str() (Megatron's printed table).
#pragma once

#include "config/limits.h"

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

  Value() = default;
  Value(std::nullptr_t) {}
  Value(bool b) : kind_(Kind::Bool), i_(b) {}
  Value(int v) : kind_(Kind::Int), i_(v) {}
  Value(long v) : kind_(Kind::Int), i_(v) {}
  Value(long long v) : kind_(Kind::Int), i_(v) {}
  Value(double v) : kind_(Kind::Float), f_(v) {}
  Value(const char* s) : kind_(Kind::Str), s_(std::make_shared<std::string>(s)) {}
  Value(std::string s) : kind_(Kind::Str), s_(std::make_shared<std::string>(std::move(s))) {}
  Value(List l, bool tuple = false)
      : kind_(tuple ? Kind::Tuple : Kind::List), l_(std::make_shared<List>(std::move(l))) {}
  static Value object(Object o) {
    Value v;
    v.kind_ = Kind::Object;
    v.o_ = std::make_shared<Object>(std::move(o));
    return v;
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
  // values (about 75-150 bytes each) whatever the length of the text.
  static Value parse_json(std::string_view text, std::uint64_t max_values = limits::kMaxJsonValues);

 private:
  Kind kind_ = Kind::None;
  int64_t i_ = 0;
  double f_ = 0;
  std::shared_ptr<std::string> s_;
  std::shared_ptr<List> l_;
  std::shared_ptr<Object> o_;
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
