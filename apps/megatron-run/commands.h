// megatron-run's commands, declared once: one row each in commands() (commands.cpp). main.cpp dispatches by it
// (and answers `CMD --help`, `help CMD`, the near-miss suggestions and help's list of commands from it),
// print_command_usage and print_usage (cli.cpp) print its texts, and completion_spec() (completion_spec.cpp) makes
// the shell completion of every command from it. A new command is one row, its cmd_<name>.cpp and its Options.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "cli.h"

namespace mr::app {

// Adds the options of `Options` (a *Options struct of cli.h or launch.h, with `add_to`) to `desc`, for a row's
// `add_options`. The description only describes them (completion, the near-miss hints): nothing parses with it,
// so the options it binds to are one static instance. The commands parse with their own Options.
template <class Options>
void add_options(po::options_description& desc) {
  static Options options;
  options.add_to(desc);
}

// A row, written with designated initializers (`.name = "check", .run = &cmd_check, ...`); a field left out keeps
// the default below.
struct Command {
  const char* name;  // the command word; "" for the default command (no command word: Megatron flags, a program)
  int (*run)(const std::vector<std::string>& args);  // nullptr for `help`, which main.cpp answers itself
  void (*add_options)(po::options_description& desc);  // its own options (&add_options<CheckOptions>); or nullptr
  const char* summary;    // one line: what shell completion shows beside the command word
  std::string synopsis;   // its lines in the general usage (print_usage), each "  megatron-run ...\n"
  std::string usage;      // `CMD --help` and `help CMD` (print_command_usage); "": the general usage instead
  bool megatron_flags = false;  // Megatron's flags follow its own options (completion offers them)
  bool files = false;           // file arguments follow (completion offers file names)
  std::vector<std::string> (*words)() = nullptr;  // the closed set of words it takes (rules: rule ids), or nullptr
  bool one_word = false;  // it takes one of `words`, not several (help: one command)
  // Its `--format json` output is a result document, so that a usage error with --format json prints a failure
  // document on stdout too (report_usage_error, cli.cpp); false for schema, whose JSON is the schema, and help.
  bool json_result = true;
};

// Every command, in the order of the general usage: the default command first, `help` last.
const std::vector<Command>& commands();
// The row of a command word (`help` included; "" is the default command's), or nullptr.
const Command* find_command(std::string_view word);

}  // namespace mr::app
