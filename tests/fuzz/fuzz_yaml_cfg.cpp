// libFuzzer: a `--yaml-cfg` file (Megatron's nested YAML config), as load_yaml converts it.
#include "config/parse/yaml_cfg.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = mr::fuzz::write_scratch(data, size, ".yaml");
  mr::fuzz::expect_no_internal_error([&] {
    mr::ConfigOptions opts;
    opts.env = [](const std::string& name) -> std::optional<std::string> { return "/placeholder/" + name; };
    std::map<std::string, std::string> where;
    std::vector<std::string> warnings;
    mr::load_yaml_cfg_file(path, opts, &where, &warnings);
  });
  return 0;
}
