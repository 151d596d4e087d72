// SHA-256's compression function on the x86-64 SHA extensions (util/sha256_blocks.h), written from the
// instructions' definitions in Intel's Software Developer's Manual (SHA256RNDS2, SHA256MSG1, SHA256MSG2).
// Only this function is compiled for those instructions (a function-level target, not a global -msha), so the
// binary still runs on CPUs without them; util/sha256_blocks.cpp calls it only where the CPU has them.
#include "util/sha256_blocks.h"

#if defined(__x86_64__) && defined(__GNUC__)

#include <immintrin.h>

#define MR_SHANI_TARGET __attribute__((target("sha,sse4.1,ssse3")))

namespace mr::util {
namespace {

// How the instructions see the eight working variables: two vectors, one holding A, B, E, F and one C, D, G, H,
// each with the first-named variable in the top 32-bit lane (lanes 3..0: A B E F and C D G H).
//
// SHA256RNDS2(cdgh, abef, wk) runs two rounds of FIPS 180-4 6.2.2 step 3 with W[t] + K[t] taken from wk's
// lanes 0 and 1, and returns the A, B, E, F after them. Two rounds move each variable two places down the chain
// (C takes the old A, D the old B, G the old E, H the old F), so the C, D, G, H after them are exactly the
// A, B, E, F before them, lane for lane: no instruction is needed to produce them.
MR_SHANI_TARGET inline void four_rounds(__m128i& abef, __m128i& cdgh, __m128i wk) {
  __m128i next = _mm_sha256rnds2_epu32(cdgh, abef, wk);
  cdgh = abef;
  abef = next;
  next = _mm_sha256rnds2_epu32(cdgh, abef, _mm_unpackhi_epi64(wk, wk));  // lanes 2 and 3 down to 0 and 1
  cdgh = abef;
  abef = next;
}

// The message schedule, four words at a time: from W[i..i+3], W[i+4..i+7], W[i+8..i+11] and W[i+12..i+15]
// (lane j holding W[i+4k+j]), the words W[i+16..i+19], each W[t] = σ1(W[t-2]) + W[t-7] + σ0(W[t-15]) + W[t-16].
MR_SHANI_TARGET inline __m128i next_words(__m128i w0, __m128i w1, __m128i w2, __m128i w3) {
  // SHA256MSG1: W[t-16] + σ0(W[t-15]) for the four t; the fourth needs W[i+4], the first lane of w1.
  __m128i x = _mm_sha256msg1_epu32(w0, w1);
  // W[t-7] are W[i+9..i+12]: the top three lanes of w2 and the bottom one of w3.
  x = _mm_add_epi32(x, _mm_alignr_epi8(w3, w2, 4));
  // SHA256MSG2 adds σ1(W[t-2]): W[i+14] and W[i+15] from w3 for the first two words, and for the last two the
  // first two words it has just finished, which is why the instruction exists instead of a plain add.
  return _mm_sha256msg2_epu32(x, w3);
}

}  // namespace

MR_SHANI_TARGET void sha256_blocks_shani(uint32_t state[8], const uint8_t* blocks, size_t count) {
  // The message's words are big-endian: reverse the four bytes of each lane after loading.
  const __m128i byteswap = _mm_set_epi8(12, 13, 14, 15, 8, 9, 10, 11, 4, 5, 6, 7, 0, 1, 2, 3);
  const __m128i* k = reinterpret_cast<const __m128i*>(kSha256RoundConstants);

  // H0..H7 into the instructions' layout: lanes 0..3 of abcd are A B C D, of efgh E F G H; the unpacks give
  // E F A B and G H C D, and swapping each pair of lanes gives F E B A and H G D C (lane 0 first).
  const __m128i abcd = _mm_loadu_si128(reinterpret_cast<const __m128i*>(state));
  const __m128i efgh = _mm_loadu_si128(reinterpret_cast<const __m128i*>(state + 4));
  __m128i abef = _mm_shuffle_epi32(_mm_unpacklo_epi64(efgh, abcd), 0xB1);
  __m128i cdgh = _mm_shuffle_epi32(_mm_unpackhi_epi64(efgh, abcd), 0xB1);

  for (; count > 0; --count, blocks += 64) {
    const __m128i abef_in = abef, cdgh_in = cdgh;
    // The last 16 message words, four to a vector: w[q % 4] holds W[4q..4q+3] once quad q is reached.
    __m128i w[4];
#pragma GCC unroll 16
    for (int q = 0; q < 16; ++q) {
      if (q < 4)  // rounds 0..15 use the block's own words
        w[q] = _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blocks + 16 * q)), byteswap);
      else  // rounds 16..63 the schedule's, from the four quads before (w[q % 4] is the oldest of them)
        w[q % 4] = next_words(w[q % 4], w[(q + 1) % 4], w[(q + 2) % 4], w[(q + 3) % 4]);
      four_rounds(abef, cdgh, _mm_add_epi32(w[q % 4], _mm_load_si128(k + q)));
    }
    // FIPS 180-4 6.2.2 step 4: add the block's starting values.
    abef = _mm_add_epi32(abef, abef_in);
    cdgh = _mm_add_epi32(cdgh, cdgh_in);
  }

  // Back to H0..H7: swapping each pair of lanes gives E F A B and G H C D, whose upper halves are A B C D and
  // lower halves E F G H.
  const __m128i efab = _mm_shuffle_epi32(abef, 0xB1);
  const __m128i ghcd = _mm_shuffle_epi32(cdgh, 0xB1);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(state), _mm_unpackhi_epi64(efab, ghcd));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(state + 4), _mm_unpacklo_epi64(efab, ghcd));
}

}  // namespace mr::util

#else  // not x86-64: no SHA extensions; sha256_has_shani() is false, and this name is the portable function

namespace mr::util {
void sha256_blocks_shani(uint32_t state[8], const uint8_t* blocks, size_t count) {
  sha256_blocks_portable(state, blocks, count);
}
}  // namespace mr::util

#endif
