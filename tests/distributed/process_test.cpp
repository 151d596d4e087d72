// Multi-process tests on loopback: 4 CPU ranks of `megatron-run` (each execs megatron-run-worker) build
// Megatron's groups on Gloo, check an all-reduce in every group, and fail cleanly when a rank dies, never
// arrives, or runs a different config (a rank killed mid-collective: runtime_diagnosis_test.cpp). Every test has a
// hard timeout (mrtest::wait_all kills what is left).
#include <catch2/catch.hpp>

#include <sched.h>

#include <cstdlib>
#include <map>
#include <set>

#include "config/value.h"
#include "parallel/layout.h"
#include "distributed/store.h"
#include "proc.h"

using mrtest::Proc;
using mrtest::TempDir;

namespace {

using Groups = std::map<std::string, std::vector<int>>;

struct Report {
  Groups groups;
  std::map<std::string, double> sums;
  std::string backend;
};

Report read_report(const std::string& path) {
  Report r;
  mr::Value v = mr::Value::parse_json(mrtest::slurp(path));
  for (const auto& [k, x] : v.as_object()) {
    if (k == "backend") r.backend = x.as_str();
    if (k == "groups")
      for (const auto& [g, l] : x.as_object()) {
        std::vector<int> ranks;
        for (const mr::Value& e : l.as_list()) ranks.push_back(static_cast<int>(e.as_int()));
        r.groups[g] = ranks;
      }
    if (k == "sums")
      for (const auto& [g, s] : x.as_object()) r.sums[g] = s.as_float();
  }
  return r;
}

// The group of each kind every rank must report: rank -> kind -> ranks. Written from Megatron's rules (see
// layout_test.cpp for the same tables as whole layouts).
using Table = std::map<std::string, std::vector<std::vector<int>>>;

// MR_TEST_BACKEND=nccl (scripts/gpu-check-distributed.sh): the same jobs on NCCL, where 4 GPUs are visible.
std::string test_backend() {
  const char* b = std::getenv("MR_TEST_BACKEND");
  return b && *b ? b : "gloo";
}

// `head` (a program: megatron-run, or torchrun and its options), then the bring-up job with `extra` (bring_up_args).
std::vector<std::string> bring_up_argv(std::vector<std::string> head, const std::vector<std::string>& extra = {}) {
  for (const std::string& a : mrtest::bring_up_args(extra)) head.push_back(a);
  return head;
}

// The environment of a launcher's job with TP > 1 on the default target, `timeout_s` for its collectives, whose
// ranks write their reports to dir/report.<rank>.json.
std::map<std::string, std::string> report_env(const TempDir& dir, const std::string& timeout_s) {
  return {{"CUDA_DEVICE_MAX_CONNECTIONS", "1"}, {"MR_DIST_TIMEOUT_S", timeout_s}, {"MR_DIST_REPORT", dir / "report."}};
}

// Rank 0 of a two-rank job (`argv0`) and rank 1 (`argv1`, told the job has `world1` ranks), meeting at `port`
// with a 20 s distributed timeout: ranks that disagree.
std::vector<Proc> two_ranks(const std::vector<std::string>& argv0, const std::vector<std::string>& argv1, int world1,
                            int port, const TempDir& dir) {
  return {mrtest::start(argv0, mrtest::rank_env(0, 2, port, {{"MR_DIST_TIMEOUT_S", "20"}}), dir, "r0"),
          mrtest::start(argv1, mrtest::rank_env(1, world1, port, {{"MR_DIST_TIMEOUT_S", "20"}}), dir, "r1", 1)};
}

void run_layout_job(std::vector<std::string> flags, const Table& table) {
  const std::string backend = test_backend();
  if (backend == "nccl") {
    if (mr::distributed::gpu_count() < 4) {
      WARN("MR_TEST_BACKEND=nccl but only " << mr::distributed::gpu_count() << " GPU(s) are visible: skipping this 4-rank job");
      return;
    }
    flags.insert(flags.end(), {"--distributed-backend", "nccl"});
  }
  TempDir dir;
  std::vector<Proc> procs =
      mrtest::start_job(4, mrtest::bring_up_args(flags), dir, {{"MR_DIST_REPORT", dir / "report."}});
  mrtest::wait_all(procs, std::chrono::seconds(180));
  INFO(mrtest::all_output(procs));
  for (const Proc& p : procs) {
    REQUIRE_FALSE(p.timed_out);
    REQUIRE(p.exit_code() == 0);
  }
  for (int r = 0; r < 4; ++r) {
    Report rep = read_report(dir / ("report." + std::to_string(r) + ".json"));
    CHECK(rep.backend == backend);
    for (const auto& [kind, groups] : table) {
      INFO("rank " << r << ", group kind " << kind);
      std::vector<int> want;
      for (const auto& g : groups)
        if (std::find(g.begin(), g.end(), r) != g.end()) want = g;
      if (want.empty()) {  // e.g. later pipeline stages hold no position embedding
        CHECK(rep.groups.count(kind) == 0);
        continue;
      }
      REQUIRE(rep.groups.count(kind));
      CHECK(rep.groups[kind] == want);
      double sum = 0;
      for (int x : want) sum += x + 1;  // every rank contributes rank + 1
      CHECK(rep.sums[kind] == sum);
    }
    CHECK(rep.sums["world"] == 10);
  }
  CHECK_THAT(procs[0].out(), Catch::Contains("distributed bring-up passed on 4 ranks"));
}

}  // namespace

