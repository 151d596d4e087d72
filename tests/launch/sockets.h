// Sockets for the launch and distributed tests: free TCP ports and whether this machine has IPv6's loopback address.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>

#include "launch/free_port.h"

namespace mrtest {

// A TCP port free on every interface a moment ago, for a test to hand to the programs it starts: the launcher's
// own pick (launch/free_port.h: drawn below the kernel's range for connections' local ports, so that a
// connection made by a test running beside this one cannot take it first); 0 if none.
inline int free_port() {
  try {
    return mr::launch::free_port();
  } catch (const std::exception&) {
    return 0;
  }
}

// free_port() for a store that binds with SO_REUSEADDR (rank 0's c10d store, a launcher's): the port stays held
// by this test process (launch/free_port.h, HeldPort) over its next kHeld picks, so that a test running beside
// this one cannot draw it before the job's rank 0 binds it (two jobs meeting in one store: session 30's CI).
// Not for a port the test or its program binds without SO_REUSEADDR.
inline int store_port() {
  constexpr size_t kHeld = 8;
  static std::mutex m;
  static std::deque<mr::launch::HeldPort> held;
  try {
    mr::launch::HeldPort h = mr::launch::hold_free_port();
    const int port = h.port();
    std::lock_guard<std::mutex> lock(m);
    held.push_back(std::move(h));
    if (held.size() > kHeld) held.pop_front();
    return port;
  } catch (const std::exception&) {
    return 0;
  }
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

// Whether `port` can be bound on every interface now (IPv4, a plain bind: a check of its own, beside the
// launcher's mr::launch::port_free).
inline bool port_free(int port) {
  if (port <= 0) return false;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_ANY);
  sa.sin_port = htons(static_cast<uint16_t>(port));
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0;
  close(fd);
  return ok;
}

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
