// The launchers' store (launch/node_store.h): its operations, the registration of nodes, and how it marks a
// node gone (a connection closed without goodbye, a silent launcher) with the first failure; over IPv6 (::1)
// and IPv4 against the same dual-stack server, and which hosts are this machine's.
#include <catch2/catch.hpp>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "launch/local_address.h"
#include "launch/node_store.h"
#include "sockets.h"

using namespace std::chrono_literals;
using mr::launch::NodeStoreClient;
using mr::launch::NodeStoreServer;
using mr::launch::StoreError;
using mrtest::has_ipv6_loopback;

namespace {

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

std::unique_ptr<NodeStoreClient> connect(const NodeStoreServer& s, const std::string& host = "127.0.0.1") {
  return std::make_unique<NodeStoreClient>(host, s.port(), std::chrono::steady_clock::now() + 5s, 5000ms);
}

// Waits (at most 5 s) until `pred` holds.
template <class P>
bool eventually(P pred) {
  for (int i = 0; i < 500; ++i) {
    if (pred()) return true;
    std::this_thread::sleep_for(10ms);
  }
  return pred();
}


}  // namespace

TEST_CASE("the launchers' store: set, get, add, set-if-unset", "[launch][store]") {
  NodeStoreServer server(0, "run1", 10000ms);
  auto a = connect(server), b = connect(server);
  CHECK_FALSE(a->get("k").has_value());
  a->set("k", "a value with spaces");
  CHECK(b->get("k") == "a value with spaces");
  CHECK(a->add("n", 1) == 1);
  CHECK(b->add("n", 1) == 2);
  CHECK(a->add("n", 0) == 2);
  CHECK(a->set_first("fail", "7 first") == "7 first");
  CHECK(b->set_first("fail", "1 second") == "7 first");
  a->set("multi", "line\nbreak");
  CHECK(b->get("multi") == "line break");  // one line per reply
}

TEST_CASE("the launchers' store: nodes register once, under the host's run id", "[launch][store]") {
  NodeStoreServer server(0, "run1", 10000ms);
  auto a = connect(server), b = connect(server), c = connect(server);
  CHECK(a->hello(0, "run1") == "127.0.0.1");  // the address the store sees
  CHECK_THROWS_WITH(b->hello(0, "run1"), Catch::Contains("node rank 0 has joined already"));
  CHECK_THROWS_WITH(c->hello(1, "other"), Catch::Contains("belongs to run 'run1', not 'other'"));
  CHECK(server.registered() == 1);
  // Every launcher came over loopback: no address of this host as other hosts reach it is recorded (the two-host
  // case, where it is: tests/launch/netns_two_hosts.sh).
  CHECK_FALSE(a->get(mr::launch::kReachedAtKey).has_value());
}

TEST_CASE("the launchers' store: the first launcher from a non-loopback address records where it reached this host",
          "[launch][store]") {
  // This host's address toward a documentation network (192.0.2.1, TEST-NET-1): a non-loopback address of an
  // interface, where the host has one with a route.
  const std::optional<std::string> mine = mr::launch::local_address_toward("192.0.2.1");
  if (!mine || mr::launch::is_loopback_address(*mine)) {
    WARN("no non-loopback address with a route here: net/reached_at is checked only over loopback (above)");
    return;
  }
  NodeStoreServer server(0, "r", 10000ms);
  auto local = connect(server);  // over loopback first: not recorded
  local->hello(0, "r");
  CHECK_FALSE(local->get(mr::launch::kReachedAtKey).has_value());
  auto other = connect(server, *mine);  // as a launcher on another host would arrive: at a non-loopback address
  CHECK(other->hello(1, "r") == *mine);
  CHECK(local->get(mr::launch::kReachedAtKey) == mine);  // the local end of that connection
}

