// config/parse/yaml11.h: scalars under an explicit standard tag, constructed as PyYAML's SafeConstructor does.
#include <catch2/catch.hpp>

#include <string>

#include "config/diagnostic.h"
#include "config/parse/yaml11.h"

namespace {

// repr() of what yaml.safe_load("a: !!TYPE TEXT")["a"] gives, "ERR" where it raises.
std::string tagged(const std::string& type, const std::string& text) {
  auto v = mr::yaml11_tagged_scalar(type, text, "f.yaml:1");
  return v ? v->py_repr() : "ERR";
}

}  // namespace

TEST_CASE("yaml11: tagged scalars are constructed as PyYAML's SafeConstructor does, whatever their implicit type",
          "[yaml11]") {
  // Each expectation is PyYAML 6.0's: /usr/bin/python3 -c 'import yaml; print(repr(yaml.safe_load("a: !!float 1e-4")["a"]))'
  // (a text with a space or a trailing ':' written quoted: a: !!int " 12 ").
  struct Case {
    const char* type;
    const char* text;
    const char* repr;
  };
  const Case cases[] = {
      // construct_yaml_float: float() after '_' is removed, with .inf/.nan and sexagesimal forms.
      {"float", "1e-4", "0.0001"},  {"float", "1e4", "10000.0"},     {"float", "inf", "inf"},
      {"float", "-inf", "-inf"},    {"float", ".inf", "inf"},        {"float", "-.INF", "-inf"},
      {"float", "nan", "nan"},      {"float", ".NaN", "nan"},        {"float", "-nan", "nan"},
      {"float", "1_000.5", "1000.5"}, {"float", "1__0", "10.0"},     {"float", "1:30", "90.0"},
      {"float", "1:30.5", "90.5"},  {"float", "-1:30", "-90.0"},     {"float", "1:inf", "inf"},
      {"float", "3", "3.0"},        {"float", "1E5", "100000.0"},    {"float", "infinity", "inf"},
      {"float", "1e400", "inf"},    {"float", "+-1", "-1.0"},        {"float", " 1.5 ", "1.5"},
      {"float", "abc", "ERR"},      {"float", "0x10", "ERR"},        {"float", "", "ERR"},
      {"float", "---1", "ERR"},     {"float", "1:", "ERR"},          {"float", "-", "ERR"},
      // construct_yaml_int: 0b / 0x / leading-0 octal (0o too, as int(x, 8) takes it) / sexagesimal / decimal.
      {"int", "0x1F", "31"},        {"int", "0o17", "15"},           {"int", "017", "15"},
      {"int", "0b101", "5"},        {"int", "1:30", "90"},           {"int", "-1:30", "-90"},
      {"int", "1:-30", "30"},       {"int", "1_000", "1000"},        {"int", "0", "0"},
      {"int", "-0", "0"},           {"int", "+-5", "-5"},            {"int", " 12 ", "12"},
      {"int", "0x0x1", "1"},        {"int", "1.5", "ERR"},           {"int", "abc", "ERR"},
      {"int", "09", "ERR"},         {"int", "", "ERR"},              {"int", "1e3", "ERR"},
      {"int", "0x", "ERR"},         {"int", "1:", "ERR"},            {"int", "1::2", "ERR"},
      {"int", "-", "ERR"},
      // construct_yaml_bool: bool_values[value.lower()].
      {"bool", "TRUE", "True"},     {"bool", "TrUe", "True"},        {"bool", "yes", "True"},
      {"bool", "On", "True"},       {"bool", "oFF", "False"},        {"bool", "no", "False"},
      {"bool", "1", "ERR"},         {"bool", "maybe", "ERR"},        {"bool", "y", "ERR"},
      {"bool", " true", "ERR"},
      // construct_yaml_null: None, whatever the text.
      {"null", "foo", "None"},      {"null", "0", "None"},           {"null", "", "None"},
      {"null", "None", "None"},
  };
  for (const Case& c : cases) {
    INFO("!!" << c.type << " '" << c.text << "'");
    CHECK(tagged(c.type, c.text) == c.repr);
  }
  // Python's int has no bound; ours refuses past 64 bits (as for a plain int), naming the place.
  CHECK_THROWS_AS(mr::yaml11_tagged_scalar("int", "99999999999999999999", "f.yaml:1"), mr::UsageError);
  CHECK(tagged("int", "9223372036854775807") == "9223372036854775807");
  CHECK(tagged("int", "-9223372036854775808") == "-9223372036854775808");
}
