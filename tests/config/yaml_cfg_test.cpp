// --yaml-cfg: Megatron's experimental nested-YAML namespace (load_yaml + validate_yaml), end to end.
// "py NN" cites Megatron-LM megatron/training/yaml_arguments.py; "seed NN" ../shared/spec/arguments.py.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "config/print.h"
#include "config/validate/resolve.h"
#include "config/validate/yaml_arguments.h"
#include "config/parse/yaml11.h"
#include "config/parse/yaml_cfg.h"

namespace fs = std::filesystem;

namespace {

std::string write_tmp(const std::string& name, const std::string& text) {
  fs::path dir = fs::temp_directory_path() / ("mr-yaml-cfg-test-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  fs::path p = dir / name;
  std::ofstream(p) << text;
  return p.string();
}

// A YAML file as (path, YAML text of the value) pairs; "section.key" goes into a nested section.
using Kv = std::vector<std::pair<std::string, std::string>>;
const char* const kDelete = "<delete>";

// Exactly the keys parse_args / validate_yaml and core_transformer_config_from_yaml read for this configuration
// (WORLD_SIZE=1, RANK=0): each one missing fails in Megatron (checked below).
Kv base_kv() {
  return {
      {"language_model.num_layers", "4"},
      {"language_model.hidden_size", "256"},
      {"language_model.num_attention_heads", "8"},
      {"language_model.ffn_hidden_size", "null"},
      {"language_model.kv_channels", "null"},
      {"language_model.activation_func", "gelu"},
      {"language_model.add_bias_linear", "false"},
      {"language_model.bias_activation_fusion", "false"},
      {"language_model.init_method", "null"},
      {"language_model.embedding_init_method", "null"},
      {"language_model.fp32_residual_connection", "false"},
      {"language_model.moe_grouped_gemm", "false"},
      {"language_model.distribute_saved_activations", "false"},
      {"language_model.recompute_granularity", "null"},
      {"language_model.num_moe_experts", "null"},
      {"model_parallel.tensor_model_parallel_size", "1"},
      {"model_parallel.pipeline_model_parallel_size", "1"},
      {"model_parallel.context_parallel_size", "1"},
      {"model_parallel.expert_model_parallel_size", "1"},
      {"model_parallel.tp_comm_overlap", "false"},
      {"model_parallel.fp16", "false"},
      {"model_parallel.bf16", "false"},
      {"model_parallel.params_dtype", "null"},
      {"disable_msc_deprecated", "false"},
      {"enable_msc", "false"},
      {"use_checkpoint_args", "false"},
      {"enable_experimental", "false"},
      {"data_path", "null"},
      {"account_for_embedding_in_pipeline_split", "false"},
      {"micro_batch_size", "2"},
      {"global_batch_size", "null"},
      {"step_batch_size_schedule", "null"},
      {"num_layers_per_virtual_pipeline_stage", "null"},
      {"overlap_param_gather", "false"},
      {"dataloader_type", "null"},
      {"train_iters", "10"},
      {"train_samples", "null"},
      {"lr_decay_samples", "null"},
      {"lr_warmup_samples", "0"},
      {"lr_warmup_fraction", "null"},
      {"encoder_num_layers", "null"},
      {"seq_length", "128"},
      {"encoder_seq_length", "null"},
      {"max_position_embeddings", "128"},
      {"decoder_seq_length", "null"},
      {"lr", "1.0e-4"},
      {"min_lr", "0.0"},
      {"save", "null"},
      {"fp16_lm_cross_entropy", "false"},
      {"weight_decay", "0.01"},
      {"weight_decay_incr_style", "constant"},
      {"start_weight_decay", "null"},
      {"end_weight_decay", "null"},
  };
}

Kv changed(Kv kv, const Kv& changes) {
  for (const auto& [k, v] : changes) {
    auto it = std::find_if(kv.begin(), kv.end(), [&](const auto& e) { return e.first == k; });
    if (v == kDelete) {
      if (it != kv.end()) kv.erase(it);
    } else if (it != kv.end()) {
      it->second = v;
    } else {
      kv.emplace_back(k, v);
    }
  }
  return kv;
}

std::string render(const Kv& kv) {
  std::vector<std::string> order;
  std::map<std::string, std::string> sections;
  std::string top;
  for (const auto& [k, v] : kv) {
    auto dot = k.find('.');
    if (dot == std::string::npos) {
      top += k + ": " + v + "\n";
      continue;
    }
    std::string s = k.substr(0, dot);
    if (!sections.count(s)) order.push_back(s);
    sections[s] += "  " + k.substr(dot + 1) + ": " + v + "\n";
  }
  std::string out;
  for (const auto& s : order) out += s + ":\n" + sections[s];
  return out + top;
}

struct YRun {
  mr::Outcome out;
  int exit = 0;
  std::string rule, message, where, file;
  std::vector<std::string> flags;
  const mr::Value& operator[](const std::string& dest) const { return out.parsed.ns.get(dest); }
  // A key of a nested section in the resolved namespace.
  mr::Value sec(const std::string& section, const std::string& key) const {
    for (const auto& [k, v] : out.parsed.ns.get(section).as_object())
      if (k == key) return v;
    throw std::out_of_range(section + "." + key);
  }
};

int g_files = 0;

YRun run_file(const std::string& file, const std::vector<std::string>& cli = {},
              const std::map<std::string, std::string>& env = {}, const mr::TargetEnv* target = nullptr,
              mr::ConfigOptions opts = {}) {
  mr::Invocation inv;
  inv.env = target ? *target : mr::TargetEnv{};
  for (const auto& [k, v] : env) inv.env.vars[k] = v;
  std::vector<std::string> words = {"--yaml-cfg", file};
  words.insert(words.end(), cli.begin(), cli.end());
  inv.cli = mr::argv_tokens(words);
  inv.config = opts;
  YRun r;
  r.file = file;
  try {
    r.out = mr::resolve(mr::Schema::megatron(), inv);
    r.exit = r.out.exit_code();
    for (const auto& d : r.out.diagnostics)
      if (d.level == mr::Diagnostic::Level::Error) {
        r.rule = d.rule;
        r.message = d.message;
        r.where = d.where;
        r.flags = d.flags;
      }
  } catch (const mr::UsageError& e) {
    r.exit = 2;
    r.rule = "usage";
    r.message = e.what();
    r.where = e.where;
  }
  return r;
}

YRun yrun(const Kv& changes, const std::map<std::string, std::string>& env = {},
          const std::vector<std::string>& cli = {}, const mr::TargetEnv* target = nullptr) {
  std::string file = write_tmp("cfg" + std::to_string(++g_files) + ".yaml", render(changed(base_kv(), changes)));
  return run_file(file, cli, env, target);
}

// The line of `needle` in the file (1-based), for file:line checks.
std::string line_of(const std::string& file, const std::string& needle) {
  std::ifstream in(file);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n)
    if (line.find(needle) != std::string::npos) return file + ":" + std::to_string(n);
  return file + ":?";
}

// What a shell command prints on stdout; `status` gets its exit code.
std::string shell_output(const std::string& cmd, int& status) {
  FILE* pipe = ::popen(cmd.c_str(), "r");
  REQUIRE(pipe);
  std::string out;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof buf, pipe)) out.append(buf, n);
  status = WEXITSTATUS(::pclose(pipe));
  return out;
}

#define REQUIRE_OK(r)                                                  \
  do {                                                                 \
    INFO((r).rule << ": " << (r).message);                             \
    REQUIRE((r).exit == 0);                                            \
  } while (0)
#define CHECK_FAILS(r, id)         \
  do {                             \
    INFO((r).message);             \
    CHECK((r).exit == 1);          \
    CHECK((r).rule == (id));       \
  } while (0)

}  // namespace

// ---- the base configuration, derived values --------------------------------------------------------------------

