#include "config/parse/config_file.h"
#include "config/parse/read_file.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <map>
#include <optional>
#include <sstream>
#include <string_view>
#include <unordered_map>

#include "config/converters.h"
#include "config/limits.h"
#include "config/parse/argparse.h"
#include "config/parse/yaml11.h"
#include "config/parse/yaml_doc.h"
#include "config/rule.h"
#include "util/text.h"

namespace mr {

EnvLookup process_env_lookup() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (!v) return std::nullopt;
    return std::string(v);
  };
}

namespace {

const std::vector<std::string> kConfigFlags = {"--config"};

// The config file's own refusals of the parse stage (exit 2; argparse's `megatron-run: error: TEXT` on stderr, the
// id in `check` and the JSON documents). An unknown key and a bad value are argparse.h's rules.
const Rule kUnsetEnvRule{"parse.unset-env", Rule::Level::Error,
                         "A config file's ${VAR} names an environment variable that is not set (export it, pass "
                         "--allow-unset-env to keep it literal, or --env-placeholder DIR to read it as DIR/VAR).",
                         __FILE__, __LINE__, kStageParse};
const Rule kEnvReferenceRule{"parse.env-reference", Rule::Level::Error,
                             "A config file's ${ never closed, a ${} naming no environment variable, or a ${...} "
                             "that is not a plain ${NAME} (a shell form such as ${NAME:-default}).", __FILE__,
                             __LINE__, kStageParse};
const Rule kCiTrueSpellingRule{
    "parse.ci-true-spelling", Rule::Level::Warning,
    "A functional-test (MODEL_ARGS) value written True or TRUE: megatron-run gives the bare switch, as the reference "
    "corpus's argv has it, but Megatron's CI launcher passes the word (its yq compares the text with `true`), which "
    "Megatron refuses; write true.",
    __FILE__, __LINE__, kStageParse};
const Rule kConfigNotMappingRule{
    "parse.config-not-mapping", Rule::Level::Error,
    "A config file (or its MODEL_ARGS or ENV_VARS) that is not a mapping: a list, or a lone value.", __FILE__,
    __LINE__, kStageParse};

// A plain (unquoted) scalar as a typed value, resolved with YAML 1.1 rules as Python's yaml loader does
// (config/parse/yaml11.h: "1e-2" stays a string while "0.00001" is a float, "yes" is a bool, "0b11" and "1:30" are
// ints). What safe_load would make but no flag can take as such stays its text, to be converted like a command-line
// word: a timestamp (Python's str() of the date is the same text for a date), an int past 64 bits (the flag's type
// then says it is out of range), a plain "=" or "<<".
Value plain_scalar(const std::string& text) {
  try {
    return yaml11_plain_scalar(text);
  } catch (const UsageError&) {
    return Value(text);
  }
}

// A scalar node as Python's yaml loader constructs it: quoted and block scalars are strings, plain ones go
// through the YAML 1.1 resolvers, the standard scalar tags (!!str, !!int, !!float, !!bool, !!null) construct
// their type as PyYAML's constructors do (!!float 1e-4 is 0.0001; yaml11_tagged_scalar); any other tag (!!python/name:..., !local) is refused naming file:line.
Value typed_scalar(const yaml::Node& n, const std::string& text) {
  const std::string& tag = n.tag();
  if (tag == "!") return Value(text);
  if (tag == "?") return plain_scalar(text);
  if (yaml::standard_tag(tag, "str")) return Value(text);
  for (const char* t : {"int", "float", "bool", "null"}) {
    if (!yaml::standard_tag(tag, t)) continue;
    std::optional<Value> v;
    try {
      v = yaml11_tagged_scalar(t, text);
    } catch (const UsageError&) {
      return Value(text);  // an int past 64 bits: the flag's type says it is out of range, as for a plain one
    }
    if (!v)
      throw UsageError(n.where() + ": cannot construct " + yaml::display_tag(tag) + " from " +
                           Value(abbreviate(text)).py_repr() + " (Python's yaml.safe_load cannot either)",
                       kConfigFlags, n.where(), "input.yaml-tag");
    return *v;
  }
  yaml::unsupported_tag(n, kConfigFlags);
}

struct Entry {
  yaml::Node key;    // the key whose value is kept (the last one), so provenance cites the line that wins
  yaml::Node value;
};

// A file's mistakes, reported at once in line order: the first kMaxListedArguments + 1 by line are kept (the
// first one's error is thrown, the others listed after it), the rest only counted. Memory stays bounded however
// many mistakes the file has.
class Mistakes {
 public:
  void add(int line, UsageError e) {
    Item item{line, seq_++, std::move(e)};
    if (kept_.size() <= limits::kMaxListedArguments) {
      kept_.push_back(std::move(item));
      return;
    }
    ++more_;  // one of the kept ones or this one goes uncounted: the latest by line
    auto last = std::max_element(kept_.begin(), kept_.end(), before);
    if (before(item, *last)) *last = std::move(item);
  }
  bool empty() const { return kept_.empty(); }
  // The first mistake's error (its where and id), with the others on lines of their own after it.
  [[noreturn]] void raise() {
    std::sort(kept_.begin(), kept_.end(), before);
    const UsageError& first = kept_.front().error;
    std::string msg = first.what();
    std::vector<std::string> flags = first.flags;
    for (size_t k = 1; k < kept_.size(); ++k) {
      msg += "\n  also " + std::string(kept_[k].error.what());
      flags.insert(flags.end(), kept_[k].error.flags.begin(), kept_[k].error.flags.end());
    }
    if (more_ > 0) msg += "\n  ... (" + std::to_string(more_) + " more)";
    throw UsageError(msg, std::move(flags), first.where, first.id);
  }

