// Reachable addresses of this host (local_address.h).
#include "launch/local_address.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "launch/endpoint.h"

namespace mr::launch {

bool is_loopback_address(const std::string& ip) {
  if (ip == "localhost") return true;
  in_addr a4{};
  if (inet_pton(AF_INET, ip.c_str(), &a4) == 1) return (ntohl(a4.s_addr) >> 24) == 127;
  in6_addr a6{};
  if (inet_pton(AF_INET6, ip.c_str(), &a6) != 1) return false;
  if (IN6_IS_ADDR_LOOPBACK(&a6)) return true;
  return IN6_IS_ADDR_V4MAPPED(&a6) && a6.s6_addr[12] == 127;
}

std::optional<std::string> local_address_toward(const std::string& host, std::string* error) {
  std::string why;
  const std::vector<Address> addrs = resolve(host, 9, &why);  // any port: a UDP connect() sends nothing
  for (const Address& a : addrs) {
    const int fd = socket(a.family(), SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      why = std::string("socket: ") + std::strerror(errno);
      continue;
    }
    sockaddr_storage local{};
    socklen_t len = sizeof local;
    const bool ok = connect(fd, reinterpret_cast<const sockaddr*>(&a.sa), a.len) == 0 &&
                    getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0;
    if (!ok) why = "no route to " + host + " (" + std::strerror(errno) + ")";
    close(fd);
    if (!ok) continue;
    if (std::optional<std::string> text = numeric_address(local, len)) return text;
  }
  if (error) *error = why.empty() ? "no address for " + host : why;
  return std::nullopt;
}

std::string published_master(const std::string& local_addr, const std::string& seen_as,
                             const std::optional<std::string>& reached_at, std::string* error) {
  if (!local_addr.empty()) return local_addr;
  if (!is_loopback_address(seen_as)) return seen_as;
  if (!reached_at) return seen_as;  // every connection came over loopback: every launcher is on this host
  // A scoped (link-local) address means one link only; "" or "?" means the store could not tell.
  if (reached_at->empty() || *reached_at == "?" || reached_at->find('%') != std::string::npos ||
      is_loopback_address(*reached_at)) {
    if (error)
      *error = "node 0 reaches the launchers' store over loopback (" + seen_as + "), and the address other hosts "
               "reached this host at (" + (reached_at->empty() ? std::string("unknown") : *reached_at) +
               ") is not one every node's workers can use as MASTER_ADDR; give this node's address with --local-addr";
    return "";
  }
  return *reached_at;
}

GlooDevice gloo_device(const std::string& ifname, const std::string& master_addr,
                       const std::optional<std::string>& toward, bool other_nodes) {
  GlooDevice d;
  if (!ifname.empty()) {
    d.kind = GlooDevice::Kind::Interface;
    d.value = ifname;
    return d;
  }
  if (is_loopback_address(master_addr)) {  // a one-host job (or every node on this host): loopback
    d.kind = GlooDevice::Kind::Address;
    d.value = master_addr == "::1" ? "::1" : "127.0.0.1";
    return d;
  }
  if (!toward) return d;  // no route known: torch's default device (this host's name)
  d.kind = GlooDevice::Kind::Address;
  d.value = *toward;
  if (other_nodes && is_loopback_address(*toward))
    d.warning = "MASTER_ADDR " + master_addr + " resolves to a loopback address on this host, so gloo binds " +
                *toward + ", which ranks on other hosts cannot reach; give the master's network address, or set "
                "GLOO_SOCKET_IFNAME to the interface the hosts share";
  return d;
}

}  // namespace mr::launch
