#include "launch/launch_env.h"

#include "launch/endpoint.h"
#include "util/rule_id.h"
#include "util/text.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>

namespace mr::launch {

const Rule kEnvMalformedRule{
    "launch.env-malformed", Rule::Level::Error,
    "An enclosing job's RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE or MASTER_PORT (or the SLURM_* they come "
    "from: SLURM_NTASKS, SLURM_PROCID, the node and per-node task counts, SLURM_JOB_ID and the step id the port is "
    "derived from) that is not an integer in range, or a MASTER_ADDR (or SLURM_JOB_NODELIST's first host) that names "
    "no host, is refused at once, naming the variable (exit 2), before validation uses it: the rendezvous would "
    "otherwise fail late or retry until the distributed timeout.",
    __FILE__, __LINE__, kStageInput};

namespace {

int parse_int(const EnvLookup& env, const std::string& name, int min) {
  std::optional<std::string> v = env(name);
  if (!v) throw LaunchError(name + " is not set");
  try {
    size_t used = 0;
    long long x = std::stoll(*v, &used);
    if (used != v->size()) throw std::invalid_argument("trailing characters");
    if (x < min || x > 1 << 30) throw std::out_of_range("range");
    return static_cast<int>(x);
  } catch (const std::exception&) {
    throw LaunchError(name + "='" + abbreviate(*v) + "' is not an integer >= " + std::to_string(min));
  }
}

// MASTER_ADDR as the enclosing job gives it. An empty one, or one with a blank or control character, names no host:
// the rendezvous store would retry it until --distributed-timeout-minutes (10 by default) instead of failing. A
// well-formed name that does not resolve yet is left to the store's retries (a cluster's DNS may publish rank 0's
// name only after the workers start).
std::string master_addr_of(const std::string& v) { return checked_master_addr(v, "MASTER_ADDR"); }

// SLURM_TASKS_PER_NODE style "4(x2),3": the count of the first node. Unset or empty: nullopt. Text that does not
// start with a count ("abc"): LaunchError naming the variable.
std::optional<int> first_count(const std::optional<std::string>& v, const std::string& name) {
  if (!v || v->empty()) return std::nullopt;
  size_t i = 0;
  while (i < v->size() && std::isdigit(static_cast<unsigned char>((*v)[i]))) ++i;
  if (i == 0 || i > 9 || std::stoi(v->substr(0, i)) < 1)  // more digits than any task count (and than an int holds)
    throw LaunchError(name + "='" + abbreviate(*v) + "' is not a task count per node (such as 4 or 4(x2))");
  return std::stoi(v->substr(0, i));
}

// A whole number of digits only (a job or step id), nullopt for anything else.
std::optional<unsigned long long> digits_value(const std::string& v) {
  if (v.empty() || v.size() > 18 ||
      !std::all_of(v.begin(), v.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }))
    return std::nullopt;
  return std::stoull(v);
}

}  // namespace

std::string checked_master_addr(const std::string& v, const std::string& variable) {
  const bool blank_or_control = std::any_of(v.begin(), v.end(), [](char ch) {
    const auto c = static_cast<unsigned char>(ch);
    return c <= 0x20 || c == 0x7f;
  });
  if (v.empty() || blank_or_control)
    throw LaunchError(variable + "='" + abbreviate(v) + "' is not a host name or address (" +
                      (v.empty() ? "it is empty" : "it has a blank or control character") +
                      "): the rendezvous store would retry it until the distributed timeout");
  return v;
}

std::optional<int> slurm_int(const EnvLookup& env, const std::string& name, int min) {
  if (!env(name)) return std::nullopt;
  return parse_int(env, name, min);
}

EnvLookup process_env() {
  return [](const std::string& name) -> std::optional<std::string> {
    if (const char* v = std::getenv(name.c_str())) return std::string(v);
    return std::nullopt;
  };
}

bool inside_enclosing_job(const EnvLookup& env) {
  return env("RANK").has_value() && (env("TORCHELASTIC_RUN_ID").has_value() || env("MR_SPAWNER").has_value());
}

