#include "launch/torchrun_env.h"

#include <optional>
#include <tuple>

#include "util/text.h"

namespace mr::launch {

EnvList torchrun_env(const WorkerPlace& w, const EnvLookup& parent) {
  const int world = w.nproc_per_node * w.nnodes;
  auto s = [](int v) { return std::to_string(v); };
  EnvList env = {
      {"LOCAL_RANK", s(w.local_rank)},
      {"RANK", s(w.rank)},
      {"GROUP_RANK", s(w.node_rank)},
      {"ROLE_RANK", s(w.rank)},  // one role (--role, "default") holding every worker: its rank is the global rank
      {"ROLE_NAME", w.role},
      {"LOCAL_WORLD_SIZE", s(w.nproc_per_node)},
      {"WORLD_SIZE", s(world)},
      {"GROUP_WORLD_SIZE", s(w.nnodes)},
      {"ROLE_WORLD_SIZE", s(world)},
      {"MASTER_ADDR", w.master_addr},
      {"MASTER_PORT", s(w.master_port)},
      {"TORCHELASTIC_RESTART_COUNT", s(w.restart_count)},
      {"TORCHELASTIC_MAX_RESTARTS", s(w.max_restarts)},
      {"TORCHELASTIC_RUN_ID", w.run_id},
      {"TORCHELASTIC_USE_AGENT_STORE", "False"},
      {"TORCH_NCCL_ASYNC_ERROR_HANDLING", parent("TORCH_NCCL_ASYNC_ERROR_HANDLING").value_or("1")},
  };
  // torchrun sets it for every worker, empty under --log-dir /dev/null (no error files).
  env.emplace_back("TORCHELASTIC_ERROR_FILE", w.error_file);
  // torchrun's launcher puts its --signals-to-handle list in its own environment, which every worker inherits (a
  // worker that starts processes through torch.distributed.elastic.multiprocessing handles the same signals).
  env.emplace_back("TORCHELASTIC_SIGNALS_TO_HANDLE", w.signals_to_handle);
  return env;
}

std::vector<std::string> unread_master_env(const EnvLookup& env, bool addr_read, bool port_read,
                                           const std::string& chosen_by, bool several_nodes) {
  std::vector<std::string> out;
  // Inside an enclosing job (a torchrun worker, or one of megatron-run's: RANK with TORCHELASTIC_RUN_ID or
  // MR_SPAWNER) the enclosing launcher always sets both: naming them would say nothing the user can act on.
  if (inside_enclosing_job(env)) return out;
  const std::string several_nodes_port =
      std::to_string(kTorchrunMasterPort) + ", torchrun's default, unless --master-port is given";
  const std::tuple<const char*, bool, const char*, const char*> vars[] = {
      {"MASTER_ADDR", addr_read, "--master-addr", "127.0.0.1 unless --master-addr is given"},
      {"MASTER_PORT", port_read, "--master-port",
       several_nodes ? several_nodes_port.c_str() : "a free port unless --master-port is given"}};
  for (const auto& [name, read, option, otherwise] : vars) {
    const std::optional<std::string> v = env(name);
    if (!v || read) continue;
    out.push_back(std::string(name) + "=" + abbreviate(*v) + " is set in the launcher's environment: not read (torchrun " +
                  "reads PET_" + name + " instead); the workers get this job's own " + name + " (" +
                  (chosen_by.empty() ? std::string(otherwise) : chosen_by) + ")");
  }
  return out;
}

const std::vector<std::string>& torchrun_env_names() {
  static const std::vector<std::string> names = [] {
    WorkerPlace w;
    std::vector<std::string> n;
    for (const auto& [k, v] : torchrun_env(w, [](const std::string&) { return std::nullopt; })) n.push_back(k);
    return n;
  }();
  return names;
}

}  // namespace mr::launch
