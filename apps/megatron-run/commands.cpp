// The command table (commands.h): every command of megatron-run, one row each, with everything said about it.
#include "commands.h"

#include "config/rule.h"
#include "launch.h"

namespace mr::app {

namespace {

std::vector<std::string> rule_ids() {
  std::vector<std::string> ids;
  for (const Rule* r : all_rules()) ids.push_back(r->id);
  return ids;
}

// The words `help` takes: every command word but its own (and the default command's "").
std::vector<std::string> command_words() {
  std::vector<std::string> words;
  for (const Command& c : commands())
    if (*c.name && std::string_view(c.name) != "help") words.emplace_back(c.name);
  return words;
}

std::vector<Command> make_commands() {
  const std::string check_formats = CheckOptions::kFormats;  // check's --format choices, the one list (cli.h)
  std::vector<Command> table;
  // The default command: no command word. Its --help lists Megatron's flags (cmd_run.cpp): no usage here.
  table.push_back({
      .name = "",
      .run = &cmd_run,
      .add_options = &add_options<RunOptions>,
      .summary = "validate, then start or join the job",
      .synopsis =
      "  megatron-run --dry-run [--config FILE]... [--format text|json|argv|argv0] [--explain FLAG]... [MEGATRON FLAGS]\n"
      "  megatron-run [--nproc-per-node N [--nnodes M --node-rank R --master-addr A --master-port P]] [--bring-up-only]\n"
      "               [--config FILE]... [MEGATRON FLAGS]      validate, then start or join the job\n"
      "  megatron-run [launch options] [--config FILE]... [MEGATRON FLAGS] PROGRAM\n"
      "               validate for the job's world size, then start PROGRAM on every rank with torchrun's\n"
      "               environment and the Megatron flags appended (docs/launch.md). PROGRAM is one of\n"
      "                 SCRIPT.py ARGS...        run under python3 -u ($PYTHON_EXEC), torchrun's form\n"
      "                 -- CMD ARGS...           any command, as given (an existing x.py file that is no\n"
      "                                          executable found as a command runs as SCRIPT, as torchrun's)\n"
      "                 --no-python CMD ARGS...  CMD as a command rather than a script\n"
      "                 -m MODULE ARGS...        python3 -u -m MODULE ($PYTHON_EXEC)\n"
      "               --no-append-args: the program gets only its own ARGS\n"
      "               --no-file-checks: start it without checking the files its flags name (docs/launch.md)\n",
      .megatron_flags = true});
  table.push_back({
      .name = "check",
      .run = &cmd_check,
      .add_options = &add_options<CheckOptions>,
      .summary = "lint many configs in one process",
      .synopsis = "  megatron-run check [--format " + check_formats + "] [--world-size N] [--quiet] [--yaml-cfg]\n"
                  "                     [--config BASE]... [config options] [target options] [--] FILE|DIR...\n",
      .usage = "usage: megatron-run check [--format " + check_formats +
          "] [--world-size N] [--quiet] [--yaml-cfg]\n"
          "                          [--config BASE]... [config options] [target options] [--] FILE|DIR...\n\n"
          "Validates each config file on its own (Megatron's parse_args and validate_args, then our checks) and\n"
          "prints one result per file as soon as it is known (text, github, json: flushed after each file).\n"
          "Exit 0: every file valid; 1: a rule failed (or the output could not be written); 2: a file could not\n"
          "be read or parsed. --format: text (a line per problem), json (one document), github (a GitHub Actions\n"
          "::error/::warning command per problem, shown as annotations), junit (a JUnit XML report, a testcase per\n"
          "file). --quiet: errors only (no warnings in text, github and junit; json lists them all), and no\n"
          "summary line when every file is valid. `--` ends the options: every word after it is a FILE, one\n"
          "starting with '-' too. A DIR stands for the *.yaml and *.yml files below it (.YAML, .Yml too), each\n"
          "checked and reported as if named (recursively, in path order; names starting with '.' and links to\n"
          "folders left out); a directory with none is an error (input.no-config-files). A file met again (named\n"
          "and also found below a DIR named, or named twice) is checked once, where it is first met.\n"
          "--yaml-cfg: every FILE is a Megatron --yaml-cfg file (language_model:, model_parallel: sections),\n"
          "checked as `megatron-run --dry-run --yaml-cfg FILE` checks it. --config BASE (repeatable): every FILE\n"
          "is checked on top of BASE, as `--config BASE --config FILE` would be (a file that only overrides a\n"
          "base, like configs/examples/heterogeneous.yaml); a problem placed in BASE adds \"(checking FILE)\".\n"
          "check's own options take an unambiguous prefix, as argparse's do (--fo json is --format json, --world 4\n"
          "is --world-size 4; an ambiguous one, --target, is refused naming the options it could be).\n"
          "`megatron-run help` lists the config and target options.\n",
      .files = true});
  table.push_back({
      .name = "schema",
      .run = &cmd_schema,
      .add_options = &add_options<SchemaOptions>,
      .summary = "the argument table (JSON, text, JSON Schema, completion)",
      .synopsis = "  megatron-run schema [--format json|text|json-schema|bash-completion|zsh-completion|fish-completion]\n",
      .usage =
      "usage: megatron-run schema [--format json|text|json-schema|bash-completion|zsh-completion|fish-completion]\n\n"
      "Prints the argument table: every Megatron flag with its dest, type, default, choices, nargs and help.\n"
      "json-schema: a JSON Schema (draft 2020-12) for --config files, for editors and validators;\n"
      "*-completion: a completion script for the shell (commands, their options, every Megatron flag).\n",
      .json_result = false});  // its --format json is the schema, not a result: a usage error prints no failure JSON
  table.push_back({
      .name = "rules",
      .run = &cmd_rules,
      .add_options = &add_options<RulesOptions>,
      .summary = "every validation rule id",
      .synopsis = "  megatron-run rules [--format text|markdown|json] [ID...]   the validation rules (or the named ones)\n",
      .usage =
      "usage: megatron-run rules [--format text|markdown|json] [ID...]\n\n"
      "Lists every validation rule: its id, level, stage and message (docs/validation.md is this, as markdown).\n"
      "With IDs, only those rules, in that order; an id no rule has is an error (exit 2) naming the closest ids.\n"
      "json: a list of objects with id, level, stage, description and source (file:line of the declaration).\n",
      .words = &rule_ids});
  table.push_back({
      .name = "topology",
      .run = &cmd_topology,
      .add_options = &add_options<TopologyOptions>,
      .summary = "the process groups of a job (text, JSON, SVG, DOT)",
      .synopsis = "  megatron-run topology --world-size N [--format text|json|svg|dot] [--gpus-per-node N] [config options]\n"
      "                        [MEGATRON FLAGS]\n",
      .usage =
      "usage: megatron-run topology --world-size N [--format text|json|svg|dot] [--gpus-per-node N]\n"
      "                             [--config FILE]... [config options] [target options] [MEGATRON FLAGS]\n"
      "Prints every process group of the job (Megatron's rank layout) without starting anything. svg and dot\n"
      "draw the GPUs as a grid, one row per node of --gpus-per-node GPUs (default 8), each marked with its\n"
      "TP group, pipeline stage, data-parallel replica (and CP rank, EP group); dot is for Graphviz.\n"
      "`megatron-run help` lists the config and target options.\n",
      .megatron_flags = true});
  table.push_back({
      .name = "params",
      .run = &cmd_params,
      .add_options = &add_options<ParamsOptions>,
      .summary = "parameters and their memory per rank (text, JSON, SVG)",
      .synopsis =
      "  megatron-run params --world-size N [--format text|json|svg] [--device-memory SIZE] [config options]\n"
      "                      [MEGATRON FLAGS]\n"
      "                               parameters and their memory per (tensor, pipeline) rank\n",
      .usage =
      "usage: megatron-run params --world-size N [--format text|json|svg] [--device-memory SIZE]\n"
      "                           [--config FILE]... [config options] [target options] [MEGATRON FLAGS]\n"
      "Prints the parameters each (tensor, pipeline) rank holds and the memory they take (weights,\n"
      "gradients, main params, optimizer state, activations), without starting anything. svg draws one\n"
      "stacked bar per rank against --device-memory (default 80GiB; B, KiB, MiB, GiB, TiB, KB, MB, GB, TB).\n"
      "`megatron-run help` lists the config and target options.\n",
      .megatron_flags = true});
  table.push_back({
      .name = "schedule",
      .run = &cmd_schedule,
      .add_options = &add_options<ScheduleOptions>,
      .summary = "learning rate and weight decay over the run (text, CSV, JSON, SVG)",
      .synopsis =
      "  megatron-run schedule [--format text|csv|json|svg] [config options] [MEGATRON FLAGS]\n"
      "                               learning rate and weight decay over the run\n",
      .usage =
      "usage: megatron-run schedule [--format text|csv|json|svg] [--points N | --every K | --at N,N,...]\n"
      "                             [--config FILE]... [config options] [target options] [MEGATRON FLAGS]\n"
      "Prints the learning rate and weight decay over the run, from the scheduler the run uses (Megatron's\n"
      "OptimizerParamScheduler): per iteration (--train-iters), or per consumed sample (--train-samples),\n"
      "each point with its phase (warmup, constant, stable, decay, anneal, floor). The value at iteration i is\n"
      "the one Megatron logs at i. Points: --points N evenly spaced plus the phase boundaries (default 20 for\n"
      "text, 500 otherwise), --every K, or --at a list.\n"
      "`megatron-run help` lists the config and target options.\n",
      .megatron_flags = true});
  // A new command goes here, before `help`: one row.
  // `help`, last: main.cpp answers it (one command word, or none); its usage is the general one.
  table.push_back({
      .name = "help",
      .run = nullptr,
      .add_options = nullptr,
      .summary = "megatron-run's usage",
      .synopsis =
      "  megatron-run --help          every Megatron flag, grouped\n"
      "  megatron-run help [COMMAND]  this usage, or a command's (as COMMAND --help)\n"
      "  megatron-run --version       its version, commit and build (what the worker was built with)\n",
      .words = &command_words,
      .one_word = true,
      .json_result = false});
  return table;
}

}  // namespace

const std::vector<Command>& commands() {
  static const std::vector<Command> table = make_commands();
  return table;
}

const Command* find_command(std::string_view word) {
  for (const Command& c : commands())
    if (word == c.name) return &c;
  return nullptr;
}

}  // namespace mr::app