std::string LaunchInfo::describe() const {
  return "rank " + std::to_string(rank) + " of " + std::to_string(world_size) + " (local " +
         std::to_string(local_rank) + " of " + std::to_string(local_world_size) + ") via " +
         (source == Source::Torchrun ? (spawned_by_megatron_run ? "megatron-run" : "torchrun") : "SLURM") +
         ", store " + join_host_port(master_addr, master_port) +
         (agent_store ? " (torchrun agent's, attempt " + restart_count + ")" : "");
}

std::string slurm_first_host(const std::string& nodelist) {
  // The first entry ends at a comma outside brackets.
  std::string first;
  int depth = 0;
  for (char c : nodelist) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (c == ',' && depth == 0) break;
    first += c;
  }
  // Each bracket group by its first value, keeping zero padding: "node[001-004]" -> "node001", and with several
  // groups ("a[08-10]b[1-2]", hosts a08b1, a08b2, ...) each one: "a08b1".
  std::string out;
  for (size_t i = 0; i < first.size();) {
    if (first[i] != '[') {
      out += first[i++];
      continue;
    }
    const size_t close = first.find(']', i);
    if (close == std::string::npos) {  // unclosed: as written
      out += first.substr(i);
      break;
    }
    const std::string range = first.substr(i + 1, close - i - 1);
    out += range.substr(0, range.find_first_of(",-"));
    i = close + 1;
  }
  return out;
}

std::string slurm_master_host(const EnvLookup& env, std::string* variable) {
  std::string name = "SLURM_JOB_NODELIST";
  std::optional<std::string> nodes = env(name);
  if (!nodes) nodes = env(name = "SLURM_NODELIST");
  if (!nodes || nodes->empty())
    throw LaunchError("SLURM_PROCID is set but neither MASTER_ADDR nor SLURM_JOB_NODELIST is: cannot find the master "
                      "node");
  if (variable) *variable = name;
  const std::string host = slurm_first_host(*nodes);
  const std::string what = name + "='" + abbreviate(*nodes) + "'";
  try {
    checked_master_addr(host, name);
  } catch (const LaunchError&) {
    throw LaunchError(what + " is not a SLURM node list: its first host '" + abbreviate(host) + "' " +
                      (host.empty() ? "is empty" : "has a blank or control character") +
                      " (the rendezvous store would retry it until the distributed timeout)");
  }
  if (host.find_first_of("[]") != std::string::npos)
    throw LaunchError(what + " is not a SLURM node list: its first host '" + abbreviate(host) +
                      "' has a bracket that closes no range");
  return host;
}

// The port is kSlurmPortBase + kSlurmPortStep x ((job x kSlurmJobMultiplier + step) mod kSlurmPortSlots). The job id's
// multiplier is prime to the number of slots, so that the first steps of 4500 consecutive jobs all get different
// ports (16, sharing a factor 4 with it, reached 1125 of them), and job J's port meets job J+1's only 97 steps apart.
// The message (SlurmPort::from) is built from these constants, so that it cannot say another formula.
constexpr unsigned long long kSlurmPortBase = 20000;
constexpr unsigned long long kSlurmPortStep = 2;  // even ports: each step's port and the one above it (its store's)
constexpr unsigned long long kSlurmJobMultiplier = 97;
constexpr unsigned long long kSlurmPortSlots = 4500;

SlurmPort slurm_default_port(const EnvLookup& env) {
  const std::optional<std::string> job = env("SLURM_JOB_ID");
  std::string step_name = "SLURM_STEP_ID";
  std::optional<std::string> step = env(step_name);
  if (!step) step = env(step_name = "SLURM_STEPID");
  if (!job)
    throw LaunchError("SLURM_JOB_ID is not set (srun sets it): MASTER_PORT is derived from it under SLURM when "
                      "MASTER_PORT is unset; set MASTER_PORT");
  const std::optional<unsigned long long> id = digits_value(*job);
  if (!id) throw LaunchError("SLURM_JOB_ID='" + abbreviate(*job) + "' is not a job id (a whole number)");
  unsigned long long step_id = 0;
  if (step) {
    const std::optional<unsigned long long> s = digits_value(*step);
    if (!s) throw LaunchError(step_name + "='" + abbreviate(*step) + "' is not a step id (a whole number)");
    step_id = *s;
  }
  SlurmPort p;
  p.port = static_cast<int>(
      kSlurmPortBase +
      kSlurmPortStep * (((*id % kSlurmPortSlots) * kSlurmJobMultiplier + step_id % kSlurmPortSlots) % kSlurmPortSlots));
  p.from = std::to_string(kSlurmPortBase) + " + " + std::to_string(kSlurmPortStep) + " x ((SLURM_JOB_ID " + *job + " x " +
           std::to_string(kSlurmJobMultiplier) + " + " + step_name + " " + std::to_string(step_id) + ") mod " +
           std::to_string(kSlurmPortSlots) + "), since MASTER_PORT is unset";
  return p;
}

