// megatron-run's launcher options and the hook cmd_run needs for them (see launch.cpp).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cli.h"
#include "config/args.h"
#include "config/parse/invocation.h"
#include "launch/launch_env.h"
#include "launch/log_spec.h"
#include "launch/numa_binding.h"
#include "launch/program.h"
#include "launch/torchrun_options.h"
#include "parallel/layout.h"

namespace mr::app {

// --nproc-per-node N [--nnodes M --node-rank R --master-addr A --master-port P]: our own spawner.
// The most local workers megatron-run spawns on one node (without --dry-run).
inline constexpr int kMaxLocalWorkers = 1024;

struct LaunchOptions {
  int nproc_per_node = 0;  // 0: no spawning
  bool nproc_given = false;  // --nproc-per-node was given (0 then is an error, not "no spawning")
  int nnodes = 1;      // the most nodes (MAX of an elastic MIN:MAX)
  int nnodes_min = 1;  // the fewest: below nnodes in an elastic job (--nnodes MIN:MAX, c10d)
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;  // 0: a free port (one node), 29500 (several)
  bool bring_up_only = false;  // --bring-up-only: the workers stop after the self-check (passed on to them)
  // --heartbeat-timeout SECONDS: a rank whose heartbeat stops for this long fails the job (passed on to the
  // workers; empty: not given, then MR_DIST_HEARTBEAT_TIMEOUT_S or 30 s; docs/distributed.md, "Faults")
  std::optional<double> heartbeat_timeout;  // --heartbeat-timeout S: seconds, finite and above 0 (checked at parse)
  // torchrun's options (docs/launch.md): --standalone, --max-restarts, --monitor-interval (not used),
  // --rdzv-backend static, --rdzv-endpoint HOST[:PORT], --rdzv-id (TORCHELASTIC_RUN_ID), --log-dir,
  // -r/--redirects, -t/--tee, --local-ranks-filter (parsed into `logs` by apply()).
  bool standalone = false;
  int max_restarts = 0;
  std::string log_dir, redirects = "0", tee = "0", local_ranks_filter;
  launch::LogOptions logs;
  // --term-timeout SECONDS: SIGTERM -> SIGKILL grace when stopping the workers (torchrun: 30 s, no option).
  double term_timeout = 30;
  // Options that act only on workers megatron-run starts itself (--nproc-per-node or no enclosing job).
  std::vector<std::string> spawner_only_given;
  // The same options where their value came from a PET_ default (not read inside a torchrun job): "--nnodes", its
  // source in pet_sources. Refused inside another launcher's job as the options are (launch.cpp).
  std::vector<std::string> spawner_only_pet;
  double monitor_interval = 0;  // torchrun's polling period: checked (above 0, as torchrun's WorkerSpec), not used
  bool monitor_interval_given = false;
  std::string rdzv_backend = "static";
  std::string rdzv_endpoint;
  std::string run_id = "none";
  // Several nodes (docs/launch.md, "Several nodes"): the launchers meet in a store of their own. Static: node 0
  // hosts it at --master-addr:--launcher-port (0: --master-port + 1). c10d: at --rdzv-endpoint (store_host:
  // store_port, default port 29400), and the node ranks follow the order of arrival.
  int launcher_port = 0;
  std::string store_host;
  int store_port = 29400;
  double join_timeout = 600;  // seconds for every node to arrive (torchrun's c10d join_timeout)
  std::string join_timeout_flag = "--join-timeout";  // how it was given: "--rdzv-conf join_timeout" when so
  // --rdzv-conf KEY=VALUE,... (torchrun's): join_timeout and is_host act; the other settings torchrun's c10d
  // rendezvous knows are named in a notice (megatron-run's rendezvous has no use for them).
  std::string rdzv_conf;
  std::string role = "default";      // --role: the workers' ROLE_NAME
  std::string start_method;          // --start-method (spawn|fork|forkserver): accepted, named as not used
  bool run_path = false;             // --run-path: accepted, named as not used
  // torchrun's --shutdown-timeout: --term-timeout's other name (empty: not given, nor PET_SHUTDOWN_TIMEOUT nor
  // TORCH_ELASTIC_SHUTDOWN_TIMEOUT set); a negative value is refused, as torchrun's LaunchConfig refuses it.
  std::optional<double> shutdown_timeout;
  std::optional<bool> rdzv_is_host;
  // torchrun 2.x's options (docs/launch.md): --log-line-prefix-template (else TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE),
  // --duplicate-stdout-filters / --duplicate-stderr-filters (parsed into `logs` by apply()), --virtual-local-rank,
  // --local-addr (the workers' MASTER_ADDR where the rendezvous picks it: c10d's node 0, one node without
  // --master-addr), --signals-to-handle (parsed into handled_signals).
  std::string log_line_prefix_template, local_addr;
  std::string event_log_handler = "null";  // torchrun's --event-log-handler: null, dynamic_rendezvous or console
  std::optional<std::string> duplicate_stdout_filters, duplicate_stderr_filters, signals_to_handle;
  bool virtual_local_rank = false, signals_from_pet = false;
  std::vector<int> handled_signals;
  // --numa-binding (launch/numa_binding.h): each worker's CPUs near its GPU, set before it starts. torchrun reads
  // no PET_NUMA_BINDING (the option has no env default), so neither does megatron-run.
  std::optional<launch::NumaMode> numa_binding;
  void set_numa_binding(const std::string& v);
  bool join_timeout_given = false, term_timeout_given = false;
  // The options whose value came from torchrun's PET_<NAME> default (or another variable torchrun reads for it,
  // TORCH_ELASTIC_SHUTDOWN_TIMEOUT): "--rdzv-backend" -> "PET_RDZV_BACKEND='etcd'".
  std::map<std::string, std::string> pet_sources;
  // For a usage error naming `flags`: " (--x was not given: the value is PET_X='v', its default from the
  // environment; --y ...)" for each of them that took its value from the environment, when `message` names no
  // PET_ variable; else "".
  std::string pet_source_note(const std::string& message, const std::vector<std::string>& flags) const;
  // Lines for the user about options that are accepted but not acted on (cmd_run prints them once).
  std::vector<std::string> notices;
  bool nnodes_given = false, node_rank_given = false, master_addr_given = false, master_port_given = false;
  std::string from_slurm;  // non-empty: nnodes, node rank and master derived from SLURM_* (what was derived)
  // Where master_port came from when SLURM's variables gave it ("MASTER_PORT", or the SLURM_JOB_ID derivation); ""
  // otherwise (--master-port, or its default).
  std::string master_port_from;
  // An elastic job: the node count is fixed when the rendezvous closes, between nnodes_min and nnodes, after
  // last_call_timeout seconds without a new arrival (torchrun's c10d last_call_timeout, 30 s), among the counts
  // the config is valid for (cmd_run checks each; empty: all).
  double last_call_timeout = 30;
  std::vector<int> valid_nnodes;
  bool elastic() const { return nnodes_min < nnodes; }
  void set_nnodes(launch::NodeCount c) { nnodes_min = c.min, nnodes = c.max; }
  // A multi-node job (the launchers rendezvous and watch each other).
  bool multi_node() const { return nproc_per_node > 0 && (nnodes > 1 || rdzv_backend == "c10d"); }

