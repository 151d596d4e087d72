#include "config/converters.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <string>

#include "util/text.h"

namespace mr {

namespace {

std::string_view strip(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// Removes underscores that Python allows between digits; returns false where one is misplaced.
bool drop_digit_underscores(std::string_view s, std::string& out) {
  out.clear();
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '_') {
      if (i == 0 || i + 1 == s.size() || !std::isxdigit(static_cast<unsigned char>(s[i - 1])) ||
          !std::isxdigit(static_cast<unsigned char>(s[i + 1])))
        return false;
      continue;
    }
    out += s[i];
  }
  return true;
}

// A word in a message: Python's repr, of at most its first 200 bytes (util::abbreviate), so that a 5 MB value
// makes no 5 MB error line.
std::string quoted(std::string_view w) { return Value(abbreviate(w)).py_repr(); }

}  // namespace

int64_t parse_py_int(std::string_view word) {
  std::string clean;
  std::string_view s = strip(word);
  if (s.empty() || !drop_digit_underscores(s, clean)) throw ConvError("invalid int value: " + quoted(word));
  std::string_view c = clean;
  bool neg = false;
  if (!c.empty() && (c[0] == '+' || c[0] == '-')) {
    neg = c[0] == '-';
    c.remove_prefix(1);
  }
  if (c.empty()) throw ConvError("invalid int value: " + quoted(word));
  for (char ch : c)
    if (!std::isdigit(static_cast<unsigned char>(ch))) throw ConvError("invalid int value: " + quoted(word));
  uint64_t v = 0;
  auto r = std::from_chars(c.data(), c.data() + c.size(), v);
  if (r.ec != std::errc() || v > static_cast<uint64_t>(INT64_MAX))
    throw ConvError("int value out of range: " + quoted(word));
  return neg ? -static_cast<int64_t>(v) : static_cast<int64_t>(v);
}

double parse_py_float(std::string_view word) {
  std::string clean;
  std::string_view s = strip(word);
  if (s.empty() || !drop_digit_underscores(s, clean)) throw ConvError("invalid float value: " + quoted(word));
  std::string lower;
  for (char ch : clean) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  std::string_view l = lower;
  double sign = 1;
  if (!l.empty() && (l[0] == '+' || l[0] == '-')) {
    sign = l[0] == '-' ? -1 : 1;
    l.remove_prefix(1);
  }
  // One sign: from_chars below would take a second '-' ("+-1", "--1"), which Python's float() refuses.
  if (!l.empty() && (l[0] == '+' || l[0] == '-')) throw ConvError("invalid float value: " + quoted(word));
  if (l == "inf" || l == "infinity") return sign * HUGE_VAL;
  if (l == "nan") return std::nan("");
  // Python accepts "1.", ".5", "1e5", "1.5E-3"; reject hex and anything else.
  bool digit = false;
  for (char ch : l) {
    if (std::isdigit(static_cast<unsigned char>(ch))) digit = true;
    else if (ch != '.' && ch != 'e' && ch != '+' && ch != '-') throw ConvError("invalid float value: " + quoted(word));
  }
  if (!digit) throw ConvError("invalid float value: " + quoted(word));
  double v = 0;
  auto r = std::from_chars(l.data(), l.data() + l.size(), v);
  if (r.ptr != l.data() + l.size()) throw ConvError("invalid float value: " + quoted(word));
  if (r.ec == std::errc::result_out_of_range) {
    // Python overflows to inf and underflows to 0 rather than failing.
    v = (l.find("e-") != std::string_view::npos) ? 0.0 : HUGE_VAL;
  } else if (r.ec != std::errc()) {
    throw ConvError("invalid float value: " + quoted(word));
  }
  return sign * v;
}

