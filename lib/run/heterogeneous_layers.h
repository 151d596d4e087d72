// The per-layer blocks of a heterogeneous model (--heterogeneous-layers-config-path, the Llama-Nemotron
// "block_configs" of a Hugging Face config.json), as Megatron's HeterogeneousTransformerConfig reads them
// (megatron/core/transformer/heterogeneous/heterogeneous_config.py) and its layer spec builds them
// (megatron/core/models/gpt/heterogeneous/heterogeneous_layer_specs.py). Torch-free; validation has read the file
// into --heterogeneous-layers-config-encoded-json and checked the model flags against it before.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mr::run {

// What one half of a block is: gone (no_op: no parameters, no norm), one hidden x hidden linear layer
// (replace_with_linear), or the usual attention / MLP.
enum class BlockPart { Normal, NoOp, Linear };

struct HeterogeneousBlock {
  BlockPart attention = BlockPart::Normal;
  std::optional<int64_t> num_query_groups;  // num_query_groups, or num_attention_heads / n_heads_in_group
  BlockPart mlp = BlockPart::Normal;
  std::optional<int64_t> ffn_hidden_size;   // ffn_hidden_size, or ffn_mult's intermediate size
};

// ffn_mult -> the MLP's intermediate size: int(2 ffn_mult hidden / 3) rounded up to a multiple of 256
// (MLPConfig.ffn_mult_to_intermediate_size).
int64_t ffn_mult_to_intermediate_size(double ffn_mult, int64_t hidden);

// The blocks of the JSON text (its "block_configs": attention, and "ffn" or "mlp"). RunError (model.h) naming the
// block for what Megatron's config classes would refuse: a block that is not a mapping, n_heads_in_group not
// dividing the heads, a part both replaced (no_op / replace_with_linear) and sized.
std::vector<HeterogeneousBlock> heterogeneous_blocks(const std::string& json, int64_t num_attention_heads,
                                                     int64_t hidden_size);

}  // namespace mr::run
