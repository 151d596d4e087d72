// The launchers' store (node_store.h): the server's thread, and the client.
#include "launch/node_store.h"

#include "launch/local_address.h"
#include "util/text.h"

#include "launch/endpoint.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <map>
#include <vector>

namespace mr::launch {

namespace {

using Clock = std::chrono::steady_clock;

std::string errno_text() { return std::strerror(errno); }

// An address as text (numeric_address), "?" when the system cannot write it.
std::string address_text(const sockaddr_storage& sa, socklen_t len) { return numeric_address(sa, len).value_or("?"); }

// Connects `fd` to `a` within `limit` (a blocking connect to an address that does not answer can take minutes):
// 0, or the errno.
int connect_within(int fd, const Address& a, std::chrono::milliseconds limit) {
  const int flags = fcntl(fd, F_GETFL);
  fcntl(fd, F_SETFL, flags | O_NONBLOCK);
  int err = 0;
  if (connect(fd, reinterpret_cast<const sockaddr*>(&a.sa), a.len) != 0) {
    err = errno;
    if (err == EINPROGRESS || err == EINTR) {
      pollfd p{fd, POLLOUT, 0};
      int n;
      do n = poll(&p, 1, static_cast<int>(limit.count()));
      while (n < 0 && errno == EINTR);
      if (n == 0) {
        err = ETIMEDOUT;
      } else {
        socklen_t l = sizeof err;
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &l) != 0) err = errno;
      }
    }
  }
  fcntl(fd, F_SETFL, flags);
  return err;
}

// Writes all of `s` (a reply or a request line); false on an error.
bool send_all(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    off += static_cast<size_t>(n);
  }
  return true;
}

std::string one_line(std::string v) {
  for (char& c : v)
    if (c == '\n' || c == '\r') c = ' ';
  return v;
}

struct Conn {
  int fd = -1;
  std::string in;
  int node = -1;  // -1: not registered
  bool bye = false;
  Clock::time_point last;
  std::string peer;
  bool answered = false;  // a request of this connection has been answered (its first line was one of ours)
};

}  // namespace

int bind_every_interface(int port, bool reuse_address) {
  const int one = 1, off = 0;
  // IPv6, dual-stack: IPv4 clients arrive as IPv4-mapped addresses.
  int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd >= 0) {
    if (reuse_address) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    const bool dual = setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off) == 0;
    sockaddr_in6 sa{};
    sa.sin6_family = AF_INET6;
    sa.sin6_addr = in6addr_any;
    sa.sin6_port = htons(static_cast<uint16_t>(port));
    if (dual && bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0) return fd;
    const int e = errno;
    close(fd);
    if (dual && e == EADDRINUSE) {
      errno = e;
      return -1;
    }
  }
  // No IPv6 here (no AF_INET6 sockets, or no IPv6 address to bind): IPv4 alone.
  fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (reuse_address) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_ANY);
  sa.sin_port = htons(static_cast<uint16_t>(port));
  if (bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0) return fd;
  const int e = errno;
  close(fd);
  errno = e;
  return -1;
}

int bound_port(int fd) {
  sockaddr_storage sa{};
  socklen_t len = sizeof sa;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0) return 0;
  return ntohs(sa.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6&>(sa).sin6_port
                                        : reinterpret_cast<sockaddr_in&>(sa).sin_port);
}

NodeStoreServer::NodeStoreServer(int port, std::string run_id, std::chrono::milliseconds heartbeat_timeout,
                                 std::string heartbeat_source)
    : run_id_(std::move(run_id)), heartbeat_timeout_(heartbeat_timeout), heartbeat_source_(std::move(heartbeat_source)) {
  listen_fd_ = bind_every_interface(port);
  if (listen_fd_ < 0 || listen(listen_fd_, 128) != 0) {
    const int e = errno;
    if (listen_fd_ >= 0) close(listen_fd_);
    throw StoreError("cannot host the launchers' store on port " + std::to_string(port) + ": " + std::strerror(e),
                     e == EADDRINUSE);
  }
  port_ = bound_port(listen_fd_);
  if (pipe2(wake_, O_CLOEXEC) != 0) {
    close(listen_fd_);
    throw StoreError("pipe: " + errno_text());
  }
  thread_ = std::thread([this] { serve(); });
}

NodeStoreServer::~NodeStoreServer() {
  char b = 0;
  (void)!write(wake_[1], &b, 1);
  if (thread_.joinable()) thread_.join();
  close(listen_fd_);
  close(wake_[0]);
  close(wake_[1]);
}

