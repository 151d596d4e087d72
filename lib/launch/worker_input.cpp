#include "launch/worker_input.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>

#include "config/limits.h"
#include "config/print.h"
#include "config/rule.h"
#include "config/schema.h"
#include "util/bounded_file.h"
#include "util/rule_id.h"
#include "util/text.h"

namespace mr::launch {

std::string WorkerInput::encode() const {
  std::string out = "{\"version\": 1, \"backend_explicit\": ";
  out += backend_explicit ? "true" : "false";
  out += ", \"log_level\": " + json_quote(log_level) + ", \"train\": " + (train ? "true" : "false") + ", \"argv\": [";
  for (size_t i = 0; i < argv.size(); ++i) out += (i ? ", " : "") + json_quote(argv[i]);
  out += "], \"given\": [";
  for (size_t i = 0; i < given.size(); ++i) out += (i ? ", " : "") + json_quote(given[i]);
  out += "], \"derived\": {";
  bool first = true;
  for (const auto& [dest, how] : derived) {
    out += std::string(first ? "" : ", ") + json_quote(dest) + ": " + json_quote(how);
    first = false;
  }
  out += "}, \"noticed\": [";
  for (size_t i = 0; i < noticed.size(); ++i) out += (i ? ", " : "") + json_quote(noticed[i]);
  out += "]";
  if (heartbeat_timeout_s) out += ", \"heartbeat_timeout_s\": " + Value(*heartbeat_timeout_s).json();
  out += ", \"target_te_version\": " + json_quote(target.te_version);
  out += ", \"namespace\": " + namespace_json(ns) + "}";
  return out;
}

WorkerInput WorkerInput::decode(const std::string& json) {
  Value v;
  try {
    v = Value::parse_json(json);
  } catch (const std::exception& e) {
    throw std::runtime_error(std::string("the worker input is not valid JSON: ") + e.what());
  }
  if (!v.is_object()) throw std::runtime_error("the worker input is not a JSON object");
  WorkerInput in;
  bool have_ns = false;
  for (const auto& [key, val] : v.as_object()) {
    if (key == "version") {
      if (!val.is_int() || val.as_int() != 1) throw std::runtime_error("unsupported worker input version " + val.json());
    } else if (key == "backend_explicit") {
      in.backend_explicit = val.truthy();
    } else if (key == "train") {
      in.train = val.truthy();
    } else if (key == "log_level" && val.is_str()) {
      in.log_level = val.as_str();
    } else if (key == "argv" && val.is_list()) {
      for (const Value& a : val.as_list()) in.argv.push_back(a.is_str() ? a.as_str() : a.json());
    } else if (key == "given" && val.is_list()) {
      for (const Value& a : val.as_list())
        if (a.is_str()) in.given.push_back(a.as_str());
    } else if (key == "derived" && val.is_object()) {
      for (const auto& [dest, how] : val.as_object())
        if (how.is_str()) in.derived.emplace(dest, how.as_str());
    } else if (key == "noticed" && val.is_list()) {
      for (const Value& a : val.as_list())
        if (a.is_str()) in.noticed.push_back(a.as_str());
    } else if (key == "heartbeat_timeout_s" && (val.is_float() || val.is_int())) {
      in.heartbeat_timeout_s = val.is_int() ? static_cast<double>(val.as_int()) : val.as_float();
    } else if (key == "target_te_version" && val.is_str()) {
      in.target.te_version = val.as_str();
    } else if (key == "namespace" && val.is_object()) {
      have_ns = true;
      for (const auto& [dest, x] : val.as_object()) in.ns.set(dest, x, Provenance{Provenance::Kind::Default, "megatron-run"});
    }
  }
  if (!have_ns) throw std::runtime_error("the worker input has no resolved namespace");
  in.args = Args::from(in.ns);
  return in;
}

int memfd_with(const std::string& text) {
  int fd = memfd_create("megatron-run-args", 0);  // no MFD_CLOEXEC: the worker inherits it across exec
  if (fd < 0) throw std::runtime_error(std::string("memfd_create: ") + std::strerror(errno));
  size_t off = 0;
  while (off < text.size()) {
    ssize_t n = write(fd, text.data() + off, text.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      close(fd);
      throw std::runtime_error(std::string("writing the worker input: ") + std::strerror(errno));
    }
    off += static_cast<size_t>(n);
  }
  lseek(fd, 0, SEEK_SET);
  return fd;
}

std::string read_fd(int fd) {
  // The launcher's input is a memfd (a regular file); anything else (a pipe, /dev/zero, a terminal) is refused
  // before a read that could block or never end, and a file past the bound is refused unread.
  struct stat st {};
  if (fstat(fd, &st) != 0)
    throw std::runtime_error("--input-fd " + std::to_string(fd) + ": " + std::strerror(errno));
  if (!S_ISREG(st.st_mode))
    throw std::runtime_error("--input-fd " + std::to_string(fd) + " is " + file_kind(st.st_mode) +
                             ", not the regular file megatron-run passes");
  if (static_cast<std::uint64_t>(st.st_size) > limits::kMaxInputFileBytes)
    throw std::runtime_error("--input-fd " + std::to_string(fd) + " holds " + std::to_string(st.st_size) +
                             " bytes, more than the limit of " + describe_bytes(limits::kMaxInputFileBytes));
  std::string out;
  char buf[65536];
  lseek(fd, 0, SEEK_SET);
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error(std::string("reading fd ") + std::to_string(fd) + ": " + std::strerror(errno));
    }
    if (n == 0) break;
    if (out.size() + static_cast<size_t>(n) > limits::kMaxInputFileBytes)  // a file that grows while it is read
      throw std::runtime_error("--input-fd " + std::to_string(fd) + " holds more than " +
                               describe_bytes(limits::kMaxInputFileBytes));
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

std::string read_file(const std::string& path) {
  try {
    return read_bounded_file(path, limits::kMaxInputFileBytes);
  } catch (const FileRefusal& r) {  // worded as the parser words an input file's (config/parse/read_file.h)
    throw std::runtime_error(file_refusal_text(r, path, "--input file", limits::kMaxInputFileBytes, "megatron-run-worker"));
  }
}

int parse_input_fd(const std::string& word) {
  // Digits only: std::stoi would take "0x3" as 0 (and read standard input) and say "stoi" for "abc".
  if (word.empty() || word.size() > 9 || word.find_first_not_of("0123456789") != std::string::npos)
    throw std::runtime_error("--input-fd: '" + echo_word(word, 40) + "' is not a file descriptor number");
  return std::stoi(word);
}

std::string config_fingerprint(const Namespace& ns) {
  std::string out = "{";
  bool first = true;
  for (const auto& e : ns.entries()) {
    if (e.dest == dest_of(ArgId::rank) || e.dest == dest_of(ArgId::local_rank)) continue;
    out += (first ? "" : ", ") + json_quote(e.dest) + ": " + e.value.json();
    first = false;
  }
  return out + "}";
}

uint64_t fingerprint_hash(const std::string& fp) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : fp) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

