// The JSON Schema of config files (lib/config/json_schema.h): its shape, generated from the argument table. A real
// validator checks it against the corpus and the bad inputs in json_schema_test.py (CTest json_schema).
#include <catch2/catch.hpp>

#include <string>

#include "config/json_schema.h"
#include "config/value.h"

namespace {
const mr::Value& at(const mr::Value& v, const std::string& k) {
  for (const auto& [key, x] : v.as_object())
    if (key == k) return x;
  throw std::out_of_range("no key " + k);
}
bool has(const mr::Value& v, const std::string& k) {
  for (const auto& [key, x] : v.as_object())
    if (key == k) return true;
  return false;
}
}  // namespace

TEST_CASE("json schema: both spellings, types, choices, nargs, help, deprecations", "[json-schema]") {
  const mr::Schema& schema = mr::Schema::megatron();
  const mr::Value s = mr::Value::parse_json(mr::config_json_schema(schema));
  CHECK(at(s, "$schema").as_str() == "https://json-schema.org/draft/2020-12/schema");
  const mr::Value& defs = at(s, "$defs");
  const mr::Value& plain = at(at(defs, "plain_layout"), "properties");
  CHECK(at(at(defs, "plain_layout"), "additionalProperties").as_bool() == false);
  // Every option string and every dest is a key.
  for (const mr::Arg& a : schema.args()) {
    CHECK(has(plain, a.dest()));
    for (const std::string& f : a.flags) CHECK(has(plain, f));
  }
  CHECK(has(plain, "num-layers"));  // the dest with dashes, which megatron-run reads too
  // A value-taking flag and its dest share one definition: null, the default, an int (or an int's word).
  CHECK(at(at(plain, "--num-layers"), "$ref").as_str() == "#/$defs/arg/num_layers");
  const mr::Value& nl = at(at(defs, "arg"), "num_layers");
  CHECK(at(nl, "description").as_str().find("transformer layers") != std::string::npos);
  CHECK(at(nl, "anyOf").json().find("\"type\": \"integer\"") != std::string::npos);
  // Choices as an enum; nargs as an array (of exactly 3 for --rampup-batch-size, which is deprecated).
  CHECK(at(at(defs, "arg"), "lr_decay_style").json().find("\"enum\": [\"constant\", \"linear\", \"cosine\"") !=
        std::string::npos);
  const mr::Value& rb = at(at(defs, "arg"), "rampup_batch_size");
  CHECK(rb.json().find("\"minItems\": 3, \"maxItems\": 3") != std::string::npos);
  CHECK(at(rb, "deprecated").as_bool());
  CHECK(at(rb, "description").as_str().rfind("Deprecated: use --step-batch-size-schedule", 0) == 0);
  // --disable-msc warns (parse.deprecated-flag), so its entry says so too.
  CHECK(at(at(plain, "--disable-msc"), "deprecated").as_bool());
  CHECK(at(at(plain, "disable_msc_deprecated"), "deprecated").as_bool());
  // A switch: a boolean in the flag spelling, a boolean or null in the dest spelling.
  CHECK(at(at(plain, "--bf16"), "type").as_str() == "boolean");
  CHECK(at(plain, "bf16").json().find("[\"boolean\", \"null\"]") != std::string::npos);
  // Megatron CI's layout: flags only, unknown ones rejected; ENV_VARS of scalars.
  const mr::Value& ft = at(at(at(defs, "functional_test_layout"), "properties"), "MODEL_ARGS");
  CHECK(at(ft, "additionalProperties").as_bool() == false);
  CHECK(has(at(ft, "properties"), "--num-layers"));
  CHECK_FALSE(has(at(ft, "properties"), "num_layers"));
  CHECK(at(at(ft, "properties"), "--bf16").json() .find("\"enum\": [true, \"\"]") != std::string::npos);
}

TEST_CASE("json schema: every flag that warns or is refused as deprecated says deprecated", "[json-schema]") {
  const mr::Schema& schema = mr::Schema::megatron();
  const mr::Value s = mr::Value::parse_json(mr::config_json_schema(schema));
  const mr::Value& plain = at(at(at(s, "$defs"), "plain_layout"), "properties");
  int count = 0;
  for (const mr::Arg& a : schema.args()) {
    if (!*a.spec->deprecated && !a.reported_deprecated()) continue;
    ++count;
    for (const std::string& f : a.flags) {
      INFO(f);
      const mr::Value& entry = at(plain, f);
      // A value-taking flag's entry refers to its dest's definition, which carries the annotations.
      const mr::Value& def = has(entry, "$ref") ? at(at(at(s, "$defs"), "arg"), a.dest()) : entry;
      CHECK(has(def, "deprecated"));
    }
  }
  // The parser's (.deprecated) and the validation chain's (help "Deprecated (...)": --hybrid-override-pattern,
  // --dist-ckpt-format, --ckpt-fully-parallel-save, --mtp-hybrid-override-pattern, the removed --batch-size ...).
  CHECK(count > 20);
  for (const char* f : {"--hybrid-override-pattern", "--dist-ckpt-format", "--ckpt-fully-parallel-save",
                        "--mtp-hybrid-override-pattern"}) {
    INFO(f);
    const mr::Arg* a = schema.find_flag(f);
    REQUIRE(a);
    CHECK(a->reported_deprecated());
  }
}

