// Helpers for the model plan's tests (model_test.cpp, model_attention_test.cpp, model_moe_test.cpp): a small
// GPT's resolved arguments, a parameter by name, the elements a plan counts once.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "config/args.h"
#include "config/namespace.h"
#include "config/value.h"
#include "../config/validated_fills.h"
#include "run/model.h"

namespace mrtest {

// The resolved arguments of a small GPT (what validation derives already filled in), as their typed view.
inline mr::Args gpt(std::map<std::string, mr::Value> over = {}) {
  std::map<std::string, mr::Value> v = {{"num_layers", mr::Value(int64_t{4})},
                                        {"hidden_size", mr::Value(int64_t{64})},
                                        {"num_attention_heads", mr::Value(int64_t{4})},
                                        {"kv_channels", mr::Value(int64_t{16})},
                                        {"ffn_hidden_size", mr::Value(int64_t{256})},
                                        {"num_query_groups", mr::Value(int64_t{1})},
                                        {"group_query_attention", mr::Value(false)},
                                        {"vocab_size", mr::Value(int64_t{1000})},
                                        {"make_vocab_size_divisible_by", mr::Value(int64_t{128})},
                                        {"max_position_embeddings", mr::Value(int64_t{32})},
                                        {"normalization", mr::Value(std::string("LayerNorm"))},
                                        {"add_bias_linear", mr::Value(true)},
                                        {"transformer_impl", mr::Value(std::string("transformer_engine"))},
                                        {"position_embedding_type", mr::Value(std::string("learned_absolute"))},
                                        {"untie_embeddings_and_output_weights", mr::Value(false)}};
  for (auto& [k, x] : over) v[k] = x;
  mr::Namespace ns;
  for (auto& [k, x] : v) ns.set(k, x, {});
  fill_as_validated(ns);  // the batch sizes and expert TP, as validation derives them
  return mr::Args::from(ns);
}

inline const mr::run::ParamSpec* find(const mr::run::ModelPlan& p, const std::string& name) {
  for (const mr::run::ParamSpec& s : p.params)
    if (s.name == name) return &s;
  return nullptr;
}

// Elements counted once across the model: TP duplicates on TP rank 0 only, tied copies not at all.
inline int64_t counted(const mr::run::ModelPlan& p, int64_t tp_rank) {
  int64_t n = 0;
  for (const mr::run::ParamSpec& s : p.params)
    if (!(s.tp_duplicate && tp_rank != 0) && !s.shared_copy) n += s.numel();
  return n;
}

}  // namespace mrtest