std::string master_port_setting(const LaunchInfo& info) {
  // A worker of megatron-run's launcher under SLURM, the port derived from the job: as that launcher says it.
  if (info.source == LaunchInfo::Source::Torchrun && !info.master_port_from.empty()) return "MASTER_PORT (or --master-port)";
  if (info.spawned_by_megatron_run) return "--master-port";
  if (info.source == LaunchInfo::Source::Slurm) return "MASTER_PORT";
  return "torchrun's --master-port, or MASTER_PORT";
}

std::string master_addr_setting(const LaunchInfo& info) {
  if (info.spawned_by_megatron_run) return "MASTER_ADDR, as megatron-run's launcher set it (--master-addr)";
  if (info.source == LaunchInfo::Source::Slurm) return info.master_addr_from;
  return "MASTER_ADDR (torchrun's --master-addr)";
}

bool slurm_step_task(const EnvLookup& env) {
  return env("SLURM_PROCID") && env("SLURM_NTASKS") && (env("SLURM_STEP_ID") || env("SLURM_STEPID"));
}

const Rule kSlurmBatchScriptRule{
    "launch.slurm-batch-script", Rule::Level::Warning,
    "megatron-run started in a SLURM batch script without srun (SLURM_PROCID set, SLURM_STEP_ID not): SLURM's task "
    "variables describe the allocation, not tasks that run, so they are not read and the launch runs on this node "
    "only; the notice names the allocation's nodes and tasks and the srun forms that use them.",
    __FILE__, __LINE__, kStageLaunch};

std::optional<SlurmNodes> slurm_nodes(const EnvLookup& env) {
  for (const char* name : {"SLURM_JOB_NUM_NODES", "SLURM_NNODES"})
    if (std::optional<std::string> v = env(name)) return SlurmNodes{name, *v};
  return std::nullopt;
}

namespace {

// A SLURM count as a number; 0 when unset or not a whole count (it then says nothing).
long long slurm_count(const std::optional<std::string>& v) {
  if (!v) return 0;
  try {
    size_t used = 0;
    const long long x = std::stoll(*v, &used);
    return used == v->size() ? x : 0;
  } catch (const std::exception&) {
    return 0;
  }
}

}  // namespace

std::optional<std::string> slurm_batch_script_notice(const EnvLookup& env, int nproc_per_node) {
  if (env("RANK") || !env("SLURM_PROCID") || slurm_step_task(env)) return std::nullopt;
  const std::optional<SlurmNodes> nodes = slurm_nodes(env);
  const std::optional<std::string> tasks = env("SLURM_NTASKS");
  const bool unused = (nodes && slurm_count(nodes->value) > 1) || (nproc_per_node == 0 && slurm_count(tasks) > 1);
  if (!unused) return std::nullopt;
  std::string allocation;
  if (tasks) allocation = "SLURM_NTASKS=" + abbreviate(*tasks);
  if (nodes) allocation += (allocation.empty() ? "" : ", ") + nodes->variable + "=" + abbreviate(nodes->value);
  kSlurmBatchScriptRule.record_hit();
  return with_rule_id(kSlurmBatchScriptRule.id, "SLURM_PROCID") + " is set but SLURM_STEP_ID is not: this is a SLURM "
         "batch script, not a task that srun started, so SLURM's task variables" +
         (allocation.empty() ? std::string() : " (" + allocation + ")") +
         " are not read: a launch from this script starts its workers on this node only (--nproc-per-node of them, 1 without it), as "
         "torchrun would; to use the allocation, start it with srun: `srun --ntasks-per-node=1 megatron-run --nproc-per-node N ...` (one launcher per node) or `srun "
         "megatron-run ...` (one task per rank)";
}