  void add_to(po::options_description& desc);
  // torchrun's PET_<NAME> defaults for the options not given on the command line.
  void apply_pet_defaults(const po::variables_map& vm);
  // The world size validation must assume: N x M when spawning; SLURM_NTASKS inside a SLURM job that has no
  // torchrun variables (Megatron itself would read WORLD_SIZE). Leaves `inv` alone otherwise. A WORLD_SIZE in the
  // environment without RANK is no job (launch::launch_info): when spawning it is named in `notices`, not used.
  void apply(Invocation& inv);
  // For a launch (not a dry run: there WORLD_SIZE names the size to check, as for check/topology/params), after
  // apply(): without --nproc-per-node, outside any job (torchrun's RANK and WORLD_SIZE, SLURM's task variables) and
  // without --world-size, megatron-run starts one worker, whose WORLD_SIZE is 1; a WORLD_SIZE left in the shell is
  // then not the world size that runs: `inv` is validated for 1 and the returned notice names the variable.
  // Empty (and `inv` left alone) otherwise. `starts`: the launch starts workers (not --format json's check): a
  // --world-size other than 1 there, with one worker to start, is a UsageError naming --nproc-per-node.
  std::string apply_launch(Invocation& inv, bool starts) const;
  // apply() got past the options the rendezvous needs (nodes, backend, endpoint, master, timeouts): a usage error
  // after it, on one node of a multi-node launch, can be told to the others.
  bool rendezvous_known = false;
  // The job megatron-run is inside, as apply() read it, once (launch::launch_info: torchrun's variables, or a SLURM
  // task), for apply's own steps and for the two places that act on it after apply(): a dry run's and --format
  // json's check (cmd_run.cpp) and the launch (launch.cpp), each handling a malformed one in its own way.
  struct EnclosingJob {
    std::optional<launch::LaunchInfo> info;  // nullopt outside any job, and for a malformed one
    std::optional<std::string> malformed;    // a malformed one: launch_info's refusal (its LaunchError's text)
  };
  EnclosingJob enclosing;
  // Whether apply() refuses what a job megatron-run is inside makes wrong (a --world-size of another size): false
  // for --format argv/argv0, which print the command line regardless of the job (docs/launch.md), as they skip the
  // refusal of the options that act on the workers megatron-run starts (cmd_run.cpp's check_enclosing_job).
  bool in_job_refusals = true;
  // Inside a job (a malformed one too, after apply()) without --nproc-per-node: megatron-run starts no workers and
  // meets no other launcher there; the one worker per node that --nnodes or c10d made is refused
  // (inside_job_refusal, launch.env-malformed), with no other node to tell and no nested job's size.
  bool joins_enclosing_job() const { return !nproc_given && (enclosing.info || enclosing.malformed); }

