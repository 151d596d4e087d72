#include "config/value.h"

#include "util/text.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>

namespace mr {

namespace {
[[noreturn]] void kind_error(const char* want) { throw std::logic_error(std::string("value is not ") + want); }
}  // namespace

// The boxes behind a string, list or object: the reference count, then the C++ value.
struct Value::StrBox : Value::Box {
  explicit StrBox(std::string v) : s(std::move(v)) {}
  std::string s;
};
struct Value::ListBox : Value::Box {
  explicit ListBox(List v) : l(std::move(v)) {}
  List l;
};
struct Value::ObjectBox : Value::Box {
  explicit ObjectBox(Object v) : o(std::move(v)) {}
  Object o;
};

Value::Value(const char* s) : kind_(Kind::Str) { u_.box = new StrBox(std::string(s)); }
Value::Value(std::string s) : kind_(Kind::Str) { u_.box = new StrBox(std::move(s)); }
Value::Value(List l, bool tuple) : kind_(tuple ? Kind::Tuple : Kind::List) { u_.box = new ListBox(std::move(l)); }
Value Value::object(Object o) {
  Value v;
  v.u_.box = new ObjectBox(std::move(o));
  v.kind_ = Kind::Object;
  return v;
}

static_assert(sizeof(Value) == 16, "a Value is its kind and one 8-byte payload");

void Value::destroy() noexcept {
  switch (kind_) {
    case Kind::Str: delete static_cast<StrBox*>(u_.box); break;
    case Kind::List:
    case Kind::Tuple: delete static_cast<ListBox*>(u_.box); break;
    case Kind::Object: delete static_cast<ObjectBox*>(u_.box); break;
    default: break;
  }
}

const std::string& Value::str_() const { return static_cast<const StrBox*>(u_.box)->s; }
const List& Value::list_() const { return static_cast<const ListBox*>(u_.box)->l; }
const Object& Value::object_() const { return static_cast<const ObjectBox*>(u_.box)->o; }

bool Value::as_bool() const {
  if (kind_ != Kind::Bool) kind_error("a bool");
  return u_.i != 0;
}
int64_t Value::as_int() const {
  if (kind_ != Kind::Int && kind_ != Kind::Bool) kind_error("an int");
  return u_.i;
}
double Value::as_float() const {
  if (kind_ == Kind::Float) return u_.f;
  if (kind_ == Kind::Int || kind_ == Kind::Bool) return static_cast<double>(u_.i);
  kind_error("a number");
}
const std::string& Value::as_str() const {
  if (kind_ != Kind::Str) kind_error("a string");
  return str_();
}
const List& Value::as_list() const {
  if (!is_list()) kind_error("a list");
  return list_();
}
List& Value::mutable_list() {
  if (!is_list()) kind_error("a list");
  if (u_.box->refs.load(std::memory_order_acquire) > 1) {  // shared: this value gets its own copy first
    Box* own = new ListBox(list_());
    release();
    u_.box = own;
  }
  return static_cast<ListBox*>(u_.box)->l;
}
const Object& Value::as_object() const {
  if (kind_ != Kind::Object) kind_error("an object");
  return object_();
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::None: return false;
    case Kind::Bool:
    case Kind::Int: return u_.i != 0;
    case Kind::Float: return u_.f != 0.0;
    case Kind::Str: return !str_().empty();
    case Kind::List:
    case Kind::Tuple: return !list_().empty();
    case Kind::Object: return !object_().empty();
  }
  return false;
}

bool operator==(const Value& a, const Value& b) {
  using K = Value::Kind;
  if (a.is_number() || a.is_bool()) {
    if (!(b.is_number() || b.is_bool())) return false;
    if (a.kind_ == K::Float || b.kind_ == K::Float) return a.as_float() == b.as_float();
    return a.u_.i == b.u_.i;
  }
  if (a.kind_ != b.kind_) return false;
  switch (a.kind_) {
    case K::None: return true;
    case K::Str: return a.str_() == b.str_();
    case K::List:
    case K::Tuple: return a.list_() == b.list_();
    case K::Object: return a.object_() == b.object_();
    default: return false;
  }
}

