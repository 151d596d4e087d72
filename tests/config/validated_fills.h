// For the tests that build a namespace by hand and take its typed view (mr::Args::from): the dests validate_args
// always gives a value (mr::validation_fills; the view refuses a None there, args.h), filled as validation fills
// them from the values the namespace holds, and --moe-ffn-hidden-size, which it fills with --num-experts. The sizes
// validation requires (--num-layers, --hidden-size, --num-attention-heads, --max-position-embeddings,
// --micro-batch-size) are a small GPT's unless given.
#pragma once

#include <cstdint>

#include "config/namespace.h"
#include "config/value.h"

namespace mrtest {

inline void fill_as_validated(mr::Namespace& ns) {
  auto given = [&](const char* d) { return ns.has(d) && !ns[d].is_none(); };
  auto get = [&](const char* d, int64_t otherwise) { return given(d) ? ns[d].as_int() : otherwise; };
  auto put = [&](const char* d, int64_t v) {
    if (!given(d)) ns.set(d, mr::Value(v), {mr::Provenance::Kind::Derived, "the test, as validation fills it"});
  };
  put("num_layers", 2);
  put("hidden_size", 64);
  put("num_attention_heads", 4);
  put("max_position_embeddings", 128);
  put("micro_batch_size", 1);
  put("expert_tensor_parallel_size", get("tensor_model_parallel_size", 1));         // seed :521
  put("global_batch_size", get("micro_batch_size", 1) * get("data_parallel_size", 1));  // seed :636
  put("eval_global_batch_size", get("global_batch_size", 1));                           // seed :642
  put("eval_micro_batch_size", get("micro_batch_size", 1));                             // seed :644
  const int64_t h = get("hidden_size", 64);
  const bool swiglu = ns.has("swiglu") && ns["swiglu"].truthy();
  put("ffn_hidden_size", swiglu ? static_cast<int64_t>(4.0 * h * 2 / 3 / 64) * 64 : 4 * h);  // seed :1161
  // seed :1172 (a test of the plan's own refusals may give --num-attention-heads 0 with --kv-channels: no division)
  if (!given("kv_channels") && get("num_attention_heads", 4) != 0) put("kv_channels", h / get("num_attention_heads", 4));
  // Not always filled, so optional in the view: --moe-ffn-hidden-size takes --ffn-hidden-size's value with
  // --num-experts (seed :1499).
  if (get("num_experts", 0) > 0) put("moe_ffn_hidden_size", get("ffn_hidden_size", 4 * h));
}

}  // namespace mrtest
