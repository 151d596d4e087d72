// megatron-run's own options (parsed with Boost.Program_options) and the commands that use them.
#pragma once

#include <boost/program_options.hpp>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "config/completion.h"
#include "config/parse/invocation.h"
#include "config/validate/resolve.h"
#include "launch/program.h"

namespace mr::app {

namespace po = boost::program_options;

// A float option of megatron-run's own read as Python's float() reads a word (torchrun's argparse `type=float`):
// blanks around, underscores between digits, inf/nan spellings, and an exponent past double's range as inf
// ('1e400'), where Boost's own conversion refuses the last three. `po::value<PyFloat>()`; a word float() refuses
// is argparse's "invalid float value: 'x'" (own_option_error). The option's own range rule comes after.
struct PyFloat {
  double value = 0;
};
void validate(boost::any& v, const std::vector<std::string>& words, PyFloat*, int);

// Options shared by the run/dry-run path and `check`: config files, target environment, output format.
struct CommonOptions {
  std::vector<std::string> configs;
  std::string format = "text";
  bool allow_unset_env = false;
  std::optional<std::string> env_placeholder;  // unset ${VAR} -> DIR/VAR (given empty: refused)
  std::string log_level = "warning";
  std::string target_env_file, gpu_arch;
  std::optional<std::string> te_version, torch_version, flashinfer_version;  // given (none: not installed; "" refused)
  std::optional<std::string> world_size;  // as given: invocation() reads it as Python's int() does

