// Free ports drawn below the kernel's range for connections' local ports (launch/free_port.h).
#include "launch/free_port.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <random>
#include <stdexcept>
#include <string>

#include "launch/launch_env.h"
#include "launch/node_store.h"

namespace mr::launch {

namespace {

constexpr int kLowest = 10000;  // below: ports many services are configured on
constexpr int kTries = 200;
// torchrun's (and megatron-run's) default --master-port and c10d endpoint port: a job started later with the
// defaults on this machine would find them taken.
constexpr int kDefaultMasterPort = kTorchrunMasterPort, kDefaultRendezvousPort = 29400;

// A socket bound to `port` (0: the kernel's pick) on every interface without SO_REUSEADDR, then given SO_REUSEADDR
// so that a store setting it can bind beside it: the held port, or none (errno set). Without SO_REUSEADDR, a port
// that a closed connection still holds in TIME_WAIT is refused: a program given it that binds without SO_REUSEADDR
// would fail for up to a minute.
HeldPort hold(int port) {
  const int fd = bind_every_interface(port, false);
  if (fd < 0) return HeldPort();
  const int one = 1;
  const int bound = bound_port(fd);
  if (bound <= 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0) {
    const int e = errno;
    close(fd);
    errno = e;
    return HeldPort();
  }
  return HeldPort(bound, fd);
}

unsigned seed() {
  try {
    return std::random_device{}();
  } catch (const std::exception&) {  // no entropy source: the clock and the pid still differ between launchers
    return static_cast<unsigned>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
           static_cast<unsigned>(getpid());
  }
}

}  // namespace

bool port_free(int port) { return port > 0 && port <= 65535 && hold(port).port() == port; }

int store_bind_error(int port) {
  if (port <= 0 || port > 65535) return 0;
  const int fd = bind_every_interface(port, /*reuse_address=*/true);
  if (fd < 0) return errno;
  close(fd);
  return 0;
}

bool port_held(int port) { return store_bind_error(port) == EADDRINUSE; }

bool port_forbidden(int port) { return store_bind_error(port) == EACCES; }

int unprivileged_port_start() {
  std::ifstream in("/proc/sys/net/ipv4/ip_unprivileged_port_start");
  int start = 0;
  return in >> start && start >= 0 && start <= 65536 ? start : 1024;
}

int connection_ports_start() {
  std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
  int low = 0;
  return in >> low && low > 0 && low <= 65535 ? low : 32768;
}

HeldPort& HeldPort::operator=(HeldPort&& o) noexcept {
  if (this != &o) {
    release();
    port_ = o.port_;
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

void HeldPort::release() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

HeldPort hold_port(int port) { return port > 0 && port <= 65535 ? hold(port) : HeldPort(); }

HeldPort hold_free_port(const std::function<int()>& draw) {
  if (connection_ports_start() - kLowest >= 1000) {
    for (int i = 0; i < kTries; ++i) {
      const int candidate = draw();
      if (candidate == kDefaultMasterPort || candidate == kDefaultRendezvousPort) continue;  // other jobs' defaults
      if (HeldPort h = hold(candidate); h.held()) return h;
    }
  }
  HeldPort h = hold(0);
  if (!h.held()) throw std::runtime_error(std::string("cannot bind a free port: ") + std::strerror(errno));
  return h;
}

HeldPort hold_free_port() {
  std::mt19937 pick(seed());
  std::uniform_int_distribution<int> port(kLowest, std::max(kLowest, connection_ports_start() - 1));
  return hold_free_port([&] { return port(pick); });
}

int free_port(const std::function<int()>& draw) { return hold_free_port(draw).port(); }

int free_port() { return hold_free_port().port(); }

}  // namespace mr::launch
