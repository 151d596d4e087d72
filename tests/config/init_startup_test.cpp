// The init stage's start-up checks (lib/config/validate/init_startup.cpp): the exit signal handler and the seed,
// each next to a neighbour that passes.
#include "init_support.h"

namespace {

using mrtest::InitCase;

const std::vector<InitCase> kCases = {
    {"init.exit-signal-catchable", {"--exit-signal-handler", "--exit-signal", "SIGKILL"},
     {"--exit-signal-handler", "--exit-signal", "SIGUSR1"}, {}, "--exit-signal SIGKILL, which no process can catch"},
    {"init.exit-signal-catchable", {"--exit-signal-handler", "--exit-signal", "SIGSTOP"},
     {"--exit-signal", "SIGSTOP"}, {}, "--exit-signal SIGSTOP"},  // without the handler the signal is not used
    {"init.seed-positive", {"--seed", "0"}, {"--seed", "1"}, {}, "--seed 0 is not a positive integer"},
    {"init.seed-positive", {"--seed", "-1"}, {"--seed", "4294967295"}, {}, "(\"Seed (-1) should be a positive integer.\")"},
};

}  // namespace

TEST_CASE("init stage, start-up: each rule fires next to a neighbour that passes", "[init]") {
  mrtest::check_init_table(kCases, "validate/init_startup.cpp");
}