  // `formats`: the description of --format, its choices as "a|b|c" (shell completion offers them).
  void add_to(po::options_description& desc, const char* formats = "text|json");
  // Builds the invocation (target environment, config options) from these options.
  Invocation invocation(const std::vector<std::string>& extra_formats = {}) const;
  // Refuses a --format that is neither text, json nor one of `extra_formats` (a usage error naming the choices).
  static void format_choice(const std::string& format, const std::vector<std::string>& extra_formats);
  // The choices of a --format description ("text|json|svg") besides text and json, in their order: what
  // invocation() takes as `extra_formats` (so a command names its formats once).
  static std::vector<std::string> extra_formats(std::string_view formats);
};

// The options of `topology` (cmd_topology.cpp), `params` (cmd_params.cpp) and `schedule` (cmd_schedule.cpp).
struct TopologyOptions {
  CommonOptions common;
  long long gpus_per_node = 8;
  void add_to(po::options_description& desc);
};
struct ParamsOptions {
  CommonOptions common;
  std::string device_memory = "80GiB";
  void add_to(po::options_description& desc);
};
struct ScheduleOptions {
  CommonOptions common;
  std::optional<long long> points, every;
  std::optional<std::string> at;  // "N,N,..."
  void add_to(po::options_description& desc);
};

struct CheckOptions {
  // check's --format choices, the one list: the option's choices (so its refusal and shell completion), its usage
  // lines (cli.cpp) and the layouts cmd_check.cpp writes. github: GitHub Actions workflow commands; junit: a JUnit
  // XML report (config/check_report.h).
  static constexpr const char* kFormats = "text|json|github|junit";
  CommonOptions common;
  bool quiet = false;
  bool yaml_cfg = false;  // the files are Megatron --yaml-cfg files
  void add_to(po::options_description& desc);
};
struct SchemaOptions {
  std::string format = "json";
  void add_to(po::options_description& desc);
};
struct RulesOptions {
  std::string format = "text";
  void add_to(po::options_description& desc);
};

// The refusal (exit 2) of a value outside one of megatron-run's own closed sets, worded as argparse words it for
// Megatron's flags: "argument FLAG: invalid choice: 'x' (choose from 'a', 'b', 'c')". `choices` as the option's
// description names them for shell completion: "a|b|c". The refusal names the option by option_name(flag)
// ("--numa-binding/--numa_binding", "--format"); `flag` is the one the error carries.
UsageError invalid_choice(const std::string& flag, const std::string& value, std::string_view choices);

// What shell completion offers (completion.h): every command of the command table (commands.h) with its own
// options, read from the same option descriptions the commands parse with (completion_spec.cpp).
CompletionSpec completion_spec();
// megatron-run's completion script for `shell` (bash, zsh or fish; cmd_schema.cpp): `schema --format
// SHELL-completion` and torchrun's --print-completion SHELL.
void print_completion_script(std::ostream& os, const std::string& shell);

// A picture's heading: the config files' names ("a.yaml + b.yaml: WHAT"), or "megatron-run: WHAT".
std::string picture_title(const CommonOptions& common, const std::string& what);

// Boost.Program_options' refusal of one of megatron-run's own options, as a usage error worded the way argparse
// words Megatron's flags: "argument --nproc-per-node: expected one argument", "argument --world-size: invalid
// int value: 'abc'", "unrecognized arguments: --x". The one translation: split_args makes it where Boost parses,
// so no po::error leaves it. `words`: the words parsed (to quote a value Boost's error does not keep); `desc`:
// the options parsed, to name the type a value failed to convert to as argparse does (int, float), when given.
UsageError own_option_error(const po::error& e, const std::vector<std::string>& words = {},
                            const po::options_description* desc = nullptr);

// torchrun's short options, each with the long option megatron-run parses it as (Boost takes no short options):
// the one table the run command's program split, its option spelling and argparse-style refusals ("-r/--redirects")
// read.
inline const std::vector<std::pair<std::string, std::string>> kTorchrunShortOptions = {{"-r", "--redirects"},
                                                                                        {"-t", "--tee"}};
// The short switches of the run command (-h for every command), each with its long option: the one table the
// option spelling's switches, the one-dash hint and argparse-style refusals ("-h/--help") read.
inline const std::vector<std::pair<std::string, std::string>> kShortSwitches = {{"-h", "--help"}, {"-m", "--module"}};
// Every option string of the option `flag` (a long option of `desc`), as argparse declares its action: the short
// name first ({"-r", "--redirects"}), or both spellings of a dashed name ({"--no-python", "--no_python"}) when
// `desc` has both; {flag} for an option with one spelling, one `desc` lacks, or without `desc`. Refusals name the
// option by them joined with '/', and the option spelling groups a switch's spellings by them.
std::vector<std::string> option_strings(const std::string& flag, const po::options_description* desc);
// The options of the command `cmd` ("" for the run command) as it parses them (its row of the command table,
// commands()), built once: what option_name and the launcher's spawner-only options read the option strings from.
const po::options_description& command_options(std::string_view cmd = "");
// The option `flag` of the command `cmd` ("" for the run command) as argparse names it in a refusal: its
// option_strings in the command's own description (commands(): what it parses with) joined with '/'
// ("--max-restarts/--max_restarts" for either spelling, "-r/--redirects"); `flag` itself for an option with one
// spelling or one the command lacks. Every refusal of an option with several spellings composes its
// "argument NAME: ..." with it, where the refusal is made.
std::string option_name(const std::string& flag, std::string_view cmd = "");

// A word no option of a command takes: "unrecognized arguments: WORD", as argparse says it (exit 2).
UsageError unrecognized_word(const std::string& word);
// Several: "unrecognized arguments: A B C" (the first 100, then how many more), then `note`.
UsageError unrecognized_words(const std::vector<std::string>& words, const std::string& note = "");

// For a refusal "unrecognized arguments: ..." of the command `cmd` ("" for the run command): a line
// "\n  --formt: did you mean --format (megatron-run's own option)?" for each unknown option in `e.flags` that is near
// one of the command's own options (completion_spec(): the descriptions it parses with). "" otherwise.
std::string own_option_hint(const UsageError& e, const std::string& cmd);
// `e` with that hint added; `e` itself when there is none: every command's refusals get it. (Refusals name their
// option by all its option strings where they are made: option_name.)
UsageError with_own_option_hint(const UsageError& e, const std::string& cmd);

// Splits argv (after the command word) into our options and the Megatron words, keeping argv positions. Throws
// UsageError (own_option_error) for a refusal of our options; an option of ours that takes a value, followed by a
// word argparse reads as an option (config/parse/argparse.h), is refused as argparse refuses it: "argument --X:
// expected one argument" (but --explain, whose value is a flag's name). Without `allow_unregistered`, every word
// that is none of ours is listed in one "unrecognized arguments: ..." refusal.
struct SplitArgs {
  po::variables_map vm;
  std::vector<Token> rest;  // unrecognized words, in order, with their argv positions
};
SplitArgs split_args(const std::vector<std::string>& args, int first_index, const po::options_description& desc,
                     bool allow_unregistered);

// The prologue of a command that has options of its own (`Options::add_to`) and passes Megatron's words on
// (topology, params, schedule): parses argv after the command word into `opts`; returns the other words, with
// their argv positions. (--help is answered by main.cpp.)
template <class Options>
std::vector<Token> parse_command_options(const char* cmd, const std::vector<std::string>& args, Options& opts) {
  po::options_description desc(cmd);
  opts.add_to(desc);
  return split_args(args, 2, desc, /*allow_unregistered=*/true).rest;
}

int cmd_run(const std::vector<std::string>& args);     // default command: --dry-run, or the run (later issues)
int cmd_check(const std::vector<std::string>& args);   // lint many configs
int cmd_schema(const std::vector<std::string>& args);  // export the schema
int cmd_rules(const std::vector<std::string>& args);   // list validation rules
std::string rules_markdown();
int cmd_topology(const std::vector<std::string>& args);
int cmd_params(const std::vector<std::string>& args);    // parameters and their memory per rank
int cmd_schedule(const std::vector<std::string>& args);  // learning rate and weight decay over the run
// The general usage: each command's synopsis from the command table (commands.h), then the options.
void print_usage(std::ostream& os);
// For a word that is no file or program: " (did you mean check?)" when it is a near miss of one of megatron-run's
// commands, a note that megatron-run launches without a command word for `launch` and `run` (with the command
// list), else "" (main.cpp, which reads the command table, commands.h).
std::string command_word_hint(const std::string& word);

// A parse warning as a diagnostic: "[id] FILE:12: text" (the input.* warnings of config files) keeps its id and
// place; anything else is a deprecated-flag warning. The place is taken from the front of the text: "FILE:12: "
// when `file` is given (check), else any path without blanks followed by a line number.
Diagnostic parse_warning(const std::string& w, const std::string& file = "");
// A warning on stderr as errors are printed (`megatron-run: FILE:12: warning[id]: text`), unless --log-level hides
// warnings.
void print_warning_diagnostic(const Diagnostic& d);
// The warnings of a resolution (parse warnings and warning rules), so printed.
void log_warnings(const Outcome& out);
// Reports failed rules (or one failure of a later step): each error on stderr and, with --format json, one
// failure document on stdout. Returns 1, the exit code of a failed rule.
int report_failure(const CommonOptions& common, const std::vector<Diagnostic>& diagnostics);
int report_failure(const CommonOptions& common, const Diagnostic& diagnostic);
// `megatron-run CMD --help`: the usage of one command, its row's `usage` in the command table (commands.h), else the
// general one. Written by hand there: it lists each command's options and --format values, so it changes with them.
void print_command_usage(std::ostream& os, const std::string& cmd);
// Whose words a command line holds, for reading which --format it asks for as that command's parser reads it.
enum class CommandWords {
  Run,      // the run command's (after the program name): read_run_words (torchrun's prefixes, up to the program)
  Command,  // a command's, its command word first: exact option names, before any "--"
  Check,    // check's words alone (after its command word): read_check_words (unambiguous prefixes, before "--")
};
// A usage error (exit 2): on stderr as print_usage_error (config/print.h) prints every usage error (its rule id
// shown when it has one) and, when `args` asks for JSON on stdout (the --format that wins is json, in any spelling
// the command takes, for a command whose JSON is a result document), a failure document there too. Returns 2.
// `words`: whose words `args` are.
int report_usage_error(const std::vector<std::string>& args, const UsageError& e, CommandWords words);

// The run command's words as it reads them (launch/program.h, launch/option_spelling.h): where its program starts
// and, before it, each option word written out in full (torchrun's -r3, prefixes of megatron-run's options). The
// one reading of those words: the run command's parse, and report_usage_error's --format. `lenient`: nothing is
// refused (an ambiguous prefix, a switch's value stay as written). `switches`, when given: the run command's own
// options that take no value (to name the one a program's first word followed).
launch::ProgramSplit read_run_words(const std::vector<std::string>& args, bool lenient,
                                    std::vector<std::string>* switches = nullptr);

// check's words (after its command word) as check reads them (cmd_check.cpp): each unambiguous prefix of one of its
// own options before the first "--" written out in full (`--fo json` -> `--format json`, `--form=json` ->
// `--format=json`). `lenient`: an ambiguous prefix is left as written instead of refused (for reading a command
// line whose refusal is being reported). nullopt when no word changes (`args` may hold tens of thousands of files).
std::optional<std::vector<std::string>> read_check_words(const std::vector<std::string>& args, bool lenient);

// Starts the job for validated arguments (launch.cpp): joins a torchrun/SLURM job, or spawns workers for
// --nproc-per-node, then runs. `args` is the original command line (after the program name).
// `program` is the training program to start on every rank (launch/program.h); our own worker when not named.
// `valid_nnodes`: an elastic job's node counts the config is valid for (the rendezvous closes at one of them).
int launch(const Outcome& resolved, const std::vector<std::string>& args, const launch::Program& program,
           const std::vector<int>& valid_nnodes = {});

}  // namespace mr::app
