// run/checkpoint_integrity.h: Megatron's integrity manifest (integrity.json) over a checkpoint directory's files,
// written and checked without a run (the runs that use it: checkpoint_test.cpp, "--verify-integrity").
#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "../distributed/proc.h"
#include "config/value.h"
#include "run/checkpoint_format.h"
#include "run/checkpoint_integrity.h"
#include "util/sha256.h"

namespace fs = std::filesystem;
using mr::run::CheckpointError;

namespace {

void put(const std::string& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }

// The id and message of verify_integrity_manifest's refusal of `dir` ("" when it accepts it).
std::string refusal(const std::string& dir) {
  try {
    mr::run::verify_integrity_manifest(dir);
  } catch (const CheckpointError& e) {
    CHECK(e.id == "checkpoint.integrity");
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("integrity manifest: Megatron's fields, every file but itself, checked on load", "[checkpoint][integrity]") {
  mrtest::TempDir dir;
  const std::string d = dir / "iter_0000002";
  fs::create_directories(d + "/sub");  // a directory is not listed (Megatron lists files)
  put(d + "/rank_00000.safetensors", std::string(1000, 'x'));
  put(d + "/rank_00000.json", "{}");
  mr::run::write_integrity_manifest(d);
  const mr::Value m = mr::Value::parse_json(mrtest::slurp(d + "/integrity.json"));
  REQUIRE(m.is_object());
  CHECK(m.as_object().at(0).first == "algorithm");
  CHECK(m.as_object().at(0).second.as_str() == "sha256");
  const mr::Object& files = m.as_object().at(1).second.as_object();
  REQUIRE(files.size() == 2);
  CHECK(files[0].first == "rank_00000.json");
  CHECK(files[0].second.as_str() == mr::util::sha256_hex("{}"));
  CHECK(files[1].first == "rank_00000.safetensors");
  CHECK(files[1].second.as_str() == mr::util::sha256_hex(std::string(1000, 'x')));
  // Equal files, equal manifest (a resumed run's checkpoint stays byte-identical).
  const std::string first = mrtest::slurp(d + "/integrity.json");
  mr::run::write_integrity_manifest(d);
  CHECK(mrtest::slurp(d + "/integrity.json") == first);
  CHECK(mr::run::verify_integrity_manifest(d) == 2);

  // One byte changed: refused, naming the file.
  std::string x(1000, 'x');
  x[700] = 'y';
  put(d + "/rank_00000.safetensors", x);
  CHECK_THAT(refusal(d), Catch::Contains("failed for 1 file") && Catch::Contains(d + "/rank_00000.safetensors") &&
                             Catch::Contains("changed since it was saved") && Catch::Contains("[checkpoint.integrity]"));
  // A listed file missing.
  fs::remove(d + "/rank_00000.safetensors");
  CHECK_THAT(refusal(d), Catch::Contains(d + "/rank_00000.safetensors, which is missing"));
  put(d + "/rank_00000.safetensors", std::string(1000, 'x'));
  CHECK(refusal(d).empty());
  // Another algorithm, a manifest that is not one, a name outside the directory, no manifest.
  put(d + "/integrity.json", R"({"algorithm": "md5", "files": {}})");
  CHECK_THAT(refusal(d), Catch::Contains("\"md5\"") && Catch::Contains("only \"sha256\""));
  put(d + "/integrity.json", R"({"algorithm": "sha256", "files": ["rank_00000.json"]})");
  CHECK_THAT(refusal(d), Catch::Contains("is not an integrity manifest"));
  // (listing the rank files too: a manifest that leaves one out is refused for that first)
  put(d + "/integrity.json",
      R"({"files": {"../rank_00000.json": "00", "rank_00000.json": "00", "rank_00000.safetensors": "00"}})");
  CHECK_THAT(refusal(d), Catch::Contains("not a file of the checkpoint directory"));
  put(d + "/integrity.json", "{\"files\": ");
  CHECK_THAT(refusal(d), Catch::Contains("cannot be read as JSON"));
  fs::remove(d + "/integrity.json");
  CHECK_THAT(refusal(d), Catch::Contains(d + "/integrity.json is missing") &&
                             Catch::Contains("not saved with --verify-integrity"));
}

TEST_CASE("integrity manifest: every rank file of the directory must be listed; another file may be unlisted",
          "[checkpoint][integrity]") {
  mrtest::TempDir dir;
  const std::string d = dir / "iter_0000004";
  fs::create_directories(d);
  for (const char* name : {"rank_00000.json", "rank_00000.safetensors", "rank_00001.json", "rank_00001.safetensors"})
    put(d + "/" + name, name);
  mr::run::write_integrity_manifest(d);
  const std::string full = mrtest::slurp(d + "/integrity.json");
  // A note beside the checkpoint, or a name that is no rank file: the load does not read it.
  for (const char* name : {"extra.txt", "rank_00000.json.bak", "rank_x.json", "rank_.safetensors"}) put(d + "/" + name, "x");
  CHECK(mr::run::verify_integrity_manifest(d) == 4);
  // No file listed: nothing would be verified.
  put(d + "/integrity.json", R"({"algorithm": "sha256", "files": {}})");
  CHECK_THAT(refusal(d), Catch::Contains(d + "/rank_00000.json is not in the manifest " + d + "/integrity.json") &&
                             Catch::Contains("[checkpoint.integrity]"));
  // One rank's tensors left out (whatever the others' digests): named.
  const std::string entry = "\"rank_00001.safetensors\": \"" + mr::util::sha256_hex("rank_00001.safetensors") + "\"";
  std::string without = full;
  const size_t at = without.find(", " + entry);
  REQUIRE(at != std::string::npos);
  without.erase(at, entry.size() + 2);
  put(d + "/integrity.json", without);
  CHECK_THAT(refusal(d), Catch::Contains(d + "/rank_00001.safetensors is not in the manifest"));
  // A rank file in any form (here a link to a listed one) is read by the load: it must be listed too.
  put(d + "/integrity.json", full);
  fs::create_symlink("rank_00000.json", d + "/rank_00002.json");
  CHECK_THAT(refusal(d), Catch::Contains(d + "/rank_00002.json is not in the manifest"));
}

TEST_CASE("integrity manifest: the same manifest and the same refusal whatever the number of hashing threads",
          "[checkpoint][integrity]") {
  mrtest::TempDir dir;
  const std::string d = dir / "iter_0000003";
  fs::create_directories(d);
  // 23 files of different sizes (empty, under a block, several MiB: more than one read), one per rank.
  for (int r = 0; r < 23; ++r) {
    char name[32];
    std::snprintf(name, sizeof name, "rank_%05d.safetensors", r);
    put(d + "/" + name, std::string(r == 0 ? 0 : r == 7 ? (3u << 20) + 5 : static_cast<size_t>(r) * 37, 'a' + r % 26));
  }
  mr::run::write_integrity_manifest(d, 1);
  const std::string one = mrtest::slurp(d + "/integrity.json");
  for (unsigned threads : {2u, 5u, 64u, 0u}) {
    mr::run::write_integrity_manifest(d, threads);
    CHECK(mrtest::slurp(d + "/integrity.json") == one);
    CHECK(mr::run::verify_integrity_manifest(d, threads) == 23);
  }
  const mr::Value manifest = mr::Value::parse_json(one);
  const mr::Object& files = manifest.as_object().at(1).second.as_object();
  REQUIRE(files.size() == 23);
  CHECK(files[7].second.as_str() == mr::util::sha256_hex(std::string((3u << 20) + 5, 'a' + 7)));
  // Three files changed or gone: the count, and the first of them in the manifest's order, on any thread count.
  put(d + "/rank_00019.safetensors", "changed");
  put(d + "/rank_00004.safetensors", "changed");
  fs::remove(d + "/rank_00011.safetensors");
  for (unsigned threads : {1u, 3u, 0u}) {
    INFO("threads " << threads);
    try {
      mr::run::verify_integrity_manifest(d, threads);
      FAIL("accepted");
    } catch (const CheckpointError& e) {
      CHECK_THAT(e.what(), Catch::Contains("failed for 3 files") &&
                               Catch::Contains(d + "/rank_00004.safetensors, the file has") &&
                               !Catch::Contains("rank_00011") && !Catch::Contains("rank_00019"));
    }
  }
}
