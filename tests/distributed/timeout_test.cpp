// The flags that set a time limit take effect or are refused, and the timeout-like flags the runtime does not act
// on are named at start: job_timeouts() and heartbeat_limits() (torch-free), megatron-run's refusals, and a job in which
// --distributed-timeout-seconds-after-init ends a stuck collective long before the start-up timeout.
#include <catch2/catch.hpp>

#include <cctype>

#include "config/namespace.h"
#include "distributed/collectives.h"
#include "launch/worker_input.h"
#include "proc.h"
#include "util/text.h"
#include "../config/validated_fills.h"

using mrtest::Proc;
using mrtest::TempDir;
using std::chrono::milliseconds;

namespace {

mr::launch::WorkerInput input(std::map<std::string, mr::Value> given, std::map<std::string, mr::Value> defaults = {}) {
  mr::launch::WorkerInput in;
  for (auto& [k, v] : defaults) in.ns.set(k, v, mr::Provenance{mr::Provenance::Kind::Default, ""});
  for (auto& [k, v] : given) {
    in.ns.set(k, v, mr::Provenance{mr::Provenance::Kind::Cli, "argv[1]"});
    in.given.push_back(k);
  }
  std::sort(in.given.begin(), in.given.end());
  mrtest::fill_as_validated(in.ns);  // the worker's namespace went through validation
  in.args = mr::Args::from(in.ns);   // what WorkerInput::decode builds
  return in;
}

mr::launch::EnvLookup env(std::map<std::string, std::string> vars) {
  return [vars](const std::string& k) -> std::optional<std::string> {
    auto it = vars.find(k);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

}  // namespace

TEST_CASE("a timeout prints in seconds without float noise", "[dist][timeout]") {
  using mr::seconds_text;
  CHECK(seconds_text(milliseconds(600000)) == "600 s");
  CHECK(seconds_text(milliseconds(700)) == "0.7 s");
  CHECK(seconds_text(milliseconds(1250)) == "1.25 s");
  CHECK(seconds_text(milliseconds(3001)) == "3.001 s");
  CHECK(seconds_text(milliseconds(0)) == "0 s");
}

TEST_CASE("job_timeouts: the flags, the launcher option and the environment", "[dist][timeout]") {
  using mr::launch::job_timeouts;
  SECTION("defaults") {
    auto t = job_timeouts(input({}, {{"distributed_timeout_minutes", mr::Value(10)},
                                     {"distributed_timeout_seconds_after_init", mr::Value()}}),
                          env({}));
    CHECK(t.startup == std::chrono::minutes(10));
    CHECK_FALSE(t.after_init);
    CHECK(t.heartbeat == milliseconds(1000));
    CHECK(t.heartbeat_timeout == milliseconds(30000));
    CHECK(t.ignored.empty());
  }
  SECTION("set") {
    auto in = input({{"distributed_timeout_minutes", mr::Value(3)}, {"distributed_timeout_seconds_after_init", mr::Value(20)}});
    auto t = job_timeouts(in, env({{"MR_DIST_HEARTBEAT_TIMEOUT_S", "7.5"}, {"MR_DIST_HEARTBEAT_S", "0.25"}}));
    CHECK(t.startup == std::chrono::minutes(3));
    CHECK(t.after_init == milliseconds(20000));
    CHECK(t.heartbeat == milliseconds(250));
    CHECK(t.heartbeat_timeout == milliseconds(7500));
    CHECK(job_timeouts(in, env({{"MR_DIST_TIMEOUT_S", "42"}})).startup == milliseconds(42000));
    in.heartbeat_timeout_s = 4;  // the launcher option wins over the environment
    CHECK(job_timeouts(in, env({{"MR_DIST_HEARTBEAT_TIMEOUT_S", "9"}})).heartbeat_timeout == milliseconds(4000));
  }
  SECTION("refused") {
    auto refused = [](const mr::launch::WorkerInput& in, mr::launch::EnvLookup e, const std::string& what) {
      INFO(what);
      CHECK_THROWS_WITH(job_timeouts(in, e), Catch::Contains(what));
    };
    refused(input({{"distributed_timeout_minutes", mr::Value(0)}}), env({}), "--distributed-timeout-minutes 0");
    refused(input({{"distributed_timeout_seconds_after_init", mr::Value(-5)}}), env({}),
            "--distributed-timeout-seconds-after-init -5");
    refused(input({}), env({{"MR_DIST_HEARTBEAT_TIMEOUT_S", "soon"}}), "MR_DIST_HEARTBEAT_TIMEOUT_S='soon'");
    refused(input({}), env({{"MR_DIST_TIMEOUT_S", "0"}}), "MR_DIST_TIMEOUT_S='0'");
    refused(input({}), env({{"MR_DIST_HEARTBEAT_TIMEOUT_S", "1.5"}}), "at least twice the heartbeat period");
    auto in = input({});
    in.heartbeat_timeout_s = -1;
    refused(in, env({}), "--heartbeat-timeout -1");
    // Every refusal carries its rule id, which the launcher and the worker print as error[dist.time-limits].
    refused(input({}), env({{"MR_DIST_HEARTBEAT_S", "x"}}), "[dist.time-limits] MR_DIST_HEARTBEAT_S='x'");
    refused(input({{"distributed_timeout_minutes", mr::Value(0)}}), env({}), "[dist.time-limits] --distributed");
  }
  SECTION("the heartbeat part is heartbeat_limits, the launchers' bound too") {
    using mr::launch::heartbeat_limits;
    const auto e = env({{"MR_DIST_HEARTBEAT_TIMEOUT_S", "7.5"}, {"MR_DIST_HEARTBEAT_S", "0.25"}});
    const auto h = heartbeat_limits(std::nullopt, e);
    const auto t = job_timeouts(input({}), e);
    CHECK(h.timeout == milliseconds(7500));
    CHECK(h.period == milliseconds(250));
    CHECK(t.heartbeat_timeout == h.timeout);
    CHECK(t.heartbeat == h.period);
    // Where the bound came from, which the messages about a silent rank or launcher name.
    CHECK(h.timeout_source == "MR_DIST_HEARTBEAT_TIMEOUT_S");
    CHECK(t.heartbeat_source == h.timeout_source);
    CHECK(heartbeat_limits(3.0, e).timeout_source == "--heartbeat-timeout");
    CHECK(heartbeat_limits(std::nullopt, env({})).timeout_source == "--heartbeat-timeout's default");
    CHECK(heartbeat_limits(4.0, e).timeout == milliseconds(4000));  // the launcher option wins
    CHECK(heartbeat_limits(std::nullopt, env({})).timeout == milliseconds(30000));
    for (const char* bad : {"abc", "-1", "0", "inf", "3s"})
      CHECK_THROWS_WITH(heartbeat_limits(std::nullopt, env({{"MR_DIST_HEARTBEAT_TIMEOUT_S", bad}})),
                        "[dist.time-limits] MR_DIST_HEARTBEAT_TIMEOUT_S='" + std::string(bad) +
                            "' is not a positive number of seconds");
  }
  SECTION("timeout-like flags the runtime does not act on are named, only when the user set them") {
    auto t = job_timeouts(input({{"inprocess_heartbeat_timeout", mr::Value(5.0)},
                                 {"flight_recorder_dump_on_timeout", mr::Value(false)},
                                 {"calc_ft_timeouts", mr::Value(false)}},  // set to its default: no effect to miss
                                {{"inprocess_hard_timeout", mr::Value(90.0)}}),
                          env({}));
    REQUIRE(t.ignored.size() == 2);
    CHECK_THAT(t.ignored[0], Catch::StartsWith("--inprocess-heartbeat-timeout 5.0 (in-process restart"));
    CHECK_THAT(t.ignored[1], Catch::StartsWith("--no-flight-recorder-dump-on-timeout (") &&
                                 Catch::Contains("no NCCL flight recorder"));
  }
  SECTION("a flag the run's start notice named already is left out") {
    auto in = input({{"inprocess_heartbeat_timeout", mr::Value(5.0)}, {"flight_recorder_dump_on_timeout", mr::Value(false)}});
    in.noticed = {"--eval-interval", "--inprocess-heartbeat-timeout"};
    auto t = job_timeouts(in, env({}));
    REQUIRE(t.ignored.size() == 1);
    CHECK_THAT(t.ignored[0], Catch::StartsWith("--no-flight-recorder-dump-on-timeout ("));
  }
  SECTION("the worker input carries what the user set and the launcher option") {
    auto in = input({{"inprocess_soft_timeout", mr::Value(1.0)}});
    in.heartbeat_timeout_s = 2.5;
    auto back = mr::launch::WorkerInput::decode(in.encode());
    CHECK(back.given == std::vector<std::string>{"inprocess_soft_timeout"});
    CHECK(back.noticed.empty());
    in.noticed = {"--inprocess-soft-timeout"};
    CHECK(mr::launch::WorkerInput::decode(in.encode()).noticed == in.noticed);
    REQUIRE(back.heartbeat_timeout_s);
    CHECK(*back.heartbeat_timeout_s == 2.5);
    CHECK_FALSE(mr::launch::WorkerInput::decode(input({}).encode()).heartbeat_timeout_s);
  }
}

namespace {

// How many times `flag` appears in `text` as a whole flag (not as the start of a longer one).
size_t flag_count(const std::string& text, const std::string& flag) {
  size_t n = 0;
  for (size_t at = text.find(flag); at != std::string::npos; at = text.find(flag, at + flag.size())) {
    const size_t end = at + flag.size();
    if (end == text.size() || !(std::isalnum(static_cast<unsigned char>(text[end])) || text[end] == '-')) ++n;
  }
  return n;
}

}  // namespace

TEST_CASE("a timeout-like flag the run ignores is named once, under our spawner and under another launcher",
          "[dist][process][timeout]") {
  TempDir dir;
  const std::string flag = "--inprocess-heartbeat-timeout";
  // A training run: the run's start notice names it (the spawner's); rank 0's runtime notice does not again.
  const Proc spawned = mrtest::spawn_job(2, {"--train-iters", "3", flag, "5"}, dir, "spawner");
  {
    INFO(spawned.out() << spawned.err());
    REQUIRE(spawned.exit_code() == 0);
    CHECK(flag_count(spawned.out() + spawned.err(), flag) == 1);
    CHECK_THAT(spawned.err(), Catch::Contains("notice: the synthetic training run does not act on") &&
                                  !Catch::Contains("runtime does not act on"));
  }
  // Under another launcher (torchrun's environment, no MR_SPAWNER): rank 0 names it, once.
  std::vector<Proc> ranks = mrtest::start_job(2, mrtest::job_args({"--train-iters", "3", flag, "5"}), dir);
  mrtest::wait_all(ranks, std::chrono::seconds(180));
  {
    INFO(mrtest::all_output(ranks));
    for (const Proc& p : ranks) REQUIRE(p.exit_code() == 0);
    CHECK(flag_count(mrtest::all_output(ranks), flag) == 1);
    CHECK(flag_count(ranks[0].err(), flag) == 1);
  }
  // --bring-up-only: no run notice; the runtime's names it (rank 0 of the spawner's job), once.
  const Proc bring_up = mrtest::spawn_job(2, {"--bring-up-only", flag, "5"}, dir, "bring-up");
  {
    INFO(bring_up.out() << bring_up.err());
    REQUIRE(bring_up.exit_code() == 0);
    CHECK(flag_count(bring_up.out() + bring_up.err(), flag) == 1);
    CHECK_THAT(bring_up.err(), Catch::Contains("[rank 0] warning: notice: megatron-run's runtime does not act on this "
                                               "flag; it is ignored: --inprocess-heartbeat-timeout 5.0"));
  }
}

TEST_CASE("megatron-run refuses time limits it cannot use before starting anything", "[dist][process][timeout]") {
  TempDir dir;
  struct Case {
    std::vector<std::string> flags;
    std::map<std::string, std::string> env;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"--distributed-timeout-minutes", "0"}, {}, "--distributed-timeout-minutes 0: the collective timeout must be"},
      {{"--distributed-timeout-seconds-after-init", "0"}, {}, "--distributed-timeout-seconds-after-init 0"},
      {{"--heartbeat-timeout", "abc"}, {}, "argument --heartbeat-timeout: invalid float value: 'abc'"},
      {{"--heartbeat-timeout", "1"}, {{"MR_DIST_HEARTBEAT_S", "1"}}, "at least twice the heartbeat period"},
      {{"--heartbeat-timeout", "0.5"}, {}, "the heartbeat timeout (0.5 s, --heartbeat-timeout) must be at least twice "
                                           "the heartbeat period (1 s, the default)"},
      {{"--nproc-per-node", "2", "--heartbeat-timeout", "0"}, {}, "argument --heartbeat-timeout: must be a number of "
                                                                  "seconds above 0"},
  };
  std::vector<Proc> procs;
  for (size_t i = 0; i < cases.size(); ++i) {
    std::vector<std::string> argv = {mrtest::megatron_run()};
    for (const std::string& a : mrtest::bring_up_args(cases[i].flags)) argv.push_back(a);
    procs.push_back(mrtest::start(argv, cases[i].env, dir, "case" + std::to_string(i)));
  }
  mrtest::wait_all(procs, std::chrono::seconds(60));
  for (size_t i = 0; i < cases.size(); ++i) {
    INFO(procs[i].out() << procs[i].err());
    CHECK(procs[i].exit_code() == 2);
    CHECK_THAT(procs[i].err(), Catch::Contains(cases[i].message));
    CHECK_THAT(procs[i].out() + procs[i].err(), !Catch::Contains("[rank"));  // no worker started
  }
}

