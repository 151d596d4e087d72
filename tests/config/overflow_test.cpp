// Numbers at the edges: huge sizes, long digit strings and environment integers are refused with exit 1 or 2 and
// a message naming the flag — never exit 3 ("internal error"), a wrapped count, a hang or a crash. Covers the
// target environment (--target-gpu-arch, versions), `topology` and `params` (rank layout, model plan), WORLD_SIZE
// and the launcher options, and the JSON documents --format json prints when there is no result.
#include <cctype>
#include <limits>
#include <optional>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "binary.h"
#include "config/checked.h"
#include "config/parse/argparse.h"
#include "config/target_env.h"
#include "config/value.h"

namespace {

const std::string kModel =
    " --num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 128 --max-position-embeddings 128"
    " --micro-batch-size 1 --train-iters 10 --lr 0.0001 --mock-data --tokenizer-type NullTokenizer --vocab-size 1024";

bool has(const mrtest::Proc& p, const std::string& s) { return p.all().find(s) != std::string::npos; }

const mr::Value* key(const mr::Value& obj, const std::string& k) {
  for (const auto& [name, v] : obj.as_object())
    if (name == k) return &v;
  return nullptr;
}

}  // namespace

TEST_CASE("checked arithmetic helpers", "[overflow]") {
  CHECK(mr::checked_mul(3037000499, 3037000499).value() == 9223372030926249001);
  CHECK_FALSE(mr::checked_mul(3037000500, 3037000500));
  CHECK_FALSE(mr::checked_mul(INT64_MIN, -1));
  CHECK(mr::checked_add(INT64_MAX - 1, 1).value() == INT64_MAX);
  CHECK_FALSE(mr::checked_add(INT64_MAX, 1));
  CHECK_FALSE(mr::checked_sub(INT64_MIN, 1));
  CHECK(mr::checked_product({2, 3, 7}).value() == 42);
  CHECK_FALSE(mr::checked_product({4294967296, 4294967296}));
}

TEST_CASE("target versions: compared as Python's packaging compares them; what is not a version is refused",
          "[overflow][target]") {
  using mr::compare_versions;
  CHECK(compare_versions("2.20.2", "2.9") == 1);   // numerically, not as text
  CHECK(compare_versions("v2.9.0", "2.9") == 0);   // a leading v, trailing zeros
  CHECK(compare_versions("2.9.0rc1", "2.9.0") == -1);
  CHECK(compare_versions("2.9.0a1", "2.9.0b1") == -1);
  CHECK(compare_versions("2.9.0b2", "2.9.0rc1") == -1);
  CHECK(compare_versions("2.9.0.dev0", "2.9.0a1") == -1);  // a dev release before its pre-releases
  CHECK(compare_versions("2.9.0rc1.dev3", "2.9.0rc1") == -1);
  CHECK(compare_versions("2.9.0.post1", "2.9.0") == 1);
  CHECK(compare_versions("2.9.0+cu12", "2.9.0") == 0);  // the local label does not order here
  CHECK(compare_versions("1!1.0", "2.9") == 1);         // an epoch first
  CHECK(compare_versions("2.9.0-1", "2.9.0.post1") == 0);
  // Spellings of one release (leading zeros, a v, blanks) and its neighbours with suffixes order as packaging's.
  CHECK(compare_versions("02.9.0", " v2.9 ") == 0);
  CHECK(compare_versions("2.10", "2.9.0rc1") == 1);
  CHECK(compare_versions("2.9", "2.9.0.dev1") == 1);
  CHECK(compare_versions("2.9", "2.9.0.post1") == -1);
  CHECK(compare_versions("none", "0.1") == -1);  // not installed: before every version
  CHECK(compare_versions("", "none") == 0);
  for (const char* bad : {"banana", "2.9.x", "2..9", "latest", "2.9.0 beta"}) {
    INFO(bad);
    CHECK_THROWS_WITH(mr::check_version(bad), Catch::Contains("is not a version as Python's packaging reads it"));
  }
  for (const char* good : {"2.9.0", "V2.9", " 2.9.0 ", "2.9.0RC1", "2.9.0.dev0+abc.1", "none", ""}) {
    INFO(good);
    CHECK_NOTHROW(mr::check_version(good));
  }
  // On the command line: refused naming the option (exit 2), not a rule failure saying "target has banana".
  const std::string cfg = " --config " + std::string(MR_SOURCE_DIR) + "/configs/default.yaml";
  auto te = mrtest::megatron_run("--dry-run --qk-clip --target-te-version banana" + cfg);
  CHECK(te.exit == 2);
  CHECK(has(te, "argument --target-te-version: version 'banana' is not a version"));
  CHECK(mrtest::megatron_run("--dry-run --qk-clip --target-te-version v2.9.0" + cfg).exit == 0);
  CHECK(mrtest::megatron_run("--dry-run --qk-clip --target-te-version 2.9.0rc1" + cfg).exit == 1);  // before 2.9.0
  CHECK(mrtest::megatron_run("--dry-run --target-torch-version banana" + cfg).exit == 2);
  CHECK(mrtest::megatron_run("check --target-flashinfer-version x.y" + cfg.substr(9)).exit == 2);
}

