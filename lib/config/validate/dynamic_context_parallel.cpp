// Hybrid (deprecated) / dynamic context parallelism (seed arguments.py 1262-1294).
#include <vector>

#include "config/validate/section_functions.h"

namespace mr::section {

MR_WARNING(kHybridCpDeprecated, "dynamic-cp.hybrid-deprecated",
           "--hybrid-context-parallel is deprecated in favour of --dynamic-context-parallel.");
MR_RULE(kHybridAndDynamic, "dynamic-cp.hybrid-and-dynamic",
        "--hybrid-context-parallel and --dynamic-context-parallel cannot both be set.");
MR_RULE(kDynamicCpFsdp, "dynamic-cp.no-megatron-fsdp",
        "Dynamic context parallelism does not support --use-megatron-fsdp.");
MR_RULE(kDynamicCpDataloader, "dynamic-cp.single-dataloader",
        "Dynamic context parallelism needs --dataloader-type single.");
MR_RULE(kDynamicCpScheduler, "dynamic-cp.scheduler",
        "Dynamic context parallelism needs --sequence-packing-scheduler default_dynamic_cp.");
MR_RULE(kDynamicCpMinSize, "dynamic-cp.min-group-size",
        "--min-dynamic-context-parallel-size must be a valid dynamic-CP group size for DP x CP.");

namespace {

// megatron.core.parallel_state.get_valid_dynamic_context_parallel_group_sizes is missing from the public tree;
// implemented from the seed's use and upstream's tests (8 -> [1, 2, 4, 8], 6 -> [1, 2, 6]): the powers of two
// that divide the DPxCP size, plus the whole DPxCP group.
std::vector<int64_t> valid_dynamic_cp_group_sizes(int64_t dp_cp_size) {
  std::vector<int64_t> sizes;
  for (int64_t p = 1; p < dp_cp_size; p *= 2) {  // at most 63 doublings: p stops before it could overflow
    if (dp_cp_size % p == 0) sizes.push_back(p);
    if (p > dp_cp_size / 2) break;
  }
  sizes.push_back(dp_cp_size);
  return sizes;
}

std::string py_list(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t k = 0; k < v.size(); ++k) s += (k ? ", " : "") + std::to_string(v[k]);
  return s + "]";
}

}  // namespace

void dynamic_context_parallel(Context& ctx) {
  if (ctx.on("hybrid_context_parallel")) {
    ctx.warn(kHybridCpDeprecated, "--hybrid-context-parallel is deprecated; use --dynamic-context-parallel",
             {"hybrid_context_parallel"});
    if (ctx.on("dynamic_context_parallel"))
      ctx.fail(kHybridAndDynamic,
               "--hybrid-context-parallel (deprecated) and --dynamic-context-parallel cannot be combined; keep "
               "--dynamic-context-parallel",
               {"hybrid_context_parallel", "dynamic_context_parallel"});
    ctx.set("dynamic_context_parallel", true, "--hybrid-context-parallel (deprecated spelling)");
    ctx.set("hybrid_context_parallel", false, "--hybrid-context-parallel forwarded to --dynamic-context-parallel");
  }

  if (!ctx.on("dynamic_context_parallel")) return;
  ctx.require(!ctx.on("use_megatron_fsdp"), kDynamicCpFsdp,
              "--dynamic-context-parallel cannot be used with --use-megatron-fsdp",
              {"dynamic_context_parallel", "use_megatron_fsdp"});
  ctx.require(ctx["dataloader_type"] == Value("single"), kDynamicCpDataloader,
              "--dynamic-context-parallel needs --dataloader-type single (got " + show(ctx, "dataloader_type") + ")",
              {"dynamic_context_parallel", "dataloader_type"});
  if (ctx.is_none("sequence_packing_scheduler"))
    ctx.set("sequence_packing_scheduler", "default_dynamic_cp", "default scheduler for dynamic context parallelism");
  if (ctx["sequence_packing_scheduler"] != Value("default_dynamic_cp"))
    ctx.fail(kDynamicCpScheduler,
             "--dynamic-context-parallel needs --sequence-packing-scheduler default_dynamic_cp (got " +
                 show(ctx, "sequence_packing_scheduler") + ")",
             {"dynamic_context_parallel", "sequence_packing_scheduler"});

  const int64_t dp_cp_size = ctx.mul(ctx.i("data_parallel_size"), ctx.i("context_parallel_size"),
                                     "the data-parallel x context-parallel size", {"world_size", "context_parallel_size"});
  const auto valid = valid_dynamic_cp_group_sizes(dp_cp_size);
  const Value& min_size = ctx["min_dynamic_context_parallel_size"];
  bool found = false;
  for (int64_t s : valid) found = found || min_size == Value(static_cast<long long>(s));
  if (!found)
    ctx.fail(kDynamicCpMinSize,
             "--min-dynamic-context-parallel-size " + min_size.py_str() + " is not a dynamic-CP group size for " +
                 "data-parallel x context-parallel size " + std::to_string(dp_cp_size) + "; valid sizes: " +
                 py_list(valid),
             {"min_dynamic_context_parallel_size", "context_parallel_size"});
}

}  // namespace mr::section
