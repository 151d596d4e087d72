// The tokenizer's vocabulary size for the model plan (run/tokenizer_vocab.h): the fixed sizes, real SentencePiece and
// HuggingFace tokenizer files (tests/data/tokenizers, written by its make_fixtures.py with the libraries themselves,
// whose counts the expectations are), special tokens, and every way a file or flag can be unusable.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <fstream>
#include <map>
#include <set>

#include "../distributed/proc.h"
#include "config/limits.h"
#include "config/value.h"
#include "run/model.h"
#include "run/tokenizer_vocab.h"

#include "../config/validated_fills.h"

using mr::Namespace;
using mr::Value;
using mr::run::tokenizer_vocab_size;

namespace {

const std::string kData = std::string(MR_SOURCE_DIR) + "/tests/data/tokenizers";

mr::Args args(std::map<std::string, Value> v) {
  Namespace ns;
  for (auto& [k, x] : v) ns.set(k, x, {});
  mrtest::fill_as_validated(ns);
  return mr::Args::from(ns);
}
Value str(const std::string& s) { return Value(s); }
Value list(std::vector<std::string> xs) {
  mr::List l;
  for (auto& x : xs) l.push_back(Value(x));
  return Value(l);
}

// Protobuf wire bytes: a varint, a length-delimited field.
std::string varint(uint64_t v) {
  std::string out;
  do {
    out.push_back(static_cast<char>((v & 0x7f) | (v > 0x7f ? 0x80 : 0)));
    v >>= 7;
  } while (v);
  return out;
}
std::string field(int number, const std::string& bytes) { return varint(uint64_t(number) << 3 | 2) + varint(bytes.size()) + bytes; }
// ModelProto's field 1: a SentencePiece { piece = 1, score = 2 (a float), type = 3 }.
std::string piece(const std::string& text, int type = 1) {
  return field(1, field(1, text) + varint(2 << 3 | 5) + std::string("\0\0\0\0", 4) + varint(3 << 3 | 0) + varint(type));
}

}  // namespace

TEST_CASE("vocabulary: --vocab-size sizes the model only where Megatron passes it to the tokenizer",
          "[run][model][tokenizer]") {
  using mr::run::model_vocab;
  const Value v128(int64_t{128});
  // TikTokenizer and the Null tokenizers take it (build_tokenizer's vocab_size kwarg): no notice.
  for (const char* t : {"TikTokenizer", "NullTokenizer", "NullMultimodalTokenizer"}) {
    const mr::run::ModelVocab m = model_vocab(args({{"tokenizer_type", str(t)}, {"vocab_size", v128}}));
    CHECK(m.size == 128);
    CHECK(m.notice.empty());
  }
  // GPT2BPETokenizer is built without it: GPT-2's 50257 sizes the model (the reviewer's 50x smaller embedding),
  // and the notice says --vocab-size is not used.
  const mr::run::ModelVocab gpt2 = model_vocab(args({{"tokenizer_type", str("GPT2BPETokenizer")}, {"vocab_size", v128}}));
  CHECK(gpt2.size == 50257);
  CHECK(gpt2.notice == "--vocab-size 128 is not used: Megatron builds --tokenizer-type GPT2BPETokenizer without it and "
                       "sizes the model by the tokenizer's vocabulary, 50257 tokens (before padding)");
  CHECK(model_vocab(args({{"tokenizer_type", str("GPT2BPETokenizer")}, {"vocab_size", Value(int64_t{50257})}})).notice.empty());
  // A SentencePiece model file: its pieces win over --vocab-size as well.
  const mr::run::ModelVocab sp = model_vocab(args({{"tokenizer_type", str("SentencePieceTokenizer")},
                                                   {"tokenizer_model", str(kData + "/spm_bpe60.model")},
                                                   {"vocab_size", v128}}));
  CHECK(sp.size == 60);
  CHECK_THAT(sp.notice, Catch::Contains("--vocab-size 128 is not used") && Catch::Contains("60 tokens"));
  // What megatron-run cannot read: --vocab-size stands in, said so, with the reason.
  const mr::run::ModelVocab bert = model_vocab(args({{"tokenizer_type", str("BertWordPieceCase")}, {"vocab_size", v128}}));
  CHECK(bert.size == 128);
  CHECK(bert.notice == "--vocab-size 128 stands in for the vocabulary of --tokenizer-type BertWordPieceCase, which "
                       "megatron-run cannot work out (--tokenizer-type BertWordPieceCase: megatron-run does not read its "
                       "files); Megatron builds that tokenizer without --vocab-size and sizes the model by the "
                       "tokenizer's own vocabulary");
  const mr::run::ModelVocab hub = model_vocab(args({{"tokenizer_type", str("HuggingFaceTokenizer")},
                                                    {"tokenizer_model", str("meta-llama/Llama-3-8B")},
                                                    {"vocab_size", v128}}));
  CHECK(hub.size == 128);
  CHECK_THAT(hub.notice, Catch::Contains("is not a local path (a HuggingFace hub name is not fetched))"));
  // The model plan follows it (padded to a multiple of 128).
  const mr::Args a = args({{"tokenizer_type", str("GPT2BPETokenizer")}, {"vocab_size", v128}, {"num_layers", Value(int64_t{1})},
                           {"hidden_size", Value(int64_t{64})}, {"num_attention_heads", Value(int64_t{4})},
                           {"make_vocab_size_divisible_by", Value(int64_t{128})}, {"max_position_embeddings", Value(int64_t{32})},
                           {"seq_length", Value(int64_t{32})}});
  CHECK(mr::run::plan_gpt_model(a, {}).padded_vocab_size == 50304);
}

