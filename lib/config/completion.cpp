// Shell completion scripts (completion.h).
#include "config/completion.h"

#include "config/converters.h"

#include <cctype>
#include <set>

#include "util/text.h"

namespace mr {

namespace {

// The first sentence of a help text, short and on one line.
std::string short_help(const std::string& help, size_t max = 70) {
  std::string s;
  for (char c : help) s += (c == '\n' || c == '\t') ? ' ' : c;
  const size_t dot = s.find(". ");
  if (dot != std::string::npos) s = s.substr(0, dot);
  if (!s.empty() && s.back() == '.') s.pop_back();
  if (s.size() > max) {
    size_t cut = max;
    while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;  // a UTF-8 boundary
    s = s.substr(0, cut) + "...";
  }
  return s;
}

std::string ident(const std::string& prog) {
  std::string fn = "_" + prog;
  for (char& c : fn)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return fn;
}

// A word that is safe unquoted in every shell (flags, choices): letters, digits and -_.,=+/@%
bool plain_word(const std::string& w) {
  if (w.empty()) return false;
  for (char c : w)
    if (!std::isalnum(static_cast<unsigned char>(c)) && std::string("-_.,=+/@%").find(c) == std::string::npos)
      return false;
  return true;
}

std::vector<std::string> plain_choices(const std::vector<std::string>& cs) {
  std::vector<std::string> out;
  for (const std::string& c : cs)
    if (plain_word(c)) out.push_back(c);
  return out;
}

// Words for a shell's word list: space-separated.
std::string spaced(const std::vector<std::string>& v) { return join(v, " "); }

// 'text' with single quotes closed, escaped and reopened: one POSIX/zsh word.
std::string sq(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::vector<const CompletionCommand*> all_commands(const CompletionSpec& spec) {
  std::vector<const CompletionCommand*> v{&spec.run};
  for (const auto& c : spec.commands) v.push_back(&c);
  return v;
}

}  // namespace

std::vector<CompletionOption> megatron_completion_options(const Schema& schema) {
  std::vector<CompletionOption> out;
  for (const Arg& a : schema.args())
    for (const std::string& f : a.flags) {
      CompletionOption o{f, a.takes_value(), short_help(a.spec->help), {}, a.spec->type == ArgType::Path};
      // The words the converter takes: a signal's name (its number is refused), a backend's member name.
      if (a.spec->type == ArgType::SignalEnum)
        o.choices = signal_names();
      else
        for (const Value& c : a.choices) o.choices.push_back(c.is_str() ? c.as_str() : c.py_str());
      if (a.spec->type == ArgType::AttnBackendEnum)
        for (std::string& c : o.choices)
          if (c.rfind("AttnBackend.", 0) == 0) c = c.substr(12);
      out.push_back(std::move(o));
    }
  return out;
}

// ---- bash ----------------------------------------------------------------------------------------------------

std::string bash_completion(const Schema& schema, const CompletionSpec& spec) {
  const std::vector<CompletionOption> megatron = megatron_completion_options(schema);
  std::vector<std::string> names;
  for (const auto& c : spec.commands) names.push_back(c.name);
  std::string fn = ident(spec.prog);
  std::string out = "# bash completion for " + spec.prog + " (generated: " + spec.prog +
                    " schema --format bash-completion)\n";
  std::string mflags;
  for (const auto& o : megatron) mflags += (mflags.empty() ? "" : " ") + o.flag;
  out += fn + "_megatron_flags=\"" + mflags + "\"\n";
  out += fn + "() {\n";
  out += "  local cur=\"${COMP_WORDS[COMP_CWORD]}\" prev=\"\" cmd=\"\"\n";
  out += "  (( COMP_CWORD > 0 )) && prev=\"${COMP_WORDS[COMP_CWORD-1]}\"\n";
  out += "  if (( COMP_CWORD > 1 )); then\n    case \"${COMP_WORDS[1]}\" in\n      " + join(names, "|") +
         ") cmd=\"${COMP_WORDS[1]}\" ;;\n    esac\n  fi\n";
  // Values: first the command's own options, then Megatron's flags.
  out += "  case \"$cmd:$prev\" in\n";
  for (const CompletionCommand* c : all_commands(spec))
    for (const auto& o : c->options) {
      if (!o.takes_value) continue;
      const std::string pat = (c == &spec.run ? std::string("") : c->name) + ":" + o.flag;
      if (!o.choices.empty())
        out += "    " + pat + ") COMPREPLY=( $(compgen -W \"" + spaced(plain_choices(o.choices)) +
               "\" -- \"$cur\") ); return ;;\n";
      else
        out += "    " + pat + ") COMPREPLY=( $(compgen -f -- \"$cur\") ); return ;;\n";
    }
  out += "  esac\n";
  out += "  case \"$prev\" in\n";
  for (const auto& o : megatron)
    if (o.takes_value && !plain_choices(o.choices).empty())
      out += "    " + o.flag + ") COMPREPLY=( $(compgen -W \"" + spaced(plain_choices(o.choices)) +
             "\" -- \"$cur\") ); return ;;\n";
  out += "  esac\n";
  out += "  local opts=\"\"\n  case \"$cmd\" in\n";
  for (const CompletionCommand* c : all_commands(spec)) {
    std::vector<std::string> flags;
    for (const auto& o : c->options) flags.push_back(o.flag);
    out += "    " + (c == &spec.run ? std::string("\"\"") : c->name) + ") opts=\"" + spaced(flags) + "\"";
    if (c->megatron_flags) out += "; opts=\"$opts $" + fn + "_megatron_flags\"";
    out += " ;;\n";
  }
  out += "  esac\n";
  out += "  if [[ \"$cur\" == -* ]]; then\n    COMPREPLY=( $(compgen -W \"$opts\" -- \"$cur\") )\n";
  out += "  elif (( COMP_CWORD == 1 )); then\n    COMPREPLY=( $(compgen -W \"" + spaced(names) +
         "\" -- \"$cur\") $(compgen -f -- \"$cur\") )\n";
  out += "  else\n    case \"$cmd\" in\n";
  for (const auto& c : spec.commands)
    if (!plain_choices(c.words).empty()) {
      const std::string words = "COMPREPLY=( $(compgen -W \"" + spaced(plain_choices(c.words)) + "\" -- \"$cur\") )";
      // One word (help COMMAND): offered as the word after the command, nothing after it.
      out += "      " + c.name + ") " + (c.one_word ? "if (( COMP_CWORD == 2 )); then " + words + "; fi" : words) + " ;;\n";
    }
  out += "      *) COMPREPLY=( $(compgen -f -- \"$cur\") ) ;;\n    esac\n  fi\n}\n";
  out += "complete -F " + fn + " " + spec.prog + "\n";
  return out;
}

// ---- zsh -----------------------------------------------------------------------------------------------------

namespace {

// Text inside an _arguments description [...] or a _describe entry: no brackets, colons or backslashes.
std::string zsh_text(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '[' || c == ']') out += c == '[' ? '(' : ')';
    else if (c == ':' || c == '\\') out += ' ';
    else out += c;
  }
  return out;
}

std::string zsh_spec(const CompletionOption& o) {
  // "*" lets the option repeat (argparse and megatron-run's options take the last value, or every --config).
  std::string s = "*" + o.flag + "[" + zsh_text(o.help) + "]";
  if (o.takes_value) {
    const auto cs = plain_choices(o.choices);
    if (!cs.empty()) s += ":value:(" + spaced(cs) + ")";
    else if (o.files) s += ":file:_files";
    else s += ":value: ";  // a number or a name: nothing to offer (not file names)
  }
  return sq(s);
}

}  // namespace