TEST_CASE("--distributed-timeout-seconds-after-init ends a stuck collective after the bring-up",
          "[dist][process][timeout]") {
  TempDir dir;
  // Rank 1 is alive (its heartbeat goes on) but stuck for 60 s after the bring-up; rank 0 waits in a barrier.
  // The start-up timeout is 120 s; the timeout after initialisation, 3 s, must end the job.
  std::vector<Proc> procs =
      mrtest::start_job(2, mrtest::bring_up_args({"--distributed-timeout-seconds-after-init", "3",
                                                   "--inprocess-heartbeat-timeout", "5"}),
                        dir, {{"MR_DIST_TIMEOUT_S", "120"}, {"MR_DIST_STALL", "1:60"}, {"MR_DIST_REPORT", dir / "report."}});
  mrtest::KillOnExit cleanup;
  for (const Proc& p : procs) cleanup.pids.push_back(p.pid);
  REQUIRE(mrtest::wait_for([&] {
    return std::filesystem::exists(dir / "report.0.json") && std::filesystem::exists(dir / "report.1.json");
  }, std::chrono::seconds(120)));
  const auto t0 = std::chrono::steady_clock::now();  // both are past the self-check
  mrtest::wait_all(procs, std::chrono::seconds(90));
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  INFO(mrtest::all_output(procs) << "took " << took << " s");
  for (const Proc& p : procs) {
    CHECK_FALSE(p.timed_out);
    CHECK(p.exit_code() == 1);
  }
  CHECK_THAT(procs[0].err(), Catch::Contains("barrier world [0, 1] failed") &&
                                 Catch::Contains("timed out; the collective timeout is 3 s"));
  CHECK_THAT(procs[1].err(), Catch::Contains("stopping: rank 0: barrier world [0, 1] failed"));
  CHECK(took < 3 + 15);
  // The ignored flag is named once, by rank 0.
  CHECK_THAT(procs[0].err(), Catch::Contains("does not act on this flag; it is ignored: --inprocess-heartbeat-timeout 5.0"));
  CHECK_THAT(procs[1].err(), !Catch::Contains("inprocess"));
}