TEST_CASE("vocabulary: --vocab-size, GPT-2's 50257, TikTokenizer's 2^17", "[run][model][tokenizer]") {
  CHECK(tokenizer_vocab_size(args({{"vocab_size", Value(int64_t{1000})}, {"tokenizer_type", str("HuggingFaceTokenizer")}})) ==
        1000);
  CHECK(tokenizer_vocab_size(args({{"tokenizer_type", str("GPT2BPETokenizer")}})) == 50257);
  CHECK(tokenizer_vocab_size(args({{"tokenizer_type", str("GPT2BPETokenizer")},
                                   {"special_tokens", list({"<|endoftext|>", "<pad>"})}})) == 50258);
  // (--vocab-file does not change it: HuggingFace's "gpt2" tokenizer.json rules in a fast tokenizer.)
  CHECK(tokenizer_vocab_size(args({{"tokenizer_type", str("GPT2BPETokenizer")}, {"vocab_file", str("/nonexistent/vocab.json")}})) ==
        50257);
  CHECK(tokenizer_vocab_size(args({{"tokenizer_type", str("TikTokenizer")}})) == 131072);  // DEFAULT_TIKTOKEN_MAX_VOCAB
  CHECK(tokenizer_vocab_size(args({{"tokenizer_type", str("TikTokenizer")}, {"vocab_size", Value(int64_t{100000})}})) ==
        100000);
  CHECK_THROWS_WITH(tokenizer_vocab_size(args({})), Catch::Equals("the model plan needs --vocab-size: no --tokenizer-type"));
  CHECK_THROWS_WITH(tokenizer_vocab_size(args({{"tokenizer_type", str("NullTokenizer")}})),
                    Catch::Contains("needs --vocab-size") && Catch::Contains("NullTokenizer"));
}

