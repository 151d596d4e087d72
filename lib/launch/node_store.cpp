// The launchers' store (node_store.h): the server's thread, and the client.
#include "launch/node_store.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <vector>

namespace mr::launch {

namespace {

using Clock = std::chrono::steady_clock;

std::string errno_text() { return std::strerror(errno); }

// host -> its IPv4 addresses (a literal address or a name).
std::vector<in_addr> resolve(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  std::vector<in_addr> out;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0) return out;
  for (addrinfo* a = res; a; a = a->ai_next) out.push_back(reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_addr);
  freeaddrinfo(res);
  return out;
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

std::string seconds_text(std::chrono::milliseconds ms) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", static_cast<double>(ms.count()) / 1000);
  return b;
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
};

}  // namespace

bool is_local_host(const std::string& host) {
  for (const in_addr& a : resolve(host)) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr = a;
    sa.sin_port = 0;
    bool ok = bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0;
    close(fd);
    if (ok) return true;
  }
  return false;
}

NodeStoreServer::NodeStoreServer(int port, std::string run_id, std::chrono::milliseconds heartbeat_timeout)
    : run_id_(std::move(run_id)), heartbeat_timeout_(heartbeat_timeout) {
  listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) throw StoreError("socket: " + errno_text());
  int one = 1;
  setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_ANY);
  sa.sin_port = htons(static_cast<uint16_t>(port));
  if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 || listen(listen_fd_, 128) != 0) {
    const int e = errno;
    close(listen_fd_);
    throw StoreError("cannot host the launchers' store on port " + std::to_string(port) + ": " + std::strerror(e),
                     e == EADDRINUSE);
  }
  socklen_t len = sizeof sa;
  getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&sa), &len);
  port_ = ntohs(sa.sin_port);
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
  // A registered node's connection ends: gone (a failure) unless it said goodbye.
  auto drop = [&](Conn& c, const std::string& why) {
    if (c.node >= 0 && nodes[c.node]) {
      nodes[c.node] = false;
      if (!c.bye) fail_once("node " + std::to_string(c.node) + "'s launcher " + why);
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
      return "V " + c.peer;
    }
    if (op == "B") {
      c.bye = true;
      return "V";
    }
    return "E unknown request";
  };

  for (;;) {
    std::vector<pollfd> fds{{wake_[0], POLLIN, 0}, {listen_fd_, POLLIN, 0}};
    for (const Conn& c : conns) fds.push_back({c.fd, POLLIN, 0});
    int n = poll(fds.data(), fds.size(), 100);
    if (n < 0 && errno != EINTR) return;
    if (fds[0].revents) return;  // shutting down
    const auto now = Clock::now();
    if (fds[1].revents & POLLIN) {
      sockaddr_in peer{};
      socklen_t len = sizeof peer;
      int fd = accept4(listen_fd_, reinterpret_cast<sockaddr*>(&peer), &len, SOCK_CLOEXEC);
      if (fd >= 0) {
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        char ip[INET_ADDRSTRLEN] = "";
        inet_ntop(AF_INET, &peer.sin_addr, ip, sizeof ip);
        conns.push_back(Conn{fd, "", -1, false, now, ip});
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
      size_t nl;
      while ((nl = c.in.find('\n')) != std::string::npos) {
        std::string reply = answer(c, c.in.substr(0, nl)) + "\n";
        c.in.erase(0, nl + 1);
        if (!send_all(c.fd, reply)) break;
      }
    }
    // The heartbeat: a registered launcher sends a request at least every few hundred milliseconds.
    for (Conn& c : conns)
      if (c.fd >= 0 && c.node >= 0 && !c.bye && now - c.last > heartbeat_timeout_)
        drop(c, "sent no heartbeat for " + seconds_text(heartbeat_timeout_) + " s (--heartbeat-timeout)");
    std::erase_if(conns, [](const Conn& c) { return c.fd < 0; });
  }
}

NodeStoreClient::NodeStoreClient(const std::string& host, int port, Clock::time_point deadline,
                                 std::chrono::milliseconds io_timeout)
    : host_(host), port_(port) {
  std::string last = "cannot resolve " + host;
  for (;;) {
    for (const in_addr& a : resolve(host)) {
      int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (fd < 0) throw StoreError("socket: " + errno_text());
      sockaddr_in sa{};
      sa.sin_family = AF_INET;
      sa.sin_addr = a;
      sa.sin_port = htons(static_cast<uint16_t>(port));
      if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0) {
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        timeval tv{static_cast<time_t>(io_timeout.count() / 1000),
                   static_cast<suseconds_t>(io_timeout.count() % 1000 * 1000)};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        fd_ = fd;
        return;
      }
      last = errno_text();
      close(fd);
    }
    if (Clock::now() >= deadline) throw StoreError("cannot reach the launchers' store at " + where() + ": " + last);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
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
      const std::string why = r == 0 ? "it closed the connection"
                              : (errno == EAGAIN || errno == EWOULDBLOCK) ? "no answer in time"
                                                                         : errno_text();
      close(fd_);
      fd_ = -1;
      throw StoreError("lost the launchers' store at " + where() + " (" + why + ")");
    }
    buffered_.append(buf, static_cast<size_t>(r));
  }
  std::string reply = buffered_.substr(0, nl);
  buffered_.erase(0, nl + 1);
  if (reply.rfind("E ", 0) == 0) throw StoreError(reply.substr(2));
  if (reply == "N") throw std::out_of_range("not set");
  return reply.size() > 2 ? reply.substr(2) : "";
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
  return std::stoll(request("A " + key + " " + std::to_string(delta)));
}

std::string NodeStoreClient::set_first(const std::string& key, const std::string& value) {
  return request("F " + key + " " + one_line(value));
}

std::string NodeStoreClient::hello(int node, const std::string& run_id) {
  return request("H " + std::to_string(node) + " " + one_line(run_id));
}

void NodeStoreClient::bye() { request("B"); }

}  // namespace mr::launch