std::optional<LaunchInfo> launch_info(const EnvLookup& env) {
  LaunchInfo info;
  info.spawned_by_megatron_run = env("MR_SPAWNED").value_or("") == "1";
  if (env("RANK") && env("WORLD_SIZE")) {
    info.source = LaunchInfo::Source::Torchrun;
    info.rank = parse_int(env, "RANK", 0);
    info.world_size = parse_int(env, "WORLD_SIZE", 1);
    info.local_rank = env("LOCAL_RANK") ? parse_int(env, "LOCAL_RANK", 0) : info.rank;
    info.local_world_size = env("LOCAL_WORLD_SIZE") ? parse_int(env, "LOCAL_WORLD_SIZE", 1) : info.world_size;
    if (!env("MASTER_ADDR") || !env("MASTER_PORT"))
      throw LaunchError("RANK and WORLD_SIZE are set but MASTER_ADDR/MASTER_PORT are not: cannot find the rendezvous store");
    info.master_addr = master_addr_of(*env("MASTER_ADDR"));
    info.master_port = parse_int(env, "MASTER_PORT", 1);
    info.agent_store = env("TORCHELASTIC_USE_AGENT_STORE").value_or("") == "True";
    info.restart_count = env("TORCHELASTIC_RESTART_COUNT").value_or("0");
    if (env("MR_SPAWNER")) info.master_port_from = env(kMasterPortFromVar).value_or("");  // our launcher's derivation
  } else if (slurm_step_task(env)) {
    info.source = LaunchInfo::Source::Slurm;
    info.rank = parse_int(env, "SLURM_PROCID", 0);
    info.world_size = parse_int(env, "SLURM_NTASKS", 1);
    info.local_rank = env("SLURM_LOCALID") ? parse_int(env, "SLURM_LOCALID", 0) : 0;
    std::optional<int> per_node = first_count(env("SLURM_NTASKS_PER_NODE"), "SLURM_NTASKS_PER_NODE");
    if (!per_node) per_node = first_count(env("SLURM_TASKS_PER_NODE"), "SLURM_TASKS_PER_NODE");
    info.local_world_size = per_node.value_or(info.world_size);
    if (auto a = env("MASTER_ADDR")) {
      info.master_addr = master_addr_of(*a);
    } else {
      std::string variable;
      info.master_addr = slurm_master_host(env, &variable);
      info.master_addr_from = variable + " (its first host)";
    }
    if (env("MASTER_PORT")) {
      info.master_port = parse_int(env, "MASTER_PORT", 1);
    } else {
      const SlurmPort p = slurm_default_port(env);
      info.master_port = p.port;
      info.master_port_from = p.from;
    }
  } else {
    return std::nullopt;
  }
  if (info.rank >= info.world_size)
    throw LaunchError("rank " + std::to_string(info.rank) + " is outside the world size " +
                      std::to_string(info.world_size));
  if (info.master_port > 65535) throw LaunchError("MASTER_PORT " + std::to_string(info.master_port) + " is not a TCP port");
  return info;
}

std::chrono::milliseconds wait_notice_period(const EnvLookup& env) {
  const std::chrono::milliseconds fallback{30000};
  const std::optional<std::string> v = env("MR_WAIT_NOTICE_S");
  if (!v || v->empty()) return fallback;
  char* end = nullptr;
  const double s = std::strtod(v->c_str(), &end);
  if (end == v->c_str() || *end || !(s > 0)) return fallback;  // NaN fails `s > 0` too
  const double bounded = std::min(std::max(s, 0.01), 86400.0);  // also bounds inf: no overflow below
  return std::chrono::milliseconds(static_cast<long long>(std::llround(bounded * 1000.0)));
}

std::string wait_notice_remark(const EnvLookup& env) {
  const std::optional<std::string> v = env("MR_WAIT_NOTICE_S");
  if (!v) return "";
  char* end = nullptr;
  const double s = std::strtod(v->c_str(), &end);
  const std::string used = seconds_text(wait_notice_period(env));
  if (v->empty() || end == v->c_str() || *end || !(s > 0))
    return "MR_WAIT_NOTICE_S='" + *v + "' is not a positive number of seconds: the waits say what they wait for every " +
           used + " (the default)";
  if (s < 0.01 || s > 86400.0) return "MR_WAIT_NOTICE_S='" + *v + "' is outside 0.01 s .. 1 day: " + used + " is used";
  return "";
}

}  // namespace mr::launch
