// The default command: resolve the arguments and, with --dry-run, print them.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "cli.h"
#include "launch.h"
#include "switch_value_hint.h"
#include "config/limits.h"
#include "config/validate/yaml_arguments.h"
#include "launch/launch_env.h"
#include "launch/program.h"
#include "config/parse/command_line.h"
#include "config/print.h"
#include "config/validate/resolve.h"
#include "config/parse/yaml_cfg.h"
#include "run/checkpoint_args.h"
#include "util/log.h"
#include "util/shell.h"
#include "util/std_fds.h"
#include "util/text.h"

namespace mr::app {

// The checkout's commit when megatron-run was built: a source cmake/GitCommit.cmake generates at every build.
const char* git_commit();

void RunOptions::add_to(po::options_description& desc) {
  auto set_no_python = [this](bool on) { no_python = no_python || on; };  // two spellings, one switch
  common.add_to(desc, "text|json|argv|argv0");
  launch.add_to(desc);
  desc.add_options()("dry-run", po::bool_switch(&dry_run), "resolve and print, do not run")
      ("parse-only", po::bool_switch(&parse_only), "stop after parsing (no validation)")
      ("provenance", po::bool_switch(&provenance), "JSON output: each value with its source")
      ("explain", po::value(&explain)->composing(), "show provenance")
      ("no-python", po::bool_switch()->notifier(set_no_python), "run the program's first word as a command, not a Python script")
      ("no_python", po::bool_switch()->notifier(set_no_python), "torchrun's spelling of --no-python")
      ("module", po::bool_switch(&module), "-m: run the program's first word as a Python module (python -u -m MODULE)")
      ("no-append-args", po::bool_switch(&no_append_args), "do not append the Megatron flags to the program's")
      ("no-file-checks", po::bool_switch(&no_file_checks),
       "do not check the program's input files and output directories before it starts")
      ("help", po::bool_switch(&help), "help (also -h)")
      ("version", po::bool_switch(&version), "version");
}

launch::ProgramSplit read_run_words(const std::vector<std::string>& args, bool lenient,
                                    std::vector<std::string>* switches) {
  po::options_description desc("megatron-run");
  RunOptions probe;
  probe.add_to(desc);
  std::vector<std::string> value_options, own_switches = {"-h"};
  for (const auto& od : desc.options())
    (od->semantic()->max_tokens() > 0 ? value_options : own_switches).push_back("--" + od->long_name());
  for (const auto& [short_name, long_name] : kTorchrunShortOptions) value_options.push_back(short_name);
  // torchrun's argparse reading of the words before the program (launch/option_spelling.h): -r3, and prefixes
  // of megatron-run's options (its own and torchrun's, every spelling); never of Megatron's flags. A switch is
  // named in a refusal by every option string of it, as argparse names it (-m/--module, --no-python/--no_python).
  launch::OptionSpelling spelling;
  spelling.lenient = lenient;
  for (const auto& od : desc.options()) spelling.long_options.push_back("--" + od->long_name());
  spelling.short_options = kTorchrunShortOptions;
  for (const auto& [short_name, long_name] : kShortSwitches) spelling.switches.push_back({short_name, long_name});
  for (const std::string& s : own_switches) {
    if (s == "-h") continue;  // (with --help in kShortSwitches)
    std::vector<std::string> names = option_strings(s, &desc);  // {"--no-python", "--no_python"} for either
    if (std::find(spelling.switches.begin(), spelling.switches.end(), names) == spelling.switches.end())
      spelling.switches.push_back(std::move(names));
  }
  if (switches) *switches = own_switches;
  return launch::split_program(args, Schema::megatron(), value_options, own_switches, &spelling);
}

namespace {

// The run command's own warnings and refusals (docs/launch.md; `megatron-run rules launch` lists them). The
// warnings about the program's words carry the parser's stage, as their diagnostics do; the others the launcher's.
const Rule kOwnOptionAfterProgramRule{
    "launch.own-option-after-program", Rule::Level::Warning,
    "One of megatron-run's options given after the program: it is the program's own argument (torchrun's rule), "
    "passed to it and not read by megatron-run; --dry-run there is no dry run, the program starts.",
    __FILE__, __LINE__, kStageParse};
const Rule kFlagsAfterProgramRule{
    "launch.flags-after-program", Rule::Level::Warning,
    "A Megatron flag given after the program and before it (or in a config file): the appended value wins in the "
    "program's argparse, or, when the value before it is the default that nothing appends, the program's own stands; "
    "the warning says which was validated.",
    __FILE__, __LINE__, kStageParse};
const Rule kNotAppendedRule{
    "launch.not-appended", Rule::Level::Warning,
    "--no-append-args with Megatron flags given before the program (or in a config file): the program never gets "
    "them; its own arguments are the ones validated.",
    __FILE__, __LINE__, kStageParse};
const Rule kAppendedAfterDashesRule{
    "launch.appended-after-dashes", Rule::Level::Warning,
    "The program's arguments hold '--': the flags megatron-run appends come after it, where an argparse program "
    "reads them as positional arguments.",
    __FILE__, __LINE__, kStageParse};
const Rule kProgramOwnArgumentRule{
    "launch.program-own-argument", Rule::Level::Warning,
    "A word after the program that is no Megatron flag but near one (--num-layer): passed to the program as its own "
    "argument and not validated; the flag meant is named.",
    __FILE__, __LINE__, kStageParse};
const Rule kProgramSwallowedRule{
    "launch.program-swallowed", Rule::Level::Error,
    "An option that takes every word up to the next option (nargs '+' or '*') took the program's name as one of "
    "its values, so no program is named: refused (exit 2), a warning in a dry run.",
    __FILE__, __LINE__, kStageLaunch};
const Rule kDryRunImpliedRule{
    "launch.dry-run-implied", Rule::Level::Warning,
    "An option that only a dry run uses (--explain, --format other than text, ...) with a launch asked for: it "
    "implies --dry-run, and nothing is started.",
    __FILE__, __LINE__, kStageLaunch};
const Rule kJsonValidatesOnlyRule{
    "launch.json-validates-only", Rule::Level::Warning,
    "--format json without --dry-run and with a launch asked for: validated as the launch would be and printed as "
    "JSON; nothing is started.",
    __FILE__, __LINE__, kStageLaunch};
const Rule kProgramMissingRule{
    "launch.program-missing", Rule::Level::Error,
    "The program to launch is not there (a script that does not exist or is not a file, a command not on PATH): "
    "refused before anything else is checked (exit 2; a launch, and --format json without --dry-run); a warning in a "
    "dry run, which starts nothing.",
    __FILE__, __LINE__, kStageLaunch};
const Rule kNoFileChecksUnusedRule{
    "launch.no-file-checks-unused", Rule::Level::Warning,
    "--no-file-checks in a dry run, which checks none of the program's files: not used.",
    __FILE__, __LINE__, kStageLaunch};
const Rule kBringUpOnlyUnusedRule{
    "launch.bring-up-only-unused", Rule::Level::Warning,
    "--bring-up-only in a dry run or with --format json, which start no worker: not used.",
    __FILE__, __LINE__, kStageLaunch};
const Rule kUseCheckpointArgsRule{
    "checkpoint.use-checkpoint-args", Rule::Level::Warning,
    "--use-checkpoint-args replaced arguments with the checkpoint's (each named, old -> new, with the metadata "
    "file), or megatron-run cannot read the checkpoint of the user's program and validated the values given (its "
    "diagnostics carry the init stage, where validation reads the checkpoint).",
    __FILE__, __LINE__, kStageLaunch};

// "\n  -tp: did you mean --tensor-model-parallel-size? ..." for each word before the program that is one of
// torchrun's short options with something attached (-tp, -mp) whose refusal is `flags`' (the option, by either
// name), when that word with two dashes is a Megatron flag or near one; else "".
std::string one_dash_hint(const std::vector<std::string>& args, const std::vector<std::string>& flags) {
  std::vector<std::pair<std::string, std::string>> shorts = kTorchrunShortOptions;
  shorts.insert(shorts.end(), kShortSwitches.begin(), kShortSwitches.end());
  const launch::ProgramSplit ps = read_run_words(args, /*lenient=*/true);
  std::string hint;
  size_t hinted = 0;
  for (size_t i = 0; i < ps.end_of_options && hinted < limits::kMaxSuggestedFlags; ++i) {
    const std::string& w = args[i];
    if (w.size() < 3 || w[0] != '-' || w[1] == '-' || w[2] == '=' || w == "--") continue;
    const auto refused = std::find_if(shorts.begin(), shorts.end(), [&](const auto& s) {
      return w.compare(0, 2, s.first) == 0 && std::any_of(flags.begin(), flags.end(), [&](const std::string& f) {
               return f == s.first || f == s.second;
             });
    });
    if (refused == shorts.end()) continue;
    const std::string name = "-" + w.substr(0, w.find('='));
    const Schema& schema = Schema::megatron();
    const std::vector<std::string> near = schema.find_flag(name) ? std::vector<std::string>{name} : schema.suggest(name, 1);
    ++hinted;
    if (!near.empty())
      hint += "\n  " + echo_word(w) + ": did you mean " + near.front() + "? Megatron's flags take two dashes (" +
              refused->first + " is torchrun's " + refused->second + ")";
  }
  return hint;
}

// "\n  train.py: the program? ..." when an option nobody knows (`flags`' first, as refused) comes before a word that
// looks like the program (a .py word, else the word after "--"): that option ended the search for the program, as
// the program's own options do when they are put before it; else "".
std::string program_after_unknown_hint(const std::vector<std::string>& args, const std::vector<std::string>& flags) {
  if (flags.empty()) return "";
  const std::string unknown = flags.front();
  auto at = std::find_if(args.begin(), args.end(), [&](const std::string& w) {
    return w == unknown || w.rfind(unknown + "=", 0) == 0;
  });
  if (at == args.end()) return "";
  std::string program;
  for (auto it = at + 1; it != args.end() && program.empty(); ++it) {
    if (*it == "--") {
      if (it + 1 != args.end()) program = *(it + 1);
      break;
    }
    if (it->size() > 3 && it->compare(it->size() - 3, 3, ".py") == 0 && (*it)[0] != '-') program = *it;
  }
  if (program.empty()) return "";
  return "\n  " + echo_word(program) + ": the program? " + echo_word(unknown) + " before it is an option neither "
         "megatron-run nor Megatron knows, which ends the search for the program: a program's own options go "
         "after it (" + echo_word(program) + " " + echo_word(unknown) + " ...)";
}

// The first option given that only shapes what a dry run prints (--format argv|argv0, --parse-only, --explain),
// as the user would write it; "" when none is. (--format json, and --provenance which needs it, validate as the
// launch would: see run_command.)
std::string dry_run_only_option(const RunOptions& opts) {
  if (opts.common.format == "argv" || opts.common.format == "argv0") return "--format " + opts.common.format;
  if (opts.parse_only) return "--parse-only";
  if (!opts.explain.empty()) return "--explain";
  return {};
}

// The words among the program's arguments (after its first word, up to a "--" of its own) that are megatron-run's
// own options by exact name, any spelling (`--config`, `--dry-run=`, `--nproc_per_node`), each once as written
// before any '='; but --help and --version (a program has its own) and a Megatron flag (launch.flags-after-program's).
std::vector<std::string> own_options_after_program(const launch::Program& program,
                                                   const po::options_description& desc) {
  std::vector<std::string> names;
  for (size_t i = 1; i < program.words.size() && program.words[i] != "--"; ++i) {
    const std::string& w = program.words[i];
    if (w.size() < 3 || w.rfind("--", 0) != 0) continue;
    const std::string name = w.substr(0, w.find('='));
    if (name == "--help" || name == "--version" || Schema::megatron().find_flag(name)) continue;
    if (!desc.find_nothrow(name.substr(2), /*approx=*/false, false, false)) continue;
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  }
  return names;
}

// launch.own-option-after-program: megatron-run's options after the program are the program's (torchrun's rule),
// passed to it and not read here; said, with --dry-run's own warning when this is a launch (the program starts).
void warn_own_options_after_program(const launch::Program& program, const std::vector<std::string>& names,
                                    bool launching) {
  const std::string prog = echo_word(program.words.front());
  std::vector<std::string> rest;
  for (const std::string& n : names) {
    if (n == "--dry-run" && launching) {
      print_warning_diagnostic({Diagnostic::Level::Warning, kOwnOptionAfterProgramRule.id,
                                "--dry-run after the program " + prog + " is the program's own argument, passed to "
                                "it: this is no dry run, the program starts on every rank; megatron-run's options "
                                "go before the program (megatron-run --dry-run ... " + prog + " ...)",
                                {n}, {}, kStageParse});
      continue;
    }
    rest.push_back(n);
  }
  if (rest.empty()) return;
  std::string listed;
  for (size_t k = 0; k < rest.size() && k < 4; ++k) listed += (k ? ", " : "") + rest[k];
  if (rest.size() > 4) listed += " and " + std::to_string(rest.size() - 4) + " more";
  const bool one = rest.size() == 1;
  print_warning_diagnostic({Diagnostic::Level::Warning, kOwnOptionAfterProgramRule.id,
                            listed + (one ? " is" : " are") + " megatron-run's option" + (one ? "" : "s") +
                                ", given after the program " + prog + ": passed to it as its own argument" +
                                (one ? "" : "s") + " and not read by megatron-run (every word after the program is "
                                "the program's, as with torchrun); megatron-run's options go before the program",
                            rest, {}, kStageParse});
}

// What the program's argparse will make of its own Megatron flags next to what megatron-run appends
// (config/parse/invocation.h), said where it may surprise: a flag given after the program and appended too (the
// appended value wins: launch.flags-after-program); a config file's or a flag's value equal to the default, which
// nothing appended carries, so the program's own value stands (launch.flags-after-program too); with
// --no-append-args, given arguments the program never gets (launch.not-appended). A word of the program's own that
// is near a Megatron flag (--num-layer) is named with the flag meant (launch.program-own-argument), but one of
// megatron-run's own options (`own_after`: launch.own-option-after-program says those). A bad word is
// not said here (validation reports it). Read from the parse of `inv` (`parsed`, its ProgramWords), said before
// validation. Nothing when `quiet` (a rank that re-validates what was said).
void warn_program_words(const Invocation& inv, const Parsed& parsed, const launch::Program& program, bool quiet,
                        const std::vector<std::string>& own_after) {
  if (quiet || inv.program_cli.empty() || !parsed.program) return;
  const Schema& schema = Schema::megatron();
  const ProgramWords& words = *parsed.program;
  std::vector<std::string> appended_wins, program_wins, not_passed, near;
  const bool program_flags = parsed.program_own.size() < inv.program_cli.size();
  bool past_dashes = false;
  size_t checked = 0;  // unknown flags looked up for a near Megatron flag
  for (const Token& t : parsed.program_own) {
    past_dashes = past_dashes || t.text == "--";  // argparse's positionals from there on
    if (past_dashes || t.text.rfind("--", 0) != 0 || t.text.size() < 3) continue;
    const std::string flag = t.text.substr(0, t.text.find('='));
    if (schema.find_flag(flag)) continue;
    if (std::find(own_after.begin(), own_after.end(), flag) != own_after.end()) continue;  // said as ours
    if (++checked > limits::kMaxListedArguments) continue;  // each is a pass over every flag: bounded, as listed
    if (std::vector<std::string> s = schema.suggest(flag, 1); !s.empty())
      near.push_back(abbreviate(flag) + " (did you mean " + s.front() + "?)");
  }
  const bool after_dashes =
      program.append_args && !words.appended.words.empty() &&
      std::any_of(inv.program_cli.begin(), inv.program_cli.end(), [](const Token& t) { return t.text == "--"; });
  auto listed_once = [](std::vector<std::string>& names, const std::string& flag) {
    if (std::find(names.begin(), names.end(), flag) == names.end()) names.push_back(flag);
  };
  for (const Arg& a : schema.args()) {
    const bool by_program = words.own.provenance(a.dest()).kind == Provenance::Kind::Cli;
    const bool by_given = words.given.provenance(a.dest()).by_user();
    const bool appended = words.carried.count(a.dest()) > 0;
    if (!program.append_args) {
      if (by_given && program_flags) listed_once(not_passed, a.flags.front());
    } else if (by_program && appended) {
      listed_once(appended_wins, a.flags.front());
    } else if (by_program && by_given) {
      listed_once(program_wins, a.flags.front());
    }
  }
  auto listed = [](const std::vector<std::string>& names) {
    std::string text;
    for (size_t k = 0; k < names.size() && k < 4; ++k) text += (k ? ", " : "") + names[k];
    if (names.size() > 4) text += " and " + std::to_string(names.size() - 4) + " more";
    return text;
  };
  const std::string prog = echo_word(program.words.front());
  // One warning for a list of flags (none when empty): "FLAGS is/are TEXT" or "FLAGS: TEXT".
  auto say = [&](const char* id, const std::vector<std::string>& names, const std::string& text,
                 const std::vector<std::string>& flags) {
    if (!names.empty())
      print_warning_diagnostic({Diagnostic::Level::Warning, id, listed(names) + text, flags, {}, kStageParse});
  };
  const std::string is_are = appended_wins.size() == 1 ? " is" : " are";
  say(kFlagsAfterProgramRule.id, appended_wins,
      is_are + " given after the program " + prog + " and before it (or in a config file): megatron-run appends "
      "the value before it after the program's own arguments, where it wins in argparse, and validated that one",
      appended_wins);
  say(kFlagsAfterProgramRule.id, program_wins,
      std::string(program_wins.size() == 1 ? " is" : " are") + " given after the program " + prog + " and set to "
      "the default before it (or in a config file), which no appended flag can say: the program's own value "
      "stands, and is the one validated",
      program_wins);
  say(kNotAppendedRule.id, not_passed,
      ": given before the program " + prog + " (or in a config file), but --no-append-args passes only the "
      "program's own arguments, which are the ones validated",
      not_passed);
  if (after_dashes)
    print_warning_diagnostic({Diagnostic::Level::Warning, kAppendedAfterDashesRule.id,
                              "the program " + prog + "'s arguments hold '--': the flags megatron-run appends come "
                              "after it, where an argparse program reads them as positional arguments, not flags; "
                              "give them after the program before its '--' yourself, with --no-append-args",
                              {"--"}, {}, kStageParse});
  say(kProgramOwnArgumentRule.id, near,
      ": no Megatron flag, after the program " + prog + ": passed to it as its own argument, not validated", {});
}

// "; did you mean --lr-warmup-iters?" (the flags nearest `word`), or the dests of those flags for a dest.
std::string did_you_mean(const std::string& word, bool as_dests) {
  std::string flag = word;
  std::replace(flag.begin(), flag.end(), '_', '-');
  std::vector<std::string> near;
  for (const std::string& f : Schema::megatron().suggest(flag)) {
    const std::string n = as_dests ? Schema::megatron().find_flag(f)->dest() : f;
    if (std::find(near.begin(), near.end(), n) == near.end()) near.push_back(n);
  }
  std::string out;
  for (size_t k = 0; k < near.size(); ++k) out += (k ? ", " : "; did you mean ") + near[k];
  return near.empty() ? out : out + "?";
}

// The model's shape (load_args_from_checkpoint's list: layers, sizes, heads, sequence lengths) is what a
// checkpoint gives; any other refusal stands whatever the checkpoint holds (a TP size the world size does not
// divide, a missing --micro-batch-size).
bool from_checkpoint(const Diagnostic& d) {
  return d.level != Diagnostic::Level::Error || d.rule.rfind("model-shape.", 0) == 0 ||
         d.rule.rfind("seq-length.", 0) == 0;
}

// One run of the default command: the state its steps share (the words read, the invocation, the validated
// outcome), each step a method; run() is the sequence. A step that may end the command returns its exit code.
struct RunCommand {
  RunCommand(const std::vector<std::string>& a, RunOptions& o, bool& t) : args(a), opts(o), tells_nodes(t) {
    opts.add_to(desc);
  }

