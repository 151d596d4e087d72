// Running out of a process resource (memory, address space, threads), said in one line that names the cause:
// under a finite address-space limit (RLIMIT_AS, `ulimit -v`, as some HPC nodes set) an allocation, a mapping or a
// thread's stack fails long before the machine's memory is used, and the bare std::bad_alloc or "Resource
// temporarily unavailable" would not say so.
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <optional>
#include <string>

namespace mr::util {

// This process's address-space limit (RLIMIT_AS, soft) in bytes; nullopt when unlimited.
std::optional<uint64_t> address_space_limit();

// When `e` means that the process ran out of memory, address space or threads (std::bad_alloc; a
// std::system_error with EAGAIN or ENOMEM, as std::thread throws when it cannot create a thread), writes one line
// naming the cause (and the limit, when RLIMIT_AS is finite) into `out` and returns its length; else returns 0.
// Allocates nothing: usable where memory has run out (a std::terminate handler).
size_t resource_failure(const std::exception& e, char* out, size_t size);

// The same line as a string; "" when `e` is not a resource failure.
std::string resource_failure(const std::exception& e);

}  // namespace mr::util
