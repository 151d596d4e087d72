// Decimal digits of an unsigned number without allocating or calling libc's formatters: for signal handlers and
// code that runs before the C library is set up (they may call only async-signal-safe functions).
#pragma once

#include <cstddef>

namespace mr::util {

// The decimal digits of `v` into `out` (20 bytes are enough for any 64-bit value), not terminated; their count.
inline std::size_t decimal_digits(unsigned long long v, char (&out)[20]) {
  char rev[20];
  std::size_t n = 0;
  do {
    rev[n++] = static_cast<char>('0' + v % 10);  // least significant digit first
    v /= 10;
  } while (v > 0);
  for (std::size_t i = 0; i < n; ++i) out[i] = rev[n - 1 - i];
  return n;
}

}  // namespace mr::util