std::string py_float_repr(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  std::string sci(buf, res.ptr);  // e.g. "-1.2345e-05"
  bool neg = sci[0] == '-';
  if (neg) sci.erase(0, 1);
  auto epos = sci.find('e');
  int exp10 = std::atoi(sci.c_str() + epos + 1);
  std::string digits;
  for (size_t i = 0; i < epos; ++i)
    if (sci[i] != '.') digits += sci[i];
  std::string out;
  if (exp10 < -4 || exp10 >= 16) {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char e[16];
    std::snprintf(e, sizeof e, "e%c%02d", exp10 < 0 ? '-' : '+', std::abs(exp10));
    out += e;
  } else if (exp10 < 0) {
    out = "0." + std::string(static_cast<size_t>(-exp10 - 1), '0') + digits;
  } else {
    size_t int_len = static_cast<size_t>(exp10) + 1;
    if (digits.size() <= int_len) {
      out = digits + std::string(int_len - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, int_len) + "." + digits.substr(int_len);
    }
  }
  return neg ? "-" + out : out;
}

std::string json_quote(std::string_view s, bool ascii_only) {
  // Valid, printable JSON whatever the bytes: control characters, DEL, the C1 and bidirectional-text controls as
  // \uXXXX (util/text.h says which); a byte that is not UTF-8 as the lone surrogate \udcXX, which is how Python's
  // json.dumps writes a string decoded with surrogateescape (as argv and os.environ are), so such values
  // round-trip through Python. Valid UTF-8 is written as is, unless `ascii_only`.
  std::string out = "\"";
  out.reserve(s.size() + 2);
  char b[16];
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    uint32_t cp = 0;
    const size_t n = utf8_char(s, i, cp);
    if (n == 0) {
      std::snprintf(b, sizeof b, "\\udc%02x", c);
      out += b;
      ++i;
      continue;
    }
    if (n > 1) {
      if (ascii_only && cp > 0xffff) {  // Python's ensure_ascii: a surrogate pair
        std::snprintf(b, sizeof b, "\\u%04x", static_cast<unsigned>(0xd800 + ((cp - 0x10000) >> 10)));
        out += b;
        std::snprintf(b, sizeof b, "\\u%04x", static_cast<unsigned>(0xdc00 + ((cp - 0x10000) & 0x3ff)));
        out += b;
      } else if (ascii_only || escaped_code_point(cp)) {
        std::snprintf(b, sizeof b, "\\u%04x", static_cast<unsigned>(cp));
        out += b;
      } else {
        out.append(s.substr(i, n));
      }
      i += n;
      continue;
    }
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          std::snprintf(b, sizeof b, "\\u%04x", c);
          out += b;
        } else {
          out += static_cast<char>(c);
        }
    }
    ++i;
  }
  return out + "\"";
}

namespace {
std::string py_quote(const std::string& s) {
  // Python prefers single quotes unless the string holds a single quote and no double quote.
  char q = (s.find('\'') != std::string::npos && s.find('"') == std::string::npos) ? '"' : '\'';
  std::string out(1, q);
  for (unsigned char c : s) {
    if (c == '\\') out += "\\\\";
    else if (c == static_cast<unsigned char>(q)) { out += '\\'; out += static_cast<char>(c); }
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7f) {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02x", c);
      out += b;
    } else out += static_cast<char>(c);
  }
  return out + q;
}
}  // namespace

std::string Value::json() const {
  switch (kind_) {
    case Kind::None: return "null";
    case Kind::Bool: return u_.i ? "true" : "false";
    case Kind::Int: return std::to_string(u_.i);
    case Kind::Float: {
      if (std::isnan(u_.f)) return "NaN";
      if (std::isinf(u_.f)) return u_.f > 0 ? "Infinity" : "-Infinity";
      return py_float_repr(u_.f);
    }
    case Kind::Str: return json_quote(str_());
    case Kind::List:
    case Kind::Tuple: {
      std::string out = "[";
      for (size_t i = 0; i < list_().size(); ++i) out += (i ? ", " : "") + list_()[i].json();
      return out + "]";
    }
    case Kind::Object: {
      std::string out = "{";
      for (size_t i = 0; i < object_().size(); ++i)
        out += (i ? ", " : "") + json_quote(object_()[i].first) + ": " + object_()[i].second.json();
      return out + "}";
    }
  }
  return "null";
}

