#include "launch/event_log.h"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <vector>

#include "config/value.h"

namespace mr::launch {
namespace {

// A JSON string as Python's json.dumps (ensure_ascii) writes it; a byte that is not UTF-8 as Python holds an
// argument decoded with surrogateescape (\udcXX).
std::string py_json_string(const std::string& s) { return json_quote(s, /*ascii_only=*/true); }

std::string optional_string(const std::optional<std::string>& s) { return s ? py_json_string(*s) : "null"; }

std::string optional_int(const std::optional<int>& i) { return i ? std::to_string(*i) : "null"; }

// A JSON value as Python's json.dumps writes what json.load read: ", " and ": ", ensure_ascii, floats as repr.
std::string py_json(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Str: return py_json_string(v.as_str());
    case Value::Kind::List:
    case Value::Kind::Tuple: {
      std::string out = "[";
      for (size_t i = 0; i < v.as_list().size(); ++i) out += (i ? ", " : "") + py_json(v.as_list()[i]);
      return out + "]";
    }
    case Value::Kind::Object: {
      std::string out = "{";
      for (size_t i = 0; i < v.as_object().size(); ++i)
        out += (i ? ", " : "") + py_json_string(v.as_object()[i].first) + ": " + py_json(v.as_object()[i].second);
      return out + "}";
    }
    default: return v.json();  // null, true, false, ints, floats (repr), NaN, Infinity
  }
}

// The error file's JSON, as json.load reads it (a later duplicate key replaces an earlier one in place, as a
// dict's assignment does); nullopt without a file or JSON in it.
std::optional<Value> error_file_json(const std::string& path) {
  if (path.empty()) return std::nullopt;
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  try {
    return Value::parse_json(text);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

const char* const kNoneData = "{\"message\": \"<NONE>\"";
const char* const kTraits = "\"errorTraits\": {\"category\": \"system_terminated_error\", \"retryability\": \"False\"}";

}  // namespace

bool events_logged(const char* loglevel) {
  if (!loglevel) return true;
  const std::string l = loglevel;
  if (l == "DEBUG" || l == "INFO") return true;
  if (l == "WARN" || l == "WARNING" || l == "ERROR" || l == "CRITICAL" || l == "FATAL" || l == "NOTSET") return false;
  return true;  // torchrun: ValueError at import; megatron-run: its default, INFO
}

bool adds_error_traits(const std::string& error_file, int exit_code) {
  return exit_code > 0 && !error_file_json(error_file);
}

std::string worker_raw_error(const std::string& error_file, int exit_code, bool traits) {
  if (std::optional<Value> v = error_file_json(error_file)) {
    // ProcessFailure: a message that is empty (falsy) and an exit code above 0 get the traits in the file's own
    // dictionary (replacing its own "errorTraits" in place).
    const Value* message = nullptr;
    if (v->is_object())
      for (const auto& [k, m] : v->as_object())
        if (k == "message") message = &m;
    if (v->is_object() && exit_code > 0 && message && !message->truthy()) {
      Object o = v->as_object();
      const Value t = Value::object({{"category", Value(std::string("system_terminated_error"))},
                                     {"retryability", Value(std::string("False"))}});
      bool replaced = false;
      for (auto& [k, e] : o)
        if (k == "errorTraits") e = t, replaced = true;
      if (!replaced) o.emplace_back("errorTraits", t);
      return py_json(Value::object(std::move(o)));
    }
    return py_json(*v);
  }
  return std::string(kNoneData) + (traits ? std::string(", ") + kTraits : "") + "}";
}

std::string agent_event_json(const AgentEvent& e) {
  const AgentEventParts p = agent_event_json_parts(e);
  return p.before + std::to_string(e.total_run_time) + p.after;
}

AgentEventParts agent_event_json_parts(const AgentEvent& e) {
  const std::string state = !e.state.empty() ? e.state : e.succeeded ? "SUCCEEDED" : "FAILED";
  // The inner metadata: the worker group's size and entry point, then a worker's fields (one-element lists).
  std::string md = "{\"group_world_size\": " + optional_int(e.group_world_size) +
                   ", \"entry_point\": " + py_json_string(e.entry_point);
  std::string global_rank = "null", worker_id = "null";
  if (const auto& w = e.worker) {
    md += ", \"local_rank\": [" + std::to_string(w->local_rank) + "], \"role_rank\": [" + std::to_string(w->role_rank) +
          "], \"role_world_size\": [" + std::to_string(w->role_world_size) + "], \"exit_code\": [" +
          optional_int(w->exit_code) + "], \"worker_pid\": [" +
          (w->worker_pid ? std::to_string(*w->worker_pid) : std::string("null")) + "]";
    global_rank = std::to_string(w->global_rank);
    worker_id = py_json_string(std::to_string(w->pid));
  }
  md += "}";
  AgentEventParts p;
  p.before = "{\"name\": " + py_json_string("torchelastic.worker.status." + state) +
             ", \"source\": \"" + (e.worker ? "WORKER" : "AGENT") + "\", \"timestamp\": 0, \"metadata\": {"
             "\"run_id\": " + py_json_string(e.run_id) +
             ", \"global_rank\": " + global_rank + ", \"group_rank\": " + optional_int(e.group_rank) +
             ", \"worker_id\": " + worker_id + ", \"role\": " + py_json_string(e.role) +
             ", \"hostname\": " + py_json_string(e.hostname) +
             ", \"state\": " + py_json_string(state) +
             ", \"total_run_time\": ";
  p.after = ", \"rdzv_backend\": " + py_json_string(e.rdzv_backend) +
            ", \"raw_error\": " + optional_string(e.raw_error) +
            ", \"metadata\": " + py_json_string(md) +
            ", \"agent_restarts\": " + std::to_string(e.agent_restarts) +
            ", \"duration_ms\": " + (e.duration_ms ? py_float_repr(*e.duration_ms) : std::string("null")) + "}}";
  return p;
}

std::string fq_hostname() {
  char host[256] = "";
  if (gethostname(host, sizeof host - 1) != 0) return "localhost";
  const std::string name = host;
  // socket.gethostbyaddr(name): the name's first address (getaddrinfo, any family), then its reverse lookup.
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  addrinfo* res = nullptr;
  if (getaddrinfo(host, nullptr, &hints, &res) != 0 || !res) return name;
  hostent he{}, *found = nullptr;
  std::vector<char> buf(16384);
  int herr = 0;
  int rc = ERANGE;
  const void* addr = nullptr;
  socklen_t len = 0;
  if (res->ai_family == AF_INET) {
    addr = &reinterpret_cast<const sockaddr_in*>(res->ai_addr)->sin_addr;
    len = sizeof(in_addr);
  } else if (res->ai_family == AF_INET6) {
    addr = &reinterpret_cast<const sockaddr_in6*>(res->ai_addr)->sin6_addr;
    len = sizeof(in6_addr);
  }
  if (addr)
    while ((rc = gethostbyaddr_r(addr, len, res->ai_family, &he, buf.data(), buf.size(), &found, &herr)) == ERANGE &&
           buf.size() < (1u << 20))
      buf.resize(buf.size() * 2);
  freeaddrinfo(res);
  if (rc != 0 || !found || !found->h_name) return name;
  // getfqdn: the first of [name, aliases...] with a dot, else the name the lookup gave.
  if (std::strchr(found->h_name, '.')) return found->h_name;
  for (char** a = found->h_aliases; a && *a; ++a)
    if (std::strchr(*a, '.')) return *a;
  return found->h_name;
}

}  // namespace mr::launch