namespace {
// The reading of a version that target_env.cpp had before its matcher was written by hand: packaging's
// VERSION_PATTERN as a std::regex, and the order built from its groups. The oracle of the test below.
struct OracleKey {
  long epoch = 0;
  std::vector<long> release;
  long pre_phase = 0, pre = 0, post = -1, dev = -1;
};
std::optional<OracleKey> oracle_key(const std::string& v) {
  static const std::regex pep440(
      R"(\s*v?(?:(\d+)!)?(\d+(?:\.\d+)*)(?:[-_.]?(a|b|c|rc|alpha|beta|pre|preview)[-_.]?(\d+)?)?)"
      R"((?:-(\d+)|[-_.]?(post|rev|r)[-_.]?(\d+)?)?(?:[-_.]?(dev)[-_.]?(\d+)?)?(?:\+[a-z0-9]+(?:[-_.][a-z0-9]+)*)?\s*)",
      std::regex::icase);
  std::smatch m;
  if (!std::regex_match(v, m, pep440)) return std::nullopt;
  OracleKey k;
  if (m[1].matched) k.epoch = std::stol(m[1]);
  std::stringstream ss(m[2].str());
  for (std::string part; std::getline(ss, part, '.');) k.release.push_back(std::stol(part));
  while (!k.release.empty() && k.release.back() == 0) k.release.pop_back();
  if (m[3].matched) {
    const char kind = static_cast<char>(std::tolower(static_cast<unsigned char>(m[3].str()[0])));
    k.pre_phase = kind == 'a' ? -1 : kind == 'b' ? 0 : 1;
    k.pre = m[4].matched ? std::stol(m[4]) : 0;
  } else {
    k.pre_phase = (!m[5].matched && !m[6].matched && m[8].matched) ? -2 : 2;
  }
  if (m[5].matched) k.post = std::stol(m[5]);
  else if (m[6].matched) k.post = m[7].matched ? std::stol(m[7]) : 0;
  if (m[8].matched) k.dev = m[9].matched ? std::stol(m[9]) : 0;
  return k;
}
int oracle_compare(const OracleKey& x, const OracleKey& y) {
  auto dev = [](long d) { return d < 0 ? std::numeric_limits<long>::max() : d; };
  const auto kx = std::tie(x.epoch, x.release, x.pre_phase, x.pre, x.post);
  const auto ky = std::tie(y.epoch, y.release, y.pre_phase, y.pre, y.post);
  if (kx != ky) return kx < ky ? -1 : 1;
  return dev(x.dev) == dev(y.dev) ? 0 : dev(x.dev) < dev(y.dev) ? -1 : 1;
}
}  // namespace

