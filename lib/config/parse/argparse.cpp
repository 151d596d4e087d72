#include "config/parse/argparse.h"

#include <algorithm>
#include <cctype>
#include <utility>


#include "config/limits.h"
#include "config/converters.h"
#include "util/text.h"

namespace mr {

const Rule kDeprecatedFlagRule{
    "parse.deprecated-flag", Rule::Level::Warning,
    "A flag (or a config file's key) that Megatron's parser marks deprecated is given: a warning naming it and what "
    "replaces it; the value is used as Megatron uses it.",
    __FILE__, __LINE__, kStageParse};
const Rule kUnknownArgumentRule{
    "parse.unknown-argument", Rule::Level::Error,
    "An argument neither Megatron's parser nor the command's own options know: argparse's \"unrecognized "
    "arguments\" (a flag or a stray word on the command line or in a MODEL_ARGS file, a misspelt option of "
    "megatron-run's own), or a plain-layout config file's \"unknown argument\" key; the first few get a did-you-mean.",
    __FILE__, __LINE__, kStageParse};
const Rule kInvalidValueRule{
    "parse.invalid-value", Rule::Level::Error,
    "A value its flag's type or choices refuse (argparse's \"invalid int value\", \"invalid choice\"), a switch given "
    "a value (\"ignored explicit argument\"), or a config file's value of the wrong shape (a mapping, a null in a "
    "list, a switch key set to other than true or false).",
    __FILE__, __LINE__, kStageParse};
const Rule kMissingValueRule{
    "parse.missing-value", Rule::Level::Error,
    "A flag without the value or values it takes (argparse's \"expected one argument\", \"expected at least one "
    "argument\", \"expected N arguments\").",
    __FILE__, __LINE__, kStageParse};

const Rule kBoolTypeWordRule{
    "parse.bool-type-word", Rule::Level::Warning,
    "A word for a type=bool argument (--onnx-safe) that reads as false (False, false, 0, no, off, None): Megatron "
    "converts it with Python's bool(), so any non-empty word is True; only an empty word ('') gives False (a "
    "plain-layout config file takes the YAML boolean false, and the number 0, as False).",
    __FILE__, __LINE__, kStageParse};

namespace {

// A word or value in a message: Python's repr of at most its first 200 bytes (util::abbreviate).
std::string quoted(const std::string& w) { return Value(abbreviate(w)).py_repr(); }
std::string shown(const Value& v) { return v.is_str() ? quoted(v.as_str()) : abbreviate(v.py_repr()); }

std::string at(const Provenance& p) { return p.kind == Provenance::Kind::Config ? p.where : std::string(); }

std::string with_where(const std::string& msg, const Provenance& p) {
  return p.kind == Provenance::Kind::Config ? p.where + ": " + msg : msg;
}

bool looks_negative_number(std::string_view s) {
  // argparse's _negative_number_matcher: '^-\d+$|^-\d*\.\d+$'
  if (s.size() < 2 || s[0] != '-') return false;
  size_t i = 1;
  size_t digits_before = 0;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i, ++digits_before;
  if (i == s.size()) return digits_before > 0;
  if (s[i] != '.') return false;
  ++i;
  size_t digits_after = 0;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i, ++digits_after;
  return i == s.size() && digits_after > 0;
}

struct Classified {
  bool is_option = false;
  const Arg* arg = nullptr;  // null for an unknown option
  std::string option;        // the option string as matched
  bool has_explicit = false;
  std::string explicit_arg;
};

Classified classify(const Schema& schema, const std::string& s) {
  Classified c;
  if (s.empty() || s[0] != '-') return c;
  if (const Arg* a = schema.find_flag(s)) {
    c.is_option = true;
    c.arg = a;
    c.option = s;
    return c;
  }
  if (s.size() == 1) return c;
  if (auto eq = s.find('='); eq != std::string::npos) {
    std::string opt = s.substr(0, eq);
    if (const Arg* a = schema.find_flag(opt)) {
      c.is_option = true;
      c.arg = a;
      c.option = opt;
      c.has_explicit = true;
      c.explicit_arg = s.substr(eq + 1);
      return c;
    }
  }
  if (!argparse_reads_as_option(s)) return c;  // a negative number, a word with a blank: a value
  c.is_option = true;  // unknown option
  c.option = s;
  return c;
}

// argparse names an action in its errors by its option strings joined with '/'.
std::string action_name(const Arg& arg) { return join(arg.flags, "/"); }

UsageError not_allowed_with(const Arg& second, const Arg& first, const Provenance& origin) {
  return UsageError(with_where("argument " + action_name(second) + ": not allowed with argument " + action_name(first),
                               origin),
                    {second.flags.front(), first.flags.front()}, at(origin), "input.mutually-exclusive");
}

// The group members other than `dest` of the groups holding it.
std::vector<std::string_view> conflicts_of(std::string_view dest) {
  std::vector<std::string_view> out;
  for (const auto& group : mutually_exclusive_groups())
    if (std::find(group.begin(), group.end(), dest) != group.end())
      for (std::string_view d : group)
        if (d != dest) out.push_back(d);
  return out;
}

std::string choices_text(const Arg& arg) {
  std::string out;
  for (size_t i = 0; i < arg.choices.size(); ++i) out += (i ? ", " : "") + arg.choices[i].py_repr();
  return out;
}

// The class an enum argument's resolved value names ("Signals.", "AttnBackend.", "CudaGraphModule."): our JSON writes
// it and a plain-layout config file takes it back, but Megatron's parser looks a command-line word up as
// Enum[word], where the prefixed spelling is a KeyError (a traceback). "" for any other type.
std::string_view enum_class_prefix(ArgType t) {
  switch (t) {
    case ArgType::SignalEnum: return "Signals.";
    case ArgType::AttnBackendEnum: return "AttnBackend.";
    case ArgType::CudaGraphModule: return "CudaGraphModule.";
    default: return "";
  }
}

// A command-line word (the command line's, a program's, a MODEL_ARGS file's: words Megatron's argparse sees) that
// spells an enum value with its class: refused as Megatron fails on it.
void refuse_enum_class_prefix(const Arg& arg, const std::string& option, const std::string& word,
                              const Provenance& origin) {
  const std::string_view prefix = enum_class_prefix(arg.spec->type);
  if (prefix.empty() || word.size() <= prefix.size() || word.compare(0, prefix.size(), prefix) != 0) return;
  try {  // a name that is no member either is the converter's refusal (invalid signal: 'Signals.SIGTERMX')
    convert(arg.spec->type, word.substr(prefix.size()));
  } catch (const ConvError&) {
    return;
  }
  throw UsageError(with_where("argument " + option + ": invalid value: " + quoted(word) +
                                  ": Megatron's parser looks the name up as " +
                                  std::string(prefix.substr(0, prefix.size() - 1)) + "[" + quoted(word) +
                                  "] and fails; write " + quoted(word.substr(prefix.size())) +
                                  " (a plain-layout config file takes the prefixed spelling)",
                              origin),
                   {option}, at(origin), "input.enum-prefix-on-command-line");
}

Value convert_checked(const Arg& arg, const std::string& option, const std::string& word, const Provenance& origin) {
  Value v;
  try {
    v = convert(arg.spec->type, word);
  } catch (const ConvError& e) {
    throw UsageError(with_where("argument " + option + ": " + e.what(), origin), {option}, at(origin),
                     kInvalidValueRule.id);
  }
  if (!arg.choices.empty()) {
    bool ok = false;
    for (const Value& c : arg.choices) ok = ok || c == v;
    if (!ok) {
      throw UsageError(with_where("argument " + option + ": invalid choice: " + quoted(word) + " (choose from " +
                                      choices_text(arg) + ")",
                                  origin),
                       {option}, at(origin), kInvalidValueRule.id);
    }
  }
  return v;
}

std::string nargs_error(const Arg& arg) {
  switch (arg.nargs_kind) {
    case 0: return "expected one argument";
    case '?': return "expected at most one argument";
    case '+': return "expected at least one argument";
    case 'N':
      return "expected " + std::to_string(arg.nargs_count) + " argument" + (arg.nargs_count == 1 ? "" : "s");
    default: return "expected arguments";
  }
}

}  // namespace

std::string bool_type_word_warning(const Arg& arg, const std::string& option, const std::string& word,
                                   const Provenance& origin) {
  if (arg.spec->type != ArgType::PyBool) return {};
  std::string lower;
  for (char ch : word) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (lower != "false" && lower != "0" && lower != "no" && lower != "off" && lower != "none") return {};
  const std::string flag = option.rfind("--", 0) == 0 || arg.flags.empty() ? option : arg.flags.front();
  return "[" + std::string(kBoolTypeWordRule.id) + "] " +
         with_where(option + " " + quoted(word) +
                        " is True: Megatron converts the word with Python's bool(), and any non-empty word is True "
                        "(only an empty word, " + flag + " '', gives False; or leave the flag out for its default)",
                    origin);
}

Namespace default_namespace(const Schema& schema) {
  auto build = [&] {
    Namespace ns;
    auto defaults = schema.defaults();
    std::sort(defaults.begin(), defaults.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (auto& [dest, v] : defaults) ns.append_sorted(dest, std::move(v), Provenance{});
    return ns;
  };
  // The first namespace is built directly (a dry run needs one); later ones (`check` makes one per file) are
  // copies of a cached prototype. The prototype is never destroyed: nothing to tear down at exit.
  static const Schema* first_for = nullptr;
  static const Namespace* prototype = nullptr;
  if (first_for != &schema) {
    first_for = &schema;
    prototype = nullptr;
    return build();
  }
  if (!prototype) prototype = new Namespace(build());
  return *prototype;
}

std::vector<Token> argv_tokens(const std::vector<std::string>& args, int first_index) {
  std::vector<Token> out;
  out.reserve(args.size());
  for (size_t i = 0; i < args.size(); ++i)
    out.push_back(Token{args[i], Provenance{Provenance::Kind::Cli, "argv[" + std::to_string(first_index + static_cast<int>(i)) + "]"}});
  return out;
}

ParseReport parse_tokens(const Schema& schema, const std::vector<Token>& tokens, Namespace& ns,
                         std::vector<Token>* unrecognized) {
  ParseReport report;
  std::vector<Classified> cls(tokens.size());
  size_t dashdash = tokens.size();
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i].text == "--") {
      dashdash = i;
      break;
    }
    cls[i] = classify(schema, tokens[i].text);
  }

  std::vector<const Token*> extras;
  std::vector<std::string> unknown_flags;
  // Values that do not convert: every one is reported (a config file's mistakes at once, not one per run); the
  // first one's error is the one thrown, with the others listed after it.
  std::vector<UsageError> bad_values;  // bounded: the first kMaxListedArguments + 1, then only counted
  size_t bad_more = 0;
  auto converted = [&](const Arg& arg, const std::string& option, const std::string& word, const Provenance& origin) {
    if (std::string w = bool_type_word_warning(arg, option, word, origin); !w.empty()) report.warnings.push_back(std::move(w));
    try {
      refuse_enum_class_prefix(arg, option, word, origin);
      return convert_checked(arg, option, word, origin);
    } catch (const UsageError& e) {
      if (bad_values.size() <= limits::kMaxListedArguments) bad_values.push_back(e);
      else ++bad_more;
      return Value();
    }
  };
  // argparse's seen_non_default_actions for the mutually exclusive groups: a member given after another of its
  // group is an error there, in the order of the words (recorded with the bad values, which keep that order).
  std::vector<const Arg*> seen_exclusive;
  auto exclusive = [&](const Arg& arg, const Provenance& origin) {
    const std::vector<std::string_view> others = conflicts_of(arg.dest());
    if (others.empty()) return;
    for (const Arg* prior : seen_exclusive)
      if (std::find(others.begin(), others.end(), std::string_view(prior->dest())) != others.end()) {
        if (bad_values.size() <= limits::kMaxListedArguments) bad_values.push_back(not_allowed_with(arg, *prior, origin));
        else ++bad_more;
        return;
      }
    seen_exclusive.push_back(&arg);
  };
  size_t i = 0;
  while (i < dashdash) {
    const Classified& c = cls[i];
    if (!c.is_option) {
      extras.push_back(&tokens[i]);
      ++i;
      continue;
    }
    if (!c.arg) {
      extras.push_back(&tokens[i]);
      unknown_flags.push_back(c.option);
      ++i;
      continue;
    }
    const Arg& arg = *c.arg;
    const Token& opt_tok = tokens[i];
    ++i;
    if (*arg.spec->deprecated)
      report.warnings.push_back(c.option + " is deprecated: " + arg.spec->deprecated);

    if (arg.is_switch()) {
      if (c.has_explicit) {
        throw UsageError(with_where("argument " + c.option + ": ignored explicit argument " + quoted(c.explicit_arg),
                                    opt_tok.origin),
                         {c.option}, at(opt_tok.origin), kInvalidValueRule.id);
      }
      Value v;
      switch (arg.spec->action) {
        case Action::BoolOptional: v = Value(c.option.rfind("--no-", 0) != 0); break;
        default: v = arg.konst;
      }
      exclusive(arg, opt_tok.origin);
      ns.set(arg.dest(), v, opt_tok.origin);
      continue;
    }

    // Gather the words this option consumes.
    std::vector<std::string> words;
    if (c.has_explicit) {
      if (arg.nargs_kind == 'N' && arg.nargs_count != 1)
        throw UsageError(with_where("argument " + c.option + ": " + nargs_error(arg), opt_tok.origin), {c.option},
                         at(opt_tok.origin), kMissingValueRule.id);
      words.push_back(c.explicit_arg);
    } else {
      size_t avail = 0;
      while (i + avail < dashdash && !cls[i + avail].is_option) ++avail;
      size_t take = 0;
      switch (arg.nargs_kind) {
        case 0:
          if (avail < 1) throw UsageError(with_where("argument " + c.option + ": " + nargs_error(arg), opt_tok.origin), {c.option}, at(opt_tok.origin), kMissingValueRule.id);
          take = 1;
          break;
        case '?': take = avail ? 1 : 0; break;
        case '*': take = avail; break;
        case '+':
          if (avail < 1) throw UsageError(with_where("argument " + c.option + ": " + nargs_error(arg), opt_tok.origin), {c.option}, at(opt_tok.origin), kMissingValueRule.id);
          take = avail;
          break;
        case 'N':
          if (avail < static_cast<size_t>(arg.nargs_count))
            throw UsageError(with_where("argument " + c.option + ": " + nargs_error(arg), opt_tok.origin), {c.option}, at(opt_tok.origin), kMissingValueRule.id);
          take = static_cast<size_t>(arg.nargs_count);
          break;
      }
      for (size_t k = 0; k < take; ++k) words.push_back(tokens[i + k].text);
      i += take;
    }

    Value v;
    if (arg.nargs_kind == 0 || (arg.nargs_kind == '?' && !words.empty())) {
      v = converted(arg, c.option, words[0], opt_tok.origin);
    } else if (arg.nargs_kind == '?') {
      v = arg.konst;
    } else {
      List items;
      for (const auto& w : words) items.push_back(converted(arg, c.option, w, opt_tok.origin));
      v = Value(std::move(items));
    }
    if (arg.spec->action == Action::Append) {
      Value cur = ns.has(arg.dest()) ? ns.get(arg.dest()) : Value();
      List l = cur.is_list() ? cur.as_list() : List{};
      l.push_back(v);
      v = Value(std::move(l));
    }
    exclusive(arg, opt_tok.origin);
    ns.set(arg.dest(), std::move(v), opt_tok.origin);
  }
  for (size_t k = dashdash; k < tokens.size(); ++k) extras.push_back(&tokens[k]);
  if (!bad_values.empty()) {
    const UsageError& first = bad_values.front();
    std::string msg = first.what();
    std::vector<std::string> flags = first.flags;
    for (size_t k = 1; k < bad_values.size(); ++k) {
      msg += "\n  also " + std::string(bad_values[k].what());
      flags.insert(flags.end(), bad_values[k].flags.begin(), bad_values[k].flags.end());
    }
    if (bad_more > 0) msg += "\n  ... (" + std::to_string(bad_more) + " more)";
    throw UsageError(msg, flags, first.where, first.id);
  }

  if (unrecognized) {  // parse_known_args: the caller gets them
    for (const Token* t : extras) unrecognized->push_back(*t);
    return report;
  }
  if (!extras.empty()) {
    // Bounded (config/limits.h): 100k unknown words make a message of a few lines, in linear time.
    std::string msg = "unrecognized arguments:";
    for (size_t k = 0; k < extras.size() && k < limits::kMaxListedArguments; ++k) msg += " " + echo_word(extras[k]->text);
    if (extras.size() > limits::kMaxListedArguments)
      msg += " ... (" + std::to_string(extras.size() - limits::kMaxListedArguments) + " more)";
    size_t suggested = 0;
    for (const std::string& f : unknown_flags) {
      if (suggested++ == limits::kMaxSuggestedFlags) break;
      auto s = schema.suggest(f);
      if (!s.empty()) {
        msg += "\n  " + echo_word(f) + ": did you mean ";
        for (size_t k = 0; k < s.size(); ++k) msg += (k ? ", " : "") + s[k];
        msg += "?";
      }
    }
    throw UsageError(with_where(msg, extras.front()->origin), unknown_flags, at(extras.front()->origin),
                     kUnknownArgumentRule.id);
  }
  return report;
}

