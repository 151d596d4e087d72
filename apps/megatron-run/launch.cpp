// Launching a validated job. (Placeholder until the distributed runtime lands: see the dist issue.)
#include <iostream>

#include "cli.h"

namespace mr::app {

int launch(const Outcome&, const std::vector<std::string>&) {
  std::cerr << "megatron-run: the training runtime is not built yet; use --dry-run to resolve and print the "
               "arguments\n";
  return 2;
}

int cmd_topology(const std::vector<std::string>&) {
  std::cerr << "megatron-run: topology is not implemented yet\n";
  return 2;
}

}  // namespace mr::app
