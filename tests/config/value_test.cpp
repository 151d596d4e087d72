// config/value.h: Value's layout and sharing, and Value::parse_json (its bound on the values of a document, counted as
// the tree is built; its strings).
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

TEST_CASE("Value is 16 bytes; copies share strings, lists and objects", "[types]") {
  // A parsed tree costs 16 bytes a value (plus a box for each string, list or object): the JSON bound's memory.
  STATIC_REQUIRE(sizeof(Value) == 16);
  const Value s("text");
  const Value s2 = s;  // shared, not copied
  CHECK(&s2.as_str() == &s.as_str());
  Value l(mr::List{1, "a", 2.5});
  Value l2 = l;
  CHECK(&l2.as_list() == &l.as_list());
  // mutable_list() copies a shared list first: the other holder keeps what it had.
  l2.mutable_list().push_back(Value(nullptr));
  CHECK(l.as_list().size() == 3);
  CHECK(l2.as_list().size() == 4);
  CHECK(&l2.as_list() != &l.as_list());
  // Not shared any more: changed in place.
  const mr::List* own = &l2.as_list();
  l2.mutable_list().pop_back();
  CHECK(&l2.as_list() == own);
  CHECK(l2 == l);
  // A tuple stays a tuple through a copy and a change.
  Value t(mr::List{1}, true);
  Value t2 = t;
  t2.mutable_list().push_back(2);
  CHECK(t2.kind() == Value::Kind::Tuple);
  CHECK(t2.py_str() == "(1, 2)");
  CHECK(t.py_str() == "(1,)");
  // Assigned a value that lives inside the tree it replaces, the value keeps it (read before the tree goes).
  Value nested = Value::parse_json(R"({"a": [["deep", 1], 2]})");
  nested = nested.as_object()[0].second;
  CHECK(nested.json() == R"([["deep", 1], 2])");
  nested = std::move(nested.mutable_list()[0]);
  CHECK(nested.json() == R"(["deep", 1])");
  Value& self = nested;
  nested = self;
  CHECK(nested.json() == R"(["deep", 1])");
  // A moved-from string, list or object is None; a moved-from number keeps its value.
  Value from("x");
  Value to = std::move(from);
  CHECK(to.as_str() == "x");
  CHECK(from.is_none());  // NOLINT(bugprone-use-after-move): what a moved-from value is
  Value n(5);
  Value n2 = std::move(n);
  CHECK(n2.as_int() == 5);
  CHECK(n.as_int() == 5);  // NOLINT(bugprone-use-after-move)
  // Kinds and payloads survive copies and assignments between kinds.
  Value v = 1.5;
  v = s;
  CHECK(v.as_str() == "text");
  v = true;
  CHECK(v.as_bool());
  CHECK(v == Value(1));
  v = Value::object({{"k", Value(mr::List{})}});
  CHECK(v.py_str() == "{'k': []}");
  CHECK(!v.as_object()[0].second.truthy());
}

TEST_CASE("JSON reader's strings: plain, escaped after a plain start, refused", "[types]") {
  CHECK(Value::parse_json(R"("plain")").as_str() == "plain");
  CHECK(Value::parse_json(R"("")").as_str().empty());
  CHECK(Value::parse_json(R"("ab\ncd\"e\u00e9\ud83d\ude00")").as_str() == "ab\ncd\"e\xc3\xa9\xf0\x9f\x98\x80");
  CHECK(Value::parse_json(R"({"k\tey": "v"})").as_object()[0].first == "k\tey");
  CHECK_THROWS_WITH(Value::parse_json("\"ab\x01\""), Catch::Contains("control character in string"));
  CHECK_THROWS_WITH(Value::parse_json("\"abc"), Catch::Contains("unterminated string"));
  CHECK_THROWS_WITH(Value::parse_json("\"ab\\"), Catch::Contains("unterminated escape"));
  CHECK_THROWS_WITH(Value::parse_json(R"("ab\x")"), Catch::Contains("bad escape"));
}

TEST_CASE("JSON reader's \\udcXX is the byte XX: json_quote's bytes that are not UTF-8 round-trip", "[types]") {
  // Every byte 0x80..0xFF alone (none is UTF-8 alone), in a path as a worker reads --save from its namespace.
  for (int b = 0x80; b <= 0xff; ++b) {
    const std::string s = "sv/ck" + std::string(1, static_cast<char>(b)) + "/x";
    const std::string q = mr::json_quote(s);
    CAPTURE(b, q);
    CHECK(q.find("\\udc") != std::string::npos);
    CHECK(Value::parse_json(q).as_str() == s);
    CHECK(Value::parse_json(mr::json_quote(s, /*ascii_only=*/true)).as_str() == s);
  }
  // All 256 bytes in one string, valid UTF-8 mixed with bytes that are not.
  std::string all;
  for (int c = 0; c < 256; ++c) all += static_cast<char>(c);
  all += "\xc3\xa9\xf0\x9f\x98\x80\xed\xa0\x80\xc3";
  CHECK(Value::parse_json(mr::json_quote(all)).as_str() == all);
  CHECK(Value::parse_json(mr::json_quote(all, true)).as_str() == all);
  // Python's json.dumps(os.fsdecode(b"ck\xff")) spells it the same way.
  CHECK(Value::parse_json(R"("ck\udcff")").as_str() == "ck\xff");
  CHECK(Value::parse_json(R"("ck\uDC80")").as_str() == "ck\x80");
}

TEST_CASE("JSON reader pairs a high surrogate only with a low one", "[types]") {
  CHECK(Value::parse_json(R"("\ud83d\ude00")").as_str() == "\xf0\x9f\x98\x80");
  // A high surrogate before an escape that is not a low surrogate: each read on its own (the lone high keeps its
  // 3-byte form; the next is its own character), not combined into a wrong code point.
  CHECK(Value::parse_json(R"("\ud83d\u0041")").as_str() == "\xed\xa0\xbd" "A");
  CHECK(Value::parse_json(R"("\ud83d\udcff")").as_str() == "\xf0\x9f\x93\xbf");  // a real pair: U+1F4FF
  CHECK(Value::parse_json(R"("\ud83d\ud83d\ude00")").as_str() == "\xed\xa0\xbd\xf0\x9f\x98\x80");
  CHECK(Value::parse_json(R"("\ud83dA")").as_str() == "\xed\xa0\xbd" "A");
  // A lone low surrogate below \udc80 is no byte of surrogateescape: its 3-byte form, as before.
  CHECK(Value::parse_json(R"("\udc7f")").as_str() == "\xed\xb1\xbf");
}
