// The vocabulary size Megatron's tokenizer would report (tokenizer.vocab_size, before padding), for the model plan:
// the embedding and output layer have that many rows. megatron-run loads no tokenizer library; it reads only what the
// size depends on (Megatron's megatron/core/tokenizers, build_tokenizer and its libraries):
//   --vocab-size                  wins wherever Megatron passes it on (TikTokenizer, NullTokenizer), and is the way to
//                                 give the size for every other tokenizer too;
//   GPT2BPETokenizer              the tokens of --vocab-file (a vocab.json), or GPT-2's 50257 without one (Megatron
//                                 fetches GPT-2's), plus --tokenizer-special-tokens not among them;
//   TikTokenizer                  its default vocab_size, 2^17 (DEFAULT_TIKTOKEN_MAX_VOCAB), whatever its file holds;
//   SentencePieceTokenizer, GPTSentencePieceTokenizer, Llama2Tokenizer
//                                 the pieces of the --tokenizer-model file (a SentencePiece ModelProto: get_piece_size),
//                                 plus each --tokenizer-special-tokens entry that is no piece (or is the unknown piece),
//                                 as its add_special_tokens counts them;
//   HuggingFaceTokenizer          len(tokenizer) of a local --tokenizer-model: the distinct tokens of its tokenizer.json
//                                 (the model's vocabulary and the added tokens), plus --tokenizer-special-tokens not
//                                 among them (a directory holding tokenizer.json, or that file itself).
// Anything else (another tokenizer, a hub name, a missing or unreadable file) is a RunError that names the flag or the
// file and asks for --vocab-size. Torch-free.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "config/args.h"

namespace mr::run {

int64_t tokenizer_vocab_size(const Args& a);

// The pieces of a serialized SentencePiece ModelProto (field 1, each piece's field 1), in order, and the unknown
// piece's text (type UNKNOWN) into *unknown when given. `name` is the file for messages; RunError when the bytes are
// not such a message (truncated, a bad tag or length, no piece).
std::vector<std::string> sentencepiece_pieces(std::string_view proto, const std::string& name,
                                              std::string* unknown = nullptr);
// The distinct tokens of a HuggingFace tokenizer.json (model.vocab: an object for BPE, WordPiece and WordLevel, a
// list of [piece, score] for Unigram; and added_tokens[].content). RunError naming `name` otherwise.
std::vector<std::string> huggingface_tokens(std::string_view json, const std::string& name);

}  // namespace mr::run
