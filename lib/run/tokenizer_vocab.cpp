// The tokenizer's vocabulary size for the model plan (run/tokenizer_vocab.h).
#include "run/tokenizer_vocab.h"

#include <sys/stat.h>

#include <set>
#include <stdexcept>

#include "config/parse/read_file.h"
#include "config/value.h"
#include "run/model.h"

namespace mr::run {
namespace {

// ---- protobuf wire format (only what a ModelProto's pieces need) ----------------------------------------------

struct Wire {
  std::string_view s;
  const std::string& name;
  size_t at = 0;

  [[noreturn]] void bad(const std::string& why) const {
    throw RunError(name + ": not a SentencePiece model (" + why + " at byte " + std::to_string(at) +
                   "); give --vocab-size");
  }
  bool done() const { return at >= s.size(); }
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (at >= s.size()) bad("a truncated number");
      const uint8_t b = static_cast<uint8_t>(s[at++]);
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    bad("a number of more than 10 bytes");
  }
  std::string_view bytes() {  // a length-delimited field's content
    const uint64_t n = varint();
    if (n > s.size() - at) bad("a length past the end");
    std::string_view out = s.substr(at, static_cast<size_t>(n));
    at += static_cast<size_t>(n);
    return out;
  }
  void skip(uint32_t wire_type) {
    switch (wire_type) {
      case 0: (void)varint(); return;
      case 1: if (s.size() - at < 8) bad("a truncated 64-bit field"); at += 8; return;
      case 2: (void)bytes(); return;
      case 5: if (s.size() - at < 4) bad("a truncated 32-bit field"); at += 4; return;
      default: bad("wire type " + std::to_string(wire_type));
    }
  }
};

int64_t plus_special_tokens(int64_t base, const Args& a, const std::set<std::string>& known) {
  std::set<std::string> added;
  for (const std::string& t : a.special_tokens.value_or(std::vector<std::string>{}))
    if (!known.count(t) && added.insert(t).second) ++base;
  return base;
}

std::string need_model(const Args& a, const std::string& tokenizer) {
  if (!a.tokenizer_model || a.tokenizer_model->empty())
    throw RunError("--tokenizer-type " + tokenizer + " without --tokenizer-model: the model plan needs --vocab-size");
  return *a.tokenizer_model;
}

std::string read(const std::string& path, const std::string& what) {
  try {
    return read_input_file(path, what, {"tokenizer_model"});
  } catch (const std::exception& e) {
    throw RunError(std::string(e.what()) + "; give --vocab-size");
  }
}

}  // namespace

std::vector<std::string> sentencepiece_pieces(std::string_view proto, const std::string& name, std::string* unknown) {
  Wire w{proto, name};
  std::vector<std::string> pieces;
  while (!w.done()) {
    const uint64_t tag = w.varint();
    const uint32_t field = static_cast<uint32_t>(tag >> 3), type = static_cast<uint32_t>(tag & 7);
    if (field == 0) w.bad("field number 0");
    if (field != 1 || type != 2) {
      w.skip(type);
      continue;
    }
    // SentencePiece { string piece = 1; float score = 2; Type type = 3 (NORMAL 1, UNKNOWN 2, ...) }
    Wire p{w.bytes(), name};
    std::string text;
    uint64_t kind = 1;
    while (!p.done()) {
      const uint64_t t = p.varint();
      if ((t >> 3) == 1 && (t & 7) == 2) text = std::string(p.bytes());
      else if ((t >> 3) == 3 && (t & 7) == 0) kind = p.varint();
      else if ((t >> 3) == 0) p.bad("field number 0");
      else p.skip(static_cast<uint32_t>(t & 7));
    }
    if (kind == 2 && unknown) *unknown = text;
    pieces.push_back(std::move(text));
  }
  if (pieces.empty()) w.bad("no pieces");
  return pieces;
}