TEST_CASE("yaml-cfg: the minimal file resolves, with validate_yaml's derived values", "[yaml-cfg]") {
  auto r = yrun({});
  REQUIRE_OK(r);
  // py 58/64/67/82 with WORLD_SIZE=1: tp = min(1, 1), pp = min(1, 1 // 1), dp = 1 // (1 * 1 * 1).
  CHECK(r["data_parallel_size"].as_int() == 1);
  CHECK(r.sec("model_parallel", "transformer_pipeline_model_parallel_size").as_int() == 1);
  // py 121: global_batch_size = micro_batch_size * data_parallel_size = 2; py 129/131: eval sizes follow.
  CHECK(r["global_batch_size"].as_int() == 2);
  CHECK(r["eval_global_batch_size"].as_int() == 2);
  CHECK(r["eval_micro_batch_size"].as_int() == 2);
  // py 250: gelu -> ffn_hidden_size = 4 * 256; py 254: kv_channels = 256 // 8.
  CHECK(r.sec("language_model", "ffn_hidden_size").as_int() == 1024);
  CHECK(r.sec("language_model", "kv_channels").as_int() == 32);
  // py 149/151: no virtual pipeline, no P2P overlap.
  CHECK(r.sec("model_parallel", "virtual_pipeline_model_parallel_size").is_none());
  CHECK_FALSE(r.sec("model_parallel", "overlap_p2p_comm").as_bool());
  // py 182/185/186/193/228/259/287/288
  CHECK(r["dataloader_type"].as_str() == "single");
  CHECK(r["consumed_train_samples"].as_int() == 0);
  CHECK(r["consumed_valid_samples"].as_int() == 0);
  CHECK_FALSE(r.sec("model_parallel", "variable_seq_lengths").as_bool());
  CHECK(r["encoder_num_layers"].as_int() == 4);
  CHECK(r["encoder_seq_length"].as_int() == 128);
  CHECK(r["start_weight_decay"].as_float() == Approx(0.01));
  CHECK(r["end_weight_decay"].as_float() == Approx(0.01));
  // py 326: no sequence parallelism with tp=1 (set even though the file does not define it).
  CHECK_FALSE(r.sec("model_parallel", "sequence_parallel").as_bool());
  // Neither fp16 nor bf16: params_dtype stays as the file says.
  CHECK(r.sec("model_parallel", "params_dtype").is_none());
  // load_yaml adds yaml_cfg and _is_global_batch_size_explicitly_specified; parse_args rank/world_size.
  CHECK(r["yaml_cfg"].as_str() == r.file);
  CHECK_FALSE(r["_is_global_batch_size_explicitly_specified"].as_bool());
  CHECK(r["rank"].as_int() == 0);
  CHECK(r["world_size"].as_int() == 1);
  // Nothing of argparse's namespace survives: flags the YAML does not define are absent.
  CHECK_FALSE(r.out.parsed.ns.has("hidden_dropout"));
  CHECK_FALSE(r.out.parsed.ns.has("triton_autotune_mode"));
}

TEST_CASE("yaml-cfg: py 352-355 flatten the sections into the top level and add num_experts", "[yaml-cfg]") {
  auto r = yrun({{"model_parallel.bf16", "true"}, {"accumulate_allreduce_grads_in_fp32", "false"}});
  REQUIRE_OK(r);
  const auto& ns = r.out.parsed.ns;
  // Both the sections (objects) and their keys at the top level.
  CHECK(ns["model_parallel"].is_object());
  CHECK(ns["language_model"].is_object());
  CHECK(ns["tensor_model_parallel_size"].as_int() == 1);
  CHECK(ns["num_layers"].as_int() == 4);
  CHECK(ns["kv_channels"].as_int() == 32);
  CHECK(ns["params_dtype"].as_str() == "torch.bfloat16");
  CHECK(ns["num_experts"].is_none());
  // Provenance: a flattened key points at its line in the section; a derived one at the py line.
  CHECK(ns.provenance("num_attention_heads").where == line_of(r.file, "num_attention_heads:"));
  CHECK(ns.provenance("kv_channels").kind == mr::Provenance::Kind::Derived);
  CHECK(ns.provenance("kv_channels").where.find("yaml_arguments.py:254") != std::string::npos);
  // num_experts is always derived (print_yaml_table reads it) and cited like the others, not as "py 355".
  CHECK(ns.provenance("num_experts").kind == mr::Provenance::Kind::Derived);
  CHECK(ns.provenance("num_experts").where == "yaml_arguments.py:355: num_experts = num_moe_experts");
  CHECK(ns.provenance("micro_batch_size").where == line_of(r.file, "micro_batch_size:"));
  CHECK(ns.provenance("world_size").kind == mr::Provenance::Kind::Env);
}

TEST_CASE("yaml-cfg: nested sections in the JSON output", "[yaml-cfg]") {
  auto r = yrun({{"model_parallel.bf16", "true"}, {"accumulate_allreduce_grads_in_fp32", "false"}});
  REQUIRE_OK(r);
  std::string json = mr::namespace_json(r.out.parsed.ns);
  CHECK(json.find(R"("model_parallel": {"tensor_model_parallel_size": 1, "pipeline_model_parallel_size": 1, )"
                  R"("context_parallel_size": 1, )") != std::string::npos);
  CHECK(json.find(R"("params_dtype": "torch.bfloat16")") != std::string::npos);
  CHECK(json.find(R"("language_model": {"num_layers": 4, "hidden_size": 256, )") != std::string::npos);
  CHECK(json.find(R"("kv_channels": 32)") != std::string::npos);
  // The JSON is valid: it parses back, the sections as objects.
  mr::Value back = mr::Value::parse_json(json);
  bool found = false;
  for (const auto& [k, v] : back.as_object())
    if (k == "model_parallel") found = v.is_object();
  CHECK(found);
}

TEST_CASE("yaml-cfg: the Megatron table prints sections as namespace(...), before flattening", "[yaml-cfg]") {
  auto r = yrun({{"model_parallel.bf16", "true"}, {"accumulate_allreduce_grads_in_fp32", "false"},
                 {"data_path", "'a b'"}});
  REQUIRE_OK(r);
  std::ostringstream os;
  mr::print_yaml_table(os, r.out.parsed.ns);
  std::string t = os.str();
  CHECK(t.find("------------------------ arguments ------------------------\n") == 0);
  auto row = [](const std::string& name, const std::string& value) {
    return "  " + name + " " + std::string(48 - name.size(), '.') + " " + value;
  };
  CHECK(t.find(row("model_parallel", "namespace(tensor_model_parallel_size=1, pipeline_model_parallel_size=1, "
                                     "context_parallel_size=1, expert_model_parallel_size=1, tp_comm_overlap=False, "
                                     "fp16=False, bf16=True, params_dtype=torch.bfloat16, ")) != std::string::npos);
  CHECK(t.find("activation_func='gelu'") != std::string::npos);
  CHECK(t.find(row("data_path", "['a', 'b']\n")) != std::string::npos);
  CHECK(t.find(row("micro_batch_size", "2\n")) != std::string::npos);
  // The flattened copies and num_experts came after the print in validate_yaml.
  CHECK(t.find("  tensor_model_parallel_size ") == std::string::npos);
  CHECK(t.find("  num_experts ") == std::string::npos);
  CHECK(t.find("  kv_channels ") == std::string::npos);
  // Python's repr of a SimpleNamespace, nested.
  mr::Value v = mr::Value::object({{"a", mr::Value(1)}, {"b", mr::Value("x")},
                                   {"c", mr::Value::object({{"d", mr::Value()}, {"e", mr::Value(mr::List{mr::Value(1.5)})}})}});
  CHECK(mr::yaml_namespace_repr(v) == "namespace(a=1, b='x', c=namespace(d=None, e=[1.5]))");
  CHECK(mr::yaml_namespace_repr(mr::Value::object({})) == "namespace()");
}

