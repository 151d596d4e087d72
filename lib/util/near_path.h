// "Did you mean" for a path that does not exist: the existing path a typo most likely meant
// (`configs/gpt-tny.yaml` -> `configs/gpt-tiny.yaml`, `confgs/default.yaml` -> `configs/default.yaml`).
#pragma once

#include <string>

namespace mr {

// The existing path nearest to `path`, or "" when there is none worth suggesting. Walks `path` one component at a
// time; a component that does not exist is replaced by the name within a few edits of it (closest_words,
// util/text.h) in its parent directory (which must exist and be listable; at most limits below are read). The
// answer differs from `path`, exists, and is of the kind asked for: a regular file (`want_dir` false; a symbolic
// link to one counts) or a directory. Never follows a suggestion through "." or "..": those are not typos.
std::string near_path(const std::string& path, bool want_dir = false);

namespace near_path_limits {
// Directory entries read per missing component (a directory with more is searched in its first entries only) and
// missing components corrected per path: the search costs at most kMaxEntries * kMaxFixes distance computations.
inline constexpr std::size_t kMaxEntries = 10000;
inline constexpr std::size_t kMaxFixes = 4;
}  // namespace near_path_limits

}  // namespace mr
