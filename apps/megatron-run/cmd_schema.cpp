// `megatron-run schema`: the argument table as JSON, text help or a bash completion script.
#include <iostream>

#include "cli.h"
#include "config/print.h"

namespace mr::app {

int cmd_schema(const std::vector<std::string>& args) {
  po::options_description desc("schema");
  std::string format = "json";
  desc.add_options()("format", po::value(&format), "json|text|bash-completion");
  split_args(args, 2, desc, /*allow_unregistered=*/false);
  const Schema& s = Schema::megatron();
  if (format == "json") std::cout << schema_json(s);
  else if (format == "text") print_help(std::cout, s, "megatron-run");
  else if (format == "bash-completion") std::cout << bash_completion(s, "megatron-run");
  else throw UsageError("argument --format: invalid choice: '" + format + "' (choose from 'json', 'text', 'bash-completion')", {"--format"});
  return 0;
}

}  // namespace mr::app
