// ParamKey (seed: ../shared/spec/optimizer_config.py 69-140): grouping parameters by name glob, attribute or
// predicate, each group able to share an optimizer config; with a faithful port of Python's fnmatch.fnmatch.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "config/value.h"

namespace mr {

// Python's fnmatch.fnmatch(name, pattern) on POSIX (case-sensitive): `*` matches any run of characters
// (slashes and newlines included), `?` one character, `[seq]` / `[!seq]` one character in / not in seq
// (ranges a-z; an unterminated `[` is literal; reversed ranges match nothing). Works on code points of
// UTF-8 text.
bool fnmatch(std::string_view name, std::string_view pattern);

// What matching needs to know about a parameter (stands in for torch.nn.Parameter).
struct ParamView {
  std::vector<int64_t> shape;
  std::map<std::string, Value, std::less<>> attrs;  // Python attributes set on the parameter object

  // getattr(param, name, False), as a truth value.
  bool attr(std::string_view name) const;
};

// A named predicate on a parameter; two predicates are equal (and hash alike) when their names are.
struct ParamPredicate {
  std::string name;
  std::function<bool(const ParamView&)> fn;

  bool operator()(const ParamView& p) const { return fn(p); }
  friend bool operator==(const ParamPredicate& a, const ParamPredicate& b) { return a.name == b.name; }
};

// A named predicate on a parameter and its name; equality by name, as ParamPredicate.
struct ParamWithNamePredicate {
  std::string name;
  std::function<bool(const ParamView&, std::string_view)> fn;

  bool operator()(const ParamView& p, std::string_view param_name) const { return fn(p, param_name); }
  friend bool operator==(const ParamWithNamePredicate& a, const ParamWithNamePredicate& b) {
    return a.name == b.name;
  }
};

// Python's Union[T, Tuple[T, ...]]: one value or a tuple of them (a single value and a 1-tuple are distinct
// keys, as in Python). Default: the empty tuple.
template <class T>
class OneOrMany {
 public:
  OneOrMany() = default;
  OneOrMany(T one) : items_{std::move(one)}, single_(true) {}
  OneOrMany(const char* one)
    requires std::is_same_v<T, std::string>
      : items_{std::string(one)}, single_(true) {}
  OneOrMany(std::vector<T> many) : items_(std::move(many)) {}
  OneOrMany(std::initializer_list<T> many) : items_(many) {}

  const std::vector<T>& items() const { return items_; }
  bool single() const { return single_; }
  friend bool operator==(const OneOrMany& a, const OneOrMany& b) {
    return a.single_ == b.single_ && a.items_ == b.items_;
  }

 private:
  std::vector<T> items_;
  bool single_ = false;
};

// Key to group parameters by; every group can share an optimizer config. A parameter matches when any name
// glob, any attribute, any predicate or any name predicate matches.
struct ParamKey {
  OneOrMany<std::string> name;                              // fnmatch globs on the parameter's name
  OneOrMany<std::string> attr;                              // attributes that must be truthy on the parameter
  OneOrMany<ParamPredicate> predicate;                      // any may match
  OneOrMany<ParamWithNamePredicate> with_name_predicate;    // any may match

  bool matches(const ParamView& param, std::string_view param_name) const;

  friend bool operator==(const ParamKey& a, const ParamKey& b) {
    return a.name == b.name && a.attr == b.attr && a.predicate == b.predicate &&
           a.with_name_predicate == b.with_name_predicate;
  }
  size_t hash() const;  // consistent with ==
};

}  // namespace mr

template <>
struct std::hash<mr::ParamKey> {
  size_t operator()(const mr::ParamKey& k) const { return k.hash(); }
};