 private:
  struct Item {
    int line;
    size_t seq;
    UsageError error;
  };
  static bool before(const Item& a, const Item& b) { return a.line != b.line ? a.line < b.line : a.seq < b.seq; }
  std::vector<Item> kept_;
  size_t seq_ = 0, more_ = 0;
};

// A mapping's entries as the Python dict built from it: `<<` merge keys flattened first (PyYAML), each key once
// at its first position, with its last value. Keys must be scalars. A key written twice in the mapping itself
// is an error (`strict`: megatron-run's own layout; one more of the file's mistakes when `mistakes` collects
// them, else thrown) or, where Megatron's loader accepts it (the functional-test layout), a warning naming both
// lines. Linear in the number of keys.
std::vector<Entry> entries(const yaml::Node& map, bool strict, std::vector<std::string>& warnings,
                           Mistakes* mistakes = nullptr) {
  std::size_t own_from = 0;
  auto pairs = yaml::merged_pairs(map, kConfigFlags, &own_from);
  std::vector<Entry> out;
  out.reserve(pairs.size());
  std::unordered_map<std::string_view, std::size_t> index;  // key -> position in out
  std::unordered_map<std::string_view, yaml::Node> own;     // key -> where the mapping itself last wrote it
  index.reserve(pairs.size());
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    const yaml::Node& k = pairs[i].first;
    if (!k.is_scalar()) yaml::non_scalar_key(k, kConfigFlags);
    std::string_view name = k.scalar();
    if (i >= own_from) {
      auto [it, fresh] = own.try_emplace(name, k);
      if (!fresh) {
        std::string msg = "duplicate key '" + echo_word(k.scalar()) + "' (also at " + printable(it->second.where(), false) + ")";
        if (strict) {
          UsageError e(k.where() + ": " + msg + "; a config file sets each argument once", {k.scalar()}, k.where(),
                       "input.yaml-duplicate-key");
          if (!mistakes) throw e;
          mistakes->add(k.line(), std::move(e));
        } else {
          warnings.push_back("[input.yaml-duplicate-key] " + k.where() + ": " + msg + ": the value at " + k.where() +
                             " is used, as Python's yaml loader does");
        }
        it->second = k;
      }
    }
    auto [it, fresh] = index.try_emplace(name, out.size());
    if (fresh)
      out.push_back(Entry{k, pairs[i].second});
    else
      out[it->second] = Entry{k, pairs[i].second};
  }
  return out;
}