TEST_CASE("target versions: the hand-written PEP 440 matcher reads every text as packaging's pattern does",
          "[overflow]") {
  // Texts built from the pattern's own pieces and a few that are not, in random order: which are versions, and
  // how each pair orders, must be the regex's answer.
  const std::vector<std::string> pieces = {"1", "0", "12", "007", ".", ".", "-", "_", "!", "+", "a", "b", "c", "rc",
                                           "alpha", "beta", "pre", "preview", "post", "rev", "r", "dev", "v", "V",
                                           " ", "RC", "Post", "DEV", "x", "cu12", "Alpha", "\t"};
  std::mt19937 rng(20261207);
  std::vector<std::pair<std::string, OracleKey>> accepted;
  size_t refused = 0;
  // First the corners where a part gives back what it read (the regex's backtracking), then random texts.
  const std::vector<std::string> corners = {
      "1.0a.", "1.0-r1", "1.0alpharev1", "1.0a--1", "1.0pre", "1.0preview", "1.0-post", "1.0.post", "1.0c", "1.0rc.dev",
      "1.0+abc", "1.0+", "1.0+a.", "1!2", "!1", "v", "1.0.dev", "1.0-1", "1.0-", "1.0_", "1.0.", "1..0", "1.0a1-1",
      "1.0a1.post2.dev3+x.y", "1.0r", "1.0rc", "1.0rev", "1.0-dev", "1.0devdev", "1.0a-dev", "1.0postdev", "1.0.0rc1"};
  for (size_t n = 0; n < 30000 + corners.size(); ++n) {
    std::string text;
    if (n < corners.size()) {
      text = corners[n];
    } else {
      const int len = 1 + static_cast<int>(rng() % 9);
      for (int k = 0; k < len; ++k) text += pieces[rng() % pieces.size()];
      if (n % 3 == 0) text = std::to_string(rng() % 20) + "." + std::to_string(rng() % 20) + text;  // mostly versions
    }
    const std::optional<OracleKey> want = oracle_key(text);
    bool ok = true;
    try {
      mr::check_version(text);
    } catch (const mr::UsageError&) {
      ok = false;
    }
    INFO("'" << text << "'");
    REQUIRE(ok == want.has_value());
    if (want) accepted.emplace_back(text, *want);
    else ++refused;
  }
  CHECK(accepted.size() > 2000);  // both kinds well represented
  CHECK(refused > 2000);
  for (size_t i = 0; i + 1 < accepted.size(); ++i) {
    const auto& [a, ka] = accepted[i];
    const auto& [b, kb] = accepted[(i * 7919 + 13) % accepted.size()];
    INFO("'" << a << "' vs '" << b << "'");
    REQUIRE(mr::compare_versions(a, b) == oracle_compare(ka, kb));
  }
}

TEST_CASE("target environment: long digit strings are usage errors or compare as huge, never a crash", "[overflow]") {
  mr::TargetEnv env;
  env.gpu_arch = "sm_99999999999999999999";
  CHECK_THROWS_AS(env.arch_major(), mr::UsageError);
  env.gpu_arch = "sm_1000";  // major 100: four digits still parse
  CHECK(env.arch_major() == 100);
  // A version part too large for a number is a usage error naming the version.
  CHECK_THROWS_WITH(mr::compare_versions("2.99999999999999999999", "2.20"), Catch::Contains("is too large"));
  CHECK_THROWS_AS(mr::compare_versions("99999999999999999999999", "1"), mr::UsageError);
  CHECK(mr::compare_versions("2.999999999", "2.20") == 1);
  CHECK(mr::compare_versions("2.20.2", "2.20.2") == 0);

  const std::string cfg = " --config " + std::string(MR_SOURCE_DIR) + "/configs/default.yaml";
  auto arch = mrtest::megatron_run("--dry-run --target-gpu-arch sm_99999999999999999999" + cfg);
  CHECK(arch.exit == 2);
  CHECK(has(arch, "bad GPU architecture 'sm_99999999999999999999'"));
  auto ok_arch = mrtest::megatron_run("--dry-run --target-gpu-arch sm_100" + cfg);
  CHECK(ok_arch.exit == 0);
  auto file = mrtest::write_file("target.yaml", "gpu_arch: sm_" + std::string(40, '9') + "\n");
  auto from_file = mrtest::megatron_run("--dry-run --target-env " + file + cfg);
  CHECK(from_file.exit == 2);
  CHECK(has(from_file, "bad GPU architecture"));
  auto version = mrtest::megatron_run("--dry-run --target-te-version 2.99999999999999999999" + cfg);
  CHECK(version.exit == 2);
  CHECK(has(version, "is too large"));
}

