// The files a user's Megatron program reads and the directories it writes, named by its flags, checked on this
// node before its workers start (a real launch of a program; never a dry run or `check`, which may run far from
// the data). Megatron itself finds a missing dataset or tokenizer file only when it first opens it, after the
// process groups and the model are built, and an unwritable --save at the first save, hours in.
//
//   launch.input-missing      (error)   a --data-path / --train|valid|test-data-path prefix whose .bin or .idx is
//                                       not there (and that is no file or directory of its own), a --data-args-path
//                                       or --per-split-data-args-path file, the tokenizer's files (--vocab-file,
//                                       --merge-file, --tokenizer-model, for the tokenizer types that read them),
//                                       the quantization recipe (--kitchen-config-file, --te-precision-config-file,
//                                       which core_transformer_config_from_args opens as it builds the model)
//   launch.output-unwritable  (error)   --save, --tensorboard-dir: not a directory, or one this user cannot create
//                                       or write (a symbolic link to nothing included)
//   launch.data-cache-unwritable (warning) --data-cache-path so (Megatron writes there only when a cache is missing;
//                                       not checked with --dataloader-fast-cache-load)
//   launch.load-empty         (warning) --load (unless it is --save: a first run's) or --pretrained-checkpoint
//                                       without latest_checkpointed_iteration.txt, where Megatron starts from random
//                                       initialization (unless --ckpt-step names the iteration, or a non-persistent
//                                       checkpoint type may hold one); an error (launch.input-missing) with
//                                       --exit-on-missing-checkpoint, where Megatron exits 1 after building the model
// --sft and --use-varlen-dataset read HuggingFace datasets: their --data-path words are not checked. An error's
// message ends with the way past the checks (--no-file-checks).
// Paths with a scheme (s3://, msc://) are not checked. Torch-free.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "config/args.h"
#include "config/rule.h"

namespace mr::launch {

extern const Rule kInputMissingRule;
extern const Rule kOutputUnwritableRule;
extern const Rule kCacheUnwritableRule;
extern const Rule kLoadEmptyRule;

struct InputFinding {
  const Rule* rule;
  ArgId arg;            // ArgId::data_path: the namespace's provenance of dest_of(arg) says where its value came from
  std::string message;  // "argument --data-path: ...", without the rule id
};

// The flag a finding names: Schema::flag_for_dest of its dest ("--data-path").
std::string finding_flag(const InputFinding& f);

// What the program would find missing or could not write on this node, in the order of the flags above.
std::vector<InputFinding> program_input_findings(const Args& a);

// Megatron's reading of a blend (get_blend_from_list, megatron/core/datasets/utils.py): an even number of words
// whose every other word, from the first, is a number (Python's float()) are weights and prefixes; any other list
// is prefixes only. The prefixes, in order.
std::vector<std::string> blend_prefixes(const std::vector<std::string>& words);

// Whether Python's float() accepts `s` (surrounding blanks, a sign, digits with single underscores between them, a
// point, an exponent; inf, infinity and nan in any case).
bool python_float(std::string_view s);

// Why `dir` cannot be used as a directory this user writes to ("" when it can): it is there and is not a directory
// or not writable, or it is not there and its nearest existing parent is not a writable directory.
std::string unwritable_dir_reason(const std::string& dir);

}  // namespace mr::launch