void NodeStoreServer::serve() {
  std::map<std::string, std::string> kv;
  std::vector<Conn> conns;
  std::map<int, bool> nodes;  // registered node -> still there
  auto fail_once = [&](const std::string& why) {
    if (!kv.count("fail")) kv["fail"] = "1 " + why;
  };
  auto count = [&] {
    int present = 0;
    for (const auto& [n, here] : nodes) present += here;
    registered_ = static_cast<int>(nodes.size());
    present_ = present;
  };
  // Where a registered launcher runs: "on HOST (ADDR)", or "at ADDR" before it has said its host name.
  auto where_is = [&](const Conn& c) {
    auto it = kv.find("host/" + std::to_string(c.node));
    return it == kv.end() || it->second.empty() ? "at " + c.peer : "on " + it->second + " (" + c.peer + ")";
  };
  // A registered node's connection ends: gone (a failure) unless it said goodbye. In an elastic job (the key
  // "elastic" set) the launchers decide: "lost/N" says why and the counter "lost" counts them.
  auto drop = [&](Conn& c, const std::string& what) {
    if (c.node >= 0 && nodes[c.node]) {
      nodes[c.node] = false;
      const std::string why = where_is(c) + " " + what;
      if (!c.bye && kv.count("elastic")) {
        kv["lost/" + std::to_string(c.node)] = why;
        long long lost = 0;
        if (auto it = kv.find("lost"); it != kv.end()) try {
            lost = std::stoll(it->second);
          } catch (const std::exception&) {
            lost = 0;  // not a count (a client set it): start again
          }
        kv["lost"] = std::to_string(lost + 1);
      } else if (!c.bye) {
        kv["launcher-lost"] = std::to_string(c.node);  // the failure is a lost launcher (no restart: NodeGroup::poll)
        fail_once("node " + std::to_string(c.node) + "'s launcher " + why);
      }
    }
    close(c.fd);
    c.fd = -1;
    count();
  };
  auto answer = [&](Conn& c, const std::string& line) -> std::string {
    const size_t sp = line.find(' ');
    const std::string op = line.substr(0, sp);
    const std::string rest = sp == std::string::npos ? "" : line.substr(sp + 1);
    const size_t sp2 = rest.find(' ');
    const std::string key = rest.substr(0, sp2);
    const std::string arg = sp2 == std::string::npos ? "" : rest.substr(sp2 + 1);
    if (op == "S") {
      kv[key] = arg;
      return "V";
    }
    if (op == "F") {
      if (!kv.count(key)) kv[key] = arg;
      return "V " + kv[key];
    }
    if (op == "G") {
      auto it = kv.find(key);
      return it == kv.end() ? "N" : "V " + it->second;
    }
    if (op == "A") {
      long long v = 0, d = 0;
      try {
        if (kv.count(key)) v = std::stoll(kv[key]);
        d = std::stoll(arg);
      } catch (const std::exception&) {
        return "E not an integer";
      }
      kv[key] = std::to_string(v + d);
      return "V " + kv[key];
    }
    if (op == "H") {
      int node = -1;
      try {
        node = std::stoi(key);
      } catch (const std::exception&) {
        return "E bad node";
      }
      if (arg != run_id_)
        return "E this store belongs to run '" + run_id_ + "', not '" + arg + "' (--rdzv-id)";
      if (nodes.count(node))
        return "E node rank " + std::to_string(node) + " has joined already (two launchers with the same --node-rank?)";
      c.node = node;
      nodes[node] = true;
      count();
      // The first launcher from another host: the local end of its connection is this host's address as other
      // hosts reach it (c10d's node 0 publishes it when it reaches the store over loopback: local_address.h).
      if (!kv.count(kReachedAtKey) && !is_loopback_address(c.peer)) {
        sockaddr_storage local{};
        socklen_t len = sizeof local;
        kv[kReachedAtKey] =
            getsockname(c.fd, reinterpret_cast<sockaddr*>(&local), &len) == 0 ? address_text(local, len) : "?";
      }
      return "V " + c.peer;
    }
    if (op == "B") {
      c.bye = true;
      return "V";
    }
    return "E unknown request";
  };

  std::vector<Clock::time_point> dropped_silent;  // when launchers were dropped as silent (recent ones only)
  for (;;) {
    std::vector<pollfd> fds{{wake_[0], POLLIN, 0}, {listen_fd_, POLLIN, 0}};
    for (const Conn& c : conns) fds.push_back({c.fd, POLLIN, 0});
    int n = poll(fds.data(), fds.size(), 100);
    if (n < 0 && errno != EINTR) return;
    if (fds[0].revents) return;  // shutting down
    const auto now = Clock::now();
    if (fds[1].revents & POLLIN) {
      sockaddr_storage peer{};
      socklen_t len = sizeof peer;
      int fd = accept4(listen_fd_, reinterpret_cast<sockaddr*>(&peer), &len, SOCK_CLOEXEC);
      if (fd >= 0) {
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        conns.push_back(Conn{fd, "", -1, false, now, address_text(peer, len)});
      }
    }
    for (size_t i = 2; i < fds.size(); ++i) {
      Conn& c = conns[i - 2];
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[4096];
      ssize_t r = recv(c.fd, buf, sizeof buf, 0);
      if (r <= 0) {
        if (r < 0 && errno == EINTR) continue;
        drop(c, "is gone (its connection to the store closed)");
        continue;
      }
      c.last = now;
      c.in.append(buf, static_cast<size_t>(r));
      // A first request that does not start with one of this protocol's letters: another program, such as a
      // torchrun agent (TCPStore's binary messages start with a query-type byte). It is dropped, and the launchers
      // can name it. Only the first byte is judged: a launcher's own lines may carry any byte after their letter
      // (a refusal's text, a run id).
      const bool foreign = !c.answered && (c.in.front() == '\0' || std::strchr("SFGAHB", c.in.front()) == nullptr);
      if (foreign) {
        if (!kv.count(kForeignClientKey)) kv[kForeignClientKey] = c.peer;
        close(c.fd);
        c.fd = -1;
        continue;
      }
      size_t nl;
      while ((nl = c.in.find('\n')) != std::string::npos) {
        std::string reply = answer(c, c.in.substr(0, nl)) + "\n";
        c.in.erase(0, nl + 1);
        c.answered = true;
        if (!send_all(c.fd, reply)) break;
      }
    }
    // The heartbeat: a registered launcher sends a request at least every few hundred milliseconds. A silent one
    // may be dead or cut off from here: the store cannot tell. When every other launcher is silent at once (each
    // for half the timeout at least, as after a cut of this host's link), the likely cause is this host.
    const std::string silent = "sent no heartbeat for " + seconds_text(heartbeat_timeout_) +
                               " (" + heartbeat_source_ + "): silent (gone, or cut off from the store's host)";
    // Counted once, before any is dropped now, and counting those dropped as silent within the timeout:
    // launchers that fell silent together (their last requests a few hundred ms apart) are dropped one by one, and
    // each gets the same words, whichever order and loop they are dropped in.
    std::erase_if(dropped_silent, [&](Clock::time_point t) { return now - t > heartbeat_timeout_; });
    int quiet = static_cast<int>(dropped_silent.size()), live = 0;  // silent for half the timeout, and the others
    for (const Conn& o : conns)
      if (o.fd >= 0 && o.node >= 0 && !o.bye) ++(now - o.last > heartbeat_timeout_ / 2 ? quiet : live);
    const bool all_but_one = quiet >= 2 && live == 1;  // the one left: the store's own launcher, on this host
    for (Conn& c : conns) {
      if (c.fd < 0 || c.node < 0 || c.bye || now - c.last <= heartbeat_timeout_) continue;
      drop(c, silent + (all_but_one ? "; every other launcher fell silent at the same time: the store's host is "
                                      "likely the one cut off from the network"
                                    : ""));
      dropped_silent.push_back(now);
    }
    std::erase_if(conns, [](const Conn& c) { return c.fd < 0; });
  }
}