std::vector<std::string> fingerprint_diff(const std::string& a, const std::string& b) {
  auto to_map = [](const std::string& text) {
    std::map<std::string, std::string> m;
    Value v = Value::parse_json(text);
    if (v.is_object())
      for (const auto& [k, x] : v.as_object()) m[k] = x.json();
    return m;
  };
  std::map<std::string, std::string> ma = to_map(a), mb = to_map(b);
  std::vector<std::string> out;
  for (const auto& [k, v] : ma) {
    auto it = mb.find(k);
    if (it == mb.end() || it->second != v) out.push_back(k);
  }
  for (const auto& [k, v] : mb)
    if (!ma.count(k)) out.push_back(k);
  return out;
}

std::string fingerprint_differences(int rank, const std::string& mine, const std::string& rank0,
                                    const std::map<std::string, std::string>& derived) {
  std::vector<std::string> diff = fingerprint_diff(mine, rank0);
  // Given (or defaulted) arguments first, those validation derived after them; each group in its order.
  std::stable_partition(diff.begin(), diff.end(), [&](const std::string& d) { return !derived.count(d); });
  const Value a = Value::parse_json(mine), b = Value::parse_json(rank0);
  auto lookup = [](const Value& obj, const std::string& k) -> std::string {
    if (obj.is_object())
      for (const auto& [key, v] : obj.as_object())
        if (key == k) return v.json();
    return "(absent)";
  };
  const std::string here = "rank " + std::to_string(rank);
  std::string msg;
  size_t shown = 0;
  for (const std::string& d : diff) {
    if (shown == 12) {
      msg += " ... (" + std::to_string(diff.size()) + " in all)";
      break;
    }
    msg += std::string(shown++ ? ", " : " ") + Schema::megatron().flag_for_dest(d) + " (" + lookup(a, d) + " on " +
           here + ", " + lookup(b, d) + " on rank 0";
    if (auto it = derived.find(d); it != derived.end()) msg += "; not given: " + it->second;
    msg += ")";
  }
  return msg;
}

}  // namespace mr::launch

