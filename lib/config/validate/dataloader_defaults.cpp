// Seed arguments.py 1139-1143 and 1182-1186 (validate_args): the dataloader type default, the dataset builder
// thread count, and the attention mask the dataset drops under inter-document masking.
#include <string>

#include "config/validate/section_functions.h"

namespace mr::section {

MR_RULE(kBuilderThreads, "dataloader.builder-threads-positive", "--num-dataset-builder-threads must be at least 1.");

void dataloader_defaults(Context& ctx) {
  // seed 1139-1140
  if (ctx.is_none("dataloader_type")) ctx.set("dataloader_type", "single", "dataloader-defaults");

  // seed 1143
  const Value& n = ctx["num_dataset_builder_threads"];
  if (!(n.is_number() && n.as_float() > 0))
    ctx.fail(kBuilderThreads, "--num-dataset-builder-threads must be positive, got " + n.py_str(),
             {"num_dataset_builder_threads"});
}

void dataloader_document_masking(Context& ctx) {
  // seed 1182-1186: the dataset leaves attention_mask out with inter-document masking, so the dataloader must
  // not build one either (the TP broadcast would not match).
  if (ctx.has("dataloader_inter_document_masking") && ctx.on("dataloader_inter_document_masking") &&
      ctx.on("create_attention_mask_in_dataloader"))
    ctx.set("create_attention_mask_in_dataloader", false, "dataloader-document-masking");
}

}  // namespace mr::section
