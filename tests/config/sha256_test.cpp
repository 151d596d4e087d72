// util/sha256.h against the FIPS 180-4 example vectors (NIST's SHA-256 examples) and a file.
#include "util/sha256.h"

#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>

using mr::util::Sha256;
using mr::util::sha256_hex;

TEST_CASE("sha256: the FIPS 180-4 example vectors", "[sha256]") {
  CHECK(sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  CHECK(sha256_hex("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu") ==
        "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
  // One million 'a', fed in uneven pieces (the buffering across block boundaries).
  Sha256 h;
  const std::string chunk(997, 'a');
  size_t left = 1000000;
  while (left > 0) {
    const size_t n = std::min(left, chunk.size());
    h.update(chunk.data(), n);
    left -= n;
  }
  CHECK(h.hex() == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST_CASE("sha256: a file's digest equals its bytes' digest", "[sha256]") {
  const std::string path = "/tmp/mr_sha256_test_" + std::to_string(::getpid()) + ".bin";
  std::string bytes;
  for (int i = 0; i < 3'000'000; ++i) bytes += static_cast<char>(i * 7 + 3);
  {
    std::ofstream f(path, std::ios::binary);
    f << bytes;
  }
  CHECK(mr::util::sha256_file_hex(path) == sha256_hex(bytes));
  std::remove(path.c_str());
  CHECK_THROWS_WITH(mr::util::sha256_file_hex(path), Catch::Contains(path));
  // Not a regular file: refused at once (a FIFO with no writer would block an open without O_NONBLOCK; a device
  // such as /dev/zero would never end).
  REQUIRE(::mkfifo(path.c_str(), 0600) == 0);
  CHECK_THROWS_WITH(mr::util::sha256_file_hex(path), Catch::Contains(path + ": not a regular file"));
  std::remove(path.c_str());
  CHECK_THROWS_WITH(mr::util::sha256_file_hex("/dev/zero"), Catch::Contains("/dev/zero: not a regular file"));
  CHECK_THROWS_WITH(mr::util::sha256_file_hex("/tmp"), Catch::Contains("/tmp: not a regular file"));
}