// Converts a node to a typed value. `strict`: megatron-run's own layout, where a quoted value that swallows
// the lines after it (a missing closing quote) is an error; elsewhere it is a warning.
struct Converter {
  const ConfigOptions& opts;
  bool strict;
  std::vector<std::string>& warnings;

  Value operator()(const yaml::Node& n) const {
    switch (n.type()) {
      case yaml::Node::Type::Null:
      case yaml::Node::Type::Undefined: return Value();
      case yaml::Node::Type::Scalar: {
        if (n.swallowed_line()) swallowed(n);
        std::string text = n.scalar();
        // A NUL byte ("\0", "\x00", "\u0000" in a double-quoted scalar): no command-line word or environment
        // variable can hold one (they end at their first NUL), so the value would reach Megatron cut short.
        if (text.find('\0') != std::string::npos)
          throw UsageError(n.where() + ": the value " + Value(abbreviate(text)).py_repr() +
                               " holds a NUL byte, which no command line or environment variable can carry (the "
                               "word would end at it)",
                           kConfigFlags, n.where(), "input.unrepresentable-value");
        if (text.find('$') != std::string::npos) text = expand_env(text, opts, n.where());
        return typed_scalar(n, text);
      }
      case yaml::Node::Type::Sequence: {
        check_collection_tag(n, "seq");
        List l;
        l.reserve(n.size());
        for (std::size_t i = 0; i < n.size(); ++i) l.push_back((*this)(n.item(i)));
        return Value(std::move(l));
      }
      case yaml::Node::Type::Map: {
        check_collection_tag(n, "map");
        Object o;
        for (const Entry& e : entries(n, strict, warnings)) o.emplace_back(e.key.scalar(), (*this)(e.value));
        return Value::object(std::move(o));
      }
    }
    return Value();
  }

  static void check_collection_tag(const yaml::Node& n, const char* std_name) {
    if (!n.plain() && n.tag() != "!" && !yaml::standard_tag(n.tag(), std_name)) yaml::unsupported_tag(n, kConfigFlags);
  }

  void swallowed(const yaml::Node& n) const {
    std::string line = n.where().substr(0, n.where().rfind(':') + 1) + std::to_string(n.swallowed_line());
    std::string msg = "the quoted value starting here runs on to " + line + ", taking in what looks like the key '" +
                      echo_word(n.swallowed_key()) + "' (a missing closing quote?)";
    if (strict)
      throw UsageError(n.where() + ": " + msg + "; close the quote, or write the value on one line", kConfigFlags, n.where(),
                       "input.yaml-multiline-quoted");
    warnings.push_back("[input.yaml-multiline-quoted] " + n.where() + ": " + msg +
                       "; Python's yaml loader reads it as one value too");
  }
};

// The word the CI launcher passes for a list element: Python's str() of what the YAML loader produced.
std::string launcher_word(const Value& v) {
  if (v.is_bool()) return v.as_bool() ? "True" : "False";
  if (v.is_float()) return py_float_repr(v.as_float());
  return v.py_str();
}

// `True` or `TRUE` (a plain YAML boolean true whose text is not `true`): the bare switch here, the word in CI.
bool ci_true_spelling(const Value& v, const std::string& text) {
  return v.is_bool() && v.as_bool() && (text == "True" || text == "TRUE");
}

