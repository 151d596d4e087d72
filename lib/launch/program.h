// The training program megatron-run starts on every rank, in torchrun's forms:
//
//   megatron-run [OPTIONS] [MEGATRON FLAGS] -- CMD ARGS...          CMD as given (no interpreter; but an existing
//                                                                  x.py that is no command found runs as a script,
//                                                                  script_after_dashes, as torchrun's -- does)
//   megatron-run [OPTIONS] [MEGATRON FLAGS] script.py ARGS...       python -u script.py ARGS (torchrun's form)
//   megatron-run [OPTIONS] --no-python [MEGATRON FLAGS] CMD ARGS... CMD as given
//   megatron-run [OPTIONS] -m [OPTIONS] MODULE ARGS... (or --module) python -u -m MODULE ARGS (-m is a switch, as in
//                                                                  torchrun: options may follow it)
//
// and, when no program is named, megatron-run's own worker. As with torchrun, every word after the program's
// first word belongs to the program. The Megatron flags megatron-run validated (config files and flags merged,
// config/parse/command_line.h) are appended after the program's own arguments unless --no-append-args.
// Torch-free.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "config/schema.h"
#include "launch/launch_env.h"
#include "launch/option_spelling.h"

namespace mr::launch {

struct Program {
  enum class Form { Worker, Command, Script, Module };
  Form form = Form::Worker;
  std::vector<std::string> words;  // CMD ARGS / SCRIPT ARGS / MODULE ARGS, as given
  bool no_python = false;          // --no-python: a Script's first word runs as a command
  bool append_args = true;         // --no-append-args clears it
  bool check_files = true;         // --no-file-checks clears it (launch/program_inputs.h)
  // The Megatron flags appended after its own arguments when append_args: the config files' and the command
  // line's as given (megatron-run --format argv), never the validated values (the program derives those itself).
  std::vector<std::string> appended;
  bool named() const { return form != Form::Worker; }
  std::string describe() const;    // "python3 -u train.py", "-- ./run.sh", "megatron-run-worker"
};

// Where the program begins in megatron-run's words (after the command word), and its form: after the first
// "--" (Command); else at the first word that is neither an option nor the value of the option before it
// (Script); words.size() and Worker when none. -m/--module before it is a switch, as torchrun's store_true: the
// form is Module then (a "--" too: the word after it is the module; with none, Module at words.size(), which the
// caller refuses), and the -m words stay among megatron-run's (end_of_options is past them). `own_value_options` are
// megatron-run's own options that take a value (e.g. "--config", "--nproc-per-node"); Megatron's flags take
// values as their schema says, the way argparse hands them out (a flag with nargs '*' or '+' takes every
// following word that is not an option, so a script after one needs "--" or another option between them);
// `own_switches` are its options that take none. Past an option nobody knows no program is looked for (the
// parser's "unrecognized arguments" comes first, and the word after it may be its value), but the option words
// there are still written out by `spelling`, as argparse still reads them (an abbreviation of ours is ours), up
// to "--"; without refusing any (an ambiguous prefix or a switch's value is left to be listed).
struct ProgramSplit {
  size_t start = 0;  // first word of the program
  size_t end_of_options = 0;  // the words before this are megatron-run's (its options, Megatron's flags)
  Program::Form form = Program::Form::Worker;
  // The scan stopped at an option neither megatron-run nor Megatron knows (its "unrecognized arguments" error
  // must come first: where the program starts is unknown).
  bool stopped_at_unknown = false;
  // Each Megatron flag with nargs '+' or '*' before the program that took words: the flag's index in `words` and
  // the index of the last word it took (swallowed_program reads them).
  std::vector<std::pair<size_t, size_t>> multi_values;
  // The words, each option word before the program as `spelling` writes it out (launch/option_spelling.h: -r3,
  // a prefix of a long option); the same count, so argv positions hold. The words themselves without `spelling`.
  std::vector<std::string> words;
};
ProgramSplit split_program(const std::vector<std::string>& words, const Schema& schema,
                           const std::vector<std::string>& own_value_options,
                           const std::vector<std::string>& own_switches, const OptionSpelling* spelling = nullptr);

// When no program was named (Worker, the scan not stopped at an unknown option): the first word a flag with nargs
// '+'/'*' took that looks like a program (of the last such flag), as {flag's index, word's index} in `ps.words`; else nullopt. A word looks
// like a program when it is a regular file here that ends in ".py", or an executable file that starts with "#!" or
// is an ELF binary (never a directory, a data prefix whose .bin/.idx are the files, or a number such as a weight).
// argparse gives such a flag every following word that is not an option, so `--data-path data/a train.py` makes
// train.py a data path and megatron-run would start its own worker instead of the script.
std::optional<std::pair<size_t, size_t>> swallowed_program(const ProgramSplit& ps);

// Whether the word after "--" runs as a Python script, as torchrun's `-- train.py` does (its "--" only ends the
// options): it ends in ".py", is an existing file, and is no executable that resolve_command finds (on PATH, or a
// path naming an executable file), which runs as a command as before. Any other word after "--" is a command.
bool script_after_dashes(const std::string& word, const EnvLookup& env = process_env());

// The program's argv on every rank: the interpreter for scripts and modules (torchrun's: $PYTHON_EXEC, else
// python3, with -u), the program's words, then `megatron_words` when append_args.
std::vector<std::string> program_argv(const Program& p, const std::vector<std::string>& megatron_words,
                                      const EnvLookup& env = process_env());

// The path execve needs for a program's first word: unchanged when it holds a '/', else the first executable
// of that name on $PATH (as execvp would find it). Throws LaunchError naming the word when there is none, so a
// launch fails before any worker starts.
std::string resolve_command(const std::string& word, const EnvLookup& env = process_env());
// A Python script to run (Form::Script without --no-python) must be there before any worker starts: a file, or a
// directory with a __main__.py (Python runs either; "-" is standard input). Throws LaunchError naming it.
void check_script(const Program& p);

// Everything a launch checks about the program before any worker starts: the script (check_script), then the
// path of the first word of its argv (resolve_command), which it returns. An interpreter taken from PYTHON_EXEC
// is named as that variable's value in the LaunchError, so the user knows which setting to fix.
std::string check_program(const Program& p, const EnvLookup& env = process_env());

}  // namespace mr::launch
