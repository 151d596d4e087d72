// YAML 1.1's implicit scalar typing as PyYAML's SafeLoader applies it (its resolvers and constructors for
// null, bool, int and float), for --yaml-cfg files (config/parse/yaml_cfg.cpp).
#include "config/parse/yaml11.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <sstream>
#include <string_view>
#include <vector>

#include "config/converters.h"
#include "config/diagnostic.h"

namespace mr {

namespace {

// ---- YAML 1.1 implicit typing (PyYAML's SafeLoader resolvers), matched by hand -------------------------------

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_hex_digit(char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

// A cursor over a scalar's text for the resolver grammars.
struct Scan {
  std::string_view t;
  size_t p = 0;
  bool done() const { return p == t.size(); }
  bool eat(char c) {
    if (p < t.size() && t[p] == c) return ++p, true;
    return false;
  }
  bool eat_any(std::string_view cs) {
    if (p < t.size() && cs.find(t[p]) != std::string_view::npos) return ++p, true;
    return false;
  }
  bool sign() { return eat_any("+-"); }
  // [f][f_]* (need_first) or [f_]*: false only when a required first character is missing.
  bool digits_underscores(bool (*f)(char), bool need_first = true) {
    if (need_first) {
      if (p >= t.size() || !f(t[p])) return false;
      ++p;
    }
    while (p < t.size() && (f(t[p]) || t[p] == '_')) ++p;
    return true;
  }
  // (?::[0-5]?[0-9])+
  bool sexagesimal_tail() {
    bool any = false;
    while (p < t.size() && t[p] == ':') {
      size_t save = p++;
      if (p + 1 < t.size() && t[p] >= '0' && t[p] <= '5' && is_digit(t[p + 1])) {
        p += 2;
      } else if (p < t.size() && is_digit(t[p])) {
        ++p;
      } else {
        p = save;
        break;
      }
      any = true;
    }
    return any;
  }
  // (?:[eE][-+][0-9]+)?
  bool optional_exponent() {
    if (!eat_any("eE")) return true;
    if (!sign()) return false;
    size_t start = p;
    while (p < t.size() && is_digit(t[p])) ++p;
    return p > start;
  }
};

bool yaml_bool(std::string_view s, bool* out) {
  for (std::string_view w : {"yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"})
    if (s == w) return *out = true, true;
  for (std::string_view w : {"no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"})
    if (s == w) return *out = false, true;
  return false;
}

bool yaml_null(std::string_view s) { return s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL"; }

// ^(?:[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+|[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+)$
bool yaml_int_syntax(std::string_view text) {
  std::string_view u = text;
  if (!u.empty() && (u[0] == '+' || u[0] == '-')) u.remove_prefix(1);
  auto all = [](std::string_view s, bool (*f)(char)) {
    for (char c : s)
      if (!f(c) && c != '_') return false;
    return true;
  };
  if (u.size() > 2 && u.substr(0, 2) == "0b") return all(u.substr(2), [](char c) { return c == '0' || c == '1'; });
  if (u.size() > 2 && u.substr(0, 2) == "0x") return all(u.substr(2), is_hex_digit);
  if (u == "0") return true;
  if (u.size() > 1 && u[0] == '0') return all(u.substr(1), [](char c) { return c >= '0' && c <= '7'; });
  if (u.empty() || u[0] < '1' || u[0] > '9') return false;
  Scan s{u, 1};
  s.digits_underscores(is_digit, false);
  return s.done() || (s.sexagesimal_tail() && s.done());
}

// ^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?|\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?
//    |[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$
bool yaml_float_syntax(std::string_view text) {
  {
    Scan s{text};
    s.sign();
    if (s.digits_underscores(is_digit) && s.eat('.') && s.digits_underscores(is_digit, false) && s.optional_exponent() &&
        s.done())
      return true;
  }
  {
    Scan s{text};
    if (s.eat('.') && s.digits_underscores(is_digit) && s.optional_exponent() && s.done()) return true;
  }
  {
    Scan s{text};
    s.sign();
    if (s.digits_underscores(is_digit) && s.sexagesimal_tail() && s.eat('.') && s.digits_underscores(is_digit, false) &&
        s.done())
      return true;
  }
  std::string_view u = text;
  if (!u.empty() && (u[0] == '+' || u[0] == '-')) u.remove_prefix(1);
  if (u == ".inf" || u == ".Inf" || u == ".INF") return true;
  return text == ".nan" || text == ".NaN" || text == ".NAN";
}

// ^(?:[0-9]{4}-[0-9]{2}-[0-9]{2}|[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}(?:[Tt]|[ \t]+)[0-9]{1,2}:[0-9]{2}:[0-9]{2}
//    (?:\.[0-9]*)?(?:[ \t]*(?:Z|[-+][0-9]{1,2}(?::[0-9]{2})?))?)$
bool yaml_timestamp_syntax(std::string_view text) {
  auto n_digits = [](Scan& s, size_t lo, size_t hi) {
    size_t start = s.p;
    while (s.p < s.t.size() && is_digit(s.t[s.p]) && s.p - start < hi) ++s.p;
    return s.p - start >= lo;
  };
  Scan s{text};
  if (!(n_digits(s, 4, 4) && s.eat('-'))) return false;
  size_t after_year = s.p;
  if (n_digits(s, 2, 2) && s.eat('-') && n_digits(s, 2, 2) && s.done()) return true;
  s.p = after_year;
  if (!(n_digits(s, 1, 2) && s.eat('-') && n_digits(s, 1, 2))) return false;
  if (!s.eat_any("Tt")) {
    size_t start = s.p;
    while (s.eat_any(" \t")) {
    }
    if (s.p == start) return false;
  }
  if (!(n_digits(s, 1, 2) && s.eat(':') && n_digits(s, 2, 2) && s.eat(':') && n_digits(s, 2, 2))) return false;
  if (s.eat('.'))
    while (s.p < s.t.size() && is_digit(s.t[s.p])) ++s.p;
  while (s.eat_any(" \t")) {
  }
  if (s.done()) return true;
  if (s.eat('Z')) return s.done();
  if (!(s.sign() && n_digits(s, 1, 2))) return false;
  if (s.eat(':') && !n_digits(s, 2, 2)) return false;
  return s.done();
}

[[noreturn]] void file_error(const std::string& where, const std::string& msg) {
  throw UsageError(where + ": " + msg, {"--yaml-cfg"}, where);
}

// PyYAML's construct_yaml_int on text matching yaml_int_syntax.
Value construct_int(const std::string& text, const std::string& where) {
  std::string v;
  for (char c : text)
    if (c != '_') v += c;
  bool neg = false;
  if (!v.empty() && (v[0] == '-' || v[0] == '+')) {
    neg = v[0] == '-';
    v.erase(0, 1);
  }
  auto parse = [&](std::string_view digits, int base) {
    int64_t out = 0;
    auto r = std::from_chars(digits.data(), digits.data() + digits.size(), out, base);
    if (r.ec != std::errc() || r.ptr != digits.data() + digits.size())
      file_error(where, "integer " + text + " is out of range");
    return out;
  };
  int64_t n = 0;
  if (v == "0") {
    n = 0;
  } else if (v.rfind("0b", 0) == 0) {
    n = parse(std::string_view(v).substr(2), 2);
  } else if (v.rfind("0x", 0) == 0) {
    n = parse(std::string_view(v).substr(2), 16);
  } else if (v[0] == '0') {
    n = parse(v, 8);
  } else if (v.find(':') != std::string::npos) {
    // Base 60 (1:30:00 is 5400), checked: Python's ints do not wrap, ours would.
    std::stringstream ss(v);
    std::string part;
    while (std::getline(ss, part, ':'))
      if (__builtin_mul_overflow(n, int64_t{60}, &n) || __builtin_add_overflow(n, parse(part, 10), &n))
        file_error(where, "integer " + text + " is out of range (more than 64 bits)");
  } else {
    n = parse(v, 10);
  }
  return Value(neg ? -n : n);
}

// PyYAML's construct_yaml_float on text matching yaml_float_syntax.
Value construct_float(const std::string& text) {
  std::string v;
  for (char c : text)
    if (c != '_') v += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  double sign = 1;
  if (!v.empty() && (v[0] == '-' || v[0] == '+')) {
    sign = v[0] == '-' ? -1 : 1;
    v.erase(0, 1);
  }
  if (v == ".inf") return Value(sign * HUGE_VAL);
  if (v == ".nan") return Value(std::nan(""));
  if (v.find(':') != std::string::npos) {
    double n = 0;
    std::stringstream ss(v);
    std::string part;
    while (std::getline(ss, part, ':')) n = n * 60 + parse_py_float(part);
    return Value(sign * n);
  }
  return Value(sign * parse_py_float(v));
}

}  // namespace

Value yaml11_plain_scalar(const std::string& text, const std::string& where) {
  bool b = false;
  if (yaml_bool(text, &b)) return Value(b);
  if (yaml_null(text)) return Value();
  if (yaml_int_syntax(text)) return construct_int(text, where);
  if (yaml_float_syntax(text)) return construct_float(text);
  if (yaml_timestamp_syntax(text))
    file_error(where, "the timestamp " + text +
                          " becomes a date in Python's yaml.safe_load, which load_yaml's json.dumps cannot serialise "
                          "(quote it to make it a string)");
  if (text == "=" || text == "<<")
    file_error(where, "a plain " + text + " value has no constructor in Python's yaml.safe_load (quote it)");
  return Value(text);
}


namespace {

// Python's int(word, base) (base 2, 8, 10 or 16): surrounding whitespace, a sign, the base's 0b/0o/0x prefix,
// then at least one digit. (construct_yaml_int has removed every '_' already.) nullopt where int() raises; throws
// where the magnitude passes 2**64 (no int64 can hold the result then).
using Wide = __int128;
constexpr Wide kWideLimit = static_cast<Wide>(1) << 64;

[[noreturn]] void int_out_of_range(const std::string& text, const std::string& where) {
  file_error(where, "integer " + text + " is out of range (more than 64 bits)");
}

std::optional<Wide> py_int_base(std::string_view w, int base, const std::string& text, const std::string& where) {
  auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; };
  while (!w.empty() && space(w.front())) w.remove_prefix(1);
  while (!w.empty() && space(w.back())) w.remove_suffix(1);
  bool neg = false;
  if (!w.empty() && (w[0] == '+' || w[0] == '-')) {
    neg = w[0] == '-';
    w.remove_prefix(1);
  }
  const char* prefix = base == 2 ? "0b" : base == 8 ? "0o" : base == 16 ? "0x" : nullptr;
  if (prefix && w.size() >= 2 && w[0] == '0' && std::tolower(static_cast<unsigned char>(w[1])) == prefix[1])
    w.remove_prefix(2);
  if (w.empty()) return std::nullopt;
  Wide mag = 0;
  for (char c : w) {
    int d = is_digit(c) ? c - '0' : (c >= 'a' && c <= 'z') ? c - 'a' + 10 : (c >= 'A' && c <= 'Z') ? c - 'A' + 10 : 99;
    if (d >= base) return std::nullopt;
    mag = mag * base + d;
    if (mag > kWideLimit) int_out_of_range(text, where);
  }
  return neg ? -mag : mag;
}

// construct_yaml_int on any text.
std::optional<Value> tagged_int(const std::string& text, const std::string& where) {
  std::string v;
  for (char c : text)
    if (c != '_') v += c;
  if (v.empty()) return std::nullopt;  // value[0]: IndexError
  const int sign = v[0] == '-' ? -1 : 1;
  if (v[0] == '+' || v[0] == '-') v.erase(0, 1);
  std::optional<Wide> n;
  if (v == "0") {
    n = 0;
  } else if (v.rfind("0b", 0) == 0) {
    n = py_int_base(std::string_view(v).substr(2), 2, text, where);
  } else if (v.rfind("0x", 0) == 0) {
    n = py_int_base(std::string_view(v).substr(2), 16, text, where);
  } else if (v.empty()) {
    return std::nullopt;  // value[0]: IndexError
  } else if (v[0] == '0') {
    n = py_int_base(v, 8, text, where);
  } else if (v.find(':') != std::string::npos) {
    if (v.back() == ':') return std::nullopt;  // int(''): the empty last part, which getline drops
    Wide total = 0;  // sum of part * 60**k from the last part: Horner's rule from the first
    std::stringstream ss(v);
    std::string part;
    while (std::getline(ss, part, ':')) {
      auto d = py_int_base(part, 10, text, where);
      if (!d) return std::nullopt;
      total = total * 60 + *d;
      if (total > kWideLimit || total < -kWideLimit) int_out_of_range(text, where);
    }
    n = total;
  } else {
    n = py_int_base(v, 10, text, where);
  }
  if (!n) return std::nullopt;
  const Wide r = sign * *n;
  if (r > INT64_MAX || r < INT64_MIN) int_out_of_range(text, where);
  return Value(static_cast<int64_t>(r));
}

// Python's float(word), nullopt where it raises.
std::optional<double> py_float(std::string_view w) {
  try {
    return parse_py_float(w);
  } catch (const ConvError&) {
    return std::nullopt;
  }
}

// construct_yaml_float on any text.
std::optional<Value> tagged_float(const std::string& text) {
  std::string v;
  for (char c : text)
    if (c != '_') v += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (v.empty()) return std::nullopt;  // value[0]: IndexError
  double sign = v[0] == '-' ? -1 : 1;
  if (v[0] == '+' || v[0] == '-') v.erase(0, 1);
  if (v == ".inf") return Value(sign * HUGE_VAL);
  if (v == ".nan") return Value(std::nan(""));
  if (v.find(':') != std::string::npos) {
    if (v.back() == ':') return std::nullopt;  // float(''): the empty last part getline drops
    std::vector<double> digits;
    std::stringstream ss(v);
    std::string part;
    while (std::getline(ss, part, ':')) {
      auto d = py_float(part);
      if (!d) return std::nullopt;
      digits.push_back(*d);
    }
    double n = 0, base = 1;  // Python's order: from the last part, base *= 60
    for (auto it = digits.rbegin(); it != digits.rend(); ++it) {
      n += *it * base;
      base *= 60;
    }
    return Value(sign * n);
  }
  auto d = py_float(v);
  if (!d) return std::nullopt;
  return Value(sign * *d);
}

}  // namespace

std::optional<Value> yaml11_tagged_scalar(std::string_view type, const std::string& text, const std::string& where) {
  if (type == "null") return Value();  // construct_yaml_null: None, whatever the text
  if (type == "bool") {                // bool_values[value.lower()]
    std::string l;
    for (char c : text) l += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    for (std::string_view w : {"yes", "true", "on"})
      if (l == w) return Value(true);
    for (std::string_view w : {"no", "false", "off"})
      if (l == w) return Value(false);
    return std::nullopt;
  }
  if (type == "int") return tagged_int(text, where);
  if (type == "float") return tagged_float(text);
  return std::nullopt;
}

}  // namespace mr