TEST_CASE("WORLD_SIZE and the world size: refused or handled, never wrapped", "[overflow]") {
  auto huge = mrtest::megatron_run("--dry-run" + kModel + " --micro-batch-size 2", "WORLD_SIZE=9223372036854775807");
  CHECK(huge.exit == 1);
  CHECK(has(huge, "error[sanity.integer-overflow]"));  // 2 x 9223372036854775807, the default global batch size
  auto huge_gbs = mrtest::megatron_run("--dry-run --global-batch-size 9223372036854775807" + kModel,
                                       "WORLD_SIZE=9223372036854775807");
  CHECK(huge_gbs.exit == 1);
  CHECK(has(huge_gbs, "error[sanity.world-size-range]"));
  auto negative = mrtest::megatron_run("--dry-run" + kModel, "WORLD_SIZE=-8");
  CHECK(negative.exit == 1);
  CHECK(has(negative, "the global batch size (-8) must be greater than 0"));  // Megatron's own rule first
  auto too_long = mrtest::megatron_run("--dry-run" + kModel, "WORLD_SIZE=99999999999999999999");
  CHECK(too_long.exit == 2);
  CHECK(has(too_long, "WORLD_SIZE"));
  auto option = mrtest::megatron_run("--dry-run --world-size 9223372036854775807 --global-batch-size 9223372036854775807" + kModel);
  CHECK(option.exit == 1);
  CHECK(has(option, "--world-size"));
  // SLURM's task count (read when no torchrun variables are set).
  auto slurm = mrtest::megatron_run("--dry-run" + kModel, "env -u WORLD_SIZE -u RANK SLURM_PROCID=0 SLURM_STEP_ID=0 SLURM_NTASKS=99999999999999999999");
  CHECK(slurm.exit == 2);
  CHECK(has(slurm, "SLURM_NTASKS"));
  for (const mrtest::Proc* p : {&huge, &huge_gbs, &negative, &too_long, &option, &slurm}) CHECK(mrtest::printable_output(p->all()));
}

TEST_CASE("launcher options: values no job can have are usage errors, in a dry run too", "[overflow][launcher]") {
  const std::string cfg = " --config " + std::string(MR_SOURCE_DIR) + "/configs/default.yaml";
  auto zero = mrtest::megatron_run("--dry-run --nproc-per-node 0" + cfg);
  CHECK(zero.exit == 2);
  CHECK(has(zero, "argument --nproc-per-node/--nproc_per_node: must be at least 1 (got 0)"));
  auto rank = mrtest::megatron_run("--dry-run --nproc-per-node 2 --nnodes 2 --node-rank 5" + cfg);
  CHECK(rank.exit == 2);
  CHECK(has(rank, "argument --node-rank/--node_rank: must be between 0 and --nnodes - 1 = 1 (got 5)"));
  auto nodes = mrtest::megatron_run("--dry-run --nproc-per-node 2 --nnodes 0" + cfg);
  CHECK(nodes.exit == 2);
  CHECK(has(nodes, "argument --nnodes"));
  auto port = mrtest::megatron_run("--dry-run --nproc-per-node 1 --master-port 70000" + cfg);
  CHECK(port.exit == 2);
  CHECK(has(port, "argument --master-port"));
  auto big = mrtest::megatron_run("--dry-run --nproc-per-node 99999999999" + cfg);
  CHECK(big.exit == 2);
  // The neighbour: a valid multi-node dry run.
  auto ok = mrtest::megatron_run("--dry-run --nproc-per-node 1 --nnodes 2 --node-rank 1 --master-port 29500" + cfg +
                                 " --global-batch-size 16");
  CHECK(ok.exit == 0);
}