TEST_CASE("yaml-cfg: derived values worked by hand", "[yaml-cfg]") {
  SECTION("py 248: swiglu ffn_hidden_size = int((4 * h * 2 / 3) / 64) * 64") {
    // h=256: 2048/3 = 682.67, /64 = 10.67 -> 10 * 64 = 640. h=4096: 32768/3 = 10922.67, /64 = 170.67 -> 10880.
    auto r = yrun({{"language_model.activation_func", "swiglu"}, {"language_model.bias_swiglu_fusion", "true"}});
    REQUIRE_OK(r);
    CHECK(r.sec("language_model", "ffn_hidden_size").as_int() == 640);
    r = yrun({{"language_model.activation_func", "swiglu"}, {"language_model.bias_swiglu_fusion", "true"},
              {"language_model.hidden_size", "4096"},
              {"language_model.num_attention_heads", "32"}, {"seq_length", "128"}});
    REQUIRE_OK(r);
    CHECK(r.sec("language_model", "ffn_hidden_size").as_int() == 10880);
    CHECK(r.sec("language_model", "kv_channels").as_int() == 128);  // py 254: 4096 // 32
  }
  SECTION("given ffn_hidden_size and kv_channels are kept") {
    auto r = yrun({{"language_model.ffn_hidden_size", "1000"}, {"language_model.kv_channels", "48"}});
    REQUIRE_OK(r);
    CHECK(r.sec("language_model", "ffn_hidden_size").as_int() == 1000);
    CHECK(r.sec("language_model", "kv_channels").as_int() == 48);
    CHECK(r.out.parsed.ns.provenance("ffn_hidden_size").kind == mr::Provenance::Kind::Config);
  }
  SECTION("py 58-82: WORLD_SIZE=8, tp 2, pp 2, cp 1 -> dp = 8 // 4 = 2; global batch 2 * 2") {
    auto r = yrun({{"model_parallel.tensor_model_parallel_size", "2"},
                   {"model_parallel.pipeline_model_parallel_size", "2"}, {"model_parallel.sequence_parallel", "false"}},
                  {{"WORLD_SIZE", "8"}});
    REQUIRE_OK(r);
    CHECK(r["data_parallel_size"].as_int() == 2);
    CHECK(r["global_batch_size"].as_int() == 4);
    CHECK(r["tensor_model_parallel_size"].as_int() == 2);
  }
  SECTION("py 58/64: tp and pp are capped at what the world size allows") {
    // WORLD_SIZE=2: tp = min(4, 2) = 2; pp = min(4, 2 // 2) = 1; dp = 2 // 2 = 1.
    auto r = yrun({{"model_parallel.tensor_model_parallel_size", "4"},
                   {"model_parallel.pipeline_model_parallel_size", "4"}, {"model_parallel.sequence_parallel", "false"}},
                  {{"WORLD_SIZE", "2"}});
    REQUIRE_OK(r);
    CHECK(r.sec("model_parallel", "tensor_model_parallel_size").as_int() == 2);
    CHECK(r.sec("model_parallel", "pipeline_model_parallel_size").as_int() == 1);
    CHECK(r["data_parallel_size"].as_int() == 1);
    CHECK(r.out.parsed.ns.provenance("tensor_model_parallel_size").where.find("yaml_arguments.py:58") != std::string::npos);
  }
  SECTION("py 67 + 137-147: virtual pipeline with account_for_embedding_in_pipeline_split") {
    // WORLD_SIZE=4, pp 4 -> transformer pp = 4 - 1 = 3; 6 layers // 3 = 2 per stage; 2 // 1 = 2 virtual stages.
    auto r = yrun({{"model_parallel.pipeline_model_parallel_size", "4"}, {"language_model.num_layers", "6"},
                   {"account_for_embedding_in_pipeline_split", "true"}, {"num_layers_per_virtual_pipeline_stage", "1"},
                   {"model_parallel.overlap_p2p_comm", "false"}},
                  {{"WORLD_SIZE", "4"}});
    REQUIRE_OK(r);
    CHECK(r.sec("model_parallel", "transformer_pipeline_model_parallel_size").as_int() == 3);
    CHECK(r.sec("model_parallel", "virtual_pipeline_model_parallel_size").as_int() == 2);
    CHECK(r["virtual_pipeline_model_parallel_size"].as_int() == 2);
  }
  SECTION("py 146: 8 layers over pp 4 = 2 per stage; 2 // 1 = 2 virtual stages; overlap_p2p_comm kept") {
    auto r = yrun({{"model_parallel.pipeline_model_parallel_size", "4"}, {"language_model.num_layers", "8"},
                   {"num_layers_per_virtual_pipeline_stage", "1"}, {"model_parallel.overlap_p2p_comm", "true"}},
                  {{"WORLD_SIZE", "4"}});
    REQUIRE_OK(r);
    CHECK(r.sec("model_parallel", "virtual_pipeline_model_parallel_size").as_int() == 2);
    CHECK(r.sec("model_parallel", "overlap_p2p_comm").as_bool());
  }
  SECTION("py 162-175: params_dtype from fp16 / bf16; bf16 turns on fp32 grad accumulation") {
    auto r = yrun({{"model_parallel.fp16", "true"}});
    REQUIRE_OK(r);
    CHECK(r.sec("model_parallel", "params_dtype").as_str() == "torch.float16");  // str(torch.half)
    r = yrun({{"model_parallel.bf16", "true"}, {"accumulate_allreduce_grads_in_fp32", "false"}});
    REQUIRE_OK(r);
    CHECK(r.sec("model_parallel", "params_dtype").as_str() == "torch.bfloat16");
    CHECK(r["accumulate_allreduce_grads_in_fp32"].as_bool());
    // bf16 without the key: py 171 reads it.
    r = yrun({{"model_parallel.bf16", "true"}});
    CHECK_FAILS(r, "yaml.missing-attribute");
    CHECK(r.message.find("accumulate_allreduce_grads_in_fp32") != std::string::npos);
  }
  SECTION("py 51-55: a whitespace-separated data_path string becomes a list; one word stays a string") {
    auto r = yrun({{"data_path", "'0.5 /data/a 0.5 /data/b'"}});
    REQUIRE_OK(r);
    CHECK(r["data_path"].json() == R"(["0.5", "/data/a", "0.5", "/data/b"])");
    r = yrun({{"data_path", "/data/a"}});
    REQUIRE_OK(r);
    CHECK(r["data_path"].as_str() == "/data/a");
  }
  SECTION("py 225-232 / 257-262: num_layers and seq_length from their encoder_ spellings") {
    auto r = yrun({{"language_model.num_layers", "null"}, {"encoder_num_layers", "6"}, {"seq_length", "null"},
                   {"encoder_seq_length", "64"}});
    REQUIRE_OK(r);
    CHECK(r.sec("language_model", "num_layers").as_int() == 6);
    CHECK(r["seq_length"].as_int() == 64);
  }
  SECTION("py 294-295: torch older than 1.11 turns persist_layer_norm off") {
    mr::TargetEnv old;
    old.torch_version = "1.10.2";
    auto r = yrun({{"language_model.persist_layer_norm", "true"}}, {}, {}, &old);
    REQUIRE_OK(r);
    CHECK_FALSE(r.sec("language_model", "persist_layer_norm").as_bool());
    r = yrun({{"language_model.persist_layer_norm", "true"}});
    REQUIRE_OK(r);
    CHECK(r.sec("language_model", "persist_layer_norm").as_bool());
  }
  SECTION("an explicit global_batch_size is kept and marked explicit") {
    auto r = yrun({{"global_batch_size", "8"}});
    REQUIRE_OK(r);
    CHECK(r["global_batch_size"].as_int() == 8);
    CHECK(r["_is_global_batch_size_explicitly_specified"].as_bool());
  }
}

// ---- parse_args: the CLI combinations, the MSC handling --------------------------------------------------------

TEST_CASE("yaml-cfg: seed 149-160 CLI arguments that cannot be combined with --yaml-cfg", "[yaml-cfg]") {
  auto r = yrun({}, {}, {"--triton-autotune-mode", "pinned"});
  CHECK_FAILS(r, "yaml.cli-triton-autotune");
  CHECK(r.message.find("--triton-autotune-mode") != std::string::npos);
  CHECK(r.flags == std::vector<std::string>{"--triton-autotune-mode", "--yaml-cfg"});
  r = yrun({}, {}, {"--triton-autotune-block-sizes", "BLOCK_M=64"});
  CHECK_FAILS(r, "yaml.cli-triton-autotune");
  // Equal to the defaults (the policy would be AutotunePolicy()): fine, and ignored.
  r = yrun({}, {}, {"--triton-autotune-mode", "auto", "--triton-autotune-modules", "mamba_ssm", "transformer_engine"});
  REQUIRE_OK(r);

  r = yrun({}, {}, {"--wide-residual", "4"});
  CHECK_FAILS(r, "yaml.cli-wide-residual");
  // Only --wide-residual makes a wide-residual config; its tuning flags alone do not.
  r = yrun({}, {}, {"--wide-residual-learned-retention"});
  REQUIRE_OK(r);
}

TEST_CASE("yaml-cfg: other CLI arguments and --config files are ignored, with a warning naming them",
          "[yaml-cfg]") {
  std::string cfg = write_tmp("cli-config.yaml", "hidden_size: 1024\n");
  std::string yaml = write_tmp("ignored.yaml", render(base_kv()));
  mr::Invocation inv;
  inv.config_files = {cfg};
  inv.cli = mr::argv_tokens({"--yaml-cfg", yaml, "--num-layers", "99"});
  inv.env = mr::TargetEnv{};
  auto out = mr::resolve(mr::Schema::megatron(), inv);
  REQUIRE(out.ok());
  CHECK(out.parsed.ns["num_layers"].as_int() == 4);
  CHECK(out.parsed.ns["hidden_size"].as_int() == 256);
  bool warned = false;
  for (const auto& w : out.parsed.warnings)
    warned |= w.find("experimental") != std::string::npos && w.find("--num-layers") != std::string::npos &&
              w.find("--hidden-size") != std::string::npos;
  CHECK(warned);
  // yaml_cfg itself may come from a --config file.
  std::string via = write_tmp("via-config.yaml", "yaml_cfg: " + yaml + "\n");
  mr::Invocation inv2;
  inv2.config_files = {via};
  inv2.env = mr::TargetEnv{};
  auto out2 = mr::resolve(mr::Schema::megatron(), inv2);
  REQUIRE(out2.ok());
  CHECK(out2.parsed.ns["yaml_cfg"].as_str() == yaml);
  CHECK(out2.parsed.ns["kv_channels"].as_int() == 32);
}

