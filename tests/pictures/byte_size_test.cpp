// Memory sizes written by people (lib/util/byte_size.h), as `params --device-memory` reads them.
#include <catch2/catch.hpp>

#include "util/byte_size.h"

using mr::parse_byte_size;

TEST_CASE("byte sizes: binary and decimal units, any case, bare bytes", "[pictures][byte-size]") {
  CHECK(*parse_byte_size("80GiB") == 80.0 * 1024 * 1024 * 1024);
  CHECK(*parse_byte_size("141 GB") == 141e9);
  CHECK(*parse_byte_size("512mib") == 512.0 * 1024 * 1024);
  CHECK(*parse_byte_size("1.5TiB") == 1.5 * 1024 * 1024 * 1024 * 1024);
  CHECK(*parse_byte_size("4096") == 4096);
  CHECK(*parse_byte_size("10 B") == 10);
  CHECK(*parse_byte_size("2KB") == 2000);
  CHECK(*parse_byte_size("0") == 0);
}

TEST_CASE("byte sizes: anything else is refused", "[pictures][byte-size]") {
  for (const char* bad : {"", "GiB", "-1GiB", "80 GiBs", "eighty", "1e3", "1.2.3GB", "80 PiB", "99999999999TiB"})
    CHECK_FALSE(parse_byte_size(bad).has_value());
}
