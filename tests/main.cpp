// The main of every Catch2 test binary. Before running anything it refuses (exit 2, naming file:line) a test case
// whose name is longer than kMaxTestNameLength characters: Catch2 v2's console reporter, printing such a case's
// failure, wrapped its name without end (seen here: a 57 GB log that filled the disk and took CTest down with it).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstddef>
#include <iostream>

namespace {
constexpr std::size_t kMaxTestNameLength = 200;
}  // namespace

int main(int argc, char* argv[]) {
  int too_long = 0;
  for (const Catch::TestCase& t : Catch::getRegistryHub().getTestCaseRegistry().getAllTests()) {
    if (t.name.size() <= kMaxTestNameLength) continue;
    std::cerr << t.lineInfo.file << ":" << t.lineInfo.line << ": the test case's name has " << t.name.size()
              << " characters, more than the " << kMaxTestNameLength
              << " Catch2's console prints safely (tests/main.cpp): shorten it\n";
    ++too_long;
  }
  if (too_long > 0) return 2;
  return Catch::Session().run(argc, argv);
}