// ---- the layer-pattern language -------------------------------------------------------------------------
// Python would build any pattern its memory holds, and wrap no integer; we bound the expression, the values
// it builds and their arithmetic (kMaxPatternChars, kMaxPatternValues, kMaxPatternWork in types.h), so that an
// evaluation takes time linear in the text and memory bounded by the limits, and refuses what exceeds them.
namespace {

// What is quoted of a pattern in a message: all of a short one, the start of a long one.
std::string pattern_text(std::string_view t) {
  if (t.size() <= 80) return quoted(t);
  return quoted(t.substr(0, 60)) + "... (" + std::to_string(t.size()) + " characters)";
}

class PatternParser {
 public:
  explicit PatternParser(std::string_view t) : t_(t) {}
  Value run() {
    if (t_.size() > kMaxPatternChars)
      throw ConvError("invalid pattern " + pattern_text(t_) + ": the expression is longer than " +
                      std::to_string(kMaxPatternChars) + " characters (megatron-run's limit)");
    for (char c : t_) {
      if (!(std::isdigit(static_cast<unsigned char>(c)) || c == ',' || c == '[' || c == ']' || c == '(' ||
            c == ')' || c == '+' || c == '*'))
        throw ConvError("invalid pattern " + pattern_text(t_) + ": only digits and , [ ] ( ) + * are allowed");
    }
    Node v = expr_or_tuple(0);
    if (p_ != t_.size()) fail("unexpected '" + std::string(1, t_[p_]) + "'");
    return std::move(v.v);
  }

 private:
  // A value and the number of values it holds, itself and every nested element (an int: 1; [1, [2, 3]]: 5).
  struct Node {
    Value v;
    uint64_t values = 1;
  };
  std::string_view t_;
  size_t p_ = 0;
  uint64_t work_ = 0;  // values built so far, intermediate results included

  [[noreturn]] void fail(const std::string& why) const {
    throw ConvError("invalid pattern " + pattern_text(t_) + " at position " + std::to_string(p_) + ": " + why);
  }
  [[noreturn]] void too_large() const {
    throw ConvError("invalid pattern " + pattern_text(t_) + ": it expands to more than " +
                    std::to_string(kMaxPatternValues) + " values (megatron-run's limit; a layer pattern has one "
                    "value per layer)");
  }
  // Accounts for `n` new values of a result; refuses results beyond the value limit and evaluations beyond the
  // work limit (so that a long chain of copies cannot take quadratic time).
  void build(uint64_t n) {
    if (n > kMaxPatternValues) too_large();
    work_ += n;
    if (work_ > kMaxPatternWork)
      throw ConvError("invalid pattern " + pattern_text(t_) + ": evaluating it builds more than " +
                      std::to_string(kMaxPatternWork) + " values (megatron-run's limit)");
  }
  bool eat(char c) {
    if (p_ < t_.size() && t_[p_] == c) {
      ++p_;
      return true;
    }
    return false;
  }
  static Node list_node(List items, uint64_t values, bool tuple) { return Node{Value(std::move(items), tuple), values}; }
  // A bare comma at top level or inside parentheses makes a tuple, as in Python.
  Node expr_or_tuple(int depth) {
    Node first = expr(depth);
    if (p_ < t_.size() && t_[p_] == ',') {
      uint64_t values = 1 + first.values;
      List items{std::move(first.v)};
      while (eat(',')) {
        if (p_ >= t_.size() || t_[p_] == ')') break;
        Node n = expr(depth);
        values += n.values;
        items.push_back(std::move(n.v));
      }
      build(values);
      return list_node(std::move(items), values, /*tuple=*/true);
    }
    return first;
  }
  Node expr(int depth) {
    Node v = term(depth);
    while (eat('+')) v = add(std::move(v), term(depth));
    return v;
  }
  Node term(int depth) {
    Node v = factor(depth);
    while (eat('*')) v = mul(std::move(v), factor(depth));
    return v;
  }
  Node factor(int depth) {
    if (depth > 64) fail("nesting too deep (more than 64 levels)");
    if (p_ >= t_.size()) fail("unexpected end");
    char c = t_[p_];
    if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t s = p_;
      while (p_ < t_.size() && std::isdigit(static_cast<unsigned char>(t_[p_]))) ++p_;
      std::string_view num = t_.substr(s, p_ - s);
      if (num.size() > 1 && num[0] == '0' && num.find_first_not_of('0') != std::string_view::npos)
        fail("leading zeros are not allowed");
      if (num.size() > 18) fail("number too large (more than 18 digits)");
      int64_t n = 0;
      std::from_chars(num.data(), num.data() + num.size(), n);
      build(1);
      return Node{Value(n), 1};
    }
    if (eat('[')) {
      List items;
      uint64_t values = 1;
      if (!eat(']')) {
        for (;;) {
          Node n = expr(depth + 1);
          values += n.values;
          items.push_back(std::move(n.v));
          if (eat(']')) break;
          if (!eat(',')) fail("expected ',' or ']'");
          if (eat(']')) break;
        }
      }
      build(values);
      return list_node(std::move(items), values, false);
    }
    if (eat('(')) {
      if (eat(')')) return list_node(List{}, 1, true);
      Node v = expr_or_tuple(depth + 1);
      if (!eat(')')) fail("expected ')'");
      return v;
    }
    fail("expected a number, '[' or '('");
  }
  Node add(Node a, Node b) {
    if (a.v.is_int() && b.v.is_int()) {
      int64_t r = 0;
      if (__builtin_add_overflow(a.v.as_int(), b.v.as_int(), &r)) fail("integer overflow (beyond 64 bits) in '+'");
      build(1);
      return Node{Value(r), 1};
    }
    if (a.v.kind() == b.v.kind() && a.v.is_list()) {
      // In place: `a` is this evaluation's own temporary, so only b's values are copied (a chain of additions
      // costs the values it adds, not the length of the list so far each time).
      const uint64_t values = a.values + b.values - 1;
      if (values > kMaxPatternValues) too_large();
      build(b.values);
      List& out = a.v.mutable_list();
      out.insert(out.end(), b.v.as_list().begin(), b.v.as_list().end());
      a.values = values;
      return a;
    }
    fail("cannot add these operands");
  }
  Node mul(Node a, Node b) {
    if (a.v.is_int() && b.v.is_int()) {
      int64_t r = 0;
      if (__builtin_mul_overflow(a.v.as_int(), b.v.as_int(), &r)) fail("integer overflow (beyond 64 bits) in '*'");
      build(1);
      return Node{Value(r), 1};
    }
    const Node* seq = a.v.is_list() ? &a : (b.v.is_list() ? &b : nullptr);
    const Node* n = a.v.is_int() ? &a : (b.v.is_int() ? &b : nullptr);
    if (!seq || !n) fail("can only multiply a list by an int");
    const int64_t times = std::max<int64_t>(0, n->v.as_int());  // Python: a non-positive count gives []
    const uint64_t elems = seq->values - 1;                       // the values inside the list
    uint64_t inside = 0;
    if (__builtin_mul_overflow(static_cast<uint64_t>(times), elems, &inside) || inside >= kMaxPatternValues)
      too_large();
    build(inside + 1);
    const List& src = seq->v.as_list();
    List out;
    if (!src.empty()) out.reserve(static_cast<size_t>(times) * src.size());
    for (int64_t i = 0; i < times && !src.empty(); ++i) out.insert(out.end(), src.begin(), src.end());
    return list_node(std::move(out), inside + 1, seq->v.kind() == Value::Kind::Tuple);
  }
};

