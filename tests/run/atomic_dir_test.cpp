// run/atomic_dir.h: a directory put in place of another (replace_dir) and a stale iter_N.tmp cleared before a save
// (clear_stale_dir) when the old copy cannot be removed. Tests may run as root, whom no permission stops: the failed
// removal is injected (MR_CKPT_FAIL_REMOVE). The runs that use them: checkpoint_test.cpp.
#include <catch2/catch.hpp>

#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "../distributed/proc.h"
#include "run/atomic_dir.h"
#include "run/checkpoint_format.h"

namespace fs = std::filesystem;

namespace {

void put(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

// MR_CKPT_FAIL_REMOVE=name for the scope.
struct FailRemove {
  explicit FailRemove(const char* name) { ::setenv("MR_CKPT_FAIL_REMOVE", name, 1); }
  ~FailRemove() { ::unsetenv("MR_CKPT_FAIL_REMOVE"); }
};

}  // namespace

TEST_CASE("replace_dir: once the new directory is in place, an old copy that cannot be removed is a note, not a failure",
          "[run][checkpoint][atomic-dir]") {
  mrtest::TempDir dir;
  const std::string to = dir / "iter_0000020", from = dir / "iter_0000020.tmp";
  fs::create_directories(to);
  fs::create_directories(from);
  put(to + "/rank_00000.json", "old");
  put(from + "/rank_00000.json", "new");
  bool in_place = false;
  std::string left;
  {
    FailRemove fail("iter_0000020.tmp");
    REQUIRE_NOTHROW(left = mr::run::replace_dir(from, to, in_place));
  }
  CHECK(in_place);
  CHECK(mrtest::slurp(to + "/rank_00000.json") == "new");
  CHECK(mrtest::slurp(from + "/rank_00000.json") == "old");  // the swapped-out copy, left
  CHECK(left == "the previous " + to + ", swapped out to " + from + ", could not be removed (" + from +
                    ": cannot remove: simulated (MR_CKPT_FAIL_REMOVE)); it is left there");

  // The next save's clearing of iter_N.tmp: it cannot be removed either, so it is moved aside (the first free name).
  fs::create_directories(from + ".stale-1");
  {
    FailRemove fail("iter_0000020.tmp");
    const std::string note = mr::run::clear_stale_dir(from);
    CHECK(note == "a stale " + from + " from an earlier save could not be removed (" + from +
                      ": cannot remove: simulated (MR_CKPT_FAIL_REMOVE)); moved aside to " + from +
                      ".stale-2: remove it by hand");
  }
  CHECK_FALSE(fs::exists(from));
  CHECK(mrtest::slurp(from + ".stale-2/rank_00000.json") == "old");
  // Removable, or absent: removed, nothing said.
  CHECK(mr::run::clear_stale_dir(from + ".stale-2").empty());
  CHECK_FALSE(fs::exists(from + ".stale-2"));
  CHECK(mr::run::clear_stale_dir(from).empty());

  // A removal that works: no note, the old copy gone.
  fs::create_directories(from);
  put(from + "/rank_00000.json", "newer");
  CHECK(mr::run::replace_dir(from, to, in_place).empty());
  CHECK(in_place);
  CHECK_FALSE(fs::exists(from));
  CHECK(mrtest::slurp(to + "/rank_00000.json") == "newer");
  // A failure before the rename: nothing changed, and not in place.
  try {
    mr::run::replace_dir(dir / "missing.tmp", dir / "iter_0000030", in_place);
    FAIL("no error");
  } catch (const mr::run::CheckpointError& e) {
    CHECK(e.id == "checkpoint.save-failed");
  }
  CHECK_FALSE(in_place);
}
