// libFuzzer: the tokenizer-file readers of the model plan (lib/run/tokenizer_vocab.h). The first byte picks what the
// rest is: a SentencePiece ModelProto or a HuggingFace tokenizer.json. A bad input may only end in a RunError (exit 1
// in megatron-run, naming the file); anything else aborts and libFuzzer records the input.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string_view>

#include "run/model.h"
#include "run/tokenizer_vocab.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    if (data[0] % 2) (void)mr::run::sentencepiece_model(body, "input.model", {"<s>", "<unk>", "a"});
    else (void)mr::run::huggingface_tokens(body, "tokenizer.json");
  } catch (const mr::run::RunError&) {
  } catch (const std::exception& e) {
    std::fprintf(stderr, "internal error (not a RunError): %s\n", e.what());
    std::abort();
  }
  return 0;
}