const char* const kCudaGraphModules[] = {"attn", "mlp", "moe", "moe_router", "moe_preprocess", "mamba"};
const char* const kAttnBackends[] = {"flash", "fused", "unfused", "local", "auto"};
struct SignalName {
  const char* name;
  int num;
};
const SignalName kSignals[] = {
    {"SIGHUP", 1},     {"SIGINT", 2},     {"SIGQUIT", 3},    {"SIGILL", 4},    {"SIGTRAP", 5},
    {"SIGABRT", 6},    {"SIGIOT", 6},     {"SIGBUS", 7},     {"SIGFPE", 8},    {"SIGKILL", 9},
    {"SIGUSR1", 10},   {"SIGSEGV", 11},   {"SIGUSR2", 12},   {"SIGPIPE", 13},  {"SIGALRM", 14},
    {"SIGTERM", 15},   {"SIGSTKFLT", 16}, {"SIGCHLD", 17},   {"SIGCONT", 18},  {"SIGSTOP", 19},
    {"SIGTSTP", 20},   {"SIGTTIN", 21},   {"SIGTTOU", 22},   {"SIGURG", 23},   {"SIGXCPU", 24},
    {"SIGXFSZ", 25},   {"SIGVTALRM", 26}, {"SIGPROF", 27},   {"SIGWINCH", 28}, {"SIGIO", 29},
    {"SIGPOLL", 29},   {"SIGPWR", 30},    {"SIGSYS", 31},    {"SIGRTMIN", 34}, {"SIGRTMAX", 64},
};

