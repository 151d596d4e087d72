// The SVG writer (lib/util/svg.h): escaping, numbers, the document's frame, colours, ticks.
#include <catch2/catch.hpp>

#include <string>

#include "util/svg.h"

using namespace mr::svg;
using Catch::Matchers::Contains;

TEST_CASE("svg: text and attributes are escaped", "[pictures][svg]") {
  CHECK(escape("a<b>&\"c'") == "a&lt;b&gt;&amp;&quot;c&apos;");
  // Control characters and bytes that are not UTF-8 (which XML 1.0 refuses) become their visible escapes.
  CHECK(escape(std::string("x\x01y\xff", 4)) == "x\\x01y\\xff");
  CHECK(escape("GPU · ü") == "GPU · ü");
  Document d(10, 10, "<title>");
  d.text(1, 2, "a & b");
  d.rect(0, 0, 1, 1, "#000000", "tip \"quoted\"");
  const std::string s = d.str();
  CHECK_THAT(s, Contains("<title>&lt;title&gt;</title>"));
  CHECK_THAT(s, Contains(">a &amp; b</text>"));
  CHECK_THAT(s, Contains("<title>tip &quot;quoted&quot;</title>"));
}

TEST_CASE("svg: numbers have at most two decimals and no trailing zeros", "[pictures][svg]") {
  CHECK(num(12) == "12");
  CHECK(num(12.5) == "12.5");
  CHECK(num(-0.25) == "-0.25");
  CHECK(num(1.0 / 3) == "0.33");
  CHECK(num(-0.001) == "0");
  CHECK(num(1.0 / 0.0) == "0");  // never "inf" in a coordinate
}

TEST_CASE("svg: the document is self-contained and closes what it opens", "[pictures][svg]") {
  Document d(200, 100, "t");
  d.begin_group("g");
  d.line(0, 0, 10, 10, {.stroke = "#ff0000", .width = 2, .dash = "4 3"});
  d.polyline({{0, 0}, {5, 5}}, {});
  d.text(5, 5, "rotated", {.size = 10, .anchor = Anchor::Middle, .bold = true, .rotate = -90});
  const std::string s = d.str();  // the group left open is closed
  CHECK(s.rfind("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"200\" "
                "height=\"100\" viewBox=\"0 0 200 100\" font-family=\"sans-serif\">",
                0) == 0);
  CHECK_THAT(s, Contains("stroke-dasharray=\"4 3\""));
  CHECK_THAT(s, Contains("text-anchor=\"middle\" font-weight=\"bold\" transform=\"rotate(-90 5 5)\""));
  CHECK_THAT(s, Contains("<polyline fill=\"none\""));
  CHECK(s.find("</g>\n</svg>\n") != std::string::npos);
  CHECK(s.find("<script") == std::string::npos);
  CHECK(s.find("href") == std::string::npos);
  d.end_group();
  d.end_group();  // one too many: ignored
  CHECK(d.str().find("</g>\n</g>") == std::string::npos);
}

TEST_CASE("svg: palette colours are distinct and text stays readable on them", "[pictures][svg]") {
  for (size_t i = 0; i < 30; ++i)
    for (size_t j = i + 1; j < 30; ++j) CHECK(palette(i) != palette(j));
  CHECK(palette(0) == "#4e79a7");
  CHECK(palette(30) == palette(0));
  CHECK(text_colour_on("#ffffff") == "#000000");
  CHECK(text_colour_on("#1f1f1f") == "#ffffff");
  CHECK(text_colour_on("bogus") == "#000000");
}

TEST_CASE("svg: ticks are round and cover the range", "[pictures][svg]") {
  CHECK(nice_ticks(0, 1, 5) == std::vector<double>{0, 0.2, 0.4, 0.6000000000000001, 0.8, 1});
  CHECK(nice_ticks(0, 400000, 8) == std::vector<double>{0, 50000, 100000, 150000, 200000, 250000, 300000, 350000, 400000});
  CHECK(nice_ticks(3, 3) == std::vector<double>{3});
  CHECK(nice_ticks(0, 1.0 / 0.0).empty());
  CHECK(tick_label(0) == "0");
  CHECK(tick_label(50000) == "50k");
  CHECK(tick_label(2500000) == "2.5M");
  CHECK(tick_label(1234) == "1234");
  CHECK(tick_label(5e-05) == "5e-05");
  CHECK(tick_label(0.00015) == "0.00015");
}