TEST_CASE("the schedule's iteration counts times the global batch size: refused, never wrapped", "[overflow]") {
  const std::string schedule = " --train-iters 5 --global-batch-size 8 --lr 1e-3";
  for (const char* flag : {"--lr-warmup-iters", "--lr-decay-iters", "--train-iters"}) {
    auto r = mrtest::megatron_run("--dry-run" + kModel + schedule + " " + flag + " 9223372036854775807");
    CHECK(r.exit == 1);
    CHECK(has(r, std::string("error[sanity.integer-overflow]: ") + flag +
                     " x --global-batch-size (the learning-rate schedule counts samples) = 9223372036854775807 x 8"));
    // The schedule command runs the same chain: no table of a wrapped warmup.
    auto s = mrtest::megatron_run("schedule" + kModel + schedule + " " + flag + " 9223372036854775807");
    CHECK(s.exit == 1);
    CHECK(has(s, "error[sanity.integer-overflow]"));
  }
  auto wsd = mrtest::megatron_run("--dry-run" + kModel + schedule +
                                  " --lr-decay-style WSD --lr-wsd-decay-iters 1152921504606846976");
  CHECK(wsd.exit == 1);
  CHECK(has(wsd, "error[sanity.integer-overflow]: --lr-wsd-decay-iters x --global-batch-size"));
}

TEST_CASE("topology: huge world sizes and parallel sizes are errors, not wrapped layouts", "[overflow][topology]") {
  auto max = mrtest::megatron_run("topology --world-size 9223372036854775807" + kModel);
  CHECK(max.exit == 1);
  CHECK(has(max, "error[sanity.world-size-range]"));
  auto wrap = mrtest::megatron_run("topology --world-size 9223372036854775807" + kModel + " --micro-batch-size 2");
  CHECK(wrap.exit == 1);
  CHECK(has(wrap, "error[sanity.integer-overflow]"));
  auto beyond = mrtest::megatron_run("topology --world-size 2097152 --global-batch-size 2097152" + kModel);
  CHECK(beyond.exit == 2);  // megatron-run's limit, not a verdict on the job (input.layout-ranks)
  CHECK(has(beyond, "beyond the 1048576 ranks megatron-run lays out"));
  CHECK(has(beyond, "a limit of megatron-run, not of Megatron"));
  CHECK_FALSE(has(beyond, "Megatron would fail"));
  auto tp = mrtest::megatron_run("topology --world-size 8 --tensor-model-parallel-size 4294967296 --pipeline-model-parallel-size 4294967296" +
                                 kModel);
  CHECK(tp.exit == 1);
  auto json = mrtest::megatron_run("topology --format json --world-size 2097152 --global-batch-size 2097152" + kModel);
  CHECK(json.exit == 2);
  mr::Value doc = mr::Value::parse_json(json.out);  // one JSON document on stdout, even for a failure
  CHECK_FALSE(key(doc, "ok")->as_bool());
  const mr::Value& d = key(doc, "diagnostics")->as_list().at(0);
  CHECK(key(d, "rule")->as_str() == "input.layout-ranks");
  CHECK(key(d, "stage")->as_str() == "input");  // an input.* refusal's stage, not "parse"
  auto ok = mrtest::megatron_run("topology --format json --world-size 8 --global-batch-size 8" + kModel);
  CHECK(ok.exit == 0);
  CHECK(key(mr::Value::parse_json(ok.out), "world_size")->as_int() == 8);
}