// What Megatron's CI launcher (_run_training.sh) makes of a scalar value of MODEL_ARGS: `std::nullopt` for the
// bare switch, else the one word it passes. Its yq prints each scalar's text as written (`tostring`), after
// turning a value whose text is `true` into the word `true` (yq's `==` on scalars compares their text); its shell
// loop then makes `true` the bare switch, and passes any other text as one word. So:
//   - `true`, and a quoted "true" -> the bare switch;
//   - `True`, `TRUE` -> the bare switch here too, though CI passes the word (`--bf16 True`, which Megatron refuses:
//     unrecognized arguments): kept so, as the reference corpus's argv has the bare switch for them, and warned
//     (parse.ci-true-spelling, apply_model_args);
//   - an empty value -> the bare key too (yq prints nothing after it);
//   - a number for an int or float argument (`numeric`) -> Python's str() of the number PyYAML built where
//     Python's int()/float() reads the text as that very number (`0.00001` -> `1e-05`, `1_000` -> `1000`, `+5` ->
//     `5`: Megatron's int()/float() reads the same value from either, and the reference corpus's argv was built
//     with str()); else its text (`010`, which int() reads as 10 where YAML 1.1 says 8; `0x10`, `0b11`, `1:30`,
//     `.inf`, which int()/float() refuse). For any other argument (a text one: `--wandb-project: 2024.10`) the
//     text as written, as CI passes it: Megatron keeps the word;
//   - anything else -> its text as written: `null` and `~` stay `null` and `~` (not None), `false`, `no`, `off`,
//     `yes`, `on` stay as written (not False or True; yq, YAML 1.2, reads yes/no/on/off as strings).
// `text` is the scalar's text after ${VAR} expansion, `v` the value PyYAML builds from it.
std::optional<std::string> ci_word(const yaml::Node& n, const Value& v, const std::string& text, bool numeric) {
  if (n.is_null()) {
    if (n.null_text().empty()) return std::nullopt;
    return n.null_text();
  }
  if (text == "true") return std::nullopt;
  if (ci_true_spelling(v, text)) return std::nullopt;
  if ((v.is_int() || v.is_float()) && !numeric) return text;
  if (v.is_int()) {
    try {
      if (parse_py_int(text) == v.as_int()) return v.py_str();
    } catch (const ConvError&) {
    }
    return text;
  }
  if (v.is_float()) {
    try {
      const double d = parse_py_float(text);
      if (d == v.as_float() && !std::isnan(d)) return py_float_repr(v.as_float());
    } catch (const ConvError&) {
    }
    return text;
  }
  if (v.is_str()) return v.as_str();
  if (v.is_none() && text.empty()) return std::nullopt;  // !!null "" : nothing printed after the key
  return text;
}

UsageError file_error(const std::string& where, const std::string& msg, std::vector<std::string> flags,
                      const Rule& rule) {
  return UsageError(where + ": " + msg, std::move(flags), where, rule.id);
}

void apply_model_args(const Schema& schema, const yaml::Node& args, const ConfigOptions& opts, ConfigResult& out,
                      Namespace& ns) {
  if (args.is_null()) return;  // an empty MODEL_ARGS stands for an empty command line
  if (!args.is_map()) throw file_error(args.where(), "MODEL_ARGS must be a mapping of flags to values", {}, kConfigNotMappingRule);
  Converter to_value{opts, /*strict=*/false, out.report.warnings};
  std::vector<Token> tokens;
  // Switches given a word (`--bf16: yes`, `--bf16: false`): Megatron's argparse leaves the word over and refuses it
  // as an unrecognized argument; the refusal then names each such key and what CI passed.
  std::vector<std::string> switch_words;
  for (const Entry& e : entries(args, /*strict=*/false, out.report.warnings)) {
    std::string key = e.key.scalar();
    Provenance origin{Provenance::Kind::Config, e.key.where()};
    Value v = to_value(e.value);
    if (v.is_list()) {
      // A YAML sequence: one word per element.
      tokens.push_back(Token{key, origin});
      for (const Value& x : v.as_list()) tokens.push_back(Token{launcher_word(x), origin});
      continue;
    }
    std::optional<std::string> word;
    if (e.value.is_scalar() || e.value.is_null()) {
      std::string text = e.value.scalar();
      if (e.value.is_scalar() && text.find('$') != std::string::npos) text = expand_env(text, opts, e.value.where());
      const Arg* target = schema.find_flag(key);
      const bool numeric = target && (target->spec->type == ArgType::Int || target->spec->type == ArgType::Float);
      word = ci_word(e.value, v, text, numeric);
      if (!word && e.value.is_scalar() && ci_true_spelling(v, text)) {
        kCiTrueSpellingRule.record_hit();
        out.report.warnings.push_back(
            "[" + std::string(kCiTrueSpellingRule.id) + "] " + e.value.where() + ": " + key + ": " + text +
            " gives the bare switch here (as the reference corpus has it), but Megatron's CI launcher passes the "
            "word `" + key + " " + text + "` (its yq compares the text with `true`), which Megatron refuses "
            "(unrecognized arguments: " + text + "); write true");
      }
    } else {
      word = launcher_word(v);  // a mapping: its text as one word, as before
    }
    if (!word) {
      tokens.push_back(Token{key, origin});
      continue;
    }
    if (word->empty() && (e.value.is_scalar() && v.is_str())) continue;  // the launcher drops empty strings
    tokens.push_back(Token{key, origin});
    if (word->size() >= 2 && word->front() == '[' && word->back() == ']' && v.is_str()) {
      // "[a b c]": the brackets go and the rest splits into words.
      std::istringstream ss(word->substr(1, word->size() - 2));
      std::string w;
      while (ss >> w) tokens.push_back(Token{w, origin});
    } else {
      tokens.push_back(Token{*word, origin});
    }
    if (const Arg* arg = schema.find_flag(key); arg && arg->is_switch() && switch_words.size() < limits::kMaxListedArguments)
      switch_words.push_back(e.key.where() + ": " + key + " is a switch and takes no value: Megatron's CI launcher passes `" +
                             key + " " + echo_word(*word) + "`, and only `true` gives the bare switch (write true, or drop the key)");
  }
  out.argv = tokens;
  ParseReport r;
  try {
    r = parse_tokens(schema, tokens, ns);
  } catch (const UsageError& ex) {
    if (ex.id != kUnknownArgumentRule.id || switch_words.empty()) throw;
    std::string msg = ex.what();
    for (const std::string& s : switch_words) msg += "\n  " + s;
    throw UsageError(msg, ex.flags, ex.where, ex.id);
  }
  out.report.warnings.insert(out.report.warnings.end(), r.warnings.begin(), r.warnings.end());
}

