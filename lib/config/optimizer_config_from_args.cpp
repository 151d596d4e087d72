#include "config/optimizer_config_from_args.h"

namespace mr {

namespace {

// `field = value`; an enum's value as Python's str() spells it (what the namespace holds).
template <class Field, class V>
void copy_arg(Field& field, const V& value) {
  if constexpr (std::is_enum_v<V>)
    field = std::string(arg::to_string(value));
  else
    field = value;
}

}  // namespace

OptimizerConfig optimizer_config_from(const Args& a) {
  OptimizerConfig c;
#define MR_COPY(field) copy_arg(c.field, a.field);
  MR_OPTIMIZER_CONFIG_ARGS(MR_COPY)
#undef MR_COPY
  return c;
}

DdpConfigView ddp_config_view_from(const Args& a) {
  DdpConfigView v;
  if (a.use_torch_fsdp2) return v;
#define MR_COPY(field) copy_arg(v.field, a.field);
  MR_DDP_CONFIG_ARGS(MR_COPY)
#undef MR_COPY
  return v;
}

}  // namespace mr
