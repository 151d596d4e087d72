// torchrun's --event-log-handler console (launch/event_log.h): the records, byte for byte as Python's json.dumps
// writes torch 2.15's (the agent's, a worker's, a timed step's; a worker's raw_error; LOGLEVEL; the host name), and
// when megatron-run writes them (per attempt RENDEZVOUS, ASSIGN_WORKER_RANKS and START; each worker's end; the
// agent's SUCCEEDED after the run, whatever the workers did, FAILED when the launcher is stopped by a signal, also
// while the launchers meet).
#include <catch2/catch.hpp>

#include <cctype>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "../config/binary.h"
#include "launch/event_log.h"
#include "sockets.h"

namespace fs = std::filesystem;

namespace {

const std::string kBin = std::string("'") + MR_BINARY + "'";
const std::string kConfig = std::string(MR_SOURCE_DIR) + "/configs/default.yaml";

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

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
        "rdzv_backend": "c10d", "raw_error": "received signal 15 (SIGTERM)", "metadata": md, "agent_restarts": 3,
        "duration_ms": None}
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
  // Before the launchers have met, torchrun's worker group has no rank and no size yet (None: null).
  e.group_rank.reset();
  e.group_world_size.reset();
  const std::string unmet = mr::launch::agent_event_json(e);
  CHECK(unmet.find("\"group_rank\": null") != std::string::npos);
  CHECK(unmet.find("\"{\\\"group_world_size\\\": null, ") != std::string::npos);
  // The parts a signal handler writes around the run time are the record.
  e.total_run_time = 7;
  const mr::launch::AgentEventParts parts = mr::launch::agent_event_json_parts(e);
  CHECK(parts.before + "7" + parts.after == mr::launch::agent_event_json(e));
}

TEST_CASE("a worker's and a timed step's event records are what torchrun 2.x's _construct_event gives", "[launch][events]") {
  mr::launch::AgentEvent e;
  e.state = "FAILED";
  e.run_id = "r1";
  e.group_rank = 1;
  e.group_world_size = 2;
  e.hostname = "h.example";
  e.total_run_time = 5;
  e.raw_error = "{\"message\": \"<NONE>\"}";
  e.entry_point = "python3";
  e.agent_restarts = 1;
  e.worker = mr::launch::AgentEvent::WorkerFields{3, 4242, 1, 3, 4, -15, 4242};
  mr::launch::AgentEvent timed;
  timed.state = "RENDEZVOUS";
  timed.group_rank.reset();
  timed.group_world_size.reset();
  timed.hostname = "h";
  timed.entry_point = "python3";
  timed.duration_ms = 2.424855999834108;
  mr::launch::AgentEvent start = e;
  start.state = "START";
  start.raw_error.reset();
  start.worker->exit_code.reset();
  start.worker->worker_pid.reset();
  // torch 2.15's _construct_event: the worker's fields as one-element tuples in the inner metadata.
  const std::string py = R"PY(
import json
def ev(state, source, gr, wid, grp, gws, raw, md_extra, restarts, t, dur, host, run_id):
    md = {"group_world_size": gws, "entry_point": "python3"}
    md.update(md_extra)
    meta = {"run_id": run_id, "global_rank": gr, "group_rank": grp, "worker_id": wid, "role": "default",
            "hostname": host, "state": state, "total_run_time": t, "rdzv_backend": "static", "raw_error": raw,
            "metadata": json.dumps(md), "agent_restarts": restarts, "duration_ms": dur}
    print(json.dumps({"name": "torchelastic.worker.status." + state, "source": source, "timestamp": 0, "metadata": meta}))
w = lambda code, pid: {"local_rank": (1,), "role_rank": (3,), "role_world_size": (4,), "exit_code": (code,), "worker_pid": (pid,)}
ev("FAILED", "WORKER", 3, "4242", 1, 2, json.dumps({"message": "<NONE>"}), w(-15, 4242), 1, 5, None, "h.example", "r1")
ev("RENDEZVOUS", "AGENT", None, None, None, None, None, {}, 0, 0, 2.424855999834108, "h", "none")
ev("START", "WORKER", 3, "4242", 1, 2, None, w(None, None), 1, 5, None, "h.example", "r1")
)PY";
  const mrtest::Proc want = mrtest::run_shell("/usr/bin/python3 -c '" + py + "'");
  REQUIRE(want.exit == 0);
  CHECK(mr::launch::agent_event_json(e) + "\n" + mr::launch::agent_event_json(timed) + "\n" +
            mr::launch::agent_event_json(start) + "\n" ==
        want.out);
}

