// Part A of the validation chain (seed arguments.py 419-625 of validate_args): every rule triggered by a minimal
// config next to a neighbour that passes it, and the derived values worked out by hand from the seed.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "config/validate/part_a_sections.h"
#include "support.h"

namespace {

using mrtest::run;
using mrtest::with;
using Env = std::map<std::string, std::string>;

const Env kWorld1 = {{"WORLD_SIZE", "1"}};
const Env kWorld8 = {{"WORLD_SIZE", "8"}};

bool fails_with(const mrtest::Run& r, const std::string& rule) { return r.exit == 1 && r.rule == rule; }

// The rule ids part A owns start with one of these.
bool part_a_rule(const std::string& id) {
  for (const char* p : {"ckpt-convert.", "ckpt-nonpersistent.", "heterogeneous.", "parallel.", "deprecated.",
                        "cuda-graph-modules.", "input."})
    if (id.rfind(p, 0) == 0) return true;
  return false;
}
// Part A accepted the config (later parts may still reject it for their own reasons).
bool passes_part_a(const mrtest::Run& r) { return r.exit == 0 || (r.exit == 1 && !part_a_rule(r.rule)); }

// Runs one part-A section directly on a parsed (not yet validated) namespace, after `edit` changed it: for
// inputs the command line cannot produce.
mrtest::Run direct(const std::function<void(mr::Context&)>& section, const std::vector<std::string>& args,
                   const std::function<void(mr::Namespace&)>& edit = {}) {
  return mrtest::run_body(args, section, {}, nullptr, edit);
}

mr::Value str_list(std::vector<std::string> items) {
  mr::List l;
  for (auto& s : items) l.emplace_back(std::move(s));
  return mr::Value(std::move(l));
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// seed 421-436: checkpoint conversion prerequisites, non-persistent checkpoint kind.

TEST_CASE("part A: --ckpt-convert-format needs --ckpt-convert-save and --load", "[part-a]") {
  // seed arguments.py:423 validate_args
  auto r = run(with({"--ckpt-convert-format", "torch_dist", "--load", "/ckpt"}), kWorld1);
  CHECK(fails_with(r, "ckpt-convert.requires-save"));
  // seed arguments.py:424 validate_args
  r = run(with({"--ckpt-convert-format", "torch_dist", "--ckpt-convert-save", "/out"}), kWorld1);
  CHECK(fails_with(r, "ckpt-convert.requires-load"));
  // Both given: passes, and a missing checkpoint becomes fatal (seed arguments.py:425).
  r = run(with({"--ckpt-convert-format", "torch_dist", "--ckpt-convert-save", "/out", "--load", "/ckpt"}), kWorld1);
  CHECK(passes_part_a(r));
  CHECK(r["exit_on_missing_checkpoint"] == mr::Value(true));
  // Without conversion the flag keeps its default (false).
  r = run(mrtest::base_args(), kWorld1);
  CHECK(r.exit == 0);
  CHECK(r["exit_on_missing_checkpoint"] == mr::Value(false));
}

TEST_CASE("part A: --non-persistent-ckpt-type must be global or local", "[part-a]") {
  // seed arguments.py:428 validate_args
  CHECK(fails_with(run(with({"--non-persistent-ckpt-type", "in_memory"}), kWorld1),
                   "ckpt-nonpersistent.supported-type"));
  CHECK(passes_part_a(run(with({"--non-persistent-ckpt-type", "global"}), kWorld1)));
  // local: nvidia_resiliency_ext is assumed installed (seed 430-436), so part A has nothing against it.
  CHECK(passes_part_a(run(with({"--non-persistent-ckpt-type", "local"}), kWorld1)));
}

TEST_CASE("part A: use_dist_ckpt follows --ckpt-format", "[part-a]") {
  // seed arguments.py:441 -> update_use_dist_ckpt: use_dist_ckpt = ckpt_format != "torch"
  struct Case {
    std::vector<std::string> extra;
    bool want;
  };
  for (const Case& c : {Case{{}, true}, Case{{"--ckpt-format", "torch"}, false},
                        Case{{"--ckpt-format", "torch_dist"}, true}}) {
    auto r = run(with(c.extra), kWorld1);
    CHECK(passes_part_a(r));
    CHECK(r["use_dist_ckpt"] == mr::Value(c.want));
  }
}

// ---------------------------------------------------------------------------------------------------------------
// seed 195-267: validate_model_config_args_from_heterogeneous_config.

namespace {
// A config that agrees with base_args + kHeteroFlags: 4 heads, KV groups of 2 -> 2 query groups.
const char* const kHeteroJson =
    R"({"hidden_act": "silu", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
        "tie_word_embeddings": false, "rope_theta": 10000, "rope_scaling": {"factor": 8.0},
        "block_configs": [{"attention": {"n_heads_in_group": 2}}, {"attention": {"n_heads_in_group": null}}]})";
const std::vector<std::string> kHeteroFlags = {
    "--swiglu", "--normalization", "RMSNorm", "--group-query-attention", "--position-embedding-type", "rope",
    "--use-rope-scaling", "--use-rotary-position-embeddings", "--untie-embeddings-and-output-weights",
    "--rotary-base", "10000", "--rope-scaling-factor", "8.0", "--num-query-groups", "2"};

std::vector<std::string> hetero(const std::string& json, std::vector<std::string> extra = {}) {
  auto a = with(kHeteroFlags);
  a.push_back("--heterogeneous-layers-config-encoded-json");
  a.push_back(json);
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}
std::string replace(std::string s, const std::string& from, const std::string& to) {
  auto at = s.find(from);
  REQUIRE(at != std::string::npos);
  return s.replace(at, from.size(), to);
}
}  // namespace

