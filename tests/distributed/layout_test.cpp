// Megatron's rank layout (lib/parallel/layout.h): every group of a job, against tables written from the rules of
// megatron/core/parallel_state.py (initialize_model_parallel, RankGenerator, generate_masked_orthogonal_rank_groups).
#include <catch2/catch.hpp>

#include <cstdio>
#include <map>

#include "config/validate/resolve.h"
#include "launch/launch_env.h"
#include "launch/worker_input.h"
#include "parallel/layout.h"
#include "proc.h"
#include "../config/validated_fills.h"

using mr::parallel::Layout;
using mr::parallel::LayoutSpec;
using mr::parallel::RankGroups;

namespace {

LayoutSpec spec(int64_t world, int64_t tp = 1, int64_t pp = 1, int64_t cp = 1, int64_t ep = 1) {
  LayoutSpec s;
  s.world_size = world;
  s.tp = tp;
  s.pp = pp;
  s.cp = cp;
  s.ep = ep;
  return s;
}

RankGroups singletons(int n) {
  RankGroups g;
  for (int i = 0; i < n; ++i) g.push_back({i});
  return g;
}

// Every group kind named in `want` must match exactly (groups in Megatron's order).
void check_groups(const Layout& L, const std::map<std::string, RankGroups>& want) {
  for (const auto& [name, groups] : want) {
    INFO("group kind " << name);
    REQUIRE(L.find(name) != nullptr);
    CHECK(L.at(name).groups == groups);
  }
}

}  // namespace

// ---- the rank generator ---------------------------------------------------------------------------------------

TEST_CASE("masked orthogonal groups: the docstring example of generate_masked_orthogonal_rank_groups", "[dist][layout]") {
  // parallel_size = [tp, dp, pp] = [2, 3, 4], mask selects dp: group k = tp_rank + pp_rank*6 + range(3)*2.
  RankGroups dp = mr::parallel::masked_orthogonal_rank_groups(24, {2, 3, 4}, {false, true, false});
  REQUIRE(dp.size() == 8);
  CHECK(dp[0] == mr::parallel::RankList{0, 2, 4});
  CHECK(dp[1] == mr::parallel::RankList{1, 3, 5});
  CHECK(dp[2] == mr::parallel::RankList{6, 8, 10});
  CHECK(dp[7] == mr::parallel::RankList{19, 21, 23});
  // The docstring of the algorithm: world 8, order tp-pp-dp, sizes 2-2-2 -> dp groups [[0,4],[1,5],[2,6],[3,7]].
  CHECK(mr::parallel::masked_orthogonal_rank_groups(8, {2, 2, 2}, {false, false, true}) ==
        RankGroups{{0, 4}, {1, 5}, {2, 6}, {3, 7}});
}

TEST_CASE("rank generator: unknown or unplaced dimensions are errors", "[dist][layout]") {
  CHECK_THROWS_AS(mr::parallel::RankGenerator(2, 2, 1, 1, 2, "tp-cp-ep-dp-pp"), mr::parallel::LayoutError);  // EP and CP
  CHECK_THROWS_AS(mr::parallel::RankGenerator(2, 1, 2, 1, 1, "dp-pp"), mr::parallel::LayoutError);           // tp unplaced
  mr::parallel::RankGenerator g(2, 1, 2, 1, 1, "tp-dp");  // pp, ep, cp of size 1 are appended
  CHECK(g.order() == "tp-dp-pp-ep-cp-gtp_remat");
  CHECK(g.get_ranks("tp") == RankGroups{{0, 1}, {2, 3}});
  CHECK(mr::parallel::RankGenerator(2, 1, 2, 1, 1, "tp-dp", /*rank_offset=*/4).get_ranks("dp") == RankGroups{{4, 6}, {5, 7}});
}

// ---- the acceptance configurations (4 ranks) ------------------------------------------------------------------

