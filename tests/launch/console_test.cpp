// The console as the launcher writes it (launch/supervise.cpp): with several ranks each output line is the
// rank's prefix and one whole line of that rank, however the ranks' writes interleave; a partial line is held up to
// 64 KiB (launch::detail::kMaxPartialLine); and `megatron-run --help` lists the launcher's options.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "../config/binary.h"
#include "util/text.h"

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

TEST_CASE("a rank writing 32 MB with no newline: written in 64 KiB lines, the launcher's memory stays bounded",
          "[launch][console][process]") {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("mr-partial-line-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string rss = (dir / "rss").string(), out = (dir / "out").string();
  const long kLength = 32L << 20, kHeld = 64L << 10;
  // Two ranks, so the streams go through the launcher with the [rank R] prefix. Each writes one line of 32 MB in
  // 64 KiB pieces (its newline at the very end): held whole, it took the launcher to ~5 times that (a 40 MB line:
  // 166 MB peak).
  mrtest::Proc r = mrtest::run_shell(
      "ulimit -f 2000000; timeout -k 5 120 env LINES=1 LENGTH=" + std::to_string(kLength) + " PIECE=65536 "
      "PYTHON_EXEC=/usr/bin/python3 '" + MR_PEAK_RSS + "' " + rss + " " + kBin + " --config " + kConfig +
      " --micro-batch-size 1 --nproc-per-node 2 --no-append-args " + MR_SOURCE_DIR +
      "/tests/launch/programs/long_lines.py > " + out + " 2>&1");
  REQUIRE(r.exit == 0);
  long kib = 0;
  std::ifstream(rss) >> kib;
  INFO("peak RSS " << kib << " KiB");
  CHECK(kib > 0);
  CHECK(kib < 40 * 1024);
  // Every console line is a prefix and at most 64 KiB of the rank's line; together they are the whole line.
  std::ifstream in(out);
  std::string line;
  std::map<int, long> bytes;
  long longest = 0;
  int bad = 0;
  while (std::getline(in, line)) {
    if (line.rfind("megatron-run: ", 0) == 0) continue;  // the launcher's own (OMP_NUM_THREADS, ...)
    int rank = -1, used = 0;
    if (std::sscanf(line.c_str(), "[rank %d] %n", &rank, &used) != 1 || used == 0 || rank < 0 || rank > 1) {
      ++bad;
      continue;
    }
    const long body = static_cast<long>(line.size()) - used;
    longest = std::max(longest, body);
    bytes[rank] += body;
  }
  CHECK(bad == 0);
  CHECK(longest == kHeld);
  CHECK(bytes[0] == kLength);
  CHECK(bytes[1] == kLength);
  std::filesystem::remove_all(dir);
}

TEST_CASE("a line cut at 64 KiB inside a UTF-8 character: the cut backs off to the character's start",
          "[launch][console][process]") {
  mrtest::Proc r = mrtest::run_shell("timeout -k 5 60 env PYTHONIOENCODING=utf-8 PYTHON_EXEC=/usr/bin/python3 " + kBin +
                                     " --config " + kConfig + " --micro-batch-size 1 --nproc-per-node 2 --no-append-args " +
                                     MR_SOURCE_DIR + "/tests/launch/programs/utf8_line.py 2>/dev/null");
  REQUIRE(r.exit == 0);
  // Each rank: one console line of 65,535 bytes ("x" and 32,767 characters: byte 65,536 would split the next
  // one) and one of the rest; no character split, nothing lost.
  const std::string e = "\xc3\xa9";
  std::string first = "x", rest;
  for (int i = 0; i < 32767; ++i) first += e;
  for (int i = 32767; i < 40000; ++i) rest += e;
  std::map<std::string, std::vector<std::string>> lines;  // the lines of each rank, in order
  std::istringstream in(r.out);
  for (std::string line; std::getline(in, line);)
    if (line.rfind("[rank ", 0) == 0) lines[line.substr(0, 9)].push_back(line.substr(9));
  for (const char* rank : {"[rank 0] ", "[rank 1] "}) {
    INFO(rank);
    CHECK(lines[rank] == std::vector<std::string>{first, rest});
  }
  CHECK(mr::is_printable(r.out));
}

TEST_CASE("a bar shown as it comes is never cut inside a UTF-8 character, and every console line has the prefix",
          "[launch][console][process]") {
  mrtest::Proc r = mrtest::run_shell("timeout -k 5 60 env BAR=1 PYTHON_EXEC=/usr/bin/python3 " + kBin + " --config " +
                                     kConfig + " --micro-batch-size 1 --nproc-per-node 2 --no-append-args " +
                                     MR_SOURCE_DIR + "/tests/launch/programs/utf8_line.py 2>/dev/null");
  REQUIRE(r.exit == 0);
  std::istringstream in(r.out);
  int lines = 0;
  size_t bytes = 0;
  for (std::string line; std::getline(in, line); ++lines) {
    INFO("line " << lines << " starts " << line.substr(0, 12));
    CHECK(line.rfind("[rank ", 0) == 0);
    // Valid UTF-8 throughout: no character split by a newline or another rank's text.
    for (size_t i = 0; i < line.size();) {
      uint32_t cp = 0;
      const size_t n = mr::utf8_char(line, i, cp);
      REQUIRE(n > 0);
      i += n;
    }
    bytes += line.size() - 9;  // each rank's 80,000 bytes of é and its x, past the prefix
  }
  CHECK(lines >= 4);  // each rank's line cut at 64 KiB at least once
  CHECK(bytes == 2 * 80001);
}

TEST_CASE("a progress bar drawn with \\r is shown as it comes, each redraw with the rank's prefix",
          "[launch][console][process]") {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("mr-progress-bar-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string out = (dir / "out").string();
  // Rank 1 waits (up to 30 s) until the console shows rank 0's latest redraw while rank 0's line is still open;
  // before, the whole line waited for its newline.
  mrtest::Proc r = mrtest::run_shell("timeout -k 5 90 env CONSOLE=" + out + " PYTHON_EXEC=/usr/bin/python3 " + kBin +
                                     " --config " + kConfig + " --micro-batch-size 1 --nproc-per-node 2 --no-append-args " +
                                     MR_SOURCE_DIR + "/tests/launch/programs/progress_bar.py > " + out + " 2>/dev/null");
  REQUIRE(r.exit == 0);
  std::ifstream in(out, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  INFO(text);
  // The bar (its first \r needs no return), then rank 1's line, which first ends the bar's line so that it does not
  // overwrite the bar from its first column; rank 1's \r\n line as written; the bar's last redraw on a line of its
  // own, with the prefix.
  CHECK(text.find("[rank 0] bar 1\r[rank 0] bar 2\n[rank 1] segment shown\n") != std::string::npos);
  CHECK(text.find("[rank 1] crlf\r\n") != std::string::npos);
  CHECK(text.find("\n[rank 0] bar 3\n") != std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST_CASE("a broken bar's line ended with \\r\\n leaves no empty line; a bar on stderr is not broken by stdout "
          "going elsewhere", "[launch][console][process]") {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("mr-progress-bar2-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string out = (dir / "out").string(), err = (dir / "err").string();
  auto run = [&](const std::string& env, const std::string& console, const std::string& redirect) {
    mrtest::Proc r = mrtest::run_shell("timeout -k 5 90 env " + env + " CONSOLE=" + console +
                                       " PYTHON_EXEC=/usr/bin/python3 " + kBin + " --config " + kConfig +
                                       " --micro-batch-size 1 --nproc-per-node 2 --no-append-args " + MR_SOURCE_DIR +
                                       "/tests/launch/programs/progress_bar.py " + redirect);
    REQUIRE(r.exit == 0);
  };
  auto read = [](const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  // print(i, end="\r") ... print(): the bar's line was ended by rank 1's line already; its \r\n adds nothing.
  run("END=crlf", out, "> " + out + " 2>/dev/null");
  std::string text = read(out);
  INFO(text);
  CHECK(text.find("[rank 0] bar 1\r[rank 0] bar 2\n[rank 1] segment shown\n") != std::string::npos);
  CHECK(text.find("[rank 0] \r\n") == std::string::npos);
  CHECK(text.find("[rank 0] \n") == std::string::npos);
  // The bar on stderr (a file of its own), rank 1's lines on stdout (another file): the bar is one line.
  run("BAR=stderr", err, "> " + out + " 2> " + err);
  text = read(err);
  CHECK(text.find("[rank 0] bar 1\r[rank 0] bar 2\r[rank 0] bar 3\n") != std::string::npos);
  CHECK(read(out).find("[rank 1] segment shown\n") != std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST_CASE("the launcher's own message while a rank's progress bar is open starts on a line of its own",
          "[launch][console][process]") {
  // Rank 0 leaves a bar open on stderr; rank 1 fails, and the launcher says so while the bar is on the console.
  mrtest::Proc r = mrtest::run_shell(
      "timeout -k 5 60 " + kBin + " --config " + kConfig + " --micro-batch-size 1 --nproc-per-node 2 --no-append-args "
      "--no-python -- /bin/sh -c 'if [ $RANK = 0 ]; then printf \"\\rload 10%%\\rload 50%%\" >&2; sleep 5; fi; "
      "sleep 0.5; exit 3' 2>&1");
  INFO(r.out);
  CHECK(r.exit == 3);  // the failed worker's code (docs/launch.md)
  CHECK(r.out.find("[rank 0] load 10%\r[rank 0] load 50%\nmegatron-run: worker rank 1") != std::string::npos);
  // The failure summary shows the last redraw of a stderr line, as a terminal would.
  CHECK(r.out.find("\\x0d") == std::string::npos);
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
                             "--virtual-local-rank", "--signals-to-handle", "--event-log-handler", "--numa-binding MODE",
                          "--logs-specs", "--print-completion SHELL"}) {
    INFO(opt);
    CHECK(r.out.find(opt) != std::string::npos);
  }
  // The usage line names every --format of a dry run; --master-port's default as a one-node launch has it.
  CHECK(r.out.find("megatron-run --dry-run [--config FILE]... [--format text|json|argv|argv0]") != std::string::npos);
  CHECK(r.out.find("default 127.0.0.1 and, on\n                               one node, a free port") != std::string::npos);
  CHECK(r.out.find("127.0.0.1:29500") == std::string::npos);
}