TEST_CASE("part A: heterogeneous config that agrees with the flags passes", "[part-a]") {
  // seed arguments.py:240-255: every implied argument equals the command line.
  auto r = run(hetero(kHeteroJson), kWorld1);
  CHECK(passes_part_a(r));
  // Python equality: rope_theta 10000.0 (float) equals --rotary-base 10000 (int).
  r = run(hetero(replace(kHeteroJson, "\"rope_theta\": 10000", "\"rope_theta\": 10000.0")), kWorld1);
  CHECK(passes_part_a(r));
  // Without any heterogeneous config the function returns at once (seed arguments.py:217-221).
  r = run(mrtest::base_args(), kWorld1);
  CHECK(r.exit == 0);
  CHECK(r["heterogeneous_layers_config_encoded_json"].is_none());
}

TEST_CASE("part A: heterogeneous config is read from --heterogeneous-layers-config-path", "[part-a]") {
  std::string path = (std::filesystem::temp_directory_path() / "mr_part_a_hetero_test.json").string();
  {
    std::ofstream out(path);
    out << kHeteroJson;
  }
  auto a = with(kHeteroFlags);
  a.insert(a.end(), {"--heterogeneous-layers-config-path", path});
  auto r = run(a, kWorld1);
  CHECK(passes_part_a(r));
  // seed arguments.py:224: the file's text is stored as the encoded JSON.
  CHECK(r["heterogeneous_layers_config_encoded_json"] == mr::Value(std::string(kHeteroJson)));
  std::remove(path.c_str());

  // A missing file fails (Path.read_text raises).
  a = with(kHeteroFlags);
  a.insert(a.end(), {"--heterogeneous-layers-config-path", path + ".missing"});
  CHECK(fails_with(run(a, kWorld1), "heterogeneous.config-unreadable"));
}

TEST_CASE("part A: heterogeneous config must be well-formed JSON", "[part-a]") {
  // seed arguments.py:228 (json.loads) and the attribute/key look-ups of seed 230-255.
  CHECK(fails_with(run(hetero("{not json"), kWorld1), "heterogeneous.config-unreadable"));
  CHECK(fails_with(run(hetero("[1, 2]"), kWorld1), "heterogeneous.config-unreadable"));
  CHECK(fails_with(run(hetero(replace(kHeteroJson, "\"rope_theta\": 10000,", "")), kWorld1),
                   "heterogeneous.config-unreadable"));
  CHECK(fails_with(run(hetero(replace(kHeteroJson, "{\"factor\": 8.0}", "null")), kWorld1),
                   "heterogeneous.config-unreadable"));
  // No block sets n_heads_in_group: n_kv_heads_in_group[0] raises IndexError (seed arguments.py:254).
  CHECK(fails_with(run(hetero(replace(kHeteroJson, "\"n_heads_in_group\": 2", "\"n_heads_in_group\": null")),
                       kWorld1),
                   "heterogeneous.config-unreadable"));
  // n_heads_in_group 0: ZeroDivisionError.
  CHECK(fails_with(run(hetero(replace(kHeteroJson, "\"n_heads_in_group\": 2", "\"n_heads_in_group\": 0")),
                       kWorld1),
                   "heterogeneous.config-unreadable"));
}

TEST_CASE("part A: heterogeneous config must use silu", "[part-a]") {
  // seed arguments.py:230 validate_model_config_args_from_heterogeneous_config
  auto r = run(hetero(replace(kHeteroJson, "\"silu\"", "\"gelu\"")), kWorld1);
  CHECK(fails_with(r, "heterogeneous.hidden-act-silu"));
  CHECK(passes_part_a(run(hetero(kHeteroJson), kWorld1)));
}

TEST_CASE("part A: heterogeneous config blocks agree on n_heads_in_group", "[part-a]") {
  // seed arguments.py:234-238
  std::string mixed = replace(kHeteroJson, "\"n_heads_in_group\": null", "\"n_heads_in_group\": 4");
  CHECK(fails_with(run(hetero(mixed), kWorld1), "heterogeneous.uniform-heads-in-group"));
  std::string same = replace(kHeteroJson, "\"n_heads_in_group\": null", "\"n_heads_in_group\": 2");
  CHECK(passes_part_a(run(hetero(same), kWorld1)));
}

