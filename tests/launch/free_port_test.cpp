// launch/free_port.h: the ports the launcher hands out are drawn below the kernel's range for connections' local
// ports, are free when handed out, and differ from pick to pick.
#include "launch/free_port.h"

#include <catch2/catch.hpp>

#include <fstream>
#include <set>

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
