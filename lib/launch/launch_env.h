// The launch contract: where a worker learns its rank, the world size and the rendezvous address.
// torchrun's variables (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT, TORCHELASTIC_*)
// win; SLURM's (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_JOB_NODELIST) are used when they are absent.
// Torch-free.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "config/rule.h"

namespace mr::launch {

// A launch variable is missing or malformed.
struct LaunchError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// An enclosing job's launch variables (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_PORT, their SLURM_*
// sources) that are no integer in range, or a MASTER_ADDR that names no host: launch_info() throws LaunchError, and
// the launch refuses under this rule's id.
extern const Rule kEnvMalformedRule;

using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;
EnvLookup process_env();

// Whether this process is a rank of an enclosing job whose launcher set its environment: RANK with
// TORCHELASTIC_RUN_ID (a torchrun worker, which also inherits the PET_* that Kubeflow sets for the pod) or with
// MR_SPAWNER (one of megatron-run's own workers). Such a process reads none of the launcher's PET_* defaults and
// says nothing of the MASTER_* its launcher set.
bool inside_enclosing_job(const EnvLookup& env = process_env());

// Given by megatron-run's launcher to the workers it starts when it derived MASTER_PORT from SLURM's job (the
// derivation, "20000 + 2 x (...), since MASTER_PORT is unset"): their refusal of that port, taken, names it.
inline constexpr const char* kMasterPortFromVar = "MR_MASTER_PORT_FROM";
// torchrun's master port when none is given (torch.distributed.run's --master-port default): the launcher's own
// choice, not a Megatron argument; the one number every default of ours that follows torchrun takes.
inline constexpr int kTorchrunMasterPort = 29500;

struct LaunchInfo {
  enum class Source { Torchrun, Slurm };
  Source source = Source::Torchrun;
  int rank = 0, world_size = 1, local_rank = 0, local_world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = kTorchrunMasterPort;
  // Where master_addr came from, for a name that does not resolve: "MASTER_ADDR", or "SLURM_JOB_NODELIST (its
  // first host)". Where master_port came from when no variable gave it: SLURM's derivation ("20000 + ..., since
  // MASTER_PORT is unset"); "" when MASTER_PORT gave it.
  std::string master_addr_from = "MASTER_ADDR";
  std::string master_port_from;  // in a worker megatron-run started: kMasterPortFromVar's value, its launcher's
  // torchrun's agent hosts the store (TORCHELASTIC_USE_AGENT_STORE=True): every worker is a client, and keys
  // live under /worker/attempt_<TORCHELASTIC_RESTART_COUNT>/ like torch.distributed's env:// rendezvous.
  bool agent_store = false;
  std::string restart_count = "0";
  bool spawned_by_megatron_run = false;  // MR_SPAWNED=1: our spawner prefixes output lines with the rank