 private:
  // apply_pet_defaults()'s record of the options that act only on the workers megatron-run starts: given on the
  // command line (spawner_only_given), or by a PET_ default (spawner_only_pet).
  void note_spawner_only_given(const po::variables_map& vm);
  void note_spawner_only_pet();
  // apply()'s steps, in its order (launch_options.cpp says what each checks and sets).
  struct MasterEnvRead {  // MASTER_ADDR / MASTER_PORT of the environment read for this launch (SLURM's mode)
    bool addr = false, port = false;
  };
  void check_rdzv_backend() const;
  void apply_rdzv_conf();
  bool apply_rdzv_endpoint(const std::string& addr_as_given, int port_as_given);
  void apply_standalone(const std::string& addr_as_given, int port_as_given, bool port0_standalone);
  MasterEnvRead apply_slurm_nodes(const launch::EnvLookup& env);
  void check_job_shape() const;
  void name_unread_master_env(const launch::EnvLookup& env, MasterEnvRead read, bool in_job);
  void place_launchers_store();
  void apply_local_addr();
  void check_addresses_are_here() const;
  void apply_worker_options();  // the worker-only options (restarts, timeouts, logs, signals, ...)
  void apply_log_options();     // apply_worker_options()'s logs: --log-dir, -r/-t, --local-ranks-filter, filters
  // `job`: the enclosing job (a malformed one: none), read once by apply() (`enclosing`).
  void apply_world_size(Invocation& inv, const launch::EnvLookup& env, const std::optional<launch::LaunchInfo>& job);
};

// The default command's options (cmd_run.cpp): the config and target options, the launcher's, and its own.
struct RunOptions {
  CommonOptions common;
  LaunchOptions launch;
  bool dry_run = false, help = false, version = false, parse_only = false, provenance = false;
  bool no_python = false, no_append_args = false, no_file_checks = false;
  bool module = false;  // -m/--module (the program's form, read by read_run_words: ProgramSplit::form)
  std::vector<std::string> explain;
  void add_to(po::options_description& desc);
};

// For the commands that describe a job without starting it (topology, params): resolves `rest` (Megatron's
// flags) for the world size --world-size / WORLD_SIZE gives (UsageError naming `cmd` without one) and builds the
// rank layout from the typed view of the resolved arguments. Returns 0 with `out`, `args` and `layout` set, or 1
// after printing the failed rules / the argument or layout error.
// `extra_formats`: the --format values the command accepts besides text and json.
int resolve_job_layout(const char* cmd, const CommonOptions& common, const std::vector<Token>& rest, Outcome& out,
                       Args& args, parallel::Layout& layout, const std::vector<std::string>& extra_formats = {});

// check, topology, params and schedule inside a torchrun job (launch::launch_info: RANK and WORLD_SIZE set) given a
// --world-size other than that job's WORLD_SIZE: they check the config for --world-size, as given (config tools,
// often run to lint for other sizes, in CI too), and this warning (rule launch.world-size-not-job) names both sizes
// and that a launch or dry run joining the job refuses it (LaunchOptions::apply_world_size). nullopt otherwise (no
// --world-size, the job's size, no job, a malformed one, or a SLURM task, whose SLURM_NTASKS they never read).
// When it warns, the job's RANK is dropped from `inv` too: the config is checked for another job, as its rank 0 sees it
// (a rank of the enclosing job at or past the given size would fail sanity.rank-in-world: review diff41 #1).
std::optional<Diagnostic> world_size_not_job(Invocation& inv, const launch::EnvLookup& env = launch::process_env());

// The diagnostic for a LayoutError (stage kStageInit: the checks of Megatron's initialize_model_parallel(),
// which megatron-run runs when it lays out the process groups), for --format json. With the namespace, its flags
// are those of the arguments the error names (LayoutError::args), and its place the line of the first of them a
// config file set.
Diagnostic layout_diagnostic(const parallel::LayoutError& e, const Namespace* ns = nullptr);

// The rule id of the rank layout's checks (Megatron's initialize_model_parallel: sizes that divide the world,
// the expert groups), stage kStageInit: what Megatron would refuse only once its ranks have started.
inline constexpr const char* kInitProcessGroups = "init.process-groups";

// Runs the init stage on a validated outcome: the rank layout for its world size. The failure, or nullopt.
// --dry-run, `check` and every launch run it, so a job that Megatron would fail at initialisation starts nothing.
std::optional<Diagnostic> init_check(const Outcome& out);

// The rule id of the schedule's checks (optim::ScheduleConfig: warmup shorter than the decay, ...), stage kStageInit.
inline constexpr const char* kInitLrSchedule = "init.lr-schedule";

// The learning-rate scheduler's checks on a validated outcome (Megatron asserts them when its training builds the
// scheduler, after the model). `trains`: the job is megatron-run's worker, which always trains: the failure is an
// error; else (the user's program, which may not train, e.g. an inference server) a warning. nullopt when fine.
std::optional<Diagnostic> schedule_check(const Outcome& out, bool trains);

// The diagnostic of a scheduler failure `what` (the scheduler's message, with its hint), rule kInitLrSchedule: an
// error when `trains`, else a warning. The `schedule` command reports its failures with it (trains: true).
Diagnostic lr_schedule_diagnostic(const std::string& what, bool trains);

// The rule id of what megatron-run's own training run refuses (run/run_support.h), stage kStageInit.
inline constexpr const char* kInitTrainingRun = "init.training-run";

// What megatron-run's own training run cannot run (an optimizer without a kernel, Muon with the distributed
// optimizer, a model it does not plan, ...), for a job of its own worker: the failure, or nullopt.
std::optional<Diagnostic> training_run_check(const Outcome& out);

// The save settings Megatron's save fails on, or megatron-run's run does not model, where the training would save so
// (run::save_settings_refusal: --async-save with --ckpt-format torch, --non-persistent-save-interval without
// --non-persistent-ckpt-type global where a non-persistent save comes):
// an error with the checkpoint rule's id when `trains` (a launch of our worker, before it starts); else a warning
// where Megatron's own save would fail (a dry run validates for any program); nullopt when none.
std::optional<Diagnostic> save_settings_check(const Outcome& out, bool trains);

// The checks of the files the program's flags name, on this node (launch/program_inputs.h), as diagnostics with
// their rule ids (launch.input-missing, launch.output-unwritable: errors; the rest warnings), in the flags' order;
// none without a named program, with --no-file-checks, or for a --yaml-cfg namespace. A launch refuses on an error
// (exit 1), and so does --format json without --dry-run, which validates as the launch would.
std::vector<Diagnostic> program_input_diagnostics(const Outcome& resolved, const launch::Program& program);

// A config file's ENV_VARS (docs/config-files.md): a launch exports them to every rank, over megatron-run's
// environment, except the variables the launch sets for each rank itself (launch_sets_variable: RANK, WORLD_SIZE,
// MASTER_ADDR, TORCHELASTIC_*, ...), which validation leaves out of ENV_VARS too (Invocation::launch_sets).
// The one test of what a launch does not export (megatron_run_setting's among them); config_env_line,
// config_env_notices and the export use it.
bool launch_sets_variable(const std::string& name);
// megatron-run's own settings (MR_*): read from the environment megatron-run starts in, never from ENV_VARS.
bool megatron_run_setting(const std::string& name);
// "K=V K2=V2" of Parsed::env_vars that a launch exports (not launch_sets_variable's: a dry run's ENV_VARS still hold
// them), shell-quoted (values of secret-looking names shown as <redacted>); empty when it exports none.
std::string config_env_line(const Parsed& p);
// Rule launch.env-vars-override: an ENV_VARS entry whose value differs from megatron-run's environment's (the
// ranks get the config's), or that the launch sets itself (Parsed::env_vars_not_applied); one warning each.
std::vector<Diagnostic> config_env_notices(const Parsed& p);

// A launch that stops before its workers start: prints `message` (unless `printed`) and, in a job of several
// nodes, tells the other nodes' launchers so that they fail at once instead of waiting for --join-timeout
// (launch::NodeGroup::refuse_to_join). Returns `code`.
int refuse_launch(const LaunchOptions& lo, int code, const std::string& message, bool printed = false);

// Inside another launcher's job (`job`) without --nproc-per-node megatron-run starts no workers, so the options that
// act only on the workers it starts (LaunchOptions::spawner_only_given: the spawner's and the rendezvous's, then
// their PET_ defaults, spawner_only_pet) are refused: the option named (as argparse names it) and the message
// (`argument --nnodes: acts on the workers megatron-run starts, but it is inside a job already (...)`); nullopt
// when none is given or --nproc-per-node is. The launch prints it and exits 2; a dry run and --format json's check
// refuse the same (cmd_run.cpp), so that a pre-flight says what the launch would.
struct InsideJobRefusal {
  std::string flag;     // "--nnodes" (the spelling given)
  std::string message;  // without "megatron-run: error: "
};
std::optional<InsideJobRefusal> inside_job_refusal(const LaunchOptions& lo, const launch::LaunchInfo& job);
// The same for a job described by `job` ("rank 0 of 4 (...) via torchrun, store ..."), `slurm` when it is a SLURM
// task's: a dry run in a job that launch::launch_info refuses (RANK and WORLD_SIZE without MASTER_ADDR/MASTER_PORT)
// names what the launch would refuse after it (review user40 #2).
std::optional<InsideJobRefusal> inside_job_refusal(const LaunchOptions& lo, const std::string& job, bool slurm);

// Words of `args` (before "--") that are launcher options, with their values, removed.
std::vector<std::string> strip_launch_options(const std::vector<std::string>& args);

// torchrun's PET_<NAME> default read as an integer, as its check_env reads one (Python's int(): blanks around,
// one sign, digits with single underscores between them: parse_py_int); nullopt when unset, UsageError naming
// `flag` when it is not an integer (or one past int's range).
std::optional<int> pet_int(const launch::EnvLookup& env, const char* name, const char* flag);
// The same for any variable `var` (TORCH_ELASTIC_SHUTDOWN_TIMEOUT, which torch's LaunchConfig reads with int()):
// its name in the error.
std::optional<int> env_int(const launch::EnvLookup& env, const std::string& var, const char* flag);
// A rank of a job megatron-run's spawner started, or a torchrun worker (launch::inside_enclosing_job: torchrun's
// workers inherit the PET_<NAME> that Kubeflow's PyTorchJob sets for the pod): the PET_<NAME> defaults in its environment were the enclosing launcher's, which used them. Read again,
// PET_NPROC_PER_NODE would start a job inside every worker (and those inside theirs); so such a megatron-run reads
// none, and validates and runs the program in place.
bool pet_defaults_of_enclosing_launcher(const launch::EnvLookup& env);

// torchrun's --print-completion SHELL among megatron-run's own options (`words`, written out in full): the shell
// (bash, zsh or fish; tcsh and others refused), at the first such option, as torchrun acts where argparse meets it
// (the script printed, nothing after it read); nullopt when there is none, or a --help comes first.
std::optional<std::string> print_completion_requested(const std::vector<std::string>& words);

}  // namespace mr::app
