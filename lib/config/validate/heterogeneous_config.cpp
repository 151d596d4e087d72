// Seed arguments.py 438-439 -> validate_model_config_args_from_heterogeneous_config (seed 195-267):
// a heterogeneous (Llama-Nemotron block_configs) layer description fixes parts of the model architecture, and
// the command line has to agree with it.
#include <cmath>
#include <filesystem>
#include <system_error>
#include <string>
#include <vector>

#include "config/limits.h"
#include "config/parse/read_file.h"
#include "config/validate/section_functions.h"

namespace mr::section {

MR_RULE(kHeteroMalformed, "heterogeneous.config-unreadable",
        "The heterogeneous layers config must be readable JSON with the fields validation reads (hidden_act, "
        "block_configs[*].attention.n_heads_in_group, num_hidden_layers, hidden_size, num_attention_heads, "
        "tie_word_embeddings, rope_theta, rope_scaling.factor).");
MR_RULE(kHeteroSilu, "heterogeneous.hidden-act-silu", "The heterogeneous layers config must use hidden_act silu.");
MR_RULE(kHeteroUniformGroups, "heterogeneous.uniform-heads-in-group",
        "Every attention block of the heterogeneous layers config that sets n_heads_in_group must use the same "
        "value.");
MR_RULE(kHeteroArgsMatch, "heterogeneous.args-match-config",
        "Model flags (--swiglu, --normalization RMSNorm, GQA, RoPE settings, sizes, ...) must agree with the "
        "heterogeneous layers config.");

namespace {

// Where the JSON came from, for messages: the flag and file, or the flag holding the text.
std::string source(Context& ctx) {
  if (!ctx.is_none("heterogeneous_layers_config_path") &&
      ctx.args().provenance("heterogeneous_layers_config_encoded_json").kind == Provenance::Kind::Derived)
    return "--heterogeneous-layers-config-path " + ctx["heterogeneous_layers_config_path"].py_repr();
  if (ctx.is_none("heterogeneous_layers_config_encoded_json"))
    return "--heterogeneous-layers-config-path " + ctx["heterogeneous_layers_config_path"].py_repr();
  return "--heterogeneous-layers-config-encoded-json";
}

[[noreturn]] void malformed(Context& ctx, const std::string& why) {
  ctx.fail(kHeteroMalformed, "cannot use the heterogeneous layers config (" + source(ctx) + "): " + why,
           {"heterogeneous_layers_config_path", "heterogeneous_layers_config_encoded_json"});
}

// "L:C" (line, column) of a byte offset in the JSON text, from the reader's "at offset N" message.
std::string json_position(const std::string& text, const std::string& message) {
  auto at = message.find("at offset ");
  if (at == std::string::npos) return {};
  size_t offset = 0;
  for (size_t i = at + 10; i < message.size() && std::isdigit(static_cast<unsigned char>(message[i])); ++i)
    offset = offset * 10 + static_cast<size_t>(message[i] - '0');
  offset = std::min(offset, text.size());
  size_t line = 1, col = 1;
  for (size_t i = 0; i < offset; ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return std::to_string(line) + ":" + std::to_string(col);
}

// hf_config.<name> on the SimpleNamespace built from the top-level JSON object (the last duplicate key wins,
// as in json.loads).
const Value& field(Context& ctx, const Object& top, const std::string& name) {
  const Value* found = nullptr;
  for (const auto& [k, v] : top)
    if (k == name) found = &v;
  if (!found) malformed(ctx, "it has no '" + name + "' field");
  return *found;
}

// value[key] with Python's rules: only a dict can be indexed by a string key.
const Value& subscript(Context& ctx, const Value& v, const std::string& key, const std::string& what) {
  if (!v.is_object()) malformed(ctx, what + " is " + v.py_repr() + ", not a mapping with a '" + key + "' key");
  const Value* found = nullptr;
  for (const auto& [k, x] : v.as_object())
    if (k == key) found = &x;
  if (!found) malformed(ctx, what + " has no '" + key + "' key");
  return *found;
}

// Python's a // b for the numbers JSON gives (bools count as ints).
Value floor_divide(Context& ctx, const Value& a, const Value& b) {
  bool numeric = (a.is_number() || a.is_bool()) && (b.is_number() || b.is_bool());
  if (!numeric)
    malformed(ctx, "num_attention_heads (" + a.py_repr() + ") cannot be divided by n_heads_in_group (" +
                       b.py_repr() + ")");
  if (b.as_float() == 0.0) malformed(ctx, "n_heads_in_group is 0 (division by zero)");
  if (a.is_float() || b.is_float()) return Value(std::floor(a.as_float() / b.as_float()));
  return Value(py_floordiv(a.as_int(), b.as_int()));
}

// Iterating hf_config.block_configs: a list yields its items, an empty dict or string yields nothing, and any
// other non-empty dict/string yields keys/characters that cannot be indexed by "attention".
std::vector<Value> block_configs(Context& ctx, const Value& v) {
  if (v.is_list()) return v.as_list();
  if ((v.is_object() || v.is_str()) && !v.truthy()) return {};
  if (v.is_object() || v.is_str()) malformed(ctx, "block_configs must be a list of per-block mappings");
  malformed(ctx, "block_configs is " + v.py_repr() + ", which is not iterable");
}

}  // namespace

void heterogeneous_config(Context& ctx) {
  // seed 217-221: nothing to do without a heterogeneous config.
  if (ctx.is_none("heterogeneous_layers_config_path") && ctx.is_none("heterogeneous_layers_config_encoded_json"))
    return;

  // seed 223-226: a path is read into the encoded-JSON argument (so checkpoints keep the text).
  if (ctx.is_none("heterogeneous_layers_config_encoded_json")) {
    const Value& given = ctx["heterogeneous_layers_config_path"];
    if (!given.is_str()) malformed(ctx, "the path is " + given.py_repr() + ", not a string");
    std::string text;
    try {
      // Bounded, and never blocking: a named pipe or device is refused (config/parse/read_file.h).
      text = read_input_file(given.as_str(), "--heterogeneous-layers-config-path file",
                             {"--heterogeneous-layers-config-path"});
    } catch (const UsageError& e) {
      // Megatron opens the path as given, so a relative one is taken from the working directory (not from the
      // config file that names it); say which directory that was.
      std::string why = e.what();
      const std::filesystem::path p(given.as_str());
      std::error_code ec;
      const std::filesystem::path cwd = std::filesystem::current_path(ec);
      if (!given.as_str().empty() && p.is_relative())
        why += " (a relative path is taken from the working directory" +
               (ec ? std::string() : ", here " + cwd.string()) + ")";
      malformed(ctx, why);
    }
    ctx.set("heterogeneous_layers_config_encoded_json", std::move(text), "heterogeneous-config: read from the config path");
  }

  // seed 228: the JSON document must be an object; its keys become attributes.
  Value doc;
  try {
    // Bounded as it is parsed: a 50 MB file of tiny values would take gigabytes as a tree (limits::kMaxJsonValues).
    doc = Value::parse_json(ctx.s("heterogeneous_layers_config_encoded_json"), limits::kMaxJsonValues);
  } catch (const JsonTooManyValues& e) {
    malformed(ctx, "it holds more than " + std::to_string(e.limit) + " JSON values (the limit, limits::kMaxJsonValues)");
  } catch (const JsonError& e) {
    std::string at = json_position(ctx.s("heterogeneous_layers_config_encoded_json"), e.what());
    bool from_file = ctx.args().provenance("heterogeneous_layers_config_encoded_json").kind == Provenance::Kind::Derived &&
                     ctx["heterogeneous_layers_config_path"].is_str();
    if (!at.empty())
      at = (from_file ? ctx.s("heterogeneous_layers_config_path") + ":" : std::string("line:column ")) + at + ": ";
    malformed(ctx, at + "it is not valid JSON (" + e.what() + ")");
  }
  if (!doc.is_object()) malformed(ctx, "the JSON document is not an object");
  const Object& top = doc.as_object();

  // seed 230-232
  const Value& act = field(ctx, top, "hidden_act");
  ctx.require(act == Value("silu"), kHeteroSilu,
              std::string("the heterogeneous layers config sets hidden_act to ") + act.py_str() +
                  "; only silu is supported",
              {"heterogeneous_layers_config_path", "heterogeneous_layers_config_encoded_json"});

  // seed 234-238: the blocks that set n_heads_in_group must agree on it.
  std::vector<Value> groups;
  for (const Value& block : block_configs(ctx, field(ctx, top, "block_configs"))) {
    const Value& attention = subscript(ctx, block, "attention", "a block_configs entry");
    const Value& n = subscript(ctx, attention, "n_heads_in_group", "a block's attention section");
    if (!n.is_none()) groups.push_back(n);
  }
  for (const Value& n : groups)
    ctx.require(n == groups.front(), kHeteroUniformGroups,
                "the heterogeneous layers config mixes n_heads_in_group values (" + groups.front().py_str() +
                    " and " + n.py_str() + "); all attention blocks must use the same number of query heads "
                    "per KV group",
                {"heterogeneous_layers_config_path", "heterogeneous_layers_config_encoded_json"});

  // seed 240-255: what the config implies for each model argument, evaluated in the seed's order.
  std::vector<std::pair<const char*, Value>> expected;
  expected.emplace_back("swiglu", true);
  expected.emplace_back("normalization", "RMSNorm");
  expected.emplace_back("group_query_attention", true);
  expected.emplace_back("position_embedding_type", "rope");
  expected.emplace_back("rotary_percent", 1.0);
  expected.emplace_back("use_rope_scaling", true);
  expected.emplace_back("use_rotary_position_embeddings", true);
  expected.emplace_back("num_layers", field(ctx, top, "num_hidden_layers"));
  expected.emplace_back("hidden_size", field(ctx, top, "hidden_size"));
  const Value& heads = field(ctx, top, "num_attention_heads");
  expected.emplace_back("num_attention_heads", heads);
  expected.emplace_back("untie_embeddings_and_output_weights", !field(ctx, top, "tie_word_embeddings").truthy());
  expected.emplace_back("rotary_base", field(ctx, top, "rope_theta"));
  expected.emplace_back("rope_scaling_factor", subscript(ctx, field(ctx, top, "rope_scaling"), "factor", "rope_scaling"));
  if (groups.empty()) malformed(ctx, "no attention block sets n_heads_in_group, so the KV group size is unknown");
  expected.emplace_back("num_query_groups", floor_divide(ctx, heads, groups.front()));

  // seed 257-267: report every disagreement at once (Python's != on the values).
  std::string diffs;
  for (const auto& [dest, want] : expected) {
    Value given = ctx.has(dest) ? ctx[dest] : Value();
    if (given == want) continue;
    if (!diffs.empty()) diffs += ", ";
    diffs += Context::flag(dest) + " is " + given.py_str() + " but the config implies " + want.py_str();
  }
  ctx.require(diffs.empty(), kHeteroArgsMatch,
              "the command line disagrees with the heterogeneous layers config: " + diffs,
              {"heterogeneous_layers_config_path", "heterogeneous_layers_config_encoded_json"});
}

}  // namespace mr::section
