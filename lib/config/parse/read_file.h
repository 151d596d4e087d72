// The one reader of the files megatron-run is given: config files, `check` arguments, --yaml-cfg,
// --target-env, --heterogeneous-layers-config-path, --result-rejected-tracker-filename. No input can make it
// hang (a named pipe is never opened for a blocking read), read without end (/dev/zero) or exhaust memory (a
// file past limits::kMaxInputFileBytes is refused before it is read).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "config/limits.h"
#include "config/parse/argparse.h"

namespace mr {

// The whole content of the regular file `path`. `what` names the file in messages ("config file",
// "--yaml-cfg file"); `flags` are the options involved (for JSON diagnostics). Throws UsageError (exit 2),
// its message starting with the path:
//   input.unreadable        the file cannot be opened or read (the system's reason: no such file, permission
//                           denied, input/output error as for /proc/self/mem)
//   input.not-regular-file  a directory, named pipe, socket, character or block device
//   input.file-too-large    more than `max_bytes` bytes
std::string read_input_file(const std::string& path, const std::string& what, const std::vector<std::string>& flags = {},
                            std::size_t max_bytes = limits::kMaxInputFileBytes);

// read_input_file's refusals that stat tells (no such file, not a regular file, too large), without opening or
// reading `path`: for a caller that wants to skip costly work for a file that cannot be read.
void check_input_file(const std::string& path, const std::string& what, const std::vector<std::string>& flags = {},
                      std::size_t max_bytes = limits::kMaxInputFileBytes);

// "64 MiB", "512 KiB", "100 bytes": a limit for messages.
std::string describe_bytes(std::size_t n);

}  // namespace mr
