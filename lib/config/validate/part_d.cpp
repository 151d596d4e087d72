// Part D of the validation chain: see sections.h for the seed lines it covers (arguments.py 1227-1596).
#include "config/validate/part_d_sections.h"
#include "config/validate/sections.h"

namespace mr {

std::vector<Section> sections_part_d() {
  using namespace part_d;
  return {
      {"activation-recompute", &activation_recompute},              // seed 1227-1246
      {"sequence-parallel", &sequence_parallel},                    // seed 1248-1260
      {"dynamic-context-parallel", &dynamic_context_parallel},      // seed 1262-1294
      {"variable-seq-lengths", &variable_seq_lengths},              // seed 1296-1312
      {"cuda-max-connections", &cuda_max_connections},              // seed 1313-1341
      {"fsdp-high-priority-streams", &fsdp_high_priority_streams},  // seed 1343-1350
      {"expert-gtp-weight-shards", &expert_gtp_weight_shards},      // seed 1353-1362
      {"gtp-remat-checks", &gtp_remat_checks},                      // seed 1364-1451
      {"bias-fusion", &bias_fusion},                                // seed 1453-1459
      {"qk-clip", &qk_clip},                                        // seed 1461-1472
      {"position-embedding", &position_embedding},                  // seed 1474-1494
      {"moe-spec", &moe_spec},                                      // seed 1496-1501
      {"expert-parallel", &expert_parallel},                        // seed 1503-1507
      {"moe-router", &moe_router},                                  // seed 1509-1513
      {"ckpt-format-dcp-dtensor", &dcp_dtensor_formats},            // seed 1515-1525
      {"varlen-dataset", &varlen_dataset},                          // seed 1527-1555
      {"sequence-packing", &sequence_packing},                      // seed 1557-1595
  };
}

}  // namespace mr