TEST_CASE("4 ranks, TP=2 DP=2: groups and an all-reduce in each", "[dist][process]") {
  run_layout_job({"--tensor-model-parallel-size", "2"},
                 {{"tp", {{0, 1}, {2, 3}}},
                  {"dp", {{0, 2}, {1, 3}}},
                  {"dp-cp", {{0, 2}, {1, 3}}},
                  {"tp-pp", {{0, 1}, {2, 3}}},
                  {"pp", {{0}, {1}, {2}, {3}}},
                  {"cp", {{0}, {1}, {2}, {3}}},
                  {"expert-tp", {{0, 1}, {2, 3}}},
                  {"expert-dp", {{0, 2}, {1, 3}}},
                  {"embedding", {{0}, {1}, {2}, {3}}},
                  {"tp-dp", {{0, 1, 2, 3}}}});
}

TEST_CASE("4 ranks, TP=2 PP=2: groups and an all-reduce in each", "[dist][process]") {
  run_layout_job({"--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "2"},
                 {{"tp", {{0, 1}, {2, 3}}},
                  {"pp", {{0, 2}, {1, 3}}},
                  {"dp", {{0}, {1}, {2}, {3}}},
                  {"tp-pp", {{0, 1, 2, 3}}},
                  {"embedding", {{0, 2}, {1, 3}}},
                  {"expert-tp", {{0, 1}, {2, 3}}}});
}

TEST_CASE("4 ranks, CP=2 DP=2: groups and an all-reduce in each", "[dist][process]") {
  run_layout_job({"--context-parallel-size", "2"},
                 {{"cp", {{0, 1}, {2, 3}}},
                  {"dp", {{0, 2}, {1, 3}}},
                  {"dp-cp", {{0, 1, 2, 3}}},
                  {"tp-cp", {{0, 1}, {2, 3}}},
                  {"expert-dp", {{0, 1, 2, 3}}},
                  {"tp", {{0}, {1}, {2}, {3}}}});
}

TEST_CASE("4 ranks, EP=2 (MoE): groups and an all-reduce in each", "[dist][process]") {
  run_layout_job({"--num-experts", "4", "--expert-model-parallel-size", "2"},
                 {{"ep", {{0, 1}, {2, 3}}},
                  {"expert-dp", {{0, 2}, {1, 3}}},
                  {"expert-tp-ep", {{0, 1}, {2, 3}}},
                  {"dp", {{0, 1, 2, 3}}},
                  {"expert-tp", {{0}, {1}, {2}, {3}}}});
}

TEST_CASE("4 ranks, PP=2 DP=2 with --use-tp-pp-dp-mapping: groups and an all-reduce in each", "[dist][process]") {
  run_layout_job({"--pipeline-model-parallel-size", "2", "--use-tp-pp-dp-mapping"},
                 {{"pp", {{0, 1}, {2, 3}}},
                  {"dp", {{0, 2}, {1, 3}}},
                  {"tp-pp", {{0, 1}, {2, 3}}},
                  {"embedding", {{0, 1}, {2, 3}}},
                  {"position-embedding", {{0}, {2}}},
                  {"expert-dp", {{0, 2}, {1, 3}}}});
}

TEST_CASE("a rank that never arrives: the others stop within the timeout, naming it", "[dist][process][fault]") {
  TempDir dir;
  int port = mrtest::store_port();
  std::vector<Proc> procs;
  const std::vector<std::string> argv = bring_up_argv({mrtest::megatron_run()});
  // rank 3 of 4 never starts; the timeout leaves the three that do room to arrive on a loaded machine
  for (int r = 0; r < 3; ++r)
    procs.push_back(mrtest::start(argv, mrtest::rank_env(r, 4, port, {{"MR_DIST_TIMEOUT_S", "10"}}), dir,
                                  "rank" + std::to_string(r), r));
  mrtest::wait_all(procs, std::chrono::seconds(90));
  INFO(mrtest::all_output(procs));
  for (const Proc& p : procs) {
    CHECK_FALSE(p.timed_out);
    CHECK(p.exit_code() == 1);
  }
  CHECK_THAT(procs[0].err(), Catch::Contains("rank 3 never arrived"));
}

TEST_CASE("rendezvous errors: port in use, unreachable master", "[dist][process][fault]") {
  TempDir dir;
  // A listening socket holds the port.
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = 0;
  REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  REQUIRE(listen(fd, 4) == 0);
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  int busy = ntohs(addr.sin_port);
  int nobody = mrtest::free_port();

  const std::vector<std::string> argv = bring_up_argv({mrtest::megatron_run()});
  std::vector<Proc> procs = {
      mrtest::start(argv, mrtest::rank_env(0, 2, busy, {{"MR_DIST_TIMEOUT_S", "5"}}), dir, "busy"),
      mrtest::start(argv, mrtest::rank_env(1, 2, nobody, {{"MR_DIST_TIMEOUT_S", "3"}, {"MR_WAIT_NOTICE_S", "1"}}), dir,
                    "unreachable", 1),
      // As megatron-run's spawner starts a rank (MR_SPAWNED=1): only --master-port picks the port there.
      mrtest::start(argv, mrtest::rank_env(0, 1, busy, {{"MR_DIST_TIMEOUT_S", "5"}, {"MR_SPAWNED", "1"}}), dir,
                    "busy-spawned", 2)};
  mrtest::wait_all(procs, std::chrono::seconds(90));
  close(fd);
  INFO(mrtest::all_output(procs));
  CHECK(procs[0].exit_code() == 1);
  CHECK_THAT(procs[0].err(), Catch::Contains("already in use") && Catch::Contains(std::to_string(busy)));
  // Started by torchrun (RANK and WORLD_SIZE, no MR_SPAWNED): its option, or the variable, picks the port.
  CHECK_THAT(procs[0].err(), Catch::Contains("pick a free one with torchrun's --master-port, or MASTER_PORT"));
  CHECK(procs[2].exit_code() == 1);
  CHECK_THAT(procs[2].err(), Catch::Contains("already in use") && Catch::Contains("pick a free one with --master-port") &&
                                 !Catch::Contains("MASTER_PORT"));
  CHECK(procs[1].exit_code() == 1);
  CHECK_THAT(procs[1].err(), Catch::Contains("cannot reach the rendezvous store") &&
                                 Catch::Contains("127.0.0.1:" + std::to_string(nobody)));
  // The wait is not silent: a word every MR_WAIT_NOTICE_S (30 s by default) while the store cannot be reached.
  CHECK_THAT(procs[1].err(), Catch::Contains("still trying to reach the rendezvous store at 127.0.0.1:" +
                                             std::to_string(nobody) + " (MASTER_ADDR:MASTER_PORT); the distributed "
                                             "timeout (3 s) gives up in "));
}

TEST_CASE("rendezvous errors: a master name that does not resolve, a SLURM-derived port in use, named as such",
          "[dist][process][fault]") {
  TempDir dir;
  const std::vector<std::string> argv = bring_up_argv({mrtest::megatron_run()});
  // A .invalid name never resolves (RFC 6761): the rank waits for it within the timeout, saying so in its own words
  // every MR_WAIT_NOTICE_S, and the error names the name and where it came from (review ops37 #3), without c10d's
  // glog line a second.
  std::map<std::string, std::string> env = mrtest::rank_env(1, 2, 29123, {{"MR_DIST_TIMEOUT_S", "4"},
                                                                          {"MR_WAIT_NOTICE_S", "1"},
                                                                          {"MASTER_ADDR", "nosuchhost.invalid"}});
  // Under SLURM (one task per rank), the name comes from the node list.
  const std::map<std::string, std::string> slurm = {
      {"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}, {"SLURM_STEP_ID", "0"}, {"SLURM_JOB_ID", "5"},
      {"SLURM_LOCALID", "0"}, {"SLURM_JOB_NODELIST", "nosuchhost.invalid,n2"}, {"CUDA_DEVICE_MAX_CONNECTIONS", "1"},
      {"MR_DIST_TIMEOUT_S", "4"}, {"MR_WAIT_NOTICE_S", "1"}, {"MR_DIST_HEARTBEAT_S", "0.5"}};
  // Rank 0 of a SLURM task whose derived port is held: the message says where the port came from.
  int fd = -1, job = 0;
  for (int id = 7 + static_cast<int>(getpid() % 4000); id < 9000 && fd < 0; id += 13) {
    const int port = 20000 + 2 * ((id % 4500 * 97) % 4500);
    fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 && listen(fd, 4) == 0) {
      job = id;
    } else {
      close(fd);
      fd = -1;
    }
  }
  REQUIRE(fd >= 0);
  const int held = 20000 + 2 * ((job % 4500 * 97) % 4500);
  const std::map<std::string, std::string> slurm0 = {
      {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}, {"SLURM_STEP_ID", "0"}, {"SLURM_JOB_ID", std::to_string(job)},
      {"SLURM_LOCALID", "0"}, {"SLURM_JOB_NODELIST", "localhost"}, {"CUDA_DEVICE_MAX_CONNECTIONS", "1"},
      {"MR_DIST_TIMEOUT_S", "5"}, {"MR_DIST_HEARTBEAT_S", "0.5"}};
  std::vector<Proc> procs = {mrtest::start(argv, env, dir, "unresolvable", 1),
                             mrtest::start(argv, slurm, dir, "unresolvable-slurm", 1),
                             mrtest::start(argv, slurm0, dir, "slurm-port-held", 0)};
  mrtest::wait_all(procs, std::chrono::seconds(90));
  // A user program in the one-task-per-rank form: rank 0's launcher warns of the held port (the spawner does so for
  // --master-port), and the program still runs.
  std::map<std::string, std::string> program_env = slurm0;
  program_env.erase("MR_DIST_TIMEOUT_S");
  std::vector<Proc> program = {mrtest::start(
      {mrtest::megatron_run(), "--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4", "--seq-length",
       "32", "--max-position-embeddings", "32", "--micro-batch-size", "1", "--global-batch-size", "1", "--train-iters",
       "1", "--lr", "0.1", "--mock-data", "--tokenizer-type", "NullTokenizer", "--vocab-size", "128",
       "--no-append-args", "--no-python", "/bin/echo", "ran"},
      program_env, dir, "slurm-program", 0)};
  mrtest::wait_all(program, std::chrono::seconds(60));
  close(fd);
  INFO(mrtest::all_output(procs));
  CHECK(procs[0].exit_code() == 1);
  CHECK_THAT(procs[0].err(), Catch::Contains("still waiting for the rendezvous store's host: nosuchhost.invalid does not "
                                             "resolve on this host (") &&
                                 Catch::Contains("; the name is MASTER_ADDR (torchrun's --master-addr))"));
  CHECK_THAT(procs[0].err(), Catch::Contains("cannot reach the rendezvous store at nosuchhost.invalid:29123 within 4 s: "
                                             "nosuchhost.invalid does not resolve on this host (") &&
                                 Catch::Contains("check the name"));
  CHECK_THAT(procs[0].err(), !Catch::Contains("socket.cpp") && !Catch::Contains("check that rank 0"));
  CHECK(procs[1].exit_code() == 1);
  CHECK_THAT(procs[1].err(), Catch::Contains("nosuchhost.invalid does not resolve on this host (") &&
                                 Catch::Contains("the name is SLURM_JOB_NODELIST (its first host)"));
  CHECK(procs[2].exit_code() == 1);
  CHECK_THAT(procs[2].err(), Catch::Contains("cannot host the rendezvous store on port " + std::to_string(held) +
                                             " (20000 + 2 x ((SLURM_JOB_ID " + std::to_string(job) +
                                             " x 97 + SLURM_STEP_ID 0) mod 4500), since MASTER_PORT is unset): the port "
                                             "is already in use") &&
                                 Catch::Contains("set MASTER_PORT to a free one"));
  INFO(mrtest::all_output(program));
  CHECK(program[0].exit_code() == 0);
  CHECK_THAT(program[0].out(), Catch::Contains("ran\n"));
  CHECK_THAT(program[0].err(), Catch::Contains("warning: port " + std::to_string(held) + " (20000 + 2 x ((SLURM_JOB_ID " +
                                               std::to_string(job) + " x 97 + SLURM_STEP_ID 0) mod 4500), since "
                                               "MASTER_PORT is unset): the port is in use on this machine"));
}

TEST_CASE("ranks disagreeing on the world size or the config: clear errors", "[dist][process][fault]") {
  TempDir dir;
  const std::vector<std::string> argv = bring_up_argv({mrtest::megatron_run()});
  SECTION("world size") {
    int port = mrtest::store_port();
    std::vector<Proc> procs = two_ranks(argv, argv, 4, port, dir);
    mrtest::wait_all(procs, std::chrono::seconds(90));
    INFO(mrtest::all_output(procs));
    CHECK(procs[0].exit_code() == 1);
    CHECK(procs[1].exit_code() == 1);
    CHECK_THAT(procs[1].err(), Catch::Contains("world size 4 but rank 0 with 2"));
    CHECK_THAT(procs[0].err(), Catch::Contains("WORLD_SIZE differs"));
  }
  SECTION("config") {
    int port = mrtest::store_port();
    std::vector<std::string> other = argv;
    other.insert(other.end(), {"--lr", "0.1"});
    std::vector<Proc> procs = two_ranks(argv, other, 2, port, dir);
    mrtest::wait_all(procs, std::chrono::seconds(90));
    INFO(mrtest::all_output(procs));
    CHECK(procs[0].exit_code() == 1);
    CHECK(procs[1].exit_code() == 1);
    CHECK_THAT(procs[1].err(), Catch::Contains("different config than rank 0") && Catch::Contains("--lr (0.1 on rank 1, 0.0003 on rank 0)"));
    CHECK_THAT(procs[1].err(), !Catch::Contains("if they are two jobs"));  // one parent: one job
  }
  SECTION("another parent: maybe another job that drew the same MASTER_PORT (the hint names both parents)") {
    int port = mrtest::store_port();
    // The second rank's parent is a shell that waits for it (no exec: a command follows), not this test.
    std::vector<std::string> other = {"/bin/sh", "-c", "\"$@\"; exit $?", "sh"};
    other.insert(other.end(), argv.begin(), argv.end());
    other.insert(other.end(), {"--lr", "0.1"});
    std::vector<Proc> procs = two_ranks(argv, other, 2, port, dir);
    mrtest::wait_all(procs, std::chrono::seconds(90));
    INFO(mrtest::all_output(procs));
    CHECK(procs[1].exit_code() == 1);
    CHECK_THAT(procs[1].err(), Catch::Contains("different config than rank 0") &&
                                   Catch::Contains("was started by pid " + std::to_string(getpid())) &&
                                   Catch::Contains("meant as one job, they were given different arguments; if "
                                                   "they are two jobs, both use the store at 127.0.0.1:" +
                                                   std::to_string(port) + " and need a MASTER_PORT each"));
  }
}

TEST_CASE("NCCL on every visible GPU (MR_TEST_BACKEND=nccl)", "[dist][process][nccl]") {
  if (test_backend() != "nccl") {
    WARN("MR_TEST_BACKEND is not nccl: the NCCL job runs in scripts/gpu-check-distributed.sh");
    return;
  }
  const int gpus = mr::distributed::gpu_count();
  REQUIRE(gpus > 0);
  TempDir dir;
  std::vector<std::string> flags = {"--distributed-backend", "nccl"};
  if (gpus % 2 == 0) flags.insert(flags.end(), {"--tensor-model-parallel-size", "2"});
  std::vector<Proc> procs = mrtest::start_job(gpus, mrtest::bring_up_args(flags), dir, {{"MR_DIST_REPORT", dir / "report."}});
  mrtest::wait_all(procs, std::chrono::seconds(180));
  INFO(mrtest::all_output(procs));
  for (const Proc& p : procs) CHECK(p.exit_code() == 0);
  for (int r = 0; r < gpus; ++r) {
    Report rep = read_report(dir / ("report." + std::to_string(r) + ".json"));
    CHECK(rep.backend == "nccl");
    CHECK(rep.sums["world"] == gpus * (gpus + 1) / 2);
  }
}

TEST_CASE("backend choice: gloo without a GPU, nccl demanded without one is an error", "[dist][process]") {
  TempDir dir;
  if (mr::distributed::gpu_count() > 0) {
    WARN("a GPU is visible: skipping the no-GPU backend checks (the NCCL test covers this machine)");
    return;
  }
  // configs/default.yaml says gloo; build a job without it by overriding with the Megatron default via a file.
  std::string cfg = dir / "nobackend.yaml";
  {
    std::ofstream f(cfg);
    for (const char* line : {"--num-layers: 2", "--hidden-size: 64", "--num-attention-heads: 4",
                                    "--seq-length: 128", "--max-position-embeddings: 128", "--micro-batch-size: 2",
                                    "--global-batch-size: 8", "--train-iters: 10", "--lr: 0.0001", "--mock-data: true",
                                    "--tokenizer-type: NullTokenizer", "--vocab-size: 1024"})
      f << line << "\n";
  }
  int port = mrtest::store_port();
  std::vector<Proc> a = {mrtest::start({mrtest::megatron_run(), "--bring-up-only", "--config", cfg}, mrtest::rank_env(0, 1, port), dir, "auto"),
                         mrtest::start({mrtest::megatron_run(), "--bring-up-only", "--config", cfg, "--distributed-backend", "nccl"},
                                       mrtest::rank_env(0, 1, mrtest::store_port()), dir, "nccl")};
  mrtest::wait_all(a, std::chrono::seconds(90));
  INFO(mrtest::all_output(a));
  CHECK(a[0].exit_code() == 0);
  CHECK_THAT(a[0].err(), Catch::Contains("using the gloo backend"));
  CHECK(a[1].exit_code() == 1);
  // Rule dist.nccl-unavailable: the flag, what is missing (the build, the driver or the GPU), the way out.
  // The id first, as validation's errors print theirs.
  CHECK_THAT(a[1].err(), Catch::Contains("error[dist.nccl-unavailable]: --distributed-backend nccl cannot run here: ") &&
                             Catch::Contains("use --distributed-backend gloo (the CPU path)\n"));
  CHECK_THAT(a[1].err(), Catch::Contains(mr::distributed::nccl_unavailable(1)));
  if (mr::distributed::built_with_cuda()) CHECK_THAT(a[1].err(), Catch::Contains("no usable GPU") || Catch::Contains("no GPU is visible"));
  else CHECK_THAT(a[1].err(), Catch::Contains("built without CUDA") || Catch::Contains("without NCCL"));
}

TEST_CASE("nccl demanded without a GPU: the launcher refuses once, before any rank starts, and exits 1",
          "[dist][process][spawn]") {
  if (mr::distributed::gpu_count() > 0) {
    WARN("a GPU is visible: skipping the no-GPU refusal");
    return;
  }
  TempDir dir;
  // The launcher's GPU probe looks at an empty machine root (util/gpu_devices.h): no NVIDIA device there.
  std::filesystem::create_directories(dir.path / "machine");
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<Proc> a = {mrtest::start({mrtest::megatron_run(), "--nproc-per-node", "2", "--bring-up-only", "--config",
                                        std::string(MR_SOURCE_DIR) + "/configs/default.yaml", "--distributed-backend", "nccl"},
                                       {{"MR_DEVICE_ROOT", (dir.path / "machine").string()}}, dir, "spawn")};
  mrtest::wait_all(a, std::chrono::seconds(60));
  INFO(mrtest::all_output(a));
  CHECK(a[0].exit_code() == 1);
  // The launcher's refusal (launch/nccl_check.h), not one per rank: no rank prefix, said once.
  const std::string err = a[0].err();
  CHECK_THAT(err, Catch::Contains("error[dist.nccl-unavailable]: argument --distributed-backend nccl: megatron-run's "
                                  "worker cannot run it here: "));
  CHECK(err.find("nccl-unavailable") == err.rfind("nccl-unavailable"));
  CHECK_THAT(err, !Catch::Contains("[rank 0]") && !Catch::Contains("[rank 1]"));
  // No rendezvous, no collective: the refusal comes before either (well under the start-up timeout).
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(30));
}

