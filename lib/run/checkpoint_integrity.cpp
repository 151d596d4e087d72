// Megatron's checkpoint integrity manifest for megatron-run's checkpoints (run/checkpoint_integrity.h).
#include "run/checkpoint_integrity.h"

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <set>
#include <string_view>
#include <thread>
#include <vector>

#include "config/value.h"
#include "launch/cpu_affinity.h"
#include "run/atomic_dir.h"
#include "run/checkpoint_format.h"
#include "util/sha256.h"
#include "util/text.h"

namespace mr::run {

namespace {

constexpr const char* kAlgorithm = "sha256";
constexpr uint64_t kMaxManifestBytes = 16ull << 20;

// Whether a manifest's `name` can name a file of the checkpoint directory itself.
bool file_name(const std::string& name) {
  return !name.empty() && name.find('/') == std::string::npos && name != "." && name != "..";
}

// Whether `name` is one of the files a load reads: a rank's metadata or tensors (rank_N.json, rank_N.safetensors).
bool rank_file(const std::string& name) {
  auto ends = [&](std::string_view tail) {
    return name.size() > tail.size() && name.compare(name.size() - tail.size(), tail.size(), tail) == 0;
  };
  if (name.rfind("rank_", 0) != 0) return false;
  const std::string_view tail = ends(".json") ? ".json" : ends(".safetensors") ? ".safetensors" : "";
  if (tail.empty() || name.size() == 5 + tail.size()) return false;
  for (size_t i = 5; i < name.size() - tail.size(); ++i)
    if (name[i] < '0' || name[i] > '9') return false;
  return true;
}

// The CPUs this process may run on (its affinity: a launcher's --numa-binding, a Slurm cpuset), at least 1; the
// machine's count when the kernel will not say.
unsigned usable_cpus() {
  const size_t allowed = launch::current_affinity().size();
  return allowed > 0 ? static_cast<unsigned>(allowed) : std::max(1u, std::thread::hardware_concurrency());
}

// One file's digest, or why it could not be hashed.
struct Hashed {
  std::string digest;
  std::string error;  // empty when hashed
};

// The digests of dir/NAME for each name, on up to `threads` threads taking files in turn (0: the CPUs this
// process may run on, at most 8 — a checkpoint has a file per rank, and the disk, not the cores, soon limits).
// The result is in the order of `names`, whatever the thread count.
std::vector<Hashed> hash_files(const std::string& dir, const std::vector<std::string>& names, unsigned threads) {
  std::vector<Hashed> out(names.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next.fetch_add(1)) < names.size();) {
      try {
        out[i].digest = util::sha256_file_hex(dir + "/" + names[i]);
      } catch (const std::exception& e) {
        out[i].error = e.what();
        if (out[i].error.empty()) out[i].error = "cannot be read";
      }
    }
  };
  if (threads == 0) threads = std::min(8u, usable_cpus());
  threads = static_cast<unsigned>(std::min<size_t>(threads, names.size()));
  std::vector<std::thread> pool;
  pool.reserve(threads);  // before any thread starts: adding one below cannot then fail on memory with threads running
  try {
    for (unsigned t = 1; t < threads; ++t) pool.emplace_back(work);
  } catch (const std::system_error&) {
    // No more threads: the ones started and this one share the files.
  }
  work();
  for (std::thread& t : pool) t.join();
  return out;
}

}  // namespace

void write_integrity_manifest(const std::string& dir, unsigned threads) {
  std::vector<std::string> names;
  try {
    for (const auto& e : std::filesystem::directory_iterator(dir))
      if (e.is_regular_file() && e.path().filename() != kIntegrityManifest) names.push_back(e.path().filename().string());
  } catch (const std::exception& e) {
    throw CheckpointError(kCkptSaveFailed, dir + ": cannot list the checkpoint's files for the integrity manifest (" +
                                               std::string(e.what()) + ")");
  }
  std::sort(names.begin(), names.end());
  const std::vector<Hashed> hashed = hash_files(dir, names, threads);
  std::string text = "{\"algorithm\": \"" + std::string(kAlgorithm) + "\", \"files\": {";
  for (size_t i = 0; i < names.size(); ++i) {
    if (!hashed[i].error.empty())
      throw CheckpointError(kCkptSaveFailed, "integrity manifest: " + hashed[i].error);
    text += (i ? ", " : "") + json_quote(names[i]) + ": \"" + hashed[i].digest + "\"";
  }
  text += "}}\n";
  write_file_atomic(dir + "/" + kIntegrityManifest, text);
}

size_t verify_integrity_manifest(const std::string& dir, unsigned threads) {
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
  // A manifest that leaves out a file the load reads verifies nothing of it: every rank file of the directory
  // (rank_N.json, rank_N.safetensors, whatever its type: a link is read through) must be listed. Another file
  // (a note beside the checkpoint) is not read by the load and may be unlisted.
  std::vector<std::string> rank_files;
  try {
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
      const std::string name = e.path().filename().string();
      if (rank_file(name)) rank_files.push_back(name);
    }
  } catch (const std::exception& e) {
    refuse(dir + ": cannot list the checkpoint's files (" + abbreviate(e.what()) + ")");
  }
  std::sort(rank_files.begin(), rank_files.end());
  std::set<std::string> listed;
  for (const auto& [name, digest] : files->as_object()) listed.insert(name);
  for (const std::string& name : rank_files) {
    if (!listed.count(name))
      refuse(dir + "/" + name + " is not in the manifest " + path +
             ": the load reads it, and it cannot be checked (a manifest must list every file of the checkpoint)");
  }
  // The names that can be files of the directory and have a digest are hashed (on several threads); the others
  // are refused as they are.
  std::vector<std::string> to_hash;
  for (const auto& [name, want] : files->as_object())
    if (file_name(name) && want.is_str()) to_hash.push_back(name);
  const std::vector<Hashed> hashed = hash_files(dir, to_hash, threads);
  std::string first;
  size_t bad = 0, h = 0;
  for (const auto& [name, want] : files->as_object()) {
    std::string why;
    if (!file_name(name)) {
      why = "names " + json_quote(name) + ", which is not a file of the checkpoint directory";
    } else if (!want.is_str()) {
      why = "gives no digest for " + name;
    } else if (const Hashed& got = hashed[h++]; !got.error.empty()) {
      why = "lists " + dir + "/" + name + ", which is missing or unreadable (" + abbreviate(got.error) + ")";
    } else if (got.digest != want.as_str()) {
      why = "records SHA-256 " + want.as_str().substr(0, 16) + "... for " + dir + "/" + name + ", the file has " +
            got.digest.substr(0, 16) + "... (changed since it was saved)";
    }
    if (!why.empty() && bad++ == 0) first = why;
  }
  if (bad)
    refuse("checkpoint verification failed for " + std::to_string(bad) + " file" + (bad == 1 ? "" : "s") + ": " + path +
           " " + first);
  return files->as_object().size();
}

}  // namespace mr::run
