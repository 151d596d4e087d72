// The resolved arguments as a typed, read-only view: the schema table's second consumer.
//
// `config/args.def` is generated at build time from the same table the parser uses (lib/config/schema/*.inc,
// plus the dests validate_args adds, lib/config/args_derived.inc) by mr_argsgen (lib/config/argsgen/). Every
// dest is a member of mr::Args with a C++ type chosen from its declaration:
//   switches                      bool (std::optional<bool> where the default is None)
//   type=int / float / str        int64_t / double / std::string, std::optional<...> where the default is None
//   a closed set of str choices   an enum in mr::arg (args.lr_decay_style == arg::LrDecayStyle::cosine), spelled
//                                 as Megatron spells it by to_string(); "inverse-square-root" is inverse_square_root,
//                                 a C++ keyword gets a trailing '_' ("auto" is auto_)
//   nargs lists                   std::vector<...> (std::optional<std::vector<...>> where the default is None)
//   anything else                 mr::Value (layer patterns, JSON, CUDA-graph modules, nargs with a scalar default)
//   a dest validation fills       int64_t though its default is None (global_batch_size, ffn_hidden_size,
//                                 kv_channels, ...: argsgen.cpp's kValidated): read validation's value as it is
// A misspelt member does not compile. Build the view once, after validation, with Args::from(namespace); a dest the
// namespace lacks takes the schema's default (no consumer carries its own default), except a dest validation fills:
// there Args::from refuses a namespace without a value. `Args()` is all defaults, and 0 for those dests (no
// validated namespace holds 0 there: a test that builds a view by hand sets the ones it reads).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "config/namespace.h"
#include "config/value.h"

namespace mr {

// Enums of the dests whose choices are a closed set of strings.
namespace arg {
#define MR_ARG_ENUM(E) enum class E : uint8_t {
#define MR_ARG_ENUMERATOR(E, name, spelling) name,
#define MR_ARG_ENUM_END(E) \
  }                        \
  ;                        \
  std::string_view to_string(E v);  \
  bool from_string(std::string_view s, E& out);
#include "config/args.def"
}  // namespace arg

// One id per dest, in declaration order (the schema's, then the derived dests').
enum class ArgId : uint16_t {
#define MR_ARG(member, type, flag, def) member,
#include "config/args.def"
};
inline constexpr size_t kArgCount = 0
#define MR_ARG(member, type, flag, def) +1
#include "config/args.def"
    ;

// A resolved value that does not have the shape of its dest's C++ type; the message names the flag.
struct ArgsError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Args {
#define MR_ARG(member, type, flag, def) type member;
#include "config/args.def"

  Args();  // every dest at the schema's default (0 for a validation_fills() dest)
  // The validated namespace's values; dests it lacks keep the default, dests the schema does not know are ignored.
  // Throws ArgsError naming the flag when a value does not fit (e.g. "fast" for --lr); for a derived value, also
  // what set it (its provenance: "(set by --use-checkpoint-args: ck/iter_0000006/rank_00000.json)").
  // A dest validation fills (validation_fills()) that is None or absent is refused: an ArgsError naming the flag, an
  // internal error, since a namespace that went through validation has its value.
  static Args from(const Namespace& ns);
  // A namespace validation stopped in: the launch of a user's program whose model shape comes from a checkpoint
  // megatron-run cannot read (the program validates the checkpoint's values; --use-checkpoint-args in
  // docs/checkpoints.md). As from(), but a dest validation fills that the namespace leaves None holds 0, as in
  // Args(): the launcher's checks before that program starts (its input files, its time limits) read none of them,
  // and nothing else may take this view.
  static Args from_unvalidated(const Namespace& ns);

  // A member as the namespace would hold it (None, bool, int, float, str, list; enums as their spelling).
  Value value(ArgId id) const;
};

std::string_view dest_of(ArgId id);               // "micro_batch_size" (its flag: Schema::flag_for_dest)
const Value& default_of(ArgId id);                // the schema's default
bool validation_fills(ArgId id);                  // validation never leaves it None (typed int64_t, not optional)
std::optional<ArgId> find_arg(std::string_view dest);
// Whether `v` has the shape of `id`'s C++ type (what Args::from would read): nullptr when it does, else what it
// should be ("an integer", "a list", "one of its choices", ...). None fits a validation_fills() dest: it is None until
// validation fills it.
const char* misfit(ArgId id, const Value& v);

}  // namespace mr
