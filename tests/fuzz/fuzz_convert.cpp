// libFuzzer: the value converters — the layer-pattern grammar, JSON, int tuples, Python int/float, and every
// other argument type. The first byte picks the converter, the rest is the word.
#include <string_view>

#include "config/schema.h"
#include "config/converters.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view word(reinterpret_cast<const char*>(data + 1), size - 1);
  constexpr int kTypes = static_cast<int>(mr::ArgType::SignalEnum) + 1;
  const int pick = data[0] % (kTypes + 3);
  mr::fuzz::expect_no_internal_error([&] {
    if (pick == kTypes) (void)mr::eval_pattern(word);
    else if (pick == kTypes + 1) (void)mr::parse_py_int(word);
    else if (pick == kTypes + 2) (void)mr::parse_py_float(word);
    else (void)mr::convert(static_cast<mr::ArgType>(pick), word);
  });
  return 0;
}
