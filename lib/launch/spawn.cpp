// spawn_workers (spawn.h): check the options, build the environment, catch the signals to forward, start the
// workers, supervise them. The parts are in spawn_detail.h: spawn_env.cpp, spawn_signals.cpp, workers.cpp,
// supervise.cpp.
#include "launch/spawn.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "launch/spawn_detail.h"

namespace mr::launch {

int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    throw std::runtime_error(std::string("cannot bind a free port: ") + std::strerror(errno));
  }
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  int port = ntohs(addr.sin_port);
  close(fd);
  return port;
}

int worker_omp_threads(int cpus, int nproc_per_node) { return std::max(1, cpus / std::max(1, nproc_per_node)); }

int spawn_workers(const SpawnOptions& o) {
  if (o.nproc_per_node < 1) throw std::runtime_error("--nproc-per-node must be at least 1");
  if (o.nnodes < 1) throw std::runtime_error("--nnodes must be at least 1");
  if (o.node_rank < 0 || o.node_rank >= o.nnodes)
    throw std::runtime_error("--node-rank " + std::to_string(o.node_rank) + " is outside 0.." +
                             std::to_string(o.nnodes - 1));
  if (o.argv.empty()) throw std::runtime_error("no worker command");
  SpawnOptions job = o;
  job.master_port = o.master_port ? o.master_port : (o.nnodes == 1 ? free_port() : 29500);
  const std::vector<std::string> env = detail::shared_worker_env(job);

  // Destroyed in reverse order on every path out of here: first the workers (any still running is killed and
  // reaped), then the signal handlers (restored).
  detail::SignalForwarder signals;
  detail::Workers workers(o.nproc_per_node);
  for (int i = 0; i < job.nproc_per_node; ++i) workers.start(i, job, env);
  return detail::supervise(workers, job, signals.read_fd());
}

}  // namespace mr::launch
