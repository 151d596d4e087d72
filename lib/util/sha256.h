// SHA-256 (FIPS 180-4): the digest Megatron's checkpoint integrity manifest records for each file
// (--verify-integrity, docs/checkpoints.md). Streaming: update() any number of times, then hex().
// The compression function is chosen once per process (util/sha256_blocks.h): the x86-64 SHA extensions
// (SHA-NI) where the CPU has them, portable C++ elsewhere; MR_SHA256_PORTABLE=1 forces the portable one.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "util/sha256_blocks.h"

namespace mr::util {

class Sha256 {
 public:
  Sha256() : Sha256(sha256_blocks_chosen()) {}
  // With the given compression function (util/sha256_blocks.h: the tests and the benchmark compare them).
  explicit Sha256(Sha256Blocks blocks);
  void update(const void* data, size_t n);
  void update(std::string_view s) { update(s.data(), s.size()); }
  // The 32-byte digest; the object is finished afterwards (update() again starts nothing new).
  std::array<uint8_t, 32> digest();
  // The digest as 64 lowercase hex digits (Python's hashlib.sha256().hexdigest()).
  std::string hex();

 private:
  Sha256Blocks blocks_;  // fed every run of whole blocks in one call
  std::array<uint32_t, 8> h_;
  std::array<uint8_t, 64> buf_{};
  size_t used_ = 0;
  uint64_t total_ = 0;  // bytes hashed
};

// The hex digest of `s`.
std::string sha256_hex(std::string_view s);
// The hex digest of the file at `path`, read 1 MiB at a time; std::runtime_error naming it when it cannot be read
// or is not a regular file (a FIFO, a device or a directory is refused at once).
std::string sha256_file_hex(const std::string& path);

}  // namespace mr::util