std::string zsh_completion(const Schema& schema, const CompletionSpec& spec) {
  const std::string fn = ident(spec.prog);
  std::string out = "#compdef " + spec.prog + "\n# zsh completion for " + spec.prog + " (generated: " + spec.prog +
                    " schema --format zsh-completion)\n";
  out += fn + "_megatron_flags=(\n";
  for (const auto& o : megatron_completion_options(schema)) out += "  " + zsh_spec(o) + "\n";
  out += ")\n";
  out += fn + "() {\n  local -a commands\n  commands=(\n";
  for (const auto& c : spec.commands) out += "    " + sq(c.name + ":" + zsh_text(c.help)) + "\n";
  out += "  )\n";
  out += "  if (( CURRENT == 2 )) && [[ $words[2] != -* ]]; then\n"
         "    _describe -t commands command commands\n    _files\n    return\n  fi\n";
  out += "  local cmd=$words[2]\n  case $cmd in\n";
  // zsh takes the first pattern that matches: the commands' branches first, the main command's `*` last.
  std::vector<const CompletionCommand*> order;
  for (const CompletionCommand* c : all_commands(spec))
    if (c != &spec.run) order.push_back(c);
  order.push_back(&spec.run);
  for (const CompletionCommand* c : order) {
    const bool run = c == &spec.run;
    out += "    " + (run ? std::string("*") : c->name) + ")\n";
    if (!run) out += "      shift words\n      (( CURRENT-- ))\n";
    out += "      _arguments -S";
    for (const auto& o : c->options) out += " \\\n        " + zsh_spec(o);
    if (c->megatron_flags) out += " \\\n        \"${" + fn + "_megatron_flags[@]}\"";
    if (!plain_choices(c->words).empty())
      // "*:" repeats the argument; without it, one word and nothing after it (help COMMAND).
      out += " \\\n        " + sq((c->one_word ? ":" : "*:") +
                                    (c->name == "help" ? std::string("command") : std::string("word")) + ":(" +
                                    spaced(plain_choices(c->words)) + ")");
    else if (c->files || run)
      out += " \\\n        '*:file:_files'";
    out += "\n      ;;\n";
  }
  out += "  esac\n}\n";
  out += "if [[ $zsh_eval_context[-1] == loadautofunc ]]; then\n  " + fn + " \"$@\"\nelse\n  compdef " + fn + " " +
         spec.prog + "\nfi\n";
  return out;
}

