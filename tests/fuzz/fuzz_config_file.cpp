// libFuzzer: one `--config` file (both layouts: plain flags/dests, and Megatron CI's MODEL_ARGS/ENV_VARS),
// loaded on top of the default namespace.
#include "config/parse/config_file.h"
#include "config/schema.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = mr::fuzz::write_scratch(data, size, ".yaml");
  mr::fuzz::expect_no_internal_error([&] {
    const mr::Schema& schema = mr::Schema::megatron();
    mr::Namespace ns = mr::default_namespace(schema);
    mr::ConfigOptions opts;
    opts.env = [](const std::string& name) -> std::optional<std::string> {
      if (name == "UNSET") return std::nullopt;
      return "/placeholder/" + name;
    };
    mr::apply_config_file(schema, path, ns, opts);
  });
  return 0;
}
