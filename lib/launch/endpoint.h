// HOST[:PORT] text as torchrun's launcher options take it (--rdzv-endpoint, --master-addr), with IPv6 literals:
// "[::1]:29400", "[::1]", or a bare "::1" (docs/launch.md, "Several nodes"). Parsing and writing it. Torch-free.
#pragma once

#include <sys/socket.h>

#include <optional>
#include <string>
#include <vector>

namespace mr::launch {

struct Endpoint {
  std::string host;         // without brackets; "" when the text gives none (":29400")
  std::optional<int> port;  // 0..65535, when the text gives one
};

// The forms (surrounding blanks ignored, as torchrun's parse_rendezvous_endpoint strips them):
//   HOST, HOST:PORT     a name or IPv4 address (letters, digits, '_', '.', '-'), then a port of 1-5 digits
//   [V6], [V6]:PORT     an IPv6 address in brackets, then a port
//   V6                  an IPv6 address without brackets (two colons or more): the whole text is the address and
//                       there is no port (torchrun would take the last group for a port; write [V6]:PORT for one)
// Throws std::invalid_argument saying what is wrong (an unclosed '[', text after ']', not an IPv6 address, a
// port that is not a number up to 65535, a character no host name has).
Endpoint parse_endpoint(const std::string& text);

// --master-addr: an IPv6 address may be given in brackets ("[::1]" -> "::1", as torchrun, which joins it with the
// port and parses the endpoint); anything else is returned as given. Throws std::invalid_argument for unbalanced
// brackets or a bracketed text that is not an IPv6 address.
std::string parse_host(const std::string& text);

// One TCP address of a host, with a port in it (IPv4 or IPv6), as the resolver gives it.
struct Address {
  sockaddr_storage sa{};
  socklen_t len = 0;
  int family() const { return sa.ss_family; }
};

// host (a name or an address literal, without brackets) -> its IPv6 and IPv4 addresses with `port`, in the
// resolver's order. Empty when it does not resolve: then `code` gets the resolver's code (EAI_*) and `error` says
// "cannot resolve HOST (its words)". Blocks while the resolver looks the name up.
std::vector<Address> resolve(const std::string& host, int port, std::string* error = nullptr, int* code = nullptr);

// Why `host` (a name or an address literal, without brackets) can never be connected to: "" when it resolves, or
// when its resolver's failure may pass (EAI_AGAIN: a DNS server that does not answer now); else the resolver's
// words ("Name or service not known"). Blocks while the resolver looks the name up.
std::string unresolvable(const std::string& host);

// Whether `host` is an address of this machine: some address it resolves to can be bound to (loopback, a local
// interface's address, the wildcard; IPv4 or IPv6). False when it does not resolve.
bool names_this_machine(const std::string& host);

// Why `host` is not an address of this machine, for a refusal: "" when it names one (names_this_machine), else
// "is not an address of this machine" or "does not resolve (the resolver's words)". The one test of an address
// given for this machine (--master-addr on one node, --local-addr).
std::string not_this_machine(const std::string& host);

// Numeric text of a socket address, without the port: "127.0.0.1", "::1", "fe80::1%eth0". An IPv4-mapped IPv6
// address (an IPv4 client of a dual-stack socket) is given as plain IPv4, which is what workers get as MASTER_ADDR.
// nullopt when the system cannot write it; the caller picks what stands for it.
std::optional<std::string> numeric_address(const sockaddr_storage& sa, socklen_t len);

// host:port for messages and logs, the host in brackets when it is an IPv6 address ("[::1]:29400").
std::string join_host_port(const std::string& host, int port);

}  // namespace mr::launch