NodeStoreClient::NodeStoreClient(const std::string& host, int port, Clock::time_point deadline,
                                 std::chrono::milliseconds io_timeout, std::optional<Clock::time_point> stop_connecting)
    : host_(host), port_(port) {
  const Clock::time_point stop = stop_connecting ? std::min(*stop_connecting, deadline) : deadline;
  std::string last;
  StoreTrouble trouble = StoreTrouble::other;
  for (;;) {
    const std::vector<Address> addresses = resolve(host, port, &last);
    if (addresses.empty()) trouble = StoreTrouble::unresolved;
    std::string failures;
    bool refused = false;
    for (const Address& a : addresses) {
      int fd = socket(a.family(), SOCK_STREAM | SOCK_CLOEXEC, 0);
      int err = fd < 0 ? errno : 0;
      if (fd >= 0) {
        // Each attempt waits at most until the end of the connecting (at least 100 ms) and at most io_timeout, so
        // that an address that never answers leaves time for the next one.
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(stop - Clock::now());
        err = connect_within(fd, a, std::clamp(left, std::chrono::milliseconds(100),
                                               std::max(io_timeout, std::chrono::milliseconds(100))));
      }
      if (err == 0) {
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        fd_ = fd;
        io_timeout_ = io_timeout;
        // The first reply within what the deadline leaves (at least 1 s), not a whole io_timeout: a service that
        // accepts and never answers fails the join in time.
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
        first_wait_ = std::clamp(left, std::chrono::milliseconds(1000), std::max(io_timeout, std::chrono::milliseconds(1000)));
        set_timeout(std::min(*first_wait_, io_timeout));
        return;
      }
      if (fd >= 0) close(fd);
      refused |= err == ECONNREFUSED;
      // One address: its error, as before; several: each address with its error.
      const std::string what = std::strerror(err);
      failures += (failures.empty() ? "" : "; ") +
                  (addresses.size() > 1 ? address_text(a.sa, a.len) + ": " + what : what);
    }
    // Some address refused: a host is there, with nothing on the port yet. Else none answered in time, or there
    // is no route (a wrong address, a firewall that drops, the network).
    if (!failures.empty()) last = failures, trouble = refused ? StoreTrouble::refused : StoreTrouble::unreachable;
    if (Clock::now() >= stop)
      throw StoreError("cannot reach the launchers' store at " + where() + ": " + last, false, trouble, last);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

std::string NodeStoreClient::where() const { return join_host_port(host_, port_); }

void NodeStoreClient::set_timeout(std::chrono::milliseconds t) {
  timeval tv{static_cast<time_t>(t.count() / 1000), static_cast<suseconds_t>(t.count() % 1000 * 1000)};
  setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

NodeStoreClient::~NodeStoreClient() {
  if (fd_ >= 0) close(fd_);
}

std::string NodeStoreClient::request(const std::string& line) {
  if (fd_ < 0 || !send_all(fd_, line + "\n"))
    throw StoreError("lost the launchers' store at " + where() + " (" + errno_text() + ")");
  size_t nl;
  while ((nl = buffered_.find('\n')) == std::string::npos) {
    char buf[4096];
    ssize_t r = recv(fd_, buf, sizeof buf, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      const bool reset = r < 0 && errno == ECONNRESET;
      const bool silent = r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
      const std::string why = r == 0 ? "it closed the connection" : silent ? "no answer in time" : errno_text();
      close(fd_);
      fd_ = -1;
      // Closed or reset at the first request, before any answer: not a launchers' store (torch 1.13's TCPStore
      // resets a connection whose first bytes it cannot read).
      if (first_wait_ && (r == 0 || reset))
        throw StoreError("the service at " + where() + " " + (r == 0 ? "closed" : "reset") +
                         " the connection at the first request, without an answer: not a megatron-run launchers' "
                         "store (a torchrun agent's c10d TCPStore, for one: every node of a megatron-run job runs "
                         "megatron-run), or a store whose launcher just stopped");
      if (first_wait_ && silent)  // it never answered: not a store that was lost, a service that is not one
        throw StoreError("the service at " + where() + " accepted the connection but did not answer in " +
                         seconds_text(*first_wait_) + ": another service on that port (is --rdzv-endpoint / --master-port another service's? a "
                         "torchrun agent's c10d store is one: every node of a megatron-run job runs megatron-run), "
                         "or a launchers' store whose launcher is stopped");
      throw StoreError("lost the launchers' store at " + where() + " (" + why + ")", false,
                       r == 0 ? StoreTrouble::closed : silent ? StoreTrouble::silent : StoreTrouble::other);
    }
    buffered_.append(buf, static_cast<size_t>(r));
  }
  std::string reply = buffered_.substr(0, nl);
  buffered_.erase(0, nl + 1);
  if (first_wait_) {  // the store answers: from now on each request has the whole io_timeout
    first_wait_.reset();
    set_timeout(io_timeout_);
  }
  if (reply.rfind("E ", 0) == 0) throw StoreError(reply.substr(2));
  if (reply == "N") throw std::out_of_range("not set");
  if (reply == "V") return "";
  if (reply.rfind("V ", 0) == 0) return reply.substr(2);
  // Something else listens there (a web server, another program's store): it is not ours.
  close(fd_);
  fd_ = -1;
  throw StoreError("the service at " + where() + " is not a megatron-run launchers' store (it answered '" +
                   printable(abbreviate(reply, 60)) + "'); is --rdzv-endpoint / --master-port another service's?");
}

void NodeStoreClient::set(const std::string& key, const std::string& value) { request("S " + key + " " + one_line(value)); }

std::optional<std::string> NodeStoreClient::get(const std::string& key) {
  try {
    return request("G " + key);
  } catch (const std::out_of_range&) {
    return std::nullopt;
  }
}

int64_t NodeStoreClient::add(const std::string& key, int64_t delta) {
  const std::string reply = request("A " + key + " " + std::to_string(delta));
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(reply.data(), reply.data() + reply.size(), v);
  if (ec != std::errc() || end != reply.data() + reply.size())
    throw StoreError("the launchers' store at " + where() + " answered '" + printable(abbreviate(reply, 60)) +
                     "' for a count");
  return v;
}

std::string NodeStoreClient::set_first(const std::string& key, const std::string& value) {
  return request("F " + key + " " + one_line(value));
}

std::string NodeStoreClient::hello(int node, const std::string& run_id) {
  return request("H " + std::to_string(node) + " " + one_line(run_id));
}

void NodeStoreClient::bye() { request("B"); }

}  // namespace mr::launch
