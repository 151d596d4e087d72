// mr_argsgen: the schema table's second consumer (docs/design.md, "Typed arguments").
//
// Run at build time (add_custom_command in lib/config/CMakeLists.txt). It decodes the same table the parser uses
// (Schema::megatron(), lib/config/schema/*.inc) plus the dests validate_args adds (lib/config/args_derived.inc),
// picks a C++ type for every dest and writes one X-macro file, `config/args.def`:
//
//   MR_ARG_ENUM(LrDecayStyle)                      an enum for a closed set of string choices ...
//   MR_ARG_ENUMERATOR(LrDecayStyle, cosine, "cosine")
//   MR_ARG_ENUM_END(LrDecayStyle)
//   MR_ARG(lr_decay_style, arg::LrDecayStyle, "--lr-decay-style", "\"linear\"")   ... and one line per dest:
//                                                  member name, C++ type, flag, default as JSON
//   MR_ARG_VALIDATED(global_batch_size)            a dest validation never leaves None (kValidated below)
//
// lib/config/args.{h,cpp} expand it (struct mr::Args, mr::ArgId, the conversions), the way clang's
// LangOptions.def is expanded by its consumers. The generator writes data only; all logic is hand-written.
//
// Usage: mr_argsgen OUTPUT_FILE. The file is rewritten only when its text changes (no needless rebuilds).
#include <cctype>
#include <fstream>
#include <iostream>
#include <iterator>
#include <set>
#include <sstream>
#include <string>
#include <unordered_set>
#include <vector>

#include "config/schema.h"

