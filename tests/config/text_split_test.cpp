// util/text.h's split: Python's str.split(sep) for one character, which the comma lists of Megatron's flags
// (--fault-injector-ranks, --phase-transition-iterations, --window-size), torchrun's options (--rdzv-conf,
// --signals-to-handle, --local-ranks-filter), CUDA_VISIBLE_DEVICES and the layer patterns are read with.
#include <catch2/catch.hpp>

#include "util/text.h"

using V = std::vector<std::string>;

TEST_CASE("split: every piece, the empty ones too, as Python's str.split(sep)", "[text]") {
  CHECK(mr::split("a,b,c", ',') == V{"a", "b", "c"});
  CHECK(mr::split("", ',') == V{""});          // ''.split(',') == ['']
  CHECK(mr::split(",", ',') == V{"", ""});     // ','.split(',') == ['', '']
  CHECK(mr::split("a,,b,", ',') == V{"a", "", "b", ""});
  CHECK(mr::split("no separator", ',') == V{"no separator"});
  CHECK(mr::split(" a , b ", ',') == V{" a ", " b "});  // pieces are not stripped
  CHECK(mr::split("M-M*|MM/M", '|') == V{"M-M*", "MM/M"});
  const std::string with_nul("a\0b,c", 5);
  CHECK(mr::split(with_nul, ',') == V{std::string("a\0b", 3), "c"});
}
