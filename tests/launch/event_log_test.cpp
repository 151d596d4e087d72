// torchrun's --event-log-handler console (launch/event_log.h): the agent's record, byte for byte as Python's
// json.dumps writes it, and when megatron-run writes it (SUCCEEDED after the run, whatever the workers did;
// FAILED when the launcher is stopped by a signal).
#include <catch2/catch.hpp>

#include <csignal>
#include <string>

#include "../config/binary.h"
#include "launch/event_log.h"

namespace {

const std::string kBin = std::string("'") + MR_BINARY + "'";
const std::string kConfig = std::string(MR_SOURCE_DIR) + "/configs/default.yaml";

// The last line of `out` that holds an event record.
std::string event_line(const std::string& out) {
  const size_t at = out.rfind("{\"name\": \"torchelastic.worker.status.");
  if (at == std::string::npos) return "";
  return out.substr(at, out.find('\n', at) - at);
}

}  // namespace

TEST_CASE("the agent's event record is what Python's json.dumps writes for torchelastic's Event", "[launch][events]") {
  mr::launch::AgentEvent e;
  e.succeeded = false;
  e.run_id = "r\xc3\xa9\xf0\x9f\x98\x80\"\\\n\t\x7f/x";  // é, U+1F600, quote, backslash, controls, DEL, slash
  e.group_rank = 1;
  e.group_world_size = 2;
  e.role = "trainer";
  e.hostname = "node-1.example";
  e.total_run_time = 42;
  e.rdzv_backend = "c10d";
  e.raw_error = "received signal 15 (SIGTERM)";
  e.entry_point = "python3";
  e.agent_restarts = 3;
  // torch/distributed/elastic: Event(name, source=AGENT, timestamp=0, metadata) serialized by json.dumps(asdict()).
  const std::string py = R"PY(
import json
md = json.dumps({"group_world_size": 2, "entry_point": "python3"})
meta = {"run_id": "r\u00e9\U0001F600\"\\\n\t\x7f/x", "global_rank": None, "group_rank": 1, "worker_id": None,
        "role": "trainer", "hostname": "node-1.example", "state": "FAILED", "total_run_time": 42,
        "rdzv_backend": "c10d", "raw_error": "received signal 15 (SIGTERM)", "metadata": md, "agent_restarts": 3}
print(json.dumps({"name": "torchelastic.worker.status.FAILED", "source": "AGENT", "timestamp": 0, "metadata": meta}))
)PY";
  const mrtest::Proc want = mrtest::run_shell("/usr/bin/python3 -c '" + py + "'");
  REQUIRE(want.exit == 0);
  CHECK(mr::launch::agent_event_json(e) + "\n" == want.out);
  // A byte that is not UTF-8 is Python's surrogateescape (torchrun's --rdzv-id from argv); a succeeded record has
  // no error.
  e.succeeded = true;
  e.raw_error.reset();
  e.run_id = "a\xff";
  const std::string ok = mr::launch::agent_event_json(e);
  CHECK(ok.find("\"run_id\": \"a\\udcff\"") != std::string::npos);
  CHECK(ok.find("\"state\": \"SUCCEEDED\"") != std::string::npos);
  CHECK(ok.find("\"raw_error\": null") != std::string::npos);
  CHECK(!mr::launch::fq_hostname().empty());
}

TEST_CASE("--event-log-handler console: one record when the launch ends", "[launch][events]") {
  const std::string run = kBin + " --event-log-handler console --config " + kConfig;
  // Workers that fail: the launcher's run still returned (torchrun records SUCCEEDED), restarts counted.
  const mrtest::Proc failed = mrtest::run_shell(run + " --nproc-per-node 2 --max-restarts 1 --rdzv-id ev1 --role "
                                                      "trainer --no-python /bin/false 2>&1");
  CHECK(failed.exit == 1);
  const std::string f = event_line(failed.out);
  INFO(failed.out);
  CHECK(f.find("\"name\": \"torchelastic.worker.status.SUCCEEDED\"") != std::string::npos);
  CHECK(f.find("\"run_id\": \"ev1\"") != std::string::npos);
  CHECK(f.find("\"role\": \"trainer\"") != std::string::npos);
  CHECK(f.find("\"agent_restarts\": 1") != std::string::npos);
  CHECK(f.find("\\\"entry_point\\\": \\\"false\\\"") != std::string::npos);
  CHECK(f.find("\\\"group_world_size\\\": 1") != std::string::npos);
  // A launcher stopped by SIGTERM: FAILED, the signal as its error.
  const mrtest::Proc stopped = mrtest::run_shell(
      "( " + run + " --no-python /bin/sh -c \"sleep 30\" 2>&1 & pid=$!; sleep 2; kill -TERM $pid; wait $pid; echo exit=$? )");
  INFO(stopped.out);
  const std::string s = event_line(stopped.out);
  CHECK(s.find("\"state\": \"FAILED\"") != std::string::npos);
  CHECK(s.find("\"raw_error\": \"received signal 15 (SIGTERM)\"") != std::string::npos);
  CHECK(stopped.out.find("exit=143") != std::string::npos);
  // The default handler (null) records nothing.
  const mrtest::Proc quiet = mrtest::run_shell(kBin + " --config " + kConfig + " --no-python /bin/true 2>&1");
  CHECK(quiet.exit == 0);
  CHECK(event_line(quiet.out).empty());
}