namespace {

using mr::Action;
using mr::Arg;
using mr::ArgSpec;
using mr::ArgType;
using mr::Value;

using T = mr::ArgType;
using A = mr::Action;

// Dests that no flag writes: validate_args (or parse_args) creates them (lib/config/args_derived.inc).
const ArgSpec kDerived[] = {
#include "config/args_derived.inc"
};

// Dests whose validated value leaves the flag's choice set or type: validate_args rewrites them (to a torch dtype,
// an enum member's str(), or None). They are typed std::optional<std::string>, whatever their choices say.
const char* const kRewritten[] = {
    "mamba_inference_conv_states_dtype",  // 'bf16' -> 'torch.bfloat16'
    "mamba_inference_ssm_states_dtype",   // 'bf16' -> 'torch.bfloat16'
    "megatron_fsdp_main_params_dtype",    // 'fp32' -> 'torch.float32'
    "megatron_fsdp_grad_comm_dtype",      // 'auto' -> 'torch.float32' or None
    "megatron_fsdp_main_grads_dtype",     // 'auto' -> 'torch.float32' or None
    "inference_cuda_graph_scope",         // 'layer' -> 'InferenceCudaGraphScope.layer'
    "mamba_training_ssm_states_dtype",    // 'bf16' -> 'torch.bfloat16' (default None)
    "logit_dtype",                        // --output-logit-dtype 'fp32' -> 'torch.float32' (default None)
};

// Dests whose validated value is a list of integers though the flag takes one string: validate_args parses it.
const char* const kIntLists[] = {
    "phase_transition_iterations",  // '30,10' -> [10, 30]
};

// Dests validate_args never leaves None, though their default is None: it fills them (`if args.x is None: args.x =
// ...`) or refuses a None (`assert args.x is not None`, `_check_arg_is_not_none`). They are typed plain int64_t, not
// std::optional: the runtime reads validation's value and carries no default of its own. Args::from refuses a
// namespace where one is None (it did not go through validation). Lines of ../shared/spec/arguments.py.
// Not here: a dest validation fills only in some cases (moe_ffn_hidden_size: with --num-experts only, :1499), and
// --yaml-cfg's validate_yaml leaves expert_tensor_parallel_size None, but a --yaml-cfg namespace has no typed view.
const char* const kValidated[] = {
    "expert_tensor_parallel_size",  // :521  None -> --tensor-model-parallel-size
    "micro_batch_size",             // :627  assert args.micro_batch_size is not None
    "global_batch_size",            // :636  None -> micro_batch_size * batch_parallel_size
    "eval_global_batch_size",       // :642  None -> global_batch_size
    "eval_micro_batch_size",        // :644  None -> micro_batch_size
    "num_layers",                   // :1155 required_args (or encoder_num_layers' value, :1150)
    "hidden_size",                  // :1155 required_args
    "num_attention_heads",          // :1155 required_args
    "max_position_embeddings",      // :1156 required_args
    "ffn_hidden_size",              // :1161 None -> 4h, or int(4h*2/3/64)*64 with --swiglu
    "kv_channels",                  // :1172 None -> hidden_size // num_attention_heads
};

const std::unordered_set<std::string> kCppKeywords = {
    "alignas", "alignof", "and", "and_eq", "asm", "auto", "bitand", "bitor", "bool", "break", "case", "catch", "char",
    "char8_t", "char16_t", "char32_t", "class", "compl", "concept", "const", "consteval", "constexpr", "constinit",
    "const_cast", "continue", "co_await", "co_return", "co_yield", "decltype", "default", "delete", "do", "double",
    "dynamic_cast", "else", "enum", "explicit", "export", "extern", "false", "float", "for", "friend", "goto", "if",
    "inline", "int", "long", "mutable", "namespace", "new", "noexcept", "not", "not_eq", "nullptr", "operator", "or",
    "or_eq", "private", "protected", "public", "register", "reinterpret_cast", "requires", "return", "short",
    "signed", "sizeof", "static", "static_assert", "static_cast", "struct", "switch", "template", "this",
    "thread_local", "throw", "true", "try", "typedef", "typeid", "typename", "union", "unsigned", "using", "virtual",
    "void", "volatile", "wchar_t", "while", "xor", "xor_eq",
    // Macros and names a member must not shadow.
    "errno", "assert", "NULL", "EOF", "unix", "linux",
};

bool is_identifier(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  return true;
}

// "inverse-square-root" -> inverse_square_root; a keyword gets a trailing underscore ("auto" -> auto_).
std::string enumerator_name(const std::string& spelling) {
  std::string n;
  for (char c : spelling) n += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  if (n.empty() || std::isdigit(static_cast<unsigned char>(n[0]))) n = "v" + n;
  if (kCppKeywords.count(n)) n += '_';
  return n;
}

// lr_decay_style -> LrDecayStyle
std::string camel(const std::string& dest) {
  std::string out;
  bool up = true;
  for (char c : dest) {
    if (c == '_') {
      up = true;
      continue;
    }
    out += up ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c;
    up = false;
  }
  return out;
}

std::string cpp_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

struct Enum {
  std::string name;
  std::vector<std::pair<std::string, std::string>> items;  // enumerator, spelling
};

struct Field {
  std::string dest, type, flag, def_json;
  bool validated = false;  // in kValidated
};

bool is_validated(const std::string& dest) {
  for (const char* r : kValidated)
    if (dest == r) return true;
  return false;
}

// The scalar C++ type of a converter, or "" when a value of it has no fixed shape (kept as mr::Value).
std::string scalar_type(ArgType t) {
  switch (t) {
    case T::Int:
    case T::SignalEnum: return "int64_t";
    case T::Float: return "double";
    case T::Str:
    case T::Path:
    case T::None:  // argparse without type=: the word itself
    case T::AttnBackendEnum: return "std::string";
    case T::PyBool: return "bool";
    default: return "";
  }
}

bool fits(const Value& v, const std::string& scalar) {
  if (scalar == "int64_t") return v.is_int() || v.is_bool();
  if (scalar == "double") return v.is_number() || v.is_bool();
  if (scalar == "std::string") return v.is_str();
  if (scalar == "bool") return v.is_bool();
  return false;
}

// The enum of a closed set of string choices, if one can be made: every choice a string, distinct enumerator
// names, the default among them (or None).
bool make_enum(const Arg& a, Enum& e) {
  if (a.choices.empty()) return false;
  std::set<std::string> names;
  for (const Value& c : a.choices) {
    if (!c.is_str()) return false;
    std::string n = enumerator_name(c.as_str());
    if (!names.insert(n).second) return false;
    e.items.emplace_back(n, c.as_str());
  }
  if (!a.def.is_none()) {
    if (!a.def.is_str()) return false;
    bool found = false;
    for (const Value& c : a.choices) found = found || c == a.def;
    if (!found) return false;
  }
  e.name = camel(a.dest());
  return true;
}

std::string optional_of(const std::string& t, bool opt) { return opt ? "std::optional<" + t + ">" : t; }

// The C++ type of a dest from its first action (argparse: the first action registering a dest owns its default).
std::string field_type(const Arg& a, std::vector<Enum>& enums) {
  const ArgSpec& s = *a.spec;
  const bool none_default = a.def.is_none();
  for (const char* r : kRewritten)
    if (std::string(r) == s.dest) return "std::optional<std::string>";
  for (const char* r : kIntLists)
    if (std::string(r) == s.dest) return "std::optional<std::vector<int64_t>>";
  if (is_validated(s.dest)) {
    // Only an integer flag whose None validation replaces: anything else would need its own rule here.
    if (s.action != A::Store || s.type != T::Int || a.nargs_kind != 0 || !none_default) return "";
    return "int64_t";
  }
  switch (s.action) {
    case A::StoreTrue:
    case A::StoreFalse:
    case A::BoolOptional:
      if (a.def.is_bool()) return "bool";
      if (none_default) return "std::optional<bool>";
      return "Value";
    case A::StoreConst:
    case A::Append: return "Value";
    case A::Store: break;
  }
  const std::string scalar = scalar_type(s.type);
  if (scalar.empty()) return "Value";
  if (a.nargs_kind == '?') return "Value";
  if (a.nargs_kind != 0) {  // '*', '+', N: a list of converted words
    if (none_default) return "std::optional<std::vector<" + scalar + ">>";
    if (!a.def.is_list() || a.def.kind() == Value::Kind::Tuple) return "Value";  // a scalar default: either shape
    for (const Value& v : a.def.as_list())
      if (!fits(v, scalar)) return "Value";
    return "std::vector<" + scalar + ">";
  }
  if (!none_default && !fits(a.def, scalar)) return "Value";
  if (scalar == "std::string") {
    Enum e;
    if (make_enum(a, e)) {
      enums.push_back(e);
      return optional_of("arg::" + e.name, none_default);
    }
  }
  return optional_of(scalar, none_default);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: mr_argsgen OUTPUT_FILE\n";
    return 2;
  }
  const mr::Schema& schema = mr::Schema::megatron();
  const mr::Schema derived(std::begin(kDerived), std::end(kDerived));
  std::vector<Enum> enums;
  std::vector<Field> fields;
  std::set<std::string> seen;
  for (const mr::Schema* sc : {&schema, &derived}) {
    for (const Arg& a : sc->args()) {
      const std::string dest = a.dest();
      if (!seen.insert(dest).second) {
        if (sc == &derived) {
          std::cerr << "mr_argsgen: " << dest << " in args_derived.inc is a flag's dest already\n";
          return 1;
        }
        continue;  // a second action of the same dest (--foo / --no-foo)
      }
      if (!is_identifier(dest) || kCppKeywords.count(dest) || dest[0] == '_') {
        std::cerr << "mr_argsgen: the dest '" << dest << "' is not usable as a C++ member name\n";
        return 1;
      }
      Field f;
      f.dest = dest;
      f.type = field_type(a, enums);
      f.validated = is_validated(dest);
      if (f.type.empty()) {
        std::cerr << "mr_argsgen: " << dest << " is in kValidated but is not an integer flag with a None default\n";
        return 1;
      }
      f.flag = a.flags.empty() ? "" : a.flags.front();
      f.def_json = a.def.json();
      fields.push_back(f);
    }
  }