TEST_CASE("params: huge model sizes are errors naming the flag, never wrapped counts", "[overflow][params]") {
  const std::string p = "params --world-size 1 --global-batch-size 8" + kModel;
  auto layers = mrtest::megatron_run(p + " --num-layers 9223372036854775807");
  CHECK(layers.exit == 1);
  CHECK(has(layers, "--num-layers 9223372036854775807 is more than the 100000 layers the model plan handles"));
  auto hidden = mrtest::megatron_run(p + " --hidden-size 4294967296");
  CHECK(hidden.exit == 1);
  CHECK(has(hidden, "does not fit in a 64-bit integer"));
  auto experts = mrtest::megatron_run(p + " --num-experts 4294967296 --moe-router-topk 1 --moe-router-pre-softmax");
  CHECK(experts.exit == 1);
  CHECK(has(experts, "--num-experts 4294967296"));
  auto vocab = mrtest::megatron_run(p + " --vocab-size 9223372036854775807");
  CHECK(vocab.exit == 1);
  CHECK(has(vocab, "--vocab-size"));
  auto ffn = mrtest::megatron_run(p + " --ffn-hidden-size 9223372036854775807");
  CHECK(ffn.exit == 1);
  CHECK(has(ffn, "does not fit in a 64-bit integer"));
  auto kv = mrtest::megatron_run(p + " --kv-channels 9223372036854775807");
  CHECK(kv.exit == 1);
  auto first = mrtest::megatron_run("params --world-size 2 --global-batch-size 8" + kModel +
                                    " --pipeline-model-parallel-size 2 --decoder-first-pipeline-num-layers 9223372036854775807");
  CHECK(first.exit == 1);
  CHECK(has(first, "--decoder-first-pipeline-num-layers 9223372036854775807 ask for more than the 2 layers"));
  for (const mrtest::Proc* r : {&layers, &hidden, &experts, &vocab, &ffn, &kv, &first}) {
    CHECK(mrtest::printable_output(r->all()));
    CHECK(r->out.find('-') == std::string::npos);  // no (wrapped, negative) count printed
  }
  auto json = mrtest::megatron_run("params --format json --world-size 1 --global-batch-size 8" + kModel +
                                   " --hidden-size 4294967296");
  CHECK(json.exit == 1);
  mr::Value doc = mr::Value::parse_json(json.out);
  CHECK(key(key(doc, "diagnostics")->as_list().at(0), "stage")->as_str() == "plan");
  // The neighbour: a large but representable model.
  auto ok = mrtest::megatron_run(p + " --hidden-size 65536 --num-attention-heads 64 --num-layers 4");
  CHECK(ok.exit == 0);
  CHECK(has(ok, "parameters in the model"));
}

