// Launching a validated job, and `megatron-run topology`.
//
// megatron-run never links LibTorch. Without --dry-run, after validation it either
//   (a) spawns --nproc-per-node workers itself (each one is megatron-run again, with torchrun's environment), or
//   (b) inside a job (torchrun's RANK/WORLD_SIZE, or SLURM's SLURM_PROCID/SLURM_NTASKS) execs the torch-linked
//       megatron-run-worker found beside itself, handing it the resolved arguments through an inherited memfd.
// Outside any job and without --nproc-per-node it runs a one-rank job through (a).
#include "launch.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <csignal>
#include <chrono>
#include <climits>
#include <cstring>
#include <ctime>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <optional>
#include <set>

#include "config/print.h"
#include "launch/event_log.h"
#include "launch/failure_report.h"
#include "launch/free_port.h"
#include "launch/open_files.h"
#include "launch/endpoint.h"
#include "launch/launch_env.h"
#include "launch/nccl_check.h"
#include "launch/node_group.h"
#include "launch/program.h"
#include "launch/program_inputs.h"
#include "run/run_scope.h"
#include "run/tokenizer_vocab.h"
#include "parallel/layout.h"
#include "config/rule.h"
#include "launch/spawn.h"
#include "launch/torchrun_env.h"
#include "util/exit_signal.h"
#include "util/shell.h"
#include "launch/worker_input.h"
#include "util/gpu_devices.h"
#include "util/resources.h"
#include "util/rule_id.h"
#include "util/log.h"

namespace mr::app {

namespace {

std::string self_path() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) throw std::runtime_error("cannot find megatron-run's own path (/proc/self/exe)");
  return std::string(buf, static_cast<size_t>(n));
}

std::string worker_path() {
  if (const char* w = std::getenv("MR_WORKER"); w && *w) return w;
  return (std::filesystem::path(self_path()).parent_path() / "megatron-run-worker").string();
}

// Finding 7 of review ops37: a worker that is not there is the same on every rank and every attempt.
const Rule kWorkerMissingRule{
    "launch.worker-missing", Rule::Level::Error,
    "megatron-run's own worker (megatron-run-worker beside megatron-run, or MR_WORKER) is missing or not executable: "
    "refused before any worker starts (exit 2), naming the path and how it was found; never retried by "
    "--max-restarts (it is an install's fault, the same on every rank and attempt).",
    __FILE__, __LINE__, kStageLaunch};

// The refusal (exit 2) when the worker megatron-run would run is not an executable file; nullopt when it is.
std::optional<int> worker_missing_refused(const LaunchOptions& lo) {
  const std::string worker = worker_path();
  if (access(worker.c_str(), X_OK) == 0 && !std::filesystem::is_directory(worker)) return std::nullopt;
  const int err = errno;
  const char* from_env = std::getenv("MR_WORKER");
  const bool named = from_env && *from_env;
  const std::string how = named ? "named by MR_WORKER"
                                : "looked for beside megatron-run (" + self_path() + "), where the build puts it";
  const std::string what = std::filesystem::is_directory(worker) ? "is a directory"
                           : access(worker.c_str(), F_OK) == 0  ? "is not executable"
                                                                : std::string("is missing (") + std::strerror(err) + ")";
  kWorkerMissingRule.record_hit();
  return refuse_launch(lo, 2,
                       with_rule_id(kWorkerMissingRule.id, "megatron-run's worker ") + worker + " " + what + ": " +
                           how + "; megatron-run-worker is built only where LibTorch is found (cmake -DTorch_DIR=...), "
                           "and installed beside megatron-run; " +
                           (named ? "unset MR_WORKER to use that one, or point it at the worker"
                                  : "MR_WORKER names another path") +
                           " (a user's program needs no worker: megatron-run [options] train.py)");
}

// The launchers' rendezvous for a multi-node job (launch/node_group.h), from the launcher options.
launch::RendezvousOptions rendezvous_options(const LaunchOptions& lo) {
  launch::RendezvousOptions ro;
  ro.backend = lo.rdzv_backend;
  ro.nnodes = lo.nnodes;
  ro.min_nnodes = lo.nnodes_min;
  ro.valid_nnodes = lo.valid_nnodes;
  ro.last_call = std::chrono::milliseconds(static_cast<long long>(lo.last_call_timeout * 1000));
  ro.node_rank = lo.node_rank;
  ro.run_id = lo.run_id;
  ro.master_addr = lo.master_addr;
  ro.master_port = lo.rdzv_backend == "c10d" ? 0 : (lo.master_port ? lo.master_port : launch::kTorchrunMasterPort);
  ro.store_host = lo.store_host;
  ro.store_port = lo.store_port;
  ro.join_timeout = std::chrono::milliseconds(static_cast<long long>(lo.join_timeout * 1000));
  ro.join_timeout_flag = lo.join_timeout_flag;
  ro.is_host = lo.rdzv_is_host;
  ro.max_restarts = lo.max_restarts;
  ro.nproc_per_node = lo.nproc_per_node;
  ro.local_addr = lo.local_addr;
  // The launchers' heartbeat timeout: the workers' (launch/worker_input.h's heartbeat_limits: --heartbeat-timeout,
  // else MR_DIST_HEARTBEAT_TIMEOUT_S, else 30 s), at least 1 s (a launcher sends a request every few hundred ms).
  // A value it refuses was refused before any launcher met (launch()); a refusal told to the others
  // (refuse_launch) may be that one, and bounds the launchers with the default then.
  launch::HeartbeatLimits bound;
  try {
    bound = launch::heartbeat_limits(lo.heartbeat_timeout);
  } catch (const std::runtime_error&) {
  }
  ro.heartbeat_timeout = std::max<std::chrono::milliseconds>(bound.timeout, std::chrono::seconds(1));
  ro.heartbeat_source = bound.timeout < std::chrono::seconds(1) ? bound.timeout_source + ", raised to 1 s"
                                                                : bound.timeout_source;
  return ro;
}

}  // namespace

int refuse_launch(const LaunchOptions& lo, int code, const std::string& message, bool printed) {
  if (!printed) print_error(std::cerr, message);
  // Inside a job without --nproc-per-node there is no nested rendezvous: no other node waits.
  if (!lo.multi_node() || lo.joins_enclosing_job()) return code;
  // An elastic job waits for no node in particular (and may be running already): a node that will not come
  // just does not, as under torchrun.
  if (lo.elastic()) return code;
  // Every other node would wait for this one until --join-timeout: tell them why it will not come.
  char host[256] = "";
  gethostname(host, sizeof host - 1);
  const std::string who = lo.rdzv_backend == "c10d" ? std::string("the launcher on ") + host
                                                    : "node " + std::to_string(lo.node_rank) + "'s launcher (" + host + ")";
  std::cerr << "megatron-run: telling the other nodes that this one will not join (waits at most "
            << lo.join_timeout_flag << " " << lo.join_timeout << " s)" << std::endl;
  launch::NodeGroup::refuse_to_join(rendezvous_options(lo), code, who + " refused to start: " + message.substr(0, message.find('\n')));
  return code;
}

