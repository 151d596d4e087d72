// torchrun's worker environment, exactly: what torch.distributed.run (its LocalElasticAgent) sets for every
// worker it starts, so a program written for torchrun runs unchanged under megatron-run. docs/launch.md has
// the table with torchrun's source of each variable. Torch-free.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "launch/launch_env.h"

namespace mr::launch {

// One worker's place in the job.
struct WorkerPlace {
  int rank = 0;              // global rank: node_rank * nproc_per_node + local_rank
  int local_rank = 0;
  int node_rank = 0;         // torchrun's GROUP_RANK
  int nproc_per_node = 1;    // LOCAL_WORLD_SIZE
  int nnodes = 1;            // GROUP_WORLD_SIZE
  std::string master_addr = "127.0.0.1";
  int master_port = kTorchrunMasterPort;
  int restart_count = 0;     // TORCHELASTIC_RESTART_COUNT: which attempt of the local group this is
  int max_restarts = 0;      // --max-restarts
  std::string run_id = "none";  // --rdzv-id (torchrun's default "none"; --standalone: a fresh id)
  std::string role = "default";  // --role: ROLE_NAME (one role holds every worker)
  std::string error_file;    // TORCHELASTIC_ERROR_FILE; empty under --log-dir /dev/null (torchrun's "no files")
  // TORCHELASTIC_SIGNALS_TO_HANDLE: the launcher's --signals-to-handle, as signal names (torchrun's default here).
  std::string signals_to_handle = "SIGTERM,SIGINT,SIGHUP,SIGQUIT";
};

using EnvList = std::vector<std::pair<std::string, std::string>>;

// The variables torchrun sets for this worker, in torchrun's order. TORCHELASTIC_USE_AGENT_STORE is "False":
// megatron-run hosts no store for its workers (torch.distributed's env:// rendezvous creates the TCPStore on
// rank 0, as with torchrun's static rendezvous). TORCH_NCCL_ASYNC_ERROR_HANDLING is inherited, else "1".
EnvList torchrun_env(const WorkerPlace& w, const EnvLookup& parent = process_env());

// The launcher's notices for MASTER_ADDR and MASTER_PORT set in its own environment and not read (`addr_read`,
// `port_read`: SLURM's one-launcher-per-node mode read it, or its option was given): the workers get the launcher's
// master instead, as under torchrun (which reads PET_MASTER_ADDR / PET_MASTER_PORT, never these). Each says what
// sets it: the option, or `chosen_by` when not empty ("the c10d rendezvous chooses it"). Empty when all is read,
// and inside an enclosing job (inside_enclosing_job: its launcher set them). `several_nodes`: the port's default
// is 29500 (torchrun's), not a free one.
std::vector<std::string> unread_master_env(const EnvLookup& env, bool addr_read, bool port_read,
                                           const std::string& chosen_by = "", bool several_nodes = false);

// The names of every variable torchrun_env may set (the launcher removes inherited copies of them first).
const std::vector<std::string>& torchrun_env_names();

}  // namespace mr::launch
