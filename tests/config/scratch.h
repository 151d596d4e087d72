// A scratch folder per test file and a writer of files with arbitrary bytes, for the config tests.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace mrtest {

// $TMPDIR/mr-<tag>-test-<pid>, created on first use; `tag` keeps test files apart (one may leave a FIFO
// where another would write a file of the same name).
inline std::filesystem::path scratch_dir(const std::string& tag = "bin") {
  auto dir = std::filesystem::temp_directory_path() / ("mr-" + tag + "-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir;
}

// Writes `bytes` (any bytes, NUL included) to `name` in the scratch folder; returns its path.
inline std::string write_file(const std::string& name, const std::string& bytes, const std::string& tag = "bin") {
  auto p = scratch_dir(tag) / name;
  std::ofstream(p, std::ios::binary) << bytes;
  return p.string();
}

}  // namespace mrtest
