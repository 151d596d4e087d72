// Megatron's checkpoint integrity manifest for megatron-run's checkpoints (run/checkpoint_integrity.h).
#include "run/checkpoint_integrity.h"

#include <algorithm>
#include <filesystem>
#include <vector>

#include "config/value.h"
#include "run/atomic_dir.h"
#include "run/checkpoint_format.h"
#include "util/sha256.h"
#include "util/text.h"

namespace mr::run {

namespace {

constexpr const char* kAlgorithm = "sha256";
constexpr uint64_t kMaxManifestBytes = 16ull << 20;

}  // namespace

void write_integrity_manifest(const std::string& dir) {
  std::vector<std::string> names;
  try {
    for (const auto& e : std::filesystem::directory_iterator(dir))
      if (e.is_regular_file() && e.path().filename() != kIntegrityManifest) names.push_back(e.path().filename().string());
  } catch (const std::exception& e) {
    throw CheckpointError(kCkptSaveFailed, dir + ": cannot list the checkpoint's files for the integrity manifest (" +
                                               std::string(e.what()) + ")");
  }
  std::sort(names.begin(), names.end());
  std::string text = "{\"algorithm\": \"" + std::string(kAlgorithm) + "\", \"files\": {";
  for (size_t i = 0; i < names.size(); ++i) {
    std::string digest;
    try {
      digest = util::sha256_file_hex(dir + "/" + names[i]);
    } catch (const std::exception& e) {
      throw CheckpointError(kCkptSaveFailed, std::string("integrity manifest: ") + e.what());
    }
    text += (i ? ", " : "") + json_quote(names[i]) + ": \"" + digest + "\"";
  }
  text += "}}\n";
  write_file_atomic(dir + "/" + kIntegrityManifest, text);
}

size_t verify_integrity_manifest(const std::string& dir) {
  const std::string path = dir + "/" + kIntegrityManifest;
  auto refuse = [&](const std::string& why) {
    throw CheckpointError(kCkptIntegrity, "--verify-integrity: " + why);
  };
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    refuse(path + " is missing: the checkpoint was not saved with --verify-integrity, so its files cannot be checked");
  Value m;
  try {
    m = Value::parse_json(read_small_file(path, kMaxManifestBytes));
  } catch (const std::exception& e) {
    refuse(path + " cannot be read as JSON (" + abbreviate(e.what()) + ")");
  }
  const Value* algorithm = nullptr;
  const Value* files = nullptr;
  if (m.is_object())
    for (const auto& [k, v] : m.as_object()) {
      if (k == "algorithm") algorithm = &v;
      if (k == "files") files = &v;
    }
  if (!files || !files->is_object() || (algorithm && !algorithm->is_str()))
    refuse(path + " is not an integrity manifest ({\"algorithm\": \"sha256\", \"files\": {NAME: DIGEST}})");
  if (algorithm && algorithm->as_str() != kAlgorithm)  // Megatron's default when the field is absent: sha256
    refuse(path + " uses the hash algorithm " + json_quote(algorithm->as_str()) + "; only \"sha256\" is supported");
  std::string first;
  size_t bad = 0;
  for (const auto& [name, want] : files->as_object()) {
    std::string why;
    if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..") {
      why = "names " + json_quote(name) + ", which is not a file of the checkpoint directory";
    } else if (!want.is_str()) {
      why = "gives no digest for " + name;
    } else {
      try {
        const std::string got = util::sha256_file_hex(dir + "/" + name);
        if (got != want.as_str())
          why = "records SHA-256 " + want.as_str().substr(0, 16) + "... for " + dir + "/" + name + ", the file has " +
                got.substr(0, 16) + "... (changed since it was saved)";
      } catch (const std::exception& e) {
        why = "lists " + dir + "/" + name + ", which is missing or unreadable (" + abbreviate(e.what()) + ")";
      }
    }
    if (!why.empty() && bad++ == 0) first = why;
  }
  if (bad)
    refuse("checkpoint verification failed for " + std::to_string(bad) + " file" + (bad == 1 ? "" : "s") + ": " + path +
           " " + first);
  return files->as_object().size();
}

}  // namespace mr::run