namespace {

// The FAILED record's raw_error for a stop signal (torchrun puts its Python traceback there).
std::string stop_signal_error(int sig) {
  return "received signal " + std::to_string(sig) + " (" + launch::signal_name(sig) + ")";
}

const Rule kMasterPortPrivilegedRule{
    "launch.master-port-privileged", Rule::Level::Error,
    "A one-node job's --master-port (or PET_MASTER_PORT) below the first port this user may bind "
    "(net.ipv4.ip_unprivileged_port_start): refused (exit 1) for megatron-run's own worker, whose rank 0 hosts the "
    "store there; a warning for a program (which may not use MASTER_PORT).",
    __FILE__, __LINE__, kStageLaunch};

// One node with --master-port P (or PET_MASTER_PORT) that another program holds on this machine, or that this
// user may not bind (a privileged port: EACCES): rank 0 hosts the job's store at P here and could not bind it.
// megatron-run's own worker surely does: refused (exit 1) before any worker starts. The user's program may not use
// MASTER_PORT at all: named in a warning. Returns the refusal's code.
std::optional<int> master_port_held(const LaunchOptions& lo, int port, bool own_worker) {
  if (lo.multi_node() || port <= 0) return std::nullopt;
  std::string what, id;
  // Under SLURM without --master-port the port is MASTER_PORT's or derived from the job id: named as such.
  const std::string named = lo.master_port_from.empty()
                                ? "--master-port " + std::to_string(port)
                                : "port " + std::to_string(port) + " (" + lo.master_port_from + ")";
  const int bind_errno = launch::store_bind_error(port);  // one bind tells "held" (EADDRINUSE) from "forbidden"
  if (bind_errno == EADDRINUSE) {
    what = named + ": the port is in use on this machine (another program "
           "listens on it or holds it)";
  } else if (bind_errno == EACCES) {
    id = kMasterPortPrivilegedRule.id;
    what = named + ": this user may not bind ports below " +
           std::to_string(launch::unprivileged_port_start()) + " (net.ipv4.ip_unprivileged_port_start; binding " +
           "them needs root or CAP_NET_BIND_SERVICE)";
  } else {
    return std::nullopt;
  }
  auto tagged = [&id](const std::string& text) { return id.empty() ? text : with_rule_id(id, text); };
  if (own_worker)
    return refuse_launch(lo, 1, tagged((lo.master_port_from.empty() ? "argument " : "") + what +
                                       ", and rank 0 of this one-node job hosts the job's store there; " +
                                       (lo.master_port_from.empty() ? "give a free port, or leave --master-port out for one"
                                                                    : "set MASTER_PORT (or --master-port) to a free port")));
  print_warning(std::cerr, tagged(what + "; a program whose rank 0 hosts a store at MASTER_PORT (torch's "
                                         "init_process_group with env://) will fail to bind it"));
  return std::nullopt;
}

// Rule launch.open-file-limit: refuses (exit 1) an open-file limit below what the launcher needs for the workers'
// pipes and log files, or below what megatron-run's own worker needs (it raises its own soft limit to the hard one,
// so the hard limit is what counts); a program's need is unknown, so only the launcher's is checked for it. The
// limit read is the one launch() raised before any check (the workers get the user's back: launch/workers.cpp).
std::optional<int> open_file_limit_refused(const LaunchOptions& lo, const launch::SpawnOptions& so, bool own_worker) {
  int log_files = 0;
  for (int r = 0; r < so.nproc_per_node; ++r)
    log_files += __builtin_popcount(static_cast<unsigned>(so.logs.redirects.of(r) | so.logs.tee.of(r)));
  const bool piped = so.prefix_output || log_files > 0;
  const std::optional<uint64_t> limit = util::open_file_limit();
  const uint64_t launcher = launch::launcher_files_needed(static_cast<uint64_t>(launch::open_descriptors(limit)),
                                                          so.nproc_per_node, piped, log_files);
  // The worker starts with its standard streams and its input (and what the launcher was given without close on
  // exec: not counted, so the figure stays at or under the need).
  const uint64_t worker = own_worker ? launch::worker_files_needed(4, so.nproc_per_node * so.nnodes) : 0;
  const std::optional<std::string> refusal =
      launch::open_file_refusal(limit, so.nproc_per_node, launcher, worker);
  if (!refusal) return std::nullopt;
  return refuse_launch(lo, 1, *refusal);
}

// Rule dist.nccl-unavailable (launch::kNcclUnavailableRule): refused by the launcher, once, before any worker
// starts (each worker would refuse it too; lib/distributed/worker.cpp).

// A program given --distributed-backend nccl on a machine without any GPU (a notice of the launcher: docs/launch.md).
const Rule kNcclWithoutGpuRule{
    "launch.nccl-without-gpu", Rule::Level::Warning,
    "The user's program given --distributed-backend nccl on a machine that shows no GPU: it will likely fail to "
    "initialise (torch's nccl needs a GPU a rank); it still starts, as the program may know better than the probe.",
    __FILE__, __LINE__, kStageLaunch};

// The --distributed-backend the user gave (a config file or the command line), or nullopt when left at its default.
// The namespace, not the typed view: only it knows where the value came from.
std::optional<arg::DistributedBackend> given_backend(const Namespace& ns) {
  const std::string dest(dest_of(ArgId::distributed_backend));
  arg::DistributedBackend b{};
  if (!ns.has(dest) || ns.provenance(dest).kind == Provenance::Kind::Default || !ns[dest].is_str() ||
      !arg::from_string(ns[dest].as_str(), b))
    return std::nullopt;
  return b;
}
bool asked_nccl(const Namespace& ns) { return given_backend(ns) == arg::DistributedBackend::nccl; }

// Where the backend was given, as diagnostics place a value: its config file's line ("" on the command line).
std::string backend_where(const Namespace& ns) {
  const Provenance& p = ns.provenance(dest_of(ArgId::distributed_backend));
  return p.kind == Provenance::Kind::Config ? p.where : "";
}

// Rule dist.nccl-unavailable for our own worker: the refusal's exit code (1), or nullopt when nccl was not asked
// for or may run.
std::optional<int> own_worker_nccl_refused(const LaunchOptions& lo, const Namespace& ns) {
  if (!asked_nccl(ns)) return std::nullopt;
  const std::string missing =
      launch::own_worker_nccl_missing(launch::worker_nccl_from(MR_WORKER_NCCL), util::machine_gpu_devices());
  if (missing.empty()) return std::nullopt;
  launch::kNcclUnavailableRule.record_hit();
  const Diagnostic d{Diagnostic::Level::Error, launch::kNcclUnavailableRule.id,
                     "argument --distributed-backend nccl: megatron-run's worker cannot run it here: " + missing +
                         "; use --distributed-backend gloo (the CPU path)",
                     {"--distributed-backend"}, backend_where(ns), kStageInit};
  print_diagnostic(std::cerr, d);
  return refuse_launch(lo, 1, diagnostic_text(d), /*printed=*/true);
}

// The user's program with --distributed-backend nccl on a machine that shows no GPU at all: named in a warning
// (torch's "nccl" is NCCL or, on ROCm, RCCL: the program may know better than the probe, so it still starts).
void warn_program_nccl(const Namespace& ns) {
  if (!asked_nccl(ns)) return;
  const std::string doubt = launch::program_nccl_doubt(util::machine_gpu_devices());
  if (doubt.empty()) return;
  print_warning_diagnostic({Diagnostic::Level::Warning, kNcclWithoutGpuRule.id,
                            "--distributed-backend nccl: " + doubt + "; torch's nccl backend (NCCL, or RCCL on ROCm) "
                            "needs a GPU for each rank, so the program will likely fail to initialise; "
                            "--distributed-backend gloo runs on the CPU",
                            {"--distributed-backend"}, backend_where(ns), kStageInit});
}

// The files the program reads and the directories it writes by its flags, on this node (launch/program_inputs.h):
// each finding said (once a node: by the launcher, or by local rank 0 of a job that runs megatron-run on every
// rank), and the launch refused (exit 1) when one is an error. Every rank of such a job decides alike. Not with
// --no-file-checks; nor with --yaml-cfg, whose namespace holds the file's sections, not the flags.
}  // namespace