TEST_CASE("layout TP=2 DP=2", "[dist][layout]") {
  Layout L = Layout::build(spec(4, 2));
  CHECK(L.dp == 2);
  check_groups(L, {{"tp", {{0, 1}, {2, 3}}},
                   {"dp", {{0, 2}, {1, 3}}},
                   {"pp", singletons(4)},
                   {"cp", singletons(4)},
                   {"dp-cp", {{0, 2}, {1, 3}}},
                   {"tp-pp", {{0, 1}, {2, 3}}},
                   {"ep", singletons(4)},
                   {"expert-tp", {{0, 1}, {2, 3}}},
                   {"expert-dp", {{0, 2}, {1, 3}}},
                   {"embedding", singletons(4)},
                   {"position-embedding", singletons(4)},
                   {"tp-dp-cp", {{0, 1, 2, 3}}},
                   {"tp-dp", {{0, 1, 2, 3}}},
                   {"tp-cp", {{0, 1}, {2, 3}}},
                   {"expert-tp-ep", {{0, 1}, {2, 3}}},
                   {"expert-tp-ep-pp", {{0, 1}, {2, 3}}},
                   {"intra-dist-opt", {{0, 1, 2, 3}}}});
}

TEST_CASE("layout TP=2 PP=2", "[dist][layout]") {
  Layout L = Layout::build(spec(4, 2, 2));
  CHECK(L.dp == 1);
  check_groups(L, {{"tp", {{0, 1}, {2, 3}}},
                   {"pp", {{0, 2}, {1, 3}}},
                   {"dp", singletons(4)},
                   {"cp", singletons(4)},
                   {"dp-cp", singletons(4)},
                   {"tp-pp", {{0, 1, 2, 3}}},
                   {"ep", singletons(4)},
                   {"expert-tp", {{0, 1}, {2, 3}}},
                   {"expert-dp", singletons(4)},
                   {"embedding", {{0, 2}, {1, 3}}},  // first and last stage (tied embeddings)
                   {"position-embedding", {{0}, {1}}},
                   {"expert-tp-ep-pp", {{0, 1, 2, 3}}}});
}

TEST_CASE("layout CP=2 DP=2", "[dist][layout]") {
  Layout L = Layout::build(spec(4, 1, 1, 2));
  check_groups(L, {{"cp", {{0, 1}, {2, 3}}},
                   {"dp", {{0, 2}, {1, 3}}},
                   {"dp-cp", {{0, 1, 2, 3}}},
                   {"tp", singletons(4)},
                   {"pp", singletons(4)},
                   {"tp-pp", singletons(4)},
                   {"tp-cp", {{0, 1}, {2, 3}}},
                   {"ep", singletons(4)},
                   {"expert-tp", singletons(4)},
                   {"expert-dp", {{0, 1, 2, 3}}},  // experts have no CP: expert DP spans CP x DP
                   {"embedding", singletons(4)},
                   {"intra-dist-opt", {{0, 1, 2, 3}}}});
}

TEST_CASE("layout EP=2 (MoE)", "[dist][layout]") {
  Layout L = Layout::build(spec(4, 1, 1, 1, 2));
  CHECK(L.expert_dp == 2);
  check_groups(L, {{"tp", singletons(4)},
                   {"dp", {{0, 1, 2, 3}}},
                   {"ep", {{0, 1}, {2, 3}}},
                   {"expert-tp", singletons(4)},
                   {"expert-dp", {{0, 2}, {1, 3}}},
                   {"expert-tp-ep", {{0, 1}, {2, 3}}},
                   {"expert-tp-ep-pp", {{0, 1}, {2, 3}}},
                   {"intra-dist-opt", {{0, 1, 2, 3}}}});
}

TEST_CASE("layout PP=2 DP=2 with the tp-pp-dp mapping", "[dist][layout]") {
  LayoutSpec s = spec(4, 1, 2);
  // Default order tp-cp-ep-dp-pp: rank = dp + 2 pp.
  check_groups(Layout::build(s), {{"pp", {{0, 2}, {1, 3}}}, {"dp", {{0, 1}, {2, 3}}}});
  // --use-tp-pp-dp-mapping: order tp-cp-ep-pp-dp, rank = pp + 2 dp.
  s.tp_pp_dp_mapping = true;
  Layout L = Layout::build(s);
  check_groups(L, {{"pp", {{0, 1}, {2, 3}}},
                   {"dp", {{0, 2}, {1, 3}}},
                   {"dp-cp", {{0, 2}, {1, 3}}},
                   {"tp-pp", {{0, 1}, {2, 3}}},
                   {"embedding", {{0, 1}, {2, 3}}},
                   {"position-embedding", {{0}, {2}}},
                   {"expert-dp", {{0, 2}, {1, 3}}}});
}

