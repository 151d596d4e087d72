// libFuzzer: Megatron's command line. The input is split at NUL bytes into words (argv has no NUL).
#include <vector>

#include "config/parse/argparse.h"
#include "config/schema.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> words{"megatron-run"};
  std::string cur;
  for (size_t i = 0; i < size; ++i) {
    if (data[i] == 0) words.push_back(std::move(cur)), cur.clear();
    else cur.push_back(static_cast<char>(data[i]));
  }
  words.push_back(cur);
  mr::fuzz::expect_no_internal_error([&] {
    const mr::Schema& schema = mr::Schema::megatron();
    mr::Namespace ns = mr::default_namespace(schema);
    mr::parse_tokens(schema, mr::argv_tokens(words, 1), ns);
  });
  return 0;
}
