// launch/free_port.h: the ports the launcher hands out are drawn below the kernel's range for connections' local
// ports, are free when handed out (also of a closed connection's TIME_WAIT), and differ from pick to pick.
#include "launch/free_port.h"

#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <fstream>
#include <algorithm>
#include <set>
#include <thread>
#include <vector>

#include "launch/node_store.h"
#include "sockets.h"

TEST_CASE("free ports: below the kernel's range for connections' local ports, free, drawn at random", "[launch][port]") {
  const int start = mr::launch::connection_ports_start();
  std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range");
  int low = 0, high = 0;
  if (range >> low >> high)
    CHECK(start == low);
  else
    CHECK(start == 32768);  // Linux's default when the file cannot be read
  std::set<int> seen;
  for (int i = 0; i < 40; ++i) {
    const int p = mr::launch::free_port();
    INFO("port " << p << ", connections' local ports from " << start);
    if (start - 10000 >= 1000) {
      CHECK(p >= 10000);
      CHECK(p < start);
    }
    CHECK(p > 0);
    CHECK(p <= 65535);
    CHECK(mrtest::port_free(p));
    seen.insert(p);
  }
  CHECK(seen.size() > 30);  // 40 draws from thousands of ports
}

TEST_CASE("free ports: a port a closed connection holds in TIME_WAIT is not free", "[launch][port]") {
  // A connection to a server that sets SO_REUSEADDR, as the launchers' store and torch's do, closed by the
  // server's side first: that side's socket stays in TIME_WAIT (about a minute) with the server's PORT as its
  // local port, and nothing else holds PORT.
  const int listener = mr::launch::bind_every_interface(0);
  REQUIRE(listener >= 0);
  REQUIRE(listen(listener, 4) == 0);
  const int port = mr::launch::bound_port(listener);
  const int client = socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(client >= 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  sa.sin_port = htons(static_cast<uint16_t>(port));
  REQUIRE(connect(client, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0);
  const int accepted = accept(listener, nullptr, nullptr);
  REQUIRE(accepted >= 0);
  close(accepted);
  close(listener);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the client has the FIN
  close(client);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  INFO("port " << port);
  // Another server that sets SO_REUSEADDR may bind it; a program that does not cannot (the python port holder of
  // multi_node_test.cpp, for one), so it is not free to hand out.
  const int reused = mr::launch::bind_every_interface(port);
  CHECK(reused >= 0);
  if (reused >= 0) close(reused);
  CHECK_FALSE(mrtest::port_free(port));
  CHECK_FALSE(mr::launch::port_free(port));
  CHECK_FALSE(mr::launch::port_held(port));  // rank 0's store (SO_REUSEADDR) binds it: the launcher must not refuse
  // A port nothing holds is free.
  const int p = mr::launch::free_port();
  CHECK(mr::launch::port_free(p));
}

TEST_CASE("free ports: torchrun's default ports are never handed out; the kernel's pick when no draw is free",
          "[launch][port]") {
  const int start = mr::launch::connection_ports_start();
  if (start - 10000 < 1000) {
    WARN("the kernel's range for connections' local ports starts at " << start << ": only its pick is used");
    return;
  }
  // A port that is free now, drawn after the two defaults: the defaults are skipped, whether or not they are free.
  int free_now = 0;
  for (int p = 11000; p < start && free_now == 0; p += 7)
    if (p != 29400 && p != 29500 && mrtest::port_free(p)) free_now = p;
  REQUIRE(free_now > 0);
  std::vector<int> draws = {29500, 29400, 29500, free_now};
  size_t next = 0;
  CHECK(mr::launch::free_port([&] { return draws[std::min(next++, draws.size() - 1)]; }) == free_now);
  CHECK(next == 4);
  // Only the defaults drawn (200 times): the kernel's pick, from its own range.
  int calls = 0;
  const int p = mr::launch::free_port([&] { return ++calls % 2 ? 29500 : 29400; });
  CHECK(calls == 200);
  CHECK(p >= start);
  CHECK(p != 29400);
  CHECK(p != 29500);
  // A draw of a port in use is skipped too.
  const int held = mr::launch::bind_every_interface(free_now, false);
  REQUIRE(held >= 0);
  int second = 0;
  for (int q = free_now + 1; q < start && second == 0; ++q)
    if (q != 29400 && q != 29500 && mrtest::port_free(q)) second = q;
  REQUIRE(second > 0);
  std::vector<int> draws2 = {free_now, second};
  next = 0;
  CHECK(mr::launch::free_port([&] { return draws2[std::min(next++, draws2.size() - 1)]; }) == second);
  close(held);
}

TEST_CASE("a port held: listened on (on one address only, too), not a free one nor one in TIME_WAIT", "[launch][port]") {
  int port = 0;
  const int fd = mrtest::loopback_listener(port);  // 127.0.0.1 only: a store on every interface still cannot bind
  REQUIRE(fd >= 0);
  CHECK(mr::launch::port_held(port));
  CHECK(mr::launch::store_bind_error(port) == EADDRINUSE);
  CHECK_FALSE(mr::launch::port_forbidden(port));
  close(fd);
  CHECK_FALSE(mr::launch::port_held(port));
  CHECK(mr::launch::store_bind_error(port) == 0);
  CHECK_FALSE(mr::launch::port_held(mr::launch::free_port()));
  CHECK_FALSE(mr::launch::port_held(0));
  CHECK_FALSE(mr::launch::port_held(70000));
  CHECK(mr::launch::store_bind_error(0) == 0);
  CHECK(mr::launch::store_bind_error(70000) == 0);
}

TEST_CASE("a held port: other draws skip it, a server setting SO_REUSEADDR listens on it, released on destruction",
          "[launch][port]") {
  mr::launch::HeldPort h = mr::launch::hold_free_port();
  REQUIRE(h.held());
  const int p = h.port();
  CHECK(p != 29400);
  CHECK(p != 29500);
  CHECK_FALSE(mr::launch::port_free(p));  // what another launcher's draw checks
  CHECK_FALSE(mr::launch::port_held(p));  // a store can still bind it
  std::vector<int> draws = {p, p, p};
  size_t next = 0;
  const int other = mr::launch::free_port([&] { return draws[std::min(next++, draws.size() - 1)]; });
  CHECK(other != p);
  mr::launch::HeldPort moved = std::move(h);
  CHECK_FALSE(h.held());
  CHECK(moved.port() == p);
  CHECK_FALSE(mr::launch::port_free(p));
  {
    // The launchers' store binds with SO_REUSEADDR, as torch's TCPStore does: it listens on the held port.
    mr::launch::NodeStoreServer server(p, "run", std::chrono::seconds(5));
    CHECK(server.port() == p);
    mr::launch::NodeStoreClient client("127.0.0.1", p, std::chrono::steady_clock::now() + std::chrono::seconds(5),
                                       std::chrono::seconds(5));
    client.set("k", "v");
    CHECK(client.get("k") == std::optional<std::string>("v"));
  }
  // Released, a port is free again: one that no connection used (the store's closed connection above may leave
  // `p` in TIME_WAIT, which port_free rightly counts as not free).
  mr::launch::HeldPort unused = mr::launch::hold_free_port();
  REQUIRE(unused.held());
  CHECK_FALSE(mr::launch::port_free(unused.port()));
  unused.release();
  CHECK_FALSE(unused.held());
  CHECK(mr::launch::port_free(unused.port()));
  // hold_port: a given port, held when free now.
  mr::launch::HeldPort again = mr::launch::hold_port(unused.port());
  CHECK(again.held());
  CHECK(again.port() == unused.port());
  CHECK_FALSE(mr::launch::hold_port(unused.port()).held());  // held already
  CHECK_FALSE(mr::launch::hold_port(0).held());
  CHECK_FALSE(mr::launch::hold_port(70000).held());
}
