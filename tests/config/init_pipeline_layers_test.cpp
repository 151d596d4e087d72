// The init stage's layers-per-pipeline-stage checks (lib/config/validate/init_pipeline_layers.cpp): each rule
// fires on a split Megatron's validate_args accepts but its model construction refuses, next to one that passes.
#include "init_support.h"

namespace {

using mrtest::InitCase;

std::map<std::string, std::string> ws(const char* n) { return {{"WORLD_SIZE", n}}; }

const std::vector<InitCase> kCases = {
    {"init.pipeline.uneven-with-account-for",
     {"--pipeline-model-parallel-size", "2", "--num-layers", "4", "--decoder-first-pipeline-num-layers", "1",
      "--account-for-loss-in-pipeline-split"},
     {"--pipeline-model-parallel-size", "2", "--num-layers", "4", "--decoder-first-pipeline-num-layers", "1"}, ws("2"),
     "cannot be combined with --account-for-loss-in-pipeline-split"},
    {"init.pipeline.uneven-stage-layers",
     {"--pipeline-model-parallel-size", "4", "--num-layers", "8", "--decoder-first-pipeline-num-layers", "3"},
     {"--pipeline-model-parallel-size", "4", "--num-layers", "8", "--decoder-first-pipeline-num-layers", "2"}, ws("4"),
     "the 5 layers of the middle pipeline stages must divide evenly over 3 stages"},
    {"init.pipeline.uneven-stage-layers",
     {"--pipeline-model-parallel-size", "2", "--num-layers", "4", "--decoder-first-pipeline-num-layers", "4"},
     {"--pipeline-model-parallel-size", "2", "--num-layers", "4", "--decoder-first-pipeline-num-layers", "3"}, ws("2"),
     "0 layers remain for 1 middle pipeline stages"},
    {"init.pipeline.uneven-stage-layers",
     {"--pipeline-model-parallel-size", "4", "--num-layers", "16", "--num-virtual-stages-per-pipeline-rank", "2",
      "--decoder-first-pipeline-num-layers", "3", "--decoder-last-pipeline-num-layers", "3"},
     {"--pipeline-model-parallel-size", "4", "--num-layers", "16", "--num-virtual-stages-per-pipeline-rank", "2",
      "--decoder-first-pipeline-num-layers", "2", "--decoder-last-pipeline-num-layers", "2"},
     ws("4"), "--decoder-first-pipeline-num-layers (3) must be a multiple of the virtual pipeline size (2)"},
    {"init.pipeline.layers-per-stage",
     {"--pipeline-model-parallel-size", "2", "--num-layers", "6", "--num-virtual-stages-per-pipeline-rank", "2"},
     {"--pipeline-model-parallel-size", "2", "--num-layers", "8", "--num-virtual-stages-per-pipeline-rank", "2"}, ws("2"),
     "each pipeline rank holds 3 layers"},
};

}  // namespace

TEST_CASE("init stage, layers per pipeline stage: each rule fires next to a neighbour that passes", "[init]") {
  mrtest::check_init_table(kCases, "validate/init_pipeline_layers.cpp");
}