namespace {
// Where a word stands in the argv Megatron gets: the config files' words first, in the order the files are given,
// each file's by line ("path:line"), then the command line's.
std::pair<size_t, size_t> argv_position(const Provenance& p, const std::vector<std::string>& config_files) {
  if (p.kind != Provenance::Kind::Config) return {config_files.size() + 1, 0};
  const size_t colon = p.where.rfind(':');
  size_t line = 0;
  if (colon != std::string::npos) {
    for (size_t k = colon + 1; k < p.where.size() && std::isdigit(static_cast<unsigned char>(p.where[k])); ++k)
      line = line * 10 + static_cast<size_t>(p.where[k] - '0');
    const std::string_view path = std::string_view(p.where).substr(0, colon);
    for (size_t i = 0; i < config_files.size(); ++i)
      if (config_files[i] == path) return {i, line};
  }
  return {config_files.size(), line};
}
}  // namespace

void check_mutually_exclusive(const Schema& schema, const Namespace& ns, const std::vector<std::string>& config_files) {
  for (const auto& group : mutually_exclusive_groups()) {
    std::vector<std::string_view> given;
    for (std::string_view d : group)
      // argparse's "not default": a file's `kitchen_config_file: null` (the parsed-arguments JSON fed back) gives none.
      if (ns.has(d) && ns.provenance(d).by_user() && !(ns.get(d) == schema.find_dest(d).front()->def))
        given.push_back(d);
    if (given.size() < 2) continue;
    // argparse names the later word: order them as the argv Megatron gets holds them.
    std::stable_sort(given.begin(), given.end(), [&](std::string_view a, std::string_view b) {
      return argv_position(ns.provenance(a), config_files) < argv_position(ns.provenance(b), config_files);
    });
    const Arg* first = schema.find_dest(given[0]).front();
    const Arg* second = schema.find_dest(given[1]).front();
    throw not_allowed_with(*second, *first, ns.provenance(given[1]));
  }
}

