// The tokenizer's vocabulary size for the model plan (run/tokenizer_vocab.h).
#include "run/tokenizer_vocab.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <new>
#include <optional>
#include <set>
#include <stdexcept>

#include "config/limits.h"
#include "config/value.h"
#include "run/model.h"
#include "util/bounded_file.h"

namespace mr::run {
namespace {

// ---- protobuf wire format (only what a ModelProto's pieces need) ----------------------------------------------

struct Wire {
  std::string_view s;
  const std::string& name;
  size_t base = 0;  // where s starts in the file (for messages)
  size_t at = 0;

  [[noreturn]] void bad(const std::string& why) const {
    throw VocabUnknown(name + ": not a SentencePiece model (" + why + " at byte " + std::to_string(base + at) + ")");
  }
  // A field's tag: its number (1 to 2^29 - 1) and wire type.
  std::pair<uint64_t, uint32_t> tag() {
    const uint64_t t = varint();
    if ((t >> 3) == 0 || (t >> 3) >= (uint64_t{1} << 29)) bad("field number " + std::to_string(t >> 3));
    return {t >> 3, static_cast<uint32_t>(t & 7)};
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
  std::string_view bytes(size_t* start = nullptr) {  // a length-delimited field's content (and where it starts)
    const uint64_t n = varint();
    if (n > s.size() - at) bad("a length past the end");
    if (start) *start = base + at;
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

std::set<std::string> special_tokens(const Args& a) {
  const std::vector<std::string> t = a.special_tokens.value_or(std::vector<std::string>{});
  return {t.begin(), t.end()};
}
// `base` plus the special tokens that are not `known` (each once).
int64_t plus_special_tokens(int64_t base, const Args& a, const std::set<std::string>& known) {
  for (const std::string& t : special_tokens(a))
    if (!known.count(t)) ++base;
  return base;
}

std::string need_model(const Args& a, const std::string& tokenizer) {
  if (!a.tokenizer_model || a.tokenizer_model->empty())
    throw VocabUnknown("--tokenizer-type " + tokenizer + " without --tokenizer-model");
  return *a.tokenizer_model;
}

// The whole file `path` (util/bounded_file.h: a regular file of at most limits::kMaxInputFileBytes), or VocabUnknown.
std::string read(const std::string& path, const std::string& what) {
  try {
    return read_bounded_file(path, limits::kMaxInputFileBytes);
  } catch (const FileRefusal& r) {
    const std::string why = r.kind == FileRefusal::Kind::NotRegular ? std::string("it is ") + file_kind(r.mode)
                            : r.kind == FileRefusal::Kind::TooLarge
                                ? r.size + ", more than " + describe_bytes(limits::kMaxInputFileBytes)
                            : r.kind == FileRefusal::Kind::EmptyPath ? std::string("an empty path")
                                                                     : std::string(std::strerror(r.err));
    throw VocabUnknown(path + ": cannot read the " + what + ": " + why);
  }
}

// The size, worked out once per process for each tokenizer and file (the plan is made per rank and stage, and a
// large tokenizer.json takes a fraction of a second to parse).
int64_t cached(const std::string& key, const std::function<int64_t()>& compute) {
  static std::mutex mu;
  static std::map<std::string, int64_t> sizes;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = sizes.find(key); it != sizes.end()) return it->second;
  }
  const int64_t n = compute();
  std::lock_guard<std::mutex> lock(mu);
  sizes.emplace(key, n);
  return n;
}
std::string cache_key(const Args& a, const std::string& tokenizer, const std::string& path) {
  std::string k = tokenizer + '\0' + path;
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0)
    k += '\0' + std::to_string(st.st_size) + '\0' + std::to_string(st.st_mtim.tv_sec) + '.' +
         std::to_string(st.st_mtim.tv_nsec);
  for (const std::string& t : special_tokens(a)) k += '\0' + t;
  return k;
}

}  // namespace

SentencePieceModel sentencepiece_model(std::string_view proto, const std::string& name,
                                       const std::set<std::string>& watch) {
  Wire w{proto, name};
  SentencePieceModel m;
  bool have_unknown = false;
  while (!w.done()) {
    const auto [field, type] = w.tag();
    if (field != 1 || type != 2) {
      w.skip(type);
      continue;
    }
    // SentencePiece { string piece = 1; float score = 2; Type type = 3 (NORMAL 1, UNKNOWN 2, ...) }
    size_t start = 0;
    const std::string_view body = w.bytes(&start);
    Wire p{body, name, start};
    std::string_view text;
    uint64_t kind = 1;
    while (!p.done()) {
      const auto [f, t] = p.tag();
      if (f == 1 && t == 2) text = p.bytes();
      else if (f == 3 && t == 0) kind = p.varint();
      else p.skip(t);
    }
    if (text.empty()) p.bad("an empty piece");
    ++m.pieces;
    if (kind == 2) m.unknown = std::string(text), have_unknown = true;
    if (!watch.empty() && watch.count(std::string(text))) m.found.insert(std::string(text));
  }
  if (m.pieces == 0) w.bad("no pieces");
  if (!have_unknown) w.bad("no unknown piece");
  return m;
}

namespace {

// The text of an AddedToken as HuggingFace's files write one ({"content": ..., "special": ...}); nullptr otherwise.
const std::string* added_token_content(const Value& v) {
  if (v.is_object())
    for (const auto& [k, x] : v.as_object())
      if (k == "content" && x.is_str()) return &x.as_str();
  return nullptr;
}

}  // namespace

std::set<std::string> huggingface_tokens(std::string_view json, const std::string& name) {
  auto bad = [&](const std::string& why) -> VocabUnknown {
    return VocabUnknown(name + ": not a HuggingFace tokenizer.json (" + why + ")");
  };
  Value v;
  try {
    v = Value::parse_json(json, limits::kMaxJsonValues);
  } catch (const JsonTooManyValues& e) {  // refused as the parser reaches the limit, before the tree passes it
    throw bad("more than " + std::to_string(e.limit) + " JSON values");
  } catch (const std::bad_alloc&) {
    throw bad("out of memory while parsing it");
  } catch (const std::exception& e) {  // JsonError
    throw bad(e.what());
  }
  if (!v.is_object()) throw bad("not a JSON object");
  std::set<std::string> out;
  auto add = [&](const std::string& t) { out.insert(t); };
  const Value* model = nullptr;
  for (const auto& [k, x] : v.as_object()) {
    if (k == "model") model = &x;
    if (k == "added_tokens" && x.is_list())
      for (const Value& t : x.as_list())
        if (const std::string* c = added_token_content(t)) add(*c);
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

std::set<std::string> huggingface_directory_tokens(const std::optional<std::string>& config,
                                                   const std::optional<std::string>& special_map,
                                                   const std::optional<std::string>& added, const std::string& dir) {
  auto object = [&](const std::optional<std::string>& json, const char* file) -> Object {
    if (!json) return {};  // the file is absent
    const std::string name = dir + "/" + file;
    Value v;
    try {
      v = Value::parse_json(*json, limits::kMaxJsonValues);
    } catch (const JsonTooManyValues& e) {
      throw VocabUnknown(name + ": more than " + std::to_string(e.limit) + " JSON values");
    } catch (const std::bad_alloc&) {
      throw VocabUnknown(name + ": out of memory while parsing it");
    } catch (const std::exception& e) {
      throw VocabUnknown(name + ": not JSON (" + std::string(e.what()) + ")");
    }
    if (!v.is_object()) throw VocabUnknown(name + ": not a JSON object");
    return v.as_object();
  };
  // A token as these files write it: a string, or an AddedToken.
  auto content = [](const Value& v) -> const std::string* { return v.is_str() ? &v.as_str() : added_token_content(v); };
  // The init arguments: tokenizer_config.json's, each key special_tokens_map.json has replaced by the map's value.
  std::map<std::string, const Value*> init;
  const Object cfg = object(config, "tokenizer_config.json"), map = object(special_map, "special_tokens_map.json");
  for (const auto& [k, v] : cfg) init[k] = &v;
  for (const auto& [k, v] : map) init[k] = &v;
  std::set<std::string> out;
  auto add = [&](const Value& v) {
    if (const std::string* t = content(v)) out.insert(*t);
  };
  bool have_decoder = false;
  for (const auto& [k, v] : init) {
    if (k == "added_tokens_decoder" && v->is_object()) {  // id -> AddedToken
      have_decoder = true;
      for (const auto& [id, t] : v->as_object()) add(t);
    } else if ((k == "additional_special_tokens" || k == "extra_special_tokens") && v->is_list()) {
      for (const Value& t : v->as_list()) add(t);
    } else if (k == "extra_special_tokens" && v->is_object()) {  // name -> token
      for (const auto& [name, t] : v->as_object()) add(t);
    } else if (k.size() > 6 && k.compare(k.size() - 6, 6, "_token") == 0) {
      // bos_token ... mask_token as a string or an AddedToken; another *_token only as a string (transformers 5's
      // model-specific special tokens).
      static const std::set<std::string> named = {"bos_token", "eos_token", "unk_token", "sep_token",
                                                  "pad_token", "cls_token", "mask_token"};
      if (v->is_str() || named.count(k)) add(*v);
    }
  }
  if (!have_decoder)  // the legacy added_tokens.json (token -> id) is read only without added_tokens_decoder
    for (const auto& [token, id] : object(added, "added_tokens.json")) out.insert(token);
  return out;
}

namespace {

// What the tokenizer itself reports (--vocab-size only where Megatron passes it to the tokenizer).
int64_t tokenizer_own_size(const Args& a) {
  if (!a.tokenizer_type) {
    if (a.vocab_size) return *a.vocab_size;
    throw VocabUnknown("no --tokenizer-type");
  }
  const std::string tokenizer(arg::to_string(*a.tokenizer_type));
  switch (*a.tokenizer_type) {
    case arg::TokenizerType::GPT2BPETokenizer:
      // HuggingFace's "gpt2" (its tokenizer.json rules over --vocab-file in a fast tokenizer): 50257, of which only
      // <|endoftext|> can be a special token asked for.
      return plus_special_tokens(50257, a, {"<|endoftext|>"});
    case arg::TokenizerType::TikTokenizer:  // Megatron's DEFAULT_TIKTOKEN_MAX_VOCAB, or the --vocab-size it passes
      return a.vocab_size ? *a.vocab_size : int64_t{1} << 17;
    case arg::TokenizerType::NullTokenizer:
    case arg::TokenizerType::NullMultimodalTokenizer:
      if (a.vocab_size) return *a.vocab_size;
      throw VocabUnknown("--tokenizer-type " + tokenizer + " takes its size from it");
    case arg::TokenizerType::SentencePieceTokenizer:
    case arg::TokenizerType::GPTSentencePieceTokenizer:
    case arg::TokenizerType::Llama2Tokenizer: {
      const std::string path = need_model(a, tokenizer);
      const std::set<std::string> special = special_tokens(a);
      if (!special.empty() && !a.tokenizer_sentencepiece_legacy)
        throw RunError("--tokenizer-special-tokens with --tokenizer-type " + tokenizer +
                       " needs --tokenizer-sentencepiece-legacy (Megatron's SentencePiece tokenizer refuses special "
                       "tokens otherwise)");
      return cached(cache_key(a, tokenizer, path), [&] {
        const SentencePieceModel m = sentencepiece_model(read(path, "--tokenizer-model file"), path, special);
        std::set<std::string> known = m.found;
        known.erase(m.unknown);  // piece_to_id of the unknown piece is unk_id: add_special_tokens adds it anew
        return plus_special_tokens(m.pieces, a, known);
      });
    }
    case arg::TokenizerType::HuggingFaceTokenizer: {
      std::string path = need_model(a, tokenizer);
      struct stat st {};
      if (::stat(path.c_str(), &st) != 0) {
        if (errno == ENOENT)
          throw VocabUnknown("--tokenizer-model " + path + " is not a local path (a HuggingFace hub name is not "
                             "fetched)");
        throw VocabUnknown("--tokenizer-model " + path + ": " + std::strerror(errno));
      }
      const bool dir = S_ISDIR(st.st_mode);
      const std::string json = dir ? path + "/tokenizer.json" : path;
      static const char* const kBeside[] = {"tokenizer_config.json", "special_tokens_map.json", "added_tokens.json"};
      std::string key = cache_key(a, tokenizer, json);
      if (dir)
        for (const char* file : kBeside) key += '\0' + cache_key(a, "", path + "/" + file);
      return cached(key, [&] {
        std::set<std::string> tokens = huggingface_tokens(read(json, "--tokenizer-model tokenizer.json"), json);
        if (dir) {  // what transformers adds from the directory's other files
          auto optional = [&](const char* file) -> std::optional<std::string> {
            const std::string p = path + "/" + file;
            struct stat fs {};
            if (::stat(p.c_str(), &fs) != 0 && errno == ENOENT) return std::nullopt;
            return read(p, std::string("--tokenizer-model ") + file);
          };
          const std::set<std::string> more =
              huggingface_directory_tokens(optional(kBeside[0]), optional(kBeside[1]), optional(kBeside[2]), path);
          tokens.insert(more.begin(), more.end());
        }
        return plus_special_tokens(static_cast<int64_t>(tokens.size()), a, tokens);
      });
    }
    default:
      throw VocabUnknown("--tokenizer-type " + tokenizer + ": megatron-run does not read its files");
  }
}

}  // namespace

ModelVocab model_vocab(const Args& a) {
  // Megatron's build_tokenizer passes --vocab-size to TikTokenizer and the Null tokenizers only; the others
  // (GPT2BPETokenizer, the BERT word pieces, SentencePiece, HuggingFace, multimodal, SFT) report their own size.
  const bool passed_on = !a.tokenizer_type || *a.tokenizer_type == arg::TokenizerType::TikTokenizer ||
                         *a.tokenizer_type == arg::TokenizerType::NullTokenizer ||
                         *a.tokenizer_type == arg::TokenizerType::NullMultimodalTokenizer;
  if (!a.vocab_size || passed_on) {
    try {
      return {tokenizer_own_size(a), ""};
    } catch (const VocabUnknown& e) {
      throw RunError(std::string("the model plan needs --vocab-size: ") + e.what());
    }
  }
  const std::string given = "--vocab-size " + std::to_string(*a.vocab_size);
  const std::string tokenizer = "--tokenizer-type " + std::string(arg::to_string(*a.tokenizer_type));
  try {
    const int64_t own = tokenizer_own_size(a);
    if (own == *a.vocab_size) return {own, ""};
    return {own, given + " is not used: Megatron builds " + tokenizer + " without it and sizes the model by the "
                     "tokenizer's vocabulary, " + std::to_string(own) + " tokens (before padding)"};
  } catch (const VocabUnknown& e) {
    return {*a.vocab_size, given + " stands in for the vocabulary of " + tokenizer + ", which megatron-run cannot "
                               "work out (" + e.what() + "); Megatron builds that tokenizer without --vocab-size "
                               "and sizes the model by the tokenizer's own vocabulary"};
  }
}

int64_t tokenizer_vocab_size(const Args& a) { return model_vocab(a).size; }

}  // namespace mr::run