TEST_CASE("--format json: stdout is one JSON document for results, failed rules and usage errors", "[overflow][json]") {
  const std::string cfg = " --config " + std::string(MR_SOURCE_DIR) + "/configs/default.yaml";
  auto failed = mrtest::megatron_run("--dry-run --format json" + cfg + " --adam-beta2 5");
  CHECK(failed.exit == 1);
  mr::Value doc = mr::Value::parse_json(failed.out);
  CHECK(key(doc, "exit")->as_int() == 1);
  const mr::Value& d = key(doc, "diagnostics")->as_list().at(0);
  CHECK(key(d, "rule")->as_str() == "sanity.adam-betas-range");
  CHECK(key(d, "stage")->as_str() == "sanity");
  CHECK(failed.err.find("error[sanity.adam-betas-range]") != std::string::npos);  // text on stderr too
  auto megatron = mrtest::megatron_run("--dry-run --format json" + cfg + " --micro-batch-size 0");
  CHECK(key(key(mr::Value::parse_json(megatron.out), "diagnostics")->as_list().at(0), "stage")->as_str() ==
        "validate_args");
  auto usage = mrtest::megatron_run("--dry-run --format json" + cfg + " --num-layers four");
  CHECK(usage.exit == 2);
  mr::Value u = mr::Value::parse_json(usage.out);
  const mr::Value& ud = key(u, "diagnostics")->as_list().at(0);
  CHECK(key(ud, "rule")->as_str() == "parse.invalid-value");
  CHECK(key(ud, "stage")->as_str() == "parse");
  auto usage_eq = mrtest::megatron_run("--dry-run --format=json --nproc-per-node 0" + cfg);
  CHECK(usage_eq.exit == 2);
  CHECK_NOTHROW(mr::Value::parse_json(usage_eq.out));
  // `check --format json`: each diagnostic with its stage.
  const std::string bad = mrtest::write_file("beta.yaml", "adam_beta2: 5\n");
  auto check = mrtest::megatron_run("check --format json --world-size 1" + cfg + " " + bad);
  CHECK(check.exit == 1);
  mr::Value list = mr::Value::parse_json(check.out);
  REQUIRE(list.as_list().size() == 1);  // --config is the base of every file checked
  const mr::Value& errs = *key(list.as_list()[0], "errors");
  bool sanity = false;
  for (const mr::Value& e : errs.as_list())
    sanity = sanity || (key(e, "stage")->as_str() == "sanity" && key(e, "rule")->as_str() == "sanity.adam-betas-range");
  CHECK(sanity);
}

TEST_CASE("--yaml-cfg: the validate_yaml chain's sizes are checked too", "[overflow][yaml-cfg]") {
  const std::string yaml = R"(language_model:
  num_layers: 4
  hidden_size: 256
  num_attention_heads: 8
  ffn_hidden_size: null
  kv_channels: null
  activation_func: gelu
  add_bias_linear: false
  bias_activation_fusion: false
  init_method: null
  embedding_init_method: null
  fp32_residual_connection: false
  moe_grouped_gemm: false
  distribute_saved_activations: false
  recompute_granularity: null
  num_moe_experts: null
model_parallel:
  tensor_model_parallel_size: 1
  pipeline_model_parallel_size: 1
  context_parallel_size: 1
  expert_model_parallel_size: 1
  tp_comm_overlap: false
  fp16: false
  bf16: false
  params_dtype: null
disable_msc_deprecated: false
enable_msc: false
use_checkpoint_args: false
enable_experimental: false
data_path: null
account_for_embedding_in_pipeline_split: false
micro_batch_size: 2
global_batch_size: null
step_batch_size_schedule: null
num_layers_per_virtual_pipeline_stage: null
overlap_param_gather: false
dataloader_type: null
train_iters: 10
train_samples: null
lr_decay_samples: null
lr_warmup_samples: 0
lr_warmup_fraction: null
encoder_num_layers: null
seq_length: 128
encoder_seq_length: null
max_position_embeddings: 128
decoder_seq_length: null
lr: 1.0e-4
min_lr: 0.0
save: null
fp16_lm_cross_entropy: false
weight_decay: 0.01
weight_decay_incr_style: constant
start_weight_decay: null
end_weight_decay: null
)";
  const std::string ok = mrtest::write_file("ycfg.yaml", yaml);
  CHECK(mrtest::megatron_run("--dry-run --yaml-cfg " + ok, "WORLD_SIZE=1").exit == 0);
  auto world = mrtest::megatron_run("--dry-run --yaml-cfg " + ok, "WORLD_SIZE=9223372036854775807");
  CHECK(world.exit == 1);
  CHECK(has(world, "error[sanity.integer-overflow]: micro_batch_size x data_parallel_size"));
  std::string big = yaml;
  big.replace(big.find("hidden_size: 256"), 16, "hidden_size: 4611686018427387904");
  auto hidden = mrtest::megatron_run("--dry-run --yaml-cfg " + mrtest::write_file("ycfg-big.yaml", big), "WORLD_SIZE=1");
  CHECK(hidden.exit == 1);
  CHECK(has(hidden, "language_model.hidden_size"));
}
