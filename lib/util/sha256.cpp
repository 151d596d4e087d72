// SHA-256 (util/sha256.h), written from FIPS 180-4 sections 5.1.1, 5.3.3 and 6.2: the buffering and padding
// around a compression function of util/sha256_blocks.h.
#include "util/sha256.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <vector>

namespace mr::util {

Sha256::Sha256(Sha256Blocks blocks)
    : blocks_(blocks),
      h_{0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19} {}

void Sha256::update(const void* data, size_t n) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  total_ += n;
  if (used_ > 0) {
    const size_t take = std::min(n, buf_.size() - used_);
    std::memcpy(buf_.data() + used_, p, take);
    used_ += take;
    p += take;
    n -= take;
    if (used_ < buf_.size()) return;
    blocks_(h_.data(), buf_.data(), 1);
    used_ = 0;
  }
  if (n >= 64) {  // every whole block in one call
    const size_t whole = n / 64;
    blocks_(h_.data(), p, whole);
    p += 64 * whole;
    n -= 64 * whole;
  }
  std::memcpy(buf_.data(), p, n);
  used_ = n;
}

std::array<uint8_t, 32> Sha256::digest() {
  const uint64_t bits = total_ * 8;
  const uint8_t one = 0x80;
  update(&one, 1);
  const uint8_t zero = 0;
  while (used_ != 56) update(&zero, 1);
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(bits >> (56 - 8 * i));
  update(len, 8);
  std::array<uint8_t, 32> out{};
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 4; ++j) out[4 * i + j] = static_cast<uint8_t>(h_[i] >> (24 - 8 * j));
  return out;
}

std::string Sha256::hex() {
  static const char* kDigits = "0123456789abcdef";
  std::string s;
  for (uint8_t b : digest()) {
    s += kDigits[b >> 4];
    s += kDigits[b & 15];
  }
  return s;
}

std::string sha256_hex(std::string_view s) {
  Sha256 h;
  h.update(s);
  return h.hex();
}

std::string sha256_file_hex(const std::string& path) {
  // O_NONBLOCK: a FIFO in a file's place opens at once instead of waiting for a writer, and is then refused with
  // anything else that is not a regular file (a device such as /dev/zero behind a link would never end).
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw std::runtime_error(path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw std::runtime_error(path + ": not a regular file");
  }
  Sha256 h;
  std::vector<char> buf(1 << 20);
  for (;;) {
    const ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int e = errno;
      ::close(fd);
      throw std::runtime_error(path + ": read failed: " + std::strerror(e));
    }
    if (n == 0) break;
    h.update(buf.data(), static_cast<size_t>(n));
  }
  ::close(fd);
  return h.hex();
}

}  // namespace mr::util
