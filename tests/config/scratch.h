// A scratch folder per test file, a writer of files with arbitrary bytes and fake machine roots, for the config
// tests (and the launcher's).
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <initializer_list>
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

// A fresh directory `name` in the scratch folder holding the empty files `paths` (a path ending in '/' is a
// directory): a fake machine's file system root, for the probes that take one (util/gpu_devices.h).
inline std::string fake_root(const std::string& name, std::initializer_list<const char*> paths,
                             const std::string& tag = "bin") {
  const std::filesystem::path root = scratch_dir(tag) / name;
  std::filesystem::remove_all(root);
  std::filesystem::create_directories(root);
  for (const std::string p : paths) {
    const std::filesystem::path full = root / p;
    std::filesystem::create_directories(p.back() == '/' ? full : full.parent_path());
    if (p.back() != '/') std::ofstream(full) << "";
  }
  return root.string();
}

}  // namespace mrtest
