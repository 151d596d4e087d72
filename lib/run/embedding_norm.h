// --embedding-min-norm in the training run (Megatron's OptimizerConfig.embedding_min_norm): after each optimizer
// step, the rows of the input word embeddings whose L2 norm is nonzero and below the threshold are rescaled to norm
// 2 x threshold (run/row_rescale.h: the arithmetic, shared by the backends). Internal to lib/run.
#pragma once

#include <cstdint>
#include <vector>

#include "run/exact_stats.h"
#include "run/run_context.h"

namespace mr::run {

// Whether p is a copy of the input word embeddings: the first stage's, the last stage's tied output layer (a copy
// stepped with the same gradient: rescaled alike, so that the copies stay equal), an MTP stage's.
bool is_input_embedding(const ParamSpec& p);

// Each row's scale 2^E for its exact sum of squares from its max |x| (as bits, combined over the ranks): the row's
// own exponent (run/exact_stats.h's fixed_exponent); 0 for an all-zero row or one holding an inf/NaN (not summed).
// Then each row's factor from its sum at that scale (row_factor: 1 for the rows left unchanged).
std::vector<double> row_scales(const std::vector<uint32_t>& max_bits);
std::vector<float> row_factors(const std::vector<Fixed>& sums, const std::vector<double>& scales, double min_norm);

// The rescale over this rank's pieces of every input-embedding copy (nothing when the flag is unset); the
// per-row maxima and sums over the data-parallel shard group with the distributed optimizer (a row may straddle
// two ranks' shards), exact, so the same bits under every layout. The model params of the rows are stored from
// their rescaled masters; publish_params spreads them as after any step.
void apply_embedding_min_norm(RunContext& c);

}  // namespace mr::run
