// The console as the launcher writes it (launch/supervise.cpp): with several ranks each output line is the
// rank's prefix and one whole line of that rank, however the ranks' writes interleave; and `megatron-run --help`
// lists the launcher's options.
#include <catch2/catch.hpp>

#include <map>
#include <sstream>
#include <string>

#include "../config/binary.h"

namespace {

const std::string kBin = std::string("'") + MR_BINARY + "'";
const std::string kConfig = std::string(MR_SOURCE_DIR) + "/configs/default.yaml";

}  // namespace

TEST_CASE("8 ranks printing long lines at once: no torn line", "[launch][console][process]") {
  const int kLines = 100, kLength = 3000;
  mrtest::Proc r = mrtest::run_shell("timeout -k 5 60 env LINES=" + std::to_string(kLines) + " LENGTH=" +
                                     std::to_string(kLength) + " PYTHON_EXEC=/usr/bin/python3 " + kBin + " --config " +
                                     kConfig + " --micro-batch-size 1 --nproc-per-node 8 --no-append-args " + MR_SOURCE_DIR +
                                     "/tests/launch/programs/long_lines.py");
  REQUIRE(r.exit == 0);
  std::map<int, int> next;  // rank -> the line it should print next
  std::istringstream in(r.out);
  std::string line;
  int count = 0, torn = 0;
  while (std::getline(in, line)) {
    ++count;
    // "[rank R] R:i:" then R's letter up to kLength characters.
    int rank = -1, rank2 = -1, i = -1;
    int used = 0;
    if (std::sscanf(line.c_str(), "[rank %d] %d:%d:%n", &rank, &rank2, &i, &used) != 3 || rank != rank2 ||
        rank < 0 || rank > 7) {
      ++torn;
      continue;
    }
    const std::string prefix = "[rank " + std::to_string(rank) + "] ";
    const char letter = static_cast<char>('a' + rank);
    const std::string body = line.substr(prefix.size());
    if (body.size() != static_cast<size_t>(kLength) ||
        body.find_first_not_of(letter, static_cast<size_t>(used) - prefix.size()) != std::string::npos ||
        i != next[rank]) {
      ++torn;
      continue;
    }
    ++next[rank];
  }
  CHECK(torn == 0);
  CHECK(count == 8 * kLines);
  for (int rank = 0; rank < 8; ++rank) CHECK(next[rank] == kLines);
}

TEST_CASE("megatron-run --help lists the launcher's options", "[launch][cli]") {
  mrtest::Proc r = mrtest::run_shell(kBin + " --help");
  REQUIRE(r.exit == 0);
  for (const char* opt : {"--nproc-per-node", "--nnodes", "--node-rank", "--master-addr", "--master-port",
                          "--launcher-port", "--rdzv-backend", "--rdzv-endpoint", "--rdzv-id", "--join-timeout",
                          "--standalone", "--max-restarts", "--log-dir", "--redirects", "--tee", "--local-ranks-filter",
                          "--term-timeout", "--monitor-interval", "--no-python", "-m MODULE", "--no-append-args",
                          "--bring-up-only", "--heartbeat-timeout", "PET_", "srun --ntasks-per-node=1", "--rdzv-conf",
                          "--role", "--shutdown-timeout", "--start-method", "--run-path", "--nnodes MIN:MAX",
                          "--local-addr", "--log-line-prefix-template", "--duplicate-stdout-filters",
                             "--virtual-local-rank", "--signals-to-handle", "--event-log-handler", "--numa-binding MODE"}) {
    INFO(opt);
    CHECK(r.out.find(opt) != std::string::npos);
  }
  // The usage line names every --format of a dry run; --master-port's default as a one-node launch has it.
  CHECK(r.out.find("megatron-run --dry-run [--config FILE]... [--format text|json|argv|argv0]") != std::string::npos);
  CHECK(r.out.find("default 127.0.0.1 and, on\n                               one node, a free port") != std::string::npos);
  CHECK(r.out.find("127.0.0.1:29500") == std::string::npos);
}
