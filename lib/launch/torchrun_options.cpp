#include "launch/torchrun_options.h"

#include <signal.h>

#include <cctype>
#include <cstring>
#include <stdexcept>
#include <utility>

#include "config/diagnostic.h"
#include "util/text.h"

namespace mr::launch {

namespace {

// The settings torchrun's c10d rendezvous reads from --rdzv-conf that megatron-run has no use for, and why.
const std::pair<const char*, const char*> kRdzvConfUnused[] = {
    {"last_call_timeout", "the wait for more nodes once the minimum arrived: an elastic --nnodes MIN:MAX only"},
    {"close_timeout", "closing an elastic rendezvous"},
    {"heartbeat_timeout", "the rendezvous' keep-alive (the launchers' heartbeat is --heartbeat-timeout)"},
    {"keep_alive_interval", "the rendezvous' keep-alive (the launchers' heartbeat is --heartbeat-timeout)"},
    {"keep_alive_max_attempt", "the rendezvous' keep-alive (the launchers' heartbeat is --heartbeat-timeout)"},
    {"read_timeout", "c10d's TCPStore (the launchers' store is megatron-run's own)"},
    {"store_type", "c10d's TCPStore (the launchers' store is megatron-run's own)"},
    {"use_libuv", "c10d's TCPStore (the launchers' store is megatron-run's own)"},
    {"timeout", "the legacy rendezvous timeout (the c10d rendezvous uses join_timeout)"},
    {"cas_backoff_max_seconds", "the rendezvous state's compare-and-set retries"}};

// --rdzv-conf KEY=VALUE,...: torchrun's format (keys and values trimmed, neither empty).
std::vector<std::pair<std::string, std::string>> split_rdzv_conf(const std::string& conf, const std::string& name) {
  std::vector<std::pair<std::string, std::string>> out;
  if (trim(conf).empty()) return out;
  for (const std::string& kv : split(conf, ',')) {
    const size_t eq = kv.find('=');
    const std::string key = trim(kv.substr(0, eq)), value = eq == std::string::npos ? "" : trim(kv.substr(eq + 1));
    if (key.empty() || value.empty())
      throw UsageError("argument " + name + ": '" + abbreviate(conf) + "' is not KEY1=VALUE1,...,KEYN=VALUEN (" +
                           (key.empty() ? "an empty key" : "no value for '" + abbreviate(key) + "'") + ")",
                       {"--rdzv-conf"});
    out.emplace_back(key, value);
  }
  return out;
}

}  // namespace

NodeCount parse_nnodes(const std::string& v, const std::string& flag) {
  auto count = [&](const std::string& s) {
    try {
      size_t used = 0;
      long long n = std::stoll(s, &used);
      if (used != s.size() || n < -(1 << 30) || n > 1 << 30) throw std::invalid_argument(s);
      return static_cast<int>(n);
    } catch (const std::exception&) {
      throw UsageError(std::string("argument ") + flag + ": invalid value '" + abbreviate(v) + "' (a number of nodes, or MIN:MAX)",
                       {"--nnodes"});
    }
  };
  const size_t colon = v.find(':');
  if (colon == std::string::npos) {
    const int n = count(v);
    return {n, n};
  }
  const int lo = count(v.substr(0, colon)), hi = count(v.substr(colon + 1));
  if (lo < 1 || lo > hi)
    throw UsageError(std::string("argument ") + flag + ": '" + abbreviate(v) + "' is not MIN:MAX with 1 <= MIN <= MAX",
                     {"--nnodes"});
  return {lo, hi};
}

RdzvConf parse_rdzv_conf(const std::string& conf, const std::string& backend, bool elastic, const std::string& name) {
  RdzvConf out;
  for (const auto& [key, value] : split_rdzv_conf(conf, name)) {
    if (key == "last_call_timeout" && elastic) {
      try {
        size_t used = 0;
        const long long s = std::stoll(value, &used);
        if (used != value.size() || s < 0 || s > 86400) throw std::invalid_argument(value);
        out.last_call_timeout_s = static_cast<double>(s);
      } catch (const std::exception&) {
        throw UsageError("argument " + name + ": last_call_timeout='" + abbreviate(value) +
                             "' is not a whole number of seconds from 0 to 86400",
                         {"--rdzv-conf"});
      }
    } else if (key == "join_timeout") {
      try {
        size_t used = 0;
        const long long s = std::stoll(value, &used);
        if (used != value.size() || s <= 0) throw std::invalid_argument(value);
        out.join_timeout_s = static_cast<double>(s);
      } catch (const std::exception&) {
        throw UsageError("argument " + name + ": join_timeout='" + abbreviate(value) + "' is not a whole number of seconds above 0",
                         {"--rdzv-conf"});
      }
    } else if (key == "is_host") {
      std::string v = value;
      for (char& c : v) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (v == "1" || v == "true" || v == "t" || v == "yes" || v == "y") out.is_host = true;
      else if (v == "0" || v == "false" || v == "f" || v == "no" || v == "n") out.is_host = false;
      else throw UsageError("argument " + name + ": is_host='" + abbreviate(value) + "' is not a boolean (true/false, 1/0, yes/no)",
                            {"--rdzv-conf"});
      if (backend != "c10d") {
        out.is_host.reset();
        out.notices.push_back("--rdzv-conf is_host: acts on the c10d rendezvous only; with --rdzv-backend " + backend +
                              " node 0 hosts the launchers' store (not used)");
      }
    } else {
      std::string why = "not a setting of torchrun's c10d rendezvous";
      for (const auto& [k, w] : kRdzvConfUnused)
        if (key == k) why = w;
      out.notices.push_back("--rdzv-conf " + key + "=" + value + ": not used (" + why + ")");
    }
  }
  return out;
}

namespace {

const std::pair<const char*, int> kSignalNames[] = {
    {"SIGHUP", SIGHUP},   {"SIGINT", SIGINT},     {"SIGQUIT", SIGQUIT},   {"SIGILL", SIGILL},   {"SIGTRAP", SIGTRAP},
    {"SIGABRT", SIGABRT}, {"SIGBUS", SIGBUS},     {"SIGFPE", SIGFPE},     {"SIGKILL", SIGKILL}, {"SIGUSR1", SIGUSR1},
    {"SIGSEGV", SIGSEGV}, {"SIGUSR2", SIGUSR2},   {"SIGPIPE", SIGPIPE},   {"SIGALRM", SIGALRM}, {"SIGTERM", SIGTERM},
    {"SIGCHLD", SIGCHLD}, {"SIGCONT", SIGCONT},   {"SIGSTOP", SIGSTOP},   {"SIGTSTP", SIGTSTP}, {"SIGTTIN", SIGTTIN},
    {"SIGTTOU", SIGTTOU}, {"SIGURG", SIGURG},     {"SIGXCPU", SIGXCPU},   {"SIGXFSZ", SIGXFSZ}, {"SIGVTALRM", SIGVTALRM},
    {"SIGPROF", SIGPROF}, {"SIGWINCH", SIGWINCH}, {"SIGPWR", SIGPWR},     {"SIGSYS", SIGSYS}};

}  // namespace

std::string signal_name_of(int sig) {
  for (const auto& [name, number] : kSignalNames)
    if (number == sig) return name;
  return "signal " + std::to_string(sig);
}

std::vector<int> parse_signals_to_handle(const std::string& value, const std::string& flag) {
  std::vector<int> out;
  for (const std::string& piece : split(value, ',')) {
    std::string name = trim(piece);
    for (char& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    if (!name.empty()) {
      if (name.rfind("SIG", 0) != 0) name = "SIG" + name;
      int sig = 0;
      for (const auto& [n, number] : kSignalNames)
        if (name == n) sig = number;
      if (sig == 0)
        throw UsageError("argument " + flag + ": '" + abbreviate(piece) +
                             "' is not a signal name (e.g. SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1)",
                         {"--signals-to-handle"});
      if (sig == SIGKILL || sig == SIGSTOP)
        throw UsageError("argument " + flag + ": " + name + " cannot be caught by any process", {"--signals-to-handle"});
      if (sig == SIGCHLD)
        throw UsageError("argument " + flag + ": SIGCHLD tells the launcher that a worker exited; it cannot stop the "
                         "workers", {"--signals-to-handle"});
      bool seen = false;
      for (int s : out) seen = seen || s == sig;
      if (!seen) out.push_back(sig);
    }
  }
  if (out.empty())
    throw UsageError("argument " + flag + ": no signal named (torchrun's default is SIGTERM,SIGINT,SIGHUP,SIGQUIT)",
                     {"--signals-to-handle"});
  return out;
}

std::vector<std::string> parse_filter_list(const std::string& value) {
  std::vector<std::string> out;
  std::string item;
  for (size_t i = 0; i < value.size(); ++i) {
    if (value[i] == ',' && i + 1 < value.size() && value[i + 1] == ',') {
      item += ',';
      ++i;
    } else if (value[i] == ',') {
      out.push_back(item);
      item.clear();
    } else {
      item += value[i];
    }
  }
  out.push_back(item);
  return out;
}

}  // namespace mr::launch