TEST_CASE("the launchers' store: a node gone without goodbye, or silent, fails the job", "[launch][store]") {
  NodeStoreServer server(0, "r", 400ms);
  auto watcher = connect(server);
  SECTION("a goodbye first: not a failure") {
    auto n1 = connect(server);
    n1->hello(1, "r");
    n1->bye();
    n1.reset();
    REQUIRE(eventually([&] { return server.present() == 0; }));
    CHECK_FALSE(watcher->get("fail").has_value());
  }
  SECTION("the connection closes") {
    auto n1 = connect(server);
    n1->hello(1, "r");
    n1.reset();
    REQUIRE(eventually([&] { return watcher->get("fail").has_value(); }));
    // Named by the address the store saw it at (it never said its host name).
    CHECK(*watcher->get("fail") == "1 node 1's launcher at 127.0.0.1 is gone (its connection to the store closed)");
  }
  SECTION("no request for longer than the heartbeat timeout: silent, named by its host and address") {
    // (The server was made without a source for its bound: the message names the option.)
    auto n1 = connect(server);
    n1->hello(1, "r");
    n1->set("host/1", "node-b");  // what a launcher sets after its hello (launch/node_group.cpp)
    REQUIRE(eventually([&] { return watcher->get("fail").has_value(); }));
    CHECK(*watcher->get("fail") == "1 node 1's launcher on node-b (127.0.0.1) sent no heartbeat for 0.4 s "
                                   "(--heartbeat-timeout): silent (gone, or cut off from the store's host)");
    try {
      n1->get("x");
      FAIL("the store kept the silent node's connection");
    } catch (const StoreError& e) {
      CHECK(e.trouble == mr::launch::StoreTrouble::closed);  // the store closed it
    }
  }
  SECTION("every other launcher silent at once: the store's own host is likely the one cut off") {
    watcher->hello(0, "r");  // the store's own launcher: it keeps asking (eventually() below)
    auto n1 = connect(server), n2 = connect(server);
    n1->hello(1, "r");
    n2->hello(2, "r");
    REQUIRE(eventually([&] { return watcher->get("fail").has_value(); }));
    CHECK(has(*watcher->get("fail"), "silent (gone, or cut off from the store's host); every other launcher fell "
                                     "silent at the same time: the store's host is likely the one cut off"));
  }
  SECTION("elastic: every launcher that fell silent with the others gets the guess, whichever is dropped first") {
    watcher->set("elastic", "1");  // the store records lost/N instead of failing the job
    watcher->hello(0, "r");
    auto n1 = connect(server), n2 = connect(server);
    n1->hello(1, "r");
    std::this_thread::sleep_for(60ms);  // silent apart by more than a loop of the store: dropped one at a time
    n2->hello(2, "r");
    REQUIRE(eventually([&] { return watcher->get("lost") == std::optional<std::string>("2"); }));
    for (const char* key : {"lost/1", "lost/2"}) {
      INFO(key);
      REQUIRE(watcher->get(key).has_value());
      CHECK_THAT(*watcher->get(key), Catch::Contains("the store's host is likely the one cut off"));
    }
  }
  SECTION("one of two others silent: no such guess") {
    watcher->hello(0, "r");
    auto n1 = connect(server), n2 = connect(server);
    n1->hello(1, "r");
    n2->hello(2, "r");
    REQUIRE(eventually([&] {
      n2->get("x");  // node 2 keeps its heartbeat
      return watcher->get("fail").has_value();
    }));
    CHECK(watcher->get("fail")->rfind("1 node 1's launcher at 127.0.0.1 sent no heartbeat", 0) == 0);
    CHECK_FALSE(has(*watcher->get("fail"), "every other launcher"));
  }
}

TEST_CASE("the launchers' store: why it cannot be reached", "[launch][store]") {
  const auto soon = std::chrono::steady_clock::now() + 300ms;
  try {
    NodeStoreClient("127.0.0.1", 1, soon, 1000ms);  // nothing listens on port 1
    FAIL("connected to port 1");
  } catch (const StoreError& e) {
    CHECK(e.trouble == mr::launch::StoreTrouble::refused);
    CHECK(has(e.what(), "Connection refused"));
  }
  try {
    NodeStoreClient("no-such-host.invalid", 29400, soon, 1000ms);  // .invalid never resolves (RFC 2606)
    FAIL("resolved no-such-host.invalid");
  } catch (const StoreError& e) {
    CHECK(e.trouble == mr::launch::StoreTrouble::unresolved);
    CHECK(has(e.what(), "cannot resolve no-such-host.invalid"));
  }
}

TEST_CASE("the launchers' store: a second host on the same port is told the port is taken", "[launch][store]") {
  NodeStoreServer server(0, "r", 1000ms);
  try {
    NodeStoreServer again(server.port(), "r", 1000ms);
    FAIL("a second store bound the same port");
  } catch (const StoreError& e) {
    CHECK(e.in_use);
  }
  CHECK_THROWS_WITH(NodeStoreClient("127.0.0.1", 1, std::chrono::steady_clock::now(), 1000ms),
                    Catch::Contains("cannot reach the launchers' store at 127.0.0.1:1"));
}