  std::string describe() const;  // "rank 1 of 4 (local 1 of 2) via torchrun, store 127.0.0.1:29500"
};

// The setting that picks a worker's MASTER_PORT, for advice when that port is taken: "--master-port" under
// megatron-run's spawner (its launcher reads no MASTER_PORT outside SLURM, and the option wins there too), torchrun's
// option (or the variable, for another launcher setting RANK and WORLD_SIZE), MASTER_PORT under SLURM without one.
std::string master_port_setting(const LaunchInfo& info);
// The setting that gave a worker's MASTER_ADDR, for a name that does not resolve: "--master-addr (MASTER_ADDR)"
// under megatron-run's spawner, torchrun's option or the variable, SLURM_JOB_NODELIST (its first host) under SLURM
// without MASTER_ADDR.
std::string master_addr_setting(const LaunchInfo& info);

// Whether this process is a task of a SLURM job step (srun): SLURM_PROCID and SLURM_NTASKS, with the step's id
// (SLURM_STEP_ID, or the older SLURM_STEPID). slurmstepd sets the step id only for a step id >= 0; the batch
// script (sbatch's batch step, SLURM_BATCH_SCRIPT) gets SLURM_PROCID=0 and the allocation's SLURM_NTASKS but no step
// id. Those describe tasks that no srun started, so the batch script is not a rank of a job: reading them would
// run the program as rank 0 of SLURM_NTASKS ranks that never come (a hang until the rendezvous times out).
bool slurm_step_task(const EnvLookup& env = process_env());

// The allocation's node count as SLURM sets it: SLURM_JOB_NUM_NODES, else the older SLURM_NNODES. The variable's
// name and its text, unchecked; nullopt when neither is set. The one place that knows the two names.
struct SlurmNodes {
  std::string variable;
  std::string value;
};
std::optional<SlurmNodes> slurm_nodes(const EnvLookup& env);

// A launcher started in a SLURM batch script without srun (SLURM_PROCID set, no step id, no torchrun RANK):
// SLURM's task variables are not read (above), and the launch runs on this node only. The notice says so and how to
// use the allocation (srun), and is given only where the launch leaves part of the allocation unused: more than one
// node (the node count above), or, for a launch without --nproc-per-node (`nproc_per_node` 0: one worker),
// SLURM_NTASKS above 1; values that are not counts say nothing. A one-node job running `megatron-run
// --nproc-per-node 8` in its batch script uses what it has. Its rule: kSlurmBatchScriptRule.
extern const Rule kSlurmBatchScriptRule;
std::optional<std::string> slurm_batch_script_notice(const EnvLookup& env, int nproc_per_node);

// Inside a job? torchrun's RANK and WORLD_SIZE, else a SLURM step's task (slurm_step_task); nullopt when neither.
// Throws LaunchError for malformed values (naming the variable).
std::optional<LaunchInfo> launch_info(const EnvLookup& env = process_env());

// How often a wait says what it waits for (the launchers meeting, a rank reaching its store): MR_WAIT_NOTICE_S
// seconds, 30 by default (the tests set it). The one reader of it. A value that is not a positive number ("abc",
// "0", "nan") is ignored (the default); one outside 0.01 s .. 1 day ("inf", "1e300") is clamped to that range.
std::chrono::milliseconds wait_notice_period(const EnvLookup& env = process_env());
// What the launcher says once at start when wait_notice_period ignored or clamped MR_WAIT_NOTICE_S ("" when it took
// the value as given, or the variable is unset).
std::string wait_notice_remark(const EnvLookup& env = process_env());

// The first host of a SLURM node list ("node[001-004,9],gpu7" -> "node001").
std::string slurm_first_host(const std::string& nodelist);

// The master host of a SLURM step: the first host of SLURM_JOB_NODELIST (else SLURM_NODELIST), checked as a
// MASTER_ADDR given directly is (a blank or control character, a bracket left over from a malformed range: throws
// LaunchError naming the variable). `variable` gets the variable's name. Throws LaunchError when neither is set.
std::string slurm_master_host(const EnvLookup& env, std::string* variable = nullptr);

// A MASTER_ADDR-like host as a job gives it: empty, or with a blank or control character, it names no host (throws
// LaunchError naming `variable`). Returns it unchanged.
std::string checked_master_addr(const std::string& value, const std::string& variable = "MASTER_ADDR");

// The MASTER_PORT used under SLURM when MASTER_PORT is unset, the same on every node and task of one job step:
// 20000 + 2 x ((SLURM_JOB_ID x 97 + SLURM_STEP_ID) mod 4500), an even port in 20000..28998. Concurrent steps of one
// allocation get different ports (any 4500 consecutive step ids), and so do the first steps of any 4500 consecutive
// jobs (97 is prime to 4500); the odd port above each (the launchers' store of
// the one-launcher-per-node form) is no other step's, and torchrun's 29400/29500 are never chosen. `from` says how
// it was derived, for messages. A SLURM_JOB_ID or step id that is missing or not a whole number: LaunchError
// (launch.env-malformed; srun always sets both).
struct SlurmPort {
  int port = 0;
  std::string from;  // "20000 + 2 x ((SLURM_JOB_ID 9777 x 97 + SLURM_STEP_ID 0) mod 4500), since MASTER_PORT is unset"
};
SlurmPort slurm_default_port(const EnvLookup& env);

// A SLURM count variable, strictly: unset -> nullopt; a whole number >= `min` (no sign, no trailing text) -> it;
// else LaunchError naming the variable ("SLURM_NTASKS='8x' is not an integer >= 1").
std::optional<int> slurm_int(const EnvLookup& env, const std::string& name, int min);

}  // namespace mr::launch