TEST_CASE("yaml-cfg: seed 170-187 MSC handling on the YAML namespace", "[yaml-cfg]") {
  auto r = yrun({{"disable_msc_deprecated", "true"}, {"enable_msc", "true"}});
  REQUIRE_OK(r);
  CHECK_FALSE(r["enable_msc"].as_bool());
  bool warned = false;
  for (const auto& w : r.out.parsed.warnings) warned |= w.find("disable_msc_deprecated") != std::string::npos;
  CHECK(warned);
  r = yrun({{"enable_msc", "true"}});
  REQUIRE_OK(r);
  CHECK(r["enable_msc"].as_bool());
  // A file without them: Megatron's parse_args raises AttributeError reading args.disable_msc_deprecated.
  r = yrun({{"disable_msc_deprecated", kDelete}});
  CHECK_FAILS(r, "yaml.missing-attribute");
  CHECK(r.message.find("'types.SimpleNamespace' object has no attribute 'disable_msc_deprecated'") !=
        std::string::npos);
  CHECK(r.where == r.file);
  r = yrun({{"enable_msc", kDelete}});
  CHECK_FAILS(r, "yaml.missing-attribute");
  CHECK(r.flags == std::vector<std::string>{"enable_msc"});
}

// ---- Python's attribute / type / division semantics ------------------------------------------------------------

TEST_CASE("yaml-cfg: every key of the minimal file is read (AttributeError when missing)", "[yaml-cfg]") {
  // The TransformerConfig fields only the model-config step reads: core_config_from_args's Exception.
  const std::set<std::string> fields = {"language_model.add_bias_linear", "language_model.bias_activation_fusion",
                                        "language_model.init_method", "language_model.embedding_init_method"};
  for (const auto& [key, value] : base_kv()) {
    auto r = yrun({{key, kDelete}});
    INFO(key << ": " << r.rule << ": " << r.message);
    CHECK(r.exit == 1);
    std::string attr = key.substr(key.find('.') == std::string::npos ? 0 : key.find('.') + 1);
    if (fields.count(key)) {
      CHECK(r.rule == "yaml.model-config.missing-field");
      CHECK(r.message.find("Exception: Missing argument " + attr + " for") != std::string::npos);
      CHECK(r.out.passed(mr::kStageValidateArgs));
    } else {
      CHECK(r.rule == "yaml.missing-attribute");
      CHECK(r.message.find("no attribute '" + attr + "'") != std::string::npos);
    }
  }
  // params_dtype is only read by rank 0's print (py 177-179).
  auto r = yrun({{"model_parallel.params_dtype", kDelete}}, {{"RANK", "1"}});
  REQUIRE_OK(r);
}

TEST_CASE("yaml-cfg: a missing or non-mapping section", "[yaml-cfg]") {
  Kv no_mp;
  for (const auto& kv : base_kv())
    if (kv.first.rfind("model_parallel.", 0) != 0) no_mp.push_back(kv);
  std::string file = write_tmp("no-mp.yaml", render(no_mp));
  auto r = run_file(file);
  CHECK_FAILS(r, "yaml.missing-attribute");
  CHECK(r.message.find("defines no `model_parallel`") != std::string::npos);

  file = write_tmp("null-mp.yaml", render(no_mp) + "model_parallel: null\n");
  r = run_file(file);
  CHECK_FAILS(r, "yaml.missing-attribute");
  CHECK(r.message.find("'NoneType' object has no attribute 'tensor_model_parallel_size'") != std::string::npos);
  CHECK(r.where == line_of(file, "model_parallel: null"));
  CHECK(r.message.find("--config file") == std::string::npos);  // a --yaml-cfg file's section missing: no hint
}

TEST_CASE("yaml-cfg: a --config file given to --yaml-cfg is named as one", "[yaml-cfg]") {
  auto r = run_file(std::string(MR_SOURCE_DIR) + "/configs/default.yaml");
  CHECK_FAILS(r, "yaml.missing-attribute");
  CHECK(r.message.find("; the file's keys are flags (--adam-beta1): this looks like a megatron-run --config file, not a "
                       "Megatron --yaml-cfg file (language_model: and model_parallel: sections): give it with --config "
                       "FILE") != std::string::npos);
  // Its other spellings (docs/config-files.md): dests at the top, and the functional tests' MODEL_ARGS section.
  r = run_file(write_tmp("dests.yaml", "num_layers: 2\nhidden_size: 64\nnum_attention_heads: 4\n"));
  CHECK_FAILS(r, "yaml.missing-attribute");
  CHECK(r.message.find("; the file sets num_layers at the top, with no language_model section: this looks like a "
                       "megatron-run --config file") != std::string::npos);
  r = run_file(write_tmp("model-args.yaml", "MODEL_ARGS:\n  --num-layers: 2\n"));
  CHECK_FAILS(r, "yaml.missing-attribute");
  CHECK(r.message.find("; the file has a MODEL_ARGS section: this looks like a megatron-run --config file") !=
        std::string::npos);
}

TEST_CASE("yaml-cfg: wrong types and division by zero", "[yaml-cfg]") {
  // A quoted number is a string; Python's `'2' > 0` is a TypeError.
  auto r = yrun({{"micro_batch_size", "'2'"}});
  CHECK_FAILS(r, "yaml.wrong-type");
  CHECK(r.message.find("`micro_batch_size` must be an integer, got '2' (str)") != std::string::npos);
  CHECK(r.where == line_of(r.file, "micro_batch_size:"));
  CHECK(r.message.find("(Megatron: TypeError)") != std::string::npos);
  // A float where an integer is needed: Megatron carries it through (no TypeError); refused here all the same.
  r = yrun({{"micro_batch_size", "2.0"}});
  CHECK_FAILS(r, "yaml.wrong-type");
  CHECK(r.message.find("got 2.0 (float) (Megatron would carry the float through its arithmetic; megatron-run takes "
                       "integers only: write it without a fraction)") != std::string::npos);
  // YAML 1.1: 1e-4 (no '.') is a string, so `min_lr <= lr` compares a float with a str.
  r = yrun({{"lr", "1e-4"}});
  CHECK_FAILS(r, "yaml.wrong-type");
  CHECK(r.message.find("'1e-4'") != std::string::npos);
  r = yrun({{"lr", "1.0e-4"}, {"min_lr", "1.0e-5"}});
  REQUIRE_OK(r);
  // tp = min(0, 1) = 0, then world_size % 0.
  r = yrun({{"model_parallel.tensor_model_parallel_size", "0"}});
  CHECK_FAILS(r, "yaml.division-by-zero");
  r = yrun({{"language_model.num_attention_heads", "0"}});
  CHECK_FAILS(r, "yaml.division-by-zero");
  // A division by zero names the file line of the key that is 0 (docs/yaml-cfg.md).
  CHECK(r.where == line_of(r.file, "num_attention_heads:"));
  r = yrun({{"model_parallel.tensor_model_parallel_size", "0"}});
  CHECK(r.where == line_of(r.file, "tensor_model_parallel_size:"));
  r = yrun({{"model_parallel.context_parallel_size", "0"}});
  CHECK_FAILS(r, "yaml.division-by-zero");
  CHECK(r.where == line_of(r.file, "context_parallel_size:"));
  r = yrun({{"model_parallel.pipeline_model_parallel_size", "0"}});
  CHECK_FAILS(r, "yaml.division-by-zero");
  CHECK(r.where == line_of(r.file, "pipeline_model_parallel_size:"));
  r = yrun({{"eval_micro_batch_size", "0"}});
  CHECK_FAILS(r, "yaml.division-by-zero");
  CHECK(r.where == line_of(r.file, "eval_micro_batch_size:"));
}

// ---- every validate_yaml rule, with a passing neighbour ---------------------------------------------------------

TEST_CASE("yaml-cfg: seed 101-112 use_checkpoint_args", "[yaml-cfg]") {
  auto r = yrun({{"use_checkpoint_args", "true"}, {"load", "null"}, {"pretrained_checkpoint", "null"}});
  CHECK_FAILS(r, "yaml.use-checkpoint-args-needs-load");
  r = yrun({{"use_checkpoint_args", "true"}, {"load", "/ckpt"}, {"non_persistent_ckpt_type", "local"}});
  CHECK_FAILS(r, "yaml.use-checkpoint-args-not-local");
  r = yrun({{"use_checkpoint_args", "true"}, {"load", "/ckpt"}, {"non_persistent_ckpt_type", "global"}});
  REQUIRE_OK(r);
}