TEST_CASE("the built-in spawner: ranks, prefixes, first failing exit code", "[dist][process][spawn]") {
  TempDir dir;
  // Through the library (what `megatron-run --nproc-per-node` calls), with a shell as the worker.
  {
    mr::launch::SpawnOptions so;
    so.nproc_per_node = 3;
    // Rank 1 fails once every rank has said hello (the marks said.RANK), not a guessed second after its own start:
    // under load rank 0 or 2 may start later, and the stop would end it before its line.
    const std::string said = dir / "said.";
    so.argv = {"/bin/sh", "-c",
               "echo \"hello from $RANK of $WORLD_SIZE local $LOCAL_RANK/$LOCAL_WORLD_SIZE $MASTER_ADDR "
               "omp=$OMP_NUM_THREADS\"; "
               "echo oops >&2; : > " + said + "$RANK; if [ \"$RANK\" = 1 ]; then for i in $(seq 1200); do [ -e " +
                   said + "0 ] && [ -e " + said + "2 ] && break; sleep 0.05; done; exit 7; fi; sleep 30; "
               "exit 0"};
    so.grace_seconds = 2;
    // Run the spawner in a child process so that its output can be captured.
    pid_t pid = fork();
    if (pid == 0) {
      int out = open((dir / "spawn.out").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      int err = open((dir / "spawn.err").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(out, 1);
      dup2(err, 2);
      _exit(mr::launch::spawn_workers(so));
    }
    int status = 0;
    auto t0 = std::chrono::steady_clock::now();
    while (waitpid(pid, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() - t0 > std::chrono::seconds(60)) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        FAIL("the spawner did not finish");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    std::string out = mrtest::slurp(dir / "spawn.out"), err = mrtest::slurp(dir / "spawn.err");
    INFO(out << err);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 7);  // rank 1's code; the others were terminated
    CHECK_THAT(out, Catch::Contains("[rank 0] hello from 0 of 3 local 0/3 127.0.0.1"));
    CHECK_THAT(out, Catch::Contains("[rank 2] hello from 2 of 3 local 2/3"));
    // OMP_NUM_THREADS: the user's when set, else an even share of this process's processors.
    cpu_set_t cpus;
    REQUIRE(sched_getaffinity(0, sizeof cpus, &cpus) == 0);
    const char* user = std::getenv("OMP_NUM_THREADS");
    const std::string omp = user ? user : std::to_string(mr::launch::worker_omp_threads(CPU_COUNT(&cpus), 3));
    CHECK_THAT(out, Catch::Contains("[rank 1] hello from 1 of 3 local 1/3 127.0.0.1 omp=" + omp + "\n"));
    if (!user) CHECK_THAT(err, Catch::Contains("OMP_NUM_THREADS=" + omp + " for each of the 3 workers"));
    CHECK_THAT(err, Catch::Contains("[rank 1] oops"));
    CHECK_THAT(err, Catch::Contains("worker rank 1") && Catch::Contains("exited with code 7"));
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20));
  }
  // A signal to the spawner reaches every worker; the spawner exits 128 + signal.
  {
    mr::launch::SpawnOptions so;
    so.nproc_per_node = 2;
    so.argv = {"/bin/sh", "-c", "echo started; exec sleep 60"};
    so.grace_seconds = 5;
    pid_t pid = fork();
    if (pid == 0) {
      int out = open((dir / "sig.out").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(out, 1);
      dup2(out, 2);
      _exit(mr::launch::spawn_workers(so));
    }
    auto t0 = std::chrono::steady_clock::now();
    while (mrtest::slurp(dir / "sig.out").find("[rank 1] started") == std::string::npos ||
           mrtest::slurp(dir / "sig.out").find("[rank 0] started") == std::string::npos) {
      if (std::chrono::steady_clock::now() - t0 > std::chrono::seconds(30)) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    kill(pid, SIGTERM);
    auto t1 = std::chrono::steady_clock::now();
    int status = 0;
    while (waitpid(pid, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() - t1 > std::chrono::seconds(30)) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        FAIL("the spawner did not stop on SIGTERM");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    INFO(mrtest::slurp(dir / "sig.out"));
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 128 + SIGTERM);
    CHECK(std::chrono::steady_clock::now() - t1 < std::chrono::seconds(4));  // forwarded, not the SIGKILL fallback
    CHECK_THAT(mrtest::slurp(dir / "sig.out"), Catch::Contains("forwarding it to the workers"));
  }
}

TEST_CASE("the spawner's OMP_NUM_THREADS share", "[dist][spawn]") {
  CHECK(mr::launch::worker_omp_threads(16, 4) == 4);
  CHECK(mr::launch::worker_omp_threads(16, 3) == 5);
  CHECK(mr::launch::worker_omp_threads(2, 4) == 1);
  CHECK(mr::launch::worker_omp_threads(0, 1) == 1);
}

TEST_CASE("megatron-run --nproc-per-node 4 runs the job", "[dist][process][spawn]") {
  TempDir dir;
  const std::vector<std::string> argv =
      bring_up_argv({mrtest::megatron_run(), "--nproc-per-node", "4"}, {"--tensor-model-parallel-size", "2"});
  std::vector<Proc> p = {mrtest::start(argv, report_env(dir, "60"), dir, "spawn")};
  mrtest::wait_all(p, std::chrono::seconds(180));
  INFO(p[0].out() << p[0].err());
  REQUIRE(p[0].exit_code() == 0);
  CHECK_THAT(p[0].out(), Catch::Contains("[rank 0] megatron-run: distributed bring-up passed on 4 ranks"));
  for (int r = 0; r < 4; ++r) CHECK(std::filesystem::exists(dir / ("report." + std::to_string(r) + ".json")));
}

TEST_CASE("torchrun's agent store: used when it speaks our protocol, else a store hosted by rank 0",
          "[dist][process][agent]") {
  const std::vector<std::string> job = mrtest::bring_up_args({});
  const std::map<std::string, std::string> agent = {{"TORCHELASTIC_USE_AGENT_STORE", "True"},
                                                    {"TORCHELASTIC_RESTART_COUNT", "3"}};

  SECTION("a store of our LibTorch (as a PyTorch 2.x worker sees torch 2.x's agent): every rank is its client") {
    TempDir dir;
    int port = mrtest::store_port();
    mr::distributed::Store::Options so;
    so.port = port;
    so.is_server = true;
    so.timeout = std::chrono::seconds(30);
    std::shared_ptr<mr::distributed::Store> server = mr::distributed::Store::connect(so);
    std::vector<Proc> procs = mrtest::start_job(2, job, dir, agent, port);
    mrtest::wait_all(procs, std::chrono::seconds(120));
    INFO(mrtest::all_output(procs));
    for (const Proc& p : procs) {
      REQUIRE(p.exit_code() == 0);
      CHECK_THAT(p.err(), !Catch::Contains("falling back"));
    }
    // Our keys live in the agent's store, under the restart-count prefix.
    CHECK(server->check({"/worker/attempt_3/mr/rdzv/0", "/worker/attempt_3/mr/rdzv/1"}));
  }

  SECTION("a store that never answers our client (torch 2.x's agent, LibTorch 1.x worker): rank 0 hosts one") {
    if (mr::distributed::libtorch_version().rfind("1.", 0) != 0) {
      WARN("built against LibTorch " << mr::distributed::libtorch_version() << ": its client fails to connect to a mute "
                                        "listener instead (no fallback); skipping");
      return;
    }
    TempDir dir;
    // Two ports in a row, held (launch/free_port.h) below the kernel's range for connections' local ports: the mute
    // agent's and MASTER_PORT + 1, where rank 0 falls back to hosting (a port of the kernel's range, as this took
    // before, can be another test's connection's local port just then: the fallback's bind failed so in CI).
    mr::launch::HeldPort first, next;
    for (int tries = 0; tries < 100 && !next.held(); ++tries) {
      first = mr::launch::hold_free_port();
      next = mr::launch::hold_port(first.port() + 1);
    }
    REQUIRE(next.held());
    const int port = first.port();
    // A listening socket nobody reads: connections complete (the kernel's backlog), requests never get an answer.
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);  // beside `first`, which holds it
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    REQUIRE(listen(fd, 64) == 0);
    std::vector<Proc> procs = mrtest::start_job(2, job, dir, agent, port);
    mrtest::wait_all(procs, std::chrono::seconds(120));
    close(fd);
    INFO(mrtest::all_output(procs));
    for (const Proc& p : procs) REQUIRE(p.exit_code() == 0);
    CHECK_THAT(procs[0].err(), Catch::Contains("falling back to a store hosted by rank 0 on 127.0.0.1:" +
                                               std::to_string(port + 1) + " (MASTER_PORT + 1)"));
  }
}

TEST_CASE("a real torchrun (TORCHRUN=/path/to/torchrun)", "[dist][process][torchrun]") {
  const char* torchrun = std::getenv("TORCHRUN");
  if (!torchrun || !*torchrun) {
    WARN("TORCHRUN is not set: skipping the real-torchrun test (see docs/distributed.md)");
    return;
  }
  TempDir dir;
  const std::vector<std::string> argv =
      bring_up_argv({torchrun, "--no-python", "--nproc-per-node", "2", "--master-addr", "127.0.0.1", "--master-port",
                     std::to_string(mrtest::free_port()), mrtest::megatron_run()},
                    {"--tensor-model-parallel-size", "2"});
  std::vector<Proc> p = {mrtest::start(argv, report_env(dir, "120"), dir, "torchrun")};
  mrtest::wait_all(p, std::chrono::seconds(300));
  INFO(p[0].out() << p[0].err());
  REQUIRE(p[0].exit_code() == 0);
  CHECK_THAT(p[0].out(), Catch::Contains("distributed bring-up passed on 2 ranks"));
  for (int r = 0; r < 2; ++r) {
    Report rep = read_report(dir / ("report." + std::to_string(r) + ".json"));
    CHECK(rep.groups["tp"] == std::vector<int>{0, 1});
    CHECK(rep.sums["tp"] == 3);
  }
}
