// Value::parse_json's bound on the values of a document (config/value.h): counted as the tree is built.
#include <catch2/catch.hpp>

#include <string>

#include "config/value.h"

using mr::Value;

namespace {
// The JsonTooManyValues that parse_json(text, max) throws; fails the test when it throws none (or another error).
mr::JsonTooManyValues too_many(const std::string& text, uint64_t max) {
  try {
    Value::parse_json(text, max);
  } catch (const mr::JsonTooManyValues& e) {
    return e;
  }
  FAIL("no JsonTooManyValues for " << text);
  throw;  // unreachable: FAIL throws
}
}  // namespace

TEST_CASE("JSON reader counts values as it builds the tree", "[types]") {
  // Every value counts (objects, lists, strings, numbers, literals); an object's keys do not.
  CHECK(Value::parse_json("[1, \"a\", null, true, {}]", 6).as_list().size() == 5);
  CHECK(Value::parse_json("{\"a\": 1, \"b\": [2]}", 4).as_object().size() == 2);
  CHECK(Value::parse_json("7", 1).as_int() == 7);
  // One more than the bound: refused where the value past it starts, before it is built.
  const mr::JsonTooManyValues e = too_many("[1, 2, 3]", 3);
  CHECK(e.limit == 3);
  CHECK(e.offset == 7);
  CHECK(std::string(e.what()) == "JSON of more than 3 values: the limit is passed at offset 7");
  CHECK(too_many("{\"a\": 1, \"b\": [2]}", 3).offset == 15);
  CHECK(too_many("{}", 0).offset == 0);
  // A JsonError like any other, for callers that do not tell the two apart.
  CHECK_THROWS_AS(Value::parse_json("[[], [], []]", 3), mr::JsonError);
}

TEST_CASE("JSON reader stops at the value bound without reading the rest", "[types]") {
  // What follows the value past the bound is never looked at: no pre-pass, no error from later bytes. So a
  // hostile document costs at most the tree of `max` values, however long its text.
  CHECK(too_many("[0, 0, 0, 0 this is not JSON", 3).offset == 7);
  CHECK(too_many("[0, 0, 0, 0, " + std::string(1 << 20, '['), 3).offset == 7);
  // The same document under the bound is read to its end (and refused for what is there).
  CHECK_THROWS_WITH(Value::parse_json("[0, 0, 0, 0 this is not JSON", 5), Catch::Contains("expected ',' or ']'"));
  // Inside strings, separators are just characters: one value however many commas and brackets it holds.
  CHECK(Value::parse_json("[\"" + std::string(100000, ',') + "[{:\"]", 2).as_list().size() == 1);
}
