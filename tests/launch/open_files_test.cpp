// The launcher under a low open-file limit (lib/launch/open_files.cpp, its use in apps/megatron-run/launch.cpp):
// a limit too low for the workers is refused before any starts (exit 1, rule launch.open-file-limit, naming
// `ulimit -n`); the figure it names is enough to run; a low soft limit under a high hard one is raised for the
// launcher and given back to the user's program.
#include <catch2/catch.hpp>

#include <regex>
#include <string>

#include "launch/open_files.h"
#include "launch_test_util.h"

using namespace mrtest::launcher;
using mrtest::Proc;

namespace {

// `args` (a launch) under `ulimit LIMIT` (e.g. "-n 16", "-Sn 16"), in a shell.
Proc limited(const std::string& limit, const std::string& args) {
  return sh("/bin/sh -c \"ulimit " + limit + " && exec " + kBin + " --config " + kConfig + " " + args + "\"");
}

// The launcher's need the refusal names ("megatron-run's launcher needs N descriptors"); 0 when not said.
unsigned long named_need(const std::string& out) {
  std::smatch m;
  static const std::regex need(R"(launcher needs (\d+) descriptors)");
  return std::regex_search(out, m, need) ? std::stoul(m[1]) : 0;
}

const std::string kEcho = "--no-append-args --no-python /bin/echo ran";

}  // namespace

TEST_CASE("the launcher's need grows with the workers and their log files", "[launch][open-files]") {
  using mr::launch::launcher_files_needed;
  CHECK(launcher_files_needed(3, 4, true, 0) > launcher_files_needed(3, 2, true, 0));
  CHECK(launcher_files_needed(3, 2, true, 4) == launcher_files_needed(3, 2, true, 0) + 4);
  CHECK(launcher_files_needed(10, 2, true, 0) == launcher_files_needed(3, 2, true, 0) + 7);
  // One unprefixed worker without log files: its output is not piped through the launcher.
  CHECK(launcher_files_needed(3, 1, false, 0) < launcher_files_needed(3, 1, true, 0));
  CHECK(mr::launch::worker_files_needed(4, 4) > mr::launch::worker_files_needed(4, 2));
  CHECK_FALSE(mr::launch::open_file_refusal(std::nullopt, 2, 100, 100));
  CHECK_FALSE(mr::launch::open_file_refusal(100, 2, 100, 0));
  const std::optional<std::string> r = mr::launch::open_file_refusal(16, 2, 17, 27);
  REQUIRE(r);
  CHECK_THAT(*r, Catch::StartsWith("[launch.open-file-limit] the open-file limit (RLIMIT_NOFILE, ulimit -n 16)"));
  CHECK_THAT(*r, Catch::Contains("launcher needs 17 descriptors and its worker at least 27 each"));
  CHECK(mr::launch::open_descriptors() >= 3);
}

TEST_CASE("a launch under an open-file limit too low for its workers: refused before any starts, exit 1",
          "[launch][open-files][process]") {
  Proc low = limited("-n 12", "--nproc-per-node 4 " + kEcho);
  INFO(low.out);
  CHECK(low.exit == 1);
  CHECK(has(low.out, "error[launch.open-file-limit]: the open-file limit (RLIMIT_NOFILE, ulimit -n 12) is too low for 4 workers"));
  CHECK_FALSE(has(low.out, "ran"));
  // The figure it names is enough: the same launch under it runs (it was exit 2 and "pipe: Too many open files").
  const unsigned long need = named_need(low.out);
  REQUIRE(need > 12);
  Proc enough = limited("-n " + std::to_string(need), "--nproc-per-node 4 " + kEcho);
  INFO(enough.out);
  CHECK(enough.exit == 0);
  CHECK(has(enough.out, "ran"));
  // Log files need more: the figure grows with them.
  ScratchDir dir("mr-open-files-logs");
  Proc logs = limited("-n 12", "--nproc-per-node 4 --redirects 3 --log-dir " + dir.path.string() + " " + kEcho);
  CHECK(logs.exit == 1);
  CHECK(named_need(logs.out) == need + 8);
}

TEST_CASE("megatron-run's own worker: refused under a limit below the worker's need", "[launch][open-files][process]") {
  Proc own = limited("-n 20", "--nproc-per-node 2 --bring-up-only");
  INFO(own.out);
  CHECK(own.exit == 1);
  CHECK(has(own.out, "error[launch.open-file-limit]: the open-file limit (RLIMIT_NOFILE, ulimit -n 20)"));
  CHECK(has(own.out, "and its worker"));
  CHECK_FALSE(has(own.out, "[rank "));
  Proc ok = limited("-n 32", "--nproc-per-node 2 --bring-up-only");
  INFO(ok.out);
  CHECK(ok.exit == 0);
}

TEST_CASE("a low soft open-file limit is raised for the launcher; the program gets the user's back",
          "[launch][open-files][process]") {
  // Hard limit as it is, soft 12: too few for 4 prefixed workers, unless the launcher raises its own.
  Proc p = limited("-Sn 12", "--nproc-per-node 4 --no-append-args --no-python /bin/sh -c 'echo soft=\\$(ulimit -Sn)'");
  INFO(p.out);
  CHECK(p.exit == 0);
  size_t n = 0;
  for (size_t at = p.out.find("soft=12"); at != std::string::npos; at = p.out.find("soft=12", at + 1)) ++n;
  CHECK(n == 4);
}