std::vector<std::string> huggingface_tokens(std::string_view json, const std::string& name) {
  auto bad = [&](const std::string& why) -> RunError {
    return RunError(name + ": not a HuggingFace tokenizer.json (" + why + "); give --vocab-size");
  };
  Value v;
  try {
    v = Value::parse_json(json);
  } catch (const std::exception& e) {
    throw bad(e.what());
  }
  if (!v.is_object()) throw bad("not a JSON object");
  std::set<std::string> seen;
  std::vector<std::string> out;
  auto add = [&](const std::string& t) {
    if (seen.insert(t).second) out.push_back(t);
  };
  const Value* model = nullptr;
  for (const auto& [k, x] : v.as_object()) {
    if (k == "model") model = &x;
    if (k == "added_tokens" && x.is_list())
      for (const Value& t : x.as_list())
        if (t.is_object())
          for (const auto& [tk, tv] : t.as_object())
            if (tk == "content" && tv.is_str()) add(tv.as_str());
  }
  if (!model || !model->is_object()) throw bad("no \"model\" object");
  const Value* vocab = nullptr;
  for (const auto& [k, x] : model->as_object())
    if (k == "vocab") vocab = &x;
  if (!vocab) throw bad("no \"model.vocab\"");
  if (vocab->is_object()) {
    for (const auto& [tok, id] : vocab->as_object()) add(tok);  // BPE, WordPiece, WordLevel: token -> id
  } else if (vocab->is_list()) {
    for (const Value& e : vocab->as_list()) {  // Unigram: [piece, score]
      if (!e.is_list() || e.as_list().empty() || !e.as_list()[0].is_str()) throw bad("a Unigram entry is not [piece, score]");
      add(e.as_list()[0].as_str());
    }
  } else {
    throw bad("\"model.vocab\" is neither an object nor a list");
  }
  if (out.empty()) throw bad("an empty vocabulary");
  return out;
}

int64_t tokenizer_vocab_size(const Args& a) {
  if (a.vocab_size) return *a.vocab_size;
  if (!a.tokenizer_type) throw RunError("the model plan needs --vocab-size: megatron-run loads no tokenizer");
  const std::string tokenizer(arg::to_string(*a.tokenizer_type));
  switch (*a.tokenizer_type) {
    case arg::TokenizerType::GPT2BPETokenizer: {
      // HuggingFace's GPT2Tokenizer on --vocab-file (GPT-2's own, 50257 entries, without one), len(tokenizer).
      // (Without the file, of GPT-2's tokens only its <|endoftext|> is known to be one: other special tokens count new.)
      if (!a.vocab_file || a.vocab_file->empty()) return plus_special_tokens(50257, a, {"<|endoftext|>"});
      const std::string& path = *a.vocab_file;
      Value v;
      try {
        v = Value::parse_json(read(path, "--vocab-file"));
      } catch (const JsonError& e) {
        throw RunError(path + ": not a GPT-2 vocab.json (" + e.what() + "); give --vocab-size");
      }
      if (!v.is_object() || v.as_object().empty())
        throw RunError(path + ": not a GPT-2 vocab.json (not an object of tokens); give --vocab-size");
      std::set<std::string> tokens;
      for (const auto& [tok, id] : v.as_object()) tokens.insert(tok);
      return plus_special_tokens(static_cast<int64_t>(tokens.size()), a, tokens);
    }
    case arg::TokenizerType::TikTokenizer: return int64_t{1} << 17;  // Megatron's DEFAULT_TIKTOKEN_MAX_VOCAB
    case arg::TokenizerType::SentencePieceTokenizer:
    case arg::TokenizerType::GPTSentencePieceTokenizer:
    case arg::TokenizerType::Llama2Tokenizer: {
      const std::string path = need_model(a, tokenizer);
      std::string unknown;
      const std::vector<std::string> pieces = sentencepiece_pieces(read(path, "--tokenizer-model file"), path, &unknown);
      std::set<std::string> known(pieces.begin(), pieces.end());
      known.erase(unknown);  // piece_to_id of the unknown piece is unk_id: add_special_tokens adds it anew
      return plus_special_tokens(static_cast<int64_t>(pieces.size()), a, known);
    }
    case arg::TokenizerType::HuggingFaceTokenizer: {
      std::string path = need_model(a, tokenizer);
      struct stat st {};
      if (::stat(path.c_str(), &st) != 0)
        throw RunError("--tokenizer-model " + path + " is not a local path (a HuggingFace hub name is not fetched): the "
                       "model plan needs --vocab-size");
      if (S_ISDIR(st.st_mode)) path += "/tokenizer.json";
      const std::vector<std::string> tokens = huggingface_tokens(read(path, "--tokenizer-model tokenizer.json"), path);
      return plus_special_tokens(static_cast<int64_t>(tokens.size()), a, {tokens.begin(), tokens.end()});
    }
    default:
      throw RunError("the model plan needs --vocab-size: megatron-run loads no tokenizer (--tokenizer-type " +
                     tokenizer + ")");
  }
}

}  // namespace mr::run