  int run();

  // Which words are megatron-run's and which the program's (torchrun's split), and the program's form.
  void read_words();
  // Whether a completion script was asked for (printed, exit 0); nothing after it is read.
  std::optional<int> print_completion();
  // Whether --help or --version was asked for (printed, exit 0).
  std::optional<int> print_help_or_version();
  // Whether a nargs '+'/'*' flag took the program's name: refused in a launch, a warning in a dry run.
  void check_swallowed_program();
  // How the program runs: --no-python, -m, --no-append-args, --no-file-checks (and their PET_ defaults), and
  // whether they go together and have a program to apply to.
  void read_program_switches();
  // The invocation and the launch options (the world size validated), refusing --provenance without JSON.
  void read_launch_options();
  // Whether this is a dry run (implied by a dry-run-only option) or a JSON check, each said when a launch was asked.
  void decide_dry_run();
  // Which of megatron-run's options came after the program (the program's own): said once.
  void warn_own_options_after();
  // Whether the program is there: refused before anything else in a launch, a warning in a dry run.
  void check_program_there();
  // Whether --no-file-checks and --bring-up-only apply here: named as unused, or refused with a user's program.
  void check_unused_switches();
  // The Megatron flags, and the GPU a launch validates for (this machine's, when no target is given).
  void choose_target();
  // Whether --format argv/argv0 was asked for: the Megatron command line printed (exit 0).
  std::optional<int> print_argv();
  // The program's own words in the invocation, whether this is a launch and a quiet rank, the launch's world size.
  void prepare_launch();
  // Whether --use-checkpoint-args' checkpoint replaces the values given before validation, or is only said.
  void read_checkpoint_args();
  // Megatron's parse_args() over an invocation; the first parse also says what may surprise in the program's words.
  Parsed parse(const Invocation& v);
  // Validation through the init stage for one world size: the failures (empty: valid), and a schedule warning.
  std::vector<Diagnostic> validate(const Invocation& v, Outcome& o, std::vector<Diagnostic>& warnings);
  // The config's verdict: parse only, every node count of an elastic job, or the one world size.
  void validate_config();
  // Which node counts of an elastic job the config is valid for, and the outcome shown and launched with.
  void validate_elastic();
  // The validation warnings and the ENV_VARS notices, unless a quiet rank re-validates.
  void say_config_warnings();
  // A refusal: the diagnostics reported, and a launch of several nodes tells the other nodes.
  int refused(const std::vector<Diagnostic>& ds);
  // Who replaces the model's shape with the checkpoint's (the program, or the launch), as a notice says it.
  std::string replacer(const char* what) const;
  // Whether the failures are only the shape of a checkpoint megatron-run cannot read: said as warnings, not refused.
  void excuse_unreadable_checkpoint();
  // The save settings' and the schedule's warnings, and the config's ENV_VARS every rank gets.
  void say_late_warnings();
  // Whether --explain was asked for: each value with its source printed (exit 0), or an unknown one refused.
  std::optional<int> explain_values();
  // Inside another launcher's job, a dry run and a JSON check refuse the options that act only on the workers
  // megatron-run starts (and a JSON check a malformed job), as the launch would.
  void check_enclosing_job();
  // Whether a JSON check refuses the program's input files, as the launch would.
  std::optional<int> check_program_inputs();
  // Whether to say that the values given, not an unreadable checkpoint's, were validated.
  void warn_checkpoint_not_read();
  // The launch: refused when stdout is closed, else the workers started with the flags appended.
  int start_launch();
  // The dry run's output: the resolved arguments, as JSON or Megatron's table.
  int print_resolved();