TEST_CASE("layout TP=2 PP=2 DP=2 on 8 ranks, both orders", "[dist][layout]") {
  // The example of initialize_model_parallel's docstring (scaled to 8 ranks).
  Layout L = Layout::build(spec(8, 2, 2));
  check_groups(L, {{"tp", {{0, 1}, {2, 3}, {4, 5}, {6, 7}}},
                   {"dp", {{0, 2}, {1, 3}, {4, 6}, {5, 7}}},
                   {"pp", {{0, 4}, {1, 5}, {2, 6}, {3, 7}}},
                   {"tp-pp", {{0, 1, 4, 5}, {2, 3, 6, 7}}},
                   {"embedding", {{0, 4}, {1, 5}, {2, 6}, {3, 7}}},
                   {"position-embedding", {{0}, {1}, {2}, {3}}}});
  LayoutSpec m = spec(8, 2, 2);
  m.tp_pp_dp_mapping = true;
  check_groups(Layout::build(m), {{"tp", {{0, 1}, {2, 3}, {4, 5}, {6, 7}}},
                                  {"pp", {{0, 2}, {1, 3}, {4, 6}, {5, 7}}},
                                  {"dp", {{0, 4}, {1, 5}, {2, 6}, {3, 7}}},
                                  {"tp-pp", {{0, 1, 2, 3}, {4, 5, 6, 7}}}});
}

// ---- the less common groups -----------------------------------------------------------------------------------

TEST_CASE("layout: expert TP differs from TP", "[dist][layout]") {
  // TP=2, EP=2, expert TP=1 on 8 ranks: expert grid tp=1 ep=2 dp=4.
  LayoutSpec s = spec(8, 2, 1, 1, 2);
  s.etp = 1;
  Layout L = Layout::build(s);
  CHECK(L.expert_dp == 4);
  check_groups(L, {{"expert-tp", singletons(8)},
                   {"ep", {{0, 1}, {2, 3}, {4, 5}, {6, 7}}},
                   {"expert-dp", {{0, 2, 4, 6}, {1, 3, 5, 7}}},
                   {"intra-dist-opt", {{0, 1, 2, 3, 4, 5, 6, 7}}}});
}

TEST_CASE("layout: hierarchical context parallelism", "[dist][layout]") {
  // CP=4 split 2 x 2 (create_hierarchical_groups: level 0 pairs adjacent ranks, level 1 strides by 2).
  LayoutSpec s = spec(8, 1, 1, 4);
  s.hierarchical_cp = {2, 2};
  Layout L = Layout::build(s);
  check_groups(L, {{"cp", {{0, 1, 2, 3}, {4, 5, 6, 7}}},
                   {"hierarchical-cp-0", {{0, 1}, {2, 3}, {4, 5}, {6, 7}}},
                   {"hierarchical-cp-1", {{0, 2}, {1, 3}, {4, 6}, {5, 7}}}});
  s.hierarchical_cp = {2, 4};
  CHECK_THROWS_AS(Layout::build(s), mr::parallel::LayoutError);  // product 8 != CP 4
}

TEST_CASE("layout: distributed-optimizer instances (partial data parallelism)", "[dist][layout]") {
  // DP=8 in two instances: intra groups are contiguous halves of DP x CP, the inter group pairs rank i with i+4.
  LayoutSpec s = spec(8);
  s.num_distributed_optimizer_instances = 2;
  Layout L = Layout::build(s);
  check_groups(L, {{"intra-dp-cp", {{0, 1, 2, 3}, {4, 5, 6, 7}}},
                   {"intra-expert-dp", {{0, 1, 2, 3}, {4, 5, 6, 7}}},
                   {"inter-expert-dp", {{0, 4}, {1, 5}, {2, 6}, {3, 7}}},
                   {"intra-dist-opt", {{0, 1, 2, 3}, {4, 5, 6, 7}}}});
  s.num_distributed_optimizer_instances = 3;
  CHECK_THROWS_AS(Layout::build(s), mr::parallel::LayoutError);
}

