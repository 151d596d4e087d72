#include "run/buffer_dtypes.h"

#include "run/model.h"

namespace mr::run {

namespace {

// A moment's storage as --exp-avg-dtype / --exp-avg-sq-dtype name it (both enums spell fp32, fp16, bf16, fp8);
// fp8 is Transformer Engine's e4m3 with a per-tensor scale.
template <class MomentDtype>
optim::DType moment_dtype(MomentDtype d) {
  switch (d) {
    case MomentDtype::fp32: return optim::DType::F32;
    case MomentDtype::fp16: return optim::DType::F16;
    case MomentDtype::bf16: return optim::DType::BF16;
    case MomentDtype::fp8: return optim::DType::E4M3;
  }
  return optim::DType::F32;
}

}  // namespace

BufferDtypes buffer_dtypes(const Args& a, const TargetEnv& target) {
  const optim::DType model = a.bf16 ? optim::DType::BF16 : a.fp16 ? optim::DType::F16 : optim::DType::F32;
  if (!a.use_precision_aware_optimizer || a.optimizer != arg::Optimizer::adam) return model;
  // The main params (16-bit training only): fp16 as asked, else fp32, kept as remainders beside bf16 params where
  // Megatron's Adam does (keeps_param_remainders, run/model.h) with the target's Transformer Engine (2.1 or newer;
  // --target-te-version, as the estimate of `megatron-run params` asks).
  const MainStorage main = a.main_params_dtype == arg::MainParamsDtype::fp16 ? MainStorage::F16
                           : keeps_param_remainders(a, target)            ? MainStorage::Remainder
                                                                          : MainStorage::F32;
  return {model, moment_dtype(a.exp_avg_dtype), moment_dtype(a.exp_avg_sq_dtype), main};
}

}  // namespace mr::run