TEST_CASE("a failed worker's raw_error is its error file's JSON as json.dumps writes it, or torch's shared <NONE> record",
          "[launch][events]") {
  const fs::path dir = fs::temp_directory_path() / ("mr-events-raw-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path rec = dir / "error.json", empty = dir / "empty.json", bad = dir / "bad.json";
  std::ofstream(rec) << "{\"message\":{\"message\":\"RuntimeError: caf\xc3\xa9\",\"extraInfo\":{\"py_callstack\":\"T\\n\","
                        "\"timestamp\":\"17\"}},\"n\":[1,2.50,1e-5,true,null]}";
  std::ofstream(empty) << "{\"message\": \"\", \"errorTraits\": 1, \"x\": 2}";
  std::ofstream(bad) << "not json";
  const std::string py = "import json; print(json.dumps(json.load(open('" + rec.string() + "'))))";
  const mrtest::Proc want = mrtest::run_shell("/usr/bin/python3 -c \"" + py + "\"");
  REQUIRE(want.exit == 0);
  CHECK(mr::launch::worker_raw_error(rec.string(), 7, true) + "\n" == want.out);
  const std::string traits =
      "\"errorTraits\": {\"category\": \"system_terminated_error\", \"retryability\": \"False\"}";
  // No file (or no JSON): torch's one <NONE> dictionary, with the traits once a failure with a code above 0 added them.
  CHECK(mr::launch::worker_raw_error((dir / "none").string(), -15, false) == "{\"message\": \"<NONE>\"}");
  CHECK(mr::launch::worker_raw_error((dir / "none").string(), -15, true) == "{\"message\": \"<NONE>\", " + traits + "}");
  CHECK(mr::launch::worker_raw_error(bad.string(), 1, true) == "{\"message\": \"<NONE>\", " + traits + "}");
  CHECK(mr::launch::adds_error_traits((dir / "none").string(), 7));
  CHECK(mr::launch::adds_error_traits(bad.string(), 7));
  CHECK_FALSE(mr::launch::adds_error_traits((dir / "none").string(), -9));
  CHECK_FALSE(mr::launch::adds_error_traits(rec.string(), 7));
  // A file whose message is empty gets the traits itself (in place of its own), for a code above 0 only.
  CHECK(mr::launch::worker_raw_error(empty.string(), 3, false) == "{\"message\": \"\", " + traits + ", \"x\": 2}");
  CHECK(mr::launch::worker_raw_error(empty.string(), -15, false) == "{\"message\": \"\", \"errorTraits\": 1, \"x\": 2}");
  fs::remove_all(dir);
}

TEST_CASE("LOGLEVEL decides whether torch's events logger writes the records, and the host name is socket.getfqdn()'s",
          "[launch][events]") {
  using mr::launch::events_logged;
  CHECK(events_logged(nullptr));
  CHECK(events_logged("INFO"));
  CHECK(events_logged("DEBUG"));
  for (const char* quiet : {"WARNING", "WARN", "ERROR", "CRITICAL", "FATAL", "NOTSET"}) CHECK_FALSE(events_logged(quiet));
  // Values Python's logging refuses (torchrun fails at import): megatron-run keeps its default, INFO.
  for (const char* odd : {"30", "warning", ""}) CHECK(events_logged(odd));
  const mrtest::Proc fq = mrtest::run_shell("/usr/bin/python3 -c 'import socket; print(socket.getfqdn())'");
  REQUIRE(fq.exit == 0);
  CHECK(mr::launch::fq_hostname() + "\n" == fq.out);
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
  // torchrun 2.x's stream before it: per attempt RENDEZVOUS, ASSIGN_WORKER_RANKS and a START per worker (the
  // restart's rendezvous holds the group's rank and size from before, and the restart counted), then one record
  // per worker of the last attempt, /bin/false's exit code 1 and torch's <NONE> error with its traits.
  auto count = [&](const std::string& needle) {
    size_t n = 0;
    for (size_t at = failed.out.find(needle); at != std::string::npos; at = failed.out.find(needle, at + 1)) ++n;
    return n;
  };
  CHECK(count("{\"name\": \"torchelastic.worker.status.") == 11);
  CHECK(count("{\"name\": \"torchelastic.worker.status.RENDEZVOUS\", \"source\": \"AGENT\"") == 2);
  CHECK(count("{\"name\": \"torchelastic.worker.status.ASSIGN_WORKER_RANKS\", \"source\": \"AGENT\"") == 2);
  CHECK(count("{\"name\": \"torchelastic.worker.status.START\", \"source\": \"WORKER\"") == 4);
  CHECK(count("{\"name\": \"torchelastic.worker.status.FAILED\", \"source\": \"WORKER\"") == 2);
  CHECK(count("\"group_rank\": null, \"worker_id\": null, \"role\": \"trainer\", \"hostname\"") == 2);
  CHECK(count("\"state\": \"RENDEZVOUS\", \"total_run_time\": 0, \"rdzv_backend\": \"static\", \"raw_error\": null, "
              "\"metadata\": \"{\\\"group_world_size\\\": 1, \\\"entry_point\\\": \\\"false\\\"}\", \"agent_restarts\": 1, "
              "\"duration_ms\": ") == 1);
  CHECK(count("\"global_rank\": 1, \"group_rank\": 0, \"worker_id\": \"") == 3);
  // The first to fail exited 1; the other did too, or was stopped (-15) first.
  CHECK(count("\\\"exit_code\\\": [1], \\\"worker_pid\\\": [") >= 1);
  CHECK(count("\\\"exit_code\\\": [null], \\\"worker_pid\\\": [null]") == 4);
  CHECK(count("\"raw_error\": \"{\\\"message\\\": \\\"<NONE>\\\", \\\"errorTraits\\\": {\\\"category\\\": "
              "\\\"system_terminated_error\\\", \\\"retryability\\\": \\\"False\\\"}}\"") == 2);
  // torch's events logger is at LOGLEVEL: above INFO, no record.
  const mrtest::Proc warn = mrtest::run_shell("LOGLEVEL=WARNING " + run + " --no-python /bin/true 2>&1");
  CHECK(warn.exit == 0);
  CHECK(warn.out.find("torchelastic.worker.status.") == std::string::npos);
  // A launcher stopped by SIGTERM: FAILED, the signal as its error. The SIGTERM goes once the worker has marked
  // that it runs (`up`; with its trap set, below), not after a guessed 2 s: a loaded machine may start it later.
  const fs::path dir = fs::temp_directory_path() / ("mr-events-stop-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string up = (dir / "up").string();
  const std::string when_up = "for i in $(seq 1200); do [ -e " + up + " ] && break; sleep 0.05; done; ";
  const mrtest::Proc stopped = mrtest::run_shell(
      "( " + run + " --no-python /bin/sh -c \": > " + up + "; sleep 30\" 2>&1 & pid=$!; " + when_up +
      "kill -TERM $pid; wait $pid; echo exit=$? )");
  INFO(stopped.out);
  const std::string s = event_line(stopped.out);
  CHECK(s.find("\"state\": \"FAILED\"") != std::string::npos);
  CHECK(s.find("\"raw_error\": \"received signal 15 (SIGTERM)\"") != std::string::npos);
  // Its worker started (START), but no record of how it ended: torchrun's agent raises on the signal.
  CHECK(stopped.out.find("torchelastic.worker.status.START") != std::string::npos);
  CHECK(stopped.out.find("\"source\": \"WORKER\", \"timestamp\": 0, \"metadata\": {\"run_id\": \"none\", \"global_rank\": 0, "
                         "\"group_rank\": 0, \"worker_id\": \"") != std::string::npos);
  CHECK(stopped.out.find("\"name\": \"torchelastic.worker.status.TERMINATED\"") == std::string::npos);
  CHECK(stopped.out.find("exit=143") != std::string::npos);
  // A stop the worker handles (it traps SIGTERM and exits 0): the launcher exits 0, and its record agrees,
  // SUCCEEDED with no error (its run returned; torchrun's agent would die of the signal, FAILED).
  fs::remove(up);
  const mrtest::Proc handled = mrtest::run_shell(
      "( " + run + " --no-python /bin/sh -c 'trap \"exit 0\" TERM; : > " + up + "; sleep 30 & wait' 2>&1 & pid=$!; " +
      when_up + "kill -TERM $pid; wait $pid; echo exit=$? )");
  fs::remove_all(dir);
  INFO(handled.out);
  const std::string h = event_line(handled.out);
  CHECK(handled.out.find("they handled the stop; exit 0") != std::string::npos);
  CHECK(handled.out.find("exit=0") != std::string::npos);
  CHECK(h.find("\"name\": \"torchelastic.worker.status.SUCCEEDED\"") != std::string::npos);
  CHECK(h.find("\"state\": \"SUCCEEDED\"") != std::string::npos);
  CHECK(h.find("\"raw_error\": null") != std::string::npos);
  // The default handler (null) records nothing.
  const mrtest::Proc quiet = mrtest::run_shell(kBin + " --config " + kConfig + " --no-python /bin/true 2>&1");
  CHECK(quiet.exit == 0);
  CHECK(event_line(quiet.out).empty());
}

TEST_CASE("--event-log-handler console: a stop signal while the launchers meet records FAILED",
          "[launch][events][multinode][process]") {
  // Node 0 of two waits for node 1, which never comes. Once node 0's launcher hosts the launchers' store (its port is
  // taken, a bind to it fails: the launcher is waiting), a background loop sends it the signal. The launcher is the
  // script's own process (exec), not a background job, whose SIGINT a shell would ignore.
  const fs::path script = fs::temp_directory_path() / ("mr-events-meet-" + std::to_string(getpid()) + ".sh");
  std::ofstream(script) << "sig=$1 port=$2; shift 2\n"
                           "( for i in $(seq 600); do\n"
                           "    /usr/bin/python3 -c \"import socket; socket.socket().bind(('127.0.0.1', $port))\" "
                           "2>/dev/null || break; sleep 0.1\n"
                           "  done; sleep 0.5; kill -$sig $$ ) >/dev/null 2>&1 &\n"
                           "exec \"$@\"\n";
  struct Case {
    const char* backend;
    int sig;
    const char* name;
  };
  for (const Case c : {Case{"static", SIGTERM, "SIGTERM"}, Case{"c10d", SIGINT, "SIGINT"}}) {
    const bool is_static = std::string(c.backend) == "static";
    const int port = mrtest::store_port(), launcher_port = mrtest::store_port();
    const std::string flags =
        is_static ? "--nnodes 2 --node-rank 0 --master-addr 127.0.0.1 --master-port " + std::to_string(port) +
                        " --launcher-port " + std::to_string(launcher_port)
                  : "--nnodes 2 --rdzv-backend c10d --rdzv-endpoint 127.0.0.1:" + std::to_string(port);
    const mrtest::Proc r = mrtest::run_shell(
        "(timeout -k 5 90 sh '" + script.string() + "' " + std::to_string(c.sig) + " " +
        std::to_string(is_static ? launcher_port : port) + " " + kBin + " --config " + kConfig +
        " --event-log-handler console --rdzv-id meet --nproc-per-node 1 " + flags +
        " --join-timeout 60 --no-append-args --no-python true 2>&1) 2>/dev/null; echo exit=$?");
    INFO(c.backend << ": " << r.out);
    // Said, recorded, and ended as the signal ends it.
    CHECK(r.out.find(std::string("received signal ") + std::to_string(c.sig) + " (" + c.name +
                     ") while waiting for the other nodes; exiting") != std::string::npos);
    CHECK(r.out.find("exit=" + std::to_string(128 + c.sig)) != std::string::npos);
    const std::string e = event_line(r.out);
    CHECK(e.find("\"name\": \"torchelastic.worker.status.FAILED\"") != std::string::npos);
    CHECK(e.find(std::string("\"raw_error\": \"received signal ") + std::to_string(c.sig) + " (" + c.name + ")\"") !=
          std::string::npos);
    CHECK(e.find("\"run_id\": \"meet\"") != std::string::npos);
    CHECK(e.find(std::string("\"rdzv_backend\": \"") + c.backend + "\"") != std::string::npos);
    // Not met yet: no rank, no size (torchrun's None), no restart; the run time in whole seconds.
    CHECK(e.find("\"group_rank\": null") != std::string::npos);
    CHECK(e.find("\\\"group_world_size\\\": null") != std::string::npos);
    CHECK(e.find("\"agent_restarts\": 0, \"duration_ms\": null}}") != std::string::npos);
    const size_t t = e.find("\"total_run_time\": ");
    REQUIRE(t != std::string::npos);
    CHECK(std::isdigit(static_cast<unsigned char>(e[t + 18])));
    CHECK(e.back() == '}');
  }
  fs::remove(script);
}

TEST_CASE("--event-log-handler console: a stop signal while node 0 waits for the others at the end records FAILED",
          "[launch][events][multinode][process]") {
  // Node 0's worker ends at once, node 1's sleeps: node 0's launcher, which hosts the launchers' store, waits for
  // node 1 and gets SIGTERM once it says so. Node 1's launcher is stopped at the end.
  const fs::path dir = fs::temp_directory_path() / ("mr-events-end-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const int mp = mrtest::store_port(), lp = mrtest::store_port();
  const std::string node = kBin + " --config " + kConfig + " --event-log-handler console --rdzv-id bye " +
                           "--nproc-per-node 1 --nnodes 2 --master-addr 127.0.0.1 --master-port " + std::to_string(mp) +
                           " --launcher-port " + std::to_string(lp) + " --join-timeout 60 --no-append-args --no-python ";
  const std::string n0 = (dir / "node0.out").string(), other = (dir / "node1.pid").string();
  // Node 0 is the script's own process (exec), the one the background loop signals.
  std::ofstream(dir / "run.sh") << node << "--node-rank 1 sleep 60 >'" << (dir / "node1.out").string() << "' 2>&1 &\n"
                                << "echo $! >'" << other << "'\n"
                                << "( for i in $(seq 600); do grep -q 'is done; waiting for the other nodes' '" << n0
                                << "' && break; sleep 0.1; done; sleep 0.5; kill -TERM $$ ) >/dev/null 2>&1 &\n"
                                << "exec " << node << "--node-rank 0 true >'" << n0 << "' 2>&1\n";
  const mrtest::Proc r = mrtest::run_shell("(timeout -k 5 90 sh '" + (dir / "run.sh").string() + "') 2>/dev/null; echo exit=$?");
  // Node 1's launcher: stopped, and waited for (at most 30 s).
  mrtest::run_shell("(p=$(cat '" + other + "'); kill -KILL $p; for i in $(seq 300); do kill -0 $p || break; "
                    "sleep 0.1; done) 2>/dev/null");
  const std::string out = slurp(n0);
  INFO(out);
  CHECK(r.out.find("exit=143") != std::string::npos);
  CHECK(out.find("received signal 15 (SIGTERM) while waiting for the other nodes; exiting") != std::string::npos);
  // Met: node 0 of 2; FAILED, the signal as its error.
  const std::string e = event_line(out);
  CHECK(e.find("\"name\": \"torchelastic.worker.status.FAILED\"") != std::string::npos);
  CHECK(e.find("\"raw_error\": \"received signal 15 (SIGTERM)\"") != std::string::npos);
  CHECK(e.find("\"group_rank\": 0") != std::string::npos);
  CHECK(e.find("\\\"group_world_size\\\": 2") != std::string::npos);
  // One record: not a SUCCEEDED one as well.
  CHECK(out.find("torchelastic.worker.status.SUCCEEDED") == std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("--event-log-handler console: a stop signal while the nodes meet again for a restart records FAILED",
          "[launch][events][multinode][process]") {
  // Node 1's worker fails in the first attempt, with a restart left: both nodes restart together. Node 0's worker
  // ignores SIGTERM, so node 0 joins the next attempt only after --term-timeout 8; node 1 waits for it meanwhile and
  // gets SIGTERM once it says it restarts. Node 0's launcher is killed at the end (SIGKILL: a SIGTERM would have it
  // wait out its --term-timeout for the worker that ignores it; its guardian stops that worker).
  const fs::path dir = fs::temp_directory_path() / ("mr-events-restart-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const int mp = mrtest::store_port(), lp = mrtest::store_port();
  // Node 1's worker fails once node 0's has set its trap (its mark `trapped`), not a guessed 0.5 s after its own
  // start: a stop before the trap would end node 0's worker at once, and node 0 would not keep node 1 waiting.
  const std::string trapped = (dir / "trapped").string();
  const std::string after_trap = "for i in $(seq 1200); do [ -e " + trapped + " ] && break; sleep 0.05; done; ";
  auto node = [&](int rank) {
    return kBin + " --config " + kConfig + " --event-log-handler console --rdzv-id again --nproc-per-node 1 " +
           "--nnodes 2 --node-rank " + std::to_string(rank) + " --master-addr 127.0.0.1 --master-port " +
           std::to_string(mp) + " --launcher-port " + std::to_string(lp) + " --join-timeout 60 --max-restarts 1 " +
           "--term-timeout 8 --no-append-args --no-python sh -c " +
           "'if [ \"$GROUP_RANK\" = 1 ]; then " + after_trap + "exit 7; fi; trap \"\" TERM; : > " + trapped +
           "; sleep 30'";
  };
  const std::string n1 = (dir / "node1.out").string(), other = (dir / "node0.pid").string();
  // Node 1 is the script's own process (exec), the one the background loop signals.
  std::ofstream(dir / "run.sh") << node(0) << " >'" << (dir / "node0.out").string() << "' 2>&1 &\n"
                                << "echo $! >'" << other << "'\n"
                                << "( for i in $(seq 600); do grep -q 'restarting the worker group with the other nodes' '"
                                << n1 << "' && break; sleep 0.1; done; sleep 0.5; kill -TERM $$ ) >/dev/null 2>&1 &\n"
                                << "exec " << node(1) << " >'" << n1 << "' 2>&1\n";
  const mrtest::Proc r = mrtest::run_shell("(timeout -k 5 90 sh '" + (dir / "run.sh").string() + "') 2>/dev/null; echo exit=$?");
  mrtest::run_shell("(p=$(cat '" + other + "'); kill -KILL $p; for i in $(seq 300); do kill -0 $p || break; "
                    "sleep 0.1; done) 2>/dev/null");
  const std::string out = slurp(n1);
  INFO(out);
  CHECK(r.out.find("exit=143") != std::string::npos);
  CHECK(out.find("restart 1 of 1 (--max-restarts): restarting the worker group with the other nodes") != std::string::npos);
  CHECK(out.find("received signal 15 (SIGTERM) while waiting for the other nodes; exiting") != std::string::npos);
  // Node 1 of 2, the restart it waited for counted (torchrun counts it before it meets the others again).
  const std::string e = event_line(out);
  CHECK(e.find("\"name\": \"torchelastic.worker.status.FAILED\"") != std::string::npos);
  CHECK(e.find("\"raw_error\": \"received signal 15 (SIGTERM)\"") != std::string::npos);
  CHECK(e.find("\"group_rank\": 1") != std::string::npos);
  CHECK(e.find("\\\"group_world_size\\\": 2") != std::string::npos);
  CHECK(e.find("\"agent_restarts\": 1, \"duration_ms\": null}}") != std::string::npos);
  CHECK(out.find("torchelastic.worker.status.SUCCEEDED") == std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("--event-log-handler console: after a c10d restart, the record gives the last round's GROUP_RANK, which "
          "the restart kept", "[launch][events][multinode][process]") {
  // Round 0: the launcher that became node 1 has its worker fail (a restart is left); node 0's worker takes 2 s to
  // stop, so the failing node's launcher comes to round 1 first. The round numbers the nodes by their launchers'
  // order at the store, not by arrival, so each keeps its rank (review launch35 #1; it used to become node 0).
  // Each record's group_rank is the GROUP_RANK its workers had last.
  const fs::path dir = fs::temp_directory_path() / ("mr-events-round-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const int sp = mrtest::store_port();
  // Node 1's worker fails once node 0's has set its trap (its mark), not a guessed second after its own start: a
  // stop before the trap would end node 0's worker at once, and the failing node would not come to round 1 first.
  const std::string trapped = (dir / "trapped").string();
  const std::string after_trap = "for i in $(seq 1200); do [ -e " + trapped + " ] && break; sleep 0.05; done; ";
  const std::string node = kBin + " --config " + kConfig + " --event-log-handler console --rdzv-id round " +
                           "--nproc-per-node 1 --nnodes 2 --rdzv-backend c10d --rdzv-endpoint 127.0.0.1:" +
                           std::to_string(sp) + " --join-timeout 60 --max-restarts 1 --no-append-args --no-python sh -c " +
                           "'echo \"attempt $TORCHELASTIC_RESTART_COUNT rank $GROUP_RANK\"; "
                           "if [ \"$TORCHELASTIC_RESTART_COUNT\" = 1 ]; then exit 0; fi; "
                           "if [ \"$GROUP_RANK\" = 1 ]; then " + after_trap + "exit 7; fi; "
                           "trap \"sleep 2; exit 0\" TERM; : > " + trapped + "; sleep 30 & wait'";
  const std::string a = (dir / "a.out").string(), b = (dir / "b.out").string();
  const mrtest::Proc r = mrtest::run_shell("cd '" + dir.string() + "' && (timeout -k 5 90 " + node + " >'" + a +
                                           "' 2>&1 & sleep 0.3; timeout -k 5 90 " + node + " >'" + b +
                                           "' 2>&1; echo b=$?; wait $!; echo a=$?)");
  INFO(r.out);
  CHECK(r.out.find("b=0") != std::string::npos);
  CHECK(r.out.find("a=0") != std::string::npos);
  for (const std::string& f : {a, b}) {
    const std::string out = slurp(f);
    INFO(f << ":\n" << out);
    const size_t last = out.rfind("attempt 1 rank ");
    REQUIRE(last != std::string::npos);
    const char rank = out[last + std::string("attempt 1 rank ").size()];
    const std::string e = event_line(out);
    CHECK(e.find("\"name\": \"torchelastic.worker.status.SUCCEEDED\"") != std::string::npos);
    CHECK(e.find(std::string("\"group_rank\": ") + rank + ",") != std::string::npos);
    CHECK(e.find("\"agent_restarts\": 1, \"duration_ms\": null}}") != std::string::npos);
  }
  // No renumbering: the launcher that arrived first at round 1 (node 1's, whose worker failed) is node 1 again.
  const std::string oa = slurp(a), ob = slurp(b);
  CHECK(oa.find("attempt 0 rank 0") != std::string::npos);
  CHECK(oa.find("attempt 1 rank 0") != std::string::npos);
  CHECK(ob.find("attempt 0 rank 1") != std::string::npos);
  CHECK(ob.find("attempt 1 rank 1") != std::string::npos);
  fs::remove_all(dir);
}
