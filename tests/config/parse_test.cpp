// argparse-compatible parsing of Megatron's command line.
#include <catch2/catch.hpp>

#include "config/parse/argparse.h"

namespace {
mr::Namespace parse(const std::vector<std::string>& words) {
  const auto& s = mr::Schema::megatron();
  mr::Namespace ns = mr::default_namespace(s);
  mr::parse_tokens(s, mr::argv_tokens(words), ns);
  return ns;
}

std::string usage_error(const std::vector<std::string>& words) {
  try {
    parse(words);
  } catch (const mr::UsageError& e) {
    return e.what();
  }
  return "";
}
// The usage error parsing `words` throws (its id, flags and message); "accepted" when there is none.
mr::UsageError refused(const std::vector<std::string>& words) {
  try {
    parse(words);
  } catch (const mr::UsageError& e) {
    return e;
  }
  return mr::UsageError("accepted");
}
}  // namespace

TEST_CASE("defaults come from the schema", "[parse]") {
  auto ns = parse({});
  CHECK(ns["num_layers"].is_none());
  CHECK(ns["tensor_model_parallel_size"].as_int() == 1);
  CHECK(ns["masked_softmax_fusion"].as_bool() == true);
  CHECK(ns["attention_backend"].as_str() == "AttnBackend.auto");
  CHECK(ns["exit_signal"].as_int() == 15);
  CHECK(ns["data_path"].is_none());
  CHECK(ns.provenance("num_layers").kind == mr::Provenance::Kind::Default);
}

TEST_CASE("--flag value and --flag=value", "[parse]") {
  auto ns = parse({"--num-layers", "12", "--hidden-size=768", "--lr", "1e-4"});
  CHECK(ns["num_layers"].as_int() == 12);
  CHECK(ns["hidden_size"].as_int() == 768);
  CHECK(ns["lr"].as_float() == Approx(1e-4));
  CHECK(ns.provenance("num_layers").where == "argv[1]");
  CHECK(ns.provenance("hidden_size").where == "argv[3]");
}

TEST_CASE("repeated flags: last wins", "[parse]") {
  auto ns = parse({"--num-layers", "2", "--num-layers", "4"});
  CHECK(ns["num_layers"].as_int() == 4);
  CHECK(ns.provenance("num_layers").where == "argv[3]");
}

TEST_CASE("switches: store_true, store_false, --no-/--disable- spellings, BooleanOptionalAction", "[parse]") {
  auto ns = parse({"--bf16", "--no-masked-softmax-fusion", "--disable-tp-comm-bulk-wgrad", "--no-rl-skip-bos-token",
                   "--rl-partial-rollouts"});
  CHECK(ns["bf16"].as_bool());
  CHECK_FALSE(ns["masked_softmax_fusion"].as_bool());
  CHECK_FALSE(ns["tp_comm_bulk_wgrad"].as_bool());
  CHECK_FALSE(ns["rl_skip_bos_token"].as_bool());
  CHECK(ns["rl_partial_rollouts"].as_bool());
  CHECK(usage_error({"--bf16=true"}).find("ignored explicit argument 'true'") != std::string::npos);
  // A switch takes no value: the word after it is left over.
  CHECK(usage_error({"--bf16", "true"}).find("unrecognized arguments: true") != std::string::npos);
}

TEST_CASE("nargs + and * collect words up to the next option", "[parse]") {
  auto ns = parse({"--data-path", "0.3", "a", "0.7", "b", "--num-layers", "2"});
  REQUIRE(ns["data_path"].as_list().size() == 4);
  CHECK(ns["data_path"].as_list()[3].as_str() == "b");
  CHECK(ns["num_layers"].as_int() == 2);
  CHECK(parse({"--data-path", "--num-layers", "2"})["data_path"].as_list().empty());  // nargs '*'
  CHECK(usage_error({"--cuda-graph-modules", "--num-layers", "2"}) ==
        "argument --cuda-graph-modules: expected at least one argument");  // nargs '+'
  CHECK(usage_error({"--hierarchical-context-parallel-sizes", "2 2"}) ==
        "argument --hierarchical-context-parallel-sizes: invalid int value: '2 2'");
  auto ns2 = parse({"--data-path=x"});
  CHECK(ns2["data_path"].as_list().size() == 1);
}

