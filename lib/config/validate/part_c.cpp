// Part C of the validation chain: see sections.h for the seed lines it covers (arguments.py 957-1226 of
// validate_args), in the seed's order. The sections live in one file per concern; part_c_sections.h lists them.
#include "config/validate/part_c_sections.h"
#include "config/validate/sections.h"

namespace mr {

std::vector<Section> sections_part_c() {
  return {
      {"dtype-strings", &part_c::dtype_strings},                          // seed 957-969
      {"low-precision-formats", &part_c::low_precision_formats},          // seed 971-995
      {"megatron-fsdp", &part_c::megatron_fsdp},                          // seed 996-1078
      {"params-dtype", &part_c::params_dtype},                            // seed 1080-1124
      {"inference-graph-precision", &part_c::inference_graph_precision},  // seed 1126-1137
      {"dataloader-defaults", &part_c::dataloader_defaults},              // seed 1139-1143
      {"model-dimensions", &part_c::model_dimensions},                    // seed 1145-1180
      {"dataloader-document-masking", &part_c::dataloader_document_masking},  // seed 1182-1186
      {"sequence-lengths", &part_c::sequence_lengths},                    // seed 1188-1200
      {"save-schedule", &part_c::save_schedule},                          // seed 1201-1208
      {"mixed-precision-checks", &part_c::mixed_precision_checks},        // seed 1209-1224
  };
}

}  // namespace mr
