// Part C of the validation chain (seed arguments.py 957-1226 of validate_args): the section functions, one
// concern per file. Only part_c.cpp lists them; they live in their own namespace so no other part collides.
#pragma once

#include <string_view>

#include "config/validate/context.h"
#include "config/validate/python.h"

namespace mr::part_c {

// dtype_strings.cpp: seed 957-969, dtype names ('bf16', 'auto', ...) -> torch dtypes ("torch.bfloat16", None).
void dtype_strings(Context& ctx);
// low_precision_formats.cpp: seed 971-995, FP8/FP4 param gather, FP4/FP8 exclusivity, TE/FlashInfer gates.
void low_precision_formats(Context& ctx);
// megatron_fsdp.cpp: seed 996-1078, MoE megakernel vs FSDP, the Megatron-FSDP block, manual registration.
void megatron_fsdp(Context& ctx);
// params_dtype.cpp: seed 1080-1124, params_dtype, fp16 loss scaling, bf16 fp32 grad accumulation.
void params_dtype(Context& ctx);
// inference_graph_precision.cpp: seed 1126-1137, block-scope inference graphs with FP8, local graph count.
void inference_graph_precision(Context& ctx);
// dataloader_defaults.cpp: seed 1139-1143 (dataloader type, builder threads) and 1182-1186 (document masking).
void dataloader_defaults(Context& ctx);
void dataloader_document_masking(Context& ctx);
// model_dimensions.cpp: seed 1145-1180 (layers, required args, ffn/kv sizes, CP sequence split) and
// 1188-1200 (seq_length / encoder_seq_length / max_position_embeddings).
void model_dimensions(Context& ctx);
void sequence_lengths(Context& ctx);
// save_schedule.cpp: seed 1201-1208, --save interval checks.
void save_schedule(Context& ctx);
// mixed_precision_checks.cpp: seed 1209-1224, fp16/fp32 flags, grouped GEMM capability, persistent layer norm.
void mixed_precision_checks(Context& ctx);


}  // namespace mr::part_c
