// How torchrun's parser (argparse, with its default allow_abbrev) reads an option word that megatron-run's own
// parsers know by no exact name, so that a command line torchrun takes is taken here too:
//
//   -r3, -r=3              a short option with its value attached: -r 3 (argparse drops one '=' after the letter)
//   --nn 2, --nn=2         an unambiguous prefix of a long option: --nnodes 2
//   --n 2                  a prefix of several option strings: refused, "ambiguous option: --n could match ...",
//                          both spellings of one option counting as two strings, as argparse counts them
//                          (so --nproc is ambiguous between --nproc-per-node and --nproc_per_node, under torchrun too)
//
// A word that is exactly a Megatron flag or one of megatron-run's options stays as it is: Megatron's parser takes
// no prefixes (allow_abbrev=False), so its flags are never abbreviated, and a prefix of ours that is also a whole
// Megatron flag (--local-rank, a prefix of --local-ranks-filter) is Megatron's. A prefix of one of ours that also
// starts a Megatron flag (--local-ran, --no-p) is refused as ambiguous, naming both: it may be a Megatron flag cut
// short, which must not silently become a launcher option. '_' and '-' are alike in that search: --local_rank=0
// (Megatron's old spelling of --local-rank, which torch.distributed.launch passes) is refused naming --local-rank,
// where torchrun 2.x silently reads it as --local_ranks_filter=0. A switch given a value (--module=x, --stand=1, -m=x,
// -mx) is refused as argparse refuses it: "argument -m/--module: ignored explicit argument 'x'". Torch-free.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "config/diagnostic.h"
#include "config/schema.h"

namespace mr::launch {

struct OptionSpelling {
  // The long options that take prefixes, every spelling, in the order a refusal names them ("--nproc-per-node",
  // "--nproc_per_node", ...).
  std::vector<std::string> long_options;
  // The short options that take a value, with the long name megatron-run parses them as: {"-r", "--redirects"}.
  std::vector<std::pair<std::string, std::string>> short_options;
  // The options that take no value, each with every option string of it as argparse declares them, short first:
  // {"-m", "--module"}, {"--no-python", "--no_python"}, {"--standalone"}. A long one is in `long_options` too.
  std::vector<std::vector<std::string>> switches;
  // Set: a word that would be refused (an ambiguous prefix, a switch's value) is left as written, for reading a
  // command line whose refusal is being reported (which --format it asks for).
  bool lenient = false;

  // `word` as megatron-run's parsers take it: "-r" -> "--redirects", "-r3" -> "--redirects=3", "--nn=2" ->
  // "--nnodes=2"; unchanged when it is an exact name, a Megatron flag, or no option's prefix. An ambiguous
  // prefix throws UsageError with argparse's words, the candidates in the order of `long_options`; so does a
  // switch given a value (ignored_explicit_argument).
  std::string spell(const std::string& word, const Schema& schema) const;
};

// argparse's refusal of a value given to an option that takes none (`--dry-run=x`, `--module=`):
// "argument NAMES: ignored explicit argument 'VALUE'", NAMES every option string of it ("-m/--module"); `flag` is
// the one the refusal names for --format json. The one wording: the option spelling and every command's own
// options (apps/megatron-run/cli.cpp) refuse with it.
UsageError ignored_explicit_argument(const std::string& names, const std::string& value, const std::string& flag);

}  // namespace mr::launch
