// The vocabulary size Megatron's tokenizer would report (tokenizer.vocab_size, before padding), for the model plan:
// the embedding and output layer have that many rows. megatron-run loads no tokenizer library; it reads only what the
// size depends on (Megatron's megatron/core/tokenizers, build_tokenizer and its libraries):
//   --vocab-size                  wins wherever Megatron passes it on (TikTokenizer, NullTokenizer), and is the way to
//                                 give the size for every other tokenizer too;
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
//                                 (the model's vocabulary and the added tokens), plus --tokenizer-special-tokens not
//                                 among them (a directory holding tokenizer.json, or that file itself). Tokens that
//                                 only tokenizer_config.json adds are not seen.
// Anything else (another tokenizer, a hub name, a missing or unreadable file) is a RunError that names the flag or the
// file and asks for --vocab-size. A file is read once per process (the plan is made per rank and stage), by
// util/bounded_file.h's reader. Torch-free.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <string_view>

#include "config/args.h"

namespace mr::run {

int64_t tokenizer_vocab_size(const Args& a);

// A serialized SentencePiece ModelProto (field 1: its pieces), read in constant memory: how many pieces, the unknown
// piece's text (type UNKNOWN), and which of `watch` are pieces. `name` is the file for messages; RunError when the
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
// list of [piece, score] for Unigram; and added_tokens[].content). RunError naming `name` otherwise.
std::set<std::string> huggingface_tokens(std::string_view json, const std::string& name);

}  // namespace mr::run
