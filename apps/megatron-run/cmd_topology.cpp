// `megatron-run topology`: every process group of a job (Megatron's rank layout), without starting anything; as
// text, JSON, or a picture of the GPUs (SVG, Graphviz DOT; lib/parallel/layout_picture.h).
#include <iostream>

#include "cli.h"
#include "launch.h"
#include "parallel/layout_picture.h"

namespace mr::app {

void TopologyOptions::add_to(po::options_description& desc) {
  common.add_to(desc, "text|json|svg|dot");
  desc.add_options()("gpus-per-node", po::value(&gpus_per_node),
                     "GPUs per node in the picture's grid (default 8)");
}

int cmd_topology(const std::vector<std::string>& args) {
  TopologyOptions opts;
  const std::vector<Token> rest = parse_command_options("topology", args, opts);
  CommonOptions& common = opts.common;
  const bool picture = common.format == "svg" || common.format == "dot";
  if (opts.gpus_per_node < 1)
    throw UsageError("argument --gpus-per-node: must be at least 1, got " + std::to_string(opts.gpus_per_node),
                     {"--gpus-per-node"}, {}, "input.gpus-per-node");
  Outcome out;
  Args job_args;
  parallel::Layout layout;
  if (int rc = resolve_job_layout("topology", common, rest, out, job_args, layout, {"svg", "dot"})) return rc;
  if (common.format == "json") {
    std::cout << layout.json() << "\n";
  } else if (picture) {
    if (layout.spec.world_size > parallel::kMaxPictureRanks)
      throw UsageError("topology --format " + common.format + ": a picture of " +
                           std::to_string(layout.spec.world_size) + " ranks is too large (at most " +
                           std::to_string(parallel::kMaxPictureRanks) + "; --world-size, or --format text|json)",
                       {"--world-size"}, {}, "input.picture-too-large");
    const std::string title = picture_title(common, "rank layout");
    std::cout << (common.format == "svg" ? parallel::layout_svg(layout, opts.gpus_per_node, title)
                                         : parallel::layout_dot(layout, opts.gpus_per_node, title));
  } else {
    std::cout << layout.text();
  }
  return 0;
}

}  // namespace mr::app