TEST_CASE("layout: hybrid (dynamic) context parallelism groups", "[dist][layout]") {
  LayoutSpec s = spec(8, 1, 1, 2);
  s.hybrid_cp = true;
  Layout L = Layout::build(s);
  // DP x CP = 8: power-of-two slices of sizes 2 and 4.
  check_groups(L, {{"hybrid-dp-cp-2", {{0, 1}, {2, 3}, {4, 5}, {6, 7}}}, {"hybrid-dp-cp-4", {{0, 1, 2, 3}, {4, 5, 6, 7}}}});
  CHECK(L.find("hybrid-dp-cp-8") == nullptr);
}

TEST_CASE("layout: embedding groups follow pretrain_gpt", "[dist][layout]") {
  LayoutSpec s = spec(4, 1, 4);
  CHECK(Layout::build(s).at("embedding").groups == RankGroups{{0, 3}});
  s.untie_embeddings = true;  // untied: the first stage only
  CHECK(Layout::build(s).at("embedding").groups == RankGroups{{0}});
  s.mtp_num_layers = 1;  // MTP layers on the last stage
  CHECK(Layout::build(s).at("embedding").groups == RankGroups{{0, 3}});
  s.pp_layout_stages = {"Et", "tm", "t", "tL"};  // a custom layout places MTP on stage 1
  CHECK(Layout::build(s).at("embedding").groups == RankGroups{{0, 1}});
  s.core_embedding_ranks = true;
  CHECK(Layout::build(s).at("embedding").groups == RankGroups{{0, 3}});
  CHECK(Layout::build(s).at("position-embedding").groups == RankGroups{{0}});
}

TEST_CASE("layout: initialize_model_parallel's errors", "[dist][layout]") {
  CHECK_THROWS_WITH(Layout::build(spec(6, 4)), Catch::Contains("not divisible"));
  CHECK_THROWS_WITH(Layout::build(spec(4, 1, 1, 1, 3)), Catch::Contains("expert"));
  LayoutSpec v = spec(4);
  v.virtual_pp = 2;
  CHECK_THROWS_WITH(Layout::build(v), Catch::Contains("pipeline"));
  LayoutSpec m = spec(8, 1, 2, 1, 4);  // tp-pp-dp order with PP>1 needs equal dense and expert DP
  m.tp_pp_dp_mapping = true;
  CHECK_THROWS_WITH(Layout::build(m), Catch::Contains("data-parallel sizes"));
  LayoutSpec sharp = spec(4);
  sharp.sharp_enabled_group = "dp";
  CHECK_THROWS_WITH(Layout::build(sharp), Catch::Contains("--use-sharp"));
}

