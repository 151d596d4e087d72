// launch/failure_report.h: reading an error file in PyTorch's @record format (and in others), the wording of
// a worker's end. The summary itself is tested on real programs in supervision_test.cpp.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "launch/failure_report.h"

namespace fs = std::filesystem;
using namespace mr::launch;

TEST_CASE("an error file in PyTorch's @record format, and others", "[launch][failure-report]") {
  const fs::path f = fs::temp_directory_path() / ("mr-error-file-" + std::to_string(getpid()) + ".json");
  auto with = [&](const std::string& text) {
    std::ofstream(f) << text;
    return read_error_file(f.string());
  };
  auto e = with(R"({"message": {"message": "RuntimeError: boom", "extraInfo": {"py_callstack": "Traceback...\n  x", "timestamp": "1700000000"}}})");
  REQUIRE(e);
  CHECK(e->message == "RuntimeError: boom");
  CHECK(e->traceback == "Traceback...\n  x");
  CHECK(e->timestamp == "1700000000");
  e = with(R"({"message": "plain words"})");
  REQUIRE(e);
  CHECK(e->message == "plain words");
  e = with("not json at all");
  REQUIRE(e);
  CHECK(e->raw == "not json at all");
  fs::remove(f);
  CHECK_FALSE(read_error_file(f.string()));
  CHECK_FALSE(read_error_file(""));
  CHECK(signal_name(15) == "SIGTERM");
  CHECK(describe_status(9) == "was killed by signal 9 (SIGKILL)");  // a wait status: killed by signal 9
}

TEST_CASE("exit code 127: the loader under an address-space limit, a shell's missing command, or a start failure",
          "[launch][failure-report]") {
  WorkerFailure f;
  f.status = 127 << 8;  // a wait status: exited with code 127
  f.stderr_seen = true;
  const std::optional<uint64_t> limit = uint64_t{2000000} * 1024;
  // The loader could not map a library: within the limit, named; without one, the memory.
  f.stderr_tail = {"./w: error while loading shared libraries: libx.so: failed to map segment from shared object"};
  CHECK(exit_127_hint(f, limit) ==
        "the dynamic loader could not map the program's libraries within this node's address-space limit (RLIMIT_AS, "
        "ulimit -v 2000000) (exit code 127 is the loader's): raise the limit (ulimit -v)");
  CHECK_THAT(exit_127_hint(f, std::nullopt), Catch::StartsWith("the dynamic loader could not map") &&
                                                 !Catch::Contains("ulimit"));
  // Another loader failure (a missing library) is not the limit's.
  f.stderr_tail = {"./w: error while loading shared libraries: libx.so: cannot open shared object file"};
  CHECK_THAT(exit_127_hint(f, limit), Catch::StartsWith("the dynamic loader could not load") && !Catch::Contains("ulimit"));
  // A shell's missing command (dash's and bash's words), with or without a limit.
  for (const char* line : {"sh: 1: nosuch: not found", "bash: line 1: nosuch: command not found"}) {
    f.stderr_tail = {line};
    CHECK(exit_127_hint(f, limit) == "exit code 127: a shell in the program could not find a command (its stderr says which)");
    CHECK(exit_127_hint(f, std::nullopt) == exit_127_hint(f, limit));
  }
  // Its stderr did not say (or went to the console): both readings; the limit named when there is one.
  f.stderr_tail.clear();
  f.stderr_seen = false;
  CHECK_THAT(exit_127_hint(f, limit), Catch::StartsWith("exit code 127 under this node's address-space limit (RLIMIT_AS, "
                                                        "ulimit -v 2000000): the dynamic loader exits 127") &&
                                          Catch::Contains("raise the limit (ulimit -v)") &&
                                          Catch::Contains("a shell exits 127 for a command it cannot find"));
  CHECK_THAT(exit_127_hint(f, std::nullopt), Catch::StartsWith("exit code 127: a shell's code for a command it cannot find") &&
                                                 !Catch::Contains("ulimit"));
  // megatron-run could not start it (the 127 is the launcher's), another code, a signal: no hint.
  f.start_failure = "cannot start ./x: Permission denied";
  CHECK(exit_127_hint(f, limit).empty());
  f.start_failure.clear();
  f.status = 1 << 8;
  CHECK(exit_127_hint(f, limit).empty());
  f.status = 9;
  CHECK(exit_127_hint(f, limit).empty());
}