TEST_CASE("yaml-cfg: py 57-94 parallel sizes and tp_comm_overlap", "[yaml-cfg]") {
  // WORLD_SIZE=6: tp = min(4, 6) = 4; 6 % 4 != 0.
  auto r = yrun({{"model_parallel.tensor_model_parallel_size", "4"}}, {{"WORLD_SIZE", "6"}});
  CHECK_FAILS(r, "yaml.world-size-divisible-by-tp");
  CHECK(r.message == "world size (6) is not divisible by tensor model parallel size (4)");
  // With tp > 1, py 329 reads model_parallel.sequence_parallel (CUDA_DEVICE_MAX_CONNECTIONS is not 1).
  r = yrun({{"model_parallel.tensor_model_parallel_size", "2"}}, {{"WORLD_SIZE", "6"}});
  CHECK_FAILS(r, "yaml.missing-attribute");
  CHECK(r.message.find("no attribute 'sequence_parallel'") != std::string::npos);
  r = yrun({{"model_parallel.tensor_model_parallel_size", "2"}, {"model_parallel.sequence_parallel", "false"}},
           {{"WORLD_SIZE", "6"}});
  REQUIRE_OK(r);
  CHECK(r["data_parallel_size"].as_int() == 3);
  // tp 2, pp = min(2, 6 // 2) = 2; 6 % (2 * 2 * 1) != 0.
  r = yrun({{"model_parallel.tensor_model_parallel_size", "2"}, {"model_parallel.pipeline_model_parallel_size", "2"}},
           {{"WORLD_SIZE", "6"}});
  CHECK_FAILS(r, "yaml.world-size-divisible-by-model-parallel");
  CHECK(r.where == line_of(r.file, "tensor_model_parallel_size:"));

  r = yrun({{"model_parallel.tp_comm_overlap", "true"}, {"model_parallel.sequence_parallel", "false"}});
  CHECK_FAILS(r, "yaml.tp-comm-overlap-needs-sequence-parallel");
  r = yrun({{"model_parallel.tp_comm_overlap", "true"}, {"model_parallel.sequence_parallel", "true"}});
  REQUIRE_OK(r);
}

TEST_CASE("yaml-cfg: py 110-134 batch sizes", "[yaml-cfg]") {
  CHECK_FAILS(yrun({{"micro_batch_size", "null"}}), "yaml.micro-batch-size-required");
  CHECK_FAILS(yrun({{"micro_batch_size", "0"}}), "yaml.micro-batch-size-positive");
  auto r = yrun({{"step_batch_size_schedule", "'0:8 100:16'"}, {"global_batch_size", "8"}});
  CHECK_FAILS(r, "yaml.step-batch-size-schedule-or-global-batch-size");
  r = yrun({{"step_batch_size_schedule", "'0:8 100:16'"}});
  REQUIRE_OK(r);
  CHECK_FAILS(yrun({{"global_batch_size", "0"}}), "yaml.global-batch-size-positive");
  // eval_global_batch_size 5 % (eval_micro_batch_size 2 * dp 1) != 0.
  r = yrun({{"eval_global_batch_size", "5"}});
  CHECK_FAILS(r, "yaml.eval-global-batch-size-divisible");
  CHECK(r.where == line_of(r.file, "eval_global_batch_size:"));
  // Unset, it is global_batch_size (py 129): the failure names that key's line.
  r = yrun({{"global_batch_size", "15"}});
  CHECK_FAILS(r, "yaml.eval-global-batch-size-divisible");
  CHECK(r.where == line_of(r.file, "global_batch_size:"));
  r = yrun({{"eval_global_batch_size", "6"}});
  REQUIRE_OK(r);
  CHECK(r["eval_global_batch_size"].as_int() == 6);
}

TEST_CASE("yaml-cfg: py 136-160 virtual pipeline and overlap_param_gather", "[yaml-cfg]") {
  CHECK_FAILS(yrun({{"num_layers_per_virtual_pipeline_stage", "1"}}), "yaml.virtual-pipeline-needs-pp-gt-2");
  // WORLD_SIZE=4, pp 4: 6 layers % 4 stages != 0.
  auto r = yrun({{"model_parallel.pipeline_model_parallel_size", "4"}, {"language_model.num_layers", "6"},
                 {"num_layers_per_virtual_pipeline_stage", "1"}},
                {{"WORLD_SIZE", "4"}});
  CHECK_FAILS(r, "yaml.virtual-pipeline-layers-divisible-by-pp");
  // 8 layers / 4 stages = 2 per stage; 2 % 3 != 0.
  r = yrun({{"model_parallel.pipeline_model_parallel_size", "4"}, {"language_model.num_layers", "8"},
            {"num_layers_per_virtual_pipeline_stage", "3"}},
           {{"WORLD_SIZE", "4"}});
  CHECK_FAILS(r, "yaml.virtual-pipeline-stage-layers-divisible");

  r = yrun({{"overlap_param_gather", "true"}, {"use_distributed_optimizer", "false"}, {"overlap_grad_reduce", "true"}});
  CHECK_FAILS(r, "yaml.overlap-param-gather-needs-distributed-optimizer");
  r = yrun({{"overlap_param_gather", "true"}, {"use_distributed_optimizer", "true"}, {"overlap_grad_reduce", "false"}});
  CHECK_FAILS(r, "yaml.overlap-param-gather-needs-overlap-grad-reduce");
  r = yrun({{"overlap_param_gather", "true"}, {"use_distributed_optimizer", "true"}, {"overlap_grad_reduce", "true"}});
  REQUIRE_OK(r);
}

TEST_CASE("yaml-cfg: py 162-168 fp16 and bf16", "[yaml-cfg]") {
  auto r = yrun({{"model_parallel.fp16", "true"}, {"model_parallel.bf16", "true"}});
  CHECK_FAILS(r, "yaml.fp16-and-bf16");
  CHECK(r.where == line_of(r.file, "fp16: true"));
}

TEST_CASE("yaml-cfg: py 195-222 iteration- and sample-based training", "[yaml-cfg]") {
  CHECK_FAILS(yrun({{"train_samples", "1000"}}), "yaml.iteration-based-no-train-samples");
  CHECK_FAILS(yrun({{"lr_decay_samples", "1000"}}), "yaml.iteration-based-no-lr-decay-samples");
  CHECK_FAILS(yrun({{"lr_warmup_samples", "10"}}), "yaml.iteration-based-no-lr-warmup-samples");
  CHECK_FAILS(yrun({{"lr_warmup_fraction", "0.1"}, {"lr_warmup_iters", "5"}}), "yaml.iteration-based-one-warmup");
  REQUIRE_OK(yrun({{"lr_warmup_fraction", "0.1"}, {"lr_warmup_iters", "0"}}));

  const Kv samples = {{"train_iters", "null"}, {"train_samples", "1000"}, {"lr_decay_iters", "null"},
                      {"lr_warmup_iters", "0"}};
  REQUIRE_OK(yrun(samples));
  // train_iters 0 skips the iteration-based block (py 196 is a truthiness test) but is not None.
  CHECK_FAILS(yrun(changed(samples, {{"train_iters", "0"}})), "yaml.sample-based-no-train-iters");
  CHECK_FAILS(yrun(changed(samples, {{"lr_decay_iters", "100"}})), "yaml.sample-based-no-lr-decay-iters");
  CHECK_FAILS(yrun(changed(samples, {{"lr_warmup_iters", "10"}})), "yaml.sample-based-no-lr-warmup-iters");
  CHECK_FAILS(yrun(changed(samples, {{"lr_warmup_fraction", "0.1"}, {"lr_warmup_samples", "10"}})),
              "yaml.sample-based-one-warmup");
}

TEST_CASE("yaml-cfg: py 224-254 layers, required arguments, heads", "[yaml-cfg]") {
  CHECK_FAILS(yrun({{"encoder_num_layers", "4"}}), "yaml.num-layers-and-encoder-num-layers");
  CHECK_FAILS(yrun({{"language_model.num_layers", "null"}}), "yaml.num-layers-required");
  auto r = yrun({{"language_model.hidden_size", "null"}});
  CHECK_FAILS(r, "yaml.required-model-args");
  CHECK(r.message == "hidden_size argument is None");
  r = yrun({{"language_model.num_attention_heads", "null"}});
  CHECK_FAILS(r, "yaml.required-model-args");
  CHECK(r.message == "num_attention_heads argument is None");
  r = yrun({{"language_model.hidden_size", "250"}});
  CHECK_FAILS(r, "yaml.hidden-size-divisible-by-heads");
  REQUIRE_OK(yrun({{"language_model.hidden_size", "250"}, {"language_model.kv_channels", "32"}}));
}

TEST_CASE("yaml-cfg: py 256-271 sequence lengths, lr, save", "[yaml-cfg]") {
  CHECK_FAILS(yrun({{"encoder_seq_length", "128"}}), "yaml.seq-length-and-encoder-seq-length");
  CHECK_FAILS(yrun({{"seq_length", "null"}}), "yaml.seq-length-required");
  CHECK_FAILS(yrun({{"max_position_embeddings", "64"}}), "yaml.max-position-embeddings-seq-length");
  CHECK_FAILS(yrun({{"decoder_seq_length", "256"}}), "yaml.max-position-embeddings-decoder-seq-length");
  REQUIRE_OK(yrun({{"decoder_seq_length", "128"}}));
  CHECK_FAILS(yrun({{"min_lr", "0.1"}}), "yaml.min-lr-le-lr");
  REQUIRE_OK(yrun({{"lr", "null"}, {"min_lr", "0.1"}}));
  CHECK_FAILS(yrun({{"save", "/ckpt"}, {"save_interval", "null"}}), "yaml.save-needs-save-interval");
  REQUIRE_OK(yrun({{"save", "/ckpt"}, {"save_interval", "100"}}));
}