const Rule kEnvVarsOverrideRule{
    "launch.env-vars-override", Rule::Level::Warning,
    "A config file's ENV_VARS entry that replaces something for the ranks: a variable megatron-run's environment "
    "holds with another value (the ranks get the config's, as Megatron's CI exports ENV_VARS over its environment "
    "before it launches, and validation used it), or one the launch sets for each rank itself (RANK, WORLD_SIZE, "
    "MASTER_ADDR, ...: the launch's value wins, for validation too).",
    __FILE__, __LINE__, kStageLaunch};

bool megatron_run_setting(const std::string& name) { return name.rfind("MR_", 0) == 0; }

bool launch_sets_variable(const std::string& name) {
  // megatron-run's own settings (MR_WORKER, MR_DIST_TIMEOUT_S, ...) are the launcher's to read, from its own
  // environment: a config's ENV_VARS does not change how the launch itself behaves.
  if (name.rfind("TORCHELASTIC_", 0) == 0 || megatron_run_setting(name)) return true;
  const std::vector<std::string>& names = launch::torchrun_env_names();
  return std::find(names.begin(), names.end(), name) != names.end();
}

namespace {
// A value a log may not show: what Megatron's CI redacts when it prints the ENV_VARS it exports.
bool sensitive_name(const std::string& name) {
  std::string u = name;
  for (char& c : u) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  // Megatron's CI hides names holding KEY, TOKEN or API (INTERNAL_API_URL among them); the rest are as plain.
  for (const char* w : {"TOKEN", "SECRET", "PASSWORD", "PASSWD", "KEY", "API", "CREDENTIAL", "AUTH"})
    if (u.find(w) != std::string::npos) return true;
  return false;
}
}  // namespace

std::string config_env_line(const Parsed& p) {
  std::string vars;
  for (const auto& [k, v] : p.env_vars)
    if (!launch_sets_variable(k))  // a dry run's ENV_VARS hold them (a launch's do not): never exported
      vars += (vars.empty() ? "" : " ") + k + "=" + (sensitive_name(k) ? std::string("<redacted>") : shell_quote(v));
  return vars;
}

std::vector<Diagnostic> config_env_notices(const Parsed& p) {
  std::vector<Diagnostic> out;
  auto where = [&](const std::string& k) {
    auto w = p.env.var_where.find(k);
    return w == p.env.var_where.end() ? std::string() : w->second;
  };
  // A launch's validation left them out of ENV_VARS (Parsed::env_vars_not_applied); a dry run's applied them all:
  // what a launch would leave out is named all the same, as a launch names it.
  std::map<std::string, std::string> not_applied = p.env_vars_not_applied;
  for (const auto& [k, v] : p.env_vars)
    if (launch_sets_variable(k)) not_applied[k] = where(k);
  for (const auto& [k, v] : p.env_vars) {
    if (not_applied.count(k)) continue;
    const char* had = std::getenv(k.c_str());
    if (!had || v == had) continue;
    kEnvVarsOverrideRule.record_hit();
    const bool hide = sensitive_name(k);
    out.push_back({Diagnostic::Level::Warning, kEnvVarsOverrideRule.id,
                   "ENV_VARS sets " + k + "=" + (hide ? "<redacted>" : shell_quote(v)) +
                       ", and megatron-run's environment has " + k + "=" + (hide ? "<redacted>" : shell_quote(had)) +
                       ": the ranks get the config's value, which validation used (ENV_VARS are exported over "
                       "the environment, as Megatron's CI exports them before it launches); drop the entry to keep "
                       "the environment's",
                   {}, where(k), kStageInit});
  }
  for (const auto& [k, w] : not_applied) {
    kEnvVarsOverrideRule.record_hit();
    out.push_back({Diagnostic::Level::Warning, kEnvVarsOverrideRule.id,
                   "ENV_VARS sets " + k +
                       (megatron_run_setting(k)
                            ? ", one of megatron-run's own settings, which it reads from its own environment only: "
                              "not exported (set it in the environment megatron-run starts in)"
                        : p.env_vars.count(k)  // a dry run, which validated with the config's (or --world-size's)
                            ? ", which the launch sets for each rank itself: a launch does not export it, and "
                              "validates with its own value"
                            : ", which the launch sets for each rank itself: not exported, and validated with the "
                              "launch's value"),
                   {}, w, kStageInit});
  }
  // In the order of the file's lines (the maps above are by name).
  auto line_key = [](const Diagnostic& d) {
    const size_t colon = d.where.rfind(':');
    long line = 0;
    if (colon != std::string::npos)
      for (size_t i = colon + 1; i < d.where.size() && std::isdigit(static_cast<unsigned char>(d.where[i])); ++i)
        line = line * 10 + (d.where[i] - '0');
    return std::make_pair(colon == std::string::npos ? d.where : d.where.substr(0, colon), line);
  };
  std::stable_sort(out.begin(), out.end(),
                   [&](const Diagnostic& a, const Diagnostic& b) { return line_key(a) < line_key(b); });
  return out;
}

namespace {

// The typed view of the namespace a launch starts from. Validation went to its end, but in one case: a user's
// program with --use-checkpoint-args and a checkpoint megatron-run cannot read, where the refusals of the model's
// shape were said as warnings (cmd_run.cpp) and the chain stopped at the first; the program validates the
// checkpoint's values itself. The checks made here before such a program starts (its input files, its time limits)
// read no dest validation fills, which that view leaves at 0 (Args::from_unvalidated).
Args launch_view(const Outcome& resolved) {
  return resolved.ok() ? Args::from(resolved.parsed.ns) : Args::from_unvalidated(resolved.parsed.ns);
}

}  // namespace

