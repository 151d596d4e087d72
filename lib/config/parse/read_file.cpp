#include "config/parse/read_file.h"

#include <cerrno>
#include <cstring>

#include "util/bounded_file.h"
#include "util/near_path.h"

namespace mr {

namespace {

// A refusal of the bounded reader (util/bounded_file.h) as the parser words it, for `path`.
UsageError refusal(const FileRefusal& r, const std::string& path, const std::string& what,
                   const std::vector<std::string>& flags, std::size_t max_bytes) {
  auto fail = [&](const std::string& why, const char* id) { return UsageError(path + ": " + why, flags, path, id); };
  switch (r.kind) {
    case FileRefusal::Kind::EmptyPath: return UsageError(what + ": the path is empty", flags, {}, "input.unreadable");
    case FileRefusal::Kind::Unreadable: {
      // A missing file is most often a typo: the existing file it most likely meant (util/near_path.h).
      const std::string meant = r.err == ENOENT || r.err == ENOTDIR ? near_path(path) : std::string();
      return fail("cannot read " + what + ": " + std::strerror(r.err) +
                      (meant.empty() ? std::string() : " (did you mean " + meant + "?)"),
                  "input.unreadable");
    }
    case FileRefusal::Kind::NotRegular:
      return fail("the " + what + " is not a regular file (it is " + std::string(file_kind(r.mode)) +
                      "); megatron-run reads only regular files",
                  "input.not-regular-file");
    case FileRefusal::Kind::TooLarge:
      return fail("the " + what + " is " + r.size + ", more than the limit of " + describe_bytes(max_bytes) +
                      " for an input file (limits::kMaxInputFileBytes)",
                  "input.file-too-large");
  }
  return fail("cannot read " + what, "input.unreadable");
}

}  // namespace

void check_input_file(const std::string& path, const std::string& what, const std::vector<std::string>& flags,
                      std::size_t max_bytes) {
  try {
    check_bounded_file(path, max_bytes);
  } catch (const FileRefusal& r) {
    throw refusal(r, path, what, flags, max_bytes);
  }
}

std::string read_input_file(const std::string& path, const std::string& what, const std::vector<std::string>& flags,
                            std::size_t max_bytes) {
  try {
    return read_bounded_file(path, max_bytes);
  } catch (const FileRefusal& r) {
    throw refusal(r, path, what, flags, max_bytes);
  }
}

}  // namespace mr