// Attributes parse_args() computes after argparse; our parsed-arguments JSON holds them, and they are recomputed
// from the environment, so a file feeding that JSON back may carry them.
bool parse_args_attribute(const std::string& key) {
  return key == "rank" || key == "world_size" || key == "_is_global_batch_size_explicitly_specified";
}

void apply_plain(const Schema& schema, const yaml::Node& root, const ConfigOptions& opts, ConfigResult& out,
                 Namespace& ns) {
  Converter to_value{opts, /*strict=*/true, out.report.warnings};
  std::map<std::string, std::pair<std::string, std::string>> set_by;  // dest -> (key, where) that set it here
  // Every key's mistake is reported (a file's mistakes at once, not one per run), a key written twice included:
  // the first one by line is thrown, with the others listed after it.
  Mistakes bad;
  // Megatron's --yaml-cfg layout (config/parse/yaml_cfg.h): its sections are no arguments; the first of them named
  // as unknown says what the file is.
  const bool yaml_cfg_layout = root.get("language_model").is_map() || root.get("model_parallel").is_map();
  bool yaml_cfg_hinted = false;
  // Unknown keys given "did you mean" suggestions: the first kMaxSuggestedFlags, as on a command line (each takes a
  // pass over every flag: 100,000 unknown keys took minutes when each had its own).
  size_t suggested = 0;
  for (const Entry& e : entries(root, /*strict=*/true, out.report.warnings, &bad)) {
    try {
      std::string key = e.key.scalar();
      if (parse_args_attribute(key)) continue;
      std::string where = e.key.where();
      Provenance origin{Provenance::Kind::Config, where};
      const Arg* arg = nullptr;
      bool negate = false;
      if (key.rfind("--", 0) == 0) {
        arg = schema.find_flag(key);
      } else {
        std::string dest = key;
        for (char& c : dest)
          if (c == '-') c = '_';
        auto args = schema.find_dest(dest);
        if (!args.empty()) arg = args.front();
      }
      if (!arg) {
        std::string msg = "unknown argument '" + echo_word(key) + "'";
        std::string flag = key.rfind("--", 0) == 0 ? key : "--" + key;
        for (char& c : flag)
          if (c == '_') c = '-';
        const std::vector<std::string> s =
            suggested++ < limits::kMaxSuggestedFlags ? schema.suggest(flag) : std::vector<std::string>{};
        if (!s.empty()) {
          msg += " (did you mean ";
          for (size_t i = 0; i < s.size(); ++i) msg += (i ? ", " : "") + s[i];
          msg += "?)";
        }
        if (yaml_cfg_layout && !yaml_cfg_hinted && (key == "language_model" || key == "model_parallel")) {
          yaml_cfg_hinted = true;
          msg += "; this looks like a Megatron --yaml-cfg file (language_model: and model_parallel: sections), not a "
                 "--config file: check it with `megatron-run check --yaml-cfg FILE` or "
                 "`megatron-run --dry-run --yaml-cfg FILE`";
        }
        throw file_error(where, msg, {key}, kUnknownArgumentRule);
      }
      // One argument under two keys (--num-layers and num_layers, --foo and --no-foo): as a key written twice.
      if (auto [it, fresh] = set_by.try_emplace(std::string(arg->dest()), key, where); !fresh)
        throw UsageError(where + ": '" + key + "' sets the same argument as '" + it->second.first + "' (at " +
                             it->second.second + "); a config file sets each argument once",
                         {key, it->second.first}, where, "input.yaml-duplicate-key");
      Value v = to_value(e.value);
      if (*arg->spec->deprecated && v != arg->def)
        out.report.warnings.push_back(where + ": " + key + " is deprecated: " + arg->spec->deprecated);
      if (arg->is_switch() && key.rfind("--", 0) == 0) {
        // Flag spelling: true applies the switch, false applies its opposite.
        if (!v.is_bool()) throw file_error(where, "switch " + key + " takes true or false, got " + abbreviate(v.py_repr()) +
                                                     (v.is_str() && v.as_str().size() < 8 && yaml11_plain_scalar(v.as_str()).is_bool()
                                                          ? " (a quoted string: write " + v.as_str() + " without quotes)"
                                                          : std::string()),
                                                 {key},
                                     kInvalidValueRule);
        Value on = arg->spec->action == Action::BoolOptional ? Value(key.rfind("--no-", 0) != 0) : arg->konst;
        if (!on.is_bool()) throw file_error(where, "switch " + key + " cannot be set from a file", {key}, kInvalidValueRule);
        negate = !v.as_bool();
        ns.set(arg->dest(), Value(negate ? !on.as_bool() : on.as_bool()), origin);
        continue;
      }
      if (v.is_str())  // a quoted "false" is a word, True as on a command line
        if (std::string w = bool_type_word_warning(*arg, key, v.as_str(), origin); !w.empty())
          out.report.warnings.push_back(std::move(w));
      assign_value(*arg, key, v, origin, ns);
    } catch (const UsageError& ex) {
      bad.add(e.key.line(), ex);  // an input.* refusal of a key (a tag, a quote left open) is one more mistake
    }
  }
  if (!bad.empty()) bad.raise();
}

}  // namespace