TEST_CASE("part A: flags must agree with the heterogeneous config", "[part-a]") {
  // seed arguments.py:257-267: any differing argument is reported.
  auto r = run(hetero(replace(kHeteroJson, "\"num_hidden_layers\": 2", "\"num_hidden_layers\": 4")), kWorld1);
  CHECK(fails_with(r, "heterogeneous.args-match-config"));
  CHECK(r.message.find("--num-layers") != std::string::npos);
  // tie_word_embeddings true implies tied embeddings, but --untie-embeddings-and-output-weights is given.
  r = run(hetero(replace(kHeteroJson, "\"tie_word_embeddings\": false", "\"tie_word_embeddings\": true")), kWorld1);
  CHECK(fails_with(r, "heterogeneous.args-match-config"));
  // num_query_groups = num_attention_heads // n_heads_in_group = 4 // 2 = 2; --num-query-groups 1 disagrees.
  r = run(hetero(kHeteroJson, {"--num-query-groups", "1"}), kWorld1);
  CHECK(fails_with(r, "heterogeneous.args-match-config"));
  // Missing --swiglu (default False) disagrees with the implied True.
  auto a = hetero(kHeteroJson);
  a.erase(std::find(a.begin(), a.end(), "--swiglu"));
  CHECK(fails_with(run(a, kWorld1), "heterogeneous.args-match-config"));
  CHECK(passes_part_a(run(hetero(kHeteroJson), kWorld1)));
}

// ---------------------------------------------------------------------------------------------------------------
// seed 443-522: GTP shards, model size, data- and batch-parallel sizes, CP checks.

TEST_CASE("part A: parallel sizes derived from world size", "[part-a]") {
  struct Case {
    const char* why;
    std::string world;
    std::vector<std::string> extra;
    int64_t weight_shards, gtp, seq_shards, gtp_seq, cp, dp, bp, tpp, etp;
  };
  const std::vector<Case> cases = {
      // seed arguments.py:449-522: defaults, world 1 -> everything 1.
      {"defaults", "1", {}, 1, 1, 1, 1, 1, 1, 1, 1, 1},
      // seed arguments.py:491: dp = 8 // (2*1*1*1) = 4; seq shards = 1 without --sequence-parallel (seed 456).
      {"tp2", "8", {"--tensor-model-parallel-size", "2"}, 2, 1, 1, 1, 1, 4, 4, 1, 2},
      // seed arguments.py:456: with --sequence-parallel TP counts as sequence shards -> 2, factor 1.
      {"tp2 sp", "8", {"--tensor-model-parallel-size", "2", "--sequence-parallel"}, 2, 1, 2, 1, 1, 4, 4, 1, 2},
      // seed arguments.py:490-492: pp 2, cp 2 -> dp = bp = 8 // 4 = 2; transformer pp = 2.
      {"pp2 cp2", "8", {"--pipeline-model-parallel-size", "2", "--context-parallel-size", "2"},
       1, 1, 1, 1, 2, 2, 2, 2, 1},
      // seed arguments.py:449 + 464: weight shards 4 over tp 2 -> gtp 2; total = 2*1*1*2 = 4; dp = 2;
      // bp = 8 // (2*1*1) = 4 (GTP ranks take separate samples).
      {"gtp2", "8", {"--tensor-model-parallel-size", "2", "--tensor-parallel-num-weight-shards", "4"},
       4, 2, 1, 1, 1, 2, 4, 1, 2},
      // seed arguments.py:456-472: sequence shards 2 over sp size 1 -> factor 2 divides gtp 2; CP becomes 1*2;
      // total = 1*1*1*2 = 2 -> dp 4; bp = 8 // (1*1*2) = 4.
      {"gtp2 seq2", "8", {"--tensor-parallel-num-weight-shards", "2", "--tensor-parallel-num-sequence-shards", "2"},
       2, 2, 2, 2, 2, 4, 4, 1, 1},
      // tp 2 + sp, weight shards 8 -> gtp 4; sequence shards 4 -> factor 2; total = 2*1*1*4 = 8 -> dp 1;
      // CP 2; bp = 8 // (2*1*2) = 2.
      {"tp2 sp gtp4 seq4", "8",
       {"--tensor-model-parallel-size", "2", "--sequence-parallel", "--tensor-parallel-num-weight-shards", "8",
        "--tensor-parallel-num-sequence-shards", "4"},
       8, 4, 4, 2, 2, 1, 2, 1, 2},
      // seed arguments.py:521-522: an explicit --expert-tensor-parallel-size is kept.
      {"etp kept", "8", {"--tensor-model-parallel-size", "2", "--expert-tensor-parallel-size", "1"},
       2, 1, 1, 1, 1, 4, 4, 1, 1},
  };
  for (const Case& c : cases) {
    INFO(c.why);
    auto r = run(with(c.extra), {{"WORLD_SIZE", c.world}});
    CHECK(passes_part_a(r));
    CHECK(r["tensor_parallel_num_weight_shards"].as_int() == c.weight_shards);
    CHECK(r["gtp_weight_remat_size"].as_int() == c.gtp);
    CHECK(r["tensor_parallel_num_sequence_shards"].as_int() == c.seq_shards);
    CHECK(r["gtp_remat_num_sequence_shards"].as_int() == c.gtp_seq);
    CHECK(r["context_parallel_size"].as_int() == c.cp);
    CHECK(r["data_parallel_size"].as_int() == c.dp);
    CHECK(r["batch_parallel_size"].as_int() == c.bp);
    CHECK(r["transformer_pipeline_model_parallel_size"].as_int() == c.tpp);
    CHECK(r["expert_tensor_parallel_size"].as_int() == c.etp);
  }
}