  std::ostringstream o;
  o << "// Generated by mr_argsgen (lib/config/argsgen/argsgen.cpp) from lib/config/schema/*.inc and\n"
       "// lib/config/args_derived.inc: do not edit. Expanded by lib/config/args.{h,cpp}.\n"
       "//   MR_ARG_ENUM(E) MR_ARG_ENUMERATOR(E, name, \"spelling\")... MR_ARG_ENUM_END(E)\n"
       "//   MR_ARG(member, C++ type, \"--flag\" or \"\", default as JSON)\n"
       "//   MR_ARG_VALIDATED(member)   a dest validation never leaves None (argsgen.cpp's kValidated)\n"
       "// clang-format off\n"
       "#ifndef MR_ARG_ENUM\n#define MR_ARG_ENUM(E)\n#endif\n"
       "#ifndef MR_ARG_ENUMERATOR\n#define MR_ARG_ENUMERATOR(E, name, spelling)\n#endif\n"
       "#ifndef MR_ARG_ENUM_END\n#define MR_ARG_ENUM_END(E)\n#endif\n"
       "#ifndef MR_ARG\n#define MR_ARG(member, type, flag, def)\n#endif\n"
       "#ifndef MR_ARG_VALIDATED\n#define MR_ARG_VALIDATED(member)\n#endif\n\n";
  for (const Enum& e : enums) {
    o << "MR_ARG_ENUM(" << e.name << ")\n";
    for (const auto& [n, sp] : e.items) o << "  MR_ARG_ENUMERATOR(" << e.name << ", " << n << ", " << cpp_string(sp) << ")\n";
    o << "MR_ARG_ENUM_END(" << e.name << ")\n";
  }
  o << "\n";
  for (const Field& f : fields)
    o << "MR_ARG(" << f.dest << ", " << f.type << ", " << cpp_string(f.flag) << ", " << cpp_string(f.def_json) << ")\n";
  o << "\n";
  size_t validated = 0;
  for (const Field& f : fields)
    if (f.validated) o << "MR_ARG_VALIDATED(" << f.dest << ")\n", ++validated;
  if (validated != std::size(kValidated)) {
    std::cerr << "mr_argsgen: a dest in kValidated is not in the schema\n";
    return 1;
  }
  o << "\n#undef MR_ARG_ENUM\n#undef MR_ARG_ENUMERATOR\n#undef MR_ARG_ENUM_END\n#undef MR_ARG\n#undef MR_ARG_VALIDATED\n";

  const std::string text = o.str();
  {
    std::ifstream in(argv[1], std::ios::binary);
    std::string old((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (in && old == text) return 0;
  }
  std::ofstream out(argv[1], std::ios::binary | std::ios::trunc);
  out << text;
  if (!out) {
    std::cerr << "mr_argsgen: cannot write " << argv[1] << "\n";
    return 1;
  }
  return 0;
}
