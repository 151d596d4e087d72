// The JSON Schema of --config files (json_schema.h).
#include "config/json_schema.h"

#include "config/converters.h"

#include <cmath>
#include <set>

namespace mr {

namespace {

Value obj(Object o) { return Value::object(std::move(o)); }
Value type(const char* t) { return obj({{"type", t}}); }
Value any_of(List alternatives) { return obj({{"anyOf", Value(std::move(alternatives))}}); }
Value str_pattern(const std::string& re) { return obj({{"type", "string"}, {"pattern", re}}); }

// Strings megatron-run expands before conversion: a value holding ${VAR} can be anything once expanded.
const char* kEnvRef = "\\$\\{[^}]*\\}";
// What Python's int() and float() accept (the word is converted as a command-line word would be).
const std::string kIntWord = "^\\s*[-+]?[0-9](_?[0-9])*\\s*$";
const std::string kFloatWord =
    "^\\s*[-+]?(([0-9](_?[0-9])*(\\.([0-9](_?[0-9])*)?)?|\\.[0-9](_?[0-9])*)([eE][-+]?[0-9](_?[0-9])*)?|"
    "[iI][nN][fF]([iI][nN][iI][tT][yY])?|[nN][aA][nN])\\s*$";

bool finite_json(const Value& v) {
  if (v.is_float()) return std::isfinite(v.as_float());
  if (v.is_list())
    for (const Value& x : v.as_list())
      if (!finite_json(x)) return false;
  if (v.is_object())
    for (const auto& [k, x] : v.as_object())
      if (!finite_json(x)) return false;
  return true;
}

// One value of an argument (one element, for nargs lists), as a file may write it; `word`: as MODEL_ARGS writes it,
// where every value becomes a command-line word.
Value item_schema(const Arg& a, bool word = false) {
  const ArgType t = a.spec->type;
  List alts;
  if (t == ArgType::SignalEnum) {
    // A signal's name (SIGTERM), as `Signals[name]` looks it up: a number is no word it takes. The plain layout
    // also takes Signals.SIGTERM, and a YAML integer as the signal's number itself.
    List e;
    for (const std::string& n : signal_names()) {
      e.push_back(Value(n));
      if (!word) e.push_back(Value("Signals." + n));
    }
    if (!word)
      for (const Value& c : a.choices) e.push_back(c);
    alts.push_back(obj({{"enum", Value(std::move(e))}}));
  } else if (t == ArgType::CudaGraphModule) {
    // A module's name (attn, or CudaGraphModule.attn in the plain layout, as the resolved JSON writes it) or a full
    // scope: `_parse_cuda_graph_modules_arg` looks the name up as CudaGraphModule[name].
    List e;
    for (const std::string& n : cuda_graph_full_scopes()) e.push_back(Value(n));
    for (const std::string& n : cuda_graph_module_names()) {
      e.push_back(Value(n));
      if (!word) e.push_back(Value("CudaGraphModule." + n));
    }
    alts.push_back(obj({{"enum", Value(std::move(e))}}));
  } else if (!a.choices.empty()) {
    List e;
    for (const Value& c : a.choices) {
      if (t == ArgType::AttnBackendEnum && c.is_str() && c.as_str().rfind("AttnBackend.", 0) == 0) {
        e.push_back(Value(c.as_str().substr(12)));  // the member name, as `AttnBackend[name]` looks it up
        if (!word) e.push_back(c);                  // the plain layout also takes the resolved JSON's spelling
        continue;
      }
      e.push_back(c);
      if (c.is_int()) e.push_back(Value(std::to_string(c.as_int())));  // "1" converts to 1
    }
    alts.push_back(obj({{"enum", Value(std::move(e))}}));
  } else {
    switch (t) {
      case ArgType::Int: alts = {type("integer"), str_pattern(kIntWord)}; break;
      case ArgType::Float: alts = {type("number"), str_pattern(kFloatWord)}; break;
      case ArgType::Json: return obj({});
      case ArgType::MoeFreq:
      case ArgType::LaFreq:
      case ArgType::NoRopeFreq:
      case ArgType::CompressRatios:
      case ArgType::IntTuple:
        alts = {type("integer"), type("string"), obj({{"type", "array"}, {"items", type("integer")}})};
        break;
      case ArgType::TritonBlockSize:
        alts = {type("string"), obj({{"type", "array"}, {"items", obj({{"type", Value(List{"integer", "string"})}})}})};
        break;
      default:  // str, path, Python's bool(), the enums: a word, which a number or a boolean also makes
        return obj({{"type", Value(List{"string", "number", "boolean"})}});
    }
  }
  alts.push_back(str_pattern(kEnvRef));
  return any_of(std::move(alts));
}

bool list_nargs(const Arg& a) { return a.nargs_kind == '*' || a.nargs_kind == '+' || a.nargs_kind == 'N'; }

Value list_of(const Arg& a, const Value& item) {
  Object o{{"type", "array"}, {"items", item}};  // nargs '+' takes [] too: several defaults are empty lists
  if (a.nargs_kind == 'N') {
    o.push_back({"minItems", a.nargs_count});
    o.push_back({"maxItems", a.nargs_count});
  }
  return obj(std::move(o));
}

// The annotations every spelling carries: the help as the description, deprecation, the default.
void annotate(Object& o, const Arg& a, bool with_default) {
  std::string d = a.spec->help;
  if (*a.spec->deprecated) {
    d = "Deprecated: " + std::string(a.spec->deprecated) + (d.empty() ? "" : ". " + d);
    o.push_back({"deprecated", true});
  } else if (a.reported_deprecated()) {
    o.push_back({"deprecated", true});  // its help says so already
  }
  if (!d.empty()) o.push_back({"description", d});
  if (with_default && finite_json(a.def)) o.push_back({"default", a.def});
}

// A value-taking argument in the plain layout (either spelling): null, one value, or (nargs) a list.
Value plain_value(const Arg& a) {
  const Value item = item_schema(a);
  List alts{type("null")};
  // A value equal to the default is taken as the default, whatever its form (our own JSON fed back).
  if (!a.def.is_none() && finite_json(a.def)) alts.push_back(obj({{"const", a.def}}));
  if (list_nargs(a)) {
    if (a.nargs_kind != 'N' || a.nargs_count == 1) alts.push_back(item);  // a scalar is a one-element list
    alts.push_back(list_of(a, item));
  } else {
    alts.push_back(item);
  }
  Object o{{"anyOf", Value(std::move(alts))}};
  annotate(o, a, true);
  return obj(std::move(o));
}

// A switch: in the flag spelling true applies it and false its opposite; in the dest spelling the value is stored.
Value plain_switch(const Arg& a, bool flag_spelling) {
  Object o;
  const bool settable = a.spec->action == Action::BoolOptional || a.konst.is_bool();
  if (flag_spelling && !settable) {
    o.push_back({"not", obj({})});  // a store_const of another kind: megatron-run refuses it in a file
  } else {
    o.push_back({"type", flag_spelling ? Value("boolean") : Value(List{"boolean", "null"})});
  }
  annotate(o, a, !flag_spelling);
  return obj(std::move(o));
}

// A flag in MODEL_ARGS: the launcher writes `true` as the bare flag, drops "", splits "[a b]" and lists into words.
Value model_arg(const Arg& a) {
  Object o;
  if (a.is_switch()) {
    o.push_back({"enum", Value(List{true, ""})});
  } else {
    const Value item = item_schema(a, true);
    List alts{obj({{"const", ""}}), item};
    if (list_nargs(a) || a.nargs_kind == '?') {
      alts.push_back(list_of(a, item));
      alts.push_back(str_pattern("^\\[.*\\]$"));
    } else {  // one value: a list or a "[...]" string of one word gives that word
      alts.push_back(obj({{"type", "array"}, {"items", item}, {"minItems", 1}, {"maxItems", 1}}));
      alts.push_back(str_pattern("^\\[\\s*[^\\s\\]]+\\s*\\]$"));
    }
    if (a.nargs_kind == '?' || a.nargs_kind == '*') alts.push_back(obj({{"const", true}}));
    o.push_back({"anyOf", Value(std::move(alts))});
  }
  annotate(o, a, false);
  return obj(std::move(o));
}

// Pretty JSON: one key per line, small leaf objects kept on one line.
void pretty(const Value& v, int indent, std::string& out) {
  const std::string compact = v.json();
  if (compact.size() <= 100 || !(v.is_object() || v.is_list())) {
    out += compact;
    return;
  }
  const std::string pad(static_cast<size_t>(indent + 2), ' ');
  if (v.is_list()) {
    out += "[\n";
    const List& l = v.as_list();
    for (size_t i = 0; i < l.size(); ++i) {
      out += pad;
      pretty(l[i], indent + 2, out);
      out += i + 1 < l.size() ? ",\n" : "\n";
    }
    out += std::string(static_cast<size_t>(indent), ' ') + "]";
    return;
  }
  out += "{\n";
  const Object& o = v.as_object();
  for (size_t i = 0; i < o.size(); ++i) {
    out += pad + json_quote(o[i].first) + ": ";
    pretty(o[i].second, indent + 2, out);
    out += i + 1 < o.size() ? ",\n" : "\n";
  }
  out += std::string(static_cast<size_t>(indent), ' ') + "}";
}

// "num_layers" as the dashed key "num-layers".
std::string dashed(std::string_view dest) {
  std::string out(dest);
  for (char& c : out)
    if (c == '_') c = '-';
  return out;
}

// Megatron's argparse mutually exclusive groups (schema.h): a file giving two members is refused
// (input.mutually-exclusive), so its schema says "not (a member given and another given)" per pair. `given(key)`:
// the schema of an object where `key` counts as given (the plain layout: present and not null; MODEL_ARGS: present
// and not "", which the launcher drops); `spellings(dest)`: the keys that set a dest in the layout.
template <class Given, class Spellings>
List mutually_exclusive(Given given, Spellings spellings) {
  List out;
  for (const auto& group : mutually_exclusive_groups())
    for (size_t i = 0; i < group.size(); ++i)
      for (size_t j = i + 1; j < group.size(); ++j) {
        List both{type("object")};  // (required holds for anything but an object: an empty file is one too)
        for (std::string_view dest : {group[i], group[j]}) {
          List any;
          for (const std::string& key : spellings(std::string(dest))) any.push_back(given(key));
          both.push_back(any_of(std::move(any)));
        }
        out.push_back(obj({{"description", "--" + dashed(group[i]) + " and --" + dashed(group[j]) +
                                               " are mutually exclusive (argparse: not allowed with)"},
                           {"not", obj({{"allOf", Value(std::move(both))}})}}));
      }
  return out;
}

}  // namespace

std::string config_json_schema(const Schema& schema) {
  Object defs_values;  // one definition per value-taking dest, shared by its spellings
  Object plain, model;
  std::set<std::string> seen;
  auto add = [&](Object& props, const std::string& key, Value v) {
    if (seen.insert(key).second) props.push_back({key, std::move(v)});
  };
  // One definition per value-taking dest (the action a dest-spelt key applies, config_file.cpp), shared by the
  // dest spellings and by the flags of that action.
  std::set<std::string> defined;
  auto dest_front = [&](const Arg& a) { return schema.find_dest(a.dest()).front(); };
  for (const Arg& a : schema.args()) {
    const Arg& first = *dest_front(a);
    if (first.is_switch() || !defined.insert(a.dest()).second) continue;
    defs_values.push_back({a.dest(), plain_value(first)});
  }
  auto ref = [](const std::string& dest) { return obj({{"$ref", "#/$defs/arg/" + dest}}); };
  // Flag spellings first, in the table's order, then the dest spellings.
  for (const Arg& a : schema.args()) {
    for (const std::string& f : a.flags) {
      if (a.is_switch()) add(plain, f, plain_switch(a, true));
      else if (dest_front(a) == &a) add(plain, f, ref(a.dest()));
      else add(plain, f, plain_value(a));
      model.push_back({f, model_arg(a)});
    }
  }
  for (const Arg& a : schema.args()) {
    const std::string dest = a.dest();
    if (seen.count(dest)) continue;
    const Arg& first = *dest_front(a);
    const Value v = first.is_switch() ? plain_switch(first, false) : ref(dest);
    add(plain, dest, v);
    if (dashed(dest) != dest) add(plain, dashed(dest), v);
  }
  for (const char* attr : {"rank", "world_size", "_is_global_batch_size_explicitly_specified"})
    add(plain, attr, obj({{"description", "Computed by parse_args from the environment; accepted and ignored."}}));

  // The flags that set a dest (the keys naming it in MODEL_ARGS; the plain layout adds the dest spellings).
  auto flags_of = [&](const std::string& dest) {
    std::vector<std::string> keys;
    for (const Arg* a : schema.find_dest(dest))
      for (const std::string& f : a->flags) keys.push_back(f);
    return keys;
  };
  Object model_args{{"type", Value(List{"object", "null"})},
                    {"description", "Megatron's flags, as Megatron CI's launcher turns them into words."},
                    {"properties", obj(std::move(model))},
                    {"additionalProperties", false}};
  // In MODEL_ARGS a flag with any value but "" (which the launcher drops) is given.
  List model_exclusive = mutually_exclusive(
      [](const std::string& key) {
        return obj({{"required", Value(List{Value(key)})}, {"properties", obj({{key, obj({{"not", obj({{"const", ""}})}})}})}});
      },
      flags_of);
  if (!model_exclusive.empty()) model_args.push_back({"allOf", Value(std::move(model_exclusive))});
  Value scalar = obj({{"type", Value(List{"string", "number", "boolean", "null"})}});
  Value functional = obj({
      {"type", "object"},
      {"description", "Megatron CI's model_config.yaml layout: MODEL_ARGS become a command line."},
      {"required", Value(List{"MODEL_ARGS"})},
      {"properties",
       obj({{"MODEL_ARGS", obj(std::move(model_args))},
            {"ENV_VARS", obj({{"type", Value(List{"object", "null"})},
                              {"description", "The environment validation sees (on top of the process's)."},
                              {"additionalProperties", scalar}})}})},
  });
  Object plain_layout_o{{"type", Value(List{"object", "null"})},  // an empty file is an empty config
                        {"description", "Megatron arguments by flag (--num-layers) or dest (num_layers)."},
                        {"properties", obj(std::move(plain))},
                        {"additionalProperties", false}};
  // Two members of a mutually exclusive group: in the plain layout a key with a value other than null.
  List plain_exclusive = mutually_exclusive(
      [](const std::string& key) {
        return obj({{"required", Value(List{Value(key)})}, {"properties", obj({{key, obj({{"not", type("null")}})}})}});
      },
      [&](const std::string& dest) {
        std::vector<std::string> keys = flags_of(dest);
        keys.push_back(dest);
        if (dashed(dest) != dest) keys.push_back(dashed(dest));
        return keys;
      });
  if (!plain_exclusive.empty()) plain_layout_o.push_back({"allOf", Value(std::move(plain_exclusive))});
  Value plain_layout = obj(std::move(plain_layout_o));
  Value root = obj({
      {"$schema", "https://json-schema.org/draft/2020-12/schema"},
      {"$id", "urn:megatron-run:config-file"},
      {"title", "megatron-run --config file"},
      {"description", "Generated by `megatron-run schema --format json-schema` from megatron-run's argument table."},
      {"type", Value(List{"object", "null"})},
      {"if", obj({{"type", "object"}, {"required", Value(List{"MODEL_ARGS"})}})},
      {"then", obj({{"$ref", "#/$defs/functional_test_layout"}})},
      {"else", obj({{"$ref", "#/$defs/plain_layout"}})},  // no anyOf: errors point at the key
      {"$defs", obj({{"plain_layout", plain_layout},
                     {"functional_test_layout", functional},
                     {"arg", obj(std::move(defs_values))}})},
  });
  std::string out;
  pretty(root, 0, out);
  return out + "\n";
}

}  // namespace mr
