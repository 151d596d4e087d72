// Sockets for the launch and distributed tests: free TCP ports and whether this machine has IPv6's loopback address.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <random>

namespace mrtest {

// Whether `port` can be bound on every interface now (0: any port; `chosen` gets the one bound).
inline bool bindable(int port, int* chosen = nullptr) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_ANY);
  sa.sin_port = htons(static_cast<uint16_t>(port));
  socklen_t len = sizeof sa;
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0 &&
                  getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) == 0;
  close(fd);
  if (ok && chosen) *chosen = ntohs(sa.sin_port);
  return ok;
}

// The lowest port the kernel gives connections as their local port (ip_local_port_range; Linux's 32768 if it
// cannot be read).
inline int connection_ports_start() {
  std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
  int low = 0;
  return in >> low && low > 0 ? low : 32768;
}

// A TCP port free on every interface a moment ago, for a test to hand to the programs it starts; 0 if none.
// Taken at random below the range the kernel draws connections' local ports from: a port from that range (what
// binding port 0 gives) can become, before the programs bind it, the local end of a connection that a test running
// beside this one makes — in use, yet listened on by nobody. The kernel's pick only if that space is too small.
inline int free_port() {
  const int high = connection_ports_start(), low = 10000;
  if (high - low >= 1000) {
    std::mt19937 pick(std::random_device{}() ^ static_cast<unsigned>(getpid()));
    std::uniform_int_distribution<int> port(low, high - 1);
    for (int tries = 0; tries < 200; ++tries)
      if (const int p = port(pick); bindable(p)) return p;
  }
  int chosen = 0;
  return bindable(0, &chosen) ? chosen : 0;
}

// A TCP socket listening on 127.0.0.1 at a free port (set in `port`): the descriptor, or -1.
inline int loopback_listener(int& port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof sa;
  if (bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 || listen(fd, 4) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0) {
    close(fd);
    return -1;
  }
  port = ntohs(sa.sin_port);
  return fd;
}

// Whether `port` can be bound on every interface now.
inline bool port_free(int port) { return port > 0 && bindable(port); }

// Whether this machine has the IPv6 loopback address (a container may have IPv6 switched off): the IPv6 cases
// need it and say so when it is missing.
inline bool has_ipv6_loopback() {
  int fd = socket(AF_INET6, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in6 sa{};
  sa.sin6_family = AF_INET6;
  sa.sin6_addr = in6addr_loopback;
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0;
  close(fd);
  return ok;
}

}  // namespace mrtest