void assign_value(const Arg& arg, const std::string& key, const Value& v, const Provenance& origin, Namespace& ns) {
  auto bad = [&](const std::string& why) {
    throw UsageError(with_where("argument " + key + ": " + why, origin), {key}, at(origin), kInvalidValueRule.id);
  };
  // A word as the command line would have seen it; YAML scalars arrive as strings, ints, floats or bools.
  auto word_of = [&](const Value& x) -> std::string {
    if (x.is_str()) return x.as_str();
    if (x.is_bool()) return x.as_bool() ? "True" : "False";
    if (x.is_int()) return std::to_string(x.as_int());
    if (x.is_float()) return py_float_repr(x.as_float());
    if (x.is_none()) bad("null is not allowed inside a list");
    // A mapping (or a list inside a list) is no command-line word: usually an indentation slip that would swallow
    // the keys below it.
    bad(std::string("expects ") + (arg.nargs_kind == 0 || arg.nargs_kind == '?' ? "a single value" : "values") +
        ", got " + (x.is_object() ? "a mapping " : "a nested list ") + abbreviate(x.json(), 120) +
        (x.is_object() ? " (are the keys under it indented by mistake?)" : ""));
    return {};
  };
  auto one = [&](const Value& x) -> Value {
    const ArgType t = arg.spec->type;
    // Typed scalars that need no conversion (round trips of our own JSON output).
    if (x.is_int() && (t == ArgType::Int || t == ArgType::MoeFreq || t == ArgType::LaFreq ||
                       t == ArgType::NoRopeFreq || t == ArgType::SignalEnum)) {
      Value c = x;
      if (!arg.choices.empty()) {
        bool ok = false;
        for (const Value& ch : arg.choices) ok = ok || ch == c;
        if (!ok) bad("invalid choice: " + shown(x) + " (choose from " + choices_text(arg) + ")");
      }
      return c;
    }
    if (x.is_number() && t == ArgType::Float) return Value(x.as_float());
    if (x.is_list() && (t == ArgType::MoeFreq || t == ArgType::LaFreq || t == ArgType::NoRopeFreq ||
                        t == ArgType::CompressRatios || t == ArgType::IntTuple || t == ArgType::TritonBlockSize)) {
      for (const Value& e : x.as_list())
        if (!e.is_int() && !(t == ArgType::TritonBlockSize && e.is_str())) bad("expected a list of ints");
      return Value(x.as_list(), t == ArgType::IntTuple || t == ArgType::TritonBlockSize);
    }
    if (t == ArgType::Json && !x.is_str()) return x;
    // A YAML boolean for a type=bool argument (--onnx-safe) is the value it says: a file's `false` is False (on a
    // command line only an empty word gives False; `--format argv` prints that). A YAML number is too, as Python's
    // bool() of it: `0` and `0.0` are False like `false`, any other number True.
    if (t == ArgType::PyBool && x.is_bool()) return x;
    if (t == ArgType::PyBool && x.is_int()) return Value(x.as_int() != 0);
    if (t == ArgType::PyBool && x.is_float()) return Value(x.as_float() != 0.0);
    return convert_checked(arg, key, word_of(x), origin);
  };

  // A value equal to the default keeps the default's exact form (an int default of a float argument, a scalar
  // default of a list argument), so that our own JSON output fed back as a config reproduces itself.
  if ((v.kind() == arg.def.kind() || (v.is_number() && arg.def.is_number())) && v == arg.def) {
    ns.set(arg.dest(), arg.def, origin);
    return;
  }
  if (arg.is_switch()) {
    // null is allowed: several switches default to None.
    if (!v.is_bool() && !v.is_none()) bad("expects true or false, got " + shown(v));
    ns.set(arg.dest(), v, origin);
    return;
  }
  if (v.is_none()) {
    ns.set(arg.dest(), Value(), origin);
    return;
  }
  if (arg.nargs_kind == 0 || arg.nargs_kind == '?') {
    if (v.is_list() && !(arg.spec->type == ArgType::MoeFreq || arg.spec->type == ArgType::LaFreq ||
                         arg.spec->type == ArgType::NoRopeFreq || arg.spec->type == ArgType::CompressRatios ||
                         arg.spec->type == ArgType::IntTuple))
      bad("expects a single value, got a list");
    ns.set(arg.dest(), one(v), origin);
    return;
  }
  List items;
  if (v.is_list()) {
    for (const Value& e : v.as_list()) items.push_back(one(e));
  } else {
    items.push_back(one(v));
  }
  // An empty list is accepted for nargs '+': it is what several defaults are, so our own JSON round-trips.
  if (arg.nargs_kind == 'N' && items.size() != static_cast<size_t>(arg.nargs_count))
    bad("expected " + std::to_string(arg.nargs_count) + " values, got " + std::to_string(items.size()));
  ns.set(arg.dest(), Value(std::move(items)), origin);
}

bool argparse_reads_as_option(std::string_view word) {
  return word.size() > 1 && word[0] == '-' && !looks_negative_number(word) && word.find(' ') == std::string_view::npos;
}

}  // namespace mr