std::string expand_env(const std::string& text, const ConfigOptions& opts, const std::string& where) {
  std::string out;
  for (size_t i = 0; i < text.size();) {
    if (text[i] != '$') {
      out += text[i++];
      continue;
    }
    size_t start = i;
    std::string name;
    if (i + 1 < text.size() && text[i + 1] == '{') {
      size_t close = text.find('}', i + 2);
      if (close == std::string::npos) throw UsageError(where + ": unterminated ${ in " + Value(abbreviate(text)).py_repr(), {}, where, kEnvReferenceRule.id);
      name = text.substr(i + 2, close - i - 2);
      i = close + 1;
    } else {
      out += text[i++];  // only the braced form is expanded; a bare $ stays as written
      continue;
    }
    if (name.empty() && !opts.allow_unset_env)
      throw UsageError(where + ": ${} in " + Value(abbreviate(text)).py_repr() + " names no environment variable", {}, where,
                       kEnvReferenceRule.id);
    // Only ${NAME} is expanded (as envsubst does): the shell's ${NAME:-default}, ${NAME%suffix} and the like are
    // not, and are refused by what they are rather than as an unset variable named `B:-c` (review user39 #10).
    auto is_name = [](const std::string& n) {
      if (n.empty() || std::isdigit(static_cast<unsigned char>(n[0]))) return false;
      for (char c : n)
        if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
      return true;
    };
    if (!name.empty() && !is_name(name) && !opts.allow_unset_env)
      throw UsageError(where + ": ${" + echo_word(name) + "} in " + Value(abbreviate(text)).py_repr() +
                           " is not a ${NAME} reference: only ${NAME} is expanded (a shell form such as "
                           "${NAME:-default} is not; set the variable, or write the value)",
                       {}, where, kEnvReferenceRule.id);
    if (auto v = name.empty() ? std::nullopt : opts.env(name)) {
      out += *v;
    } else if (opts.allow_unset_env) {
      out += text.substr(start, i - start);
    } else {
      throw UsageError(where + ": environment variable " + echo_word(name) +
                           " is not set (export it, or pass --allow-unset-env to keep it literal)",
                       {}, where, kUnsetEnvRule.id);
    }
  }
  return out;
}

