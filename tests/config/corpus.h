// The corpus of real Megatron configs the tests run on (tests/data/corpus, tests/data/README.md says where it came
// from): one listing for every test that walks it.
#pragma once

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "config/parse/invocation.h"

namespace mrtest {

// The corpus's YAML configs (tests/data/corpus/functional-tests/*.yaml), sorted by name.
inline std::vector<std::filesystem::path> corpus_files() {
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(std::string(MR_DATA_DIR) + "/corpus/functional-tests"))
    if (e.path().extension() == ".yaml") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

// An invocation for world size 8 (WORLD_SIZE=8, no RANK), ${VAR} -> /placeholder/VAR, the default target
// environment, no config file yet.
inline mr::Invocation placeholder_invocation() {
  mr::Invocation inv;
  inv.env = mr::TargetEnv{};
  inv.env.vars["WORLD_SIZE"] = "8";
  inv.config.env = [](const std::string& n) -> std::optional<std::string> { return "/placeholder/" + n; };
  return inv;
}

// The invocation the corpus's references were produced with: the placeholder invocation with RANK=0 and the one
// config file.
inline mr::Invocation reference_invocation(const std::filesystem::path& file) {
  mr::Invocation inv = placeholder_invocation();
  inv.env.vars["RANK"] = "0";
  inv.config_files = {file.string()};
  return inv;
}

}  // namespace mrtest