TEST_CASE("vocabulary: a SentencePiece model's pieces, and special tokens as add_special_tokens adds them",
          "[run][model][tokenizer]") {
  const std::string model = kData + "/spm_bpe60.model";
  for (const char* t : {"GPTSentencePieceTokenizer", "Llama2Tokenizer", "SentencePieceTokenizer"})
    CHECK(tokenizer_vocab_size(args({{"tokenizer_type", str(t)}, {"tokenizer_model", str(model)}})) == 60);
  // <s> and <mask> are pieces; <extra> is new (once); <unk> maps to unk_id, so it is added anew (sentencepiece's count).
  // Megatron's SentencePiece tokenizer takes special tokens only with legacy on.
  const Value special = list({"<s>", "<extra>", "<unk>", "<extra>", "<mask>"});
  CHECK(tokenizer_vocab_size(args({{"tokenizer_type", str("GPTSentencePieceTokenizer")},
                                   {"tokenizer_model", str(model)},
                                   {"tokenizer_sentencepiece_legacy", Value(true)},
                                   {"special_tokens", special}})) == 62);
  CHECK_THROWS_WITH(tokenizer_vocab_size(args({{"tokenizer_type", str("GPTSentencePieceTokenizer")},
                                               {"tokenizer_model", str(model)},
                                               {"special_tokens", special}})),
                    Catch::Contains("needs --tokenizer-sentencepiece-legacy"));
  // A refusal --vocab-size does not mend stays one: Megatron's tokenizer fails to build whatever --vocab-size says.
  CHECK_THROWS_WITH(mr::run::model_vocab(args({{"tokenizer_type", str("GPTSentencePieceTokenizer")},
                                      {"tokenizer_model", str(model)},
                                      {"special_tokens", special},
                                      {"vocab_size", Value(int64_t{128})}})),
                    Catch::StartsWith("--tokenizer-special-tokens with --tokenizer-type GPTSentencePieceTokenizer "
                                      "needs --tokenizer-sentencepiece-legacy"));
  // The model plan pads it: 60 up to 128.
  mr::Args a = args({{"num_layers", Value(int64_t{1})}, {"hidden_size", Value(int64_t{64})},
                     {"num_attention_heads", Value(int64_t{4})}, {"ffn_hidden_size", Value(int64_t{256})},
                     {"make_vocab_size_divisible_by", Value(int64_t{128})}, {"max_position_embeddings", Value(int64_t{32})},
                     {"tokenizer_type", str("Llama2Tokenizer")}, {"tokenizer_model", str(model)}});
  CHECK(mr::run::plan_gpt_model(a, {}).padded_vocab_size == 128);
}

TEST_CASE("vocabulary: a HuggingFace tokenizer.json counts as len(tokenizer)", "[run][model][tokenizer]") {
  auto size = [](const std::string& path, std::vector<std::string> special = {}) {
    std::map<std::string, Value> v = {{"tokenizer_type", str("HuggingFaceTokenizer")}, {"tokenizer_model", str(path)}};
    if (!special.empty()) v["special_tokens"] = list(special);
    return tokenizer_vocab_size(args(v));
  };
  CHECK(size(kData + "/hf_bpe") == 81);  // a directory holding tokenizer.json: BPE's vocabulary object
  CHECK(size(kData + "/hf_bpe/tokenizer.json") == 81);
  CHECK(size(kData + "/hf_unigram") == 55);  // Unigram's [piece, score] list
  CHECK(size(kData + "/hf_bpe", {"<|im_start|>", "<new>", "<new>"}) == 82);
  CHECK_THROWS_WITH(size("meta-llama/Llama-3.1-8B"),
                    Catch::Contains("is not a local path") && Catch::Contains("--vocab-size"));
  CHECK_THROWS_WITH(tokenizer_vocab_size(args({{"tokenizer_type", str("HuggingFaceTokenizer")}})),
                    Catch::Contains("without --tokenizer-model"));
}