namespace {
ConfigResult load_config_file(const Schema& schema, const std::string& path, Namespace& ns, const ConfigOptions& opts) {
  yaml::Document doc = yaml::load_file(path, "config file", kConfigFlags);
  yaml::Node root = doc.root();
  ConfigResult out;

  if (root.is_null()) return out;
  if (!root.is_map()) throw file_error(root.where(), "a config file must be a mapping of arguments to values", {}, kConfigNotMappingRule);
  yaml::Node model_args = root.get("MODEL_ARGS");
  if (model_args.defined()) {
    out.functional_test_layout = true;
    entries(root, /*strict=*/false, out.report.warnings);  // the top level's keys: scalars, repeats named
    yaml::Node env = root.get("ENV_VARS");
    if (env.defined() && !env.is_null()) {
      if (!env.is_map()) throw file_error(env.where(), "ENV_VARS must be a mapping of variable names to values", {},
                                        kConfigNotMappingRule);
      Converter to_value{opts, /*strict=*/false, out.report.warnings};
      for (const Entry& e : entries(env, /*strict=*/false, out.report.warnings)) {
        const std::string name = e.key.scalar();
        // A name no environment variable can have: setenv refuses "" and a name holding '=', and a NUL ends it.
        if (name.empty() || name.find('=') != std::string::npos || name.find('\0') != std::string::npos)
          throw UsageError(e.key.where() + ": ENV_VARS key " + Value(abbreviate(name)).py_repr() +
                               " is no environment variable's name (" +
                               (name.empty() ? std::string("empty")
                                             : name.find('=') != std::string::npos ? "it holds '='" : "it holds a NUL byte") +
                               ")",
                           {}, e.key.where(), "input.env-var-name");
        Value v = to_value(e.value);  // its checks (tags, ${VAR}), and a collection's text
        // Megatron's CI exports what yq prints after envsubst: a scalar's text as written (`true`, `0.00001`,
        // `:4096:8`), nothing for a null; the ranks get exactly this, and validation reads it.
        std::string text = v.is_none() ? std::string() : e.value.is_scalar() ? e.value.scalar() : v.py_str();
        if (e.value.is_scalar() && text.find('$') != std::string::npos) text = expand_env(text, opts, e.value.where());
        out.env_vars[e.key.scalar()] = text;
        out.env_where[e.key.scalar()] = e.key.where();
      }
    }
    apply_model_args(schema, model_args, opts, out, ns);
    return out;
  }
  apply_plain(schema, root, opts, out, ns);
  return out;
}
}  // namespace

void check_config_file(const std::string& path) { check_input_file(path, "config file", kConfigFlags); }

ConfigResult apply_config_file(const Schema& schema, const std::string& path, Namespace& ns,
                               const ConfigOptions& opts) {
  ConfigResult out = load_config_file(schema, path, ns, opts);
  yaml::cap_warnings(out.report.warnings, 0, path);  // a file repeating a key 100k times warns a few times
  return out;
}

}  // namespace mr