std::vector<Diagnostic> program_input_diagnostics(const Outcome& resolved, const launch::Program& program) {
  const Namespace& ns = resolved.parsed.ns;
  if (!program.named() || !program.check_files || resolved.parsed.yaml_cfg) return {};
  std::vector<launch::InputFinding> findings;
  try {
    findings = launch::program_input_findings(launch_view(resolved));
  } catch (const ArgsError&) {
    return {};  // a value of another shape: the program's own parser says what it makes of it
  }
  std::vector<Diagnostic> out;
  for (const launch::InputFinding& f : findings) {
    f.rule->record_hit();
    const Provenance& p = ns.provenance(dest_of(f.arg));
    const bool error = f.rule->level == Rule::Level::Error;
    out.push_back({error ? Diagnostic::Level::Error : Diagnostic::Level::Warning, f.rule->id, f.message,
                   {launch::finding_flag(f)},
                   p.kind == Provenance::Kind::Config ? p.where : "", kStageInit});
  }
  return out;
}

namespace {

std::optional<int> program_inputs_refused(const Outcome& resolved, const launch::Program& program,
                                          const LaunchOptions& lo, const std::optional<launch::LaunchInfo>& job) {
  const std::vector<Diagnostic> ds = program_input_diagnostics(resolved, program);
  if (ds.empty()) return std::nullopt;
  // Local rank 0 speaks for its node; a job that gives no LOCAL_RANK (one rank a node, mpirun-style) has no local
  // rank to go by (Megatron reads it as 0): every rank speaks.
  const bool no_local_rank = job && job->source == launch::LaunchInfo::Source::Torchrun && !std::getenv("LOCAL_RANK");
  const bool says = !job || lo.nproc_per_node > 0 || job->local_rank == 0 || no_local_rank;
  std::optional<std::string> refusal;
  for (const Diagnostic& d : ds) {
    const bool error = d.level == Diagnostic::Level::Error;
    if (says) error ? print_diagnostic(std::cerr, d) : print_warning_diagnostic(d);
    if (error && !refusal) refusal = diagnostic_text(d);
  }
  if (!refusal) return std::nullopt;
  return refuse_launch(lo, 1, *refusal, /*printed=*/true);
}

// One spawn of this node's workers: the spawn options made from the launch options, the report spawn_workers
// fills, and torchrun's event records (--event-log-handler console) made from both; spawn_local() runs its steps.
struct LocalSpawn {
  explicit LocalSpawn(const LaunchOptions& l) : lo(l) { so.report = &report; }

  // The record of the agent's state now (torchrun's AgentEvent): succeeded or not, with the error.
  launch::AgentEvent event(bool succeeded, const std::optional<std::string>& error);
  // Whether an agent record is written (the console handler) and what it says.
  void record_event(bool succeeded, const std::optional<std::string>& error);
  // Each worker of the last attempt, as it ended (torchrun's _record_worker_events, before the agent's record).
  void record_worker_ends();
  // What a stop signal while the launchers wait writes: the FAILED record built from `failed_base`, or none.
  std::optional<launch::WaitingRecord> waiting_record(const launch::AgentEvent& failed_base);
  // The FAILED record of a stop signal now, or none without the console handler.
  std::optional<launch::WaitingRecord> record_on_signal();
  // Which records each attempt writes (its start, the wait between attempts): set only with the console handler.
  void set_attempt_records();
  // The spawn options: workers per node, node count and rank, master, restarts, logs, the program's argv.
  void fill_options(std::vector<std::string> argv, std::string python);
  // Whether this node can run the workers (virtual local ranks, NUMA binding, their count, the master port, open
  // files): the refusal's exit code, else none.
  std::optional<int> local_refusal(bool own_worker);
  // Whether the launchers of several nodes meet (this node's rank, the node count, the master): the exit code when
  // they do not, or when this node was a spare the job ended without; else none.
  std::optional<int> meet_other_nodes();
  // The workers started and supervised to their end, the other nodes told, the final records: the job's exit code.
  int run_workers();

  const LaunchOptions& lo;
  const std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  launch::SpawnOptions so;
  launch::SpawnReport report;
  // --event-log-handler console: torchrun's records (launch/event_log.h), at INFO: none under a LOGLEVEL above it.
  bool console_events = false;
  bool met = false;  // the launchers have met: this node's rank and the node count are known
  // Several nodes: the launchers' group, which watches the other nodes.
  std::unique_ptr<launch::NodeGroup> group;
};

launch::AgentEvent LocalSpawn::event(bool succeeded, const std::optional<std::string>& error) {
  launch::AgentEvent e;
  e.succeeded = succeeded;
  e.run_id = so.run_id;
  // torchrun's worker group holds None for both until its first rendezvous returns.
  e.group_rank = met ? std::optional<int>(report.node_rank) : std::nullopt;
  e.group_world_size = met ? std::optional<int>(report.nnodes) : std::nullopt;
  e.role = so.role;
  e.hostname = launch::fq_hostname();
  e.total_run_time = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - started).count();
  e.rdzv_backend = lo.rdzv_backend;
  e.raw_error = error;
  e.entry_point = std::filesystem::path(so.argv.empty() ? std::string() : so.argv.front()).filename().string();
  e.agent_restarts = report.restarts;
  return e;
}

void LocalSpawn::record_event(bool succeeded, const std::optional<std::string>& error) {
  if (console_events) std::cerr << launch::agent_event_json(event(succeeded, error)) << std::endl;
}

void LocalSpawn::record_worker_ends() {
  if (!console_events) return;
  std::string lines;
  for (const launch::SpawnReport::WorkerEnd& w : report.worker_ends) {
    launch::AgentEvent e = event(true, w.raw_error);
    e.state = w.state;
    e.worker = launch::AgentEvent::WorkerFields{w.rank, w.pid, w.local_rank, w.rank, so.nproc_per_node * report.nnodes,
                                                w.exit_code, w.exit_code ? std::optional<pid_t>(w.pid) : std::nullopt};
    lines += launch::agent_event_json(e) + "\n";
  }
  std::cerr << lines << std::flush;
}

// While the launchers wait for each other (no worker runs): a stop signal ends the launcher, after the FAILED
// record (torchrun records FAILED when a signal stops its agent, with its handlers set).
std::optional<launch::WaitingRecord> LocalSpawn::waiting_record(const launch::AgentEvent& failed_base) {
  if (!console_events) return std::nullopt;
  return launch::WaitingRecord{[failed = failed_base](int sig) mutable {
                                 failed.raw_error = stop_signal_error(sig);
                                 const launch::AgentEventParts p = launch::agent_event_json_parts(failed);
                                 return std::make_pair(p.before, p.after);
                               },
                               started};
}

// Without the console handler no record is made: event() looks the host name up (DNS), which a launch that
// writes no record must not wait for, before each wait of a multi-node job.
std::optional<launch::WaitingRecord> LocalSpawn::record_on_signal() {
  if (!console_events) return std::nullopt;
  return waiting_record(event(false, std::nullopt));
}

