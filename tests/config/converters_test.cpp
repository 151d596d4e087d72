// Value converters: Python int/float, the layer-pattern grammar, the special types; Python-style rendering.
#include <catch2/catch.hpp>

#include <cmath>

#include "config/converters.h"

using mr::ArgType;
using mr::convert;
using mr::Value;

TEST_CASE("Python int() and float()", "[types]") {
  CHECK(mr::parse_py_int(" 42 ") == 42);
  CHECK(mr::parse_py_int("-7") == -7);
  CHECK(mr::parse_py_int("+7") == 7);
  CHECK(mr::parse_py_int("1_000") == 1000);
  CHECK_THROWS_AS(mr::parse_py_int("1.0"), mr::ConvError);
  CHECK_THROWS_AS(mr::parse_py_int("1__0"), mr::ConvError);
  CHECK_THROWS_AS(mr::parse_py_int(""), mr::ConvError);
  CHECK_THROWS_AS(mr::parse_py_int("99999999999999999999"), mr::ConvError);
  CHECK(mr::parse_py_float("1e-5") == Approx(1e-5));
  CHECK(mr::parse_py_float(".5") == 0.5);
  CHECK(mr::parse_py_float("3.") == 3.0);
  CHECK(std::isinf(mr::parse_py_float("-inf")));
  CHECK(std::isnan(mr::parse_py_float("nan")));
  CHECK_THROWS_AS(mr::parse_py_float("0x10"), mr::ConvError);
  CHECK_THROWS_AS(mr::parse_py_float("1e"), mr::ConvError);
  // One sign, as Python's float(): from_chars would read "+-1" as -1 and "--1" as 1.
  for (const char* two_signs : {"+-1", "--1", "-+1", " ++2.5", "-+inf"}) {
    INFO(two_signs);
    CHECK_THROWS_AS(mr::parse_py_float(two_signs), mr::ConvError);
  }
  CHECK(mr::parse_py_float(" -1 ") == -1.0);
}

