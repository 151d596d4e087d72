// The corpus of real Megatron configs the tests run on (tests/data/corpus, tests/data/README.md says where it came
// from): one listing for every test that walks it.
#pragma once

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

namespace mrtest {

// The corpus's YAML configs (tests/data/corpus/functional-tests/*.yaml), sorted by name.
inline std::vector<std::filesystem::path> corpus_files() {
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(std::string(MR_DATA_DIR) + "/corpus/functional-tests"))
    if (e.path().extension() == ".yaml") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace mrtest
