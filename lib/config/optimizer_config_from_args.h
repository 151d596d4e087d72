// OptimizerConfig from the typed view of the arguments (config/args.h), for the runtime: the same copy as
// OptimizerConfig::from_args(Namespace) (every field whose name is an argument dest takes its value; the fields
// without a dest keep their defaults), with the names checked by the compiler.
#pragma once

#include "config/args.h"
#include "config/optimizer_config.h"

namespace mr {

OptimizerConfig optimizer_config_from(const Args& args);
DdpConfigView ddp_config_view_from(const Args& args);

}  // namespace mr
