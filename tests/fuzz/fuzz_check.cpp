// libFuzzer: what `megatron-run check --world-size 8 FILE` does for one file: parse, then the whole
// validation chain (Megatron's validate_args, the OptimizerConfig checks, ours).
#include "config/schema.h"
#include "config/validate/resolve.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = mr::fuzz::write_scratch(data, size, ".yaml");
  mr::fuzz::expect_no_internal_error([&] {
    mr::Invocation inv;
    inv.config_files = {path};
    inv.world_size = 8;
    inv.config.env = [](const std::string& name) -> std::optional<std::string> { return "/placeholder/" + name; };
    (void)mr::resolve(mr::Schema::megatron(), inv);
  });
  return 0;
}
