// Heterogeneous layer blocks (run/heterogeneous_layers.h).
#include "run/heterogeneous_layers.h"

#include <cmath>

#include "config/limits.h"
#include "config/value.h"
#include "run/model.h"

namespace mr::run {

namespace {

// obj[key] (the last duplicate wins, as in json.loads), or null when absent.
const Value* member(const Value& obj, const std::string& key) {
  const Value* found = nullptr;
  for (const auto& [k, v] : obj.as_object())
    if (k == key) found = &v;
  return found;
}

// An integer size from the JSON (an int, or a float with no fraction), else RunError naming it.
int64_t whole(const Value& v, const std::string& what) {
  if (v.is_int() && !v.is_bool()) return v.as_int();
  if (v.is_float() && std::isfinite(v.as_float()) && v.as_float() == std::floor(v.as_float()) &&
      std::fabs(v.as_float()) < 9.0e15)
    return static_cast<int64_t>(v.as_float());
  throw RunError(what + " is " + v.py_repr() + ", not a whole number");
}

BlockPart part_of(const Value& cfg) {
  const Value* no_op = member(cfg, "no_op");
  const Value* linear = member(cfg, "replace_with_linear");
  if (no_op && no_op->truthy()) return BlockPart::NoOp;
  if (linear && linear->truthy()) return BlockPart::Linear;
  return BlockPart::Normal;
}

}  // namespace

int64_t ffn_mult_to_intermediate_size(double ffn_mult, int64_t hidden) {
  // int(2 * ffn_mult * hidden / 3): Python evaluates left to right in doubles and truncates towards zero.
  const double exact = 2.0 * ffn_mult * static_cast<double>(hidden) / 3.0;
  if (!std::isfinite(exact) || std::fabs(exact) > 9.0e15)
    throw RunError("ffn_mult " + std::to_string(ffn_mult) + " gives no usable MLP size");
  const int64_t n = static_cast<int64_t>(exact);
  const int64_t k = 256, r = ((n % k) + k) % k;  // Python's n % k, never negative
  return r == 0 ? n : n + k - r;                  // find_multiple(n, 256)
}

std::vector<HeterogeneousBlock> heterogeneous_blocks(const std::string& json, int64_t num_attention_heads,
                                                     int64_t hidden_size) {
  Value doc;
  try {
    doc = Value::parse_json(json, limits::kMaxJsonValues);
  } catch (const JsonTooManyValues& e) {  // validation refuses it first (heterogeneous_config.cpp)
    throw RunError("the heterogeneous layers config holds more than " + std::to_string(e.limit) + " JSON values");
  } catch (const std::exception& e) {
    throw RunError(std::string("the heterogeneous layers config is not valid JSON: ") + e.what());
  }
  const Value* list = doc.is_object() ? member(doc, "block_configs") : nullptr;
  if (!list || !list->is_list()) throw RunError("the heterogeneous layers config has no 'block_configs' list");
  std::vector<HeterogeneousBlock> out;
  int64_t i = 0;
  for (const Value& block : list->as_list()) {
    const std::string where = "block_configs[" + std::to_string(i++) + "]";
    if (!block.is_object()) throw RunError(where + " is not a mapping");
    HeterogeneousBlock b;
    // AttentionConfig.build_config_from_dict: num_query_groups, or num_attention_heads // n_heads_in_group.
    const Value* att = member(block, "attention");
    if (!att || !att->is_object()) throw RunError(where + " has no 'attention' mapping");
    b.attention = part_of(*att);
    if (const Value* g = member(*att, "num_query_groups")) {
      if (!g->is_none()) b.num_query_groups = whole(*g, where + ".attention.num_query_groups");
    } else {
      const Value* per = member(*att, "n_heads_in_group");
      if (!per) throw RunError(where + ".attention has neither 'num_query_groups' nor 'n_heads_in_group'");
      if (!per->is_none()) {
        const int64_t n = whole(*per, where + ".attention.n_heads_in_group");
        if (n <= 0 || num_attention_heads % n != 0)
          throw RunError(where + ": num_attention_heads (" + std::to_string(num_attention_heads) +
                         ") must be a multiple of n_heads_in_group (" + std::to_string(n) + ")");
        b.num_query_groups = num_attention_heads / n;
      }
    }
    // MLPConfig.build_config_from_dict: "ffn" (or "mlp"); ffn_hidden_size, or ffn_mult's size.
    const Value* mlp = member(block, "ffn");
    if (!mlp || !mlp->truthy()) mlp = member(block, "mlp");
    if (!mlp || !mlp->is_object()) throw RunError(where + " has no 'ffn' (or 'mlp') mapping");
    b.mlp = part_of(*mlp);
    if (const Value* f = member(*mlp, "ffn_hidden_size")) {
      if (!f->is_none()) b.ffn_hidden_size = whole(*f, where + ".ffn.ffn_hidden_size");
    } else {
      const Value* mult = member(*mlp, "ffn_mult");
      if (!mult) throw RunError(where + ".ffn has neither 'ffn_hidden_size' nor 'ffn_mult'");
      if (!mult->is_none()) {
        if (!mult->is_number()) throw RunError(where + ".ffn.ffn_mult is " + mult->py_repr() + ", not a number");
        b.ffn_hidden_size = ffn_mult_to_intermediate_size(mult->as_float(), hidden_size);
      }
    }
    // HeterogeneousTransformerConfig.get_config_for_layer: a sized part is neither gone nor replaced.
    if (b.num_query_groups && b.attention != BlockPart::Normal)
      throw RunError(where + ": an attention with num_query_groups / n_heads_in_group cannot be no_op or "
                             "replace_with_linear");
    if (b.ffn_hidden_size && b.mlp != BlockPart::Normal)
      throw RunError(where + ": an MLP with ffn_hidden_size / ffn_mult cannot be no_op or replace_with_linear");
    out.push_back(b);
  }
  return out;
}

}  // namespace mr::run