TEST_CASE("yaml-cfg: py 272-282 mixed precision", "[yaml-cfg]") {
  // py 274 reads the top-level args.fp16 (not model_parallel.fp16).
  auto r = yrun({{"fp16_lm_cross_entropy", "true"}, {"model_parallel.fp16", "true"}});
  CHECK_FAILS(r, "yaml.missing-attribute");
  CHECK(r.message.find("no attribute 'fp16'") != std::string::npos);
  CHECK_FAILS(yrun({{"fp16_lm_cross_entropy", "true"}, {"fp16", "false"}}), "yaml.fp16-lm-cross-entropy-needs-fp16");
  CHECK_FAILS(yrun({{"language_model.fp32_residual_connection", "true"}}), "yaml.fp32-residual-needs-fp16-or-bf16");
  REQUIRE_OK(yrun({{"language_model.fp32_residual_connection", "true"}, {"model_parallel.fp16", "true"}}));

  CHECK_FAILS(yrun({{"language_model.moe_grouped_gemm", "true"}}), "yaml.moe-grouped-gemm-needs-bf16");
  const Kv gemm = {{"language_model.moe_grouped_gemm", "true"}, {"model_parallel.bf16", "true"},
                   {"accumulate_allreduce_grads_in_fp32", "true"}};
  REQUIRE_OK(yrun(gemm));
  mr::TargetEnv volta;
  volta.gpu_arch = "sm_70";
  CHECK_FAILS(yrun(gemm, {}, {}, &volta), "yaml.moe-grouped-gemm-compute-capability");
}

TEST_CASE("yaml-cfg: py 284-291 weight decay", "[yaml-cfg]") {
  CHECK_FAILS(yrun({{"start_weight_decay", "0.1"}}), "yaml.constant-weight-decay-no-start");
  CHECK_FAILS(yrun({{"end_weight_decay", "0.1"}}), "yaml.constant-weight-decay-no-end");
  CHECK_FAILS(yrun({{"weight_decay_incr_style", "linear"}}), "yaml.weight-decay-incr-needs-start");
  CHECK_FAILS(yrun({{"weight_decay_incr_style", "linear"}, {"start_weight_decay", "0.0"}}),
              "yaml.weight-decay-incr-needs-end");
  auto r = yrun({{"weight_decay_incr_style", "linear"}, {"start_weight_decay", "0.0"}, {"end_weight_decay", "0.1"}});
  REQUIRE_OK(r);
  CHECK(r["start_weight_decay"].as_float() == 0.0);
}

TEST_CASE("yaml-cfg: py 301-320 recompute", "[yaml-cfg]") {
  CHECK_FAILS(yrun({{"language_model.distribute_saved_activations", "true"}}),
              "yaml.distribute-saved-activations-needs-tp");
  const Kv tp2 = {{"model_parallel.tensor_model_parallel_size", "2"}, {"model_parallel.sequence_parallel", "false"},
                  {"language_model.distribute_saved_activations", "true"}};
  const std::map<std::string, std::string> ws2 = {{"WORLD_SIZE", "2"}};
  CHECK_FAILS(yrun(changed(tp2, {{"language_model.recompute_granularity", "selective"}}), ws2),
              "yaml.distribute-saved-activations-needs-full-recompute");
  CHECK_FAILS(yrun(changed(tp2, {{"language_model.recompute_granularity", "full"},
                                 {"language_model.recompute_method", "null"}}),
                   ws2),
              "yaml.distribute-saved-activations-needs-recompute-method");
  const Kv full = changed(tp2, {{"language_model.recompute_granularity", "full"},
                                {"language_model.recompute_method", "uniform"}});
  REQUIRE_OK(yrun(full, ws2));
  mr::TargetEnv old;
  old.torch_version = "1.9.1";
  CHECK_FAILS(yrun(full, ws2, {}, &old), "yaml.distribute-saved-activations-torch-version");

  CHECK_FAILS(yrun({{"language_model.recompute_granularity", "selective"}, {"language_model.recompute_method", "uniform"}}),
              "yaml.selective-recompute-no-method");
  REQUIRE_OK(yrun({{"language_model.recompute_granularity", "selective"}, {"language_model.recompute_method", "null"}}));
}

TEST_CASE("yaml-cfg: py 322-346 sequence parallelism and MoE", "[yaml-cfg]") {
  const Kv sp = {{"model_parallel.tensor_model_parallel_size", "2"}, {"model_parallel.sequence_parallel", "true"}};
  CHECK_FAILS(yrun(sp, {{"WORLD_SIZE", "2"}}), "yaml.sequence-parallel-cuda-max-connections");
  REQUIRE_OK(yrun(sp, {{"WORLD_SIZE", "2"}, {"CUDA_DEVICE_MAX_CONNECTIONS", "1"}}));
  // tp = min(2, 1) = 1 with one process: sequence parallelism is switched off (py 326), no check.
  REQUIRE_OK(yrun(sp));

  const Kv moe_tp = {{"model_parallel.tensor_model_parallel_size", "2"}, {"model_parallel.sequence_parallel", "false"},
                     {"language_model.num_moe_experts", "8"}};
  CHECK_FAILS(yrun(moe_tp, {{"WORLD_SIZE", "2"}}), "yaml.moe-tp-needs-sequence-parallel");
  auto r = yrun({{"language_model.num_moe_experts", "8"}});
  REQUIRE_OK(r);
  CHECK(r["num_experts"].as_int() == 8);  // py 355

  CHECK_FAILS(yrun({{"model_parallel.expert_model_parallel_size", "2"}}), "yaml.expert-parallel-needs-experts");
  CHECK_FAILS(yrun({{"model_parallel.expert_model_parallel_size", "2"}, {"language_model.num_moe_experts", "3"}}),
              "yaml.experts-divisible-by-ep");
  CHECK_FAILS(yrun({{"model_parallel.expert_model_parallel_size", "2"}, {"language_model.num_moe_experts", "4"},
                    {"model_parallel.fp16", "true"}}),
              "yaml.expert-parallel-no-fp16");
  REQUIRE_OK(yrun({{"model_parallel.expert_model_parallel_size", "2"}, {"language_model.num_moe_experts", "4"}}));
}

TEST_CASE("yaml-cfg: py 352-353 a key both at the top level and in a section", "[yaml-cfg]") {
  auto r = yrun({{"bf16", "false"}});
  CHECK_FAILS(r, "yaml.section-key-collision");
  CHECK(r.message.find("got multiple values for keyword argument 'bf16'") != std::string::npos);
  CHECK(r.where == line_of(r.file, "  bf16:"));
  // Keys validate_yaml itself puts at the top level collide too.
  CHECK_FAILS(yrun({{"language_model.data_parallel_size", "1"}}), "yaml.section-key-collision");
  // So does a key in both sections (core_transformer_config_from_yaml's own merge of the two would fail the same
  // way, but validate_yaml's flattening meets it first).
  r = yrun({{"model_parallel.init_method", "null"}});
  CHECK_FAILS(r, "yaml.section-key-collision");
  CHECK(r.message.find("`model_parallel.init_method` and `language_model.init_method` are the same key in both") !=
        std::string::npos);
  CHECK(r.message.find("multiple values for keyword argument 'init_method'") != std::string::npos);
  CHECK(r.where == line_of(r.file, "  init_method:"));
}

// ---- the model config: core_transformer_config_from_yaml (yaml_model_config.cpp) ---------------------------------

TEST_CASE("yaml-cfg: core_transformer_config_from_yaml's activation_func", "[yaml-cfg]") {
  auto r = yrun({{"language_model.activation_func", "relu"}});
  CHECK_FAILS(r, "yaml.model-config.activation-func");
  CHECK(r.message.find("`language_model.activation_func` is 'relu'") != std::string::npos);
  CHECK(r.message.find("AssertionError: relu is not a supported activation function") != std::string::npos);
  CHECK(r.where == line_of(r.file, "activation_func:"));
  CHECK(r.flags == std::vector<std::string>{"language_model.activation_func"});
  // Megatron's validate_yaml accepted it: the failure is the init stage's.
  CHECK(r.out.passed(mr::kStageValidateArgs));
  CHECK_FALSE(r.out.passed(mr::kStageInit));
  CHECK(r.out.diagnostics.back().stage == mr::kStageInit);
  CHECK_FAILS(yrun({{"language_model.activation_func", "null"}}), "yaml.model-config.activation-func");
  CHECK_FAILS(yrun({{"language_model.activation_func", "GELU"}}), "yaml.model-config.activation-func");

  // gelu (the base), squaredrelu pass; so does the activation given in model_parallel instead.
  r = yrun({});
  REQUIRE_OK(r);
  CHECK(r.out.passed(mr::kStageInit));
  REQUIRE_OK(yrun({{"language_model.activation_func", "squaredrelu"}}));
  // With a virtual pipeline validate_yaml does not set overlap_p2p_comm, so the file must (a field).
  const Kv vpp = {{"model_parallel.pipeline_model_parallel_size", "4"}, {"language_model.num_layers", "8"},
                  {"num_layers_per_virtual_pipeline_stage", "1"}};
  r = yrun(vpp, {{"WORLD_SIZE", "4"}});
  CHECK_FAILS(r, "yaml.model-config.missing-field");
  CHECK(r.message.find("Missing argument overlap_p2p_comm ") != std::string::npos);
  REQUIRE_OK(yrun(changed(vpp, {{"language_model.overlap_p2p_comm", "false"}}), {{"WORLD_SIZE", "4"}}));

  // swiglu reads bias_swiglu_fusion, which is no TransformerConfig field: AttributeError when absent.
  r = yrun({{"language_model.activation_func", "swiglu"}});
  CHECK_FAILS(r, "yaml.missing-attribute");
  CHECK(r.message.find("no attribute 'bias_swiglu_fusion'") != std::string::npos);
  REQUIRE_OK(yrun({{"language_model.activation_func", "swiglu"}, {"language_model.bias_swiglu_fusion", "true"}}));
  // gelu with add_bias_linear does not read bias_activation_fusion, but core_config_from_args still copies it.
  REQUIRE_OK(yrun({{"language_model.add_bias_linear", "true"}}));
  r = yrun({{"language_model.add_bias_linear", "true"}, {"language_model.bias_activation_fusion", kDelete}});
  CHECK_FAILS(r, "yaml.model-config.missing-field");
}

