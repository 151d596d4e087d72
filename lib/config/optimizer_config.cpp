// OptimizerConfig built from the arguments: see optimizer_config.h. Seed: ../shared/spec/optimizer_config.py.
#include "config/optimizer_config.h"

#include "config/args.h"

namespace mr {

// ---------------------------------------------------------------------------------------------------------
// Building from the arguments (Megatron's get_megatron_optimizer_config: fields copied by name)
// ---------------------------------------------------------------------------------------------------------

namespace {

// `field = value`, read as the field's type (None -> nullopt).
void read(const Value& v, bool& field) { field = v.truthy(); }
void read(const Value& v, double& field) { field = v.as_float(); }
void read(const Value& v, int64_t& field) { field = v.as_int(); }
void read(const Value& v, std::string& field) { field = v.as_str(); }
void read(const Value& v, std::optional<double>& field) {
  field = v.is_none() ? std::nullopt : std::optional<double>(v.as_float());
}
void read(const Value& v, std::optional<std::string>& field) {
  field = v.is_none() ? std::nullopt : std::optional<std::string>(v.as_str());
}

// args.<dest>, or the schema's default where the namespace lacks the dest: Megatron's args always hold every dest
// (argparse sets the defaults), so the argument's default, not the dataclass's, is what the config gets. The same
// default the typed view (Args) holds for an absent dest, so both builders agree (one source of defaults).
const Value& arg_or_default(const Namespace& args, ArgId id) {
  const std::string_view dest = dest_of(id);
  return args.has(dest) ? args.get(dest) : default_of(id);
}

}  // namespace

OptimizerConfig OptimizerConfig::from_args(const Namespace& args) {
  OptimizerConfig c;
#define MR_READ(field) read(arg_or_default(args, ArgId::field), c.field);
  MR_OPTIMIZER_CONFIG_ARGS(MR_READ)
  return c;
}

DdpConfigView DdpConfigView::from_args(const Namespace& args) {
  DdpConfigView v;
  if (arg_or_default(args, ArgId::use_torch_fsdp2).truthy()) return v;
#define MR_READ_DDP(field) read(arg_or_default(args, ArgId::field), v.field);
  MR_DDP_CONFIG_ARGS(MR_READ_DDP)
  return v;
}
#undef MR_READ_DDP
#undef MR_READ

}  // namespace mr