namespace mr::launch {

namespace {

// Every refusal of a time limit (job_timeouts, heartbeat_limits): the launcher says it before any worker starts, and
// each worker of ours again (lib/distributed/worker.cpp), with this id.
const Rule kTimeLimitsRule{
    "dist.time-limits", Rule::Level::Error,
    "A time limit the ranks cannot run under: MR_DIST_TIMEOUT_S, MR_DIST_HEARTBEAT_S or MR_DIST_HEARTBEAT_TIMEOUT_S "
    "that is not a positive number of seconds, --distributed-timeout-minutes or "
    "--distributed-timeout-seconds-after-init below 1, or a heartbeat timeout (--heartbeat-timeout, else "
    "MR_DIST_HEARTBEAT_TIMEOUT_S) shorter than two heartbeat periods: refused by the launcher before any worker "
    "starts (not in --dry-run or check; the heartbeat values where they are used: megatron-run's own workers, or "
    "several nodes' launchers), and by each of megatron-run's workers.",
    __FILE__, __LINE__, kStageInit};

[[noreturn]] void refuse_limit(const std::string& text) {
  kTimeLimitsRule.record_hit();
  throw std::runtime_error(with_rule_id(kTimeLimitsRule.id, text));
}

std::optional<double> env_seconds(const EnvLookup& env, const char* name) {
  std::optional<std::string> v = env(name);
  if (!v || v->empty()) return std::nullopt;
  char* end = nullptr;
  double s = std::strtod(v->c_str(), &end);
  if (end == v->c_str() || *end || !(s > 0) || !std::isfinite(s))
    refuse_limit(std::string(name) + "='" + *v + "' is not a positive number of seconds");
  return s;
}

std::chrono::milliseconds ms(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(std::llround(seconds * 1000.0)));
}

// The timeout-like flags the runtime does not act on, and why. A flag is named only when the user set it.
struct Ignored {
  ArgId arg;
  const char* why;
};
const char* const kInprocess = "in-process restart is not implemented by megatron-run's runtime: a failed or silent "
                               "rank ends the job";
const char* const kFt = "NVIDIA's fault-tolerance package is not used by megatron-run's runtime: its heartbeat "
                        "watchdog (--heartbeat-timeout) detects hung ranks";
const char* const kFlight = "megatron-run's runtime has no NCCL flight recorder";
const Ignored kIgnored[] = {
    {ArgId::inprocess_restart, kInprocess},
    {ArgId::inprocess_soft_timeout, kInprocess},
    {ArgId::inprocess_hard_timeout, kInprocess},
    {ArgId::inprocess_heartbeat_timeout, kInprocess},
    {ArgId::inprocess_heartbeat_interval, kInprocess},
    {ArgId::inprocess_barrier_timeout, kInprocess},
    {ArgId::inprocess_completion_timeout, kInprocess},
    {ArgId::inprocess_last_call_wait, kInprocess},
    {ArgId::inprocess_termination_grace_time, kInprocess},
    {ArgId::inprocess_monitor_thread_interval, kInprocess},
    {ArgId::inprocess_monitor_process_interval, kInprocess},
    {ArgId::inprocess_progress_watchdog_interval, kInprocess},
    {ArgId::enable_ft_package, kFt},
    {ArgId::calc_ft_timeouts, kFt},
    {ArgId::ft_num_warmup_iters, kFt},
    {ArgId::flight_recorder_dump_on_timeout, kFlight},
    {ArgId::flight_recorder_dump_path, kFlight},
    {ArgId::flight_recorder_trace_buffer_size, kFlight},
    {ArgId::flight_recorder_include_stack_trace, kFlight},
    {ArgId::flight_recorder_include_only_active, kFlight},
    {ArgId::flight_recorder_extra_dump_on_exec, kFlight},
};

}  // namespace

