// launch/endpoint.h: HOST[:PORT] with IPv6 literals, as --rdzv-endpoint and --master-addr take it.
#include <catch2/catch.hpp>

#include <stdexcept>

#include "launch/endpoint.h"
#include "sockets.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>

using mr::launch::Endpoint;
using mr::launch::join_host_port;
using mr::launch::parse_endpoint;
using mr::launch::parse_host;

namespace {

// host and port (-1: none) of `text`.
std::pair<std::string, int> parsed(const std::string& text) {
  const Endpoint e = parse_endpoint(text);
  return {e.host, e.port ? *e.port : -1};
}

}  // namespace

TEST_CASE("endpoint: host names and IPv4 addresses, with and without a port", "[launch][endpoint]") {
  CHECK(parsed("node0:29400") == std::pair<std::string, int>("node0", 29400));
  CHECK(parsed("node0") == std::pair<std::string, int>("node0", -1));
  CHECK(parsed("10.1.2.3:1") == std::pair<std::string, int>("10.1.2.3", 1));
  CHECK(parsed("my_host-1.example.com:65535") == std::pair<std::string, int>("my_host-1.example.com", 65535));
  CHECK(parsed("  node0:29400 ") == std::pair<std::string, int>("node0", 29400));  // blanks around, as torchrun
  CHECK(parsed(":29400") == std::pair<std::string, int>("", 29400));             // the caller's default host
  CHECK(parsed("node0:0") == std::pair<std::string, int>("node0", 0));
}

TEST_CASE("endpoint: IPv6 addresses in brackets, with and without a port, and bare", "[launch][endpoint]") {
  CHECK(parsed("[::1]:29400") == std::pair<std::string, int>("::1", 29400));
  CHECK(parsed("[::1]") == std::pair<std::string, int>("::1", -1));
  CHECK(parsed("[fd00::2]:1") == std::pair<std::string, int>("fd00::2", 1));
  CHECK(parsed("[::ffff:127.0.0.1]:80") == std::pair<std::string, int>("::ffff:127.0.0.1", 80));
  // Bare: the whole text is the address (torchrun would split off the last group as a port).
  CHECK(parsed("::1") == std::pair<std::string, int>("::1", -1));
  CHECK(parsed("fd00::2:2940") == std::pair<std::string, int>("fd00::2:2940", -1));
  CHECK(parsed("2001:db8:0:0:0:0:0:1") == std::pair<std::string, int>("2001:db8:0:0:0:0:0:1", -1));
}

TEST_CASE("endpoint: malformed ones say what is wrong", "[launch][endpoint]") {
  auto why = [](const std::string& text) {
    try {
      parse_endpoint(text);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  CHECK(why("[::1") == "the '[' of an IPv6 address is not closed with ']'");
  CHECK(why("[::1]x") == "after the ']' of an IPv6 address comes ':PORT' or nothing");
  CHECK(why("[::1]29400") == "after the ']' of an IPv6 address comes ':PORT' or nothing");
  CHECK(why("[::1]:") == "the port '' is not a number");
  CHECK(why("[::1]:http") == "the port 'http' is not a number");
  CHECK(why("[::1]:65536") == "the port 65536 is above 65535");
  CHECK(why("[node0]:29400") == "'node0' in brackets is not an IPv6 address");
  CHECK(why("[]:29400") == "'' in brackets is not an IPv6 address");
  CHECK(why("[127.0.0.1]") == "'127.0.0.1' in brackets is not an IPv6 address");
  CHECK(why("fd00::2:29400") ==
        "it has two colons or more but is not an IPv6 address (an IPv6 address with a port is written "
        "[ADDRESS]:PORT)");
  CHECK(why("::1]") == why("fd00::2:29400"));
  CHECK(why("a:b:c") == why("fd00::2:29400"));
  CHECK(why("node0:") == "the port '' is not a number");
  CHECK(why("node0:-1") == "the port '-1' is not a number");
  CHECK(why("node0:123456") == "the port '123456' is not a number");
  CHECK(why("node0]:1") ==
        "the host 'node0]' is not a host name, an IPv4 address, or an IPv6 address in brackets");
  CHECK(why("no de:1") == "the host 'no de' is not a host name, an IPv4 address, or an IPv6 address in brackets");
}

TEST_CASE("endpoint: --master-addr takes an IPv6 address bare or in brackets", "[launch][endpoint]") {
  CHECK(parse_host("node0") == "node0");
  CHECK(parse_host("::1") == "::1");
  CHECK(parse_host("[::1]") == "::1");
  CHECK_THROWS_WITH(parse_host("[::1"), "the '[' of an IPv6 address is not closed with ']'");
  CHECK_THROWS_WITH(parse_host("[::1]:29500"), "text after the ']' of an IPv6 address (the port is given apart)");
  CHECK_THROWS_WITH(parse_host("::1]"), "'::1]' has a bracket but is not an IPv6 address in brackets");
}

TEST_CASE("endpoint: host:port in messages brackets an IPv6 address", "[launch][endpoint]") {
  CHECK(join_host_port("node0", 29400) == "node0:29400");
  CHECK(join_host_port("127.0.0.1", 1) == "127.0.0.1:1");
  CHECK(join_host_port("::1", 29400) == "[::1]:29400");
  CHECK(parsed(join_host_port("fd00::2", 7)) == std::pair<std::string, int>("fd00::2", 7));  // round trip
}

TEST_CASE("endpoint: whether a host resolves, and whether it is this machine", "[launch][endpoint]") {
  using mr::launch::names_this_machine;
  using mr::launch::unresolvable;
  CHECK(unresolvable("127.0.0.1").empty());
  CHECK(unresolvable("localhost").empty());
  CHECK(unresolvable("::1").empty());
  CHECK_FALSE(unresolvable("").empty());
  CHECK_FALSE(unresolvable("name.invalid").empty());  // RFC 6761: never resolves
  CHECK_FALSE(unresolvable("999.999.1.1").empty());   // not an IPv4 address, and no such name
  CHECK(names_this_machine("127.0.0.1"));
  CHECK(names_this_machine("localhost"));
  CHECK(names_this_machine("0.0.0.0"));
  CHECK_FALSE(names_this_machine("192.0.2.1"));  // TEST-NET-1, documentation only: no machine has it
  CHECK_FALSE(names_this_machine(""));
  CHECK_FALSE(names_this_machine("name.invalid"));
  CHECK_FALSE(names_this_machine("2001:db8::1"));  // the IPv6 documentation prefix
  if (!mrtest::has_ipv6_loopback()) {
    WARN("this machine has no IPv6 loopback address (::1): names_this_machine(\"::1\") is not tested here");
    return;
  }
  CHECK(names_this_machine("::1"));
  CHECK(names_this_machine("0:0:0:0:0:0:0:1"));
}

TEST_CASE("endpoint: resolve gives every address with the port, or says why there is none", "[launch][endpoint]") {
  using mr::launch::resolve;
  const auto v4 = resolve("127.0.0.1", 29400);
  REQUIRE(v4.size() == 1);
  CHECK(v4[0].family() == AF_INET);
  CHECK(ntohs(reinterpret_cast<const sockaddr_in&>(v4[0].sa).sin_port) == 29400);
  std::string error;
  int code = 0;
  CHECK(resolve("name.invalid", 1, &error, &code).empty());
  CHECK(code != 0);
  CHECK(error.rfind("cannot resolve name.invalid (", 0) == 0);
  CHECK(resolve("", 1, &error, &code).empty());
  CHECK(code == EAI_NONAME);
}
