// Megatron's gradient buffer dtype for the run and the memory estimate (run/grad_format.h).
#include "run/grad_format.h"

#include "config/args.h"

namespace mr::run {

GradFormat grad_format(const Args& a) {
  if (!a.fp16 && !a.bf16) return {};
  const optim::DType params = a.fp16 ? optim::DType::F16 : optim::DType::BF16;
  return {a.accumulate_allreduce_grads_in_fp32 ? optim::DType::F32 : params, a.fp16};
}

}  // namespace mr::run