TEST_CASE("vocabulary: a HuggingFace directory's config files add tokens as transformers loads them",
          "[run][model][tokenizer]") {
  auto size = [](const std::string& path) {
    return tokenizer_vocab_size(args({{"tokenizer_type", str("HuggingFaceTokenizer")}, {"tokenizer_model", str(path)}}));
  };
  // make_fixtures.py's counts from transformers 5.25.0: hf_bpe's 81 tokens, plus <tool> (added_tokens_decoder),
  // <|pad|> (special_tokens_map.json's pad_token over the config's <pad>), <mask> (an AddedToken object), <image> (a
  // model-specific *_token) and <a1> (additional_special_tokens); <s> and "the" are in the vocabulary already and
  // added_tokens.json is not read beside added_tokens_decoder.
  CHECK(size(kData + "/hf_config") == 86);
  CHECK(size(kData + "/hf_config/tokenizer.json") == 81);  // the file alone: no directory to read beside it
  CHECK(size(kData + "/hf_legacy") == 82);                  // added_tokens.json's <legacy> without added_tokens_decoder

  using mr::run::huggingface_directory_tokens;
  using Set = std::set<std::string>;
  const std::optional<std::string> none;
  auto cfg = [&](const std::string& json) { return huggingface_directory_tokens(json, none, none, "d"); };
  CHECK(cfg(R"({"extra_special_tokens": {"image_token": "<i>", "video_token": {"content": "<v>"}}})") == Set{"<i>", "<v>"});
  CHECK(cfg(R"({"extra_special_tokens": ["<e>", {"content": "<f>"}]})") == Set{"<e>", "<f>"});
  // Not tokens: a null special token, booleans and numbers named *_token, other keys' strings.
  CHECK(cfg(R"({"pad_token": null, "add_bos_token": true, "max_token": 3, "chat_template": "<t>", "x": "<x>"})").empty());
  // A model-specific *_token counts only as a string; the named ones also as an AddedToken object.
  CHECK(cfg(R"({"image_token": {"content": "<i>"}, "bos_token": {"content": "<b>"}})") == Set{"<b>"});
  CHECK(cfg(R"({"pad_token": "<p1>", "pad_token": "<p2>"})") == Set{"<p2>"});  // json.load keeps a key's last value
  CHECK(huggingface_directory_tokens(R"({"additional_special_tokens": ["<c>"], "pad_token": "<p>"})",
                                     std::string(R"({"additional_special_tokens": ["<m>"]})"), none, "d") ==
        Set{"<m>", "<p>"});
  CHECK(huggingface_directory_tokens(none, none, std::string(R"({"<old>": 7})"), "d") == Set{"<old>"});
  // The readers' errors are the reason alone (model_vocab adds what --vocab-size does about it).
  CHECK_THROWS_AS(cfg("{"), mr::run::VocabUnknown);
  CHECK_THROWS_WITH(cfg("{"), Catch::StartsWith("d/tokenizer_config.json: not JSON (") && !Catch::Contains("--vocab-size"));
  CHECK_THROWS_WITH(huggingface_directory_tokens(none, std::string("[1]"), none, "d"),
                    Catch::Contains("d/special_tokens_map.json: not a JSON object"));

  // Through the run's reader: an unreadable config file in a directory is named.
  mrtest::TempDir dir;
  std::ofstream(dir / "tokenizer.json") << R"({"model": {"vocab": {"a": 0}}})";
  ::mkdir((dir / "tokenizer_config.json").c_str(), 0700);
  CHECK_THROWS_WITH(size(dir.path.string()), Catch::Contains("tokenizer_config.json: cannot read the --tokenizer-model "
                                                      "tokenizer_config.json: it is a directory"));
}

