// A real torchrun 2.x and megatron-run side by side (TORCHRUN=/path/to/torchrun; Debian's torchrun 1.13 does not
// start under Python 3.11, so without TORCHRUN each case reports itself skipped). The environment: the probe
// (tests/launch/programs/probe.py) prints torchrun's variables on 2 ranks under each launcher; they are equal,
// except the documented differences (docs/launch.md): TORCHELASTIC_USE_AGENT_STORE (megatron-run hosts no store for
// the workers), OMP_NUM_THREADS (an even share, not 1) and the temporary directory's random name. The
// --event-log-handler console records: equal but for pids, durations and the run time.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "../config/binary.h"
#include "config/value.h"

namespace {

const std::string kProbe = std::string(MR_SOURCE_DIR) + "/tests/launch/programs/probe.py";

// rank -> {variable -> value}, from the probe's JSON lines.
std::map<std::string, std::map<std::string, std::string>> envs(const std::string& out) {
  std::map<std::string, std::map<std::string, std::string>> by_rank;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    const size_t brace = line.find('{');
    if (brace == std::string::npos) continue;
    std::map<std::string, std::string> env;
    const mr::Value parsed = mr::Value::parse_json(line.substr(brace));  // alive while its object is read
    for (const auto& [k, v] : parsed.as_object())
      if (k == "env")
        for (const auto& [name, val] : v.as_object()) env[name] = val.as_str();
    by_rank[env["RANK"]] = env;
  }
  return by_rank;
}

}  // namespace

TEST_CASE("a real torchrun and megatron-run give the ranks the same variables", "[launch][torchrun][process]") {
  const char* torchrun = std::getenv("TORCHRUN");
  if (!torchrun || !*torchrun) {
    WARN("TORCHRUN is not set: skipping the comparison with a real torchrun 2.x (docs/launch.md)");
    return;
  }
  const std::string port = "29613";
  mrtest::Proc theirs = mrtest::run_shell("timeout -k 5 120 '" + std::string(torchrun) +
                                          "' --nproc-per-node 2 --master-port " + port +
                                          " --no-python /usr/bin/python3 " + kProbe + " 2>/dev/null");
  mrtest::Proc ours = mrtest::run_shell("timeout -k 5 60 env PYTHON_EXEC=/usr/bin/python3 '" + std::string(MR_BINARY) +
                                        "' --config " + MR_SOURCE_DIR + "/configs/default.yaml --nproc-per-node 2 " +
                                        "--master-port " + port + " --no-append-args " + kProbe + " 2>/dev/null");
  REQUIRE(theirs.exit == 0);
  REQUIRE(ours.exit == 0);
  auto t = envs(theirs.out), m = envs(ours.out);
  INFO(theirs.out << "\n---- megatron-run:\n" << ours.out);
  REQUIRE(t.size() == 2);
  REQUIRE(m.size() == 2);
  const std::regex tmp("torchelastic_[^/]*/none_[^/]*/");
  for (const auto& [rank, tenv] : t) {
    INFO("rank " << rank);
    std::map<std::string, std::string> a = tenv, b = m[rank];
    for (auto* e : {&a, &b}) {
      (*e)["TORCHELASTIC_ERROR_FILE"] = std::regex_replace((*e)["TORCHELASTIC_ERROR_FILE"], tmp, "torchelastic_X/none_Y/");
      e->erase("OMP_NUM_THREADS");
    }
    CHECK(a["TORCHELASTIC_USE_AGENT_STORE"] == "True");
    CHECK(b["TORCHELASTIC_USE_AGENT_STORE"] == "False");
    a.erase("TORCHELASTIC_USE_AGENT_STORE");
    b.erase("TORCHELASTIC_USE_AGENT_STORE");
    CHECK(a == b);
  }
}

