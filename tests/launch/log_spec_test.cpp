// launch/log_spec.h: torchrun's --redirects/--tee values, --local-ranks-filter, where each stream goes, the
// run's log directory.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "launch/log_spec.h"

namespace fs = std::filesystem;
using namespace mr::launch;

TEST_CASE("--redirects/--tee values: torchrun's Std forms", "[launch][log-spec]") {
  CHECK(StdSpec::parse("0").of(5) == kStdNone);
  CHECK(StdSpec::parse("3").of(0) == kStdAll);
  StdSpec m = StdSpec::parse("0:1,1:2");
  CHECK(m.of(0) == kStdOut);
  CHECK(m.of(1) == kStdErr);
  CHECK(m.of(2) == kStdNone);  // a rank not named: 0
  CHECK(StdSpec::parse("12:3").of(12) == kStdAll);
  for (const char* bad : {"", "4", "-1", "03", "a", "0:4", "0:", ":1", "0:1,", "0:1,,1:2", "0:1;1:2", "3 "})
    CHECK_THROWS_AS(StdSpec::parse(bad), std::invalid_argument);
}

TEST_CASE("--local-ranks-filter values", "[launch][log-spec]") {
  CHECK(parse_local_ranks("0") == std::set<int>{0});
  CHECK(parse_local_ranks("2,0,2") == std::set<int>{0, 2});
  for (const char* bad : {"", ",", "0,", "a", "-1", "0 1"}) CHECK_THROWS_AS(parse_local_ranks(bad), std::invalid_argument);
}

TEST_CASE("where a rank's streams go: torchrun's rules", "[launch][log-spec]") {
  LogOptions o;
  RankLogs none = rank_logs(o, "/l/attempt_0", 1);
  CHECK(none.out.file.empty());
  CHECK(none.out.console);
  CHECK(none.err.console);
  CHECK(none.error_file == "/l/attempt_0/1/error.json");
  o.redirects = StdSpec::parse("1");  // stdout to its file only
  o.tee = StdSpec::parse("0:2");      // rank 0's stderr to its file and the console
  RankLogs r0 = rank_logs(o, "/l/attempt_0", 0);
  CHECK(r0.out.file == "/l/attempt_0/0/stdout.log");
  CHECK_FALSE(r0.out.console);
  CHECK(r0.err.file == "/l/attempt_0/0/stderr.log");
  CHECK(r0.err.console);
  RankLogs r1 = rank_logs(o, "/l/attempt_0", 1);
  CHECK(r1.err.file.empty());
  CHECK(r1.err.console);
  // A rank outside the filter reaches the console with nothing; its files are still written.
  o.local_ranks_filter = {1};
  RankLogs f0 = rank_logs(o, "/l/attempt_0", 0);
  CHECK_FALSE(f0.err.console);
  CHECK(f0.err.file == "/l/attempt_0/0/stderr.log");
  CHECK(rank_logs(o, "/l/attempt_0", 1).err.console);
  CHECK(o.any_file(2));
  CHECK_FALSE(LogOptions{}.any_file(8));
  // --log-dir /dev/null (torchrun's "no log files"): every stream to the console whatever -r/-t say, no error
  // file; the filter still applies.
  o.log_dir = "/dev/null";
  CHECK(o.no_files());
  CHECK_FALSE(o.any_file(2));
  RankLogs d1 = rank_logs(o, "", 1);
  CHECK(d1.out.file.empty());
  CHECK(d1.err.file.empty());
  CHECK(d1.out.console);
  CHECK(d1.err.console);
  CHECK(d1.error_file.empty());
  CHECK_FALSE(rank_logs(o, "", 0).out.console);  // outside --local-ranks-filter 1
}

TEST_CASE("rule launch.log-dir-unwritable: a --log-dir that cannot be made, or made in, is refused with its id",
          "[launch][log-spec]") {
  LogOptions o;
  o.log_dir = "/proc/mr-log-spec-no-such-dir";  // /proc takes no new directory
  CHECK_THROWS_WITH(LogDir(o, "job", 1), Catch::StartsWith("[launch.log-dir-unwritable] argument --log-dir: cannot make "
                                                           "/proc/mr-log-spec-no-such-dir: "));
  if (geteuid() != 0) {  // root may write any directory
    const fs::path root = fs::temp_directory_path() / ("mr-log-spec-ro-" + std::to_string(getpid()));
    fs::create_directories(root);
    fs::permissions(root, fs::perms::owner_read | fs::perms::owner_exec);
    o.log_dir = root.string();
    CHECK_THROWS_WITH(LogDir(o, "job", 1), Catch::StartsWith("[launch.log-dir-unwritable] argument --log-dir: cannot "
                                                             "make a log directory in " + root.string()));
    fs::permissions(root, fs::perms::owner_all);
    fs::remove_all(root);
  }
}