TEST_CASE("part A: --tensor-parallel-num-weight-shards is a multiple of TP, at least TP", "[part-a]") {
  // seed arguments.py:449 -> resolve_tensor_parallel_weight_shards
  CHECK(fails_with(run(with({"--tensor-model-parallel-size", "2", "--tensor-parallel-num-weight-shards", "1"}),
                       kWorld8),
                   "parallel.weight-shards-at-least-tp"));
  CHECK(fails_with(run(with({"--tensor-model-parallel-size", "2", "--tensor-parallel-num-weight-shards", "3"}),
                       kWorld8),
                   "parallel.weight-shards-divisible-by-tp"));
  CHECK(passes_part_a(run(with({"--tensor-model-parallel-size", "2", "--tensor-parallel-num-weight-shards", "2"}),
                          kWorld8)));
}

TEST_CASE("part A: --tensor-parallel-num-sequence-shards rules", "[part-a]") {
  // seed arguments.py:456 -> resolve_tensor_parallel_sequence_shards (stand-in: see model_parallel_sizes.cpp)
  // 3 is not a multiple of the sequence-parallel size 2.
  CHECK(fails_with(run(with({"--tensor-model-parallel-size", "2", "--sequence-parallel",
                             "--tensor-parallel-num-sequence-shards", "3"}),
                       kWorld8),
                   "parallel.sequence-shards-divisible-by-sp"));
  // 1 is below the sequence-parallel size 2.
  CHECK(fails_with(run(with({"--tensor-model-parallel-size", "2", "--sequence-parallel",
                             "--tensor-parallel-num-sequence-shards", "1"}),
                       kWorld8),
                   "parallel.sequence-shards-divisible-by-sp"));
  // TP 2 without --sequence-parallel: sp size 1, factor 2 > 1 needs sequence parallelism.
  CHECK(fails_with(run(with({"--tensor-model-parallel-size", "2", "--tensor-parallel-num-weight-shards", "4",
                             "--tensor-parallel-num-sequence-shards", "2"}),
                       kWorld8),
                   "parallel.sequence-shards-need-sequence-parallel"));
  // Factor 2 with GTP weight-remat size 1 (no weight shards): 1 % 2 != 0.
  CHECK(fails_with(run(with({"--tensor-parallel-num-sequence-shards", "2"}), kWorld8),
                   "parallel.sequence-shards-divide-weight-remat"));
  // Neighbour: the same with --sequence-parallel and enough weight shards passes.
  CHECK(passes_part_a(run(with({"--tensor-model-parallel-size", "2", "--sequence-parallel",
                                "--tensor-parallel-num-weight-shards", "4", "--tensor-parallel-num-sequence-shards",
                                "4"}),
                          kWorld8)));
}

TEST_CASE("part A: GTP sequence sharding restrictions", "[part-a]") {
  // seed arguments.py:473-479: only when the sequence-shard factor is above 1.
  const std::vector<std::string> gtp_seq = {"--tensor-parallel-num-weight-shards", "2",
                                            "--tensor-parallel-num-sequence-shards", "2"};
  auto add = [&](std::vector<std::string> extra) {
    auto a = gtp_seq;
    a.insert(a.end(), extra.begin(), extra.end());
    return with(a);
  };
  CHECK(fails_with(run(add({"--ckpt-format", "torch"}), kWorld8), "parallel.gtp-sequence-needs-torch-dist"));
  CHECK(fails_with(run(add({"--use-torch-fsdp2"}), kWorld8), "parallel.gtp-sequence-no-fsdp"));
  CHECK(fails_with(run(add({"--use-megatron-fsdp"}), kWorld8), "parallel.gtp-sequence-no-fsdp"));
  CHECK(fails_with(run(add({"--use-tp-pp-dp-mapping"}), kWorld8), "parallel.gtp-sequence-no-tp-pp-dp-mapping"));
  CHECK(passes_part_a(run(add({}), kWorld8)));
  // Without sequence shards the same flags are none of part A's business here.
  CHECK(passes_part_a(run(with({"--tensor-parallel-num-weight-shards", "2", "--use-tp-pp-dp-mapping"}), kWorld8)));
}

