// util/decimal.h: the digits signal handlers write (the worker's start-up crash line, the launcher's stop record).
#include <catch2/catch.hpp>

#include <limits>
#include <string>

#include "util/decimal.h"

TEST_CASE("decimal_digits: 0, one digit, powers of ten, the largest 64-bit value", "[util]") {
  auto text = [](unsigned long long v) {
    char d[20];
    const size_t n = mr::util::decimal_digits(v, d);
    return std::string(d, n);
  };
  CHECK(text(0) == "0");
  CHECK(text(7) == "7");
  CHECK(text(10) == "10");
  CHECK(text(1959) == "1959");
  CHECK(text(1000000000000ULL) == "1000000000000");
  CHECK(text(std::numeric_limits<unsigned long long>::max()) == "18446744073709551615");  // 20 digits: all of out
  for (unsigned long long v : {1ULL, 99ULL, 12345678901234567ULL}) CHECK(text(v) == std::to_string(v));
}