HeartbeatLimits heartbeat_limits(std::optional<double> option_s, const EnvLookup& env) {
  HeartbeatLimits h;
  std::string period_source = "the default";
  if (auto s = env_seconds(env, "MR_DIST_HEARTBEAT_S")) {
    h.period = ms(*s);
    period_source = "MR_DIST_HEARTBEAT_S";
  }
  if (h.period.count() < 1) refuse_limit("MR_DIST_HEARTBEAT_S is below a millisecond");
  if (option_s) {
    if (!(*option_s > 0) || !std::isfinite(*option_s))
      refuse_limit("--heartbeat-timeout " + Value(*option_s).json() + ": must be a positive number of seconds");
    h.timeout = ms(*option_s);
    h.timeout_source = "--heartbeat-timeout";
  } else if (auto s = env_seconds(env, "MR_DIST_HEARTBEAT_TIMEOUT_S")) {
    h.timeout = ms(*s);
    h.timeout_source = "MR_DIST_HEARTBEAT_TIMEOUT_S";
  }
  if (h.timeout < h.period * 2)
    refuse_limit("the heartbeat timeout (" + seconds_text(h.timeout) + ", " + h.timeout_source +
                 ") must be at least twice the heartbeat period (" + seconds_text(h.period) + ", " + period_source + ")");
  return h;
}

JobTimeouts job_timeouts(const WorkerInput& in, const EnvLookup& env, bool heartbeat) {
  JobTimeouts t;
  const Args& a = in.args;
  if (a.distributed_timeout_minutes < 1)
    refuse_limit("--distributed-timeout-minutes " + std::to_string(a.distributed_timeout_minutes) +
                 ": the collective timeout must be at least 1 minute");
  t.startup = std::chrono::minutes(a.distributed_timeout_minutes);
  if (auto s = env_seconds(env, "MR_DIST_TIMEOUT_S")) t.startup = ms(*s);
  if (auto s = a.distributed_timeout_seconds_after_init) {
    if (*s < 1)
      refuse_limit("--distributed-timeout-seconds-after-init " + std::to_string(*s) +
                   ": the timeout after initialisation must be at least 1 second");
    t.after_init = std::chrono::seconds(*s);
  }
  if (heartbeat) {
    const HeartbeatLimits h = heartbeat_limits(in.heartbeat_timeout_s, env);
    t.heartbeat = h.period;
    t.heartbeat_timeout = h.timeout;
    t.heartbeat_source = h.timeout_source;
  }
  const Schema& schema = Schema::megatron();
  for (const Ignored& i : kIgnored) {
    const std::string dest(dest_of(i.arg));
    if (!std::binary_search(in.given.begin(), in.given.end(), dest)) continue;
    const std::string flag = schema.flag_for_dest(dest);
    if (std::find(in.noticed.begin(), in.noticed.end(), flag) != in.noticed.end()) continue;  // named already
    const Value v = a.value(i.arg);
    std::string shown = flag + " " + v.json();
    if (v.is_bool()) {
      // A switch: named when it is on (its value differs from the default), as the flag that turns it on.
      if (default_of(i.arg) == v) continue;
      shown = flag;
    }
    t.ignored.push_back(shown + " (" + i.why + ")");
  }
  return t;
}

}  // namespace mr::launch
