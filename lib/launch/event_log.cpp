#include "launch/event_log.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include "config/value.h"

namespace mr::launch {
namespace {

// A JSON string as Python's json.dumps (ensure_ascii) writes it; a byte that is not UTF-8 as Python holds an
// argument decoded with surrogateescape (\udcXX).
std::string py_json_string(const std::string& s) { return json_quote(s, /*ascii_only=*/true); }

std::string optional_string(const std::optional<std::string>& s) { return s ? py_json_string(*s) : "null"; }

std::string optional_int(const std::optional<int>& i) { return i ? std::to_string(*i) : "null"; }

}  // namespace

std::string agent_event_json(const AgentEvent& e) {
  const AgentEventParts p = agent_event_json_parts(e);
  return p.before + std::to_string(e.total_run_time) + p.after;
}

AgentEventParts agent_event_json_parts(const AgentEvent& e) {
  const std::string state = e.succeeded ? "SUCCEEDED" : "FAILED";
  // The inner metadata: the worker group's size and entry point (an agent's record has no worker fields).
  const std::string md = "{\"group_world_size\": " + optional_int(e.group_world_size) +
                         ", \"entry_point\": " + py_json_string(e.entry_point) + "}";
  AgentEventParts p;
  p.before = "{\"name\": " + py_json_string("torchelastic.worker.status." + state) +
             ", \"source\": \"AGENT\", \"timestamp\": 0, \"metadata\": {"
             "\"run_id\": " + py_json_string(e.run_id) +
             ", \"global_rank\": null, \"group_rank\": " + optional_int(e.group_rank) +
             ", \"worker_id\": null, \"role\": " + py_json_string(e.role) +
             ", \"hostname\": " + py_json_string(e.hostname) +
             ", \"state\": " + py_json_string(state) +
             ", \"total_run_time\": ";
  p.after = ", \"rdzv_backend\": " + py_json_string(e.rdzv_backend) +
            ", \"raw_error\": " + optional_string(e.raw_error) +
            ", \"metadata\": " + py_json_string(md) +
            ", \"agent_restarts\": " + std::to_string(e.agent_restarts) + "}}";
  return p;
}

std::string fq_hostname() {
  char host[256] = "";
  if (gethostname(host, sizeof host - 1) != 0) return "localhost";
  addrinfo hints{};
  hints.ai_flags = AI_CANONNAME;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  std::string name = host;
  if (getaddrinfo(host, nullptr, &hints, &res) == 0 && res) {
    if (res->ai_canonname && *res->ai_canonname) name = res->ai_canonname;
    freeaddrinfo(res);
  }
  return name;
}

}  // namespace mr::launch