TEST_CASE("negative numbers are values, not options", "[parse]") {
  auto ns = parse({"--lr-warmup-init", "-0.5", "--seed", "-3", "--data-path", "-1", "x"});
  CHECK(ns["lr_warmup_init"].as_float() == Approx(-0.5));
  CHECK(ns["seed"].as_int() == -3);
  CHECK(ns["data_path"].as_list().size() == 2);
  // argparse only treats -N and -N.M as numbers: "-1e-3" looks like an option.
  CHECK(usage_error({"--lr", "-1e-3"}).find("argument --lr: expected one argument") != std::string::npos);
}

TEST_CASE("-- ends option processing", "[parse]") {
  // Megatron has no positionals, so everything from '--' on is left over (argparse lists the '--' too).
  CHECK(usage_error({"--num-layers", "2", "--", "--hidden-size", "4"}) == "unrecognized arguments: -- --hidden-size 4");
  CHECK(parse({"--num-layers", "2"})["num_layers"].as_int() == 2);
}

TEST_CASE("unknown flags: exit-2 error naming them, with suggestions", "[parse]") {
  std::string e = usage_error({"--num-layer", "3", "--hidden-size", "8"});
  CHECK(e.find("unrecognized arguments: --num-layer 3") != std::string::npos);
  CHECK(e.find("did you mean --num-layers") != std::string::npos);
  // No abbreviations (allow_abbrev=False).
  CHECK(usage_error({"--hidden", "8"}).find("unrecognized arguments") != std::string::npos);
}

TEST_CASE("an enum value with its class prefix on the command line: Megatron's Enum[word] fails on it", "[parse]") {
  // argument_utils.py's enum_type_handler is config_type[cli_arg]: AttnBackend['AttnBackend.flash'] is a KeyError.
  mr::UsageError e = refused({"--exit-signal", "Signals.SIGUSR1"});
  CHECK(std::string(e.what()) ==
        "argument --exit-signal: invalid value: 'Signals.SIGUSR1': Megatron's parser looks the name up as "
        "Signals['Signals.SIGUSR1'] and fails; write 'SIGUSR1' (a plain-layout config file takes the prefixed spelling)");
  CHECK(e.rule() == "input.enum-prefix-on-command-line");
  CHECK(e.flags == std::vector<std::string>{"--exit-signal"});
  CHECK(refused({"--attention-backend=AttnBackend.flash"}).rule() == "input.enum-prefix-on-command-line");
  CHECK(refused({"--cuda-graph-modules", "attn", "CudaGraphModule.mlp"}).rule() == "input.enum-prefix-on-command-line");
  // Neighbours: the bare names pass; the prefix alone or another class's prefix is the converter's own refusal.
  CHECK(parse({"--exit-signal", "SIGUSR1"})["exit_signal"].as_int() == 10);
  CHECK(parse({"--attention-backend", "flash"})["attention_backend"].as_str() == "AttnBackend.flash");
  CHECK(refused({"--attention-backend", "AttnBackend."}).rule() == "parse.invalid-value");
  CHECK(refused({"--exit-signal", "AttnBackend.SIGUSR1"}).rule() == "parse.invalid-value");
  // The prefix on a name that is no member: the converter's refusal, which suggests nothing invalid (diff34 #5).
  CHECK(std::string(refused({"--exit-signal", "Signals.SIGTERMX"}).what()) ==
        "argument --exit-signal: invalid signal: 'Signals.SIGTERMX' (use a name such as SIGTERM or SIGUSR1)");
  // A plain string flag keeps such a word.
  CHECK(parse({"--save", "Signals.SIGUSR1"})["save"].as_str() == "Signals.SIGUSR1");
}

