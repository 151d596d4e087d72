// Seed arguments.py 957-969 (validate_args): dtype names given on the command line become torch dtypes.
// A torch dtype is represented by Python's str() of it ("torch.bfloat16"); 'auto' and None become None.
#include <string>

#include "config/validate/section_functions.h"

namespace mr::section {

MR_RULE(kUnknownDtypeName, "dtype.unknown-name",
        "A dtype option must be one of fp32, bf16, fp16, fp8 or auto.");

namespace {

// The seed's lookup table; a string that is not in it makes Megatron fail with a KeyError.
bool lookup_dtype(const Value& v, Value& out) {
  if (v.is_none()) {
    out = Value();
    return true;
  }
  if (!v.is_str()) return false;
  const std::string& s = v.as_str();
  if (s.rfind("torch.", 0) == 0) {  // already a torch dtype: kept as it is
    out = v;
    return true;
  }
  if (s == "fp32") out = Value("torch.float32");
  else if (s == "bf16") out = Value("torch.bfloat16");
  else if (s == "fp16") out = Value("torch.float16");
  else if (s == "fp8") out = Value("torch.uint8");
  else if (s == "auto") out = Value();
  else return false;
  return true;
}

void map_dtype(Context& ctx, std::string_view dest) {
  // seed 965 reads logit_dtype with a None fallback; the others must exist.
  Value cur = ctx.has(dest) ? ctx[dest] : Value();
  Value mapped;
  if (!lookup_dtype(cur, mapped))
    ctx.fail(kUnknownDtypeName,
             Context::flag(dest) + " has dtype " + cur.py_repr() + ", expected one of fp32, bf16, fp16, fp8, auto",
             {dest});
  assign(ctx, dest, mapped, "dtype-strings");
}

}  // namespace

void dtype_strings(Context& ctx) {
  for (std::string_view dest : {"mamba_inference_conv_states_dtype", "mamba_inference_ssm_states_dtype",
                                "mamba_training_ssm_states_dtype", "logit_dtype", "megatron_fsdp_main_params_dtype",
                                "megatron_fsdp_main_grads_dtype", "megatron_fsdp_grad_comm_dtype"})
    map_dtype(ctx, dest);
}

}  // namespace mr::section