void LocalSpawn::set_attempt_records() {
  console_events = lo.event_log_handler == "console" && launch::events_logged(std::getenv("LOGLEVEL"));
  met = !lo.multi_node();
  // Each attempt: RENDEZVOUS and ASSIGN_WORKER_RANKS (the rank and size the worker group held before, a time) and
  // a START per worker; torchrun's run time is 0 in every record before its run returns.
  if (console_events)
    so.on_attempt_start = [this](const launch::AttemptStart& a) {
      launch::AgentEvent e = event(true, std::nullopt);
      e.total_run_time = 0;
      e.agent_restarts = a.restarts;
      e.group_rank = a.prev_node_rank;
      e.group_world_size = a.prev_nnodes;
      std::string lines;
      for (const auto& [state, ms] : {std::pair<const char*, double>{"RENDEZVOUS", a.rendezvous_ms},
                                      std::pair<const char*, double>{"ASSIGN_WORKER_RANKS", a.assign_ms}}) {
        e.state = state;
        e.duration_ms = ms;
        lines += launch::agent_event_json(e) + "\n";
      }
      e.state = "START";
      e.duration_ms.reset();
      e.group_rank = a.node_rank;
      e.group_world_size = a.nnodes;
      for (const auto& [local_rank, pid] : a.workers) {
        const int rank = a.node_rank * so.nproc_per_node + local_rank;
        e.worker = launch::AgentEvent::WorkerFields{rank, pid, local_rank, rank, so.nproc_per_node * a.nnodes,
                                                    std::nullopt, std::nullopt};
        lines += launch::agent_event_json(e) + "\n";
      }
      std::cerr << lines << std::flush;
    };
  // Between attempts (a restart of every node's workers): the attempt's rank and node count.
  if (console_events)
    so.waiting_record = [this](int node_rank, int nnodes, int restarts) {
      launch::AgentEvent e = event(false, std::nullopt);
      e.group_rank = node_rank;
      e.group_world_size = nnodes;
      e.agent_restarts = restarts;
      return waiting_record(e);
    };
}

void LocalSpawn::fill_options(std::vector<std::string> argv, std::string python) {
  so.nproc_per_node = lo.nproc_per_node > 0 ? lo.nproc_per_node : 1;
  so.nnodes = lo.nproc_per_node > 0 ? lo.nnodes : 1;
  so.node_rank = lo.nproc_per_node > 0 ? lo.node_rank : 0;
  report.node_rank = so.node_rank;
  report.nnodes = so.nnodes;
  so.master_addr = lo.master_addr;
  so.master_port = lo.master_port;
  so.prefix_output = so.nproc_per_node * so.nnodes > 1 || lo.elastic();
  so.run_id = lo.run_id;
  so.role = lo.role;
  so.max_restarts = lo.max_restarts;
  so.grace_seconds = lo.term_timeout;
  // The wait before a rank that finished while others run is named (launch/spawn.h); MR_FINISHED_NOTICE_S sets
  // it (seconds; the tests' short wait), 30 s without it.
  if (const char* e = std::getenv("MR_FINISHED_NOTICE_S"); e && *e) so.finished_notice_seconds = std::strtod(e, nullptr);
  so.logs = lo.logs;
  so.line_prefix_template = lo.log_line_prefix_template;
  if (!so.line_prefix_template.empty()) so.prefix_output = true;  // asked for: every console line, one rank or many
  so.virtual_local_rank = lo.virtual_local_rank;
  so.handled_signals = lo.handled_signals;
  so.argv = std::move(argv);
  so.python = std::move(python);
}

std::optional<int> LocalSpawn::local_refusal(bool own_worker) {
  if (so.virtual_local_rank)
    for (int i = 0; i < so.nproc_per_node; ++i) {
      try {
        launch::virtual_local_device(i);
      } catch (const std::invalid_argument& e) {
        return refuse_launch(lo, 2, "argument " + option_name("--virtual-local-rank") + ": " + e.what());
      }
    }
  // --numa-binding: every local rank's CPUs before anything starts; a machine that cannot say fails the job here, as
  // torchrun's workers fail to start (numactl) without its fallback.
  if (lo.numa_binding && so.nproc_per_node <= kMaxLocalWorkers) {
    const std::string mode(launch::to_string(*lo.numa_binding));
    try {
      const launch::NumaMachine machine = launch::this_machine();
      std::string said;
      for (int i = 0; i < so.nproc_per_node; ++i) {
        so.cpu_binding.push_back(launch::numa_cpus_for_device(machine, i, *lo.numa_binding));
        said += (i ? "; " : "") + std::string("local rank ") + std::to_string(i) + ": CPUs " +
                launch::cpu_list(so.cpu_binding.back());
      }
      std::cerr << "megatron-run: --numa-binding " << mode << ": " << said << std::endl;
    } catch (const std::exception& e) {  // NumaError, or a file system error reading sysfs
      return refuse_launch(lo, 1, "--numa-binding " + mode + ": " + e.what());
    }
  }
  if (so.nproc_per_node > kMaxLocalWorkers) {
    return refuse_launch(lo, 2, "argument " + option_name("--nproc-per-node") + ": " + std::to_string(so.nproc_per_node) +
                                    " local workers is more than the " + std::to_string(kMaxLocalWorkers) +
                                    " megatron-run starts on one node (a dry run validates any size)");
  }
  if (std::optional<int> refused = master_port_held(lo, so.master_port, own_worker)) return *refused;
  // The launcher's soft open-file limit goes to the hard one before it opens pipes, logs or sockets; the check
  // below reads the raised limit (the workers start with the user's: launch/workers.cpp).
  util::raise_open_file_limit();
  if (std::optional<int> refused = open_file_limit_refused(lo, so, own_worker)) return *refused;
  return std::nullopt;
}

std::optional<int> LocalSpawn::meet_other_nodes() {
  // Several nodes: the launchers meet in their store first (node rank, master address), then watch each other.
  if (lo.multi_node()) {
    launch::RendezvousOptions ro = rendezvous_options(lo);
    so.master_port = ro.master_port;
    if (!lo.from_slurm.empty()) MR_LOG(info) << "from SLURM: " << lo.from_slurm;
    try {
      // A stop signal while the launchers meet is said, not silent.
      launch::WaitingSignalNotice waiting(record_on_signal(), lo.handled_signals);
      const auto meet_from = std::chrono::steady_clock::now();
      group = std::make_unique<launch::NodeGroup>(ro);
      so.first_rendezvous_ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - meet_from).count();
    } catch (const launch::RendezvousError& e) {
      print_error(std::cerr, std::string("rendezvous: ") + e.what());
      record_event(false, std::string("rendezvous: ") + e.what());
      return 1;
    }
    if (group->ended_without_this_node()) {  // an elastic job's spare: the job ran and ended without this node
      std::cerr << "megatron-run: the job of run '" << so.run_id << "' ended without this node (it waited as a spare)"
                << std::endl;
      const int spare_code = group->finish(0);
      // torchrun's spare leaves its rendezvous gracefully and its agent's run returns: SUCCEEDED, with no group
      // rank or node count (it never joined a round).
      record_event(spare_code == 0, spare_code == 0 ? std::nullopt
                                                    : std::optional<std::string>("the job failed while this node "
                                                                                 "waited as a spare"));
      return spare_code;
    }
    so.node_rank = group->node_rank();
    so.restart_count = group->restarts_used();  // an elastic job's node taken in later: the job's count
    so.nnodes = group->nnodes();  // an elastic job's count, fixed when its rendezvous closed
    so.master_addr = group->master_addr();
    so.master_port = group->master_port();
    so.watch = group.get();
    met = true;
    report.node_rank = so.node_rank;  // spawn_workers keeps them as each attempt's rendezvous leaves them
    report.nnodes = so.nnodes;
    MR_LOG(info) << "node " << so.node_rank << " of " << so.nnodes << " joined run '" << so.run_id
                 << "'; workers' master " << launch::join_host_port(so.master_addr, so.master_port);
  }
  return std::nullopt;
}