TEST_CASE("yaml-cfg: core_transformer_config_from_yaml's init methods and its order", "[yaml-cfg]") {
  auto r = yrun({{"language_model.init_method", "xavier_uniform"}});
  CHECK_FAILS(r, "yaml.model-config.xavier-uniform");
  CHECK(r.message.find("unexpected keyword argument 'scaled_init_method'") != std::string::npos);
  CHECK(r.where == line_of(r.file, "  init_method:"));
  CHECK(r.out.passed(mr::kStageValidateArgs));
  // embedding_init_method is a TransformerConfig field: xavier_uniform there is accepted.
  REQUIRE_OK(yrun({{"language_model.embedding_init_method", "xavier_uniform"}}));
  REQUIRE_OK(yrun({{"language_model.init_method", "normal"}}));
  // The two sections are merged: the key may be in model_parallel, and is named there.
  r = yrun({{"language_model.init_method", kDelete}, {"model_parallel.init_method", "xavier_uniform"}});
  CHECK_FAILS(r, "yaml.model-config.xavier-uniform");
  CHECK(r.message.find("`model_parallel.init_method` 'xavier_uniform'") != std::string::npos);
  CHECK(r.where == line_of(r.file, "  init_method:"));

  // Python's order: the fields copied first, then the activation assert, then the init methods.
  r = yrun({{"language_model.init_method", "xavier_uniform"}, {"language_model.activation_func", "relu"}});
  CHECK_FAILS(r, "yaml.model-config.activation-func");
  r = yrun({{"language_model.embedding_init_method", kDelete}, {"language_model.activation_func", "relu"}});
  CHECK_FAILS(r, "yaml.model-config.missing-field");
  // Among missing fields, the first in dataclasses.fields(TransformerConfig) order is named.
  r = yrun({{"language_model.bias_activation_fusion", kDelete}, {"language_model.add_bias_linear", kDelete}});
  CHECK_FAILS(r, "yaml.model-config.missing-field");
  CHECK(r.message.find("Missing argument add_bias_linear ") != std::string::npos);
  // A validate_yaml failure comes first: the model is never built.
  r = yrun({{"language_model.activation_func", "relu"}, {"micro_batch_size", "0"}});
  CHECK_FAILS(r, "yaml.micro-batch-size-positive");
}

TEST_CASE("yaml-cfg: check --yaml-cfg reports the model-config rules", "[yaml-cfg]") {
  std::string file = write_tmp("check-relu.yaml", render(changed(base_kv(), {{"language_model.activation_func", "relu"}})));
  std::string cmd = std::string(MR_BINARY) + " check --yaml-cfg " + file + " 2>&1";
  int status = 0;
  const std::string out = shell_output(cmd, status);
  INFO(out);
  CHECK(status == 1);
  CHECK(out.find(line_of(file, "activation_func:") + ": error[yaml.model-config.activation-func]: ") !=
        std::string::npos);
}

// ---- loading: YAML 1.1 typing, ${VAR}, bad files -----------------------------------------------------------------

TEST_CASE("yaml-cfg: scalars are typed as PyYAML's safe_load types them (YAML 1.1)", "[yaml-cfg]") {
  using mr::Value;
  auto t = [](const std::string& s) { return mr::yaml11_plain_scalar(s, "f:1"); };
  // Checked against PyYAML 6.0 safe_load.
  CHECK(t("1.0e5").as_str() == "1.0e5");  // the exponent needs a sign
  CHECK(t("1.e5").as_str() == "1.e5");
  CHECK(t("1e-5").as_str() == "1e-5");    // and the mantissa a '.'
  CHECK(t("1.5e+3").as_float() == 1500.0);
  CHECK(t("2.5e-4").as_float() == Approx(0.00025));
  CHECK(t(".5").as_float() == 0.5);
  CHECK(t("-.5").as_str() == "-.5");
  CHECK(t("+.5").as_str() == "+.5");
  CHECK(t("08").as_str() == "08");
  CHECK(t("012").as_int() == 10);  // octal
  CHECK(t("0b1_0").as_int() == 2);
  CHECK(t("0x_1F").as_int() == 31);
  CHECK(t("1_000").as_int() == 1000);
  CHECK(t("1__0").as_int() == 10);
  CHECK(t("0_").as_int() == 0);
  CHECK(t("1:30").as_int() == 90);  // sexagesimal
  CHECK(t("190:20:30").as_int() == 685230);
  CHECK(t("1:30.5").as_float() == 90.5);
  CHECK(std::isinf(t("-.inf").as_float()));
  CHECK(std::isnan(t(".NaN").as_float()));
  CHECK(t("yes").as_bool());
  CHECK_FALSE(t("Off").as_bool());
  CHECK(t("~").is_none());
  CHECK(t("").is_none());
  CHECK(t("NULL").is_none());
  CHECK(t("-0").as_int() == 0);
  CHECK(t("nan").as_str() == "nan");
  CHECK_THROWS_AS(t("2024-01-31"), mr::UsageError);  // a date: json.dumps cannot serialise it
  CHECK_THROWS_AS(t("2001-12-14t21:59:43.10-05:00"), mr::UsageError);
  CHECK(t("2024-1-31").as_str() == "2024-1-31");
}