TEST_CASE("part A: world size must be a multiple of the total model size", "[part-a]") {
  // seed arguments.py:482 validate_args
  auto r = run(with({"--tensor-model-parallel-size", "3"}), kWorld8);
  CHECK(fails_with(r, "parallel.world-size-divisible"));
  // The GTP weight-remat size counts: tp 2 x gtp 8 = 16 does not divide 8.
  r = run(with({"--tensor-model-parallel-size", "2", "--tensor-parallel-num-weight-shards", "16"}), kWorld8);
  CHECK(fails_with(r, "parallel.world-size-divisible"));
  // TP 0: Python's modulo by zero raises.
  CHECK(fails_with(run(with({"--tensor-model-parallel-size", "0"}), kWorld8), "parallel.world-size-divisible"));
  r = run(with({"--tensor-model-parallel-size", "2"}), kWorld8);
  CHECK(passes_part_a(r));
  CHECK(r["data_parallel_size"].as_int() == 4);
}

TEST_CASE("part A: --attention-backend local needs --spec local", "[part-a]") {
  // seed arguments.py:486-487 validate_args
  CHECK(fails_with(run(with({"--attention-backend", "local"}), kWorld1),
                   "parallel.local-attention-backend-needs-local-spec"));
  CHECK(fails_with(run(with({"--attention-backend", "local", "--spec", "my.module", "fn"}), kWorld1),
                   "parallel.local-attention-backend-needs-local-spec"));
  CHECK(passes_part_a(run(with({"--attention-backend", "local", "--spec", "local"}), kWorld1)));
  CHECK(passes_part_a(run(with({"--attention-backend", "flash"}), kWorld1)));
}

TEST_CASE("part A: hierarchical context-parallel sizes", "[part-a]") {
  // seed arguments.py:514-516: product must equal the CP size.
  CHECK(fails_with(run(with({"--context-parallel-size", "4", "--hierarchical-context-parallel-sizes", "2", "3"}),
                       kWorld8),
                   "parallel.hierarchical-cp-product"));
  CHECK(passes_part_a(run(with({"--context-parallel-size", "4", "--hierarchical-context-parallel-sizes", "2", "2"}),
                          kWorld8)));
  // seed arguments.py:517-519: a2a+p2p needs the hierarchy.
  CHECK(fails_with(run(with({"--context-parallel-size", "4", "--cp-comm-type", "a2a+p2p"}), kWorld8),
                   "parallel.a2a-p2p-needs-hierarchical-cp"));
  CHECK(passes_part_a(run(with({"--context-parallel-size", "4", "--cp-comm-type", "a2a+p2p",
                                "--hierarchical-context-parallel-sizes", "2", "2"}),
                          kWorld8)));
}

// ---------------------------------------------------------------------------------------------------------------
// seed 524-575: deprecated flags.

TEST_CASE("part A: removed flags are rejected and dropped", "[part-a]") {
  // seed arguments.py:525, 528, 531, 535 validate_args
  CHECK(fails_with(run(with({"--batch-size", "4"}), kWorld1), "deprecated.batch-size"));
  CHECK(fails_with(run(with({"--warmup", "10"}), kWorld1), "deprecated.warmup"));
  CHECK(fails_with(run(with({"--model-parallel-size", "1"}), kWorld1), "deprecated.model-parallel-size"));
  CHECK(fails_with(run(with({"--checkpoint-activations"}), kWorld1), "deprecated.checkpoint-activations"));
  // Neighbour: none given -> the attributes are deleted (seed 527, 530, 533, 539, 543, 575).
  auto r = run(mrtest::base_args(), kWorld1);
  CHECK(r.exit == 0);
  for (const char* gone : {"batch_size", "warmup", "model_parallel_size", "checkpoint_activations",
                           "recompute_activations", "cuda_graph_scope_deprecated"}) {
    INFO(gone);
    CHECK_FALSE(r.has(gone));
  }
  // Kept when not set: enable_cuda_graph / external_cuda_graph are deleted only when used (seed 558, 565).
  CHECK(r["enable_cuda_graph"] == mr::Value(false));
  CHECK(r["external_cuda_graph"] == mr::Value(false));
}

TEST_CASE("part A: --recompute-activations means selective recompute", "[part-a]") {
  // seed arguments.py:541-543
  auto r = run(with({"--recompute-activations"}), kWorld1);
  CHECK(passes_part_a(r));
  CHECK(r["recompute_granularity"] == mr::Value("selective"));
  CHECK_FALSE(r.has("recompute_activations"));
  r = run(mrtest::base_args(), kWorld1);
  CHECK(r["recompute_granularity"].is_none());
}

