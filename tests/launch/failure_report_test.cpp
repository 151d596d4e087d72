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