TEST_CASE("yaml-cfg: load_yaml's JSON round trip (keys, duplicates, merges, tags)", "[yaml-cfg]") {
  std::string f = write_tmp("roundtrip.yaml",
                            "base: &b {x: 1, y: 2}\n"
                            "b2: &c {y: 3, z: 4}\n"
                            "m:\n"
                            "  <<: [*b, *c]\n"
                            "  x: 9\n"
                            "  w: 0\n"
                            "1: one\n"
                            "true: yes-key\n"
                            "~: nul\n"
                            "1.5: float-key\n"
                            "dup: first\n"
                            "dup: second\n"
                            "s: !!str 123\n"
                            "f: !!float 2\n"
                            "q: '12'\n"
                            "block: |\n"
                            "  text\n"
                            "list: [1, 'a', {k: v}]\n");
  std::map<std::string, std::string> where;
  mr::Object o = mr::load_yaml_cfg_file(f, {}, &where);
  std::string json = mr::Value::object(o).json();
  // PyYAML + json.dumps: {"base": ..., "m": {"y": 2, "z": 4, "x": 9, "w": 0}, "1": "yes-key", "null": "nul",
  // "1.5": "float-key", ...} (1 and True are the same dict key; the first spelling stays).
  CHECK(json == R"({"base": {"x": 1, "y": 2}, "b2": {"y": 3, "z": 4}, "m": {"y": 2, "z": 4, "x": 9, "w": 0}, )"
                 R"("1": "yes-key", "null": "nul", "1.5": "float-key", "dup": "second", "s": "123", "f": 2.0, )"
                 R"("q": "12", "block": "text\n", "list": [1, "a", {"k": "v"}]})");
  CHECK(where["m.w"] == f + ":6");
  CHECK(where["dup"] == f + ":12");

  auto bad = [](const std::string& name, const std::string& text) {
    std::string file = write_tmp(name, text);
    try {
      mr::load_yaml_cfg_file(file, {});
    } catch (const mr::UsageError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK(bad("tag.yaml", "a: !pathex /x\n").find("unsupported YAML tag !pathex") != std::string::npos);
  CHECK(bad("merge-scalar.yaml", "a:\n  <<: 3\n").find(":2: expected a mapping or list of mappings") !=
        std::string::npos);
  CHECK(bad("unhashable.yaml", "? [a, b]\n: 1\n").find("unhashable") != std::string::npos);
  CHECK(bad("date.yaml", "x: 1\nwhen: 2024-01-31\n").find("date.yaml:2: the timestamp 2024-01-31") !=
        std::string::npos);
  CHECK(bad("int-tag.yaml", "a: !!int abc\n").find("cannot construct !!int") != std::string::npos);
}

TEST_CASE("yaml-cfg: tags are constructed as safe_load does; file errors carry --config's input.* ids", "[yaml-cfg]") {
  // PyYAML 6.0: yaml.safe_load("lr: !!float 1e-4") -> {'lr': 0.0001}; !!null foo -> None; !!int 0o17 -> 15.
  std::map<std::string, std::string> where;
  mr::Object o = mr::load_yaml_cfg_file(
      write_tmp("tags.yaml", "lr: !!float 1e-4\nmin_lr: !!float 1e-5\nload: !!null foo\nn: !!int 0o17\n"), {}, &where);
  CHECK(mr::Value::object(o).json() == R"({"lr": 0.0001, "min_lr": 1e-05, "load": null, "n": 15})");
  auto r = yrun({{"lr", "!!float 1e-4"}, {"min_lr", "!!float 1e-5"}});
  REQUIRE_OK(r);
  CHECK(r["lr"].as_float() == 0.0001);
  CHECK(r["min_lr"].as_float() == 0.00001);

  auto id_of = [](const std::string& name, const std::string& text) {
    std::string file = write_tmp(name, text);
    try {
      mr::load_yaml_cfg_file(file, {});
    } catch (const mr::UsageError& e) {
      return e.id + " at " + e.where.substr(e.where.rfind(':'));
    }
    return std::string("accepted");
  };
  CHECK(id_of("t1.yaml", "x: 1\na: !pathex /x\n") == "input.yaml-tag at :2");
  CHECK(id_of("t2.yaml", "a: !!python/name:os.system x\n") == "input.yaml-tag at :1");
  CHECK(id_of("t3.yaml", "x: 1\n? [a, b]\n: 1\n") == "input.yaml-non-scalar-key at :2");
  CHECK(id_of("t4.yaml", "lr: !!float abc\n") == "input.yaml-tag at :1");  // ValueError in PyYAML too
  CHECK(id_of("t5.yaml", "n: !!int 1.5\n") == "input.yaml-tag at :1");
}

TEST_CASE("yaml-cfg: ${VAR} is expanded as in --config files (Megatron's safe_load does not)", "[yaml-cfg]") {
  Kv kv = changed(base_kv(), {{"micro_batch_size", "${MR_YAML_MBS}"}, {"data_path", "${MR_YAML_DATA}/x"}});
  std::string file = write_tmp("env.yaml", render(kv));
  mr::ConfigOptions opts;
  opts.env = [](const std::string& name) -> std::optional<std::string> {
    if (name == "MR_YAML_MBS") return std::string("4");
    if (name == "MR_YAML_DATA") return std::string("/data");
    return std::nullopt;
  };
  auto r = run_file(file, {}, {}, nullptr, opts);
  REQUIRE_OK(r);
  CHECK(r["micro_batch_size"].as_int() == 4);  // typed after expansion, as --config does
  CHECK(r["global_batch_size"].as_int() == 4);
  CHECK(r["data_path"].as_str() == "/data/x");

  // Unset: a usage error naming file:line, unless --allow-unset-env (kept literally) or a placeholder.
  mr::ConfigOptions strict;
  strict.env = [](const std::string&) -> std::optional<std::string> { return std::nullopt; };
  r = run_file(file, {}, {}, nullptr, strict);
  CHECK(r.exit == 2);
  CHECK(r.message.find(line_of(file, "data_path: ${MR_YAML_DATA}") + ": environment variable MR_YAML_DATA") !=
        std::string::npos);
  mr::ConfigOptions lenient = strict;
  lenient.allow_unset_env = true;
  r = run_file(file, {}, {}, nullptr, lenient);
  CHECK_FAILS(r, "yaml.wrong-type");  // micro_batch_size is the string '${MR_YAML_MBS}'
  CHECK(r.message.find("'${MR_YAML_MBS}'") != std::string::npos);
  mr::ConfigOptions placeholder;
  placeholder.env = [](const std::string& name) -> std::optional<std::string> {
    return name == "MR_YAML_MBS" ? std::optional<std::string>("2") : std::optional<std::string>("/p/" + name);
  };
  r = run_file(file, {}, {}, nullptr, placeholder);
  REQUIRE_OK(r);
  CHECK(r["data_path"].as_str() == "/p/MR_YAML_DATA/x");
}

TEST_CASE("yaml-cfg: unreadable and malformed files are usage errors (exit 2) naming file:line", "[yaml-cfg]") {
  auto r = run_file("/nonexistent/megatron-run/cfg.yaml");
  CHECK(r.exit == 2);
  CHECK(r.message.find("cannot read --yaml-cfg file") != std::string::npos);
  r = run_file(fs::temp_directory_path().string());
  CHECK(r.exit == 2);
  CHECK(r.message.find("directory") != std::string::npos);
  std::string f = write_tmp("syntax.yaml", "a: 1\nb: [1, 2\nc: 3\n");
  r = run_file(f);
  CHECK(r.exit == 2);
  CHECK(r.message.find(f + ":") == 0);
  CHECK(r.message.find("invalid YAML") != std::string::npos);
  f = write_tmp("empty.yaml", "# nothing\n");
  r = run_file(f);
  CHECK(r.exit == 2);
  CHECK(r.message.find("empty") != std::string::npos);
  f = write_tmp("list.yaml", "- a\n- b\n");
  r = run_file(f);
  CHECK(r.exit == 2);
  CHECK(r.message.find("must be a mapping") != std::string::npos);
  // A CLI-combination error comes before the file is read (Megatron raises before load_yaml).
  r = run_file("/nonexistent/megatron-run/cfg.yaml", {"--wide-residual", "2"});
  CHECK_FAILS(r, "yaml.cli-wide-residual");
}

TEST_CASE("yaml-cfg: the validate_yaml sections are in Megatron's order", "[yaml-cfg]") {
  std::vector<std::string> names;
  for (const auto& s : mr::yaml_sections()) names.push_back(s.name);
  CHECK(names.front() == "use-checkpoint-args");
  CHECK(names[1] == "data-path");
  CHECK(names[names.size() - 2] == "flatten");
  CHECK(names.back() == "enable-experimental");
  // A namespace without --yaml-cfg runs validate_args' chain as before.
  mr::Invocation inv;
  inv.env = mr::TargetEnv{};
  auto p = mr::parse_invocation(mr::Schema::megatron(), inv);
  CHECK_FALSE(p.yaml_cfg);
  CHECK_FALSE(mr::yaml_cfg_requested(p.ns));
}

TEST_CASE("yaml-cfg: configs/examples/yaml-cfg-gpt.yaml resolves", "[yaml-cfg]") {
  const std::string example = std::string(MR_SOURCE_DIR) + "/configs/examples/yaml-cfg-gpt.yaml";
  auto r = run_file(example);
  REQUIRE_OK(r);
  // Valid for validate_yaml, but Megatron's core_config_from_args would still stop at a missing TransformerConfig
  // field (account_for_embedding_in_pipeline_split cannot be in a section as well): a warning placed at its line.
  size_t incomplete = 0;
  for (const auto& d : r.out.diagnostics)
    if (d.rule == "yaml.model-config.fields-incomplete") {
      ++incomplete;
      CHECK(d.level == mr::Diagnostic::Level::Warning);
      CHECK(d.stage == mr::kStageInit);  // the model-config step's, like its errors
      CHECK(d.where == line_of(example, "account_for_embedding_in_pipeline_split"));
      CHECK_THAT(d.message, Catch::Contains("Missing argument") && Catch::Contains("no --yaml-cfg file gets past it"));
    }
  CHECK(incomplete == 1);
  CHECK(r.out.passed(mr::kStageInit));
  CHECK(r["data_parallel_size"].as_int() == 1);
  CHECK(r["ffn_hidden_size"].as_int() == 640);  // swiglu, h=256 (py 248)
  CHECK(r["params_dtype"].as_str() == "torch.bfloat16");
  r = run_file(example, {}, {{"WORLD_SIZE", "8"}});
  REQUIRE_OK(r);
  CHECK(r["data_parallel_size"].as_int() == 2);  // 8 // (tp 2 * pp 2)
  CHECK(r["lr"].as_float() == Approx(3e-4));

  // Through the binary: --dry-run --format json prints the nested sections.
  std::string cmd = std::string("WORLD_SIZE=8 ") + MR_BINARY + " --dry-run --yaml-cfg " + example +
                    " --format json 2>/dev/null";
  int status = 0;
  const std::string out = shell_output(cmd, status);
  CHECK(status == 0);
  CHECK(out.find(R"("model_parallel": {"tensor_model_parallel_size": 2, "pipeline_model_parallel_size": 2, )") !=
        std::string::npos);
  CHECK(out.find(R"("data_parallel_size": 2)") != std::string::npos);
}