int LocalSpawn::run_workers() {
  // A port derived from SLURM's job (MASTER_PORT unset): the workers' message for it taken names the derivation, as
  // the launcher's own does, not --master-port alone (the rank that hosts the store is a worker here).
  if (!lo.master_port_from.empty() && lo.master_port_from != "MASTER_PORT" && so.master_port == lo.master_port)
    so.env[launch::kMasterPortFromVar] = lo.master_port_from;
  int code;
  std::optional<std::string> start_error;
  // From the end of the workers' signal forwarding to this process's exit a stop signal is only noted: a third
  // Ctrl-C right after the second one killed the workers cannot end the launcher before its clean-up, summary and
  // exit code (review diff40 #1). Node 0's wait for the others below still ends at a stop signal, as said there.
  launch::keep_signals_caught_to_exit();
  try {
    code = launch::spawn_workers(so);
  } catch (const std::exception& e) {
    // Options spawn_workers cannot act on are a usage error (2); anything else is this machine's (a descriptor,
    // process or directory it could not have: the open-file or process limit, an unwritable TMPDIR): 1.
    code = dynamic_cast<const launch::SpawnOptionError*>(&e) ? 2 : 1;
    // (a refusal of --log-dir names it by both spellings: LogOptions::log_dir_name)
    const std::string why = code == 1 ? util::with_limit_hint(e.what()) : std::string(e.what());
    print_error(std::cerr, why);
    if (group) group->local_failure(code, "node " + std::to_string(so.node_rank) + " could not start its workers: " + without_rule_id(why));
    start_error = why;
  }
  if (group) {
    // node 0 waits for the others to say goodbye
    launch::WaitingSignalNotice waiting(record_on_signal(), lo.handled_signals);
    code = group->finish(code);
  }
  // torchrun: SUCCEEDED once its agent's run returns, whatever the workers did; FAILED on a signal or an error.
  // A stop signal whose workers all handled it (exit 0) ended nothing abnormally: the launcher's run returned,
  // SUCCEEDED as the exit code says (torchrun's agent dies of the signal, FAILED, and never exits 0 for it).
  if (start_error) record_event(false, start_error);
  else if (report.stop_signal && code != 0) record_event(false, stop_signal_error(report.stop_signal));
  else {
    record_worker_ends();  // a launcher stopped by a signal has none (torchrun's agent raises: no worker records)
    record_event(true, std::nullopt);
  }
  return code;
}

// Starts --nproc-per-node workers running `argv` (one when not given) and supervises them: the job's exit code,
// or 1 when they cannot start (2 for options the spawner refuses). `own_worker`: argv is megatron-run's own worker, not the user's program.
int spawn_local(const LaunchOptions& lo, std::vector<std::string> argv, bool own_worker, std::string python = "") {
  LocalSpawn spawn(lo);
  // From here to the launcher's exit, a reader of its output that went away (`| head`) costs output, never the
  // job's exit code: SIGPIPE stays ignored after the workers have ended (the failure summary, the kept log
  // directory's line, the event records), as while they run (spawn_signals.cpp), and a failed write only sets
  // the stream's error state. Until 2026-12-07 the summary written into a closed pipe killed the launcher
  // (exit 141) and the root cause's code was lost (review launch37 #10). The workers get SIGPIPE's default back
  // (workers.cpp); nothing is exec'd from here on.
  std::signal(SIGPIPE, SIG_IGN);
  spawn.set_attempt_records();
  spawn.fill_options(std::move(argv), std::move(python));
  if (std::optional<int> refused = spawn.local_refusal(own_worker)) return *refused;
  if (std::optional<int> ended = spawn.meet_other_nodes()) return *ended;
  return spawn.run_workers();
}

// The user's training program on every rank (launch/program.h), validated for the world size already: spawned
// with torchrun's environment when we start the workers, else (inside a torchrun/SLURM job) exec'd in place.
int launch_program(const Outcome& resolved, const launch::Program& program, const LaunchOptions& lo,
                   const std::optional<launch::LaunchInfo>& job) {
  std::vector<std::string> argv;
  try {
    argv = launch::program_argv(program, program.appended);
    argv.front() = launch::check_program(program);  // checked before validation already (cmd_run): again, for its path
  } catch (const UsageError& e) {
    print_usage_error(std::cerr, e);
    return refuse_launch(lo, 2, e.what(), /*printed=*/true);
  } catch (const launch::LaunchError& e) {
    return refuse_launch(lo, 2, e.what());
  }
  if (std::optional<int> refused = program_inputs_refused(resolved, program, lo, job)) return *refused;
  if (!job || lo.nproc_per_node > 0 || job->rank == 0) warn_program_nccl(resolved.parsed.ns);  // once a job
  if (job && lo.nproc_per_node == 0) {
    if (job->source == launch::LaunchInfo::Source::Slurm) {
      // One task per rank under srun: the program gets torchrun's variables, derived from SLURM's as for the
      // validation (torch's env:// rendezvous and Megatron read these, not SLURM_*). Ones already set are kept.
      const std::pair<const char*, std::string> vars[] = {
          {"RANK", std::to_string(job->rank)},
          {"WORLD_SIZE", std::to_string(job->world_size)},
          {"LOCAL_RANK", std::to_string(job->local_rank)},
          {"LOCAL_WORLD_SIZE", std::to_string(job->local_world_size)},
          {"MASTER_ADDR", job->master_addr},
          {"MASTER_PORT", std::to_string(job->master_port)}};
      std::string said;
      for (const auto& [name, value] : vars)
        if (!std::getenv(name)) {
          setenv(name, value.c_str(), 1);
          said += std::string(said.empty() ? "" : " ") + name + "=" + value;
        }
      if (const char* node = std::getenv("SLURM_NODEID"); node && !std::getenv("GROUP_RANK"))
        setenv("GROUP_RANK", node, 1);
      if (!said.empty()) MR_LOG(info) << "from SLURM, for the program: " << said;
      // Rank 0 runs on the master node: a store port held there is said, as the spawner says it of --master-port
      // (a warning: the program may not use MASTER_PORT).
      if (job->rank == 0 && launch::store_bind_error(job->master_port) == EADDRINUSE)
        print_warning(std::cerr, (job->master_port_from.empty()
                                      ? "MASTER_PORT " + std::to_string(job->master_port)
                                      : "port " + std::to_string(job->master_port) + " (" + job->master_port_from + ")") +
                                     ": the port is in use on this machine (another program listens on it or holds "
                                     "it); a program whose rank 0 hosts a store at MASTER_PORT (torch's "
                                     "init_process_group with env://) will fail to bind it; set MASTER_PORT to a free "
                                     "port");
    }
    std::vector<char*> a;
    for (std::string& w : argv) a.push_back(w.data());
    a.push_back(nullptr);
    std::cout.flush();
    std::cerr.flush();
    execv(argv.front().c_str(), a.data());
    print_error(std::cerr, "cannot run " + argv.front() + ": " + std::strerror(errno));
    return 2;
  }
  // The interpreter a script or module runs under, named when a module cannot be imported (finding 5 of review
  // firsthour36: PATH's python3 is not torchrun's own interpreter).
  std::string python;
  using Form = launch::Program::Form;
  if ((program.form == Form::Script && !program.no_python) || program.form == Form::Module) {
    const char* exec = std::getenv("PYTHON_EXEC");
    python = argv.front() + (exec && *exec ? " (PYTHON_EXEC)" : " (the first python3 on PATH)");
  }
  unsetenv(util::kExitSignalEnv);  // the latch is megatron-run's own worker's (below), not a user program's
  unsetenv(util::kExitSignalPendingEnv);
  return spawn_local(lo, argv, /*own_worker=*/false, python);
}