TEST_CASE("the run's log directory: <log-dir>/<run id>_<unique>/attempt_<n>/<local rank>", "[launch][log-spec]") {
  const fs::path root = fs::temp_directory_path() / ("mr-log-spec-" + std::to_string(getpid()));
  fs::remove_all(root);
  LogOptions o;
  o.log_dir = (root / "logs").string();
  {
    LogDir d(o, "job/7", 2);
    const fs::path run = d.run_dir();
    CHECK(run.parent_path() == root / "logs");
    CHECK(run.filename().string().rfind("job_7_", 0) == 0);
    std::string a1 = d.attempt(1, 2);
    CHECK(fs::is_directory(fs::path(a1) / "0"));
    CHECK(fs::is_directory(fs::path(a1) / "1"));
    std::ofstream(fs::path(a1) / "0" / "stale").put('x');
    d.attempt(1, 2);  // made afresh
    CHECK_FALSE(fs::exists(fs::path(a1) / "0" / "stale"));
  }
  CHECK(fs::is_directory(root / "logs"));  // --log-dir stays
  fs::remove_all(root);
  // Without --log-dir: a temporary directory, gone at the end when nothing was written to a file.
  std::string tmp_run;
  {
    LogDir d(LogOptions{}, "none", 1);
    tmp_run = d.run_dir();
    CHECK(fs::path(tmp_run).parent_path().filename().string().rfind("torchelastic_", 0) == 0);
  }
  CHECK_FALSE(fs::exists(tmp_run));
  // ... but kept when a worker wrote its error file there (the failure summary names its path).
  std::string kept;
  {
    LogDir d(LogOptions{}, "none", 2);
    kept = d.run_dir();
    std::ofstream(fs::path(d.attempt(0, 2)) / "1" / "error.json") << "{}";
  }
  CHECK(fs::exists(fs::path(kept) / "attempt_0" / "1" / "error.json"));
  fs::remove_all(fs::path(kept).parent_path());
  // --log-dir /dev/null: no directory at all.
  LogOptions null_dir;
  null_dir.log_dir = "/dev/null";
  LogDir n(null_dir, "none", 2);
  CHECK(n.run_dir().empty());
  CHECK(n.attempt(0, 2).empty());
}

TEST_CASE("the temporary run directory: Python's gettempdir order, falling back past a bad TMPDIR",
          "[launch][log-spec][tmpdir]") {
  struct Env {  // TMPDIR, TEMP and TMP set for the test case, put back after it
    std::vector<std::pair<std::string, std::optional<std::string>>> saved;
    void set(const char* name, const char* value) {
      const char* was = std::getenv(name);
      saved.emplace_back(name, was ? std::optional<std::string>(was) : std::nullopt);
      value ? setenv(name, value, 1) : unsetenv(name);
    }
    ~Env() {
      for (auto it = saved.rbegin(); it != saved.rend(); ++it)
        it->second ? setenv(it->first.c_str(), it->second->c_str(), 1) : unsetenv(it->first.c_str());
    }
  } env;
  const std::filesystem::path base = std::filesystem::temp_directory_path() / ("mr-tmpdir-" + std::to_string(getpid()));
  std::filesystem::create_directories(base / "temp");
  env.set("TMPDIR", "/nonexistent/dir");
  env.set("TEMP", (base / "temp").c_str());
  env.set("TMP", nullptr);
  const std::vector<mr::launch::TempDirCandidate> c = mr::launch::temp_dir_candidates();
  REQUIRE(c.size() >= 5);
  CHECK(c[0].dir == "/nonexistent/dir");
  CHECK(c[0].name == "TMPDIR=/nonexistent/dir");
  CHECK(c[1].name == "TEMP=" + (base / "temp").string());
  CHECK(c[2].dir == "/tmp");
  CHECK(c[2].name == "/tmp");
  CHECK(c[3].dir == "/var/tmp");
  CHECK(c[4].dir == "/usr/tmp");
  REQUIRE(c.size() == 6);  // and last, the current directory, named as such
  CHECK(c[5].name == "the current directory " + std::filesystem::current_path().string());
  // The missing TMPDIR is passed over: TEMP's directory gets it.
  const std::string made = mr::launch::make_temp_dir("torchelastic_", c);
  CHECK(std::filesystem::path(made).parent_path() == base / "temp");
  CHECK(std::filesystem::is_directory(made));
  // None usable: each named with its reason, and the ways out.
  try {
    mr::launch::make_temp_dir("torchelastic_", {{"/nonexistent/dir", "TMPDIR=/nonexistent/dir"}, {"/nonexistent/other", "/nonexistent/other"}});
    FAIL("no directory could be made, yet no error");
  } catch (const std::runtime_error& e) {
    const std::string m = e.what();
    CHECK_THAT(m, Catch::StartsWith("[launch.run-directory] cannot make the run directory"));
    CHECK_THAT(m, Catch::Contains("TMPDIR=/nonexistent/dir: No such file or directory; /nonexistent/other: No such file"));
    CHECK_THAT(m, Catch::Contains("set TMPDIR to a writable directory, or give --log-dir"));
  }
  std::filesystem::remove_all(base);
}
