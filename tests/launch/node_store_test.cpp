// The launchers' store (launch/node_store.h): its operations, the registration of nodes, and how it marks a
// node gone (a connection closed without goodbye, a silent launcher) with the first failure; over IPv6 (::1)
// and IPv4 against the same dual-stack server, and which hosts are this machine's.
#include <catch2/catch.hpp>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "launch/node_store.h"
#include "sockets.h"

using namespace std::chrono_literals;
using mr::launch::NodeStoreClient;
using mr::launch::NodeStoreServer;
using mr::launch::StoreError;
using mrtest::has_ipv6_loopback;

namespace {

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
    CHECK(*watcher->get("fail") == "1 node 1's launcher is gone (its connection to the store closed)");
  }
  SECTION("no request for longer than the heartbeat timeout") {
    auto n1 = connect(server);
    n1->hello(1, "r");
    REQUIRE(eventually([&] { return watcher->get("fail").has_value(); }));
    CHECK(watcher->get("fail")->rfind("1 node 1's launcher sent no heartbeat for 0.4 s", 0) == 0);
    CHECK_THROWS_AS(n1->get("x"), StoreError);  // the store closed the silent node's connection
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
  CHECK(*v4->get("fail") == "1 node 0's launcher is gone (its connection to the store closed)");
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
