// HOST[:PORT] with IPv6 literals (endpoint.h).
#include "launch/endpoint.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <utility>

#include "util/text.h"

namespace mr::launch {

namespace {

bool is_ipv6(const std::string& s) {
  in6_addr a{};
  return inet_pton(AF_INET6, s.c_str(), &a) == 1;
}

// A host name or IPv4 address: the characters torchrun's endpoint check allows besides ':' (word characters,
// '.', '-'); bytes beyond ASCII pass, as Python's \w takes non-ASCII letters.
bool is_host_name(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](char ch) {
    const auto c = static_cast<unsigned char>(ch);
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
           c == '-' || c >= 0x80;
  });
}

// 1 to 5 digits, at most 65535.
int parse_port(const std::string& s) {
  if (s.empty() || s.size() > 5 || !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; }))
    throw std::invalid_argument("the port '" + abbreviate(s) + "' is not a number");
  const int p = std::stoi(s);
  if (p > 65535) throw std::invalid_argument("the port " + s + " is above 65535");
  return p;
}

// "[V6]..." -> V6 and what follows ']'.
std::pair<std::string, std::string> split_bracketed(const std::string& s) {
  const size_t close = s.find(']');
  if (close == std::string::npos) throw std::invalid_argument("the '[' of an IPv6 address is not closed with ']'");
  const std::string addr = s.substr(1, close - 1);
  if (!is_ipv6(addr)) throw std::invalid_argument("'" + abbreviate(addr) + "' in brackets is not an IPv6 address");
  return {addr, s.substr(close + 1)};
}

}  // namespace

Endpoint parse_endpoint(const std::string& text) {
  const size_t b = text.find_first_not_of(" \t\n"), e = text.find_last_not_of(" \t\n");
  const std::string s = b == std::string::npos ? "" : text.substr(b, e - b + 1);
  Endpoint out;
  if (!s.empty() && s.front() == '[') {
    auto [addr, rest] = split_bracketed(s);
    out.host = addr;
    if (rest.empty()) return out;
    if (rest.front() != ':') throw std::invalid_argument("after the ']' of an IPv6 address comes ':PORT' or nothing");
    out.port = parse_port(rest.substr(1));
    return out;
  }
  if (std::count(s.begin(), s.end(), ':') >= 2) {
    if (!is_ipv6(s))
      throw std::invalid_argument("it has two colons or more but is not an IPv6 address (an IPv6 address with a "
                                  "port is written [ADDRESS]:PORT)");
    out.host = s;
    return out;
  }
  const size_t colon = s.find(':');
  out.host = s.substr(0, colon);
  if (!is_host_name(out.host))
    throw std::invalid_argument("the host '" + abbreviate(out.host) + "' is not a host name, an IPv4 address, or an IPv6 address "
                                "in brackets");
  if (colon != std::string::npos) out.port = parse_port(s.substr(colon + 1));
  return out;
}

std::string parse_host(const std::string& text) {
  if (!text.empty() && text.front() == '[') {
    auto [addr, rest] = split_bracketed(text);
    if (!rest.empty()) throw std::invalid_argument("text after the ']' of an IPv6 address (the port is given apart)");
    return addr;
  }
  if (text.find_first_of("[]") != std::string::npos)
    throw std::invalid_argument("'" + abbreviate(text) + "' has a bracket but is not an IPv6 address in brackets");
  return text;
}

std::string join_host_port(const std::string& host, int port) {
  const std::string p = std::to_string(port);
  return host.find(':') != std::string::npos ? "[" + host + "]:" + p : host + ":" + p;
}

std::vector<Address> resolve(const std::string& host, int port, std::string* error, int* code) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* res = nullptr;
  std::vector<Address> out;
  const int rc = host.empty() ? EAI_NONAME : getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
  if (code) *code = rc;
  if (rc != 0) {
    if (error) *error = "cannot resolve " + host + " (" + gai_strerror(rc) + ")";
    return out;
  }
  for (addrinfo* a = res; a; a = a->ai_next) {
    if ((a->ai_family != AF_INET && a->ai_family != AF_INET6) || a->ai_addrlen > sizeof(sockaddr_storage)) continue;
    Address ad;
    std::memcpy(&ad.sa, a->ai_addr, a->ai_addrlen);
    ad.len = a->ai_addrlen;
    out.push_back(ad);
  }
  freeaddrinfo(res);
  return out;
}

std::string unresolvable(const std::string& host) {
  if (host.empty()) return "an empty host name";
  int code = 0;
  resolve(host, 0, nullptr, &code);
  if (code == 0 || code == EAI_AGAIN) return "";
  return gai_strerror(code);
}

bool names_this_machine(const std::string& host) {
  for (const Address& a : resolve(host, 0)) {
    const int fd = socket(a.family(), SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    // Port 0: binding asks only whether the address is one of this machine's.
    const bool ok = bind(fd, reinterpret_cast<const sockaddr*>(&a.sa), a.len) == 0;
    close(fd);
    if (ok) return true;
  }
  return false;
}

std::string not_this_machine(const std::string& host) {
  if (names_this_machine(host)) return "";
  const std::string why = unresolvable(host);
  return why.empty() ? "is not an address of this machine" : "does not resolve (" + why + ")";
}

std::optional<std::string> numeric_address(const sockaddr_storage& sa, socklen_t len) {
  if (sa.ss_family == AF_INET6) {
    const auto& s6 = reinterpret_cast<const sockaddr_in6&>(sa);
    if (IN6_IS_ADDR_V4MAPPED(&s6.sin6_addr)) {
      char ip[INET_ADDRSTRLEN] = "";
      inet_ntop(AF_INET, &s6.sin6_addr.s6_addr[12], ip, sizeof ip);  // the IPv4 address is the last 4 bytes
      return std::string(ip);
    }
  }
  char host[NI_MAXHOST] = "";
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&sa), len, host, sizeof host, nullptr, 0, NI_NUMERICHOST) != 0)
    return std::nullopt;
  return std::string(host);
}

}  // namespace mr::launch