// Megatron's --local-rank given to a launch (apps/megatron-run/launch.cpp's launch()).
const Rule kLocalRankGivenRule{
    "launch.local-rank-given", Rule::Level::Error,
    "Megatron's --local-rank given (command line or config file) to a launch that starts its workers: each gets its "
    "own LOCAL_RANK, which Megatron reads, so one value for all would be wrong for all but one: refused (exit 2); a "
    "dry run and check accept it.",
    __FILE__, __LINE__, kStageLaunch};

}  // namespace

std::optional<InsideJobRefusal> inside_job_refusal(const LaunchOptions& lo, const launch::LaunchInfo& job) {
  return inside_job_refusal(lo, job.describe(), job.source == launch::LaunchInfo::Source::Slurm);
}

std::optional<InsideJobRefusal> inside_job_refusal(const LaunchOptions& lo, const std::string& job, bool slurm) {
  if (lo.nproc_given || (lo.spawner_only_given.empty() && lo.spawner_only_pet.empty())) return std::nullopt;
  // Inside another launcher's job megatron-run starts no workers: these options would do nothing. (Not
  // lo.nproc_per_node: --nnodes or c10d alone make it 1, a nested job of one worker per rank of this one.) The
  // command line first, then a PET_ default of one (PET_NNODES), named by its variable.
  const bool from_pet = lo.spawner_only_given.empty();
  const std::string flag = from_pet ? lo.spawner_only_pet.front() : lo.spawner_only_given.front();
  std::string dashed = flag;
  std::replace(dashed.begin(), dashed.end(), '_', '-');
  const std::string source = from_pet ? lo.pet_sources.at(flag) : std::string();
  const std::string var = source.substr(0, source.find('='));
  // Under SLURM the job's store is MASTER_ADDR:MASTER_PORT where set, else derived from SLURM_JOB_NODELIST and
  // SLURM_JOB_ID (launch_env.cpp): srun has no option for it (review diff39 #3).
  std::string advice = from_pet ? "unset " + var : "give it to that job's launcher";
  if (slurm && (dashed == "--master-port" || dashed == "--master-addr")) {
    const bool port = dashed == "--master-port";
    advice = std::string(from_pet ? "unset " + var + "; " : "") + "under SLURM set " +
             (port ? "MASTER_PORT" : "MASTER_ADDR") + " in the job's environment for its store (without it the " +
             (port ? "port is derived from SLURM_JOB_ID" : "address is SLURM_JOB_NODELIST's first host") + ")";
  }
  return InsideJobRefusal{flag, "argument " + option_name(flag) + ": " +
                                    (from_pet ? "its default " + source + " " : std::string()) +
                                    "acts on the workers megatron-run starts, but it is inside a job already (" + job +
                                    ") and starts none; " + advice + ", or add --nproc-per-node"};
}

