// The workers' environment (spawn_detail.h): ours, then exactly what torchrun gives each rank (launch/torchrun_env.h).
// Also virtual_local_device (spawn.h), torchrun's --virtual-local-rank.

#include <cstdlib>
#include <stdexcept>
#include <iostream>
#include <string>
#include <vector>

#include "config/print.h"
#include "launch/cpu_affinity.h"
#include "launch/launch_env.h"
#include "launch/spawn_detail.h"
#include "launch/torchrun_env.h"
#include "util/resources.h"
#include "util/text.h"

extern char** environ;

namespace mr::launch::detail {

std::vector<std::string> shared_worker_env(const SpawnOptions& o) {
  std::vector<std::string> base;
  const std::vector<std::string>& torchrun = torchrun_env_names();
  // Inputs of torchrun's agent that megatron-run does not implement: outside an enclosing torchrun job (whose
  // workers inherit them from their launcher, TORCHELASTIC_RUN_ID with them) they are the user's, and are named.
  if (!std::getenv("TORCHELASTIC_RUN_ID")) {
    std::string unused;
    for (const char* name : {"TORCHELASTIC_ENABLE_FILE_TIMER", "TORCHELASTIC_TIMER_FILE",
                             "TORCHELASTIC_HEALTH_CHECK_PORT", "TORCHELASTIC_UNINTERRUPTIBLE_STATE_TIMEOUT"})
      if (const char* v = std::getenv(name); v && *v)
        unused += std::string(unused.empty() ? "" : ", ") + name + "=" + abbreviate(v);
    if (!unused.empty())
      print_warning(std::cerr, unused + " in megatron-run's environment: not used (torchrun's agent reads these for "
                               "its file-timer watchdog, health check server and uninterruptible-sleep check, "
                               "which megatron-run does not implement), and not passed on to the workers");
  }
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    std::string key = kv.substr(0, kv.find('='));
    // An enclosing job's torchrun variables are replaced by this job's (every TORCHELASTIC_* goes: a nested
    // job has no agent store).
    bool skip = key.rfind("TORCHELASTIC_", 0) == 0 || key == "MR_SPAWNED" || key == "MR_SPAWNER" ||
                key == kMasterPortFromVar;  // an enclosing job's launcher's, not this one's
    for (const std::string& d : torchrun) skip = skip || key == d;
    for (const auto& [k, v] : o.env) skip = skip || key == k;
    if (!skip) base.push_back(kv);
  }
  for (const auto& [k, v] : o.env) base.push_back(k + "=" + v);
  if (o.prefix_output) base.push_back("MR_SPAWNED=1");
  base.push_back("MR_SPAWNER=1");  // a worker of our spawner: what the spawner already said is not said again
  if (o.nproc_per_node > 1 && !std::getenv("OMP_NUM_THREADS") && !o.env.count("OMP_NUM_THREADS")) {
    const size_t allowed = current_affinity().size();
    const int cpus = allowed > 0 ? static_cast<int>(allowed) : 1;
    int t = worker_omp_threads(cpus, o.nproc_per_node);
    base.push_back("OMP_NUM_THREADS=" + std::to_string(t));
    std::cerr << "megatron-run: OMP_NUM_THREADS=" << t << " for each of the " << o.nproc_per_node
              << " workers (" << cpus << " processors; set OMP_NUM_THREADS to choose)\n";
  }
  // OpenBLAS (the pthread build LibTorch and the optimizers link) starts its thread pool when the worker loads,
  // one thread a processor (or OMP_NUM_THREADS), and each thread maps a 128 MiB buffer at once, retrying forever
  // when it cannot: under an address-space limit that costs 128 MiB a processor, or a thread spinning for the
  // whole run. One BLAS thread there, unless the user chose.
  if (const std::optional<uint64_t> as = util::address_space_limit();
      as && !std::getenv("OPENBLAS_NUM_THREADS") && !std::getenv("GOTO_NUM_THREADS") &&
      !o.env.count("OPENBLAS_NUM_THREADS") && !o.env.count("GOTO_NUM_THREADS")) {
    base.push_back("OPENBLAS_NUM_THREADS=1");
    std::cerr << "megatron-run: OPENBLAS_NUM_THREADS=1 for the workers on this node: an address-space limit is "
                 "set (ulimit -v "
              << *as / 1024 << ") and every OpenBLAS thread maps 128 MiB of it (set OPENBLAS_NUM_THREADS to choose)\n";
  }
  return base;
}

std::vector<std::string> rank_worker_env(const std::vector<std::string>& shared, const SpawnOptions& o,
                                         int local_rank, const std::string& error_file) {
  WorkerPlace w;
  w.local_rank = local_rank;
  w.rank = o.node_rank * o.nproc_per_node + local_rank;
  w.node_rank = o.node_rank;
  w.nproc_per_node = o.nproc_per_node;
  w.nnodes = o.nnodes;
  w.master_addr = o.master_addr;
  w.master_port = o.master_port;
  w.restart_count = o.restart_count;
  w.max_restarts = o.max_restarts;
  w.run_id = o.run_id;
  w.role = o.role;
  w.error_file = error_file;
  if (!o.handled_signals.empty()) {  // --signals-to-handle, by name (what torch's PContext reads)
    w.signals_to_handle.clear();
    for (int sig : o.handled_signals)
      w.signals_to_handle += (w.signals_to_handle.empty() ? "" : ",") + signal_name(sig);
  }
  std::vector<std::string> env = shared;
  for (const auto& [k, v] : torchrun_env(w)) env.push_back(k + "=" + v);
  if (o.virtual_local_rank) {
    // torchrun's virtual local rank: every worker is local rank 0 of a node that shows it its own GPU only.
    const char* hip = std::getenv("HIP_VISIBLE_DEVICES");
    const bool use_hip = hip && *hip;
    const std::string device = virtual_local_device(local_rank);
    auto set = [&](const std::string& key, const std::string& value) {
      std::erase_if(env, [&](const std::string& kv) { return kv.rfind(key + "=", 0) == 0; });
      env.push_back(key + "=" + value);
    };
    set("LOCAL_RANK", "0");
    set("CUDA_VISIBLE_DEVICES", device);
    if (use_hip) set("HIP_VISIBLE_DEVICES", device);
    set("MR_VIRTUAL_LOCAL_RANK", "1");
  }
  return env;
}

}  // namespace mr::launch::detail

namespace mr::launch {

std::string virtual_local_device(int local_rank) {
  const char* hip = std::getenv("HIP_VISIBLE_DEVICES");
  const char* cuda = std::getenv("CUDA_VISIBLE_DEVICES");
  const bool use_hip = hip && *hip;
  if (!use_hip && !cuda) return std::to_string(local_rank);
  const std::string name = use_hip ? "HIP_VISIBLE_DEVICES" : "CUDA_VISIBLE_DEVICES";
  const std::string list = use_hip ? hip : cuda;
  std::vector<std::string> devices = split(list, ',');
  for (std::string& d : devices) d = trim(d);
  if (local_rank >= static_cast<int>(devices.size()))
    throw std::invalid_argument("local rank " + std::to_string(local_rank) + " has no GPU of its own in " + name + "=" +
                                list + " (" + std::to_string(devices.size()) + " listed)");
  return devices[static_cast<size_t>(local_rank)];
}

}  // namespace mr::launch
