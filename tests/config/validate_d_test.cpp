// Part D of validate_args (seed arguments.py 1227-1596): recompute, sequence parallel, dynamic CP, CUDA
// connections, expert GTP, bias fusions, QK-clip, position embeddings, MoE, checkpoint formats, sequence packing.
//
// Most cases run the chain up to and including part D (parts A-C always run before it), so that checks of
// later parts cannot mask what part D decides; a few run the whole chain through mrtest::run.
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "config/validate/part_d_sections.h"
#include "config/validate/sections.h"
#include "support.h"

namespace {

using Env = std::map<std::string, std::string>;

// The chain through part D. The Run carries the namespace and diagnostics as mrtest::run's does.
mrtest::Run run_d(const std::vector<std::string>& args, const Env& env = {}, const mr::TargetEnv* target = nullptr) {
  return mrtest::run_parts(
      args, {&mr::sections_part_a, &mr::sections_part_b, &mr::sections_part_c, &mr::sections_part_d}, env, target);
}

// One part-D section alone on base_args() with some dests overridden: for checks an earlier part makes
// unreachable through the command line. Returns the failing rule id ("" when it passes).
std::string run_section(void (*section)(mr::Context&), const std::map<std::string, mr::Value>& overrides) {
  return mrtest::run_body(mrtest::base_args(), section, {}, nullptr,
                          [&](mr::Namespace& ns) {
                            for (const auto& [k, v] : overrides) ns.derive(k, v, "test");
                          })
      .rule;
}

std::vector<std::string> operator+(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

const Env kOneConnection = {{"CUDA_DEVICE_MAX_CONNECTIONS", "1"}};

mr::TargetEnv target(const std::string& arch, const std::string& te = "2.20.2", const std::string& torch = "2.15.0") {
  mr::TargetEnv t;
  t.gpu_arch = arch;
  t.te_version = te;
  t.torch_version = torch;
  return t;
}

// base_args() without --mock-data (a real dataset path instead).
std::vector<std::string> real_data_args() {
  std::vector<std::string> a;
  for (const auto& w : mrtest::base_args())
    if (w != "--mock-data") a.push_back(w);
  return a + std::vector<std::string>{"--data-path", "/data/corpus_text_document", "--split", "99,1,0"};
}

mr::Value strs(std::initializer_list<const char*> items) {
  mr::List l;
  for (const char* s : items) l.emplace_back(s);
  return mr::Value(l);
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------
// Activation recomputing (seed arguments.py:1227-1246 validate_args)

TEST_CASE("part D: distributed recompute needs TP > 1, full granularity, a method and torch >= 1.10", "[part-d]") {
  const std::vector<std::string> dist = {"--distribute-saved-activations", "--recompute-granularity", "full",
                                         "--recompute-method", "uniform"};
  const Env tp2 = {{"WORLD_SIZE", "2"}, {"CUDA_DEVICE_MAX_CONNECTIONS", "1"}};
  // seed arguments.py:1229
  auto r = run_d(mrtest::with(dist));
  CHECK(r.exit == 1);
  CHECK(r.rule == "recompute.distribute-needs-tensor-parallel");
  // Neighbour: all four conditions hold.
  auto ok = run_d(mrtest::with(dist + std::vector<std::string>{"--tensor-model-parallel-size", "2"}), tp2);
  CHECK(ok.exit == 0);
  CHECK(ok.message == "");
  // seed arguments.py:1232
  r = run_d(mrtest::with({"--distribute-saved-activations", "--tensor-model-parallel-size", "2", "--recompute-method",
                          "uniform"}),
            tp2);
  CHECK(r.rule == "recompute.distribute-needs-full-granularity");
  // seed arguments.py:1235
  r = run_d(mrtest::with({"--distribute-saved-activations", "--tensor-model-parallel-size", "2",
                          "--recompute-granularity", "full"}),
            tp2);
  CHECK(r.rule == "recompute.distribute-needs-method");
  // seed arguments.py:1238
  auto old_torch = target("sm_90", "2.20.2", "1.9.0");
  r = run_d(mrtest::with(dist + std::vector<std::string>{"--tensor-model-parallel-size", "2"}), tp2, &old_torch);
  CHECK(r.rule == "recompute.distribute-torch-version");
}

TEST_CASE("part D: selective recompute takes no method", "[part-d]") {
  // seed arguments.py:1243
  auto r = run_d(mrtest::with({"--recompute-granularity", "selective", "--recompute-method", "block"}));
  CHECK(r.exit == 1);
  CHECK(r.rule == "recompute.selective-without-method");
  auto ok = run_d(mrtest::with({"--recompute-granularity", "selective"}));
  CHECK(ok.exit == 0);
  ok = run_d(mrtest::with({"--recompute-granularity", "full", "--recompute-method", "block"}));
  CHECK(ok.exit == 0);
}

// ---------------------------------------------------------------------------------------------------------
// Sequence parallelism (seed arguments.py:1248-1260 validate_args)

TEST_CASE("part D: sequence parallelism is forced off with TP=1", "[part-d]") {
  // seed arguments.py:1251-1257
  auto r = run_d(mrtest::with({"--sequence-parallel"}));
  CHECK(r.exit == 0);
  CHECK(r["sequence_parallel"] == mr::Value(false));
  CHECK(r.warned("sequence-parallel.disabled-without-tp"));
  // Neighbour: TP=2 keeps it, no warning.
  r = run_d(mrtest::with({"--sequence-parallel", "--tensor-model-parallel-size", "2"}),
            {{"WORLD_SIZE", "2"}, {"CUDA_DEVICE_MAX_CONNECTIONS", "1"}});
  CHECK(r.exit == 0);
  CHECK(r["sequence_parallel"] == mr::Value(true));
  CHECK_FALSE(r.warned("sequence-parallel.disabled-without-tp"));
  // Not requested: off, no warning.
  r = run_d(mrtest::base_args());
  CHECK(r["sequence_parallel"] == mr::Value(false));
  CHECK_FALSE(r.warned("sequence-parallel.disabled-without-tp"));
}

TEST_CASE("part D: --tp-comm-overlap needs sequence parallelism", "[part-d]") {
  const Env tp2 = {{"WORLD_SIZE", "2"}, {"CUDA_DEVICE_MAX_CONNECTIONS", "1"}};
  // seed arguments.py:1259
  auto r = run_d(mrtest::with({"--tp-comm-overlap", "--tensor-model-parallel-size", "2"}), tp2);
  CHECK(r.exit == 1);
  CHECK(r.rule == "sequence-parallel.tp-comm-overlap-needs-sp");
  // TP=1 turns --sequence-parallel off first, so the overlap fails there too.
  r = run_d(mrtest::with({"--tp-comm-overlap", "--sequence-parallel"}));
  CHECK(r.rule == "sequence-parallel.tp-comm-overlap-needs-sp");
  auto ok = run_d(mrtest::with({"--tp-comm-overlap", "--sequence-parallel", "--tensor-model-parallel-size", "2"}), tp2);
  CHECK(ok.rule != "sequence-parallel.tp-comm-overlap-needs-sp");
  CHECK(ok.exit == 0);
}

// ---------------------------------------------------------------------------------------------------------
// Hybrid / dynamic context parallelism (seed arguments.py:1262-1294 validate_args)

TEST_CASE("part D: --hybrid-context-parallel is forwarded to --dynamic-context-parallel", "[part-d]") {
  // seed arguments.py:1262-1277, 1570-1571
  auto r = run_d(mrtest::with({"--hybrid-context-parallel", "--calculate-per-token-loss"}));
  CHECK(r.exit == 0);
  CHECK(r.warned("dynamic-cp.hybrid-deprecated"));
  CHECK(r["dynamic_context_parallel"] == mr::Value(true));
  CHECK(r["hybrid_context_parallel"] == mr::Value(false));
  CHECK(r["sequence_packing_scheduler"] == mr::Value("default_dynamic_cp"));
  CHECK(r["variable_seq_lengths"] == mr::Value(true));
  // seed arguments.py:1267
  r = run_d(mrtest::with({"--hybrid-context-parallel", "--dynamic-context-parallel", "--calculate-per-token-loss"}));
  CHECK(r.exit == 1);
  CHECK(r.rule == "dynamic-cp.hybrid-and-dynamic");
  auto ok = run_d(mrtest::with({"--dynamic-context-parallel", "--calculate-per-token-loss"}));
  CHECK(ok.exit == 0);
  CHECK_FALSE(ok.warned("dynamic-cp.hybrid-deprecated"));
}

TEST_CASE("part D: dynamic context parallelism checks", "[part-d]") {
  const std::vector<std::string> dcp = {"--dynamic-context-parallel", "--calculate-per-token-loss"};
  // seed arguments.py:1274
  auto r = run_d(mrtest::with(dcp + std::vector<std::string>{"--use-megatron-fsdp", "--ckpt-format", "fsdp_dtensor"}));
  CHECK(r.exit == 1);
  CHECK(r.rule == "dynamic-cp.no-megatron-fsdp");
  // seed arguments.py:1275
  r = run_d(mrtest::with(dcp + std::vector<std::string>{"--dataloader-type", "cyclic"}));
  CHECK(r.rule == "dynamic-cp.single-dataloader");
  auto ok = run_d(mrtest::with(dcp + std::vector<std::string>{"--dataloader-type", "single"}));
  CHECK(ok.exit == 0);
  // seed arguments.py:1278
  r = run_d(mrtest::with(dcp + std::vector<std::string>{"--sequence-packing-scheduler", "dp_balanced"}));
  CHECK(r.rule == "dynamic-cp.scheduler");
  ok = run_d(mrtest::with(dcp + std::vector<std::string>{"--sequence-packing-scheduler", "default_dynamic_cp"}));
  CHECK(ok.exit == 0);
}

TEST_CASE("part D: --min-dynamic-context-parallel-size must be a dynamic-CP group size", "[part-d]") {
  // seed arguments.py:1284-1294: DPxCP 8 -> sizes [1, 2, 4, 8]; DPxCP 6 -> [1, 2, 6].
  struct Case {
    const char* world;
    const char* gbs;
    const char* min_size;
    bool ok;
  };
  const Case cases[] = {
      {"8", "16", "1", true},  {"8", "16", "2", true},  {"8", "16", "4", true},  {"8", "16", "8", true},
      {"8", "16", "3", false}, {"8", "16", "16", false}, {"6", "12", "2", true},  {"6", "12", "6", true},
      {"6", "12", "4", false}, {"6", "12", "3", false}, {"1", "8", "1", true},   {"1", "8", "2", false},
  };
  for (const auto& c : cases) {
    INFO("WORLD_SIZE=" << c.world << " --min-dynamic-context-parallel-size " << c.min_size);
    auto r = run_d(mrtest::with({"--dynamic-context-parallel", "--calculate-per-token-loss", "--global-batch-size",
                                 c.gbs, "--min-dynamic-context-parallel-size", c.min_size}),
                   {{"WORLD_SIZE", c.world}});
    if (c.ok) {
      CHECK(r.exit == 0);
    } else {
      CHECK(r.exit == 1);
      CHECK(r.rule == "dynamic-cp.min-group-size");
    }
  }
}

// ---------------------------------------------------------------------------------------------------------
// variable_seq_lengths and the SFT mock dataset (seed arguments.py:1301-1312 validate_args)

TEST_CASE("part D: variable_seq_lengths and the default SFT mock-dataset config", "[part-d]") {
  // seed arguments.py:1301
  auto r = run_d(mrtest::base_args());
  CHECK(r["variable_seq_lengths"] == mr::Value(false));
  CHECK(r["sft_mock_dataset_config_json"].is_none());
  // seed arguments.py:1302-1312: min = seq // 2, max = seq, mean = seq // 4 * 3 (130 // 4 * 3 = 96, not 97).
  r = run_d(mrtest::with({"--sft", "--seq-length", "130", "--max-position-embeddings", "256"}));
  CHECK(r["sft_mock_dataset_config_json"] ==
        mr::Value("{\"mode\": \"distribution\", \"type\": \"lognormal\", \"min_seq_len\": 65, \"max_seq_len\": 130, "
                  "\"mean_seq_len\": 96, \"lognormal_sigma\": 1.1}"));
  r = run_d(mrtest::with({"--sft"}));
  CHECK(r["sft_mock_dataset_config_json"] ==
        mr::Value("{\"mode\": \"distribution\", \"type\": \"lognormal\", \"min_seq_len\": 64, \"max_seq_len\": 128, "
                  "\"mean_seq_len\": 96, \"lognormal_sigma\": 1.1}"));
  // Given explicitly: kept.
  r = run_d(mrtest::with({"--sft", "--sft-mock-dataset-config-json", "{\"mode\":\"file\",\"path\":\"/x\"}"}));
  CHECK(r["sft_mock_dataset_config_json"] == mr::Value("{\"mode\":\"file\",\"path\":\"/x\"}"));
  // Without --sft: untouched.
  r = run_d(mrtest::base_args());
  CHECK(r["sft_mock_dataset_config_json"].is_none());
}

// ---------------------------------------------------------------------------------------------------------
// CUDA_DEVICE_MAX_CONNECTIONS and high-priority streams (seed arguments.py:1313-1350 validate_args)

TEST_CASE("part D: TP/CP before Blackwell needs CUDA_DEVICE_MAX_CONNECTIONS=1", "[part-d]") {
  const auto tp2 = mrtest::with({"--tensor-model-parallel-size", "2"});
  // seed arguments.py:1339
  auto r = run_d(tp2, {{"WORLD_SIZE", "2"}});
  CHECK(r.exit == 1);
  CHECK(r.rule == "cuda-connections.max-connections-one");
  r = run_d(tp2, {{"WORLD_SIZE", "2"}, {"CUDA_DEVICE_MAX_CONNECTIONS", "8"}});
  CHECK(r.rule == "cuda-connections.max-connections-one");
  r = run_d(mrtest::with({"--context-parallel-size", "2"}), {{"WORLD_SIZE", "2"}});
  CHECK(r.rule == "cuda-connections.max-connections-one");
  // Neighbours: the variable set, or a Blackwell target.
  CHECK(run_d(tp2, {{"WORLD_SIZE", "2"}, {"CUDA_DEVICE_MAX_CONNECTIONS", "1"}}).exit == 0);
  auto blackwell = target("sm_100");
  CHECK(run_d(tp2, {{"WORLD_SIZE", "2"}}, &blackwell).exit == 0);
  CHECK(run_d(mrtest::base_args()).exit == 0);
}

TEST_CASE("part D: TP/CP with FSDP or MoE comm overlap before Blackwell only warns", "[part-d]") {
  // seed arguments.py:1318-1327
  const std::vector<std::string> fsdp2 = {"--use-torch-fsdp2", "--no-gradient-accumulation-fusion",
                                          "--untie-embeddings-and-output-weights"};
  auto r = run_d(mrtest::with(fsdp2 + std::vector<std::string>{"--tensor-model-parallel-size", "2"}),
                 {{"WORLD_SIZE", "2"}});
  CHECK(r.rule != "cuda-connections.max-connections-one");
  CHECK(r.warned("cuda-connections.fsdp-with-tp-cp"));
  auto plain = run_d(mrtest::with(fsdp2), {{"WORLD_SIZE", "2"}});
  CHECK_FALSE(plain.warned("cuda-connections.fsdp-with-tp-cp"));
  // seed arguments.py:1328-1337
  r = run_d(mrtest::with({"--overlap-moe-expert-parallel-comm", "--tensor-model-parallel-size", "2"}),
            {{"WORLD_SIZE", "2"}});
  CHECK(r.rule != "cuda-connections.max-connections-one");
  CHECK(r.warned("cuda-connections.ep-overlap-with-tp-cp"));
  auto blackwell = target("sm_100");
  r = run_d(mrtest::with({"--overlap-moe-expert-parallel-comm", "--tensor-model-parallel-size", "2"}),
            {{"WORLD_SIZE", "2"}}, &blackwell);
  CHECK_FALSE(r.warned("cuda-connections.ep-overlap-with-tp-cp"));
}

TEST_CASE("part D: FSDP high-priority stream groups", "[part-d]") {
  const std::vector<std::string> fsdp2 = {"--use-torch-fsdp2", "--no-gradient-accumulation-fusion",
                                          "--untie-embeddings-and-output-weights"};
  const std::vector<std::string> mfsdp = {"--use-megatron-fsdp", "--ckpt-format", "fsdp_dtensor"};
  const std::vector<std::string> ep2 = {"--expert-model-parallel-size", "2", "--num-experts", "4"};
  auto blackwell = target("sm_100");
  struct Case {
    const char* what;
    std::vector<std::string> args;
    const mr::TargetEnv* target;
    mr::Value groups;
  };
  const Case cases[] = {
      // seed arguments.py:1346: `fsdp2 or (megatron_fsdp and arch >= 10)` (and binds tighter than or).
      {"torch FSDP2 on sm_90", mrtest::with(fsdp2), nullptr, strs({"dp_cp"})},
      {"torch FSDP2 on sm_100", mrtest::with(fsdp2), &blackwell, strs({"dp_cp"})},
      {"Megatron-FSDP on sm_90", mrtest::with(mfsdp), nullptr, strs({})},
      {"Megatron-FSDP on sm_100", mrtest::with(mfsdp), &blackwell, strs({"dp_cp"})},
      // seed arguments.py:1349
      {"Megatron-FSDP + EP on sm_100", mrtest::with(mfsdp + ep2), &blackwell, strs({"dp_cp", "ep_dp"})},
      // seed arguments.py:1347: already listed, not repeated.
      {"given already", mrtest::with(fsdp2 + std::vector<std::string>{"--high-priority-stream-groups", "dp_cp"}),
       nullptr, strs({"dp_cp"})},
      {"no FSDP", mrtest::base_args(), &blackwell, strs({})},
  };
  for (const auto& c : cases) {
    INFO(c.what);
    auto r = run_d(c.args, {{"WORLD_SIZE", "2"}}, c.target);
    CHECK(r.exit == 0);
    CHECK(r["high_priority_stream_groups"] == c.groups);
  }
}

// ---------------------------------------------------------------------------------------------------------
// Expert GTP weight shards (seed arguments.py:1353-1362 validate_args; resolve_tensor_parallel_weight_shards)

TEST_CASE("part D: expert GTP weight shards", "[part-d]") {
  struct Case {
    std::vector<std::string> extra;
    int64_t shards, remat;
  };
  // shards = etp * remat when unset; otherwise remat = shards // etp.
  const Case cases[] = {
      {{}, 1, 1},                                                               // etp = tp = 1
      {{"--expert-tensor-parallel-num-weight-shards", "2"}, 2, 2},              // 2 // 1
      {{"--expert-tensor-parallel-size", "2"}, 2, 1},                           // unset: 2 * 1
      {{"--expert-tensor-parallel-size", "2", "--expert-tensor-parallel-num-weight-shards", "4"}, 4, 2},
      {{"--expert-tensor-parallel-size", "2", "--expert-tensor-parallel-num-weight-shards", "2"}, 2, 1},
  };
  for (const auto& c : cases) {
    auto r = run_d(mrtest::with(c.extra + std::vector<std::string>{"--num-experts", "4"}), {{"WORLD_SIZE", "2"}});
    INFO(r.message);
    CHECK(r.exit == 0);
    CHECK(r["expert_tensor_parallel_num_weight_shards"].as_int() == c.shards);
    CHECK(r["expert_gtp_weight_remat_size"].as_int() == c.remat);
  }
  // seed arguments.py:1356 -> model_parallel_config.py resolve_tensor_parallel_weight_shards
  auto r = run_d(mrtest::with({"--expert-tensor-parallel-size", "2", "--expert-tensor-parallel-num-weight-shards", "1",
                               "--num-experts", "4"}),
                 {{"WORLD_SIZE", "2"}});
  CHECK(r.exit == 1);
  CHECK(r.rule == "expert-gtp.weight-shards-below-etp");
  r = run_d(mrtest::with({"--expert-tensor-parallel-size", "2", "--expert-tensor-parallel-num-weight-shards", "3",
                          "--num-experts", "4"}),
            {{"WORLD_SIZE", "2"}});
  CHECK(r.exit == 1);
  CHECK(r.rule == "expert-gtp.weight-shards-divisible");
}

// ---------------------------------------------------------------------------------------------------------
// GTP weight-rematerialisation checks (seed arguments.py:1364-1451 validate_args). Expert GTP of 2
// (--expert-tensor-parallel-num-weight-shards 2 with etp 1) switches the block on.

TEST_CASE("part D: GTP checks", "[part-d]") {
  const auto gtp = [](std::vector<std::string> extra) {
    return mrtest::with(std::vector<std::string>{"--expert-tensor-parallel-num-weight-shards", "2", "--num-experts",
                                                 "4"} +
                        extra);
  };
  // Neighbour for every check below: GTP with nothing else passes.
  auto ok = run_d(gtp({}));
  CHECK(ok.exit == 0);
  CHECK(ok["high_priority_stream_groups"] == strs({}));  // sm_90: no stream priorities
  // seed arguments.py:1365
  auto r = run_d(gtp({"--fp4-format", "e2m1", "--bf16"}));
  CHECK(r.rule == "gtp-remat.fp4-needs-param-gather");
  r = run_d(mrtest::with({"--fp4-format", "e2m1", "--bf16"}));  // no GTP: no such requirement
  CHECK(r.rule != "gtp-remat.fp4-needs-param-gather");
  // seed arguments.py:1402
  r = run_d(gtp({"--ddp-average-in-collective"}));
  CHECK(r.rule == "gtp-remat.no-ddp-average-in-collective");
  CHECK(run_d(mrtest::with({"--ddp-average-in-collective"})).exit == 0);
  // seed arguments.py:1407
  r = run_d(gtp({"--ckpt-format", "torch_dcp"}));
  CHECK(r.rule == "gtp-remat.ckpt-format");
  CHECK(run_d(gtp({"--ckpt-format", "torch"})).exit == 0);
  // seed arguments.py:1411
  r = run_d(gtp({"--dist-ckpt-optim-fully-reshardable", "--distrib-optim-fully-reshardable-mem-efficient"}));
  CHECK(r.rule == "gtp-remat.fully-reshardable-mem-efficient");
  CHECK(run_d(gtp({"--dist-ckpt-optim-fully-reshardable"})).rule != "gtp-remat.fully-reshardable-mem-efficient");
  // seed arguments.py:1424-1436 (fp8_recipe alone decides, as in the seed)
  r = run_d(gtp({"--fp8-recipe", "mxfp8"}));
  CHECK(r.rule == "gtp-remat.mxfp8-needs-fp8-param-gather");
  r = run_d(gtp({"--fp8-recipe", "mxfp8", "--fp8-param-gather", "--use-distributed-optimizer"}));
  CHECK(r.rule == "gtp-remat.mxfp8-needs-reuse-grad-buf");
  r = run_d(gtp({"--fp8-recipe", "mxfp8", "--fp8-param-gather", "--use-distributed-optimizer",
                 "--reuse-grad-buf-for-mxfp8-param-ag"}));
  CHECK(r.exit == 0);
  // seed arguments.py:1440-1444
  r = run_d(gtp({"--gtp-remat-nccl-ub", "--disable-symmetric-registration"}));
  CHECK(r.rule == "gtp-remat.nccl-ub-symmetric-registration");
  r = run_d(gtp({"--gtp-expert-remat-nccl-ub", "--disable-symmetric-registration"}));
  CHECK(r.rule == "gtp-remat.nccl-ub-symmetric-registration");
  CHECK(run_d(gtp({"--disable-symmetric-registration"})).exit == 0);
  // seed arguments.py:1445-1451 (a printed warning)
  r = run_d(gtp({"--gtp-remat-nccl-ub", "--gtp-remat-reduce-scatter-with-fp32-accumulation"}));
  CHECK(r.exit == 0);
  CHECK(r.warned("gtp-remat.nccl-ub-overrides-fp32-accumulation"));
  CHECK_FALSE(run_d(gtp({"--gtp-remat-nccl-ub"})).warned("gtp-remat.nccl-ub-overrides-fp32-accumulation"));
  // seed arguments.py:1396
  r = run_d(gtp({}), {{"NCCL_PROTO", "SIMPLE"}});
  CHECK(r.warned("gtp-remat.nccl-proto-simple"));
  CHECK_FALSE(run_d(gtp({}), {{"NCCL_PROTO", "LL128"}}).warned("gtp-remat.nccl-proto-simple"));
  CHECK_FALSE(run_d(mrtest::base_args(), {{"NCCL_PROTO", "simple"}}).warned("gtp-remat.nccl-proto-simple"));
}

TEST_CASE("part D: GTP on Blackwell: stream priorities and CUDA-graph node priority", "[part-d]") {
  auto blackwell = target("sm_100");
  const std::vector<std::string> egtp = {"--expert-tensor-parallel-num-weight-shards", "2", "--num-experts", "4"};
  // seed arguments.py:1373-1386
  auto r = run_d(mrtest::with(egtp), {}, &blackwell);
  CHECK(r.exit == 0);
  CHECK(r["high_priority_stream_groups"] == strs({"gtp_remat", "expt_gtp_remat"}));
  CHECK(r.warned("gtp-remat.high-priority-gtp-remat"));
  CHECK(r.warned("gtp-remat.high-priority-expert-gtp-remat"));
  // Already listed: no warning, no duplicate.
  r = run_d(mrtest::with(egtp + std::vector<std::string>{"--high-priority-stream-groups", "gtp_remat"}), {}, &blackwell);
  CHECK(r["high_priority_stream_groups"] == strs({"gtp_remat", "expt_gtp_remat"}));
  CHECK_FALSE(r.warned("gtp-remat.high-priority-gtp-remat"));
  CHECK(r.warned("gtp-remat.high-priority-expert-gtp-remat"));
  // seed arguments.py:1389-1393
  r = run_d(mrtest::with(egtp + std::vector<std::string>{"--cuda-graph-impl", "local"}), {}, &blackwell);
  CHECK(r.exit == 1);
  CHECK(r.rule == "gtp-remat.cuda-graphs-node-priority");
  r = run_d(mrtest::with(egtp + std::vector<std::string>{"--cuda-graph-impl", "local"}),
            {{"CUDA_GRAPHS_USE_NODE_PRIORITY", "1"}}, &blackwell);
  CHECK(r.rule != "gtp-remat.cuda-graphs-node-priority");
  // Hopper: no node-priority requirement.
  r = run_d(mrtest::with(egtp + std::vector<std::string>{"--cuda-graph-impl", "local"}));
  CHECK(r.rule != "gtp-remat.cuda-graphs-node-priority");
}

// ---------------------------------------------------------------------------------------------------------
// Bias fusions (seed arguments.py:1453-1459 validate_args)

TEST_CASE("part D: bias fusion and add_qkv_bias follow add_bias_linear", "[part-d]") {
  struct Case {
    std::vector<std::string> extra;
    bool bias_gelu_fusion, add_qkv_bias;
  };
  const Case cases[] = {
      {{}, true, true},                                            // seed 1458: add_bias_linear -> add_qkv_bias
      {{"--disable-bias-linear"}, false, false},                   // seed 1454-1455
      {{"--disable-bias-linear", "--add-qkv-bias"}, false, true},  // qkv bias kept when asked for
      {{"--no-bias-gelu-fusion"}, false, true},
  };
  for (const auto& c : cases) {
    auto r = run_d(mrtest::with(c.extra));
    CHECK(r.exit == 0);
    CHECK(r["bias_gelu_fusion"] == mr::Value(c.bias_gelu_fusion));
    CHECK(r["add_qkv_bias"] == mr::Value(c.add_qkv_bias));
  }
}

// ---------------------------------------------------------------------------------------------------------
// QK-clip and attention-logit logging (seed arguments.py:1461-1472 validate_args)

TEST_CASE("part D: QK-clip checks", "[part-d]") {
  auto old_te = target("sm_90", "2.8.0");
  // seed arguments.py:1462
  auto r = run_d(mrtest::with({"--qk-clip"}), {}, &old_te);
  CHECK(r.rule == "qk-clip.te-version");
  CHECK(run_d(mrtest::with({"--qk-clip"})).exit == 0);
  CHECK(run_d(mrtest::base_args(), {}, &old_te).rule != "qk-clip.te-version");
  // seed arguments.py:1464
  for (const char* alpha : {"0", "1", "1.5", "-0.1"}) {
    INFO("--qk-clip-alpha " << alpha);
    CHECK(run_d(mrtest::with({"--qk-clip", "--qk-clip-alpha", alpha})).rule == "qk-clip.alpha-range");
  }
  CHECK(run_d(mrtest::with({"--qk-clip", "--qk-clip-alpha", "0.99"})).exit == 0);
  CHECK(run_d(mrtest::with({"--qk-clip-alpha", "2"})).exit == 0);  // not checked without --qk-clip
  // seed arguments.py:1466
  CHECK(run_d(mrtest::with({"--qk-clip", "--qk-clip-threshold", "0"})).rule == "qk-clip.threshold-positive");
  CHECK(run_d(mrtest::with({"--qk-clip", "--qk-clip-threshold", "0.5"})).exit == 0);
  // seed arguments.py:1470-1472
  CHECK(run_d(mrtest::with({"--log-max-attention-logit"}), {}, &old_te).rule ==
        "qk-clip.log-max-attention-logit-te-version");
  CHECK(run_d(mrtest::with({"--log-max-attention-logit"})).exit == 0);
}

// ---------------------------------------------------------------------------------------------------------
// Position embeddings (seed arguments.py:1474-1494 validate_args)

TEST_CASE("part D: position-embedding derivations", "[part-d]") {
  struct Case {
    std::vector<std::string> extra;
    const char* type;
    bool rope_fusion;
  };
  const Case cases[] = {
      {{}, "learned_absolute", false},                                          // seed 1477-1478
      {{"--use-rotary-position-embeddings"}, "rope", true},                     // seed 1475-1476
      {{"--position-embedding-type", "rope"}, "rope", true},
      {{"--position-embedding-type", "rope", "--no-rope-fusion"}, "rope", false},
      {{"--position-embedding-type", "yarn"}, "yarn", false},
      {{"--position-embedding-type", "none"}, "none", false},
      {{"--no-position-embedding", "--position-embedding-type", "rope"}, "rope", true},  // seed 1482 passes
  };
  for (const auto& c : cases) {
    auto r = run_d(mrtest::with(c.extra));
    INFO(c.type << " " << r.message);
    CHECK(r.exit == 0);
    CHECK(r["position_embedding_type"] == mr::Value(c.type));
    CHECK(r["apply_rope_fusion"] == mr::Value(c.rope_fusion));
  }
}

TEST_CASE("part D: position-embedding checks", "[part-d]") {
  // seed arguments.py:1482
  auto r = run_d(mrtest::with({"--no-position-embedding"}));
  CHECK(r.exit == 1);
  CHECK(r.rule == "position-embedding.no-position-embedding-deprecated");
  // seed arguments.py:1486-1489
  r = run_d(mrtest::with({"--position-embedding-type", "relative", "--transformer-impl", "local"}));
  CHECK(r.rule == "position-embedding.relative-needs-te");
  CHECK(run_d(mrtest::with({"--position-embedding-type", "relative"})).exit == 0);
  // seed arguments.py:1492-1494
  r = run_d(mrtest::with({"--position-embedding-type", "mrope"}));
  CHECK(r.rule == "position-embedding.mrope-section");
  CHECK(run_d(mrtest::with({"--position-embedding-type", "mrope", "--mrope-section", "2", "3", "3"})).exit == 0);
}

// ---------------------------------------------------------------------------------------------------------
// MoE spec, expert parallelism and router arguments (seed arguments.py:1496-1513 validate_args)

TEST_CASE("part D: MoE spec defaults", "[part-d]") {
  // seed arguments.py:1497-1498
  auto r = run_d(mrtest::with({"--num-experts", "0"}));
  CHECK(r.exit == 0);
  CHECK(r["num_experts"].is_none());
  CHECK(r["moe_ffn_hidden_size"].is_none());
  CHECK_FALSE(r.warned("moe-spec.ffn-hidden-size-default"));
  // seed arguments.py:1499-1501: ffn_hidden_size = 4 * 64 = 256 (seed 1160)
  r = run_d(mrtest::with({"--num-experts", "4"}));
  CHECK(r["moe_ffn_hidden_size"].as_int() == 256);
  CHECK(r.warned("moe-spec.ffn-hidden-size-default"));
  r = run_d(mrtest::with({"--num-experts", "4", "--ffn-hidden-size", "96"}));
  CHECK(r["moe_ffn_hidden_size"].as_int() == 96);
  r = run_d(mrtest::with({"--num-experts", "4", "--moe-ffn-hidden-size", "32"}));
  CHECK(r["moe_ffn_hidden_size"].as_int() == 32);
  CHECK_FALSE(r.warned("moe-spec.ffn-hidden-size-default"));
}

TEST_CASE("part D: expert parallelism needs a divisible number of experts", "[part-d]") {
  const Env w2 = {{"WORLD_SIZE", "2"}};
  // seed arguments.py:1505
  auto r = run_d(mrtest::with({"--expert-model-parallel-size", "2"}), w2);
  CHECK(r.exit == 1);
  CHECK(r.rule == "expert-parallel.needs-num-experts");
  // --num-experts 0 became None just before (seed 1497)
  r = run_d(mrtest::with({"--expert-model-parallel-size", "2", "--num-experts", "0"}), w2);
  CHECK(r.rule == "expert-parallel.needs-num-experts");
  // seed arguments.py:1506
  r = run_d(mrtest::with({"--expert-model-parallel-size", "2", "--num-experts", "3"}), w2);
  CHECK(r.rule == "expert-parallel.experts-divisible");
  CHECK(run_d(mrtest::with({"--expert-model-parallel-size", "2", "--num-experts", "4"}), w2).exit == 0);
  CHECK(run_d(mrtest::with({"--num-experts", "3"})).exit == 0);  // ep = 1: any count
}

TEST_CASE("part D: single-valued router arguments are unwrapped", "[part-d]") {
  // seed arguments.py:1510-1513
  auto r = run_d(mrtest::base_args());
  CHECK(r["moe_router_load_balancing_type"] == mr::Value("aux_loss"));
  CHECK(r["moe_aux_loss_coeff"].is_float());
  r = run_d(mrtest::with({"--moe-router-load-balancing-type", "seq_aux_loss", "--moe-aux-loss-coeff", "0.01"}));
  CHECK(r["moe_router_load_balancing_type"] == mr::Value("seq_aux_loss"));
  CHECK(r["moe_aux_loss_coeff"].is_float());
  CHECK(r["moe_aux_loss_coeff"].as_float() == Approx(0.01));
  r = run_d(mrtest::with(
      {"--moe-router-load-balancing-type", "seq_aux_loss", "aux_loss", "--moe-aux-loss-coeff", "0.01", "0.001"}));
  CHECK(r["moe_router_load_balancing_type"] == strs({"seq_aux_loss", "aux_loss"}));
  CHECK(r["moe_aux_loss_coeff"].is_list());
  CHECK(r["moe_aux_loss_coeff"].as_list().size() == 2);
}

// ---------------------------------------------------------------------------------------------------------
// torch_dcp / fsdp_dtensor checkpoint formats (seed arguments.py:1515-1525 validate_args)

TEST_CASE("part D: torch_dcp and fsdp_dtensor checkpoint formats", "[part-d]") {
  const std::vector<std::string> fsdp2 = {"--use-torch-fsdp2", "--no-gradient-accumulation-fusion",
                                          "--untie-embeddings-and-output-weights"};
  // seed arguments.py:1517
  auto r = run_d(mrtest::with({"--ckpt-format", "torch_dcp"}));
  CHECK(r.exit == 1);
  CHECK(r.rule == "torch-dcp.needs-torch-fsdp2");
  CHECK(run_d(mrtest::with(fsdp2 + std::vector<std::string>{"--ckpt-format", "torch_dcp"})).exit == 0);
  // seed arguments.py:1518
  r = run_d(mrtest::with(fsdp2 + std::vector<std::string>{"--ckpt-format", "torch_dcp", "--tensor-model-parallel-size",
                                                           "2"}),
            {{"WORLD_SIZE", "2"}});
  CHECK(r.rule == "torch-dcp.no-tensor-parallel");
  // seed arguments.py:1520: FSDP2 already refuses pipeline parallelism (seed 883), so run the section alone.
  CHECK(run_section(&mr::part_d::dcp_dtensor_formats,
                    {{"ckpt_format", "torch_dcp"}, {"use_torch_fsdp2", true}, {"pipeline_model_parallel_size", 2}}) ==
        "torch-dcp.no-pipeline-parallel");
  CHECK(run_section(&mr::part_d::dcp_dtensor_formats,
                    {{"ckpt_format", "torch_dcp"}, {"use_torch_fsdp2", true}, {"pipeline_model_parallel_size", 1}}) ==
        "");
  // seed arguments.py:1525
  r = run_d(mrtest::with({"--ckpt-format", "fsdp_dtensor"}));
  CHECK(r.rule == "fsdp-dtensor.needs-megatron-fsdp");
  CHECK(run_d(mrtest::with({"--ckpt-format", "fsdp_dtensor", "--use-megatron-fsdp"})).exit == 0);
}

// ---------------------------------------------------------------------------------------------------------
// --use-varlen-dataset and sequence packing (seed arguments.py:1527-1595 validate_args)

TEST_CASE("part D: --use-varlen-dataset selection", "[part-d]") {
  // seed arguments.py:1532
  auto r = run_d(mrtest::with({"--use-varlen-dataset", "--sft", "--calculate-per-token-loss"}));
  CHECK(r.exit == 1);
  CHECK(r.rule == "varlen.sft-exclusive");
  // seed arguments.py:1552-1555, 1570-1571: dp_balanced picked, sequence lengths vary.
  r = run_d(mrtest::with({"--use-varlen-dataset", "--calculate-per-token-loss"}));
  CHECK(r.exit == 0);
  CHECK(r["sequence_packing_scheduler"] == mr::Value("dp_balanced"));
  CHECK(r["variable_seq_lengths"] == mr::Value(true));
  // with dynamic CP the dynamic section (seed 1276) already picked default_dynamic_cp
  r = run_d(mrtest::with({"--use-varlen-dataset", "--calculate-per-token-loss", "--dynamic-context-parallel"}));
  CHECK(r.exit == 0);
  CHECK(r["sequence_packing_scheduler"] == mr::Value("default_dynamic_cp"));
  // seed arguments.py:1537
  r = run_d(real_data_args() + std::vector<std::string>{"--use-varlen-dataset", "--varlen-sbhd-validation",
                                                        "--sequence-packing-scheduler", "dp_balanced",
                                                        "--calculate-per-token-loss"});
  CHECK(r.rule == "varlen.sbhd-without-scheduler");
  // seed arguments.py:1543
  r = run_d(mrtest::with({"--use-varlen-dataset", "--varlen-sbhd-validation"}));
  CHECK(r.rule == "varlen.sbhd-without-mock-data");
  // Neighbour: SBHD validation on real data, no scheduler picked, lengths fixed.
  r = run_d(real_data_args() + std::vector<std::string>{"--use-varlen-dataset", "--varlen-sbhd-validation"});
  CHECK(r.exit == 0);
  CHECK(r["sequence_packing_scheduler"].is_none());
  CHECK(r["variable_seq_lengths"] == mr::Value(false));
}

TEST_CASE("part D: sequence-packing scheduler checks", "[part-d]") {
  // seed arguments.py:1562-1569
  auto r = run_d(mrtest::with({"--sequence-packing-scheduler", "default_dynamic_cp", "--calculate-per-token-loss"}));
  CHECK(r.exit == 1);
  CHECK(r.rule == "sequence-packing.dynamic-cp-scheduler");
  // seed arguments.py:1577
  r = run_d(mrtest::with({"--sequence-packing-scheduler", "dp_balanced"}));
  CHECK(r.rule == "sequence-packing.per-token-loss");
  r = run_d(mrtest::with({"--sequence-packing-scheduler", "dp_balanced", "--calculate-per-token-loss"}));
  CHECK(r.exit == 0);
  CHECK(r["variable_seq_lengths"] == mr::Value(true));
}

TEST_CASE("part D: packed-sequence buffer must hold --seq-length", "[part-d]") {
  // seed arguments.py:1580-1587: total CP ranks (x DP for default_dynamic_cp) x max_seqlen >= seq_length (128).
  struct Case {
    std::vector<std::string> extra;
    const char* world;
    bool ok;
  };
  const Case cases[] = {
      {{"--sequence-packing-scheduler", "dp_balanced", "--max-seqlen-per-dp-cp-rank", "128"}, "1", true},
      {{"--sequence-packing-scheduler", "dp_balanced", "--max-seqlen-per-dp-cp-rank", "127"}, "1", false},
      // dp_balanced does not count DP ranks: 1 x 64 < 128
      {{"--sequence-packing-scheduler", "dp_balanced", "--max-seqlen-per-dp-cp-rank", "64"}, "2", false},
      // default_dynamic_cp does: cp 1 x dp 2 x 64 = 128
      {{"--dynamic-context-parallel", "--max-seqlen-per-dp-cp-rank", "64"}, "2", true},
      {{"--dynamic-context-parallel", "--max-seqlen-per-dp-cp-rank", "63"}, "2", false},
      // context parallelism counts for both: cp 2 x 64 = 128
      {{"--sequence-packing-scheduler", "dp_balanced", "--max-seqlen-per-dp-cp-rank", "64", "--context-parallel-size",
        "2"},
       "2", true},
  };
  for (const auto& c : cases) {
    auto r = run_d(mrtest::with(c.extra + std::vector<std::string>{"--calculate-per-token-loss"}),
                   {{"WORLD_SIZE", c.world}, {"CUDA_DEVICE_MAX_CONNECTIONS", "1"}});
    INFO(r.message);
    if (c.ok) {
      CHECK(r.exit == 0);
    } else {
      CHECK(r.exit == 1);
      CHECK(r.rule == "sequence-packing.buffer-size");
    }
  }
}

TEST_CASE("part D: scheduler CUDA graphs need varlen samples, micro-batch 1 and a fixed batch", "[part-d]") {
  const std::vector<std::string> graphs = {"--sequence-packing-scheduler", "dp_balanced", "--calculate-per-token-loss",
                                           "--cuda-graph-impl", "transformer_engine"};
  // seed arguments.py:1589
  auto r = run_d(mrtest::with(graphs + std::vector<std::string>{"--micro-batch-size", "1"}));
  CHECK(r.rule == "sequence-packing.cuda-graph-varlen-mbs1");
  r = run_d(mrtest::with(graphs + std::vector<std::string>{"--use-varlen-dataset"}));  // micro-batch 2
  CHECK(r.rule == "sequence-packing.cuda-graph-varlen-mbs1");
  r = run_d(mrtest::with(graphs + std::vector<std::string>{"--use-varlen-dataset", "--micro-batch-size", "1"}));
  CHECK(r.rule != "sequence-packing.cuda-graph-varlen-mbs1");
  CHECK(r.rule != "sequence-packing.cuda-graph-fixed-batch");
  // Not transformer_engine graphs: no requirement.
  CHECK(run_d(mrtest::with({"--sequence-packing-scheduler", "dp_balanced", "--calculate-per-token-loss"})).exit == 0);
  // seed arguments.py:1593 (a schedule excludes --global-batch-size, seed 632)
  std::vector<std::string> no_gbs;
  for (const auto& w : mrtest::base_args()) no_gbs.push_back(w);
  no_gbs.erase(std::find(no_gbs.begin(), no_gbs.end(), "--global-batch-size"),
               std::find(no_gbs.begin(), no_gbs.end(), "--global-batch-size") + 2);
  r = run_d(no_gbs + graphs +
            std::vector<std::string>{"--use-varlen-dataset", "--micro-batch-size", "1", "--step-batch-size-schedule",
                                     "1:4,100:8"});
  CHECK(r.rule == "sequence-packing.cuda-graph-fixed-batch");
  CHECK(run_d(no_gbs + graphs + std::vector<std::string>{"--use-varlen-dataset", "--micro-batch-size", "1"}).exit == 0);
  // The same on the section alone.
  CHECK(run_section(&mr::part_d::sequence_packing,
                    {{"sequence_packing_scheduler", "dp_balanced"},
                     {"calculate_per_token_loss", true},
                     {"cuda_graph_impl", "transformer_engine"},
                     {"use_varlen_dataset", true},
                     {"micro_batch_size", 1},
                     {"step_batch_size_schedule", "1:4,100:8"}}) == "sequence-packing.cuda-graph-fixed-batch");
  CHECK(run_section(&mr::part_d::sequence_packing, {{"sequence_packing_scheduler", "dp_balanced"},
                                                    {"calculate_per_token_loss", true},
                                                    {"cuda_graph_impl", "transformer_engine"},
                                                    {"use_varlen_dataset", true},
                                                    {"micro_batch_size", 1}}) == "");
}

// ---------------------------------------------------------------------------------------------------------
// The whole chain

TEST_CASE("part D: base_args through the whole chain", "[part-d]") {
  auto r = mrtest::run(mrtest::base_args());
  CHECK(r["sequence_parallel"] == mr::Value(false));
  CHECK(r["variable_seq_lengths"] == mr::Value(false));
  CHECK(r["expert_tensor_parallel_num_weight_shards"].as_int() == 1);
  CHECK(r["expert_gtp_weight_remat_size"].as_int() == 1);
  CHECK(r["add_qkv_bias"] == mr::Value(true));
  CHECK(r["apply_rope_fusion"] == mr::Value(false));
  CHECK(r["moe_router_load_balancing_type"] == mr::Value("aux_loss"));
}