TEST_CASE("the launchers' store over IPv6 and IPv4 at once (dual stack)", "[launch][store][ipv6]") {
  if (!has_ipv6_loopback()) {
    WARN("this machine has no IPv6 loopback address (::1): the store over IPv6 is not tested here");
    return;
  }
  NodeStoreServer server(0, "run6", 10000ms);
  auto v6 = connect(server, "::1"), v4 = connect(server, "127.0.0.1");
  CHECK(v6->where() == "[::1]:" + std::to_string(server.port()));
  // The address each launcher is seen at: IPv6 text for an IPv6 client, plain IPv4 (not ::ffff:127.0.0.1) for
  // an IPv4 client of the IPv6 socket.
  CHECK(v6->hello(0, "run6") == "::1");
  CHECK(v4->hello(1, "run6") == "127.0.0.1");
  CHECK(server.registered() == 2);
  v6->set("k", "from v6");
  CHECK(v4->get("k") == "from v6");
  CHECK(v4->add("n", 2) == 2);
  CHECK(v6->add("n", 3) == 5);
  // The watch works across both: the IPv6 node leaving without goodbye fails the job for the IPv4 one.
  v6.reset();
  REQUIRE(eventually([&] { return v4->get("fail").has_value(); }));
  CHECK(*v4->get("fail") == "1 node 0's launcher at ::1 is gone (its connection to the store closed)");
}

TEST_CASE("the launchers' store: a name that resolves to IPv6 and IPv4 addresses; an IPv6 port taken",
          "[launch][store][ipv6]") {
  NodeStoreServer server(0, "r", 10000ms);
  // "localhost" may resolve to ::1 and 127.0.0.1: the client tries them in turn until one connects.
  auto c = connect(server, "localhost");
  const std::string seen = c->hello(0, "r");
  CHECK((seen == "::1" || seen == "127.0.0.1"));
  try {
    NodeStoreServer again(server.port(), "r", 1000ms);
    FAIL("a second store bound the same port");
  } catch (const StoreError& e) {
    CHECK(e.in_use);
  }
  if (has_ipv6_loopback())
    CHECK_THROWS_WITH(NodeStoreClient("::1", 1, std::chrono::steady_clock::now(), 1000ms),
                      Catch::Contains("cannot reach the launchers' store at [::1]:1: Connection refused"));
  CHECK_THROWS_WITH(NodeStoreClient("no-such-host.invalid", 1, std::chrono::steady_clock::now(), 1000ms),
                    Catch::Contains("cannot reach the launchers' store at no-such-host.invalid:1: cannot resolve "
                                    "no-such-host.invalid"));
}

TEST_CASE("node store: another service on the port is named, not taken for the store", "[launch][store]") {
  // A listener that answers each connection's first line with `reply` (a web server, another program's store).
  for (const char* reply_text : {"HTTP/1.0 400 Bad Request\r\n", "ok\n", "\n"}) {
    const std::string reply = reply_text;
    INFO(reply);
    int port = 0;
    const int fd = mrtest::loopback_listener(port);
    REQUIRE(fd >= 0);
    std::thread server([&] {
      int c = accept(fd, nullptr, nullptr);
      if (c < 0) return;
      char buf[256];
      if (recv(c, buf, sizeof buf, 0) > 0) (void)!send(c, reply.data(), reply.size(), 0);
      std::this_thread::sleep_for(200ms);
      close(c);
    });
    NodeStoreClient client("127.0.0.1", port, std::chrono::steady_clock::now() + 5s, 5000ms);
    CHECK_THROWS_WITH(client.add("lost", 0),
                      Catch::Contains("is not a megatron-run launchers' store (it answered '") &&
                          Catch::Contains("--rdzv-endpoint"));
    server.join();
    close(fd);
  }
  // A service that accepts and never answers: the first request fails within what the join deadline leaves (here
  // 2 s), naming a silent service, not after the 30 s io timeout as "lost".
  int port = 0;
  const int fd = mrtest::loopback_listener(port);  // the kernel accepts; nobody reads
  REQUIRE(fd >= 0);
  const auto t0 = std::chrono::steady_clock::now();
  NodeStoreClient client("127.0.0.1", port, t0 + 2s, 30000ms);
  CHECK_THROWS_WITH(client.add("joined", 1), Catch::Contains("accepted the connection but did not answer in ") &&
                                                  Catch::Contains("another service on that port"));
  CHECK(std::chrono::steady_clock::now() - t0 < 10s);
  close(fd);
}

