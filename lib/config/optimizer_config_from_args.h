// OptimizerConfig from the typed view of the arguments (config/args.h), for the runtime: the same field list
// (MR_OPTIMIZER_CONFIG_ARGS, optimizer_config.h) as OptimizerConfig::from_args(Namespace) builds for validation,
// with the names checked by the compiler.
#pragma once

#include "config/args.h"
#include "config/optimizer_config.h"

namespace mr {

OptimizerConfig optimizer_config_from(const Args& args);
DdpConfigView ddp_config_view_from(const Args& args);

}  // namespace mr