TEST_CASE("part A: --enable-cuda-graph / --external-cuda-graph", "[part-a]") {
  // seed arguments.py:546: not with --cuda-graph-impl.
  CHECK(fails_with(run(with({"--enable-cuda-graph", "--cuda-graph-impl", "local"}), kWorld1),
                   "deprecated.cuda-graph-flag-with-impl"));
  CHECK(fails_with(run(with({"--external-cuda-graph", "--cuda-graph-impl", "transformer_engine"}), kWorld1),
                   "deprecated.cuda-graph-flag-with-impl"));
  // seed arguments.py:549: not both.
  CHECK(fails_with(run(with({"--enable-cuda-graph", "--external-cuda-graph"}), kWorld1),
                   "deprecated.cuda-graph-flags-exclusive"));
  // seed arguments.py:553-565: translated and deleted; --cuda-graph-impl none given explicitly is fine.
  auto r = run(with({"--enable-cuda-graph", "--cuda-graph-impl", "none"}), kWorld1);
  CHECK(passes_part_a(r));
  CHECK(r["cuda_graph_impl"] == mr::Value("local"));
  CHECK_FALSE(r.has("enable_cuda_graph"));
  CHECK(r["external_cuda_graph"] == mr::Value(false));
  // seed 580: local graphs default the inference scope to layer.
  CHECK(r["inference_cuda_graph_scope"] == mr::Value("InferenceCudaGraphScope.layer"));
  r = run(with({"--external-cuda-graph"}), kWorld1);
  CHECK(passes_part_a(r));
  CHECK(r["cuda_graph_impl"] == mr::Value("transformer_engine"));
  CHECK_FALSE(r.has("external_cuda_graph"));
  CHECK(r["enable_cuda_graph"] == mr::Value(false));
  CHECK(r["inference_cuda_graph_scope"] == mr::Value("InferenceCudaGraphScope.none"));
}

TEST_CASE("part A: --cuda-graph-scope is forwarded to --cuda-graph-modules", "[part-a]") {
  // seed arguments.py:568: not together with --cuda-graph-modules.
  CHECK(fails_with(run(with({"--cuda-graph-scope", "attn", "--cuda-graph-modules", "mlp"}), kWorld1),
                   "deprecated.cuda-graph-scope-with-modules"));
  // seed arguments.py:571-575: warned, forwarded, deleted.
  auto r = run(with({"--cuda-graph-impl", "transformer_engine", "--cuda-graph-scope", "attn", "mlp"}), kWorld1);
  CHECK(passes_part_a(r));
  CHECK(r.warned("deprecated.cuda-graph-scope"));
  CHECK(r["cuda_graph_modules"] == str_list({"CudaGraphModule.attn", "CudaGraphModule.mlp"}));
  CHECK_FALSE(r.has("cuda_graph_scope_deprecated"));
  r = run(with({"--cuda-graph-impl", "transformer_engine", "--cuda-graph-modules", "attn"}), kWorld1);
  CHECK_FALSE(r.warned("deprecated.cuda-graph-scope"));
}

// ---------------------------------------------------------------------------------------------------------------
// seed 577-588 with 286-325: CUDA-graph module and inference-scope normalisation.

TEST_CASE("part A: cuda_graph_modules normalisation", "[part-a]") {
  struct Case {
    const char* why;
    std::vector<std::string> extra;
    std::vector<std::string> modules;
    const char* impl;
    const char* scope;
  };
  const std::vector<Case> cases = {
      // seed arguments.py:319 + 580: empty list, impl none -> scope none.
      {"defaults", {}, {}, "none", "InferenceCudaGraphScope.none"},
      // enum members kept in order.
      {"modules", {"--cuda-graph-impl", "transformer_engine", "--cuda-graph-modules", "attn", "moe_router"},
       {"CudaGraphModule.attn", "CudaGraphModule.moe_router"}, "transformer_engine", "InferenceCudaGraphScope.none"},
      // cuda_graph_config.py normalize_cuda_graph_modules: full -> [] (whole layer).
      {"full", {"--cuda-graph-impl", "local", "--cuda-graph-modules", "full"}, {}, "local",
       "InferenceCudaGraphScope.layer"},
      // full_iteration migrates to --cuda-graph-impl full_iteration (seed arguments.py:317).
      {"full_iteration", {"--cuda-graph-modules", "full_iteration"}, {}, "full_iteration",
       "InferenceCudaGraphScope.none"},
      {"full_iteration + attn", {"--cuda-graph-impl", "local", "--cuda-graph-modules", "attn", "full_iteration"},
       {"CudaGraphModule.attn"}, "full_iteration", "InferenceCudaGraphScope.none"},
      // full_iteration_inference with local graphs migrates to scope block.
      {"full_iteration_inference local", {"--cuda-graph-impl", "local", "--cuda-graph-modules", "full_iteration_inference"},
       {}, "local", "InferenceCudaGraphScope.block"},
      // ... and does nothing with impl none (seed arguments.py:303-309).
      {"full_iteration_inference none", {"--cuda-graph-modules", "full_iteration_inference"}, {}, "none",
       "InferenceCudaGraphScope.none"},
      // explicit scope with local graphs.
      {"local block", {"--cuda-graph-impl", "local", "--inference-cuda-graph-scope", "block"}, {}, "local",
       "InferenceCudaGraphScope.block"},
  };
  for (const Case& c : cases) {
    INFO(c.why);
    auto r = run(with(c.extra), kWorld1);
    CHECK(passes_part_a(r));
    CHECK(r["cuda_graph_modules"] == str_list(c.modules));
    CHECK(r["cuda_graph_impl"] == mr::Value(c.impl));
    CHECK(r["inference_cuda_graph_scope"] == mr::Value(c.scope));
  }
}

