// The vocabulary size Megatron's tokenizer would report (tokenizer.vocab_size, before padding), for the model plan:
// the embedding and output layer have that many rows. megatron-run loads no tokenizer library; it reads only what the
// size depends on (Megatron's megatron/core/tokenizers, build_tokenizer and its libraries):
//   --vocab-size                  wins where Megatron passes it on (TikTokenizer, the Null tokenizers), and stands in
//                                 for the size of a tokenizer megatron-run cannot read (model_vocab, below);
//   GPT2BPETokenizer              GPT-2's 50257 (Megatron loads HuggingFace's "gpt2", whose tokenizer.json a fast
//                                 tokenizer takes over --vocab-file), plus --tokenizer-special-tokens other than
//                                 <|endoftext|>;
//   TikTokenizer                  its default vocab_size, 2^17 (DEFAULT_TIKTOKEN_MAX_VOCAB), whatever its file holds;
//   SentencePieceTokenizer, GPTSentencePieceTokenizer, Llama2Tokenizer
//                                 the pieces of the --tokenizer-model file (a SentencePiece ModelProto: get_piece_size),
//                                 plus each --tokenizer-special-tokens entry that is no piece (or is the unknown piece),
//                                 as its add_special_tokens counts them; special tokens need
//                                 --tokenizer-sentencepiece-legacy, as Megatron's tokenizer does;
//   HuggingFaceTokenizer          len(tokenizer) of a local --tokenizer-model: the distinct tokens of its tokenizer.json
//                                 (the model's vocabulary and the added tokens), plus, for a directory, the tokens
//                                 its tokenizer_config.json, special_tokens_map.json and added_tokens.json add as
//                                 transformers loads them (huggingface_directory_tokens), plus
//                                 --tokenizer-special-tokens not among them (a directory holding tokenizer.json, or
//                                 that file itself).
// Anything else (another tokenizer, a hub name, a missing or unreadable file) is a VocabUnknown naming the flag or the
// file: model_vocab lets --vocab-size stand in for it, or asks for --vocab-size. A file is read once per process (the plan is made per rank and stage), by
// util/bounded_file.h's reader. Torch-free.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "config/args.h"
#include "run/model.h"

namespace mr::run {

// megatron-run cannot work the tokenizer's size out; the text is the reason alone, naming the flag or the file
// (model_vocab says what --vocab-size does about it). A plain RunError from here is a refusal --vocab-size does not
// mend (SentencePiece special tokens without --tokenizer-sentencepiece-legacy).
struct VocabUnknown : RunError {
  using RunError::RunError;
};

// The model's vocabulary before padding, and a notice for the run when --vocab-size is not what sizes it: Megatron's
// build_tokenizer passes --vocab-size to TikTokenizer and the Null tokenizers only, so for the others the
// tokenizer's own size wins ("--vocab-size N is not used ..."), and where megatron-run cannot work that size out
// (a hub name, a BERT word-piece file, a missing file) --vocab-size stands in for it, said so. Without
// --vocab-size, the tokenizer's size or a RunError asking for --vocab-size ("the model plan needs --vocab-size: "
// and the reason).
struct ModelVocab {
  int64_t size = 0;
  std::string notice;  // empty: --vocab-size (if any) is what Megatron's tokenizer reports
};
ModelVocab model_vocab(const Args& a);
int64_t tokenizer_vocab_size(const Args& a);  // model_vocab(a).size

// A serialized SentencePiece ModelProto (field 1: its pieces), read in constant memory: how many pieces, the unknown
// piece's text (type UNKNOWN), and which of `watch` are pieces. `name` is the file for messages; VocabUnknown when the
// bytes are not such a model (truncated, a bad tag or length, an empty piece, no piece or no unknown piece: what
// sentencepiece refuses to load).
struct SentencePieceModel {
  int64_t pieces = 0;
  std::string unknown;
  std::set<std::string> found;
};
SentencePieceModel sentencepiece_model(std::string_view proto, const std::string& name,
                                       const std::set<std::string>& watch = {});
// The distinct tokens of a HuggingFace tokenizer.json (model.vocab: an object for BPE, WordPiece and WordLevel, a
// list of [piece, score] for Unigram; and added_tokens[].content). VocabUnknown naming `name` otherwise.
std::set<std::string> huggingface_tokens(std::string_view json, const std::string& name);

// The tokens transformers (5.x; AutoTokenizer.from_pretrained) adds to tokenizer.json's from a directory's other
// files, each absent (nullopt) or its text: tokenizer_config.json's added_tokens_decoder (id -> AddedToken), its
// special tokens bos/eos/unk/sep/pad/cls/mask_token (a string or an AddedToken object), any other *_token string
// (model-specific, e.g. image_token), additional_special_tokens / extra_special_tokens (a list, or a name -> token
// object); special_tokens_map.json's value replaces the config's for each key it has; added_tokens.json (the legacy
// token -> id object) counts only where there is no added_tokens_decoder. transformers 4.x differs in two corners:
// it counts no model-specific *_token, and it joins the two files' additional_special_tokens. VocabUnknown naming the
// file (in `dir`) when one is not a JSON object.
std::set<std::string> huggingface_directory_tokens(const std::optional<std::string>& config,
                                                   const std::optional<std::string>& special_map,
                                                   const std::optional<std::string>& added, const std::string& dir);

}  // namespace mr::run
