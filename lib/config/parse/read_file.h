// How the parser reads the files it is given: config files, `check` arguments, --yaml-cfg, --target-env,
// --heterogeneous-layers-config-path, --result-rejected-tracker-filename. The reading is util/bounded_file.h's
// (no input can make it hang, read without end or exhaust memory); this layer words its refusals as rule ids.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "config/limits.h"
#include "config/parse/argparse.h"
#include "util/bounded_file.h"  // the reader itself; describe_bytes

namespace mr {

// The whole content of the regular file `path`. `what` names the file in messages ("config file",
// "--yaml-cfg file"); `flags` are the options involved (for JSON diagnostics). Throws UsageError (exit 2),
// its message starting with the path:
//   input.unreadable        the file cannot be opened or read (the system's reason: no such file, permission
//                           denied, input/output error as for /proc/self/mem); a missing file's message ends in
//                           "(did you mean PATH?)" where an existing file is a typo away (util/near_path.h)
//   input.not-regular-file  a directory, named pipe, socket, character or block device
//   input.file-too-large    more than `max_bytes` bytes
std::string read_input_file(const std::string& path, const std::string& what, const std::vector<std::string>& flags = {},
                            std::size_t max_bytes = limits::kMaxInputFileBytes);

// read_input_file's refusals that stat tells (no such file, not a regular file, too large), without opening or
// reading `path`: for a caller that wants to skip costly work for a file that cannot be read.
void check_input_file(const std::string& path, const std::string& what, const std::vector<std::string>& flags = {},
                      std::size_t max_bytes = limits::kMaxInputFileBytes);


}  // namespace mr
