#include "launch/program.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>

#include "util/near_path.h"
#include "util/text.h"

namespace mr::launch {

namespace {

// argparse's rule for a word that is an option rather than a value ('-x', '--x'; not '-1' or '-.5').
bool option_like(const std::string& w) {
  if (w.size() < 2 || w[0] != '-') return false;
  bool number = true, dot = false;
  for (size_t i = 1; i < w.size(); ++i) {
    if (w[i] == '.' && !dot) dot = true;
    else if (w[i] < '0' || w[i] > '9') number = false;
  }
  return !number;
}

// How many words after option `w` it takes: 0, 1, N, -1 for "every following non-option word", or -2 for an
// option nobody knows (the parser will name it; no program is looked for past it).
int values_after(const std::string& w, const Schema& schema, const std::vector<std::string>& own_value_options,
                 const std::vector<std::string>& own_switches) {
  const std::string name = w.substr(0, w.find('='));
  const bool has_value = name.size() != w.size();  // --flag=value carries its value
  if (std::find(own_value_options.begin(), own_value_options.end(), name) != own_value_options.end())
    return has_value ? 0 : 1;
  if (std::find(own_switches.begin(), own_switches.end(), name) != own_switches.end()) return 0;
  const Arg* a = schema.find_flag(name);
  if (!a) return -2;
  if (!a->takes_value() || has_value) return 0;
  switch (a->nargs_kind) {
    case 0: return 1;
    case '?': return 1;  // at most one: the next word when it is not an option
    case 'N': return a->nargs_count;
    default: return -1;  // '*', '+'
  }
}

}  // namespace

ProgramSplit split_program(const std::vector<std::string>& words, const Schema& schema,
                           const std::vector<std::string>& own_value_options,
                           const std::vector<std::string>& own_switches, const OptionSpelling* spelling) {
  ProgramSplit out;
  out.words = words;
  auto at = [&out](size_t start, size_t end, Program::Form form) {
    out.start = start, out.end_of_options = end, out.form = form;
    return std::move(out);
  };
  size_t unknown_at = words.size();
  // -m/--module is a switch, as in torchrun (store_true): options may follow it, and the program's first word, where
  // it would be the script, is the module.
  bool module = false;
  for (size_t i = 0; i < words.size(); ++i) {
    if (spelling && option_like(words[i])) out.words[i] = spelling->spell(words[i], schema);
    const std::string& w = out.words[i];
    if (w == "--") return at(i + 1, i, module ? Program::Form::Module : Program::Form::Command);
    if (w == "-m" || w == "--module") {
      module = true;
      continue;
    }
    if (!option_like(w)) return at(i, i, module ? Program::Form::Module : Program::Form::Script);
    int n = values_after(w, schema, own_value_options, own_switches);
    if (n == -2) {  // an unknown option: its error comes first
      out.stopped_at_unknown = true;
      unknown_at = i;
      break;
    }
    if (n == -1) {
      const size_t flag = i;
      while (i + 1 < words.size() && !option_like(words[i + 1]) && words[i + 1] != "--") ++i;
      if (i > flag) out.multi_values.push_back({flag, i});
    } else {
      for (int k = 0; k < n && i + 1 < words.size() && !option_like(words[i + 1]) && words[i + 1] != "--"; ++k) ++i;
    }
  }
  if (out.stopped_at_unknown && spelling) {
    // argparse goes on past an option it does not know, reading abbreviations of its own options there (torchrun
    // lists only `--bogus` for `--bogus --nproc-per 2`): so are ours, up to "--". Which word starts the program is
    // not known, so nothing is refused here (an ambiguous prefix stays as written, to be listed).
    OptionSpelling lenient = *spelling;
    lenient.lenient = true;
    for (size_t i = unknown_at + 1; i < words.size() && words[i] != "--"; ++i)
      if (option_like(words[i])) out.words[i] = lenient.spell(words[i], schema);
  }
  out.start = out.end_of_options = words.size();
  if (module && !out.stopped_at_unknown) out.form = Program::Form::Module;  // with no module named (refused)
  return out;
}

namespace {

bool ends_with_py(const std::string& w) { return w.size() > 3 && w.compare(w.size() - 3, 3, ".py") == 0; }

// A regular file that ends in .py, or an executable one that starts with "#!" or is an ELF binary.
bool looks_like_program(const std::string& w) {
  struct stat st {};
  if (w.empty() || ::stat(w.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  if (ends_with_py(w)) return true;
  if (access(w.c_str(), X_OK) != 0) return false;
  char head[4] = {};
  std::ifstream in(w, std::ios::binary);
  in.read(head, 4);
  return (in.gcount() >= 2 && head[0] == '#' && head[1] == '!') ||
         (in.gcount() == 4 && head[0] == 0x7f && head[1] == 'E' && head[2] == 'L' && head[3] == 'F');
}

}  // namespace

std::optional<std::pair<size_t, size_t>> swallowed_program(const ProgramSplit& ps) {
  if (ps.form != Program::Form::Worker || ps.stopped_at_unknown) return std::nullopt;
  // Any of the flag's words, not only its last: `--data-path data/a train.py 7` took the script and its argument.
  for (auto it = ps.multi_values.rbegin(); it != ps.multi_values.rend(); ++it)
    for (size_t w = it->first + 1; w <= it->second && w < ps.words.size(); ++w)
      if (looks_like_program(ps.words[w])) return std::pair<size_t, size_t>{it->first, w};
  return std::nullopt;
}

std::string Program::describe() const {
  switch (form) {
    case Form::Worker: return "megatron-run-worker";
    case Form::Command: return words.empty() ? "--" : "-- " + words.front();
    case Form::Script: return (no_python ? "" : "python -u ") + (words.empty() ? std::string() : words.front());
    case Form::Module: return "python -u -m " + (words.empty() ? std::string() : words.front());
  }
  return "";
}

std::vector<std::string> program_argv(const Program& p, const std::vector<std::string>& megatron_words,
                                      const EnvLookup& env) {
  std::vector<std::string> argv;
  const bool python = (p.form == Program::Form::Script && !p.no_python) || p.form == Program::Form::Module;
  if (python) {
    auto exec = env("PYTHON_EXEC");
    argv.push_back(exec && !exec->empty() ? *exec : "python3");
    argv.push_back("-u");  // torchrun: unbuffered, so the launcher sees each line as it is printed
    if (p.form == Program::Form::Module) argv.push_back("-m");
  }
  argv.insert(argv.end(), p.words.begin(), p.words.end());
  if (p.append_args) argv.insert(argv.end(), megatron_words.begin(), megatron_words.end());
  return argv;
}

namespace {

// What execvp would run: a file (not a directory: those pass access(X_OK)) that may be executed.
bool executable_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && !S_ISDIR(st.st_mode) && access(path.c_str(), X_OK) == 0;
}

}  // namespace

bool script_after_dashes(const std::string& word, const EnvLookup& env) {
  struct stat st {};
  if (!ends_with_py(word) || ::stat(word.c_str(), &st) != 0 || S_ISDIR(st.st_mode)) return false;
  try {
    (void)resolve_command(word, env);
    return false;  // an executable found as a command (#! script on PATH, ./x.py with its x bit): run as before
  } catch (const LaunchError&) {
    return true;
  }
}

std::string resolve_command(const std::string& word, const EnvLookup& env) {
  if (word.empty()) throw LaunchError("the program's name is empty");
  if (word.find('/') != std::string::npos) {
    struct stat st {};
    if (::stat(word.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
      throw LaunchError("the program " + echo_word(word) + " is a directory, not an executable file");
    if (!executable_file(word)) {
      const std::string meant = ::stat(word.c_str(), &st) != 0 ? near_path(word) : std::string();
      throw LaunchError("the program " + echo_word(word) + " is not an executable file" +
                        (meant.empty() ? std::string() : " (did you mean " + echo_word(meant) + "?)"));
    }
    return word;
  }
  const std::string path = env("PATH").value_or("/usr/local/bin:/usr/bin:/bin");
  size_t start = 0;
  for (;;) {
    size_t colon = path.find(':', start);
    std::string dir = path.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
    std::string candidate = (dir.empty() ? "." : dir) + "/" + word;
    if (executable_file(candidate)) return candidate;
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  throw LaunchError("cannot find the program '" + echo_word(word) + "' on PATH" +
                    (word == "python3" ? " (set PYTHON_EXEC to the Python to use)" : ""));
}

void check_script(const Program& p) {
  if (p.form != Program::Form::Script || p.no_python || p.words.empty() || p.words.front() == "-") return;
  const std::string& script = p.words.front();
  struct stat st {};
  if (::stat(script.c_str(), &st) != 0) {
    const std::string meant = near_path(script);  // a typo's existing file (util/near_path.h)
    throw LaunchError("the script " + echo_word(script) + " does not exist" +
                      (script[0] != '/' ? " (relative to the working directory)" : "") +
                      "; Python would fail on every rank" +
                      (meant.empty() ? std::string() : " (did you mean " + echo_word(meant) + "?)"));
  }
  if (S_ISDIR(st.st_mode) && ::stat((script + "/__main__.py").c_str(), &st) != 0)
    throw LaunchError("the script " + echo_word(script) + " is a directory without a __main__.py; Python would fail on every rank");
}

std::string check_program(const Program& p, const EnvLookup& env) {
  if (p.form == Program::Form::Module && !p.words.empty() && p.words.front().empty())
    throw LaunchError("the module name (-m) is empty; Python would fail on every rank");
  check_script(p);
  const std::string first = program_argv(p, {}, env).front();
  try {
    return resolve_command(first, env);
  } catch (const LaunchError& e) {
    const bool python = (p.form == Program::Form::Script && !p.no_python) || p.form == Program::Form::Module;
    const std::optional<std::string> exec = env("PYTHON_EXEC");
    if (p.form == Program::Form::Command && !p.words.empty() && ends_with_py(p.words.front()))
      throw LaunchError(std::string(e.what()) + " (after --, a .py word runs under Python, as torchrun's -- SCRIPT "
                        "does, only when it is an existing file; this one is not, so it was looked for as a command)");
    if (!python || !exec || exec->empty()) throw;
    throw LaunchError(std::string(e.what()) + " (PYTHON_EXEC=" + echo_word(*exec) + ", the Python that runs the " +
                      (p.form == Program::Form::Module ? "module" : "script") + ")");
  }
}

}  // namespace mr::launch
