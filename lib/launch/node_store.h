// The launchers' store: a small TCP key-value store through which the megatron-run launchers of a multi-node job
// meet (node ranks, the workers' master address) and watch each other (heartbeats, the first failure). One
// launcher hosts it (node 0 in a static job, the --rdzv-endpoint's host with c10d); every launcher, the host
// included, is a client. It is megatron-run's own protocol, not c10d's TCPStore: one request line, one reply line
// (docs/launch.md, "Several nodes"). The workers never see it. Torch-free.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <thread>

namespace mr::launch {

// What went wrong in reaching the store, for the words a launcher adds to a StoreError's message.
enum class StoreTrouble {
  other,
  unresolved,   // connecting: the host name does not resolve
  refused,      // connecting: the host answers, nothing listens on the port (no store there yet)
  unreachable,  // connecting: no answer (timed out), or no route to the host or its network
  closed,       // a request: the store closed the connection (its launcher is gone)
  silent,       // a request: no answer within the heartbeat timeout (the store's host gone, or cut off from here)
};

// The store cannot be hosted or reached, or a request failed (the message says which and where).
struct StoreError : std::runtime_error {
  explicit StoreError(const std::string& what, bool taken = false, StoreTrouble why = StoreTrouble::other,
                      std::string cause_text = std::string())
      : std::runtime_error(what), in_use(taken), trouble(why), cause(std::move(cause_text)) {}
  bool in_use;  // hosting failed because the port is taken (another launcher hosts the store)
  StoreTrouble trouble;
  std::string cause;  // a failed connect: the last attempt's reason alone (Connection refused); else empty
};

// The node that hosts the store: a thread serving every launcher's connection. A launcher registers its
// connection as node R (hello); the store marks node R gone when that connection closes without a goodbye, or
// sends nothing for `heartbeat_timeout`, and then sets the key "fail" (unless set already) to
// "1 node R's launcher on HOST (ADDR) ..." (in an elastic job, once a launcher set the key "elastic": "lost/R" to
// "on HOST (ADDR) is gone ..." and the counter "lost" one up instead, for the launchers to restart without it).
// HOST is the key "host/R" (each launcher sets its host name there; without it, "at ADDR" alone), ADDR the address
// the store sees the launcher at. A silent launcher is said to be silent, "gone, or cut off": the store cannot tell
// a dead host from a lost link; when every other launcher falls silent at once, the store's own host is likely the
// one cut off, and the message says that. Requests and their replies (keys have no blanks; values no newline):
//   S key value  -> "V"            set
//   G key        -> "V value"|"N"  get (N: not set)
//   A key delta  -> "V n"          add to an integer (0 when not set), the new value
//   F key value  -> "V value"      set unless set already; the value it has now (the first failure wins)
//   H node run   -> "V peer-ip"    this connection is node `node`'s; `run` must be the host's run id;
//                                  the reply is the address the store sees the launcher at: IPv4 text for
//                                  an IPv4 client ("1.2.3.4", never the mapped "::ffff:1.2.3.4"), else IPv6
//                                  the first hello from another host (a peer that is not loopback) also sets
//                                  the key kReachedAtKey to the local end of that connection (this host's
//                                  address as other hosts reach it), unless set already
//   B            -> "V"            goodbye: the node is done
//   (errors)     -> "E message"
inline constexpr const char* kReachedAtKey = "net/reached_at";
// A client that sent bytes no line of this protocol holds (a control byte before it said hello: torchrun's c10d
// agent speaks TCPStore's binary protocol) is dropped, and the first such client's address is kept under this key,
// so that the launchers' "only K of N nodes joined" can say a foreign client came.
inline constexpr const char* kForeignClientKey = "net/foreign_client";

class NodeStoreServer {
 public:
  // Listens on every interface at `port` (0: a free one), IPv6 and IPv4 (bind_every_interface). Throws
  // StoreError (in_use: the port is taken).
  // `heartbeat_source` names where the timeout came from in the message about a silent launcher.
  NodeStoreServer(int port, std::string run_id, std::chrono::milliseconds heartbeat_timeout,
                  std::string heartbeat_source = "--heartbeat-timeout");
  ~NodeStoreServer();
  NodeStoreServer(const NodeStoreServer&) = delete;
  NodeStoreServer& operator=(const NodeStoreServer&) = delete;

  int port() const { return port_; }
  // Nodes registered so far, and of those the ones still there (no goodbye, connection open, heartbeat fresh).
  int registered() const { return registered_.load(); }
  int present() const { return present_.load(); }

 private:
  void serve();
  int listen_fd_ = -1, wake_[2] = {-1, -1};
  int port_ = 0;
  std::string run_id_;
  std::chrono::milliseconds heartbeat_timeout_;
  std::string heartbeat_source_;
  std::atomic<int> registered_{0}, present_{0};
  std::thread thread_;
};

// A TCP socket bound to `port` (0: a free one) on every interface: IPv6 with IPV6_V6ONLY off, so that IPv4
// clients connect too (as torchrun's store listens), or IPv4 alone where the machine has no IPv6. Returns the
// descriptor, or -1 with errno set (EADDRINUSE: the port is taken). With `reuse_address` (SO_REUSEADDR, as a
// server sets it) a port whose only users are closed connections in TIME_WAIT binds too; without it, it does not.
int bind_every_interface(int port, bool reuse_address = true);

// The local port a bound socket has.
int bound_port(int fd);

// One launcher's connection to the store. Every request waits at most `io_timeout` for its reply; until the store's
// first reply, at most until the connect deadline (a service that accepts and never answers is not the store).
class NodeStoreClient {
 public:
  // Connects to host:port, trying each of the host's addresses (IPv6 and IPv4) in the resolver's order, again
  // until `deadline` (or the earlier `stop_connecting`: the store's first reply may still take until `deadline`).
  // Throws StoreError naming host:port ("[::1]:29400") when it cannot.
  NodeStoreClient(const std::string& host, int port, std::chrono::steady_clock::time_point deadline,
                  std::chrono::milliseconds io_timeout,
                  std::optional<std::chrono::steady_clock::time_point> stop_connecting = std::nullopt);
  ~NodeStoreClient();
  NodeStoreClient(const NodeStoreClient&) = delete;
  NodeStoreClient& operator=(const NodeStoreClient&) = delete;

  void set(const std::string& key, const std::string& value);
  std::optional<std::string> get(const std::string& key);
  int64_t add(const std::string& key, int64_t delta);
  std::string set_first(const std::string& key, const std::string& value);  // F: the value that won
  std::string hello(int node, const std::string& run_id);  // the address the store sees us at
  void bye();
  std::string where() const;

 private:
  std::string request(const std::string& line);  // the reply's payload after "V"/"V "; throws on E or I/O
  void set_timeout(std::chrono::milliseconds t);
  int fd_ = -1;
  std::string host_, buffered_;
  int port_ = 0;
  std::chrono::milliseconds io_timeout_{0};
  std::optional<std::chrono::milliseconds> first_wait_;  // until the first reply: the time the deadline left
};

}  // namespace mr::launch
