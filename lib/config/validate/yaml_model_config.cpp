// The model-config step of the --yaml-cfg path (yaml_arguments.h): what core_transformer_config_from_yaml()
// (Megatron-LM megatron/training/yaml_arguments.py, called by the GPT builder when args.yaml_cfg is set) refuses
// in a namespace validate_yaml accepted. Rule ids `yaml.model-config.*`, stage "init" (the ranks have started
// when the model is built). TransformerConfig.__post_init__'s own checks are not modelled on this path.
//
// What the function does, in order:
//   1. merges the language_model and model_parallel sections into one namespace (a key in both is a TypeError,
//      but validate_yaml's flattening already refused it: yaml.section-key-collision);
//   2. core_config_from_args copies every TransformerConfig field (ModelParallelConfig's first) from that
//      namespace, raising Exception("Missing argument <field> ...") for the first one absent. Only the fields the
//      function goes on to read are checked here (yaml.model-config.missing-field), in dataclass order;
//   3. asserts activation_func is swiglu, squaredrelu or gelu; reads bias_swiglu_fusion for swiglu (not a field:
//      AttributeError, yaml.missing-attribute), add_bias_linear / bias_activation_fusion for gelu;
//   4. init_method 'xavier_uniform' also passes scaled_init_method, which TransformerConfig does not take
//      (TypeError); embedding_init_method is a field, so 'xavier_uniform' there is fine.
#include <string>
#include <string_view>

#include "config/validate/init.h"
#include "config/validate/yaml_arguments.h"

