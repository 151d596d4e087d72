// util/sha256_blocks.h: the SHA-NI compression function against the portable one (FIPS 180-4's vectors, random
// data of many lengths fed in uneven pieces), and which one util::Sha256 uses (MR_SHA256_PORTABLE). On a CPU
// without SHA-NI the comparisons say so with a WARN and check the portable path alone. CTest runs these also with
// MR_SHA256_PORTABLE=1 (test config_sha256_portable).
#include "util/sha256_blocks.h"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "util/sha256.h"

using mr::util::Sha256;
using mr::util::Sha256Blocks;

namespace {

// The implementations this CPU can execute, named.
std::vector<std::pair<std::string, Sha256Blocks>> runnable() {
  std::vector<std::pair<std::string, Sha256Blocks>> v{{"portable", &mr::util::sha256_blocks_portable}};
  if (mr::util::sha256_has_shani())
    v.emplace_back("sha-ni", &mr::util::sha256_blocks_shani);
  else
    WARN("this CPU has no SHA extensions (SHA-NI): only the portable SHA-256 is tested");
  return v;
}

std::string hex_with(Sha256Blocks f, const std::string& s) {
  Sha256 h(f);
  h.update(s);
  return h.hex();
}

// `s` fed in pieces of random lengths (many under a block, some of several blocks).
std::string hex_in_pieces(Sha256Blocks f, const std::string& s, std::mt19937& rng) {
  Sha256 h(f);
  size_t at = 0;
  while (at < s.size()) {
    const size_t cap = rng() % 4 == 0 ? 70000 : 130;
    const size_t n = std::min(s.size() - at, size_t{rng() % cap});
    h.update(s.data() + at, n);
    at += n;
  }
  return h.hex();
}

std::string random_bytes(size_t n, std::mt19937& rng) {
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

}  // namespace

TEST_CASE("sha256 blocks: FIPS 180-4's vectors through each implementation", "[sha256]") {
  for (const auto& [name, f] : runnable()) {
    INFO(name);
    CHECK(hex_with(f, "") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    CHECK(hex_with(f, "abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    CHECK(hex_with(f, "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
          "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    CHECK(hex_with(f, "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrs"
                      "mnopqrstnopqrstu") == "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
    CHECK(hex_with(f, std::string(1000000, 'a')) ==
          "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  }
}

TEST_CASE("sha256 blocks: both implementations agree on random data of every length 0..300 and a few MiB",
          "[sha256]") {
  const auto impls = runnable();
  std::mt19937 rng(20261205);
  for (size_t n = 0; n <= 300; ++n) {
    const std::string s = random_bytes(n, rng);
    const std::string whole = hex_with(impls[0].second, s);
    INFO("length " << n);
    REQUIRE(whole.size() == 64);
    for (const auto& [name, f] : impls) {
      INFO(name);
      CHECK(hex_with(f, s) == whole);
      CHECK(hex_in_pieces(f, s, rng) == whole);
    }
    CHECK(mr::util::sha256_hex(s) == whole);  // the implementation chosen for this process
  }
  for (size_t n : {size_t{3} << 20, (size_t{5} << 20) + 37}) {
    const std::string s = random_bytes(n, rng);
    const std::string whole = hex_with(impls[0].second, s);
    INFO("length " << n);
    for (const auto& [name, f] : impls) {
      INFO(name);
      CHECK(hex_in_pieces(f, s, rng) == whole);
    }
    Sha256 chosen;  // the default: the implementation chosen for this process
    chosen.update(s);
    CHECK(chosen.hex() == whole);
  }
}

TEST_CASE("sha256 blocks: the compression functions leave the same state after any number of blocks",
          "[sha256]") {
  const auto impls = runnable();
  std::mt19937 rng(7);
  const std::string s = random_bytes(64 * 40, rng);
  for (size_t count : {0, 1, 2, 3, 17, 40}) {
    uint32_t want[8] = {1, 2, 3, 4, 5, 6, 7, 8};  // any state, not only the initial one
    mr::util::sha256_blocks_portable(want, reinterpret_cast<const uint8_t*>(s.data()), count);
    for (const auto& [name, f] : impls) {
      INFO(name << ", " << count << " blocks");
      uint32_t got[8] = {1, 2, 3, 4, 5, 6, 7, 8};
      f(got, reinterpret_cast<const uint8_t*>(s.data()), count);
      CHECK(std::memcmp(got, want, sizeof got) == 0);
    }
  }
}

TEST_CASE("sha256 blocks: Sha256 uses SHA-NI where the CPU has it, unless MR_SHA256_PORTABLE is set", "[sha256]") {
  const char* env = std::getenv("MR_SHA256_PORTABLE");
  const bool forced = env != nullptr && *env != '\0' && std::string(env) != "0";
  const bool shani = mr::util::sha256_has_shani() && !forced;
  CHECK(mr::util::sha256_blocks_chosen() ==
        (shani ? &mr::util::sha256_blocks_shani : &mr::util::sha256_blocks_portable));
  CHECK(std::string(mr::util::sha256_blocks_chosen_name()) == (shani ? "sha-ni" : "portable"));
  if (forced) WARN("MR_SHA256_PORTABLE is set: Sha256 uses the portable implementation");
}
