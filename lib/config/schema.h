// The argument schema: every Megatron-LM flag, declared once as data (lib/config/schema/*.inc).
//
// Parsing, --help, the Megatron-format printer, JSON export (`megatron-run schema`) and shell completion are
// all generated from this table. An entry is one argparse action: its option strings, the attribute (dest) it
// writes, how values are converted and stored, its default and its help text.
#pragma once

#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "config/value.h"

namespace mr {

// How a command-line word becomes a value. Names follow the Python callables Megatron passes as `type=`.
enum class ArgType {
  None,              // switches (store_true/store_false/store_const): take no value
  Int,               // int(x)
  Float,             // float(x)
  Str,               // str(x)
  PyBool,            // bool(x): Python truthiness of the word, so any non-empty word is True
  Json,              // json.loads(x)
  Path,              // pathlib.Path(x); kept as a string
  MoeFreq,           // int, or a layer pattern such as "([1]*3+[0]*1)*3"
  LaFreq,            // same grammar as MoeFreq (linear-attention frequency)
  NoRopeFreq,        // same grammar as MoeFreq (layers that skip RoPE)
  CompressRatios,    // a layer pattern (list of ints) only
  IntTuple,          // "1,2" or "(1,2)" -> a tuple of ints
  CudaGraphModule,   // a CudaGraphModule enum name, or a deprecated whole-graph scope word
  TritonBlockSize,   // NAME=INT
  AttnBackendEnum,   // AttnBackend member name -> "AttnBackend.<name>"
  SignalEnum,        // signal name (SIGTERM) -> its number
};

enum class Action { Store, StoreTrue, StoreFalse, StoreConst, Append, BoolOptional };

struct ArgSpec {
  const char* dest;      // attribute name in the resolved namespace
  const char* flags;     // option strings separated by '|', e.g. "--no-foo|--disable-foo"
  ArgType type = ArgType::None;
  Action action = Action::Store;
  const char* def = "null";     // default, as JSON text
  const char* konst = "null";   // store_const/store_true/store_false constant, as JSON text
  const char* choices = "";     // allowed values, as a JSON array; "" for any
  const char* nargs = "";       // "", "?", "*", "+" or a count
  const char* metavar = "";
  const char* group = "";
  const char* deprecated = "";  // non-empty: why/what instead; using the flag prints a warning
  const char* env_default = "";  // non-empty: the default is this environment variable's value when it is set
  const char* help = "";
};

// One entry with its JSON fields decoded once.
struct Arg {
  const ArgSpec* spec;
  std::vector<std::string> flags;
  Value def;
  Value konst;
  std::vector<Value> choices;  // empty: any value
  char nargs_kind = 0;         // 0 (one value), '?', '*', '+', or 'N' (exact count in nargs_count)
  int nargs_count = 0;

  const char* dest() const { return spec->dest; }
  bool takes_value() const {
    return spec->action == Action::Store || spec->action == Action::Append;
  }
  bool is_switch() const { return !takes_value(); }
  // A deprecated or removed flag the validation chain reports (a rule's warning or error), not the parser: the
  // table writes its help "Deprecated (...)" and leaves `.deprecated` empty, so that it is not warned about twice.
  bool reported_deprecated() const { return std::string_view(spec->help).rfind("Deprecated (", 0) == 0; }
};

class Schema {
 public:
  static const Schema& megatron();  // the built-in table, decoded on first use

  const std::vector<Arg>& args() const { return args_; }
  // The action an option string (e.g. "--num-layers") belongs to, or nullptr.
  const Arg* find_flag(std::string_view flag) const;
  // All actions writing a dest (usually one; a few dests have a positive and a negative switch).
  std::vector<const Arg*> find_dest(std::string_view dest) const;
  // The option strings nearest to a misspelt one, best first.
  std::vector<std::string> suggest(std::string_view flag, size_t max = 3) const;
  // Defaults of every dest, in declaration order (the namespace argparse starts from).
  std::vector<std::pair<std::string, Value>> defaults() const;
  // The flag messages name a dest by: the first option string of its first action ("--tensor-model-parallel-size");
  // for a dest no flag writes (one validate_args derives), "--" and the dest with '-' for '_'. The one
  // dest-to-flag mapping: validation, the worker input, the schedule and the --yaml-cfg notices use it.
  std::string flag_for_dest(std::string_view dest) const;

  explicit Schema(const ArgSpec* begin, const ArgSpec* end);

 private:
  std::vector<Arg> args_;
  std::unordered_map<std::string_view, const Arg*> by_flag_;
  std::unordered_multimap<std::string_view, const Arg*> by_dest_;
};

// Megatron's argparse mutually exclusive groups (add_mutually_exclusive_group), each as its dests: argparse
// refuses a member given after another of its group ("argument --b: not allowed with argument --a", exit 2). The
// seed has one, the kitchen group's recipe-or-config (arguments.py, _add_kitchen_quantization_arguments).
const std::vector<std::vector<std::string_view>>& mutually_exclusive_groups();

const char* to_string(ArgType t);
const char* to_string(Action a);

}  // namespace mr
