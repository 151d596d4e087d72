// The dtypes of the training run's buffers, from its arguments: what the run allocates (run/buffers.h) and what the
// memory estimate (run/memory_estimate.h, `megatron-run params`) counts, from this one mapping. Torch-free
// (mr_run_model).
#pragma once

#include <cstdint>

#include "config/args.h"
#include "config/target_env.h"
#include "optim/dtype.h"

namespace mr::run {

// How the main params of 16-bit training are kept (FlatBuffers::has_main): fp32; fp16 with one fp32 scale per
// parameter shard (--main-params-dtype fp16 with the precision-aware optimizer); or, for bf16 params with the
// precision-aware optimizer, as the 16 low bits of the fp32 master beside the bf16 param (Transformer Engine's
// store_param_remainders, on in Megatron from TE 2.1): the pair is the exact fp32 master (optim/dtype.h).
enum class MainStorage : uint8_t { F32, F16, Remainder };

// The dtypes of the buffers: the model's (--bf16, --fp16) and, with the precision-aware optimizer
// (--use-precision-aware-optimizer, Adam only), Adam's moments (--exp-avg-dtype, --exp-avg-sq-dtype: fp32, bf16, or
// fp16 or fp8 (e4m3) with one fp32 scale per parameter shard, as Transformer Engine's FusedAdam keeps them) and the
// main params.
// A model dtype alone converts: fp32 moments and main params.
struct BufferDtypes {
  optim::DType model = optim::DType::F32, exp_avg = optim::DType::F32, exp_avg_sq = optim::DType::F32;
  MainStorage main = MainStorage::F32;
  BufferDtypes() = default;
  BufferDtypes(optim::DType m) : model(m) {}  // NOLINT(google-explicit-constructor): a model dtype is the common case
  BufferDtypes(optim::DType m, optim::DType m1, optim::DType m2, MainStorage mp = MainStorage::F32)
      : model(m), exp_avg(m1), exp_avg_sq(m2), main(mp) {}
};
// The run's dtypes from its arguments: the precision-aware optimizer's moments in fp32, bf16, fp16 or fp8 (e4m3),
// the last two with a per-parameter scale (optim/dtype.h's state_scale); the main params as the target's Transformer
// Engine keeps them (keeps_param_remainders, run/model.h).
BufferDtypes buffer_dtypes(const Args& a, const TargetEnv& target = {});
// Bytes per element of the main params as `main` keeps them (a remainder: its 16 bits beside the bf16 param).
inline int main_storage_bytes(MainStorage m) { return m == MainStorage::F32 ? 4 : 2; }

}  // namespace mr::run