TEST_CASE("a mutually exclusive group: the second member is not allowed with the first", "[parse]") {
  // arguments.py: --kitchen-config-file and --kitchen-recipe-number are one add_mutually_exclusive_group.
  mr::UsageError e = refused({"--kitchen-config-file", "k.yaml", "--kitchen-recipe-number", "1"});
  CHECK(std::string(e.what()) == "argument --kitchen-recipe-number: not allowed with argument --kitchen-config-file");
  CHECK(e.rule() == "input.mutually-exclusive");
  CHECK(std::string(refused({"--kitchen-recipe-number=1", "--kitchen-config-file=k.yaml"}).what()) ==
        "argument --kitchen-config-file: not allowed with argument --kitchen-recipe-number");
  // argparse stops at its first error: a bad value before the pair is the one reported.
  CHECK(std::string(refused({"--num-layers", "x", "--kitchen-config-file", "k", "--kitchen-recipe-number", "1"}).what())
            .rfind("argument --num-layers: invalid int value: 'x'", 0) == 0);
  // Neighbours: one member, or the same member twice (the later wins), pass.
  CHECK(parse({"--kitchen-recipe-number", "1"})["kitchen_recipe_number"].as_int() == 1);
  CHECK(parse({"--kitchen-config-file", "a", "--kitchen-config-file", "b"})["kitchen_config_file"].as_str() == "b");
}

TEST_CASE("type and choice errors name flag, value and what is allowed", "[parse]") {
  CHECK(usage_error({"--num-layers", "two"}) == "argument --num-layers: invalid int value: 'two'");
  CHECK(usage_error({"--lr", "fast"}) == "argument --lr: invalid float value: 'fast'");
  std::string e = usage_error({"--ckpt-format", "zip"});
  CHECK(e.find("argument --ckpt-format: invalid choice: 'zip' (choose from") != std::string::npos);
  CHECK(e.find("'torch_dist'") != std::string::npos);
  CHECK(usage_error({"--num-layers"}) == "argument --num-layers: expected one argument");
}

TEST_CASE("values with spaces and leading dashes", "[parse]") {
  auto ns = parse({"--wandb-exp-name", "my run -1", "--tokenizer-model", "-x y"});
  CHECK(ns["wandb_exp_name"].as_str() == "my run -1");
  CHECK(ns["tokenizer_model"].as_str() == "-x y");
}

TEST_CASE("special types through the parser", "[parse]") {
  auto ns = parse({"--moe-layer-freq", "([1]*3+[0]*1)*2", "--attention-backend", "flash", "--exit-signal", "SIGUSR1",
                   "--window-size", "(128,0)", "--triton-autotune-block-sizes", "BLOCK_M=64", "BLOCK_N=32",
                   "--cuda-graph-modules", "attn", "mlp"});
  CHECK(ns["moe_layer_freq"].json() == "[1, 1, 1, 0, 1, 1, 1, 0]");
  CHECK(ns["attention_backend"].as_str() == "AttnBackend.flash");
  CHECK(ns["exit_signal"].as_int() == 10);
  CHECK(ns["window_size"].py_str() == "(128, 0)");
  CHECK(ns["triton_autotune_block_sizes"].py_str() == "[('BLOCK_M', 64), ('BLOCK_N', 32)]");
  CHECK(ns["cuda_graph_modules"].json() == "[\"CudaGraphModule.attn\", \"CudaGraphModule.mlp\"]");
  CHECK(usage_error({"--exit-signal", "15"}).find("invalid signal") != std::string::npos);
  CHECK(usage_error({"--attention-backend", "cudnn"}).find("invalid AttnBackend value") != std::string::npos);
  CHECK(usage_error({"--moe-layer-freq", "__import__('os')"}).find("invalid moe_freq_type value") != std::string::npos);
  CHECK(usage_error({"--moe-layer-freq", "[__import__('os')]"}).find("only digits") != std::string::npos);
}