TEST_CASE("part A: cuda_graph_modules warnings", "[part-a]") {
  // seed arguments.py:296-297
  CHECK(run(with({"--cuda-graph-impl", "local", "--cuda-graph-modules", "full"}), kWorld1)
            .warned("cuda-graph-modules.full-deprecated"));
  // seed arguments.py:303-309
  auto r = run(with({"--cuda-graph-modules", "full_iteration_inference"}), kWorld1);
  CHECK(r.warned("cuda-graph-modules.deprecated-no-effect"));
  CHECK_FALSE(r.warned("cuda-graph-modules.deprecated-migrated"));
  // seed arguments.py:311-317
  r = run(with({"--cuda-graph-modules", "full_iteration"}), kWorld1);
  CHECK(r.warned("cuda-graph-modules.deprecated-migrated"));
  CHECK_FALSE(r.warned("cuda-graph-modules.deprecated-no-effect"));
  // Neighbour: plain modules warn about nothing.
  r = run(with({"--cuda-graph-impl", "local", "--cuda-graph-modules", "attn"}), kWorld1);
  CHECK_FALSE(r.warned("cuda-graph-modules.full-deprecated"));
  CHECK_FALSE(r.warned("cuda-graph-modules.deprecated-migrated"));
}

TEST_CASE("part A: cuda_graph_modules errors", "[part-a]") {
  // normalize_cuda_graph_modules: full only on its own.
  CHECK(fails_with(run(with({"--cuda-graph-impl", "local", "--cuda-graph-modules", "full", "attn"}), kWorld1),
                   "cuda-graph-modules.full-alone"));
  // validate_deprecated_cuda_graph_modules_migration_inputs: one kind of deprecated word.
  CHECK(fails_with(run(with({"--cuda-graph-modules", "full_iteration", "full_iteration_inference"}), kWorld1),
                   "cuda-graph-modules.one-deprecated-word"));
  CHECK(passes_part_a(run(with({"--cuda-graph-modules", "full_iteration", "full_iteration"}), kWorld1)));
  // full_iteration: impl none/local/full_iteration, inference scope unset or none.
  CHECK(fails_with(run(with({"--cuda-graph-impl", "transformer_engine", "--cuda-graph-modules", "full_iteration"}),
                       kWorld1),
                   "cuda-graph-modules.full-iteration-impl"));
  CHECK(fails_with(run(with({"--cuda-graph-impl", "local", "--cuda-graph-modules", "full_iteration",
                             "--inference-cuda-graph-scope", "layer"}),
                       kWorld1),
                   "cuda-graph-modules.full-iteration-scope-none"));
  CHECK(passes_part_a(run(with({"--cuda-graph-impl", "full_iteration", "--cuda-graph-modules", "full_iteration",
                                "--inference-cuda-graph-scope", "none"}),
                          kWorld1)));
  // full_iteration_inference: impl none/local, inference scope unset or block.
  CHECK(fails_with(run(with({"--cuda-graph-impl", "transformer_engine", "--cuda-graph-modules",
                             "full_iteration_inference"}),
                       kWorld1),
                   "cuda-graph-modules.full-iteration-inference-impl"));
  CHECK(fails_with(run(with({"--cuda-graph-impl", "local", "--cuda-graph-modules", "full_iteration_inference",
                             "--inference-cuda-graph-scope", "layer"}),
                       kWorld1),
                   "cuda-graph-modules.full-iteration-inference-scope-block"));
  CHECK(passes_part_a(run(with({"--cuda-graph-impl", "local", "--cuda-graph-modules", "full_iteration_inference",
                                "--inference-cuda-graph-scope", "block"}),
                          kWorld1)));
}

TEST_CASE("part A: cuda_graph_modules values the command line cannot produce", "[part-a]") {
  // normalize_cuda_graph_modules: CudaGraphModule[name] of an unknown name, or a non-string value.
  auto d = direct(mr::part_a::cuda_graph_normalize, mrtest::base_args(),
                  [](mr::Namespace& ns) { ns.set("cuda_graph_modules", str_list({"bogus"}), {}); });
  CHECK(d.rule == "cuda-graph-modules.known-module");
  d = direct(mr::part_a::cuda_graph_normalize, mrtest::base_args(),
             [](mr::Namespace& ns) { ns.set("cuda_graph_modules", mr::Value(mr::List{mr::Value(3)}), {}); });
  CHECK(d.rule == "cuda-graph-modules.known-module");
  // A comma-separated string of plain names is split and mapped to members.
  d = direct(mr::part_a::cuda_graph_normalize, mrtest::base_args(),
             [](mr::Namespace& ns) { ns.set("cuda_graph_modules", mr::Value("attn,mlp"), {}); });
  CHECK(d.rule.empty());
  CHECK(d["cuda_graph_modules"] == str_list({"CudaGraphModule.attn", "CudaGraphModule.mlp"}));
}