  const std::vector<std::string>& args;
  RunOptions& opts;
  bool& tells_nodes;
  po::options_description desc{"megatron-run"};
  CommonOptions& common = opts.common;
  LaunchOptions& launch_opts = opts.launch;  // --nproc-per-node, --nnodes, ... (launch.cpp)
  bool &dry_run = opts.dry_run, &help = opts.help, &version = opts.version, &parse_only = opts.parse_only,
       &provenance = opts.provenance, &no_python = opts.no_python, &no_append_args = opts.no_append_args,
       &no_file_checks = opts.no_file_checks;
  std::vector<std::string>& explain = opts.explain;
  // The training program, torchrun's way (launch/program.h): its words are its own, never ours or Megatron's.
  launch::Program program;
  std::vector<std::string> own_args = args;
  bool unknown_option = false;  // the Megatron parse reports it, before any complaint about the program
  size_t program_start = 0;     // the program's first word in `args` (0: none)
  std::vector<std::string> spelled = args;  // `args`, our options before the program written out in full
  std::vector<std::string> switches;  // megatron-run's own options that take no value
  std::optional<std::pair<size_t, size_t>> swallowed;  // a script a flag with nargs '+'/'*' took as its value
  SplitArgs split;
  Invocation inv;
  bool json_check = false;
  std::vector<std::string> own_after;  // megatron-run's options after the program
  bool quiet = false;
  bool launching = false;
  Outcome out;
  bool trains = false;
  std::string unreadable_checkpoint;
  bool checkpoint_none_yet = false;  // a dry run's: no checkpoint there now (not one it cannot read)
  bool programs_checkpoint = false;
  bool vets = false;
  bool program_words_said = false;
  std::vector<Diagnostic> failed;
  std::vector<Diagnostic> late_warnings;  // the save settings' and the schedule's warnings
  bool said_unreadable = false;
};

int RunCommand::run() {
  read_words();
  if (std::optional<int> code = print_completion()) return *code;
  split = split_args(own_args, 1, desc, /*allow_unregistered=*/true);
  if (std::optional<int> code = print_help_or_version()) return *code;
  check_swallowed_program();
  read_program_switches();
  read_launch_options();
  decide_dry_run();
  warn_own_options_after();
  check_program_there();
  check_unused_switches();
  choose_target();
  if (std::optional<int> code = print_argv()) return *code;
  prepare_launch();
  read_checkpoint_args();
  validate_config();
  say_config_warnings();
  if (parse_only && !out.ok()) return refused(out.diagnostics);
  excuse_unreadable_checkpoint();
  if (!failed.empty()) return refused(failed);
  say_late_warnings();
  check_enclosing_job();
  if (std::optional<int> code = explain_values()) return *code;
  if (std::optional<int> code = check_program_inputs()) return *code;
  warn_checkpoint_not_read();
  if (!dry_run && !json_check) return start_launch();
  return print_resolved();
}

void RunCommand::read_words() {
  {
    launch::ProgramSplit ps = read_run_words(args, /*lenient=*/false, &switches);
    swallowed = launch::swallowed_program(ps);
    unknown_option = ps.stopped_at_unknown;
    own_args = spelled = ps.words;
    if (ps.form != launch::Program::Form::Worker) {
      program.form = ps.form;
      program_start = ps.start;
      program.words.assign(args.begin() + static_cast<long>(ps.start), args.end());
      own_args.resize(ps.end_of_options);
      if (program.words.empty())
        throw UsageError(ps.form == launch::Program::Form::Module ? "argument -m/--module: expected a module name"
                                                                  : "'--' is not followed by a program to run",
                         {ps.form == launch::Program::Form::Module ? "--module" : "--"});
      // torchrun's "--" only ends the options: `-- train.py` still runs the script under Python. A word after it
      // that ends in .py and is an existing file (no executable found as a command) is a script here too.
      if (program.form == launch::Program::Form::Command && launch::script_after_dashes(program.words.front()))
        program.form = launch::Program::Form::Script;
    }
  }
  for (std::string& w : own_args) {  // torchrun's short options, ours only before the program
    if (w == "-h") w = "--help";
    if (w == "-r") w = "--redirects";
    if (w == "-t") w = "--tee";
    if (w == "-m") w = "--module";  // a switch (split_program has read it: the program is the module)
  }
}

std::optional<int> RunCommand::print_completion() {
  if (std::optional<std::string> shell = print_completion_requested(own_args)) {  // nothing after it is read
    print_completion_script(std::cout, *shell);
    return 0;
  }
  return std::nullopt;
}

std::optional<int> RunCommand::print_help_or_version() {
  if (help) {
    print_usage(std::cout);
    std::cout << "\n";
    print_help(std::cout, Schema::megatron(), "megatron-run");
    return 0;
  }
  if (version) {
    // The first line stays `megatron-run X.Y.Z` (scripts read it); then the build, for an operator's fleet.
    const std::string nccl = MR_WORKER_NCCL;
    const std::string nccl_words = nccl == "built"     ? "NCCL (--distributed-backend nccl)"
                                   : nccl == "no-nccl" ? "no NCCL (CUDA found, NCCL not)"
                                                       : "no NCCL";
    std::cout << "megatron-run " << MR_VERSION << "\n"
              << "commit: " << git_commit() << "\n"
              << "build: " << MR_BUILD_TYPE << ", " << MR_COMPILER << "\n";
    if (nccl == "no-worker")
      std::cout << "worker: not built (no LibTorch found at configure time): a launch runs a user's program only\n";
    else
      std::cout << "worker: megatron-run-worker with " << MR_WORKER_TORCH << ", " << MR_WORKER_CUDA << ", " << nccl_words
                << " (as configured; MR_WORKER may name another)\n";
    return 0;
  }
  return std::nullopt;
}

// `--data-path data/a train.py`: the flag took the script as its last value (argparse's nargs '+'), and no program
// is left, so megatron-run would start its own worker: refused (a dry run says it), naming the flag and the way
// to write it.
void RunCommand::check_swallowed_program() {
  if (swallowed) {
    const std::string& flag = spelled[swallowed->first];
    const std::string word = echo_word(spelled[swallowed->second]);
    std::string before, after;
    for (size_t k = swallowed->first + 1; k < swallowed->second; ++k) before += " " + spelled[k];
    // The words the flag took after it (up to the next option): the program's own arguments, likely.
    for (size_t k = swallowed->second + 1; k < spelled.size() && spelled[k].rfind("-", 0) != 0; ++k)
      after += " " + spelled[k];
    const std::string msg =
        "argument " + flag + ": takes every word up to the next option, so '" + word + "' was read as one of its " +
        "values and no program is named (megatron-run would start its own worker, not " + word + "); to run it, " +
        "put another option or -- between them (" + echo_word(flag + before, 120) + " -- " + word +
        echo_word(after, 120) + "), or give the program first (" + word + echo_word(after, 120) + " " +
        echo_word(flag + before, 120) + " ...: its own arguments, validated too)";
    if (dry_run || !dry_run_only_option(opts).empty())
      print_warning(std::cerr, with_rule_id(kProgramSwallowedRule.id, msg) + " (a dry run starts nothing; a launch would "
                               "refuse it)");
    else
      throw UsageError(msg, {flag}, "", kProgramSwallowedRule.id);
  }
}

void RunCommand::read_program_switches() {
  // torchrun's switches take their default from PET_<NAME> (an integer, non-zero: on), as its check_env reads them.
  const launch::EnvLookup env = launch::process_env();
  const bool pet_used = pet_defaults_of_enclosing_launcher(env);
  auto pet_switch = [&](const char* name, const char* flag) {
    return !pet_used && pet_int(env, name, flag).value_or(0) != 0;
  };
  if (!no_python && pet_switch("NO_PYTHON", "--no-python")) no_python = true;
  if (pet_switch("MODULE", "--module") && program.form == launch::Program::Form::Script)
    program.form = launch::Program::Form::Module;
  if (pet_switch("RUN_PATH", "--run-path"))
    print_warning(std::cerr, "PET_RUN_PATH is set (the default of --run-path): not used (megatron-run runs the "
                             "script as `python SCRIPT ARGS` in each worker)");
  program.no_python = no_python;
  program.append_args = !no_append_args;
  program.check_files = !no_file_checks;
  if (no_python && program.form == launch::Program::Form::Module)
    throw UsageError("--no-python and -m/--module cannot be used together (a module needs Python)",
                     {"--no-python", "--module"});
  if ((no_python || no_append_args || no_file_checks) && !program.named() && !unknown_option) {
    const char* flag = no_python ? "--no-python" : no_append_args ? "--no-append-args" : "--no-file-checks";
    throw UsageError(std::string(flag) + " needs a program to run (megatron-run ... -- CMD ARGS, or SCRIPT ARGS)",
                     {flag});
  }
}

void RunCommand::read_launch_options() {
  inv = common.invocation(/*extra_formats=*/{"argv", "argv0"});
  if (provenance && common.format != "json")
    throw UsageError("argument --provenance: adds each value's source to the JSON output; give --format json too "
                     "(or --explain FLAG for one value's source in text)",
                     {"--provenance"});
  launch_opts.apply_pet_defaults(split.vm);
  launch_opts.in_job_refusals = common.format != "argv" && common.format != "argv0";  // printed regardless
  launch_opts.apply(inv);  // validate for the world size the job will have
  for (const std::string& n : launch_opts.notices) print_warning(std::cerr, n);
}

void RunCommand::decide_dry_run() {
  // The options that only shape what a dry run prints imply --dry-run, all alike: nothing starts, and a launch
  // option or a program given with them is named in a notice as not started (never silently dropped).
  const bool asks_launch = launch_opts.nproc_given || launch_opts.multi_node() || program.named();
  const std::string not_run = program.named() ? echo_word(program.words.front()) + " is not run; " : std::string();
  if (const std::string implied = dry_run_only_option(opts); !implied.empty() && !dry_run) {
    dry_run = true;
    const bool argv_of_program = program.named() && (common.format == "argv" || common.format == "argv0");
    if (asks_launch && !argv_of_program)
      print_warning(std::cerr, with_rule_id(kDryRunImpliedRule.id, implied) + " implies --dry-run: nothing is started (" +
                                   not_run + "the launch options are validated only); leave it out to launch");
  }
  // --format json without --dry-run: validated exactly as this launch would be (its machine's GPUs, the rules of
  // its own worker's run), refusals as one JSON document; on success the resolved arguments as one JSON document,
  // and nothing starts (the workers' output would break stdout's one document). A launch asked for is named.
  json_check = !dry_run && common.format == "json";
  if (json_check && asks_launch)
    print_warning(std::cerr, with_rule_id(kJsonValidatesOnlyRule.id, "--format json without --dry-run: validated as "
                                          "this launch would be and printed as JSON; nothing is started (") +
                                 not_run +
                             "leave --format json out to launch)");
}

void RunCommand::warn_own_options_after() {
  // megatron-run's options after the program are the program's (torchrun's rule): passed on, and said (once).
  own_after = program.named() ? own_options_after_program(program, desc) : std::vector<std::string>{};
  {
    const char* rank = std::getenv("RANK");
    if (!own_after.empty() && !std::getenv("MR_SPAWNER") && !(rank && std::string(rank) != "0"))
      warn_own_options_after_program(program, own_after, !dry_run && !json_check && !parse_only && explain.empty());
  }
}

void RunCommand::check_program_there() {
  // The program of a launch is there before anything else is checked: a missing script is not reported as a
  // config error, and a word that looks like one of megatron-run's commands gets the commands named.
  if (!dry_run && program.named()) {  // --format json without --dry-run too: it validates as the launch would
    try {
      (void)launch::check_program(program);
    } catch (const launch::LaunchError& e) {
      const std::string& w = program.words.front();
      const bool bare = program.form == launch::Program::Form::Script && !program.no_python &&
                        w.find_first_of("/.") == std::string::npos;
      std::string hint = bare ? command_word_hint(w) : "";
      if (!hint.empty()) hint = "; megatron-run has no command '" + echo_word(w) + "'" + hint;
      // `--mock-data false`: the word after a switch is the program, not the switch's value.
      if (program.form == launch::Program::Form::Script)
        if (std::string v = switch_value_hint(spelled, program_start, switches); !v.empty())
          throw UsageError(e.what() + v, {spelled[program_start - 1]}, "", kProgramMissingRule.id);
      if (program.form == launch::Program::Form::Script)
        if (std::string v = split_value_hint(spelled, program_start); !v.empty())
          throw UsageError(e.what() + v, {}, "", kProgramMissingRule.id);
      throw UsageError(e.what() + hint, {}, "", kProgramMissingRule.id);
    }
  }
  // A dry run starts nothing, but a program it would not find is said (a launch refuses it): often a value split
  // by the shell, whose rest the dry run would otherwise take for the program's arguments.
  if (dry_run && program.named() && common.format != "argv" && common.format != "argv0") {
    try {
      (void)launch::check_program(program);
    } catch (const launch::LaunchError& e) {
      std::string hint;
      if (program.form == launch::Program::Form::Script) {
        hint = switch_value_hint(spelled, program_start, switches);
        if (hint.empty()) hint = split_value_hint(spelled, program_start);
      }
      print_warning(std::cerr, with_rule_id(kProgramMissingRule.id, e.what()) + hint +
                                   " (a dry run starts nothing; a launch would refuse it)");
    }
  }
}

void RunCommand::check_unused_switches() {
  // --no-file-checks skips the checks a launch makes of the program's files on its node; a dry run makes none (its
  // machine is rarely the one the job reads from), so the switch is named there, as unused.
  if (no_file_checks && dry_run)
    print_warning(std::cerr, with_rule_id(kNoFileChecksUnusedRule.id, "--no-file-checks: ") + "not used in a dry run (a launch checks "
                             "the files the program's flags name before it starts; a dry run checks none)");
  // --bring-up-only stops megatron-run's own worker after the process groups' self-check: a dry run starts no
  // worker (named), and the user's program is not ours to stop there (refused).
  // --format json without --dry-run validates as the launch would: it refuses what the launch refuses.
  if (launch_opts.bring_up_only && dry_run)
    print_warning(std::cerr, with_rule_id(kBringUpOnlyUnusedRule.id, "--bring-up-only: ") + "not used in a dry run (it stops a launch "
                             "of megatron-run's own worker after the process groups' self-check; a dry run starts "
                             "nothing)");
  else if (launch_opts.bring_up_only && json_check && !program.named())
    print_warning(std::cerr, with_rule_id(kBringUpOnlyUnusedRule.id, "--bring-up-only: ") + "not used by --format json, which "
                             "validates as the launch would and starts nothing");
  if (launch_opts.bring_up_only && !dry_run && program.named())
    throw UsageError("argument --bring-up-only: stops megatron-run's own worker after the process groups' "
                         "self-check, but the program " + echo_word(program.words.front()) +
                         " runs instead of it and megatron-run cannot stop it there; leave --bring-up-only out, "
                         "or name no program to bring up megatron-run's own worker",
                     {"--bring-up-only"});
}

void RunCommand::choose_target() {
  inv.cli = split.rest;
  // A launch validates for the machine it runs on (a dry run for the documented default target, sm_90): without
  // --target-gpu-arch / --target-env, the GPUs that are here, or none (the CUDA-only rules do not apply).
  if (!dry_run && !parse_only && explain.empty() && common.gpu_arch.empty() && common.target_env_file.empty() &&
      common.format != "argv" && common.format != "argv0")
    if (std::optional<std::string> arch = machine_gpu_arch()) inv.env.gpu_arch = *arch;
}

std::optional<int> RunCommand::print_argv() {
  if (common.format == "argv" || common.format == "argv0") {
    // The Megatron command line the configs and flags stand for (config/command_line.h): one shell-quoted line
    // that `eval` gives back word for word, or (argv0) each word ended by a NUL byte, for `xargs -0`.
    const Parsed parsed = parse_invocation(Schema::megatron(), inv);
    for (const auto& w : parsed.warnings) print_warning_diagnostic(parse_warning(w));  // a duplicate key, a deprecated flag
    std::vector<std::string> words = resolved_argv(parsed);
    if (program.named()) words = launch::program_argv(program, words);  // what every rank would run
    if (common.format == "argv") {
      std::cout << shell_join(words) << "\n";
    } else {
      for (const std::string& w : words) std::cout << w << '\0';
    }
    return 0;
  }
  return std::nullopt;
}

void RunCommand::prepare_launch() {
  // The program's own arguments, torchrun's way (Megatron-LM's example scripts put every Megatron flag there):
  // validation reads what the program's argparse will, its own words with parse_known_args, then what megatron-run
  // appends after them, which wins (config/parse/invocation.h). The words that are no Megatron flag are its own.
  const char* rank_env = std::getenv("RANK");
  quiet = std::getenv("MR_SPAWNER") != nullptr || (rank_env && std::string(rank_env) != "0");
  if (program.named()) {
    inv.program_cli = argv_tokens(std::vector<std::string>(program.words.begin() + 1, program.words.end()),
                                  static_cast<int>(program_start) + 2);
    inv.append_to_program = program.append_args;
    inv.program_named = true;
  }
  launching = !dry_run && !parse_only && explain.empty();
  // A launch's own variables (RANK, WORLD_SIZE, ...) in a config's ENV_VARS: the ranks get the launch's, and so
  // does validation.
  if (launching) inv.launch_sets = launch_sets_variable;
  // The world size that runs is the one validated: one worker, where a WORLD_SIZE in the shell is no job's.
  if (launching)
    if (const std::string n = launch_opts.apply_launch(inv, /*starts=*/!json_check); !n.empty()) print_warning(std::cerr, n);
  // A usage error from here on is a refusal to join (not for a JSON check, which never joins).
  tells_nodes = launching && !json_check && launch_opts.multi_node() && !launch_opts.joins_enclosing_job();
}

void RunCommand::read_checkpoint_args() {
  // A launch of our worker's training run: what it cannot run, then the scheduler it builds first thing. A dry
  // run validates the config for any program, and the user's program may not train at all (an inference
  // server): the schedule is a warning then.
  trains = launching && !program.named() && !launch_opts.bring_up_only;
  // --use-checkpoint-args in our own training run: the checkpoint's model arguments replace the given ones before
  // validation, as Megatron's parse_and_validate_args does (run/checkpoint_args.h). Each rank does it again with
  // the same checkpoint; the notice comes once (the spawner, or rank 0 under another launcher), like validation's
  // warnings.
  // The user's program does the same with the checkpoint it finds: megatron-run applies a checkpoint it can read
  // (its own format) alike; one it cannot read (a Megatron checkpoint: PyTorch files) leaves the values given, and
  // what validation refuses then is said as warnings (`unreadable_checkpoint`), since the program's own
  // validation runs on the checkpoint's values.
  // A dry run (and --explain) does what the launch would with the checkpoint that is there now; one it cannot read,
  // or none yet (the launch reads the one there then), leaves the values given, and what validation refuses of the
  // model's shape is said as warnings, as for a user's program.
  programs_checkpoint = launching && program.named();
  vets = !launching && !parse_only;
  if (trains || programs_checkpoint || vets) {
    const bool program_run = program.named();
    inv.after_parse = [quiet = quiet, program_run, vets = vets, &unreadable_checkpoint = unreadable_checkpoint,
                       &checkpoint_none_yet = checkpoint_none_yet](Parsed& p, std::vector<Diagnostic>& ds) {
      try {
        std::string none_yet;
        bool read = false;
        for (const run::CheckpointArgsResult& r : run::apply_checkpoint_args(p.ns)) {
          if (vets && r.file.empty()) {  // none yet: the launch takes the one there then
            none_yet = "no checkpoint under " + r.flag + " " + r.dir + " now: " + r.missing_tracker + " is not there";
            continue;
          }
          read = read || !r.file.empty();
          if (!quiet)
            ds.push_back({Diagnostic::Level::Warning, kUseCheckpointArgsRule.id, run::checkpoint_args_notice(r),
                          {"--use-checkpoint-args", r.flag}, {}, kStageInit});
        }
        if (!read) unreadable_checkpoint = none_yet, checkpoint_none_yet = !none_yet.empty();  // (--pretrained-checkpoint's read, --load's none yet: read)
      } catch (const run::CheckpointError& e) {
        const std::string m = without_rule_id(e.what());
        // The program's checkpoint, not megatron-run's (one of ours damaged: an error); in a dry run also none
        // yet with --exit-on-missing-checkpoint (the launch refuses it if there is still none then).
        if ((program_run && e.foreign) || (vets && e.id == run::kCkptMissing.id)) {
          unreadable_checkpoint = m;
          checkpoint_none_yet = vets && e.id == run::kCkptMissing.id;
          return;
        }
        std::vector<std::string> flags = {"--use-checkpoint-args"};
        for (const char* f : {"--pretrained-checkpoint", "--load", "--ckpt-step", "--exit-on-missing-checkpoint"})
          if (m.find(f) != std::string::npos) flags.push_back(f);
        ds.push_back({Diagnostic::Level::Error, e.id, m, flags, {}, kStageInit});
      }
    };
  }
}

Parsed RunCommand::parse(const Invocation& v) {
  // (Said once, before validation; the parse of another world size holds the same words.)
  Parsed p = parse_arguments(Schema::megatron(), v);
  if (!program_words_said) warn_program_words(v, p, program, quiet, own_after);
  program_words_said = true;
  return p;
}

std::vector<Diagnostic> RunCommand::validate(const Invocation& v, Outcome& o, std::vector<Diagnostic>& warnings) {
  o = resolve(v, parse(v));
  if (!o.ok()) return o.diagnostics;
  if (auto d = init_check(o)) return {*d};  // before anything starts
  if (trains)
    if (auto d = training_run_check(o)) return {*d};
  warnings.clear();
  // What Megatron's save would fail on: refused before the workers start, said by a dry run.
  if (auto d = save_settings_check(o, trains)) {
    if (d->level == Diagnostic::Level::Error) return {*d};
    warnings.push_back(*d);
  }
  if (auto d = schedule_check(o, trains)) {
    if (d->level == Diagnostic::Level::Error) return {*d};
    warnings.push_back(*d);
  }
  return {};
}

void RunCommand::validate_config() {
  if (parse_only) {
    // Megatron's parse_args() with its rules: --yaml-cfg's command-line combinations are refused there.
    out.parsed = parse(inv);
    if (yaml_cfg_requested(out.parsed.ns)) parse_yaml_cfg(out.parsed, inv.config);
    if (out.parsed.yaml_cfg) out.diagnostics = out.parsed.yaml_cfg->errors;
  } else if (launch_opts.elastic()) {
    validate_elastic();
  } else {
    failed = validate(inv, out, late_warnings);
  }
}

void RunCommand::validate_elastic() {
  // An elastic job's world size is known when its rendezvous closes: the config is checked for every node count
  // from MAX down to MIN, the rendezvous closes only at a count it is valid for, and the largest valid count's
  // resolution is the one shown and launched with (each worker validates its own world size again).
  const long long per_node = std::max(1, launch_opts.nproc_per_node);
  std::vector<int> valid;
  for (int n = launch_opts.nnodes; n >= launch_opts.nnodes_min; --n) {
    Invocation v = inv;
    v.world_size = per_node * n;
    Outcome o;
    std::vector<Diagnostic> w;
    std::vector<Diagnostic> d = validate(v, o, w);
    if (!d.empty()) {
      if (failed.empty()) failed = d, out = o;
      continue;
    }
    if (valid.empty()) out = o, late_warnings = w;
    valid.push_back(n);
  }
  std::reverse(valid.begin(), valid.end());
  launch_opts.valid_nnodes = valid;
  if (valid.empty()) {
    print_error(std::cerr, "the config is valid for no node count from " + std::to_string(launch_opts.nnodes_min) +
                               " to " + std::to_string(launch_opts.nnodes) + " (--nnodes " +
                               std::to_string(launch_opts.nnodes_min) + ":" + std::to_string(launch_opts.nnodes) +
                               "); at " + std::to_string(launch_opts.nnodes) + " nodes:");
  } else {
    failed.clear();
    if (static_cast<int>(valid.size()) < launch_opts.nnodes - launch_opts.nnodes_min + 1) {
      std::string counts;
      for (int n : valid) counts += (counts.empty() ? "" : ", ") + std::to_string(n);
      print_warning(std::cerr, "--nnodes " + std::to_string(launch_opts.nnodes_min) + ":" +
                                   std::to_string(launch_opts.nnodes) + ": the config is valid for " + counts +
                                   " node(s) only (" + std::to_string(per_node) +
                                   (per_node == 1 ? " worker" : " workers") + " each); the rendezvous closes at one of these counts");
    }
  }
}

void RunCommand::say_config_warnings() {
  // A rank of a job re-validates the config the spawner (or, under another launcher, rank 0) has warned about.
  if (!(launching && quiet)) log_warnings(out);
  // ENV_VARS that replace a value of megatron-run's environment, or that the launch sets itself (once a job).
  if (!(launching && quiet))
    for (const Diagnostic& d : config_env_notices(out.parsed)) print_warning_diagnostic(d);
}

// --format json: stdout is one JSON document in every case; here the diagnostics, each with its stage.
// A launch refused here in a job of several nodes tells the other nodes (they would wait for --join-timeout).
int RunCommand::refused(const std::vector<Diagnostic>& ds) {
  const int code = report_failure(common, ds);
  if (!launching || json_check) return code;
  std::string first;
  for (const Diagnostic& d : ds)
    if (d.level == Diagnostic::Level::Error && first.empty()) first = diagnostic_text(d);
  return refuse_launch(launch_opts, code, "its config failed validation: " + first, /*printed=*/true);
}

// Who replaces the model's shape with the checkpoint's: the user's program (its own validation), or, in a dry
// run of megatron-run's own training run, the launch (before its validation). A dry run with no checkpoint there
// yet says what the launch does then: it reads one that is there by then, and with none still there it validates
// the values given and refuses them (exit 1), as without --use-checkpoint-args.
std::string RunCommand::replacer(const char* what) const {
  const std::string who = program.named() ? echo_word(program.words.front()) : std::string("the launch");
  const std::string replaces =
      program.named() ? " replaces the model's " + std::string(what) + " with the checkpoint's before its own validation"
                      : " replaces the model's " + std::string(what) + " with the checkpoint's before it validates";
  if (!checkpoint_none_yet) return who + replaces;
  return "if a checkpoint is there when the job starts, " + who + replaces +
         "; if there is still none then, the launch refuses the values given as errors (exit 1)";
}

void RunCommand::excuse_unreadable_checkpoint() {
  if (!failed.empty() && !unreadable_checkpoint.empty() && !launch_opts.elastic() &&
      std::all_of(failed.begin(), failed.end(), from_checkpoint)) {
    said_unreadable = true;
    // The program validates the checkpoint's model arguments, which megatron-run could not read: what it refuses
    // of the values given is said, and the program decides (docs/checkpoints.md). A dry run: the launch reads the
    // checkpoint then.
    if (!quiet) {
      print_warning(std::cerr, with_rule_id(kUseCheckpointArgsRule.id, "--use-checkpoint-args: ") +
                               (vets ? "this dry run" : "megatron-run") + " cannot read the "
                               "checkpoint's arguments (" + unreadable_checkpoint + "); " + replacer("shape") + "; so "
                               "what megatron-run refuses of the shape given is only said here (and its checks after "
                               "the model's shape did not run):");
      for (const Diagnostic& d : failed) {
        Diagnostic w = d;
        w.level = Diagnostic::Level::Warning;
        print_warning_diagnostic(w);
      }
    }
    failed.clear();
  }
}

void RunCommand::say_late_warnings() {
  if (!(launching && quiet))
    for (const Diagnostic& w : late_warnings) print_warning_diagnostic(w);
  // The environment the config gives every rank (its ENV_VARS, as validated): said once, by a launch and by a
  // text dry run (a launch would give it), as Megatron's CI prints what it exports.
  if (const std::string given = config_env_line(out.parsed);
      !given.empty() && !(launching && quiet) && !json_check && common.format == "text")
    std::cerr << "megatron-run: " << (launching ? "every rank gets" : "a launch gives every rank")
              << " the config's ENV_VARS: " << given << std::endl;
}

std::optional<int> RunCommand::explain_values() {
  const Namespace& ns = out.parsed.ns;
  std::string explained;  // with --format json: {"dest": {"value": ..., "source": "..."}, ...}
  for (const std::string& e : explain) {
    std::string dest = e;
    if (dest.rfind("--", 0) == 0) {
      const Arg* a = Schema::megatron().find_flag(dest);
      if (!a) throw UsageError("argument --explain: unknown flag " + e + did_you_mean(e, false), {"--explain"});
      dest = a->dest();
    }
    for (char& c : dest)
      if (c == '-') c = '_';
    if (!ns.has(dest))
      throw UsageError("argument --explain: no resolved argument '" + dest + "'" + did_you_mean("--" + dest, true),
                       {"--explain"});
    if (common.format == "json")
      explained += (explained.empty() ? "{" : ", ") + json_quote(dest) + ": {\"value\": " + ns[dest].json() +
                   ", \"source\": " + json_quote(ns.provenance(dest).describe()) + "}";
    else
      std::cout << dest << " = " << printable(ns[dest].py_str(), false) << "    ("
                << printable(ns.provenance(dest).describe(), false) << ")\n";
  }
  if (!explained.empty()) std::cout << explained << "}\n";
  if (!explain.empty()) return 0;
  return std::nullopt;
}

void RunCommand::check_enclosing_job() {
  if (!dry_run && !json_check) return;  // the launch itself checks both (launch.cpp)
  const LaunchOptions::EnclosingJob& job = launch_opts.enclosing;  // as apply() read it
  if (job.malformed) {
    // A JSON check joining an enclosing job (no --nproc-per-node) reads its variables as the launch reads them, so
    // a malformed one (LOCAL_RANK=x) is the launch's refusal here too (launch.cpp: launch.env-malformed, exit 2). A
    // dry run takes the world size to check from WORLD_SIZE (docs/launch.md: a dry run outside any job, or one
    // that checks the config for an exported WORLD_SIZE), so it still validates; but it says that the launch will
    // refuse this environment (review user40 #2: it said nothing, and the launch exited 2).
    // Keyed on --nproc-per-node given, as inside_job_refusal is: --nnodes or c10d alone (one worker per node)
    // start no job of their own here (review diff40 #3).
    if (!launch_opts.nproc_given) {
      launch::kEnvMalformedRule.record_hit();
      if (json_check) throw UsageError(*job.malformed, {}, {}, launch::kEnvMalformedRule.id);
      print_warning(std::cerr, with_rule_id(launch::kEnvMalformedRule.id, *job.malformed) +
                                   "; a launch here refuses it (exit 2) without --nproc-per-node, which starts the "
                                   "workers with their own");
      // RANK and WORLD_SIZE set: the launch takes the shell for a job (refused above), and with MASTER_ADDR and
      // MASTER_PORT given it would refuse the options that act on the workers it starts: said here too.
      const char* rank = std::getenv("RANK");
      const char* world = std::getenv("WORLD_SIZE");
      if (rank && world)
        if (const std::optional<InsideJobRefusal> r = inside_job_refusal(
                launch_opts, "RANK=" + abbreviate(rank) + " and WORLD_SIZE=" + abbreviate(world) + " are set",
                /*slurm=*/false))
          throw UsageError(r->message, {r->flag});
    }
  }
  // Inside that job the options that act on the workers megatron-run starts (--nnodes, --master-port, --log-dir,
  // ...) are the launch's refusal (exit 2, the same message): a pre-flight dry run in the job says it too.
  if (job.info)
    if (const std::optional<InsideJobRefusal> r = inside_job_refusal(launch_opts, *job.info))
      throw UsageError(r->message, {r->flag});
}

std::optional<int> RunCommand::check_program_inputs() {
  // --format json without --dry-run checks the files the program's flags name, as the launch does before it starts
  // the workers (launch.cpp): an error is a refusal (exit 1, in the JSON document), a warning is said.
  if (json_check) {
    const std::vector<Diagnostic> inputs = program_input_diagnostics(out, program);
    if (std::any_of(inputs.begin(), inputs.end(), [](const Diagnostic& d) { return d.level == Diagnostic::Level::Error; }))
      return refused(inputs);
    for (const Diagnostic& d : inputs) print_warning_diagnostic(d);
  }
  return std::nullopt;
}

void RunCommand::warn_checkpoint_not_read() {
  const Namespace& ns = out.parsed.ns;
  // (The namespace, not the typed view: a --yaml-cfg file's namespace has no typed view, and may lack the key.)
  const std::string uca(dest_of(ArgId::use_checkpoint_args));
  if ((programs_checkpoint || vets) && !quiet && ns.has(uca) && ns[uca].truthy() && !unreadable_checkpoint.empty() &&
      !said_unreadable)
    print_warning(std::cerr, with_rule_id(kUseCheckpointArgsRule.id, "--use-checkpoint-args: ") +
                             (vets ? "this dry run" : "megatron-run") + " validated the values given, not the "
                             "checkpoint's, which it cannot read (" + unreadable_checkpoint + "); " +
                             replacer("arguments"));
}

int RunCommand::start_launch() {
  tells_nodes = false;
  // A launch whose stdout was closed (`>&-`) would lose every line the workers print, and a job that exits 0
  // with its log gone must not pass a CI step: refused before any worker starts, as a dry run's output is.
  if (util::std_fd_was_closed(1))
    return refuse_launch(launch_opts, 1, "cannot write the output: " + util::stdout_write_failure(0) +
                                             " (the workers' output would be lost; > /dev/null discards it)");
  // The flags appended to the program's own arguments: what the configs and the flags before the program say,
  // as given (--format argv's words), not the validated namespace, whose derived values (a CP size validation
  // re-derived, a list it unwrapped) the program's own validate_args derives again and --format argv prints.
  if (program.named() && program.append_args) program.appended = appended_argv(out.parsed);
  return launch(out, own_args, program, launch_opts.valid_nnodes);
}

int RunCommand::print_resolved() {
  const Namespace& ns = out.parsed.ns;
  if (common.format == "json")
    std::cout << namespace_json(ns, provenance) << "\n";
  else if (out.parsed.yaml_cfg)
    print_yaml_table(std::cout, ns);  // sections print as namespace(...), as Megatron's table shows them
  else
    print_megatron_table(std::cout, ns);
  return 0;
}

// The default command. `tells_nodes` is set once the launch options are known and the command is a launch of
// several nodes, and cleared when launch() takes over (it tells the other nodes of its own refusals).
int run_command(const std::vector<std::string>& args, RunOptions& opts, bool& tells_nodes) {
  RunCommand command(args, opts, tells_nodes);
  return command.run();
}

}  // namespace

int cmd_run(const std::vector<std::string>& args) {
  RunOptions opts;
  bool tells_nodes = false;
  // A usage error (an unknown Megatron flag, a bad value) on one node of a multi-node launch: printed first, then
  // the other nodes are told, or they would wait for this one until --join-timeout.
  auto refuse = [&](const std::string& message, int code) {
    return refuse_launch(opts.launch, code, message, /*printed=*/true);
  };
  // A bad launcher option found after the rendezvous options were known (LaunchOptions::rendezvous_known), in a
  // launch of several nodes: told too.
  auto telling = [&] {
    const LaunchOptions& lo = opts.launch;
    return tells_nodes || (lo.rendezvous_known && lo.multi_node() && !lo.joins_enclosing_job() && !opts.dry_run &&
                           !opts.parse_only && opts.explain.empty() && !opts.help && !opts.version && opts.common.format == "text");
  };
  try {
    try {
      return run_command(args, opts, tells_nodes);
    } catch (const UsageError& e) {
      // Megatron's parser suggests Megatron's flags; a near miss of one of megatron-run's own options
      // (--confg, --wrld-size, --nproc-per-nod) gets its suggestion too.
      std::string own = own_option_hint(e, "");
      // `-tp 2`: a Megatron flag written with one dash is torchrun's -t with the value 'p' to argparse (-mp: -m
      // given 'p'); the refusal of that short option names the flag the user may have meant, as Megatron's
      // parser suggests its flags (Schema::suggest).
      own += one_dash_hint(args, e.flags);
      if (std::string_view(e.what()).find("unrecognized arguments:") != std::string_view::npos)
        own += program_after_unknown_hint(args, e.flags);
      // A value that came from torchrun's PET_<NAME> default (PET_NPROC_PER_NODE=x): the variable is named.
      const std::string pet = opts.launch.pet_source_note(e.what(), e.flags);
      if (own.empty() && pet.empty()) throw;
      throw UsageError(e.what() + pet + own, e.flags, e.where, e.id);
    }
  } catch (const UsageError& e) {
    if (!telling()) throw;
    return refuse(e.what(), report_usage_error(args, e, CommandWords::Run));
  } catch (const po::error& e) {
    if (!telling()) throw;
    const UsageError u = own_option_error(e, args);
    return refuse(u.what(), report_usage_error(args, u, CommandWords::Run));
  }
}

}  // namespace mr::app
