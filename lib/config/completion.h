// Shell completion scripts (bash, zsh, fish) for megatron-run, generated from the argument schema (every
// Megatron flag, with its choices) and from a description of megatron-run's own surface: its commands and each
// command's options, which the app reads from the option descriptions its commands parse with
// (apps/megatron-run/completion_spec.cpp). Nothing here lists a flag by hand.
#pragma once

#include <string>
#include <vector>

#include "config/schema.h"

namespace mr {

struct CompletionOption {
  std::string flag;  // "--config"
  bool takes_value = false;
  std::string help;
  std::vector<std::string> choices;  // the values it takes, when it is a closed set
  bool files = false;                // its value is a file name
};

struct CompletionCommand {
  std::string name;  // "topology"
  std::string help;
  std::vector<CompletionOption> options;
  bool megatron_flags = false;  // takes Megatron's flags too
  bool files = false;           // takes file arguments (check)
  std::vector<std::string> words;  // the words it takes, when they are a closed set (rules: rule ids; help: commands)
  bool one_word = false;           // it takes one of `words`, not several (help: one command)
};

struct CompletionSpec {
  std::string prog = "megatron-run";
  CompletionCommand run;                  // the default command (no command word): its options
  std::vector<CompletionCommand> commands;
};

// The options a shell offers for Megatron's flags (schema order; choices of closed sets; path flags as files).
std::vector<CompletionOption> megatron_completion_options(const Schema& schema);

std::string bash_completion(const Schema& schema, const CompletionSpec& spec);
std::string zsh_completion(const Schema& schema, const CompletionSpec& spec);
std::string fish_completion(const Schema& schema, const CompletionSpec& spec);

}  // namespace mr