std::string Value::py_repr() const {
  if (kind_ == Kind::Str) return py_quote(str_());
  return py_str();
}

std::string Value::py_str() const {
  switch (kind_) {
    case Kind::None: return "None";
    case Kind::Bool: return u_.i ? "True" : "False";
    case Kind::Int: return std::to_string(u_.i);
    case Kind::Float: return py_float_repr(u_.f);
    case Kind::Str: return str_();
    case Kind::List: {
      std::string out = "[";
      for (size_t i = 0; i < list_().size(); ++i) out += (i ? ", " : "") + list_()[i].py_repr();
      return out + "]";
    }
    case Kind::Tuple: {
      std::string out = "(";
      for (size_t i = 0; i < list_().size(); ++i) out += (i ? ", " : "") + list_()[i].py_repr();
      if (list_().size() == 1) out += ",";
      return out + ")";
    }
    case Kind::Object: {
      std::string out = "{";
      for (size_t i = 0; i < object_().size(); ++i)
        out += (i ? ", " : "") + py_quote(object_()[i].first) + ": " + object_()[i].second.py_repr();
      return out + "}";
    }
  }
  return "None";
}

// ---- strict JSON reader -------------------------------------------------------------------------------------

namespace {
class JsonReader {
 public:
  JsonReader(std::string_view t, uint64_t max_values) : t_(t), max_values_(max_values) {}
  Value document() {
    Value v = value(0);
    ws();
    if (p_ != t_.size()) fail("trailing characters");
    return v;
  }

 private:
  std::string_view t_;
  size_t p_ = 0;
  const uint64_t max_values_;
  uint64_t values_ = 0;  // values begun so far (counted before each is built: the tree never holds more)

