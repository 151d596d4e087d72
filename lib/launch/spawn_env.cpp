// The workers' environment (spawn_detail.h): what torchrun gives each rank, minus its agent-store variables.
#include <sched.h>

#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "launch/spawn_detail.h"

extern char** environ;

namespace mr::launch::detail {

std::vector<std::string> shared_worker_env(const SpawnOptions& o, int port) {
  const int world = o.nproc_per_node * o.nnodes;
  std::vector<std::string> base;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    std::string key = kv.substr(0, kv.find('='));
    static const char* drop[] = {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                                 "GROUP_RANK", "ROLE_RANK", "MR_SPAWNED"};
    bool skip = key.rfind("TORCHELASTIC_", 0) == 0;
    for (const char* d : drop) skip = skip || key == d;
    for (const auto& [k, v] : o.env) skip = skip || key == k;
    if (!skip) base.push_back(kv);
  }
  for (const auto& [k, v] : o.env) base.push_back(k + "=" + v);
  base.push_back("WORLD_SIZE=" + std::to_string(world));
  base.push_back("LOCAL_WORLD_SIZE=" + std::to_string(o.nproc_per_node));
  base.push_back("MASTER_ADDR=" + o.master_addr);
  base.push_back("MASTER_PORT=" + std::to_string(port));
  base.push_back("GROUP_RANK=" + std::to_string(o.node_rank));
  if (o.prefix_output) base.push_back("MR_SPAWNED=1");
  if (o.nproc_per_node > 1 && !std::getenv("OMP_NUM_THREADS") && !o.env.count("OMP_NUM_THREADS")) {
    cpu_set_t set;
    int cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
    int t = worker_omp_threads(cpus, o.nproc_per_node);
    base.push_back("OMP_NUM_THREADS=" + std::to_string(t));
    std::cerr << "megatron-run: OMP_NUM_THREADS=" << t << " for each of the " << o.nproc_per_node
              << " workers (" << cpus << " processors; set OMP_NUM_THREADS to choose)\n";
  }
  return base;
}

std::vector<std::string> rank_worker_env(const std::vector<std::string>& shared, int rank, int local_rank) {
  std::vector<std::string> env = shared;
  env.push_back("RANK=" + std::to_string(rank));
  env.push_back("LOCAL_RANK=" + std::to_string(local_rank));
  env.push_back("ROLE_RANK=" + std::to_string(rank));
  return env;
}

}  // namespace mr::launch::detail
