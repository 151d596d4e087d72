#include "config/parse/read_file.h"

#include "config/input_rules.h"
#include "util/bounded_file.h"

namespace mr {

namespace {

// A refusal of the bounded reader (util/bounded_file.h) in its words (file_refusal_text), with its rule id.
UsageError refusal(const FileRefusal& r, const std::string& path, const std::string& what,
                   const std::vector<std::string>& flags, std::size_t max_bytes) {
  const char* id = r.kind == FileRefusal::Kind::NotRegular ? kInputNotRegularFileRule.id
                   : r.kind == FileRefusal::Kind::TooLarge ? kInputFileTooLargeRule.id
                                                           : kInputUnreadableRule.id;
  return UsageError(file_refusal_text(r, path, what, max_bytes), flags,
                    r.kind == FileRefusal::Kind::EmptyPath ? std::string() : path, id);
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
