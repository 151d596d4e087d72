#include "config/parse/command_line.h"

#include <cstring>
#include <optional>
#include <set>
#include <string_view>

#include "config/converters.h"
#include "config/parse/invocation.h"
#include "config/parse/yaml_cfg.h"
#include "util/text.h"

namespace mr {

namespace {

// argparse's _negative_number_matcher ('^-\d+$|^-\d*\.\d+$'): such a word is taken as a value.
bool negative_number(std::string_view s) {
  if (s.size() < 2 || s[0] != '-') return false;
  size_t i = 1, digits_before = 0;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i, ++digits_before;
  if (i == s.size()) return digits_before > 0;
  if (s[i] != '.') return false;
  ++i;
  size_t digits_after = 0;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i, ++digits_after;
  return i == s.size() && digits_after > 0;
}

// A word the parser would read as an option rather than a value.
bool looks_like_option(std::string_view w) { return w.size() > 1 && w[0] == '-' && !negative_number(w); }

// Layer patterns and lists of ints in the pattern language, without spaces: [1,0,1], [[1,2],[3]].
std::optional<std::string> pattern_text(const Value& v) {
  if (v.is_int() && !v.is_bool()) return std::to_string(v.as_int());
  if (!v.is_list()) return std::nullopt;
  std::string out = "[";
  for (size_t i = 0; i < v.as_list().size(); ++i) {
    auto e = pattern_text(v.as_list()[i]);
    if (!e) return std::nullopt;
    out += (i ? "," : "") + *e;
  }
  return out + "]";
}

std::optional<std::string> signal_word(const Value& v) {
  if (!v.is_int()) return std::nullopt;
  const char* abbrev = sigabbrev_np(static_cast<int>(v.as_int()));
  if (!abbrev) return std::nullopt;
  return "SIG" + std::string(abbrev);
}

std::string strip_prefix(const std::string& s, std::string_view prefix) {
  return s.rfind(prefix, 0) == 0 ? s.substr(prefix.size()) : s;
}

// One command-line word that converts (by the argument's type) back to `v`; nullopt when there is none.
std::optional<std::string> value_word(ArgType type, const Value& v) {
  std::optional<std::string> w;
  switch (type) {
    case ArgType::Int:
      if (v.is_int()) w = std::to_string(v.as_int());
      break;
    case ArgType::Float:
      if (v.is_float()) w = py_float_repr(v.as_float());
      else if (v.is_int()) w = std::to_string(v.as_int());
      break;
    case ArgType::PyBool:
      if (v.is_bool()) w = v.as_bool() ? "True" : "";  // bool(word): any non-empty word is True
      break;
    case ArgType::Json: w = v.json(); break;
    case ArgType::MoeFreq:
    case ArgType::LaFreq:
    case ArgType::NoRopeFreq:
    case ArgType::CompressRatios: w = pattern_text(v); break;
    case ArgType::IntTuple:
      if (v.is_list()) {
        std::string s;
        for (size_t i = 0; i < v.as_list().size(); ++i) {
          if (!v.as_list()[i].is_int()) return std::nullopt;
          s += (i ? "," : "") + std::to_string(v.as_list()[i].as_int());
        }
        w = s;
      }
      break;
    case ArgType::CudaGraphModule:
      if (v.is_str()) w = strip_prefix(v.as_str(), "CudaGraphModule.");
      break;
    case ArgType::TritonBlockSize:
      if (v.is_list() && v.as_list().size() == 2 && v.as_list()[0].is_str() && v.as_list()[1].is_int())
        w = v.as_list()[0].as_str() + "=" + std::to_string(v.as_list()[1].as_int());
      break;
    case ArgType::AttnBackendEnum:
      if (v.is_str()) w = strip_prefix(v.as_str(), "AttnBackend.");
      break;
    case ArgType::SignalEnum: w = signal_word(v); break;
    case ArgType::None:
    case ArgType::Str:
    case ArgType::Path:
      if (v.is_str()) w = v.as_str();
      break;
  }
  if (!w) return std::nullopt;
  // Only a word that the parser turns back into this very value will do.
  try {
    if (convert(type, *w) != v) return std::nullopt;
  } catch (const ConvError&) {
    return std::nullopt;
  }
  return w;
}

// The words of one value-taking action (flag first) that give `v`; nullopt when there are none.
std::optional<std::vector<std::string>> store_words(const Arg& a, const Value& v) {
  const std::string& flag = a.flags.front();
  const ArgType type = a.spec->type;
  if (a.spec->action == Action::Append) {
    if (!v.is_list()) return std::nullopt;
    std::vector<std::string> out;
    for (const Value& e : v.as_list()) {
      auto w = value_word(type, e);
      if (!w) return std::nullopt;
      if (looks_like_option(*w)) out.push_back(flag + "=" + *w);
      else out.insert(out.end(), {flag, *w});
    }
    return out;
  }
  if (a.nargs_kind == 0 || (a.nargs_kind == '?' && !(v == a.konst))) {
    auto w = value_word(type, v);
    if (!w) return std::nullopt;
    if (looks_like_option(*w)) return std::vector<std::string>{flag + "=" + *w};
    return std::vector<std::string>{flag, *w};
  }
  if (a.nargs_kind == '?') return std::vector<std::string>{flag};  // the flag alone gives its const
  // nargs '*', '+' or N: one word per element.
  if (!v.is_list()) return std::nullopt;
  const List& items = v.as_list();
  if (items.empty() && a.nargs_kind != '*') return std::nullopt;
  if (a.nargs_kind == 'N' && static_cast<int>(items.size()) != a.nargs_count) return std::nullopt;
  std::vector<std::string> out{flag};
  for (const Value& e : items) {
    auto w = value_word(type, e);
    if (!w || looks_like_option(*w)) return std::nullopt;
    out.push_back(*w);
  }
  return out;
}

// The words that set `dest` to `v`, trying each action writing it: a switch whose constant is `v`, else a
// value-taking action.
std::optional<std::vector<std::string>> dest_words(const std::vector<const Arg*>& actions, const Value& v) {
  for (const Arg* a : actions) {
    switch (a->spec->action) {
      case Action::StoreTrue:
      case Action::StoreFalse:
      case Action::StoreConst:
        if (v == a->konst && v.kind() == a->konst.kind()) return std::vector<std::string>{a->flags.front()};
        break;
      case Action::BoolOptional:
        if (v.is_bool()) {
          // flags[0] is the positive spelling; its negative is --no-<name> (argparse's BooleanOptionalAction).
          const std::string& pos = a->flags.front();
          return std::vector<std::string>{v.as_bool() ? pos : "--no-" + pos.substr(2)};
        }
        break;
      default: break;
    }
  }
  for (const Arg* a : actions)
    if (a->takes_value())
      if (auto w = store_words(*a, v)) return w;
  return std::nullopt;
}

}  // namespace

MegatronArgv megatron_argv(const Schema& schema, const Namespace& parsed) {
  MegatronArgv out;
  std::set<std::string, std::less<>> seen;  // dests written (a dest may have several actions)
  for (const Arg& a : schema.args()) {
    const std::string dest = a.dest();
    if (!parsed.has(dest)) continue;
    const Provenance::Kind k = parsed.provenance(dest).kind;
    if (k != Provenance::Kind::Config && k != Provenance::Kind::Cli) continue;
    if (!seen.insert(dest).second) continue;
    const Value& v = parsed[dest];
    if (auto w = dest_words(schema.find_dest(dest), v)) {
      out.words.insert(out.words.end(), w->begin(), w->end());
    } else if (!(v == a.def && v.kind() == a.def.kind())) {
      out.unrepresentable.push_back(a.flags.front() + " (" + abbreviate(v.py_repr()) + ")");
    }  // else: the default, which the program's parser gives anyway
  }
  return out;
}

namespace {

// The words of `a`; throws UsageError naming the arguments no command line can carry.
std::vector<std::string> carried_words(const MegatronArgv& a) {
  if (!a.unrepresentable.empty()) {
    std::string msg = "no Megatron command line can carry ";
    std::vector<std::string> flags;
    for (size_t i = 0; i < a.unrepresentable.size(); ++i) {
      msg += (i ? ", " : "") + a.unrepresentable[i];
      flags.push_back(a.unrepresentable[i].substr(0, a.unrepresentable[i].find(' ')));
    }
    throw UsageError(msg + " (set in a config file; give a value the flag accepts, or leave it out)", flags, {},
                     "input.unrepresentable-value");
  }
  return a.words;
}

std::vector<std::string> given_words(const Parsed& parsed) {
  std::vector<std::string> words;
  for (const Token& t : parsed.argv) words.push_back(t.text);
  return words;
}

}  // namespace

std::vector<std::string> resolved_argv(const Parsed& parsed) {
  if (parsed.yaml_cfg) return given_words(parsed);
  return carried_words(megatron_argv(Schema::megatron(), parsed.ns));
}

std::vector<std::string> appended_argv(const Parsed& parsed) {
  const ProgramWords& program = parsed.program.value();
  // parse_invocation of the given arguments alone would load their --yaml-cfg file: the words as given, then.
  if (yaml_cfg_requested(program.given)) return given_words(parsed);
  return carried_words(program.appended);
}

}  // namespace mr
