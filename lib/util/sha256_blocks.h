// SHA-256's compression function (FIPS 180-4 6.2.2) over whole 64-byte blocks, in two implementations, and the
// one util::Sha256 uses. Internal to util/sha256.cpp, its tests and bench/sha256_bench.cpp.
//
// The choice is made once per process: the SHA extensions' instructions (x86-64 "SHA-NI", cpuid leaf 7 EBX bit
// 29; /proc/cpuinfo flag sha_ni) where the CPU has them, the portable C++ otherwise (other x86-64 CPUs, aarch64,
// ...). MR_SHA256_PORTABLE=1 in the environment (any value but "" and "0") forces the portable one.
#pragma once

#include <cstddef>
#include <cstdint>

namespace mr::util {

// Hashes `count` consecutive 64-byte blocks at `blocks` into `state` (H0..H7 of FIPS 180-4, in order).
using Sha256Blocks = void (*)(uint32_t state[8], const uint8_t* blocks, size_t count);

// FIPS 180-4 4.2.2's 64 round constants K0..K63 (16-byte aligned: the SHA-NI path loads them four at a time).
alignas(16) extern const uint32_t kSha256RoundConstants[64];

// Plain C++, any CPU.
void sha256_blocks_portable(uint32_t state[8], const uint8_t* blocks, size_t count);
// The SHA extensions. Call it only when sha256_has_shani(): it executes instructions other CPUs lack. Where the
// code is not built for x86-64 it does not exist as such and is sha256_blocks_portable.
void sha256_blocks_shani(uint32_t state[8], const uint8_t* blocks, size_t count);
// Whether this CPU executes the SHA extensions (and the SSSE3 / SSE4.1 shuffles the SHA-NI path uses); false on
// every CPU that is not x86-64.
bool sha256_has_shani();

// The function util::Sha256 uses: SHA-NI when sha256_has_shani() and MR_SHA256_PORTABLE is not set; decided
// on the first call (the environment is read then), the same afterwards.
Sha256Blocks sha256_blocks_chosen();
// "sha-ni" or "portable": what sha256_blocks_chosen() is (the benchmark prints it).
const char* sha256_blocks_chosen_name();

}  // namespace mr::util