  [[noreturn]] void fail(const std::string& what) const {
    throw JsonError("invalid JSON at offset " + std::to_string(p_) + ": " + what);
  }
  void ws() {
    while (p_ < t_.size() && (t_[p_] == ' ' || t_[p_] == '\n' || t_[p_] == '\t' || t_[p_] == '\r')) ++p_;
  }
  bool lit(std::string_view w) {
    if (t_.substr(p_, w.size()) == w) {
      p_ += w.size();
      return true;
    }
    return false;
  }
  Value value(int depth) {
    if (depth > 200) fail("nesting too deep");
    ws();
    if (p_ >= t_.size()) fail("unexpected end");
    if (values_ == max_values_) throw JsonTooManyValues(max_values_, p_);
    ++values_;
    char c = t_[p_];
    if (c == '{') return object(depth);
    if (c == '[') return array(depth);
    if (c == '"') return Value(string());
    if (lit("null")) return Value();
    if (lit("true")) return Value(true);
    if (lit("false")) return Value(false);
    if (lit("NaN")) return Value(std::nan(""));
    if (lit("Infinity")) return Value(HUGE_VAL);
    if (lit("-Infinity")) return Value(-HUGE_VAL);
    return number();
  }
  Value object(int depth) {
    ++p_;
    Object o;
    ws();
    if (p_ < t_.size() && t_[p_] == '}') {
      ++p_;
      return Value::object(std::move(o));
    }
    for (;;) {
      ws();
      if (p_ >= t_.size() || t_[p_] != '"') fail("expected a string key");
      std::string k = string();
      ws();
      if (p_ >= t_.size() || t_[p_] != ':') fail("expected ':'");
      ++p_;
      o.emplace_back(std::move(k), value(depth + 1));
      ws();
      if (p_ < t_.size() && t_[p_] == ',') { ++p_; continue; }
      if (p_ < t_.size() && t_[p_] == '}') { ++p_; break; }
      fail("expected ',' or '}'");
    }
    return Value::object(std::move(o));
  }
  Value array(int depth) {
    ++p_;
    List l;
    ws();
    if (p_ < t_.size() && t_[p_] == ']') {
      ++p_;
      return Value(std::move(l));
    }
    for (;;) {
      l.push_back(value(depth + 1));
      ws();
      if (p_ < t_.size() && t_[p_] == ',') { ++p_; continue; }
      if (p_ < t_.size() && t_[p_] == ']') { ++p_; break; }
      fail("expected ',' or ']'");
    }
    return Value(std::move(l));
  }
  static void utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) out += static_cast<char>(cp);
    else if (cp < 0x800) { out += static_cast<char>(0xC0 | (cp >> 6)); out += static_cast<char>(0x80 | (cp & 0x3F)); }
    else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }
  uint32_t hex4() {
    if (p_ + 4 > t_.size()) fail("short \\u escape");
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      char c = t_[p_++];
      v <<= 4;
      if (c >= '0' && c <= '9') v |= static_cast<uint32_t>(c - '0');
      else if (c >= 'a' && c <= 'f') v |= static_cast<uint32_t>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') v |= static_cast<uint32_t>(c - 'A' + 10);
      else fail("bad \\u escape");
    }
    return v;
  }
  std::string string() {
    ++p_;
    // The common string, with no escape: one copy of its bytes, sized once.
    size_t end = p_;
    while (end < t_.size() && t_[end] != '"' && t_[end] != '\\' && static_cast<unsigned char>(t_[end]) >= 0x20) ++end;
    if (end < t_.size() && t_[end] == '"') {
      std::string out(t_.substr(p_, end - p_));
      p_ = end + 1;
      return out;
    }
    std::string out(t_.substr(p_, end - p_));
    p_ = end;
    while (true) {
      if (p_ >= t_.size()) fail("unterminated string");
      char c = t_[p_++];
      if (c == '"') break;
      if (static_cast<unsigned char>(c) < 0x20) fail("control character in string");
      if (c != '\\') { out += c; continue; }
      if (p_ >= t_.size()) fail("unterminated escape");
      char e = t_[p_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          uint32_t cp = hex4();
          if (cp >= 0xD800 && cp < 0xDC00 && t_.substr(p_, 2) == "\\u") {
            // A pair only when the next escape really is a low surrogate; otherwise that escape is read on its own.
            const size_t at = p_;
            p_ += 2;
            const uint32_t lo = hex4();
            if (lo >= 0xDC00 && lo <= 0xDFFF) cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            else p_ = at;
          }
          if (cp >= 0xDC80 && cp <= 0xDCFF) {
            // The lone surrogate \udcXX is the byte XX that is not UTF-8 (json_quote writes it so, as Python's
            // surrogateescape does): the bytes round-trip. Another lone surrogate keeps its 3-byte form.
            out += static_cast<char>(cp - 0xDC00);
            break;
          }
          utf8(out, cp);
          break;
        }
        default: fail("bad escape");
      }
    }
    return out;
  }
  Value number() {
    size_t start = p_;
    if (p_ < t_.size() && t_[p_] == '-') ++p_;
    bool is_float = false;
    size_t digits_start = p_;
    while (p_ < t_.size() && std::isdigit(static_cast<unsigned char>(t_[p_]))) ++p_;
    if (p_ == digits_start) fail("expected a value");
    if (p_ < t_.size() && t_[p_] == '.') {
      is_float = true;
      ++p_;
      while (p_ < t_.size() && std::isdigit(static_cast<unsigned char>(t_[p_]))) ++p_;
    }
    if (p_ < t_.size() && (t_[p_] == 'e' || t_[p_] == 'E')) {
      is_float = true;
      ++p_;
      if (p_ < t_.size() && (t_[p_] == '+' || t_[p_] == '-')) ++p_;
      while (p_ < t_.size() && std::isdigit(static_cast<unsigned char>(t_[p_]))) ++p_;
    }
    std::string_view num = t_.substr(start, p_ - start);
    if (!is_float) {
      long long v = 0;
      auto r = std::from_chars(num.data(), num.data() + num.size(), v);
      if (r.ec == std::errc() && r.ptr == num.data() + num.size()) return Value(v);
    }
    double d = 0;
    auto r = std::from_chars(num.data(), num.data() + num.size(), d);
    if (r.ec != std::errc() || r.ptr != num.data() + num.size()) fail("bad number");
    return Value(d);
  }
};
}  // namespace

JsonTooManyValues::JsonTooManyValues(uint64_t limit_, size_t offset_)
    : JsonError("JSON of more than " + std::to_string(limit_) + " values: the limit is passed at offset " +
                std::to_string(offset_)),
      limit(limit_),
      offset(offset_) {}

Value Value::parse_json(std::string_view text, uint64_t max_values) { return JsonReader(text, max_values).document(); }

}  // namespace mr