TEST_CASE("layout from a resolved namespace", "[dist][layout]") {
  mr::Invocation inv;
  inv.config_files = {std::string(MR_SOURCE_DIR) + "/configs/default.yaml"};
  for (const char* w : {"--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "2"})
    inv.cli.push_back(mr::Token{w, {}});
  inv.world_size = 8;
  inv.env.vars["CUDA_DEVICE_MAX_CONNECTIONS"] = "1";
  mr::Outcome out = mr::resolve(mr::Schema::megatron(), inv);
  INFO((out.diagnostics.empty() ? "" : out.diagnostics.front().message));
  REQUIRE(out.ok());
  LayoutSpec s = LayoutSpec::from_args(mr::Args::from(out.parsed.ns));
  CHECK(s.world_size == 8);
  CHECK(s.tp == 2);
  CHECK(s.pp == 2);
  REQUIRE(s.etp);
  CHECK(*s.etp == 2);
  CHECK(Layout::build(s).dp == 2);
}

// ---- megatron-run topology ------------------------------------------------------------------------------------

TEST_CASE("topology --world-size 8 for TP=2 PP=2 DP=2 matches Megatron's groups", "[dist][layout][topology]") {
  mrtest::TempDir dir;
  std::vector<std::string> argv = {mrtest::megatron_run(), "topology", "--world-size", "8", "--format", "json"};
  for (const std::string& a : mrtest::job_args({"--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "2"}))
    argv.push_back(a);
  std::vector<mrtest::Proc> p = {mrtest::start(argv, {{"CUDA_DEVICE_MAX_CONNECTIONS", "1"}}, dir, "topology")};
  mrtest::wait_all(p, std::chrono::seconds(60));
  INFO(p[0].err());
  REQUIRE(p[0].exit_code() == 0);
  mr::Value v = mr::Value::parse_json(p[0].out());
  REQUIRE(v.is_object());
  std::map<std::string, std::string> groups;
  int64_t world = 0;
  for (const auto& [k, x] : v.as_object()) {
    if (k == "world_size") world = x.as_int();
    if (k == "groups")
      for (const auto& [g, l] : x.as_object()) {
        std::string compact;
        for (char c : l.json())
          if (c != ' ') compact += c;
        groups[g] = compact;
      }
  }
  CHECK(world == 8);
  // megatron/core/parallel_state.py, initialize_model_parallel with TP=2 PP=2 on 8 ranks (DP=2).
  CHECK(groups["tp"] == "[[0,1],[2,3],[4,5],[6,7]]");
  CHECK(groups["pp"] == "[[0,4],[1,5],[2,6],[3,7]]");
  CHECK(groups["dp"] == "[[0,2],[1,3],[4,6],[5,7]]");
  CHECK(groups["cp"] == "[[0],[1],[2],[3],[4],[5],[6],[7]]");
  CHECK(groups["dp-cp"] == "[[0,2],[1,3],[4,6],[5,7]]");
  CHECK(groups["tp-pp"] == "[[0,1,4,5],[2,3,6,7]]");
  CHECK(groups["ep"] == "[[0],[1],[2],[3],[4],[5],[6],[7]]");
  CHECK(groups["expert-tp"] == "[[0,1],[2,3],[4,5],[6,7]]");
  CHECK(groups["expert-dp"] == "[[0,2],[1,3],[4,6],[5,7]]");
  CHECK(groups["embedding"] == "[[0,4],[1,5],[2,6],[3,7]]");
  CHECK(groups["position-embedding"] == "[[0],[1],[2],[3]]");

  // The text form lists the same groups; a bad layout is exit 1 with a message.
  std::vector<std::string> text = {mrtest::megatron_run(), "topology", "--world-size", "8"};
  for (const std::string& a : mrtest::job_args({"--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "2"}))
    text.push_back(a);
  std::vector<mrtest::Proc> t = {mrtest::start(text, {{"CUDA_DEVICE_MAX_CONNECTIONS", "1"}}, dir, "text")};
  std::vector<std::string> bad = {mrtest::megatron_run(), "topology", "--world-size", "6"};
  for (const std::string& a : mrtest::job_args({"--tensor-model-parallel-size", "4"})) bad.push_back(a);
  t.push_back(mrtest::start(bad, {{"CUDA_DEVICE_MAX_CONNECTIONS", "1"}}, dir, "bad"));
  mrtest::wait_all(t, std::chrono::seconds(60));
  CHECK(t[0].exit_code() == 0);
  CHECK_THAT(t[0].out(), Catch::Contains("tp-pp") && Catch::Contains("[0, 1, 4, 5] [2, 3, 6, 7]"));
  CHECK(t[1].exit_code() == 1);
  CHECK_THAT(t[1].err(), Catch::Contains("world size"));
}

// ---- launch environment and worker input ----------------------------------------------------------------------

TEST_CASE("launch environment: torchrun and SLURM variables", "[dist][launch]") {
  auto env_of = [](std::map<std::string, std::string> m) {
    return [m](const std::string& k) -> std::optional<std::string> {
      auto it = m.find(k);
      if (it == m.end()) return std::nullopt;
      return it->second;
    };
  };
  CHECK_FALSE(mr::launch::launch_info(env_of({})));
  auto t = mr::launch::launch_info(env_of({{"RANK", "3"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "2"},
                                         {"MASTER_ADDR", "node7"}, {"MASTER_PORT", "29400"},
                                         {"TORCHELASTIC_USE_AGENT_STORE", "True"}, {"TORCHELASTIC_RESTART_COUNT", "2"}}));
  REQUIRE(t);
  CHECK(t->source == mr::launch::LaunchInfo::Source::Torchrun);
  CHECK(t->rank == 3);
  CHECK(t->world_size == 4);
  CHECK(t->local_rank == 1);
  CHECK(t->local_world_size == 2);
  CHECK(t->master_addr == "node7");
  CHECK(t->master_port == 29400);
  CHECK(t->agent_store);
  CHECK(t->restart_count == "2");

  auto s = mr::launch::launch_info(env_of({{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "1"}, {"SLURM_STEP_ID", "0"},
                                         {"SLURM_NTASKS_PER_NODE", "4(x2)"}, {"SLURM_JOB_NODELIST", "gpu[017-018],cpu1"},
                                         {"SLURM_JOB_ID", "123456"}}));
  REQUIRE(s);
  CHECK(s->source == mr::launch::LaunchInfo::Source::Slurm);
  CHECK(s->rank == 5);
  CHECK(s->world_size == 8);
  CHECK(s->local_rank == 1);
  CHECK(s->local_world_size == 4);
  CHECK(s->master_addr == "gpu017");
  CHECK(s->master_port == 20000 + 2 * ((123456 % 4500 * 97 + 0) % 4500));  // step 0
  // torchrun's variables win over SLURM's.
  auto both = mr::launch::launch_info(env_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "a"}, {"MASTER_PORT", "1"},
                                            {"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "8"}}));
  REQUIRE(both);
  CHECK(both->world_size == 2);

  CHECK(mr::launch::slurm_first_host("n1,n2") == "n1");
  CHECK(mr::launch::slurm_first_host("node[3,5-7]") == "node3");
  CHECK(mr::launch::slurm_first_host("rack[01-02]-gpu") == "rack01-gpu");
  CHECK(mr::launch::slurm_first_host("a[08-10]b[1-2]") == "a08b1");  // every bracket group by its first value
  CHECK(mr::launch::slurm_first_host("a[08-10]b[1-2],c7") == "a08b1");
  CHECK_THROWS_WITH(mr::launch::launch_info(env_of({{"RANK", "x"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "a"}, {"MASTER_PORT", "1"}})),
                    Catch::Contains("RANK"));
  CHECK_THROWS_WITH(mr::launch::launch_info(env_of({{"RANK", "2"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "a"}, {"MASTER_PORT", "1"}})),
                    Catch::Contains("outside"));
  CHECK_THROWS_WITH(mr::launch::launch_info(env_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}})), Catch::Contains("MASTER_ADDR"));
  // An empty MASTER_ADDR, or one with a blank or control character, is refused at once (the store would retry it
  // until the distributed timeout); a well-formed name is left to the store's retries.
  for (const char* bad : {"", " ", "a b", "\x01" "bad", "node7\n"}) {
    CHECK_THROWS_WITH(mr::launch::launch_info(env_of({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"MASTER_ADDR", bad}, {"MASTER_PORT", "29500"}})),
                      Catch::Contains("MASTER_ADDR=") && Catch::Contains("is not a host name or address"));
    CHECK_THROWS_WITH(mr::launch::launch_info(env_of({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}, {"SLURM_STEPID", "3"},
                                                      {"MASTER_ADDR", bad}})),
                      Catch::Contains("MASTER_ADDR="));
  }
  CHECK(mr::launch::launch_info(env_of({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"MASTER_ADDR", "nonexistent.invalid"},
                                        {"MASTER_PORT", "29500"}}))->master_addr == "nonexistent.invalid");
  CHECK(mr::launch::launch_info(env_of({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"MASTER_ADDR", "::1"}, {"MASTER_PORT", "1"}}))
            ->master_addr == "::1");
}

TEST_CASE("worker input round trip and config fingerprints", "[dist][launch]") {
  mr::launch::WorkerInput in;
  in.ns.set("tensor_model_parallel_size", mr::Value(2), {});
  in.ns.set("rank", mr::Value(3), {});
  in.ns.set("lr", mr::Value(0.0003), {});
  mrtest::fill_as_validated(in.ns);  // the launcher sends a validated namespace
  in.backend_explicit = true;
  in.log_level = "info";
  in.argv = {"--lr", "3e-4"};
  in.target.te_version = "2.0.0";
  mr::launch::WorkerInput out = mr::launch::WorkerInput::decode(in.encode());
  CHECK(out.target.te_version == "2.0.0");  // --target-te-version travels (remainders follow it)
  mr::launch::WorkerInput plain;
  mrtest::fill_as_validated(plain.ns);
  CHECK(mr::launch::WorkerInput::decode(plain.encode()).target.te_version == mr::TargetEnv{}.te_version);
  // A namespace without what validation always gives (--global-batch-size ...) is no worker's: refused, not
  // defaulted (config/args.h).
  CHECK_THROWS_WITH(mr::launch::WorkerInput::decode(mr::launch::WorkerInput{}.encode()),
                    Catch::Contains("though validation always gives it one"));
  CHECK(out.backend_explicit);
  CHECK(out.log_level == "info");
  CHECK(out.argv == in.argv);
  CHECK(out.ns["tensor_model_parallel_size"].as_int() == 2);
  CHECK(out.ns["lr"].as_float() == 0.0003);

  // The rank is not part of the fingerprint; other values are.
  mr::Namespace other = out.ns;
  other.set("rank", mr::Value(0), {});
  CHECK(mr::launch::config_fingerprint(other) == mr::launch::config_fingerprint(out.ns));
  other.set("lr", mr::Value(0.1), {});
  CHECK(mr::launch::fingerprint_diff(mr::launch::config_fingerprint(other), mr::launch::config_fingerprint(out.ns)) ==
        std::vector<std::string>{"lr"});
  // The typed view is rebuilt from the namespace.
  CHECK(out.args.tensor_model_parallel_size == 2);
  CHECK(out.args.lr == 0.0003);
  CHECK(out.args.rank == 3);
  CHECK(mr::Schema::megatron().flag_for_dest("tensor_model_parallel_size") == "--tensor-model-parallel-size");
  CHECK_THROWS(mr::launch::WorkerInput::decode("{\"version\": 1}"));

  int fd = mr::launch::memfd_with("hello");
  CHECK(mr::launch::read_fd(fd) == "hello");
  close(fd);
}

TEST_CASE("layout: world sizes beyond what is laid out and sizes whose product overflows are LayoutErrors", "[dist][layout][overflow]") {
  using mr::parallel::LayoutError;
  CHECK_THROWS_WITH(Layout::build(spec(mr::parallel::kMaxLayoutRanks * 2)), Catch::Contains("beyond the 1048576 ranks"));
  CHECK_THROWS_WITH(Layout::build(spec(INT64_MAX)), Catch::Contains("beyond the 1048576 ranks"));
  // TP x PP beyond 64 bits cannot divide the world size (it wrapped to 0 before: a division by zero).
  CHECK_THROWS_WITH(Layout::build(spec(8, 4294967296, 4294967296)), Catch::Contains("a product beyond 64 bits"));
  LayoutSpec ep = spec(8);
  ep.ep = 4294967296;
  ep.etp = 4294967296;
  CHECK_THROWS_WITH(Layout::build(ep), Catch::Contains("a product beyond 64 bits"));
  LayoutSpec h = spec(8, 1, 1, 4);
  h.hierarchical_cp = {4294967296, 4294967296};
  CHECK_THROWS_WITH(Layout::build(h), Catch::Contains("non-positive or beyond-64-bit product"));
  CHECK_THROWS_AS(mr::parallel::RankGenerator(4294967296, 1, 4294967296, 1, 1, "tp-cp-ep-dp-pp"), LayoutError);
  // The neighbour: a large but laid-out world.
  CHECK(Layout::build(spec(4096, 8, 4)).dp == 128);
}