int launch(const Outcome& resolved, const std::vector<std::string>& args, const launch::Program& program,
           const std::vector<int>& valid_nnodes) {
  po::options_description desc("launch");
  CommonOptions common;
  common.add_to(desc);
  LaunchOptions lo;
  lo.add_to(desc);
  SplitArgs split = split_args(args, 1, desc, /*allow_unregistered=*/true);
  lo.apply_pet_defaults(split.vm);
  Invocation job_shape;
  lo.apply(job_shape);  // --standalone, --rdzv-endpoint: the address and port the workers get
  lo.valid_nnodes = valid_nnodes;

  const std::optional<launch::LaunchInfo>& job = lo.enclosing.info;  // as apply() read it
  if (const std::optional<std::string>& malformed = lo.enclosing.malformed) {
    // An incomplete enclosing job (RANK and WORLD_SIZE left in the shell, no MASTER_ADDR): with --nproc-per-node
    // megatron-run is the launcher and gives its workers their own environment, as torchrun does.
    // Keyed on --nproc-per-node given (not nproc_per_node, which --nnodes or c10d alone make 1), as
    // inside_job_refusal is: without it, --nnodes 2 started a nested rendezvous here (review diff40 #3).
    if (!lo.nproc_given) {
      launch::kEnvMalformedRule.record_hit();
      return refuse_launch(lo, 2, "[" + std::string(launch::kEnvMalformedRule.id) + "] " + *malformed);
    }
    print_warning(std::cerr, *malformed + "; not inside a job then: --nproc-per-node starts the workers "
                                          "with their own");
  }
  if (job)
    if (const std::optional<InsideJobRefusal> r = inside_job_refusal(lo, *job)) {
      print_error(std::cerr, r->message);
      return 2;
    }

  // The config files' ENV_VARS, for every rank, exactly as validation read them (docs/config-files.md): exported
  // here, over megatron-run's environment, as Megatron's CI exports them before its launcher runs. The spawner
  // passes its environment on (setting the launch's own variables over it, which validation left out of
  // ENV_VARS: Invocation::launch_sets); the worker or program exec'd in place inherits it.
  for (const auto& [k, v] : resolved.parsed.env_vars)
    if (!launch_sets_variable(k)) setenv(k.c_str(), v.c_str(), 1);

  // What the worker gets; its time limits are checked here already, before any worker starts.
  const Namespace& ns = resolved.parsed.ns;
  // Megatron's --local-rank (torch.distributed.launch passed it to each worker): megatron-run gives each worker
  // it starts its own LOCAL_RANK; one value given to all of them would be wrong for all but one.
  const std::string local_rank(dest_of(ArgId::local_rank));
  if (lo.nproc_per_node > 0 && ns.has(local_rank) &&
      (ns.provenance(local_rank).kind == Provenance::Kind::Cli || ns.provenance(local_rank).kind == Provenance::Kind::Config))
    return refuse_launch(lo, 2, with_rule_id(kLocalRankGivenRule.id, "argument --local-rank (") +
                                    ns.provenance(local_rank).describe() +
                                    "): megatron-run starts the workers here and gives each its own LOCAL_RANK, which "
                                    "Megatron reads; one --local-rank for all of them would be wrong for all but one. "
                                    "Leave it out (a dry run and check accept it)");
  // The heartbeat bound the launchers and the workers share: a bad MR_DIST_HEARTBEAT_TIMEOUT_S or MR_DIST_HEARTBEAT_S
  // is refused here (rule dist.time-limits), before any launcher meets the others or any worker starts, where it is
  // used: by the launchers of several nodes, and by megatron-run's own workers. A user program on one node uses
  // neither value, so it is not refused for them.
  const bool heartbeat_used = lo.multi_node() || !program.named();
  if (heartbeat_used) {
    try {
      (void)launch::heartbeat_limits(lo.heartbeat_timeout);
    } catch (const std::runtime_error& e) {
      return refuse_launch(lo, 2, e.what());
    }
    // The waits' progress lines (a test knob): a value they cannot use is named once, by the launcher that starts
    // the job (not again by each worker under it).
    if (!job || (job->rank == 0 && !std::getenv("MR_SPAWNER")))
      if (const std::string r = launch::wait_notice_remark(); !r.empty()) std::cerr << "megatron-run: notice: " << r << std::endl;
  }
  // --yaml-cfg: its namespace holds the file's sections, not the flags the worker's typed view below reads (that
  // view failed on a key the file leaves null, e.g. `--distribute-saved-activations: the resolved value None is not
  // a bool`); our own run refuses the file before this (init.training-run), the user's program gets it as given.
  if (program.named() && resolved.parsed.yaml_cfg) return launch_program(resolved, program, lo, job);
  launch::WorkerInput in;
  in.ns = ns;
  in.backend_explicit = given_backend(ns).has_value();
  in.log_level = common.log_level;
  in.train = !lo.bring_up_only;
  in.target.te_version = resolved.parsed.env.te_version;
  in.argv = args;
  for (const auto& e : ns.entries())  // sorted by dest
    if (e.prov.by_user())
      in.given.push_back(e.dest);
    else if (e.prov.kind == Provenance::Kind::Derived)
      in.derived.emplace(e.dest, e.prov.describe());
  try {
    in.args = launch_view(resolved);  // the typed view the worker rebuilds (a value of the wrong shape fails here already)
    in.heartbeat_timeout_s = lo.heartbeat_timeout;  // (a number above 0: checked with the options)
    (void)launch::job_timeouts(in, launch::process_env(), /*heartbeat=*/false);  // the heartbeat: checked above
  } catch (const std::runtime_error& e) {
    return refuse_launch(lo, 2, e.what());
  }

  if (program.named()) return launch_program(resolved, program, lo, job);
  // Our spawner ((a) below): a backend its workers cannot run is refused here, once, before any of them starts.
  if (lo.nproc_per_node > 0 || !job)
    if (std::optional<int> refused = own_worker_nccl_refused(lo, ns)) return *refused;
  // Our worker, there before anything starts (once, by the launcher: a rank would find it missing on every attempt).
  if (std::optional<int> refused = worker_missing_refused(lo)) return *refused;

  // Our own run: the flags it does not act on, once (by the spawner, or by rank 0 under another launcher). The
  // runtime's notice of the timeout-like flags it ignores leaves out those this one named (WorkerInput::noticed).
  const bool under_our_spawner = job && std::getenv("MR_SPAWNER") != nullptr;
  const std::vector<run::Unacted> unacted = in.train ? run::unacted_flags(ns, in.args, in.target) : std::vector<run::Unacted>{};
  for (const run::Unacted& u : unacted) in.noticed.insert(in.noticed.end(), u.flags.begin(), u.flags.end());
  if (in.train && !under_our_spawner && (!job || job->rank == 0)) {
    if (std::string n = run::unacted_notice(unacted); !n.empty()) std::cerr << n << std::endl;
    try {  // --vocab-size where Megatron's tokenizer would size the model (run/tokenizer_vocab.h)
      if (const run::ModelVocab v = run::model_vocab(in.args); !v.notice.empty())
        std::cerr << "megatron-run: notice: " << v.notice << std::endl;
    } catch (const std::exception&) {  // refused with the model plan, before this point
    }
  }

  if (lo.nproc_per_node > 0 || !job) {
    // (a) our spawner; every worker is megatron-run again, inside the job we set up.
    if (job && lo.nproc_per_node > 0 && lo.from_slurm.empty())
      print_warning(std::cerr, "already inside a job (" + job->describe() + "); --nproc-per-node starts a nested one");
    std::vector<std::string> argv = {self_path()};
    for (const std::string& a : strip_launch_options(args)) argv.push_back(a);
    // --exit-signal-handler: each worker latches the signal from its start (main(), then the exec'd worker:
    // util/exit_signal.h), as Megatron installs its handler at argument parsing; never the launcher itself.
    if (in.train && in.args.exit_signal_handler)
      setenv(util::kExitSignalEnv, std::to_string(static_cast<int>(in.args.exit_signal)).c_str(), 1);
    else
      unsetenv(util::kExitSignalEnv);
    unsetenv(util::kExitSignalPendingEnv);
    return spawn_local(lo, std::move(argv), /*own_worker=*/true);
  }

  // (b) inside a job: hand over to the torch-linked worker.
  std::string worker = worker_path();  // checked above
  // The worker's OpenMP threads sleep between parallel regions instead of spinning (libgomp spins for a while by
  // default): a run sharing its cores with another run or a build is otherwise 20-200x slower per iteration
  // (docs/optim.md). libgomp reads this when the worker starts; the user's OMP_WAIT_POLICY or GOMP_SPINCOUNT wins.
  if (!std::getenv("OMP_WAIT_POLICY") && !std::getenv("GOMP_SPINCOUNT")) setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
  int fd = launch::memfd_with(in.encode());
  std::string fd_s = std::to_string(fd);
  std::vector<char*> argv = {const_cast<char*>(worker.c_str()), const_cast<char*>("--input-fd"), fd_s.data(), nullptr};
  std::cout.flush();
  std::cerr.flush();
  // A signal latched since this process started (main(), under megatron-run's spawner) goes on to the worker.
  if (in.train && in.args.exit_signal_handler) {
    if (util::exit_signal_installed() != static_cast<int>(in.args.exit_signal))
      util::install_exit_signal(static_cast<int>(in.args.exit_signal));
    util::pass_exit_signal_to_exec();  // and blocks the signal: one that comes now waits for the worker's latch
  }
  execv(worker.c_str(), argv.data());
  print_error(std::cerr, "cannot run " + worker + ": " + std::strerror(errno));
  return 2;
}

}  // namespace mr::app
