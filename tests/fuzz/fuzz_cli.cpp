// libFuzzer: Megatron's command line. The input is split at NUL bytes into words (argv has no NUL). The words are
// parsed alone (argparse), then as a program launch: those before a word "PROG" as megatron-run's Megatron flags,
// those after it as the program's own (config/parse/invocation.h: the program's argparse namespace, the words
// appended after it and what the launcher reads of them).
#include <algorithm>
#include <vector>

#include "config/parse/argparse.h"
#include "config/parse/command_line.h"
#include "config/parse/invocation.h"
#include "config/schema.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> words;
  std::string cur;
  for (size_t i = 0; i < size; ++i) {
    if (data[i] == 0) words.push_back(std::move(cur)), cur.clear();
    else cur.push_back(static_cast<char>(data[i]));
  }
  words.push_back(cur);
  const mr::Schema& schema = mr::Schema::megatron();
  mr::fuzz::expect_no_internal_error([&] {
    mr::Namespace ns = mr::default_namespace(schema);
    mr::parse_tokens(schema, mr::argv_tokens(words), ns);
  });
  const auto prog = std::find(words.begin(), words.end(), "PROG");
  if (prog == words.end()) return 0;
  for (bool append : {true, false})
    mr::fuzz::expect_no_internal_error([&] {
      mr::Invocation inv;
      inv.cli = mr::argv_tokens(std::vector<std::string>(words.begin(), prog));
      const int first = 2 + static_cast<int>(prog - words.begin());  // argv index of the program's first word
      inv.program_cli = mr::argv_tokens(std::vector<std::string>(prog + 1, words.end()), first);
      inv.append_to_program = append;
      inv.program_named = true;
      const mr::Parsed p = mr::parse_arguments(schema, inv);
      if (append && p.program) mr::appended_argv(p);
    });
  return 0;
}