namespace mr {

namespace {

MR_INIT_RULE(kMissingField, "yaml.model-config.missing-field",
             "--yaml-cfg: a TransformerConfig field that core_transformer_config_from_yaml reads (overlap_p2p_comm, "
             "add_bias_linear, activation_func, init_method, embedding_init_method, bias_activation_fusion) is in "
             "neither language_model nor model_parallel (Megatron: Exception, Missing argument).");
MR_INIT_RULE(kActivation, "yaml.model-config.activation-func",
             "--yaml-cfg: language_model.activation_func is swiglu, squaredrelu or gelu "
             "(core_transformer_config_from_yaml: AssertionError).");
MR_INIT_RULE(kXavier, "yaml.model-config.xavier-uniform",
             "--yaml-cfg: init_method 'xavier_uniform' makes core_transformer_config_from_yaml pass "
             "scaled_init_method, which TransformerConfig has no field for (Megatron: TypeError).");

// A warning of the init stage, like the rest of this step (MR_WARNING would put it in validate_args).
static const Rule kFieldsIncomplete{
    "yaml.model-config.fields-incomplete", Rule::Level::Warning,
    "--yaml-cfg: core_transformer_config_from_yaml copies every TransformerConfig field from language_model and "
    "model_parallel, and account_for_embedding_in_pipeline_split, which validate_yaml reads at the top level, cannot "
    "be in a section as well: no --yaml-cfg file builds a GPT model in Megatron-LM's yaml_arguments.py as read (a "
    "warning: the program may not build one).",
    __FILE__, __LINE__, kStageInit};

constexpr const char* kFn = "core_transformer_config_from_yaml";
constexpr const char* kSections[] = {"language_model", "model_parallel"};

std::string q(std::string_view path) { return "`" + std::string(path) + "`"; }

// The path of `key` in the merged namespace (language_model's keys, then model_parallel's; validate_yaml's
// flattening guarantees no key is in both), or "" when neither section defines it.
std::string merged_path(YamlArgs& y, std::string_view key) {
  for (const char* s : kSections) {
    std::string path = std::string(s) + "." + std::string(key);
    if (y.has(path)) return path;
  }
  return {};
}

// Step 2, for the fields the function reads (in the order dataclasses.fields(TransformerConfig) lists them).
void fields_read(YamlArgs& y) {
  for (const char* field : {"overlap_p2p_comm", "add_bias_linear", "activation_func", "init_method",
                            "embedding_init_method", "bias_activation_fusion"}) {
    if (!merged_path(y, field).empty()) continue;
    const std::string lm = std::string("language_model.") + field;
    y.fail(kMissingField,
           init::would_fail(kFn) + "neither `language_model` nor `model_parallel` defines " + q(field) +
               ", a TransformerConfig field (Megatron: Exception: Missing argument " + field +
               " for <class 'megatron.core.transformer.transformer_config.TransformerConfig'> config)",
           {lm, "language_model"});
  }
}

// Step 3.
void activation(YamlArgs& y) {
  const std::string path = merged_path(y, "activation_func");
  const Value& act = y.get(path);
  const bool known = act == Value("swiglu") || act == Value("squaredrelu") || act == Value("gelu");
  y.require(known, kActivation,
            init::would_fail(kFn) + q(path) + " is " + act.py_repr() +
                "; it must be swiglu, squaredrelu or gelu (Megatron: AssertionError: " + act.py_str() +
                " is not a supported activation function)",
            {path});
  if (act == Value("swiglu")) {
    // Not a TransformerConfig field, so only this read requires it: AttributeError when absent.
    const std::string fusion = merged_path(y, "bias_swiglu_fusion");
    (void)y.get(fusion.empty() ? "language_model.bias_swiglu_fusion" : fusion);
  } else if (act == Value("gelu")) {
    if (!y.truthy(merged_path(y, "add_bias_linear"))) (void)y.get(merged_path(y, "bias_activation_fusion"));
  }
}

// Step 4.
void init_methods(YamlArgs& y) {
  const std::string path = merged_path(y, "init_method");
  y.require(y.get(path) != Value("xavier_uniform"), kXavier,
            init::would_fail(kFn) + q(path) +
                " 'xavier_uniform' also passes scaled_init_method=xavier_uniform_ to TransformerConfig, which has no "
                "such field (Megatron: TypeError: __init__() got an unexpected keyword argument "
                "'scaled_init_method'); use null (normal initialisation with init_method_std)",
            {path});
  (void)y.get(merged_path(y, "embedding_init_method"));  // a field: 'xavier_uniform' is accepted
}

// Step 2 for every other field: megatron-run does not hold TransformerConfig's field list, but one field settles
// it. validate_yaml has read account_for_embedding_in_pipeline_split at the top level, so the file has it there,
// and its flattening refused the same key in a section: the sections lack it, and core_config_from_args stops
// (at it, or at an earlier missing field). A warning, not an error: this is the state of Megatron's experimental
// YAML path as read, and a program that builds no model from the namespace is not affected.
void all_fields(YamlArgs& y) {
  constexpr const char* kField = "account_for_embedding_in_pipeline_split";
  if (!merged_path(y, kField).empty()) return;  // cannot happen after validate_yaml passed; nothing to say then
  y.warn(kFieldsIncomplete,
         std::string("a training script that builds its model from this namespace (pretrain_gpt.py, with ") + kFn +
             ") would stop in core_config_from_args, which takes every TransformerConfig field (about 320, "
             "ModelParallelConfig's included) from `language_model` and `model_parallel` and raises for the first "
             "one missing (Megatron: Exception: Missing argument ...). One of them, `" + kField +
             "`, is read by validate_yaml at the top level, and the same key in a section fails the flattening "
             "(yaml.section-key-collision), so no --yaml-cfg file gets past it in Megatron-LM's yaml_arguments.py "
             "as read (docs/yaml-cfg.md)",
         {kField});
}

}  // namespace

const std::vector<YamlSection>& yaml_model_config_sections() {
  static const std::vector<YamlSection> sections = {
      {"model-config-fields", &fields_read},
      {"model-config-all-fields", &all_fields},
      {"model-config-activation", &activation},
      {"model-config-init-method", &init_methods},
  };
  return sections;
}

}  // namespace mr
