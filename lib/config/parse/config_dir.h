// `megatron-run check DIR`: the YAML config files under a directory, each to be checked as if named on the
// command line (docs/config-files.md, "Checking a directory").
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "config/diagnostic.h"

namespace mr {

// A path `check` found under a directory: a file to check, or a failure of the walk itself to report in its place.
struct ConfigDirEntry {
  std::string path;                  // DIR, then the names below it joined with '/' (DIR's spelling kept, but
                                     // for the slashes it ends with: `a//` lists a/ok.yaml)
  std::optional<UsageError> error;   // input.unreadable (a folder that cannot be listed) or input.no-config-files
};

// Whether `path` is a directory, following a symbolic link (a link named on the command line is what it names).
bool is_directory(const std::string& path);

// The *.yaml and *.yml files (the extension in any case: A.YAML, b.Yml) under the directory `dir`, recursively,
// sorted by path (byte order: `find DIR ... |
// LC_ALL=C sort`). Left out: a name starting with '.' (hidden files and folders, and what is under them; `dir`
// itself may be hidden) and a symbolic link to a folder, whatever its name (never followed, so a link loop cannot
// make the walk run without end). A link with a YAML name to anything else is listed, and checked as whatever it
// points to. Whatever else has a YAML name is listed (a named pipe, a dangling link: checking it fails with its
// reason). A folder that cannot be listed is an entry with an input.unreadable error naming it; a walk that finds
// nothing at all is one entry, `dir`, with an input.no-config-files error, so that an empty tree never passes in
// silence. Memory: one path per entry and per folder waiting to be listed.
std::vector<ConfigDirEntry> list_config_dir(const std::string& dir);

}  // namespace mr