Value freq(std::string_view word, const char* what) {
  if (word.find('[') != std::string_view::npos) return eval_pattern(word);
  try {
    return Value(parse_py_int(word));
  } catch (const ConvError&) {
    throw ConvError(std::string("invalid ") + what + " value: " + quoted(word) +
                    " (expected an int or a layer pattern such as ([1]*3+[0]*1)*3)");
  }
}
}  // namespace

Value eval_pattern(std::string_view text) { return PatternParser(text).run(); }

std::vector<std::string> cuda_graph_module_names() { return {std::begin(kCudaGraphModules), std::end(kCudaGraphModules)}; }
std::vector<std::string> cuda_graph_full_scopes() { return {"full", "full_iteration", "full_iteration_inference"}; }

std::vector<std::string> signal_names() {
  std::vector<std::string> out;
  for (const SignalName& s : kSignals) out.emplace_back(s.name);
  return out;
}

Value convert(ArgType type, std::string_view word) {
  switch (type) {
    case ArgType::None:
    case ArgType::Str:
    case ArgType::Path: return Value(std::string(word));
    case ArgType::Int: return Value(parse_py_int(word));
    case ArgType::Float: return Value(parse_py_float(word));
    case ArgType::PyBool: return Value(!word.empty());
    case ArgType::Json:
      try {
        return Value::parse_json(word);
      } catch (const JsonError& e) {
        throw ConvError("invalid JSON value " + quoted(word) + ": " + e.what());
      }
    case ArgType::MoeFreq: return freq(word, "moe_freq_type");
    case ArgType::LaFreq: return freq(word, "la_freq_type");
    case ArgType::NoRopeFreq: return freq(word, "no_rope_freq_type");
    case ArgType::CompressRatios: return eval_pattern(word);
    case ArgType::IntTuple: {
      std::string_view s = word;
      while (!s.empty() && (s.front() == '(' || s.front() == ')')) s.remove_prefix(1);
      while (!s.empty() && (s.back() == '(' || s.back() == ')')) s.remove_suffix(1);
      List items;
      for (const std::string& part : split(s, ',')) {
        try {
          items.emplace_back(parse_py_int(part));
        } catch (const ConvError&) {
          throw ConvError("invalid tuple_type value: " + quoted(word) + " (expected ints separated by commas)");
        }
      }
      return Value(std::move(items), /*tuple=*/true);
    }
    case ArgType::CudaGraphModule: {
      for (const std::string& scope : cuda_graph_full_scopes())
        if (word == scope) return Value(std::string(word));
      std::string_view w = word;
      if (w.substr(0, 16) == "CudaGraphModule.") w.remove_prefix(16);  // our own JSON spelling
      for (const char* m : kCudaGraphModules)
        if (w == m) return Value(std::string("CudaGraphModule.") + m);
      throw ConvError("invalid CUDA graph module: " + quoted(word) +
                      " (choose from attn, mlp, moe, moe_router, moe_preprocess, mamba, full, full_iteration, "
                      "full_iteration_inference)");
    }
    case ArgType::TritonBlockSize: {
      auto eq = word.find('=');
      if (eq != std::string_view::npos) {
        std::string_view name = word.substr(0, eq), size = word.substr(eq + 1);
        bool ident = name.substr(0, 5) == "BLOCK";
        for (char c : name) ident = ident && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
        if (ident) {
          try {
            int64_t n = parse_py_int(size);
            if (n > 0) return Value(List{Value(std::string(name)), Value(n)}, /*tuple=*/true);
          } catch (const ConvError&) {
          }
        }
      }
      throw ConvError("invalid block size " + quoted(word) + "; expected BLOCK_NAME=positive_integer");
    }
    case ArgType::AttnBackendEnum: {
      std::string_view w = word;
      if (w.substr(0, 12) == "AttnBackend.") w.remove_prefix(12);
      for (const char* b : kAttnBackends)
        if (w == b) return Value(std::string("AttnBackend.") + b);
      throw ConvError("invalid AttnBackend value: " + quoted(word) + " (choose from flash, fused, unfused, local, auto)");
    }
    case ArgType::SignalEnum: {
      std::string_view w = word;
      if (w.substr(0, 8) == "Signals.") w.remove_prefix(8);
      for (const SignalName& s : kSignals)
        if (w == s.name) return Value(s.num);
      throw ConvError("invalid signal: " + quoted(word) + " (use a name such as SIGTERM or SIGUSR1)");
    }
  }
  return Value(std::string(word));
}

}  // namespace mr
