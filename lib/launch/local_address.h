// Which address of this host other hosts can reach: the workers' MASTER_ADDR that c10d's node 0 publishes, and
// the address a worker's Gloo device binds (docs/distributed.md, "Gloo's network device"). Torch-free.
#pragma once

#include <optional>
#include <string>

namespace mr::launch {

// Whether `ip` (numeric text) is a loopback address: 127.0.0.0/8, ::1, or an IPv4-mapped 127.x. "localhost" counts
// too (it names loopback everywhere). Any other text, a host name included, is not.
bool is_loopback_address(const std::string& ip);

// The local address this host sends from toward `host` (a name or literal): the address of the interface whose
// route reaches it, as numeric text (IPv4 for IPv4, never the mapped form). Found with a UDP socket's connect(),
// which picks the route and sends nothing. nullopt, with `error` set, when the host does not resolve or no route
// reaches it. Blocks while the resolver looks the name up.
std::optional<std::string> local_address_toward(const std::string& host, std::string* error = nullptr);

// The workers' MASTER_ADDR that a c10d round's node 0 publishes (every node's workers reach rank 0 there):
//   local_addr    --local-addr, when given (checked to be this machine's before)
//   seen_as       the address the launchers' store saw node 0's connection come from
//   reached_at    the store host's address as other hosts reached it (the local end of the first connection that
//                 came from another host), nullopt while every connection came over loopback
// --local-addr wins; else seen_as unless it is loopback; a loopback seen_as means node 0 shares the store's host,
// so the address other hosts reached that host at is published; loopback stays when no connection came from
// another host (every launcher is on this one). `error` is set, and "" returned, when other hosts connected but
// their address is not one that every host can use (unknown, or link-local with a scope).
std::string published_master(const std::string& local_addr, const std::string& seen_as,
                             const std::optional<std::string>& reached_at, std::string* error);

// How a worker's Gloo device is made (docs/distributed.md):
//   kind Interface: GLOO_SOCKET_IFNAME names it (`value`), as torch reads it
//   kind Address: bind `value`: loopback for a loopback MASTER_ADDR, else the local address toward MASTER_ADDR
//   kind Default: torch's default device (this host's name), when no route to MASTER_ADDR is known
// `warning`: set when the device will likely be unreachable from other hosts (MASTER_ADDR is a name that resolves
// to loopback here while the job has ranks elsewhere).
struct GlooDevice {
  enum class Kind { Interface, Address, Default } kind = Kind::Default;
  std::string value;
  std::string warning;
};
// `ifname`: GLOO_SOCKET_IFNAME ("" when unset); `toward`: local_address_toward(master_addr); `other_nodes`: the job
// has ranks on other nodes (WORLD_SIZE above LOCAL_WORLD_SIZE).
GlooDevice gloo_device(const std::string& ifname, const std::string& master_addr,
                       const std::optional<std::string>& toward, bool other_nodes);

}  // namespace mr::launch
