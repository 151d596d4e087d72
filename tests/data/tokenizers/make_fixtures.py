# Writes the tokenizer fixtures of tests/run/tokenizer_vocab_test.cpp (run once, by hand, in a venv with
# `pip install sentencepiece tokenizers`; recorded: sentencepiece 0.2.3, tokenizers 0.23.3) and prints the sizes the
# test expects, as those libraries count them.
import os

import sentencepiece as spm
from tokenizers import Tokenizer, models, pre_tokenizers, trainers

text = "\n".join(["the quick brown fox jumps over the lazy dog %d times" % i for i in range(200)] +
                 ["megatron runs optimizer steps on synthetic gradients", "tokenizers count their pieces"])
with open("corpus.txt", "w") as f:
    f.write(text)
spm.SentencePieceTrainer.train(input="corpus.txt", model_prefix="spm_bpe60", vocab_size=60, model_type="bpe",
                               normalization_rule_name="identity", character_coverage=1.0,
                               user_defined_symbols=["<mask>"], minloglevel=2)
os.remove("spm_bpe60.vocab")
sp = spm.SentencePieceProcessor(model_file="spm_bpe60.model")
size = sp.get_piece_size()
added = set()
for t in ["<s>", "<extra>", "<unk>", "<extra>", "<mask>"]:  # Megatron's add_special_tokens
    if sp.piece_to_id(t) == sp.unk_id() and t not in added:
        added.add(t)
        size += 1
print("spm_bpe60.model: get_piece_size", sp.get_piece_size(), "with <s> <extra> <unk> <extra> <mask>:", size)

for name, model, trainer in [
    ("hf_bpe", models.BPE(unk_token="[UNK]"), trainers.BpeTrainer(vocab_size=80, special_tokens=["[UNK]", "<s>", "</s>"])),
    ("hf_unigram", models.Unigram(), trainers.UnigramTrainer(vocab_size=70, special_tokens=["<unk>", "<s>"],
                                                             unk_token="<unk>")),
]:
    tok = Tokenizer(model)
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train(["corpus.txt"], trainer)
    tok.add_special_tokens(["<|im_start|>", "<s>"])  # one new, one already in the vocabulary
    os.makedirs(name, exist_ok=True)
    tok.save(os.path.join(name, "tokenizer.json"))
    print(name + "/tokenizer.json: len(tokenizer)", tok.get_vocab_size(with_added_tokens=True))
os.remove("corpus.txt")

# HuggingFace directories whose tokenizer_config.json, special_tokens_map.json and added_tokens.json add tokens to
# hf_bpe's tokenizer.json when transformers loads them (AutoTokenizer.from_pretrained; `pip install transformers`;
# recorded: transformers 5.25.0 and 4.57.6, whose len(tokenizer) is printed where they differ).
import json
import shutil

configs = {
    # added_tokens_decoder (one new, one in tokenizer.json), named special tokens as a string, as an AddedToken dict
    # and as a vocabulary token, a model-specific *_token (transformers 5 counts it, 4 does not), additional special
    # tokens; special_tokens_map.json replaces pad_token; added_tokens.json is not read beside added_tokens_decoder.
    "hf_config": (
        {"tokenizer_class": "PreTrainedTokenizerFast",
         "added_tokens_decoder": {"81": {"content": "<tool>", "special": True}, "1": {"content": "<s>", "special": True}},
         "pad_token": "<pad>", "mask_token": {"content": "<mask>", "__type": "AddedToken"}, "unk_token": "the",
         "image_token": "<image>", "additional_special_tokens": ["<a1>", "<s>"], "add_bos_token": True},
        {"pad_token": "<|pad|>"},
        {"<legacy>": 90}),
    # added_tokens.json without added_tokens_decoder: its tokens count.
    "hf_legacy": ({"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "</s>"}, None, {"<legacy>": 81}),
}
for name, (config, special_map, added) in configs.items():
    os.makedirs(name, exist_ok=True)
    shutil.copy(os.path.join("hf_bpe", "tokenizer.json"), name)
    for file, data in [("tokenizer_config.json", config), ("special_tokens_map.json", special_map),
                       ("added_tokens.json", added)]:
        if data is not None:
            with open(os.path.join(name, file), "w") as f:
                json.dump(data, f, indent=1)
    try:
        import transformers
        tok = transformers.AutoTokenizer.from_pretrained(name)
        print(name + ": transformers", transformers.__version__, "len(tokenizer)", len(tok))
    except ImportError:
        print(name + ": written (no transformers here to count it)")
