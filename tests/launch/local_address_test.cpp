// lib/launch/local_address.cpp: which address of this host other hosts can reach (c10d's published master, the
// Gloo device). The real two-host case runs in network namespaces: tests/launch/netns_two_hosts.sh.
#include <catch2/catch.hpp>

#include <optional>
#include <string>

#include "launch/local_address.h"

using mr::launch::GlooDevice;
using mr::launch::gloo_device;
using mr::launch::is_loopback_address;
using mr::launch::local_address_toward;
using mr::launch::published_master;

TEST_CASE("is_loopback_address: 127/8, ::1, mapped 127.x and localhost; names and other addresses are not",
          "[launch][local_address]") {
  for (const char* a : {"127.0.0.1", "127.0.1.1", "127.255.0.9", "::1", "::ffff:127.0.0.1", "localhost"})
    CHECK(is_loopback_address(a));
  for (const char* a : {"10.27.0.1", "128.0.0.1", "::2", "::ffff:10.0.0.1", "fe80::1", "host1", "", "127.0.0.1.example"})
    CHECK_FALSE(is_loopback_address(a));
}

TEST_CASE("local_address_toward: the source address of the route; nullopt with a reason when none",
          "[launch][local_address]") {
  CHECK(local_address_toward("127.0.0.1") == std::optional<std::string>("127.0.0.1"));
  // Any loopback destination is sent from 127.0.0.1 (the lo interface's address).
  CHECK(local_address_toward("127.0.1.1") == std::optional<std::string>("127.0.0.1"));
  std::string why;
  CHECK_FALSE(local_address_toward("name.invalid", &why));
  CHECK(why.find("cannot resolve name.invalid") != std::string::npos);
}

TEST_CASE("published_master: --local-addr, else the store's view unless loopback, else the address other hosts "
          "reached the store's host at", "[launch][local_address]") {
  std::string err;
  CHECK(published_master("10.0.0.5", "127.0.0.1", "10.27.0.1", &err) == "10.0.0.5");
  CHECK(published_master("", "10.27.0.2", "10.27.0.1", &err) == "10.27.0.2");
  // Node 0 on the store's host, reaching it over loopback (Debian's "127.0.1.1 host1"): what host2 reached it at.
  CHECK(published_master("", "127.0.0.1", "10.27.0.1", &err) == "10.27.0.1");
  CHECK(published_master("", "::1", "fd00::1", &err) == "fd00::1");
  // No connection from another host: every launcher is on this one, loopback is right.
  CHECK(published_master("", "127.0.0.1", std::nullopt, &err) == "127.0.0.1");
  CHECK(err.empty());
  // Other hosts came, but over an address that is not usable everywhere: no address, and a reason naming --local-addr.
  for (const char* bad : {"?", "", "fe80::1%eth0", "127.0.0.1"}) {
    std::string e;
    CHECK(published_master("", "127.0.0.1", std::string(bad), &e).empty());
    CHECK(e.find("give this node's address with --local-addr") != std::string::npos);
  }
}

TEST_CASE("gloo_device: GLOO_SOCKET_IFNAME, loopback for a loopback master, else the interface toward the master",
          "[launch][local_address]") {
  using K = GlooDevice::Kind;
  GlooDevice d = gloo_device("eth1", "10.27.0.1", std::string("10.27.0.2"), true);
  CHECK(d.kind == K::Interface);
  CHECK(d.value == "eth1");
  d = gloo_device("", "127.0.0.1", std::nullopt, true);  // the multi-node tests: every node on this host
  CHECK(d.kind == K::Address);
  CHECK(d.value == "127.0.0.1");
  CHECK(d.warning.empty());
  d = gloo_device("", "localhost", std::nullopt, false);
  CHECK((d.kind == K::Address && d.value == "127.0.0.1"));
  d = gloo_device("", "::1", std::nullopt, false);
  CHECK((d.kind == K::Address && d.value == "::1"));
  // Another host's master: the local address of the route to it, whatever this host's name resolves to.
  d = gloo_device("", "10.27.0.1", std::string("10.27.0.2"), true);
  CHECK((d.kind == K::Address && d.value == "10.27.0.2"));
  CHECK(d.warning.empty());
  // No route known (the name does not resolve here): torch's default device.
  CHECK(gloo_device("", "host1", std::nullopt, true).kind == K::Default);
  // A master name that resolves to loopback here while other nodes exist: bound, with a warning naming the fix.
  d = gloo_device("", "host1", std::string("127.0.0.1"), true);
  CHECK((d.kind == K::Address && d.value == "127.0.0.1"));
  CHECK(d.warning.find("GLOO_SOCKET_IFNAME") != std::string::npos);
  CHECK(gloo_device("", "host1", std::string("127.0.0.1"), false).warning.empty());  // one node: loopback is right
}