TEST_CASE("node store: a client whose first request starts with no request letter is turned away and named; a "
          "service that closes or resets at the first request is no launchers' store", "[launch][store]") {
  // torchrun's c10d agent speaks TCPStore's binary protocol: its first bytes hold control characters. The store
  // turns it away and keeps its address for the launchers' "only K of N nodes joined" (review launch35 #2).
  NodeStoreServer server(0, "run1", 10000ms);
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(server.port()));
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) == 0);
  const char binary[] = {0x00, '\xce', '\xf7', '\x85', 0x3c};  // a query type, then a 32-bit magic number
  REQUIRE(send(fd, binary, sizeof binary, 0) == static_cast<ssize_t>(sizeof binary));
  char buf[16];
  CHECK(recv(fd, buf, sizeof buf, 0) == 0);  // closed, unanswered
  close(fd);
  auto launcher = connect(server);
  CHECK(eventually([&] { return launcher->get(mr::launch::kForeignClientKey).has_value(); }));
  CHECK(launcher->get(mr::launch::kForeignClientKey) == "127.0.0.1");
  // A launcher's own lines are not foreign, whatever bytes follow their letter: a refusal's text sent before any
  // hello (review diff35 #3: a control byte in a refused config path was taken for TCPStore traffic).
  {
    NodeStoreServer other(0, "run2", 10000ms);
    NodeStoreClient refusing("127.0.0.1", other.port(), std::chrono::steady_clock::now() + 5s, 5000ms);
    CHECK(refusing.set_first("fail", std::string("1 refused: /tmp/no\x01.yaml")) == "1 refused: /tmp/no\x01.yaml");
    auto reader = connect(other);
    CHECK_FALSE(reader->get(mr::launch::kForeignClientKey).has_value());
  }

  // A service that closes (or resets: torch 1.13's TCPStore, tests/launch/multi_node_test.cpp) the connection at
  // the first request: said as no launchers' store, not as "lost the launchers' store".
  int port = 0;
  const int lfd = mrtest::loopback_listener(port);
  REQUIRE(lfd >= 0);
  std::thread closer([&] {
    int c = accept(lfd, nullptr, nullptr);
    if (c < 0) return;
    char b[256];
    (void)!recv(c, b, sizeof b, 0);
    close(c);
  });
  NodeStoreClient client("127.0.0.1", port, std::chrono::steady_clock::now() + 5s, 5000ms);
  CHECK_THROWS_WITH(client.add("joined", 1),
                    Catch::Contains("closed the connection at the first request, without an answer: not a megatron-run "
                                    "launchers' store (a torchrun agent's c10d TCPStore, for one"));
  closer.join();
  close(lfd);
}

TEST_CASE("node store: a client may stop trying to connect before its deadline, yet waits for a slow first reply",
          "[launch][store]") {
  // Nothing listens: the client gives up at `stop_connecting` (300 ms), not at the deadline (20 s).
  const int nobody = mrtest::free_port();
  const auto t0 = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH(NodeStoreClient("127.0.0.1", nobody, t0 + 20s, 5000ms, t0 + 300ms),
                    Catch::Contains("cannot reach the launchers' store at 127.0.0.1:" + std::to_string(nobody)));
  CHECK(std::chrono::steady_clock::now() - t0 < 5s);
  // A service reached at once that never answers: its first request waits for the reply until the deadline (3 s),
  // not only until `stop_connecting` (300 ms), so that a store slow to answer on a loaded host is not given up.
  int port = 0;
  const int fd = mrtest::loopback_listener(port);  // the kernel accepts; nobody reads
  REQUIRE(fd >= 0);
  const auto t1 = std::chrono::steady_clock::now();
  NodeStoreClient silent("127.0.0.1", port, t1 + 3s, 30000ms, t1 + 300ms);
  CHECK_THROWS_WITH(silent.add("joined", 1), Catch::Contains("accepted the connection but did not answer in "));
  const auto waited = std::chrono::steady_clock::now() - t1;
  CHECK(waited > 2500ms);
  CHECK(waited < 10s);
  close(fd);
}