namespace {

// The event records of `out`, each with what differs between runs made equal: pids (worker_id, worker_pid),
// durations and the run time.
std::vector<std::string> event_records(const std::string& out) {
  std::vector<std::string> records;
  std::istringstream in(out);
  const std::regex pid("\"worker_id\": \"[0-9]+\""), wpid("worker_pid\\\\\": \\[[0-9]+\\]"),
      dur("\"duration_ms\": [0-9.e-]+"), runtime("\"total_run_time\": [0-9]+");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("{\"name\": \"torchelastic.worker.status.", 0) != 0) continue;
    line = std::regex_replace(line, pid, "\"worker_id\": \"PID\"");
    line = std::regex_replace(line, wpid, "worker_pid\\\": [PID]");
    line = std::regex_replace(line, dur, "\"duration_ms\": MS");
    records.push_back(std::regex_replace(line, runtime, "\"total_run_time\": T"));
  }
  return records;
}

}  // namespace

TEST_CASE("a real torchrun and megatron-run write the same --event-log-handler console records",
          "[launch][torchrun][events][process]") {
  const char* torchrun = std::getenv("TORCHRUN");
  if (!torchrun || !*torchrun) {
    WARN("TORCHRUN is not set: skipping the comparison with a real torchrun 2.x's event records (docs/launch.md)");
    return;
  }
  // Rank 1 exits 7 and rank 0 is stopped for it (FAILED with 7, and with -15: torch's <NONE> error with the traits
  // the first added), or both exit 0 (SUCCEEDED).
  for (const char* code : {"7", "0"}) {
    const std::string prog = std::string(" /bin/sh -c 'if [ \"$RANK\" = 1 ]; then sleep 0.5; exit ") + code +
                             "; fi; exec sleep " + (code[0] == '0' ? "0.5" : "5") + "'";
    const mrtest::Proc theirs = mrtest::run_shell("timeout -k 5 120 '" + std::string(torchrun) +
                                                  "' --nproc-per-node 2 --master-port 29613 --event-log-handler console "
                                                  "--no-python" + prog + " 2>&1");
    const mrtest::Proc ours = mrtest::run_shell("timeout -k 5 60 '" + std::string(MR_BINARY) + "' --config " +
                                                MR_SOURCE_DIR + "/configs/default.yaml --nproc-per-node 2 " +
                                                "--event-log-handler console --no-append-args --no-python" + prog + " 2>&1");
    INFO(theirs.out << "\n---- megatron-run:\n" << ours.out);
    const std::vector<std::string> t = event_records(theirs.out), m = event_records(ours.out);
    CHECK(t.size() == 7u);  // RENDEZVOUS, ASSIGN_WORKER_RANKS, 2 START, 2 worker ends, the agent
    CHECK(t == m);
  }
}

TEST_CASE("a real torchrun and megatron-run read -m as a switch: options after it, the first positional word the "
          "module", "[launch][torchrun][process]") {
  const char* torchrun = std::getenv("TORCHRUN");
  if (!torchrun || !*torchrun) {
    WARN("TORCHRUN is not set: skipping the comparison of -m with a real torchrun 2.x (docs/launch.md)");
    return;
  }
  // The probe as a module (python -m probe): it prints its argv. torchrun runs its own Python, megatron-run
  // PYTHON_EXEC: the same argv[1:] either way.
  const std::string path = "PYTHONPATH=" + std::string(MR_SOURCE_DIR) + "/tests/launch/programs ";
  const std::string words = " -m --max-restarts 0 probe a --b 2";
  const mrtest::Proc theirs = mrtest::run_shell("timeout -k 5 120 env " + path + "'" + std::string(torchrun) +
                                                "' --nproc-per-node 1 --master-port 29613" + words + " 2>/dev/null");
  const mrtest::Proc ours = mrtest::run_shell("timeout -k 5 60 env " + path + "PYTHON_EXEC=/usr/bin/python3 '" +
                                              std::string(MR_BINARY) + "' --config " + MR_SOURCE_DIR +
                                              "/configs/default.yaml --nproc-per-node 1 --master-port 29613 "
                                              "--no-append-args" + words + " 2>/dev/null");
  INFO(theirs.out << "\n---- megatron-run:\n" << ours.out);
  REQUIRE(theirs.exit == 0);
  REQUIRE(ours.exit == 0);
  auto argv_of = [](const std::string& out) {
    const size_t at = out.find("\"argv\": ");
    return at == std::string::npos ? std::string() : out.substr(at, out.find('}', at) - at);
  };
  CHECK(argv_of(theirs.out) == "\"argv\": [\"a\", \"--b\", \"2\"]");
  CHECK(argv_of(ours.out) == argv_of(theirs.out));
}