// ---- fish ----------------------------------------------------------------------------------------------------

namespace {

// A fish word in single quotes ('\'' and '\\' escaped inside).
std::string fq(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'' || c == '\\') out += '\\';
    out += c;
  }
  return out + "'";
}

std::string fish_line(const std::string& prog, const std::string& cond, const CompletionOption& o) {
  std::string s = "complete -c " + prog + " -n " + fq(cond) + " -l " + o.flag.substr(2);
  if (o.takes_value) {
    const auto cs = plain_choices(o.choices);
    if (!cs.empty()) s += " -x -a " + fq(spaced(cs));
    else s += " -r -F";
  }
  if (!o.help.empty()) s += " -d " + fq(o.help);
  return s + "\n";
}

}  // namespace

std::string fish_completion(const Schema& schema, const CompletionSpec& spec) {
  std::vector<std::string> names;
  for (const auto& c : spec.commands) names.push_back(c.name);
  const std::string p = spec.prog;
  // The command is the first word after the program (megatron-run reads it there only): a function that tells
  // whether it is the given one (or, without an argument, any command), so that `help rules ` is help's line, not
  // the rules command's (__fish_seen_subcommand_from would see "rules" anywhere).
  std::string fn = "__" + p + "_command_is";
  for (char& ch : fn)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  const std::string none = "not " + fn;
  std::string out = "# fish completion for " + p + " (generated: " + p + " schema --format fish-completion)\n";
  out += "function " + fn + "\n"
         "    set -l w (commandline -opc)\n"
         "    test (count $w) -ge 2; or return 1\n"
         "    if test (count $argv) -eq 0\n"
         "        contains -- $w[2] " + spaced(names) + "\n"
         "    else\n"
         "        test \"$w[2]\" = \"$argv[1]\"\n"
         "    end\n"
         "end\n";
  for (const auto& c : spec.commands)
    out += "complete -c " + p + " -n " + fq("__fish_use_subcommand") + " -f -a " + c.name + " -d " + fq(c.help) + "\n";
  std::vector<std::string> with_megatron;
  for (const CompletionCommand* c : all_commands(spec)) {
    const std::string cond = c == &spec.run ? none : fn + " " + c->name;
    for (const auto& o : c->options)
      if (o.flag.rfind("--", 0) == 0) out += fish_line(p, cond, o);
    if (c->megatron_flags && c != &spec.run) with_megatron.push_back(c->name);
    if (c != &spec.run && !plain_choices(c->words).empty()) {
      if (c->one_word) {  // one word (help COMMAND): offered right after the command, then nothing (no files)
        out += "complete -c " + p + " -n " + fq(cond) + " -f\n";
        out += "complete -c " + p + " -n " + fq(cond + "; and test (count (commandline -opc)) -eq 2") + " -f -a " +
               fq(spaced(plain_choices(c->words))) + "\n";
      } else {
        out += "complete -c " + p + " -n " + fq(cond) + " -f -a " + fq(spaced(plain_choices(c->words))) + "\n";
      }
    }
  }
  // Megatron's flags: for the default command and the commands that take them.
  std::string cond = none;
  for (const std::string& c : with_megatron) cond = fn + " " + c + "; or " + cond;
  for (const auto& o : megatron_completion_options(schema)) out += fish_line(p, cond, o);
  return out;
}

}  // namespace mr
