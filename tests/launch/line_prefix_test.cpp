// --log-line-prefix-template: the macros as torchrun substitutes them (Python's string.Template.safe_substitute;
// the expected strings were printed by Python 3.11's Template for the same templates and fields).
#include <catch2/catch.hpp>

#include "launch/line_prefix.h"

using mr::launch::expand_line_prefix;
using mr::launch::PrefixFields;
using mr::launch::unknown_prefix_macros;

TEST_CASE("line prefix: the four macros, both spellings, $$ and unknown names kept", "[launch][prefix]") {
  PrefixFields f{"default", 3, 1, "h"};
  CHECK(expand_line_prefix("[${role_name}${local_rank}]:", f) == "[default1]:");  // torchrun's default
  CHECK(expand_line_prefix("${hostname}:$rank: ", f) == "h:3: ");
  CHECK(expand_line_prefix("$$x ${rnak} $ ${} ${1a} $rank_x", f) == "$x ${rnak} $ ${} ${1a} $rank_x");
  CHECK(expand_line_prefix("a$", f) == "a$");
  CHECK(expand_line_prefix("", f).empty());
  f.role_name = "trainer";
  CHECK(expand_line_prefix("${role_name}/${rank}/${local_rank} ", f) == "trainer/3/1 ");
}

TEST_CASE("line prefix: unknown macros are found for the notice", "[launch][prefix]") {
  CHECK(unknown_prefix_macros("[${rank}] ${hostname}").empty());
  CHECK(unknown_prefix_macros("$$rank") .empty());  // an escaped dollar, then text
  CHECK(unknown_prefix_macros("${rnak} $host ${rank}") == std::vector<std::string>{"${rnak}", "$host"});
}
