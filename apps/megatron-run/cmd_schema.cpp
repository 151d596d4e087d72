// `megatron-run schema`: the argument table as JSON, text help, a JSON Schema for --config files, or a bash, zsh
// or fish completion script.
#include <iostream>

#include "cli.h"
#include "config/completion.h"
#include "config/json_schema.h"
#include "config/print.h"

namespace mr::app {

namespace {
constexpr const char* kFormats = "json|text|json-schema|bash-completion|zsh-completion|fish-completion";
}  // namespace

void SchemaOptions::add_to(po::options_description& desc) {
  desc.add_options()("format", po::value(&format), kFormats);
}

void print_completion_script(std::ostream& os, const std::string& shell) {
  const Schema& s = Schema::megatron();
  if (shell == "bash") os << bash_completion(s, completion_spec());
  else if (shell == "zsh") os << zsh_completion(s, completion_spec());
  else if (shell == "fish") os << fish_completion(s, completion_spec());
}

int cmd_schema(const std::vector<std::string>& args) {
  po::options_description desc("schema");
  SchemaOptions opts;
  opts.add_to(desc);
  split_args(args, 2, desc, /*allow_unregistered=*/false);
  const std::string& format = opts.format;
  const Schema& s = Schema::megatron();
  if (format == "json") std::cout << schema_json(s);
  else if (format == "text") print_help(std::cout, s, "megatron-run");
  else if (format == "json-schema") std::cout << config_json_schema(s);
  else if (format == "bash-completion" || format == "zsh-completion" || format == "fish-completion")
    print_completion_script(std::cout, format.substr(0, format.find('-')));
  else
    throw invalid_choice("--format", format, kFormats);
  return 0;
}

}  // namespace mr::app
