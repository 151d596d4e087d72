// megatron-run's launcher options (launch.h's LaunchOptions): torchrun's options in both spellings, their PET_<NAME>
// defaults, the values no job can have (usage errors, exit 2), the ones accepted but not acted on (named in a
// notice), and the SLURM one-task-per-node form. Launching itself is launch.cpp.
#include "launch.h"

#include <sched.h>
#include <unistd.h>

#include <cctype>
#include <cmath>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <algorithm>
#include <random>
#include <string>
#include <tuple>

#include "config/converters.h"
#include "launch/endpoint.h"
#include "launch/launch_env.h"
#include "launch/line_prefix.h"
#include "launch/torchrun_env.h"
#include "launch/torchrun_options.h"
#include "util/gpu_devices.h"
#include "util/log.h"
#include "util/rule_id.h"
#include "util/shell.h"
#include "util/text.h"

namespace mr::app {

namespace {

// "argument NAME: ", NAME the launcher option `flag` by every option string of it (option_name:
// "--max-restarts/--max_restarts"), as argparse begins a refusal of a value.
std::string argument(const std::string& flag) { return "argument " + option_name(flag) + ": "; }

// WORLD_SIZE in the launcher's environment without RANK: no job to join (launch::launch_info wants both), so not the
// world size of the workers megatron-run starts, which get their own, as torchrun's do (its agent sets every
// worker's WORLD_SIZE). Megatron reads WORLD_SIZE as its world size: a dry run validates for it.
std::optional<std::string> lone_world_size(const launch::EnvLookup& env) {
  if (env("RANK")) return std::nullopt;
  return env("WORLD_SIZE");
}

const Rule kWorldSizeEnvUnusedRule{
    "launch.world-size-env-unused", Rule::Level::Warning,
    "WORLD_SIZE in the launcher's environment without RANK: no job to join, so not the world size of the workers "
    "megatron-run starts (each gets its own, as under torchrun); the notice says what is validated instead.",
    __FILE__, __LINE__, kStageLaunch};

const Rule kSlurmTasksPerNodeRule{
    "launch.slurm-tasks-per-node", Rule::Level::Error,
    "Under srun with more tasks than nodes (SLURM_NTASKS above the node count) and --nproc-per-node: every task "
    "would be a launcher, each starting its own --nproc-per-node-worker job (or, with --nnodes, every one node 0 of "
    "one job that never forms). Refused before anything starts (exit 2), naming the two right forms: one launcher "
    "per node (srun --ntasks-per-node=1 with --nproc-per-node), or one rank per task (no --nproc-per-node).",
    __FILE__, __LINE__, kStageLaunch};

const Rule kC10dIgnoresRule{
    "launch.c10d-ignores-static-options", Rule::Level::Warning,
    "--node-rank, --master-addr or --master-port with --rdzv-backend c10d: not used, as torchrun ignores them "
    "there (the c10d rendezvous numbers the nodes as they arrive and chooses the workers' master); job templates "
    "pass them along, so they are named in a warning and the launch goes on.",
    __FILE__, __LINE__, kStageLaunch};

// A random UUID (version 4) as Python's str(uuid.uuid4()) writes it, "3f2c8a1e-...-...": --standalone's run id,
// as torchrun's run() draws it (review launch37 #7: it was the pid and the time in 16 hex digits).
std::string uuid4_text() {
  std::random_device random;  // /dev/urandom
  unsigned char b[16];
  for (size_t i = 0; i < sizeof b; i += 4) {
    const unsigned v = random();
    for (size_t j = 0; j < 4; ++j) b[i + j] = static_cast<unsigned char>(v >> (8 * j));
  }
  b[6] = static_cast<unsigned char>((b[6] & 0x0f) | 0x40);  // version 4
  b[8] = static_cast<unsigned char>((b[8] & 0x3f) | 0x80);  // the RFC 4122 variant
  char text[37];
  std::snprintf(text, sizeof text, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
                b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
  return text;
}

// The notice for it: [launch.world-size-env-unused], then what is validated instead.
std::string world_size_env_unused(const std::string& value, const std::string& instead) {
  return with_rule_id(kWorldSizeEnvUnusedRule.id, "WORLD_SIZE=") + abbreviate(value) +
         " is set without RANK: not used (no job to join without RANK; megatron-run starts --nproc-per-node "
         "workers, 1 by default, each with its own WORLD_SIZE, as torchrun does); " + instead;
}

// The options that shape the job megatron-run starts (torchrun's, in both spellings): a worker megatron-run
// starts is inside that job and must not see them. `true`: the option takes a value.
const std::pair<const char*, bool> kLaunchFlags[] = {
    {"--nproc-per-node", true}, {"--nproc_per_node", true}, {"--nnodes", true},         {"--node-rank", true},
    {"--node_rank", true},      {"--master-addr", true},    {"--master_addr", true},    {"--master-port", true},
    {"--master_port", true},    {"--standalone", false},    {"--max-restarts", true},   {"--max_restarts", true},
    {"--monitor-interval", true}, {"--monitor_interval", true}, {"--rdzv-backend", true}, {"--rdzv_backend", true},
    {"--rdzv-endpoint", true},  {"--rdzv_endpoint", true},  {"--rdzv-id", true},        {"--rdzv_id", true},
    {"--log-dir", true},        {"--log_dir", true},        {"--redirects", true},      {"--tee", true},
    {"--local-ranks-filter", true}, {"--local_ranks_filter", true}, {"--term-timeout", true},
    {"--launcher-port", true},  {"--join-timeout", true},   {"--rdzv-conf", true},      {"--rdzv_conf", true},
    {"--role", true},           {"--start-method", true},   {"--start_method", true},   {"--run-path", false},
    {"--run_path", false},      {"--shutdown-timeout", true}, {"--shutdown_timeout", true},
    {"--log-line-prefix-template", true}, {"--log_line_prefix_template", true},
    {"--duplicate-stdout-filters", true}, {"--duplicate_stdout_filters", true},
    {"--duplicate-stderr-filters", true}, {"--duplicate_stderr_filters", true},
    {"--virtual-local-rank", false}, {"--virtual_local_rank", false}, {"--local-addr", true}, {"--local_addr", true},
    {"--signals-to-handle", true}, {"--signals_to_handle", true}, {"--numa-binding", true}, {"--numa_binding", true},
    {"--event-log-handler", true}, {"--event_log_handler", true}, {"--logs-specs", true}, {"--logs_specs", true},
    {"--print-completion", true}, {"--print_completion", true}};

// --rdzv-endpoint HOST[:PORT], [IPV6][:PORT] or a bare IPv6 address (launch/endpoint.h); a malformed one is a
// usage error naming the option.
launch::Endpoint endpoint_of(const std::string& v) {
  try {
    return launch::parse_endpoint(v);
  } catch (const std::invalid_argument& e) {
    throw UsageError(argument("--rdzv-endpoint") + "'" + abbreviate(v) + "' is not HOST[:PORT] or [IPV6]:PORT: " + e.what(),
                     {"--rdzv-endpoint"});
  }
}

// The notice for the local ranks (in order) that the option `flag` gives and this node does not have (`nproc`
// workers: local ranks 0 to nproc - 1): "NAME: local rank 5, 7 is not on this node (2 workers, local ranks 0-1)",
// NAME the option by every option string of it (option_name: "-r/--redirects"); "" when every one is here.
// --local-ranks-filter's and -r/-t's per-rank form (each adds what it means for its option).
template <class Ranks>
std::string ranks_not_on_node(const std::string& flag, const Ranks& ranks, int nproc) {
  std::string missing;
  for (int r : ranks)
    if (r >= nproc) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
  if (missing.empty()) return missing;
  return option_name(flag) + ": local rank " + missing + " is not on this node (" + std::to_string(nproc) +
         " workers, local ranks 0-" + std::to_string(nproc - 1) + ")";
}

// Processors this process may run on (torchrun's "cpu": os.cpu_count()).
int cpu_count() {
  cpu_set_t set;
  return sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
}

// GPUs visible to the workers: CUDA_VISIBLE_DEVICES when set ("", "-1", NoDevFiles: none), else the NVIDIA
// device nodes (util/gpu_devices.h).
int visible_gpu_count() { return util::machine_gpu_devices().visible(); }

// torchrun's --nproc-per-node: an int, or cpu / gpu / auto (GPUs when there are any, else processors).
int parse_nproc(const std::string& v) {
  if (v == "cpu") return cpu_count();
  if (v == "gpu" || v == "auto") {
    int g = visible_gpu_count();
    if (g > 0) return g;
    if (v == "gpu") throw UsageError(argument("--nproc-per-node") + "gpu, but no GPU is visible", {"--nproc-per-node"});
    return cpu_count();
  }
  try {
    size_t used = 0;
    long long n = std::stoll(v, &used);
    if (used != v.size() || n > 1 << 30) throw std::invalid_argument(v);
    return static_cast<int>(n);
  } catch (const std::exception&) {
    throw UsageError(argument("--nproc-per-node") + "invalid value '" + abbreviate(v) + "' (an integer, cpu, gpu or auto)",
                     {"--nproc-per-node"});
  }
}

// The closed sets of our launcher options, as their descriptions name them (shell completion offers them) and
// their invalid-choice errors list them.
constexpr const char* kRdzvBackends = "static|c10d";
constexpr const char* kStartMethods = "spawn|fork|forkserver";
constexpr const char* kNumaModes = "node|socket|exclusive|core-complex";
// torchrun's --logs-specs NAME loads the entry point NAME of the Python group torchrun.logs_specs; torch registers
// only `default` (DefaultLogsSpecs, torchrun's layout without the option), the one megatron-run has.
constexpr const char* kLogsSpecs = "default";

void check_logs_specs(const std::string& v) {
  if (v == kLogsSpecs) return;
  throw UsageError(argument("--logs-specs") + "'" + abbreviate(v) + "' is not a LogsSpecs megatron-run has: torchrun loads it from "
                       "the Python entry points of the group torchrun.logs_specs, which megatron-run does not read; "
                       "without them there is only torch's own, 'default' (DefaultLogsSpecs: the layout under "
                       "--log-dir megatron-run writes anyway). Leave it out, give default, or launch under torchrun",
                   {"--logs-specs"});
}
std::string described(const char* choices, const char* what) { return std::string(choices) + ": " + what; }

// torchrun's --print-completion SHELL: megatron-run's own completion script (every option and Megatron flag, as
// `megatron-run schema --format SHELL-completion` prints it) for the shells it has; torchrun's tcsh is not one.
constexpr const char* kCompletionShells = "bash|zsh|fish";
std::string completion_shell(const std::string& v) {
  if (v == "bash" || v == "zsh" || v == "fish") return v;
  if (v == "tcsh")
    throw UsageError(argument("--print-completion") + "megatron-run has no tcsh completion script (torchrun's shtab "
                     "writes one); it has bash, zsh and fish (megatron-run schema --format bash-completion)",
                     {"--print-completion"});
  throw invalid_choice("--print-completion", v, kCompletionShells);
}

// "local-rank" -> "local_rank": torchrun accepts both spellings.
std::string underscored(std::string s) {
  for (char& c : s)
    if (c == '-') c = '_';
  return s;
}

// An address given for this machine (`flag`) that is not one of its addresses: refused at start, exit 2 (rule
// input.address-not-this-machine), since whoever tries it (the ranks, other nodes' workers) would wait until a
// timeout. `why_here` says why the address must be this machine's.
void refuse_elsewhere(const std::string& flag, const std::string& addr, const std::string& why_here) {
  const std::string why = launch::not_this_machine(addr);
  if (why.empty()) return;
  throw UsageError(argument(flag) + "'" + abbreviate(addr) + "' " + why + "; " + why_here, {flag}, {},
                   "input.address-not-this-machine");
}

// A duration option in seconds (`flag`): at most 86400, and 0 (where `zero_ok`) or above 0. The launcher keeps
// its durations in milliseconds (util/text.h's seconds_text prints them so), so a value above 0 below a millisecond,
// which would be kept and printed as 0 s, is refused too. inf ('1e400', Python's float() of it) is out of range.
void check_seconds(const std::string& flag, double v, bool zero_ok) {
  const std::string range = zero_ok ? "from 0 to 86400" : "above 0, at most 86400";
  if (!(zero_ok ? v >= 0 : v > 0) || !(v <= 86400))
    throw UsageError(argument(flag) + "must be a number of seconds " + range + " (got " + format_number(v) + ")",
                     {flag});
  if (v > 0 && v < 0.001)
    throw UsageError(argument(flag) + format_number(v) + " s is below a millisecond, the resolution of "
                         "megatron-run's timers: give " + (zero_ok ? "0 or " : "") + "at least 0.001",
                     {flag});
}

// The job megatron-run is inside (launch::launch_info: torchrun's variables, or a SLURM task); a malformed one is no
// job here, and its refusal is kept (the launch refuses it, a dry run says so: cmd_run.cpp, or --nproc-per-node
// starts its own workers).
LaunchOptions::EnclosingJob enclosing_job(const launch::EnvLookup& env) {
  LaunchOptions::EnclosingJob job;
  try {
    job.info = launch::launch_info(env);
  } catch (const launch::LaunchError& e) {
    job.malformed = e.what();
  }
  return job;
}

// A SLURM variable is read strictly, and refused (launch.env-malformed, exit 2) before anything uses it.
UsageError env_malformed(const std::string& what) {
  launch::kEnvMalformedRule.record_hit();
  return UsageError(what, {}, "", launch::kEnvMalformedRule.id);
}
std::optional<int> strict_slurm_int(const launch::EnvLookup& env, const std::string& name, int min) {
  try {
    return launch::slurm_int(env, name, min);
  } catch (const launch::LaunchError& e) {
    throw env_malformed(e.what());
  }
}

// The options that act only where megatron-run starts the workers (refused inside another launcher's job
// without --nproc-per-node: launch.cpp), from the command line, also where the PET_ defaults are not read
// (inside a torchrun job, whose PET_ variables are its own launcher's). The rendezvous options too: a job that
// exists already has its address, port, node count and run id (review user39 #1, #2: --master-port and
// --nnodes were ignored or started a nested job whose every rank waited to be node 0).
// --virtual-local-rank and --event-log-handler too: the workers' LOCAL_RANK and CUDA_VISIBLE_DEVICES, the agent's
// event records (review diff39 #2: accepted and ignored inside a job).
// One name per option: every spelling of it is read from the run command's description (option_strings:
// --log-dir and --log_dir, --redirects), in that order. A test checks that each is a launcher option
// (tests/launch/cmd_run_test.cpp, [in-job]).
const char* const kSpawnerOnly[] = {
    "max-restarts", "log-dir", "redirects", "tee", "local-ranks-filter", "term-timeout", "shutdown-timeout", "role",
    "log-line-prefix-template", "duplicate-stdout-filters", "duplicate-stderr-filters", "local-addr",
    "signals-to-handle", "numa-binding", "logs-specs", "virtual-local-rank", "event-log-handler", "nnodes",
    "node-rank", "master-addr", "master-port", "standalone", "rdzv-backend", "rdzv-endpoint", "rdzv-conf", "rdzv-id",
    "launcher-port", "join-timeout"};

}  // namespace

std::optional<std::string> print_completion_requested(const std::vector<std::string>& words) {
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string& w = words[i];
    if (w == "--help" || w == "-h") return std::nullopt;  // met first: the help
    for (const std::string flag : {"--print-completion", "--print_completion"}) {
      if (w == flag) {
        if (i + 1 == words.size())
          throw UsageError(argument("--print-completion") + "expected one argument", {"--print-completion"});
        return completion_shell(words[i + 1]);
      }
      if (w.rfind(flag + "=", 0) == 0) return completion_shell(w.substr(flag.size() + 1));
    }
  }
  return std::nullopt;
}

void LaunchOptions::add_to(po::options_description& desc) {
  auto nproc = [this](const std::string& v) { nproc_per_node = parse_nproc(v), nproc_given = true; };
  auto endpoint = [this](const std::string& v) { rdzv_endpoint = v; };
  auto set_run_path = [this](bool on) { run_path = run_path || on; };  // two spellings, one switch
  auto monitor = [this](PyFloat v) { monitor_interval = v.value; };
  desc.add_options()
      ("nproc-per-node", po::value<std::string>()->notifier(nproc), "workers to start on this node (int|cpu|gpu|auto)")
      ("nproc_per_node", po::value<std::string>()->notifier(nproc), "torchrun's spelling of --nproc-per-node")
      ("nnodes", po::value<std::string>()->notifier([this](const std::string& v) { set_nnodes(launch::parse_nnodes(v, "--nnodes")); }),
       "nodes in the job (N, or MIN:MAX: elastic, with c10d)")
      ("node-rank", po::value(&node_rank), "this node's index")
      ("node_rank", po::value(&node_rank), "torchrun's spelling of --node-rank")
      ("master-addr", po::value(&master_addr), "rendezvous host (rank 0's node)")
      ("master_addr", po::value(&master_addr), "torchrun's spelling of --master-addr")
      ("master-port", po::value(&master_port), "rendezvous port")
      ("master_port", po::value(&master_port), "torchrun's spelling of --master-port")
      ("standalone", po::bool_switch(&standalone), "one node, a free port, a fresh run id (torchrun's --standalone)")
      ("max-restarts", po::value(&max_restarts), "restarts of the local worker group after a failure (default 0)")
      ("max_restarts", po::value(&max_restarts), "torchrun's spelling of --max-restarts")
      ("monitor-interval", po::value<PyFloat>()->notifier(monitor), "torchrun's polling period; megatron-run reacts at once")
      ("monitor_interval", po::value<PyFloat>()->notifier(monitor), "torchrun's spelling of --monitor-interval")
      ("rdzv-backend", po::value(&rdzv_backend), described(kRdzvBackends, "rendezvous backend (c10d: node ranks in order of arrival)").c_str())
      ("rdzv_backend", po::value(&rdzv_backend), described(kRdzvBackends, "torchrun's spelling of --rdzv-backend").c_str())
      ("rdzv-endpoint", po::value<std::string>()->notifier(endpoint),
       "HOST[:PORT] or [IPV6]:PORT of the rendezvous (static: the master)")
      ("rdzv_endpoint", po::value<std::string>()->notifier(endpoint), "torchrun's spelling of --rdzv-endpoint")
      ("role", po::value(&role), "the workers' role (ROLE_NAME)")
      ("start-method", po::value(&start_method), described(kStartMethods, "torchrun's Python start method; not used").c_str())
      ("start_method", po::value(&start_method), described(kStartMethods, "torchrun's spelling of --start-method").c_str())
      ("run-path", po::bool_switch()->notifier(set_run_path), "torchrun's runpy mode; not used (the script runs as `python SCRIPT`)")
      ("run_path", po::bool_switch()->notifier(set_run_path), "torchrun's spelling of --run-path")
      ("shutdown-timeout", po::value<PyFloat>()->notifier([this](PyFloat v) { shutdown_timeout = v.value; }),
       "torchrun's name for --term-timeout")
      ("shutdown_timeout", po::value<PyFloat>()->notifier([this](PyFloat v) { shutdown_timeout = v.value; }),
       "torchrun's spelling of --shutdown-timeout")
      ("rdzv-conf", po::value(&rdzv_conf), "rendezvous settings KEY=VALUE,... (join_timeout, is_host)")
      ("rdzv_conf", po::value(&rdzv_conf), "torchrun's spelling of --rdzv-conf")
      ("rdzv-id", po::value(&run_id), "the job's run id (TORCHELASTIC_RUN_ID)")
      ("rdzv_id", po::value(&run_id), "torchrun's spelling of --rdzv-id")
      ("log-dir", po::value(&log_dir), "per-rank logs under DIR/<run id>_<unique>/attempt_<n>/<local rank>/")
      ("log_dir", po::value(&log_dir), "torchrun's spelling of --log-dir")
      ("redirects", po::value(&redirects), "0|1|2|3: -r: streams to log files only (or LOCAL_RANK:0-3,...)")
      ("tee", po::value(&tee), "0|1|2|3: -t: streams to log files and the console (or LOCAL_RANK:0-3,...)")
      ("local-ranks-filter", po::value(&local_ranks_filter), "local ranks whose output reaches the console (0,1,...)")
      ("local_ranks_filter", po::value(&local_ranks_filter), "torchrun's spelling of --local-ranks-filter")
      ("term-timeout", po::value<PyFloat>()->notifier([this](PyFloat v) { term_timeout = v.value; }),
       "seconds from SIGTERM to SIGKILL when stopping the workers (default 30, as torchrun)")
      ("launcher-port", po::value(&launcher_port),
       "static multi-node: port of the launchers' store on node 0 (default --master-port + 1)")
      ("join-timeout", po::value<PyFloat>()->notifier([this](PyFloat v) { join_timeout = v.value; }), "seconds for every node to join a multi-node job (default 600)")
      ("log-line-prefix-template", po::value(&log_line_prefix_template),
       "console line prefix with ${role_name} ${rank} ${local_rank} ${hostname} (default [rank R])")
      ("log_line_prefix_template", po::value(&log_line_prefix_template), "torchrun's spelling of --log-line-prefix-template")
      ("duplicate-stdout-filters", po::value<std::string>()->notifier([this](const std::string& v) { duplicate_stdout_filters = v; }),
       "lines of tee'd stdout containing any of A,B,... also go to <attempt dir>/filtered_stdout.log")
      ("duplicate_stdout_filters", po::value<std::string>()->notifier([this](const std::string& v) { duplicate_stdout_filters = v; }),
       "torchrun's spelling of --duplicate-stdout-filters")
      ("duplicate-stderr-filters", po::value<std::string>()->notifier([this](const std::string& v) { duplicate_stderr_filters = v; }),
       "lines of tee'd stderr containing any of A,B,... also go to <attempt dir>/filtered_stderr.log")
      ("duplicate_stderr_filters", po::value<std::string>()->notifier([this](const std::string& v) { duplicate_stderr_filters = v; }),
       "torchrun's spelling of --duplicate-stderr-filters")
      ("virtual-local-rank", po::bool_switch()->notifier([this](bool on) { virtual_local_rank = virtual_local_rank || on; }),
       "each worker: LOCAL_RANK=0 and only its own GPU visible")
      ("virtual_local_rank", po::bool_switch()->notifier([this](bool on) { virtual_local_rank = virtual_local_rank || on; }),
       "torchrun's spelling of --virtual-local-rank")
      ("event-log-handler", po::value(&event_log_handler), "null|dynamic_rendezvous|console: torchrun's event log handler")
      ("event_log_handler", po::value(&event_log_handler), "null|dynamic_rendezvous|console: torchrun's spelling of --event-log-handler")
      ("local-addr", po::value(&local_addr), "this node's address for the workers' MASTER_ADDR (c10d node 0, one node)")
      ("local_addr", po::value(&local_addr), "torchrun's spelling of --local-addr")
      ("signals-to-handle", po::value<std::string>()->notifier([this](const std::string& v) { signals_to_handle = v; }),
       "signals that stop the workers, passed on to them (e.g. SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1)")
      ("signals_to_handle", po::value<std::string>()->notifier([this](const std::string& v) { signals_to_handle = v; }),
       "torchrun's spelling of --signals-to-handle")
      ("numa-binding", po::value<std::string>()->notifier([this](const std::string& v) { set_numa_binding(v); }),
       described(kNumaModes, "bind each worker to CPUs near its GPU (torch/numa/binding.py)").c_str())
      ("numa_binding", po::value<std::string>()->notifier([this](const std::string& v) { set_numa_binding(v); }),
       described(kNumaModes, "torchrun's spelling of --numa-binding").c_str())
      ("logs-specs", po::value<std::string>()->notifier(check_logs_specs),
       described(kLogsSpecs, "torchrun's LogsSpecs entry point (torch's own: the --log-dir layout)").c_str())
      ("logs_specs", po::value<std::string>()->notifier(check_logs_specs),
       described(kLogsSpecs, "torchrun's spelling of --logs-specs").c_str())
      ("bring-up-only", po::bool_switch(&bring_up_only), "stop after the process groups' self-check")
      ("heartbeat-timeout", po::value<PyFloat>()->notifier([this](PyFloat v) { heartbeat_timeout = v.value; }),
       "seconds without a rank's heartbeat before the job fails (default 30)");
  for (const char* spelling : {"print-completion", "print_completion"})
    desc.add_options()(spelling, po::value<std::string>()->notifier([this](const std::string& v) {
      completion_shell(v);  // print_completion_requested acted before the parse; checked all the same
    }), described(kCompletionShells, "print megatron-run's completion script for the shell and exit").c_str());
}

void LaunchOptions::set_numa_binding(const std::string& v) {
  numa_binding = launch::numa_mode_from_string(v);
  if (!numa_binding)
    throw invalid_choice("--numa-binding", v, kNumaModes);
}

// PET_<NAME> as an integer the way torchrun's check_env reads it (Python's int(): blanks around, a sign, digits).
std::optional<int> pet_int(const launch::EnvLookup& env, const char* name, const char* flag) {
  return env_int(env, std::string("PET_") + name, flag);
}

std::optional<int> env_int(const launch::EnvLookup& env, const std::string& var, const char* flag) {
  const std::optional<std::string> v = env(var);
  if (!v) return std::nullopt;
  // Python's int(), as torchrun's type=int options read their PET_ default and torch's LaunchConfig reads
  // TORCH_ELASTIC_SHUTDOWN_TIMEOUT: blanks around it, one sign, single underscores between digits.
  auto refused = [&](bool out_of_range) {
    return UsageError(var + "='" + abbreviate(*v) + "' (the default of " + flag + ") is not an integer" +
                          (out_of_range ? " in range" : ""),
                      {flag});
  };
  int64_t n = 0;
  try {
    n = parse_py_int(*v);
  } catch (const ConvError& e) {
    throw refused(std::string_view(e.what()).find("out of range") != std::string_view::npos);
  }
  if (n < INT_MIN || n > INT_MAX) throw refused(true);
  return static_cast<int>(n);
}

bool pet_defaults_of_enclosing_launcher(const launch::EnvLookup& env) {
  return launch::inside_enclosing_job(env);
}

// torchrun reads a default for each of its options from PET_<NAME> (e.g. PET_NPROC_PER_NODE).
void LaunchOptions::apply_pet_defaults(const po::variables_map& vm) {
  note_spawner_only_given(vm);
  auto env = launch::process_env();
  if (pet_defaults_of_enclosing_launcher(env)) return;
  auto given = [&](const char* dash, const char* under) { return vm.count(dash) || vm.count(under); };
  auto pet = [&](const char* name) { return env(std::string("PET_") + name); };
  if (!given("nproc-per-node", "nproc_per_node"))
    if (auto v = pet("NPROC_PER_NODE")) {
      pet_sources["--nproc-per-node"] = "PET_NPROC_PER_NODE='" + abbreviate(*v) + "'";
      nproc_per_node = parse_nproc(*v), nproc_given = true;
    }
  // The variable a value came from, for a refusal of it (pet_source_note): PET_X='v'.
  auto record = [&](const char* flag, const std::string& var) {
    if (auto v = env(var)) pet_sources[flag] = var + "='" + abbreviate(*v) + "'";
  };
  // PET_<NAME> as torchrun's int (an integer as Python's int() reads it), recorded as the source of `flag`.
  auto int_of = [&](const char* name, int& out, const char* flag) {
    if (auto v = pet_int(env, name, flag)) out = *v, record(flag, std::string("PET_") + name);
  };
  // A text option not on the command line (either spelling) takes PET_<NAME> when that is set; true if it did.
  auto take = [&](const char* dash, const char* name, auto& field) {
    if (given(dash, underscored(dash).c_str())) return false;
    std::optional<std::string> v = pet(name);
    if (v) field = *v, pet_sources[std::string("--") + dash] = "PET_" + std::string(name) + "='" + abbreviate(*v) + "'";
    return v.has_value();
  };
  nnodes_given = vm.count("nnodes") > 0;
  node_rank_given = given("node-rank", "node_rank");
  master_addr_given = given("master-addr", "master_addr");
  master_port_given = given("master-port", "master_port");
  if (!vm.count("nnodes"))
    if (auto v = pet("NNODES")) {
      set_nnodes(launch::parse_nnodes(*v, "PET_NNODES (the default of --nnodes)"));
      record("--nnodes", "PET_NNODES");
    }
  join_timeout_given = vm.count("join-timeout") > 0;
  term_timeout_given = vm.count("term-timeout") > 0;
  monitor_interval_given = given("monitor-interval", "monitor_interval");
  // PET_<NAME> of a float option (--monitor-interval, --shutdown-timeout): Python's float(), as torchrun's env action
  // reads a default with its option's type; the range is the option's own check (apply_worker_options).
  auto float_of = [&](const char* name, const char* flag) -> std::optional<double> {
    const std::optional<std::string> v = pet(name);
    if (!v) return std::nullopt;
    try {
      const double d = parse_py_float(*v);
      record(flag, std::string("PET_") + name);
      return d;
    } catch (const ConvError&) {
      throw UsageError("PET_" + std::string(name) + "='" + abbreviate(*v) + "' (the default of " + flag +
                           ") is not a number",
                       {flag});
    }
  };
  // torchrun's --monitor-interval has PET_MONITOR_INTERVAL as its default: checked and named as not used, as the
  // option is (apply_worker_options).
  if (!monitor_interval_given)
    if (std::optional<double> d = float_of("MONITOR_INTERVAL", "--monitor-interval"))
      monitor_interval = *d, monitor_interval_given = true;
  take("rdzv-conf", "RDZV_CONF", rdzv_conf);
  take("role", "ROLE", role);
  take("start-method", "START_METHOD", start_method);
  if (!given("shutdown-timeout", "shutdown_timeout") && !vm.count("term-timeout")) {  // --term-timeout wins
    if (std::optional<double> t = float_of("SHUTDOWN_TIMEOUT", "--shutdown-timeout")) {
      shutdown_timeout = *t;
    } else if (std::optional<int> e = env_int(env, "TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "--shutdown-timeout")) {
      // torchrun 2.x's default when --shutdown-timeout is not given (launcher/api.py): a cluster that lets Megatron's
      // --exit-signal-handler save on preemption raises it. A negative one is refused with the others
      // (apply_worker_options), where torchrun SIGKILLs at once (docs/launch.md).
      shutdown_timeout = *e;
      record("--shutdown-timeout", "TORCH_ELASTIC_SHUTDOWN_TIMEOUT");
    }
  }
  // torchrun reads no PET_LOGS_SPECS (its --logs-specs has no environment default): another name than its default
  // is named as not read, not refused.
  if (auto v = pet("LOGS_SPECS"); v && *v != kLogsSpecs)
    notices.push_back("PET_LOGS_SPECS='" + abbreviate(*v) + "' is set: not read (torchrun's --logs-specs takes no PET_ default; "
                      "the logs have torch's default LogsSpecs, the --log-dir layout)");
  take("log-line-prefix-template", "LOG_LINE_PREFIX_TEMPLATE", log_line_prefix_template);
  if (log_line_prefix_template.empty())  // torchrun: the option, else this variable
    if (auto v = env("TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE")) log_line_prefix_template = *v;
  take("duplicate-stdout-filters", "DUPLICATE_STDOUT_FILTERS", duplicate_stdout_filters);
  take("duplicate-stderr-filters", "DUPLICATE_STDERR_FILTERS", duplicate_stderr_filters);
  take("event-log-handler", "EVENT_LOG_HANDLER", event_log_handler);
  take("local-addr", "LOCAL_ADDR", local_addr);
  signals_from_pet = take("signals-to-handle", "SIGNALS_TO_HANDLE", signals_to_handle);
  // torchrun's check_env switches: PET_<NAME>=1 (an integer, as Python's int() reads it; non-zero: on).
  if (!virtual_local_rank) {
    int on = 0;
    int_of("VIRTUAL_LOCAL_RANK", on, "--virtual-local-rank");
    virtual_local_rank = on != 0;
  }
  if (!standalone) {
    int on = 0;
    int_of("STANDALONE", on, "--standalone");
    standalone = on != 0;
  }
  if (!given("node-rank", "node_rank")) int_of("NODE_RANK", node_rank, "--node-rank");
  nnodes_given = nnodes_given || pet("NNODES");
  node_rank_given = node_rank_given || pet("NODE_RANK");
  master_addr_given = master_addr_given || pet("MASTER_ADDR");
  master_port_given = master_port_given || pet("MASTER_PORT");
  if (!given("master-port", "master_port")) int_of("MASTER_PORT", master_port, "--master-port");
  if (!given("max-restarts", "max_restarts")) int_of("MAX_RESTARTS", max_restarts, "--max-restarts");
  take("master-addr", "MASTER_ADDR", master_addr);
  take("log-dir", "LOG_DIR", log_dir);
  take("redirects", "REDIRECTS", redirects);
  take("tee", "TEE", tee);
  take("local-ranks-filter", "LOCAL_RANKS_FILTER", local_ranks_filter);
  take("rdzv-id", "RDZV_ID", run_id);
  take("rdzv-backend", "RDZV_BACKEND", rdzv_backend);
  take("rdzv-endpoint", "RDZV_ENDPOINT", rdzv_endpoint);
  note_spawner_only_pet();
}

// The spawner-only options (kSpawnerOnly) given on the command line, each in the spelling given (-r and -t are
// --redirects and --tee in `vm`): refused inside another launcher's job (launch.cpp's inside_job_refusal).
void LaunchOptions::note_spawner_only_given(const po::variables_map& vm) {
  for (const char* f : kSpawnerOnly)
    for (const std::string& spelling : option_strings(std::string("--") + f, &command_options()))
      if (spelling.rfind("--", 0) == 0 && vm.count(spelling.substr(2)) && !vm[spelling.substr(2)].defaulted())
        spawner_only_given.push_back(spelling);
}

// The PET_ defaults of the options that act only where megatron-run starts the workers: refused inside a job as the
// options are (launch.cpp); PET_NNODES there started a nested wait for other nodes (review diff39 #1). A switch's
// PET_ default only where it turns the switch on; TORCH_ELASTIC_SHUTDOWN_TIMEOUT (a cluster's setting, not a PET_
// default) is not counted.
void LaunchOptions::note_spawner_only_pet() {
  for (const char* f : kSpawnerOnly) {
    const std::string flag = std::string("--") + f;
    const auto it = pet_sources.find(flag);
    if (it == pet_sources.end() || it->second.rfind("PET_", 0) != 0) continue;
    if ((flag == "--standalone" && !standalone) || (flag == "--virtual-local-rank" && !virtual_local_rank)) continue;
    spawner_only_pet.push_back(flag);
  }
}

std::string LaunchOptions::pet_source_note(const std::string& message, const std::vector<std::string>& flags) const {
  if (message.find("PET_") != std::string::npos) return {};  // named already
  std::string note;
  for (const std::string& f : flags) {
    std::string dashed = f;
    std::replace(dashed.begin(), dashed.end(), '_', '-');
    const auto it = pet_sources.find(dashed);
    if (it == pet_sources.end() || message.find(it->second.substr(0, it->second.find('='))) != std::string::npos ||
        note.find(dashed + " was not given") != std::string::npos)
      continue;
    note += (note.empty() ? " (" : "; ") + dashed + " was not given: the value is " + it->second +
            ", its default from the environment";
  }
  return note.empty() ? note : note + ")";
}

// The options that shape only the workers this node starts (no other node needs them): usage errors for bad values,
// the notices for what is not acted on.
void LaunchOptions::apply_worker_options() {
  if (max_restarts < 0)
    throw UsageError(argument("--max-restarts") + "must be at least 0 (got " + std::to_string(max_restarts) + ")",
                     {"--max-restarts"});
  if (shutdown_timeout) {  // torchrun's name for it
    // torchrun's LaunchConfig refuses a negative one (ValueError); -1 is no "not given" here either.
    check_seconds("--shutdown-timeout", *shutdown_timeout, /*zero_ok=*/true);
    if (term_timeout_given && *shutdown_timeout != term_timeout)
      throw UsageError(argument("--shutdown-timeout") + format_number(*shutdown_timeout) + " and --term-timeout " +
                           format_number(term_timeout) + " disagree; give one of them",
                       {"--shutdown-timeout", "--term-timeout"});
    term_timeout = *shutdown_timeout;
  }
  if (!start_method.empty()) {
    if (start_method != "spawn" && start_method != "fork" && start_method != "forkserver")
      throw invalid_choice("--start-method", start_method, kStartMethods);
    notices.push_back("--start-method " + start_method +
                      ": not used (megatron-run starts every worker as a fresh process, fork and exec)");
  }
  if (monitor_interval_given) {
    // torchrun's WorkerSpec asserts it above 0: its launcher fails with 0 or less; and with inf ('1e400') its agent
    // fails at its first time.sleep(monitor_interval) (OverflowError).
    if (!(monitor_interval > 0) || !std::isfinite(monitor_interval))
      throw UsageError(argument("--monitor-interval") + "must be a finite number of seconds above 0 (got " +
                           format_number(monitor_interval) + "), as torchrun requires",
                       {"--monitor-interval"});
    // A duration's own floor, as the others have (check_seconds): below a millisecond is no interval anything polls at.
    if (monitor_interval < 0.001)
      throw UsageError(argument("--monitor-interval") + format_number(monitor_interval) +
                           " s is below a millisecond, the resolution of megatron-run's timers: give at least 0.001",
                       {"--monitor-interval"});
    const auto pet_it = pet_sources.find("--monitor-interval");
    notices.push_back((pet_it != pet_sources.end() ? pet_it->second + " (the default of --monitor-interval)"
                                                   : "--monitor-interval " + format_number(monitor_interval)) +
                      ": not used (megatron-run reacts to a worker's exit at once; torchrun polls the workers this "
                      "often)");
  }
  if (run_path)
    notices.push_back("--run-path: not used (megatron-run runs the script as `python SCRIPT ARGS` in each worker)");
  if (role.empty()) throw UsageError(argument("--role") + "the role name is empty", {"--role"});
  if (heartbeat_timeout) check_seconds("--heartbeat-timeout", *heartbeat_timeout, /*zero_ok=*/false);
  check_seconds("--term-timeout", term_timeout, /*zero_ok=*/true);
  apply_log_options();
  // torchrun's event handlers: "null" (its default) and "dynamic_rendezvous" record nothing here; "console" prints
  // the agent's record when the launch ends (launch/event_log.h).
  if (event_log_handler != "console" && event_log_handler != "null" && event_log_handler != "dynamic_rendezvous")
    throw UsageError(argument("--event-log-handler") + "unknown handler '" + abbreviate(event_log_handler) +
                         "' (torchrun's are console, dynamic_rendezvous and null)",
                     {"--event-log-handler"});
  if (signals_to_handle) {
    handled_signals = launch::parse_signals_to_handle(
        *signals_to_handle, signals_from_pet ? "PET_SIGNALS_TO_HANDLE (the default of --signals-to-handle)"
                                            : option_name("--signals-to-handle"));
  }
}

// --log-dir, -r/--redirects, -t/--tee, --local-ranks-filter (parsed into `logs`; local ranks this node does not have
// named), --log-line-prefix-template's unknown macros, --duplicate-stdout/stderr-filters (named where nothing is
// tee'd).
void LaunchOptions::apply_log_options() {
  logs.log_dir = log_dir;
  logs.log_dir_name = option_name("--log-dir");
  try {
    logs.redirects = launch::StdSpec::parse(redirects);
  } catch (const std::invalid_argument& e) {
    throw UsageError(argument("--redirects") + e.what(), {"--redirects"});
  }
  try {
    logs.tee = launch::StdSpec::parse(tee);
  } catch (const std::invalid_argument& e) {
    throw UsageError(argument("--tee") + e.what(), {"--tee"});
  }
  try {
    logs.local_ranks_filter = local_ranks_filter.empty() ? std::set<int>{} : launch::parse_local_ranks(local_ranks_filter);
  } catch (const std::invalid_argument& e) {
    throw UsageError(argument("--local-ranks-filter") + e.what(), {"--local-ranks-filter"});
  }
  if (nproc_per_node > 0 && !logs.local_ranks_filter.empty()) {  // a local rank this node does not have
    const std::string missing = ranks_not_on_node("--local-ranks-filter", logs.local_ranks_filter, nproc_per_node);
    if (!missing.empty())
      notices.push_back(missing + (*logs.local_ranks_filter.begin() >= nproc_per_node
                                       ? ": no worker's output reaches the console"
                                       : ""));
  }
  // -r/-t's per-rank form naming a local rank this node does not have: named as --local-ranks-filter's is (torchrun's
  // to_map ignores it silently; review user39 #9).
  for (auto [flag, spec] : {std::pair<const char*, const launch::StdSpec*>{"--redirects", &logs.redirects},
                            {"--tee", &logs.tee}}) {
    if (nproc_per_node <= 0 || !spec->per_rank) continue;
    std::vector<int> ranks;
    for (const auto& [r, mode] : spec->by_rank) ranks.push_back(r);
    const std::string missing = ranks_not_on_node(flag, ranks, nproc_per_node);
    if (!missing.empty()) notices.push_back(missing + ": its setting does nothing");
  }
  for (const std::string& m : launch::unknown_prefix_macros(log_line_prefix_template))
    notices.push_back("--log-line-prefix-template: " + m + " is not one of ${role_name}, ${rank}, ${local_rank}, "
                      "${hostname}; it stays as written (as in torchrun)");
  for (auto [flag, value, filters, bit] :
       {std::tuple{"--duplicate-stdout-filters", &duplicate_stdout_filters, &logs.duplicate_stdout_filters, launch::kStdOut},
        std::tuple{"--duplicate-stderr-filters", &duplicate_stderr_filters, &logs.duplicate_stderr_filters, launch::kStdErr}}) {
    if (!*value) continue;
    *filters = launch::parse_filter_list(**value);
    bool teed = false;
    for (int r = 0; r < std::max(1, nproc_per_node); ++r) teed = teed || (logs.tee.of(r) & bit);
    if (!teed)
      notices.push_back(std::string(flag) + ": duplicates lines of tee'd streams only, and no " +
                        (bit == launch::kStdOut ? "stdout" : "stderr") + " is tee'd (-t/--tee " +
                        (bit == launch::kStdOut ? "1" : "2") + " or 3): nothing is duplicated");
  }
}

// apply()'s steps, in its order. Launcher options are ours, not Megatron's: a value no job can have is a usage error
// (exit 2), dry run or not. First what the rendezvous needs (rendezvous_known after it): a bad value of a later,
// worker-only option on one node of a multi-node launch can then be told to the other nodes (cmd_run), which would
// otherwise wait for it.

// --rdzv-backend, and --nnodes MIN:MAX with it. torchrun's other backends (its etcd ones) are named as such: a real
// backend, one megatron-run does not have.
void LaunchOptions::check_rdzv_backend() const {
  if (rdzv_backend == "etcd" || rdzv_backend == "etcd-v2")
    throw UsageError(argument("--rdzv-backend") + rdzv_backend + " is a torchrun rendezvous backend that megatron-run "
                         "does not implement (it has static and c10d); use --rdzv-backend c10d --rdzv-endpoint "
                         "HOST[:PORT], or launch under torchrun",
                     {"--rdzv-backend"});
  if (rdzv_backend != "static" && rdzv_backend != "c10d")
    throw invalid_choice("--rdzv-backend", rdzv_backend, kRdzvBackends);  // the two megatron-run has
  if (elastic() && rdzv_backend != "c10d")
    throw UsageError(argument("--nnodes") + "an elastic job (" + std::to_string(nnodes_min) + ":" + std::to_string(nnodes) +
                         ") numbers its nodes as they arrive: it needs --rdzv-backend c10d --rdzv-endpoint HOST[:PORT]",
                     {"--nnodes", "--rdzv-backend"});
  if (elastic() && nnodes - nnodes_min >= 4096)
    throw UsageError(argument("--nnodes") + "an elastic range of " + std::to_string(nnodes - nnodes_min + 1) +
                         " node counts (" + std::to_string(nnodes_min) + ":" + std::to_string(nnodes) +
                         "); megatron-run checks the config for each, and takes at most 4096",
                     {"--nnodes"});
}

// --rdzv-conf (join_timeout, last_call_timeout, is_host; the others named), --join-timeout and --launcher-port.
void LaunchOptions::apply_rdzv_conf() {
  const launch::RdzvConf conf = launch::parse_rdzv_conf(rdzv_conf, rdzv_backend, elastic(), option_name("--rdzv-conf"));
  if (conf.last_call_timeout_s) last_call_timeout = *conf.last_call_timeout_s;
  if (conf.join_timeout_s) {
    if (join_timeout_given && *conf.join_timeout_s != join_timeout)
      throw UsageError(argument("--rdzv-conf") + "join_timeout=" + format_number(*conf.join_timeout_s) +
                           " and --join-timeout " + format_number(join_timeout) + " disagree; give one of them",
                       {"--rdzv-conf", "--join-timeout"});
    join_timeout = *conf.join_timeout_s;
    if (!join_timeout_given) join_timeout_flag = "--rdzv-conf join_timeout";  // the messages name what was given
  }
  if (conf.is_host) rdzv_is_host = conf.is_host;
  notices.insert(notices.end(), conf.notices.begin(), conf.notices.end());
  check_seconds("--join-timeout", join_timeout, /*zero_ok=*/false);
  if (launcher_port < 0 || launcher_port > 65535)
    throw UsageError(argument("--launcher-port") + "must be a TCP port, 1 to 65535 (got " + std::to_string(launcher_port) + ")",
                     {"--launcher-port"});
}

// --rdzv-endpoint: under c10d the launchers' store (the static options named as not used), under static the
// master's address; then the master address as the workers take it. `as_given`: --master-addr / --master-port as
// given, for the notices. True: c10d at HOST:0 with one node, which runs as --standalone (apply_standalone).
bool LaunchOptions::apply_rdzv_endpoint(const std::string& addr_as_given, int port_as_given) {
  bool port0_standalone = false;
  if (rdzv_backend == "c10d") {
    // The endpoint is the launchers' store; node 0's address and a free port there become the workers' master.
    if (rdzv_endpoint.empty())
      throw UsageError("argument --rdzv-backend c10d: needs --rdzv-endpoint HOST[:PORT] (the launchers' store)",
                       {"--rdzv-endpoint", "--rdzv-backend"});
    // torchrun reads --node-rank, --master-addr and --master-port only for its static rendezvous, and job
    // templates pass them along with --rdzv-backend c10d: named in a warning, not used (they were refused, exit 2).
    if (node_rank_given)
      notices.push_back(with_rule_id(kC10dIgnoresRule.id, "--node-rank " + std::to_string(node_rank)) +
                        ": not used under --rdzv-backend c10d, as torchrun ignores it (the c10d rendezvous numbers "
                        "the nodes in the order they arrive)");
    if (master_addr_given || master_port_given)
      notices.push_back(with_rule_id(kC10dIgnoresRule.id,
                                     master_addr_given && master_port_given
                                         ? "--master-addr " + shell_quote(echo_word(addr_as_given)) + " and --master-port " +
                                               std::to_string(port_as_given)
                                     : master_addr_given ? "--master-addr " + shell_quote(echo_word(addr_as_given))
                                                         : "--master-port " + std::to_string(port_as_given)) +
                        ": not used under --rdzv-backend c10d, as torchrun ignores " +
                        (master_addr_given && master_port_given ? "them" : "it") +
                        " (the c10d rendezvous chooses the workers' master: node 0's address, a free port)");
    node_rank_given = master_addr_given = master_port_given = false;
    node_rank = 0;  // the rendezvous gives each node its rank
    master_addr = "127.0.0.1";
    master_port = 0;
    if (standalone)
      throw UsageError(argument("--standalone") + "a standalone job has its own rendezvous; leave out --rdzv-backend",
                       {"--standalone", "--rdzv-backend"});
    const launch::Endpoint ep = endpoint_of(rdzv_endpoint);
    if (ep.port && *ep.port < 1 && nnodes == 1) {
      // torchrun's "stacked single-node" form (--rdzv-endpoint localhost:0 --nnodes 1): a free port. One node has
      // no other launcher to meet, so it runs as --standalone does: 127.0.0.1 at a free port, a fresh run id.
      rdzv_backend = "static";
      standalone = port0_standalone = true;
    } else if (ep.port && *ep.port < 1) {
      throw UsageError(argument("--rdzv-endpoint") + "'" + abbreviate(rdzv_endpoint) + "': the launchers' store needs a port of 1 "
                       "to 65535 in a job of several nodes (--nnodes " +
                       (elastic() ? std::to_string(nnodes_min) + ":" : std::string()) + std::to_string(nnodes) +
                       "): the other nodes' launchers "
                       "cannot find a port chosen at random; give the same fixed port on every node (on one node, "
                       "--nnodes 1 takes port 0, as --standalone does)", {"--rdzv-endpoint", "--nnodes"});
    } else {
      store_host = ep.host.empty() ? "127.0.0.1" : ep.host;
      if (ep.port) store_port = *ep.port;
    }
  } else if (!rdzv_endpoint.empty()) {  // static rendezvous: the endpoint is the master's address
    const launch::Endpoint ep = endpoint_of(rdzv_endpoint);
    if (!ep.host.empty()) master_addr = ep.host;
    if (ep.port) master_port = *ep.port;
  }
  try {
    master_addr = launch::parse_host(master_addr);  // "[::1]" -> "::1", as the workers' MASTER_ADDR takes it
  } catch (const std::invalid_argument& e) {
    throw UsageError(argument("--master-addr") + e.what(), {"--master-addr"});
  }
  return port0_standalone;
}

// --standalone (or c10d at HOST:0 on one node, `port0_standalone`): one node, 127.0.0.1 at a free port, a fresh run
// id; the rendezvous options it replaces are named (`as_given`, as apply_rdzv_endpoint's).
void LaunchOptions::apply_standalone(const std::string& addr_as_given, int port_as_given, bool port0_standalone) {
  if (!standalone) return;
  if (nnodes != 1)
    throw UsageError(argument("--standalone") + "a standalone job has one node (got --nnodes " + std::to_string(nnodes) + ")",
                     {"--standalone", "--nnodes"});
  // torchrun's --standalone replaces the rendezvous options too (it logs the ones it uses): named, not dropped.
  std::vector<std::string> unused;
  if (master_addr_given) unused.push_back("--master-addr " + addr_as_given);
  if (master_port_given) unused.push_back("--master-port " + std::to_string(port_as_given));
  if (!rdzv_endpoint.empty() && !port0_standalone) unused.push_back("--rdzv-endpoint " + rdzv_endpoint);
  for (const std::string& u : unused)
    notices.push_back("--standalone: " + u + " not used (a standalone job's master is 127.0.0.1 at a free port)");
  master_addr = "127.0.0.1";
  master_port = 0;  // a free port
  if (run_id == "none") run_id = uuid4_text();  // torchrun's str(uuid.uuid4())
}

// SLURM, one megatron-run per node (srun --ntasks-per-node=1): one task per node of the job, and the task is a
// launcher (--nproc-per-node). The nodes, this node's rank and the master come from SLURM's variables. Returns
// whether MASTER_ADDR / MASTER_PORT were read for it (not named as unread then: name_unread_master_env).
LaunchOptions::MasterEnvRead LaunchOptions::apply_slurm_nodes(const launch::EnvLookup& env) {
  MasterEnvRead read;
  // A batch script that leaves part of its allocation unused: more nodes than this launch's (no --nnodes given), or
  // more tasks than the one worker a launch without --nproc-per-node starts. A one-node job running
  // `megatron-run --nproc-per-node 8` in its batch script uses what it has, and nothing is said.
  if (!nnodes_given && !node_rank_given)
    if (std::optional<std::string> n = launch::slurm_batch_script_notice(env, nproc_per_node))
      notices.push_back(std::move(*n));
  if (!(nproc_per_node > 0 && !env("RANK") && launch::slurm_step_task(env) && rdzv_backend == "static")) return read;
  const std::optional<launch::SlurmNodes> node_count = launch::slurm_nodes(env);
  const std::string nodes_variable = node_count ? node_count->variable : std::string();
  std::optional<int> nodes;
  if (node_count) nodes = strict_slurm_int(env, nodes_variable, 1);
  std::optional<int> tasks = strict_slurm_int(env, "SLURM_NTASKS", 1);
  // srun --ntasks-per-node=4 megatron-run --nproc-per-node 4: every task would be a launcher of its own job (its
  // own master, 127.0.0.1 at a free port: one job per task), or with --nnodes, all of them node 0 of one job.
  if (nodes && tasks && *tasks > *nodes && !node_rank_given) {
    kSlurmTasksPerNodeRule.record_hit();
    const int per = *tasks / *nodes;
    throw UsageError(
        "SLURM_NTASKS=" + std::to_string(*tasks) + " tasks on " +
            std::to_string(*nodes) + " nodes (" + nodes_variable + ")" +
            (*tasks % *nodes == 0 ? " (" + std::to_string(per) + " per node)" : std::string()) +
            " and --nproc-per-node " + std::to_string(nproc_per_node) + ": each srun task is a launcher, so " +
            (nnodes_given ? "every task would be node 0 of the --nnodes " + std::to_string(nnodes) +
                                " job (no --node-rank is derived), and the job would never form"
                          : "each task would start its own " + std::to_string(nproc_per_node) +
                                "-worker job (" + std::to_string(*tasks) + " separate jobs, " +
                                std::to_string(*tasks * nproc_per_node) + " workers on GPUs shared " +
                                std::to_string(per > 1 ? per : 1) + " ways)") +
            "; start one launcher per node: `srun --ntasks-per-node=1 megatron-run --nproc-per-node " +
            std::to_string(nproc_per_node) + " ...`, or drop --nproc-per-node (and --nnodes) to run one rank per "
            "task: `srun --ntasks-per-node=" + std::to_string(per > 1 ? per : nproc_per_node) + " megatron-run ...`",
        {"--nproc-per-node"}, "", kSlurmTasksPerNodeRule.id);
  }
  if (!(nodes && tasks && *nodes == *tasks && *nodes >= 1 && !nnodes_given && !node_rank_given)) return read;
  nnodes = nnodes_min = *nodes;
  std::optional<int> id = strict_slurm_int(env, "SLURM_NODEID", 0);
  node_rank = id ? *id : strict_slurm_int(env, "SLURM_PROCID", 0).value_or(0);
  from_slurm = nodes_variable + "=" + std::to_string(nnodes) + " -> --nnodes " + std::to_string(nnodes) +
               ", SLURM_NODEID -> --node-rank " + std::to_string(node_rank);
  if (!master_addr_given) {
    try {
      if (env("MASTER_ADDR")) {
        master_addr = launch::checked_master_addr(*env("MASTER_ADDR"));
        read.addr = true;
      } else {
        master_addr = launch::slurm_master_host(env);
      }
    } catch (const launch::LaunchError& e) {
      throw env_malformed(std::string(e.what()) + " (or give --master-addr)");
    }
    from_slurm += ", master " + master_addr;
  }
  if (!master_port_given) {
    read.port = true;
    if (std::optional<int> p = strict_slurm_int(env, "MASTER_PORT", 1)) {
      master_port = *p;
      master_port_from = "MASTER_PORT";
      from_slurm += ", port " + std::to_string(master_port) + " (MASTER_PORT)";
    } else {
      try {
        const launch::SlurmPort p = launch::slurm_default_port(env);
        master_port = p.port;
        master_port_from = p.from;
        from_slurm += ", port " + std::to_string(master_port) + " (" + p.from + ")";
      } catch (const launch::LaunchError& e) {
        throw env_malformed(std::string(e.what()) + " (or give --master-port)");
      }
    }
  }
  return read;
}

// The job's shape as given or derived: --nproc-per-node, --nnodes, --node-rank and --master-port in range.
void LaunchOptions::check_job_shape() const {
  if (nproc_given && nproc_per_node < 1)
    throw UsageError(argument("--nproc-per-node") + "must be at least 1 (got " + std::to_string(nproc_per_node) + ")",
                     {"--nproc-per-node"});
  if (nnodes < 1)
    throw UsageError(argument("--nnodes") + "must be at least 1 (got " + std::to_string(nnodes) + ")", {"--nnodes"});
  if (node_rank < 0 || node_rank >= nnodes)
    throw UsageError(argument("--node-rank") + "must be between 0 and --nnodes - 1 = " + std::to_string(nnodes - 1) +
                         " (got " + std::to_string(node_rank) + ")",
                     {"--node-rank", "--nnodes"});
  if (master_port < 0 || master_port > 65535)
    throw UsageError(argument("--master-port") + "must be a TCP port, 0 to 65535 (got " + std::to_string(master_port) + ")",
                     {"--master-port"});
}

// MASTER_ADDR / MASTER_PORT in the launcher's environment that the workers megatron-run starts do not get (`read`:
// SLURM's one-launcher-per-node mode read them): named, not dropped, as the workers get the launcher's master.
// Inside a job without --nproc-per-node megatron-run starts no workers (--nnodes, c10d or their PET_ defaults made
// nproc_per_node 1, and inside_job_refusal refuses them next): there the variables are that job's own, and are not
// named (review launch40 #1).
void LaunchOptions::name_unread_master_env(const launch::EnvLookup& env, MasterEnvRead read, bool in_job) {
  if (nproc_per_node <= 0 || (!nproc_given && in_job)) return;
  const std::string chosen_by = rdzv_backend == "c10d" ? "the c10d rendezvous chooses it"
                                : standalone           ? "a standalone job's is 127.0.0.1 at a free port"
                                                       : "";
  for (std::string& n : launch::unread_master_env(env, read.addr || master_addr_given, read.port || master_port_given,
                                                  chosen_by, nnodes > 1))
    notices.push_back(std::move(n));
}

// Static multi-node: the launchers' store on node 0, at --launcher-port (default --master-port + 1).
void LaunchOptions::place_launchers_store() {
  if (!multi_node() || rdzv_backend != "static") return;
  store_host = master_addr;
  const int mp = master_port ? master_port : launch::kTorchrunMasterPort;
  store_port = launcher_port ? launcher_port : mp + 1;
  if (store_port > 65535 || store_port == mp)
    throw UsageError(argument("--launcher-port") + "the launchers' store needs a port of its own besides --master-port " +
                         std::to_string(mp), {"--launcher-port"});
}

// torchrun's --local-addr: the address node 0 gives its workers as MASTER_ADDR where the rendezvous picks it.
void LaunchOptions::apply_local_addr() {
  if (local_addr.empty()) return;
  try {
    local_addr = launch::parse_host(local_addr);
  } catch (const std::invalid_argument& e) {
    throw UsageError(argument("--local-addr") + e.what(), {"--local-addr"});
  }
  if (rdzv_backend != "c10d" && (multi_node() || master_addr_given))
    notices.push_back("--local-addr " + local_addr + ": not used (the static rendezvous' master is --master-addr " +
                      master_addr + ")");
  else if (rdzv_backend != "c10d")
    master_addr = local_addr;
}

// An address that must be this machine's and is not: refused now (refuse_elsewhere) rather than at a timeout.
void LaunchOptions::check_addresses_are_here() const {
  // One node: rank 0's store is on this machine, so an address given for it must be one of this machine's (else
  // every rank would try to reach it until the collective timeout). Several nodes may start before the master's
  // name resolves (a Kubernetes service): their launchers wait for it instead.
  // --local-addr, when it is the one-node master (no --master-addr), likewise.
  const bool local_is_master = !local_addr.empty() && rdzv_backend != "c10d" && !master_addr_given;
  if (nproc_per_node > 0 && !multi_node() && (master_addr_given || local_is_master) && !standalone) {
    const std::string flag = master_addr_given ? "--master-addr" : "--local-addr";
    refuse_elsewhere(flag, master_addr, "a one-node job's master (rank 0's store) is this machine: leave " + flag +
                                            " out, or give one of its addresses");
  }
  // c10d: whichever launcher arrives first in a round is node 0 and gives its --local-addr to every node's workers,
  // and that can be any launcher in any round (a restart, a node taken in): every launcher checks its own now,
  // before it joins, not hours into the job.
  if (nproc_per_node > 0 && rdzv_backend == "c10d" && !local_addr.empty() && !standalone)
    refuse_elsewhere("--local-addr", local_addr,
                     "under c10d the launcher that becomes a round's node 0 gives it to every node's workers as "
                     "MASTER_ADDR: give one of this machine's addresses, or leave --local-addr out");
}

// The world size `inv` is validated for: the job's N x M when spawning (--world-size must agree); a SLURM task's
// SLURM_NTASKS outside torchrun's variables.
void LaunchOptions::apply_world_size(Invocation& inv, const launch::EnvLookup& env,
                                     const std::optional<launch::LaunchInfo>& job) {
  // Inside a job (a malformed one too) without --nproc-per-node megatron-run starts no workers: the one worker per
  // node that --nnodes, c10d or PET_NNODES made is no job of its own to compare --world-size with (review diff40
  // #2: "4 is not the job's 2 ranks (--nnodes 2 x --nproc-per-node 1)" in a job of 4); those options are the
  // refusal there (inside_job_refusal), and --world-size is the enclosing job's to agree with.
  if (nproc_per_node > 0 && !joins_enclosing_job()) {
    const long long world = static_cast<long long>(nproc_per_node) * nnodes;
    if (inv.world_size && *inv.world_size != world)
      throw UsageError(argument("--world-size") + std::to_string(*inv.world_size) + " is not the job's " +
                           std::to_string(world) + " ranks (--nnodes " + std::to_string(nnodes) + " x --nproc-per-node " +
                           std::to_string(nproc_per_node) + "); leave --world-size out, or make them agree",
                       {"--world-size", "--nproc-per-node", "--nnodes"});
    inv.world_size = world;
    inv.world_size_from = "--nnodes " + std::to_string(nnodes) + " x --nproc-per-node " + std::to_string(nproc_per_node);
    if (std::optional<std::string> ws = lone_world_size(env))
      notices.push_back(world_size_env_unused(*ws, "validated for the job's " + std::to_string(world) + " ranks (--nnodes " +
                                                       std::to_string(nnodes) + " x --nproc-per-node " +
                                                       std::to_string(nproc_per_node) + ")"));
    // The workers get their own RANK (a RANK left in the shell, or an enclosing job's, is not theirs): the job is
    // validated as rank 0 sees it.
    inv.env.vars.erase("RANK");
    inv.env.var_source["RANK"] = "default: a launch is checked as its rank 0 sees it";
    return;
  }
  // Inside a job megatron-run execs the program into that job's ranks: a --world-size of another size would validate
  // a job that does not run (review user40 #1), refused as the spawner refuses a --world-size its ranks do not make.
  // --format argv prints the command line regardless of the job (in_job_refusals false), as for the options below.
  if (inv.world_size && in_job_refusals) {
    if (job && *inv.world_size != job->world_size) {
      // An option that acts only on the workers megatron-run starts (--nnodes 2, PET_NNODES) is the refusal first:
      // leaving --world-size out would only lead to it.
      if (const std::optional<InsideJobRefusal> r = inside_job_refusal(*this, *job)) throw UsageError(r->message, {r->flag});
      const bool slurm = job->source == launch::LaunchInfo::Source::Slurm;
      throw UsageError(argument("--world-size") + std::to_string(*inv.world_size) + " is not the job's " +
                           std::to_string(job->world_size) + " ranks (" + (slurm ? "SLURM_NTASKS" : "WORLD_SIZE") +
                           "=" + std::to_string(job->world_size) + ": it is inside a job already, " +
                           job->describe() + "); leave --world-size out, or make them agree",
                       {"--world-size"});
    }
  }
  if (!env("RANK") && !env("WORLD_SIZE") && launch::slurm_step_task(env) && !inv.world_size) {
    // Strictly (review ops37 #2: "8x" was world size 8 for validation before launch.env-malformed saw it).
    inv.world_size = strict_slurm_int(env, "SLURM_NTASKS", 1).value_or(1);
    inv.world_size_from = "environment SLURM_NTASKS (a SLURM task)";
  }
}

const Rule kWorldSizeNotJobRule{
    "launch.world-size-not-job", Rule::Level::Warning,
    "check, topology, params or schedule inside a torchrun job (RANK and WORLD_SIZE set, whose WORLD_SIZE they would "
    "check for) with a --world-size of another size: the config is checked for --world-size as given, and the "
    "warning names both sizes (a launch or a dry run joining that job refuses that --world-size).",
    __FILE__, __LINE__, kStageLaunch};

std::optional<Diagnostic> world_size_not_job(Invocation& inv, const launch::EnvLookup& env) {
  if (!inv.world_size) return std::nullopt;
  const std::optional<launch::LaunchInfo> job = enclosing_job(env).info;
  // A SLURM task's SLURM_NTASKS is no size these commands read (docs/launch.md): --world-size is how they are given
  // one there (`srun -n1 megatron-run check --world-size 64 ...` in CI), nothing it overrides.
  if (!job || job->source != launch::LaunchInfo::Source::Torchrun || *inv.world_size == job->world_size)
    return std::nullopt;
  kWorldSizeNotJobRule.record_hit();
  inv.env.vars.erase("RANK");
  inv.env.var_source["RANK"] = "default: a config checked for another --world-size than its job's is checked as its "
                               "rank 0 sees it";
  const std::string given = std::to_string(*inv.world_size), size = std::to_string(job->world_size);
  return Diagnostic{Diagnostic::Level::Warning, kWorldSizeNotJobRule.id,
                    "--world-size " + given + " is not the enclosing job's " + size + " ranks (WORLD_SIZE=" + size +
                        ": " + job->describe() + "): checked for --world-size " + given +
                        ", as given; a launch or --dry-run joining this job refuses it (leave --world-size out to "
                        "check for its " + size + ")",
                    {"--world-size"}, "command line", kWorldSizeNotJobRule.stage};
}

void LaunchOptions::apply(Invocation& inv) {
  check_rdzv_backend();
  apply_rdzv_conf();
  const std::string addr_as_given = master_addr;  // before --rdzv-endpoint's (static) replaces them
  const int port_as_given = master_port;
  const bool port0_standalone = apply_rdzv_endpoint(addr_as_given, port_as_given);
  apply_standalone(addr_as_given, port_as_given, port0_standalone);
  const launch::EnvLookup env = launch::process_env();
  enclosing = enclosing_job(env);  // read once: for the two steps below, cmd_run's check and the launch
  const MasterEnvRead read = apply_slurm_nodes(env);
  check_job_shape();
  // torchrun's default of one worker per node, for a job of several nodes.
  if (nproc_per_node == 0 && (nnodes > 1 || rdzv_backend == "c10d" || port0_standalone)) nproc_per_node = 1;
  name_unread_master_env(env, read, enclosing.info.has_value());
  place_launchers_store();
  apply_local_addr();
  check_addresses_are_here();
  rendezvous_known = true;
  apply_worker_options();
  apply_world_size(inv, env, enclosing.info);
}

std::string LaunchOptions::apply_launch(Invocation& inv, bool starts) const {
  const launch::EnvLookup env = launch::process_env();
  // --world-size N on a launch that starts one worker here (no --nproc-per-node, no job to join): validated for N,
  // run on 1. A dry run checks for N; a launch says how to start N.
  if (starts && nproc_per_node == 0 && nnodes <= 1 && inv.world_size && *inv.world_size != 1 && !env("RANK") &&
      !launch::slurm_step_task(env))
    throw UsageError("argument --world-size " + std::to_string(*inv.world_size) +
                         ": this launch starts one worker here (no --nproc-per-node, and no torchrun or SLURM job to "
                         "join), so its world size is 1; give --nproc-per-node " + std::to_string(*inv.world_size) +
                         " to start that many, or --dry-run to check the config for " +
                         std::to_string(*inv.world_size) + " ranks without starting anything",
                     {"--world-size", "--nproc-per-node"});
  if (nproc_per_node > 0 || inv.world_size) return {};  // apply() set it; --world-size names it
  const std::optional<std::string> ws = lone_world_size(env);
  if (!ws || launch::slurm_step_task(env)) return {};  // a SLURM task's size: SLURM_NTASKS
  inv.world_size = 1;
  inv.world_size_from = "default: the 1 worker this launch starts (WORLD_SIZE in the shell is not its)";
  return world_size_env_unused(*ws, "validated for the 1 worker this launch starts (a dry run, check, topology and "
                                    "params take WORLD_SIZE as the world size to check)");
}

std::vector<std::string> strip_launch_options(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--") {
      out.insert(out.end(), args.begin() + static_cast<long>(i), args.end());
      break;
    }
    bool dropped = false;
    for (const auto& [f, takes_value] : kLaunchFlags) {
      std::string flag = f;
      if (args[i] == flag) {
        if (takes_value) ++i;  // and its value
        dropped = true;
        break;
      }
      if (args[i].rfind(flag + "=", 0) == 0) {
        dropped = true;
        break;
      }
    }
    if (!dropped) out.push_back(args[i]);
  }
  return out;
}

}  // namespace mr::app