TEST_CASE("vocabulary: unusable tokenizer files are refused, naming the file", "[run][model][tokenizer]") {
  mrtest::TempDir dir;
  auto sp = [&](const std::string& bytes) {
    const std::string path = dir / "t.model";
    std::ofstream(path, std::ios::binary) << bytes;
    return tokenizer_vocab_size(args({{"tokenizer_type", str("GPTSentencePieceTokenizer")}, {"tokenizer_model", str(path)}}));
  };
  // A hand-made ModelProto: three pieces (one UNKNOWN), a trainer_spec, and top-level fields of every wire type.
  const std::string good = piece("<unk>", 2) + piece("a") + field(2, "xyz") + varint(9 << 3 | 0) + varint(300) +
                           varint(10 << 3 | 1) + std::string(8, '\0') + varint(11 << 3 | 5) + std::string(4, '\0') +
                           piece("b");
  CHECK(sp(good) == 3);
  const mr::run::SentencePieceModel m = mr::run::sentencepiece_model(good, "m", {"a", "b", "c"});
  CHECK(m.pieces == 3);
  CHECK(m.unknown == "<unk>");
  CHECK(m.found == std::set<std::string>{"a", "b"});
  CHECK_THROWS_WITH(sp(good.substr(0, good.size() - 2)), Catch::Contains("t.model: not a SentencePiece model"));
  CHECK_THROWS_WITH(sp(piece("a") + piece("b")), Catch::Contains("no unknown piece"));   // sentencepiece refuses it
  CHECK_THROWS_WITH(sp(piece("<unk>", 2) + piece("")), Catch::Contains("an empty piece at byte"));
  CHECK_THROWS_WITH(sp(varint(uint64_t{1} << 35 | 2) + varint(0)), Catch::Contains("field number 4294967296"));
  CHECK_THROWS_WITH(sp(""), Catch::Contains("no pieces"));
  CHECK_THROWS_WITH(sp(varint(1 << 3 | 3)), Catch::Contains("wire type 3"));
  CHECK_THROWS_WITH(sp(varint(1 << 3 | 2) + varint(1000) + "ab"), Catch::Contains("a length past the end"));
  CHECK_THROWS_WITH(sp(std::string(11, '\xff')), Catch::Contains("more than 10 bytes"));
  CHECK_THROWS_WITH(sp("{\"json\": true}"), Catch::StartsWith("the model plan needs --vocab-size: ") &&
                                               Catch::Contains("t.model: not a SentencePiece model"));
  CHECK_THROWS_WITH(mr::run::sentencepiece_model("{}", "m.model"),
                    Catch::StartsWith("m.model: not a SentencePiece model (") && !Catch::Contains("--vocab-size"));
  CHECK_THROWS_WITH(tokenizer_vocab_size(args({{"tokenizer_type", str("Llama2Tokenizer")},
                                                {"tokenizer_model", str(dir / "missing.model")}})),
                    Catch::Contains("missing.model") && Catch::Contains("--vocab-size"));

  auto hf = [&](const std::string& text) {
    const std::string path = dir / "tokenizer.json";
    std::ofstream(path) << text;
    return tokenizer_vocab_size(args({{"tokenizer_type", str("HuggingFaceTokenizer")}, {"tokenizer_model", str(path)}}));
  };
  CHECK(hf(R"({"model": {"vocab": {"a": 0, "b": 1}}, "added_tokens": [{"id": 1, "content": "b"}, {"id": 2, "content": "c"}]})") == 3);
  CHECK_THROWS_WITH(hf("{"), Catch::Contains("tokenizer.json: not a HuggingFace tokenizer.json"));
  CHECK_THROWS_WITH(hf("[]"), Catch::Contains("not a JSON object"));
  CHECK_THROWS_WITH(hf(R"({"model": {}})"), Catch::Contains("no \"model.vocab\""));
  CHECK_THROWS_WITH(hf(R"({"model": {"vocab": 3}})"), Catch::Contains("neither an object nor a list"));
  CHECK_THROWS_WITH(hf(R"({"model": {"vocab": [3]}})"), Catch::Contains("not [piece, score]"));
  CHECK_THROWS_WITH(hf(R"({"model": {"vocab": {}}})"), Catch::Contains("an empty vocabulary"));
  // Millions of tiny values (a 56 MB Unigram list of ["", 0] took 2.7 GB parsed): the parser stops at the limit.
  std::string many = R"({"model": {"vocab": [["a", 0])";
  for (uint64_t i = 0; i < mr::limits::kMaxJsonValues / 3; ++i) many += R"(,["", 0])";
  many += "]}}";
  CHECK_THROWS_WITH(mr::run::huggingface_tokens(many, "big/tokenizer.json"),
                    Catch::Equals("big/tokenizer.json: not a HuggingFace tokenizer.json (more than 8000000 JSON values)"));
  CHECK_THROWS_WITH(mr::run::huggingface_directory_tokens(many, std::nullopt, std::nullopt, "big"),
                    Catch::Contains("big/tokenizer_config.json: more than 8000000 JSON values"));
}
