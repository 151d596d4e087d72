// OptimizerConfig built from the arguments: see optimizer_config.h. Seed: ../shared/spec/optimizer_config.py.
#include "config/optimizer_config.h"

namespace mr {

// ---------------------------------------------------------------------------------------------------------
// Building from the arguments (Megatron's get_megatron_optimizer_config: fields copied by name)
// ---------------------------------------------------------------------------------------------------------

namespace {

// `field = args.<dest>` when the namespace has the dest, read as the field's type (None -> nullopt).
void read(const Namespace& args, const char* dest, bool& field) {
  if (args.has(dest)) field = args.get(dest).truthy();
}
void read(const Namespace& args, const char* dest, double& field) {
  if (args.has(dest)) field = args.get(dest).as_float();
}
void read(const Namespace& args, const char* dest, int64_t& field) {
  if (args.has(dest)) field = args.get(dest).as_int();
}
void read(const Namespace& args, const char* dest, std::string& field) {
  if (args.has(dest)) field = args.get(dest).as_str();
}
void read(const Namespace& args, const char* dest, std::optional<double>& field) {
  if (!args.has(dest)) return;
  const Value& v = args.get(dest);
  field = v.is_none() ? std::nullopt : std::optional<double>(v.as_float());
}
void read(const Namespace& args, const char* dest, std::optional<std::string>& field) {
  if (!args.has(dest)) return;
  const Value& v = args.get(dest);
  field = v.is_none() ? std::nullopt : std::optional<std::string>(v.as_str());
}

}  // namespace

OptimizerConfig OptimizerConfig::from_args(const Namespace& args) {
  OptimizerConfig c;
#define MR_READ(field) read(args, #field, c.field);
  MR_OPTIMIZER_CONFIG_ARGS(MR_READ)
  return c;
}

DdpConfigView DdpConfigView::from_args(const Namespace& args) {
  DdpConfigView v;
  if (args.has("use_torch_fsdp2") && args.get("use_torch_fsdp2").truthy()) return v;
#define MR_READ_DDP(field) read(args, #field, v.field);
  MR_DDP_CONFIG_ARGS(MR_READ_DDP)
  return v;
}
#undef MR_READ_DDP
#undef MR_READ

}  // namespace mr