TEST_CASE("part A: --inference-cuda-graph-scope must suit --cuda-graph-impl", "[part-a]") {
  // seed arguments.py:581-588 (ALLOWED_INFERENCE_SCOPES)
  CHECK(fails_with(run(with({"--inference-cuda-graph-scope", "layer"}), kWorld1),
                   "cuda-graph-modules.inference-scope-for-impl"));
  CHECK(fails_with(run(with({"--cuda-graph-impl", "local", "--inference-cuda-graph-scope", "none"}), kWorld1),
                   "cuda-graph-modules.inference-scope-for-impl"));
  CHECK(fails_with(run(with({"--cuda-graph-impl", "transformer_engine", "--inference-cuda-graph-scope", "block"}),
                       kWorld1),
                   "cuda-graph-modules.inference-scope-for-impl"));
  CHECK(passes_part_a(run(with({"--cuda-graph-impl", "local", "--inference-cuda-graph-scope", "layer"}), kWorld1)));
  CHECK(passes_part_a(run(with({"--inference-cuda-graph-scope", "none"}), kWorld1)));
}

// ---------------------------------------------------------------------------------------------------------------
// seed 590-625: input defaults, legacy split, data paths, phase transitions.

TEST_CASE("part A: script defaults apply only to unset arguments", "[part-a]") {
  // seed arguments.py:591-600: megatron-run passes no defaults; drive apply_input_defaults directly.
  mr::Object defaults = {{"seq_length", mr::Value(256)}, {"data_cache_path", mr::Value("/cache")}};
  auto d = direct([&](mr::Context& ctx) { mr::part_a::apply_input_defaults(ctx, defaults); }, mrtest::base_args());
  CHECK(d.rule.empty());
  // --seq-length 128 was given: kept, with a warning.
  CHECK(d.warned("input.default-overridden"));
  CHECK(d["seq_length"].as_int() == 128);
  // data_cache_path was unset (None): the default applies.
  CHECK(d["data_cache_path"] == mr::Value("/cache"));
  // Neighbour: a default for an unset argument alone does not warn.
  d = direct([](mr::Context& ctx) { mr::part_a::apply_input_defaults(ctx, {{"data_cache_path", mr::Value("/c")}}); },
             mrtest::base_args());
  CHECK_FALSE(d.warned("input.default-overridden"));
}

TEST_CASE("part A: --data-path without --split uses the legacy split", "[part-a]") {
  // seed arguments.py:602-606
  auto r = run(with({"--data-path", "/data/a"}), kWorld1);
  CHECK(r.warned("input.legacy-split-default"));
  CHECK(r["split"] == mr::Value("969, 30, 1"));
  r = run(with({"--data-path", "/data/a", "--split", "98,1,1"}), kWorld1);
  CHECK_FALSE(r.warned("input.legacy-split-default"));
  CHECK(r["split"] == mr::Value("98,1,1"));
}

TEST_CASE("part A: data path sources are exclusive", "[part-a]") {
  // seed arguments.py:608-611
  CHECK(fails_with(run(with({"--data-path", "/d", "--data-args-path", "/args"}), kWorld1),
                   "input.data-path-or-data-args-path"));
  CHECK(passes_part_a(run(with({"--data-args-path", "/args"}), kWorld1)));
  // seed arguments.py:612-620
  CHECK(fails_with(run(with({"--train-data-path", "/t", "--per-split-data-args-path", "/args"}), kWorld1),
                   "input.per-split-paths-or-args-path"));
  CHECK(passes_part_a(run(with({"--per-split-data-args-path", "/args"}), kWorld1)));
  CHECK(passes_part_a(run(with({"--train-data-path", "/t", "--valid-data-path", "/v"}), kWorld1)));
}

TEST_CASE("part A: --phase-transition-iterations becomes a sorted list of ints", "[part-a]") {
  // seed arguments.py:622-625
  auto r = run(with({"--phase-transition-iterations", "30, 10,20"}), kWorld1);
  CHECK(passes_part_a(r));
  CHECK(r["phase_transition_iterations"] == mr::Value(mr::List{mr::Value(10), mr::Value(20), mr::Value(30)}));
  CHECK(fails_with(run(with({"--phase-transition-iterations", "10,x"}), kWorld1),
                   "input.phase-transition-iterations-ints"));
  CHECK(fails_with(run(with({"--phase-transition-iterations", "10,"}), kWorld1),
                   "input.phase-transition-iterations-ints"));
  // Unset stays None.
  CHECK(run(mrtest::base_args(), kWorld1)["phase_transition_iterations"].is_none());
}

TEST_CASE("part A: rule ids are unique", "[part-a]") {
  // Every part-A rule id is registered exactly once across the whole chain.
  auto rules = mr::all_rules();
  size_t mine = 0;
  for (const mr::Rule* r : rules) {
    if (!part_a_rule(r->id)) continue;
    ++mine;
    INFO(r->id);
    CHECK(std::count_if(rules.begin(), rules.end(), [&](const mr::Rule* o) { return std::string(o->id) == r->id; }) ==
          1);
  }
  CHECK(mine >= 40);
}
