// `megatron-run topology`: every process group of a job (Megatron's rank layout), without starting anything.
#include <iostream>

#include "cli.h"
#include "launch.h"

namespace mr::app {

int cmd_topology(const std::vector<std::string>& args) {
  po::options_description desc("topology");
  CommonOptions common;
  common.add_to(desc);
  SplitArgs split = split_args(args, 2, desc, /*allow_unregistered=*/true);  // --help: main.cpp
  Outcome out;
  Args job_args;
  parallel::Layout layout;
  if (int rc = resolve_job_layout("topology", common, split.rest, out, job_args, layout)) return rc;
  if (common.format == "json")
    std::cout << layout.json() << "\n";
  else
    std::cout << layout.text();
  return 0;
}

}  // namespace mr::app
