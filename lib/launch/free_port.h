// Free TCP ports the launcher hands out: a one-node job's MASTER_PORT (rank 0's store binds it) and, in a c10d
// job, node 0's workers' MASTER_PORT, each held (HeldPort) while the workers run. Also what the launch and distributed tests give the programs they start.
#pragma once

#include <functional>

namespace mr::launch {

// The lowest port the kernel gives outgoing connections as their local port (the first number of
// /proc/sys/net/ipv4/ip_local_port_range; Linux's default 32768 when it cannot be read).
int connection_ports_start();

// Whether TCP port `port` can be bound now on every interface (IPv6 and IPv4) by a program that does not set
// SO_REUSEADDR: not in use, and not held in TIME_WAIT by a connection closed in the last minute or so.
bool port_free(int port);

// Why a server setting SO_REUSEADDR, as rank 0's store does, could not listen on TCP port `port` now on every
// interface: 0 when it could (and for a port that cannot be tried: 0 or out of range), else the errno of the
// failed bind (EADDRINUSE: port_held; EACCES: port_forbidden). One bind, for a caller that tells both apart.
int store_bind_error(int port);

// Whether another socket holds TCP port `port` so that a server setting SO_REUSEADDR, as rank 0's store does
// (torch's TCPStore, megatron-run's own), cannot bind it on every interface: someone listens on it, or holds it
// bound without SO_REUSEADDR. A port whose only users are closed connections in TIME_WAIT is not held (that
// server binds it); neither is one that cannot be tried (port 0, out of range, no socket at all).
bool port_held(int port);

// Whether this process may not bind TCP port `port` for want of privilege (EACCES): a port below
// net.ipv4.ip_unprivileged_port_start, for a process without CAP_NET_BIND_SERVICE (any user but root, usually).
bool port_forbidden(int port);

// net.ipv4.ip_unprivileged_port_start: the lowest port any process may bind (1024 when it cannot be read).
int unprivileged_port_start();

// A TCP port that was port_free a moment ago; throws std::runtime_error when none is. It is drawn at random below
// connection_ports_start() (from 10000 up), not taken from the kernel's pick for port 0: between this pick and the
// bind of the program it is handed to, a port of the kernel's range can become the local end of some other
// program's new connection (in use, and listened on by nobody), which fails that bind. Only when that space is
// too small (under 1000 ports) or none of 200 draws is free is the kernel's pick used. Never 29400 or 29500, the
// default ports of torchrun's c10d endpoint and master, which another job on the machine may be about to bind.
int free_port();

// free_port() with its candidates taken from `draw` (each call one port of [10000, connection_ports_start()))
// instead of a seeded generator: what the test of the exclusions and the fallback drives.
int free_port(const std::function<int()>& draw);

// A free port kept from other jobs until released: a socket bound to it on every interface, not listening, with
// SO_REUSEADDR set after the bind. Another launcher's draw (free_port, port_free: binds without SO_REUSEADDR)
// finds it taken and draws again; a store that sets SO_REUSEADDR, as torch's TCPStore does (1.13 and 2.x, rank
// 0's store or torchrun's agent's), binds and listens on it. So two jobs started at once on one machine cannot be
// handed the same port in the moment between the launcher's pick and rank 0's bind (they would meet in one store:
// session 30's CI). A program that binds the port without SO_REUSEADDR cannot while it is held. Move-only;
// closing the socket releases the port.
class HeldPort {
 public:
  HeldPort() = default;
  HeldPort(int port, int fd) : port_(port), fd_(fd) {}
  HeldPort(HeldPort&& o) noexcept : port_(o.port_), fd_(o.fd_) { o.fd_ = -1; }
  HeldPort& operator=(HeldPort&& o) noexcept;
  HeldPort(const HeldPort&) = delete;
  HeldPort& operator=(const HeldPort&) = delete;
  ~HeldPort() { release(); }
  int port() const { return port_; }  // 0: none held
  bool held() const { return fd_ >= 0; }
  void release();  // lets the port go (the number stays readable)

 private:
  int port_ = 0;
  int fd_ = -1;
};

// `port` held (HeldPort) when it is free now (port_free), else a HeldPort that holds nothing.
HeldPort hold_port(int port);

// free_port(), the port held (HeldPort) rather than let go: what a launcher hands its workers as MASTER_PORT.
// Throws std::runtime_error as free_port() does.
HeldPort hold_free_port();
HeldPort hold_free_port(const std::function<int()>& draw);

}  // namespace mr::launch