TEST_CASE("a refused word is echoed whole up to 200 bytes, then cut with its length", "[types]") {
  auto message = [](const std::string& w) {
    try {
      mr::parse_py_float(w);
    } catch (const mr::ConvError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  const std::string w200(200, 'x');
  CHECK(message(w200) == "invalid float value: '" + w200 + "'");  // as argparse says it
  CHECK(message(std::string(5'000'000, 'x')) == "invalid float value: '" + w200 + "... (5000000 bytes)'");
  // Cut at a character boundary: 199 bytes and then a 2-byte character.
  CHECK(message(std::string(199, 'x') + "\u00e9" + std::string(10, 'x')) ==
        "invalid float value: '" + std::string(199, 'x') + "... (211 bytes)'");
  CHECK_THAT(message(std::string(300, '7') + "x"), Catch::StartsWith("invalid float value: '7777") &&
                                                      Catch::EndsWith("... (301 bytes)'"));
}

TEST_CASE("layer pattern grammar evaluates + and * like Python", "[types]") {
  CHECK(mr::eval_pattern("([1]*3+[0]*1)*3").json() == "[1, 1, 1, 0, 1, 1, 1, 0, 1, 1, 1, 0]");
  CHECK(mr::eval_pattern("[0]+[1]*3").json() == "[0, 1, 1, 1]");
  CHECK(mr::eval_pattern("2*[1,0]").json() == "[1, 0, 1, 0]");
  CHECK(mr::eval_pattern("[1,2,]").json() == "[1, 2]");
  CHECK(mr::eval_pattern("[]").json() == "[]");
  CHECK(mr::eval_pattern("[2*3]").json() == "[6]");
  CHECK(mr::eval_pattern("(1,2)").py_str() == "(1, 2)");
  CHECK(mr::eval_pattern("[[1]*2]").json() == "[[1, 1]]");
  CHECK_THROWS_AS(mr::eval_pattern("[1]+1"), mr::ConvError);
  CHECK_THROWS_AS(mr::eval_pattern("[1]*[2]"), mr::ConvError);
  CHECK_THROWS_AS(mr::eval_pattern("[1"), mr::ConvError);
  CHECK_THROWS_AS(mr::eval_pattern("[01]"), mr::ConvError);
  CHECK_THROWS_AS(mr::eval_pattern("[1]*99999999"), mr::ConvError);
  CHECK_THROWS_AS(mr::eval_pattern("os.system('x')"), mr::ConvError);
}

TEST_CASE("frequency types take an int or a pattern", "[types]") {
  CHECK(convert(ArgType::MoeFreq, "2").as_int() == 2);
  CHECK(convert(ArgType::MoeFreq, "[1,0]").json() == "[1, 0]");
  CHECK(convert(ArgType::LaFreq, "4").as_int() == 4);
  CHECK(convert(ArgType::NoRopeFreq, "([0]*3+[1])*2").json() == "[0, 0, 0, 1, 0, 0, 0, 1]");
  CHECK(convert(ArgType::CompressRatios, "[4]*2").json() == "[4, 4]");
  CHECK_THROWS_AS(convert(ArgType::MoeFreq, "x"), mr::ConvError);
  CHECK(convert(ArgType::CompressRatios, "4").as_int() == 4);  // the seed evaluates any pattern, a bare int too
  CHECK_THROWS_AS(convert(ArgType::CompressRatios, "four"), mr::ConvError);
}

TEST_CASE("tuple, JSON, triton block sizes, enums, bool()", "[types]") {
  CHECK(convert(ArgType::IntTuple, "1,2,3").py_str() == "(1, 2, 3)");
  CHECK(convert(ArgType::IntTuple, "(4, 5)").py_str() == "(4, 5)");
  CHECK_THROWS_AS(convert(ArgType::IntTuple, "a,b"), mr::ConvError);
  CHECK(convert(ArgType::Json, R"({"a": [1, 2.5, null, true]})").json() == R"({"a": [1, 2.5, null, true]})");
  CHECK_THROWS_AS(convert(ArgType::Json, "{a: 1}"), mr::ConvError);
  CHECK(convert(ArgType::TritonBlockSize, "BLOCK_K=128").py_str() == "('BLOCK_K', 128)");
  CHECK_THROWS_AS(convert(ArgType::TritonBlockSize, "BLOCK_K=0"), mr::ConvError);
  CHECK_THROWS_AS(convert(ArgType::TritonBlockSize, "K=8"), mr::ConvError);
  CHECK_THROWS_AS(convert(ArgType::TritonBlockSize, "BLOCK_K"), mr::ConvError);
  CHECK(convert(ArgType::AttnBackendEnum, "local").as_str() == "AttnBackend.local");
  CHECK(convert(ArgType::SignalEnum, "SIGTERM").as_int() == 15);
  CHECK(convert(ArgType::CudaGraphModule, "full_iteration").as_str() == "full_iteration");
  CHECK_THROWS_AS(convert(ArgType::CudaGraphModule, "everything"), mr::ConvError);
  CHECK(convert(ArgType::PyBool, "False").as_bool() == true);  // Python's bool("False")
  CHECK(convert(ArgType::PyBool, "").as_bool() == false);
}

TEST_CASE("Python rendering of values", "[types]") {
  CHECK(mr::py_float_repr(1e-05) == "1e-05");
  CHECK(mr::py_float_repr(0.0001) == "0.0001");
  CHECK(mr::py_float_repr(3.0) == "3.0");
  CHECK(mr::py_float_repr(1e16) == "1e+16");
  CHECK(mr::py_float_repr(123456789012345.0) == "123456789012345.0");
  CHECK(mr::py_float_repr(-2.5e-7) == "-2.5e-07");
  CHECK(mr::py_float_repr(0.1) == "0.1");
  CHECK(Value(mr::List{Value("a"), Value(1), Value()}).py_str() == "['a', 1, None]");
  CHECK(Value(mr::List{Value(1)}, true).py_str() == "(1,)");
  CHECK(Value("it's").py_repr() == "\"it's\"");
  CHECK(Value(true).py_str() == "True");
  CHECK(Value(1) == Value(1.0));
  CHECK(Value(true) == Value(1));
  CHECK_FALSE(Value(mr::List{}) == Value(mr::List{}, true));
}

TEST_CASE("JSON reader is strict", "[types]") {
  CHECK(Value::parse_json(" [1, -2.5e3, \"\\u00e9\"] ").as_list().size() == 3);
  CHECK(Value::parse_json("\"\\u00e9\"").as_str() == "\xc3\xa9");
  CHECK_THROWS_AS(Value::parse_json("[1,]"), mr::JsonError);
  CHECK_THROWS_AS(Value::parse_json("{'a': 1}"), mr::JsonError);
  CHECK_THROWS_AS(Value::parse_json("1 2"), mr::JsonError);
  std::string deep(500, '[');
  CHECK_THROWS_AS(Value::parse_json(deep), mr::JsonError);
}
