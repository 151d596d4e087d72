// launch_env.h: the wait notice's period (MR_WAIT_NOTICE_S); the setting a taken port's advice names; which SLURM
// process is a task of a job (an srun step's, not the batch script).
#include "launch/launch_env.h"

#include <catch2/catch.hpp>

#include <chrono>
#include <map>
#include <optional>
#include <set>
#include <string>

using namespace mr::launch;

namespace {

EnvLookup with(const std::map<std::string, std::string>& vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

std::chrono::milliseconds period(const std::string& value) { return wait_notice_period(with({{"MR_WAIT_NOTICE_S", value}})); }

}  // namespace

TEST_CASE("wait_notice_period: MR_WAIT_NOTICE_S seconds, 30 s when unset or not a positive number, clamped to 0.01 s .. "
          "1 day", "[launch][launch_env]") {
  using std::chrono::milliseconds;
  CHECK(wait_notice_period(with({})) == milliseconds(30000));
  CHECK(period("1") == milliseconds(1000));
  CHECK(period("0.25") == milliseconds(250));
  for (const char* bad : {"", "abc", "0", "-2", "nan", "1s", "-inf"}) {
    INFO(bad);
    CHECK(period(bad) == milliseconds(30000));
  }
  // Huge values (once an undefined cast to an integer) are a day; tiny ones 10 ms, not a busy loop.
  for (const char* huge : {"inf", "1e300", "86401"}) {
    INFO(huge);
    CHECK(period(huge) == milliseconds(86400000));
  }
  CHECK(period("1e-9") == milliseconds(10));
}

TEST_CASE("wait_notice_remark: an ignored or clamped MR_WAIT_NOTICE_S is named, a usable one is not", "[launch][launch_env]") {
  using mr::launch::wait_notice_remark;
  CHECK(wait_notice_remark(with({})).empty());
  CHECK(wait_notice_remark(with({{"MR_WAIT_NOTICE_S", "0.5"}})).empty());
  CHECK(wait_notice_remark(with({{"MR_WAIT_NOTICE_S", "abc"}})) ==
        "MR_WAIT_NOTICE_S='abc' is not a positive number of seconds: the waits say what they wait for every 30 s "
        "(the default)");
  CHECK(wait_notice_remark(with({{"MR_WAIT_NOTICE_S", ""}})).find("is not a positive number") != std::string::npos);
  CHECK(wait_notice_remark(with({{"MR_WAIT_NOTICE_S", "1e300"}})) ==
        "MR_WAIT_NOTICE_S='1e300' is outside 0.01 s .. 1 day: 86400 s is used");
}

TEST_CASE("master_port_setting: the advice for a taken port names what picks it where the worker runs",
          "[launch][launch_env]") {
  LaunchInfo spawned = *launch_info(with({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"},
                                          {"MASTER_PORT", "29500"}, {"MR_SPAWNED", "1"}}));
  CHECK(master_port_setting(spawned) == "--master-port");
  // Its launcher derived the port from SLURM's job (one launcher per node under srun): the workers' advice names
  // the derivation and MASTER_PORT, as the launcher's own message does; an enclosing job's value is not read by
  // a process no spawner of ours started.
  const std::string derived = "20000 + 2 x ((SLURM_JOB_ID 9777 x 97 + SLURM_STEP_ID 0) mod 4500), since MASTER_PORT is unset";
  LaunchInfo slurm_worker = *launch_info(with({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"},
                                               {"MASTER_PORT", "26738"}, {"MR_SPAWNED", "1"}, {"MR_SPAWNER", "1"},
                                               {"MR_MASTER_PORT_FROM", derived}}));
  CHECK(slurm_worker.master_port_from == derived);
  CHECK(master_port_setting(slurm_worker) == "MASTER_PORT (or --master-port)");
  CHECK(launch_info(with({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "26738"},
                          {"MR_MASTER_PORT_FROM", derived}}))
            ->master_port_from.empty());
  LaunchInfo torchrun = *launch_info(with({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"},
                                           {"MASTER_PORT", "29500"}}));
  CHECK(master_port_setting(torchrun) == "torchrun's --master-port, or MASTER_PORT");
  LaunchInfo slurm = *launch_info(with({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_STEP_ID", "0"},
                                        {"SLURM_JOB_ID", "9777"}, {"MASTER_ADDR", "node1"}}));
  CHECK(master_port_setting(slurm) == "MASTER_PORT");
  // Derived (MASTER_PORT unset): where it came from, for the message when it is taken (review ops37 #4).
  CHECK(slurm.master_port == 26738);
  CHECK(slurm.master_port_from ==
        "20000 + 2 x ((SLURM_JOB_ID 9777 x 97 + SLURM_STEP_ID 0) mod 4500), since MASTER_PORT is unset");
  CHECK(master_addr_setting(slurm) == "MASTER_ADDR");
  LaunchInfo from_list = *launch_info(with({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_STEP_ID", "0"},
                                            {"SLURM_JOB_ID", "9777"}, {"SLURM_JOB_NODELIST", "gpu[3-4]"},
                                            {"MASTER_PORT", "29600"}}));
  CHECK(from_list.master_port_from.empty());
  CHECK(master_addr_setting(from_list) == "SLURM_JOB_NODELIST (its first host)");
}

TEST_CASE("SLURM's derived MASTER_PORT: one per job step, the same on every task, never torchrun's defaults; "
          "malformed ids refused", "[launch][launch_env][slurm]") {
  auto port = [](const std::string& job, const std::string& step) {
    return slurm_default_port(with({{"SLURM_JOB_ID", job}, {"SLURM_STEP_ID", step}})).port;
  };
  // Concurrent steps of one allocation get different ports (review ops37 #5), two apart (the launchers' store of
  // the one-launcher-per-node form is on the port above).
  std::set<int> seen;
  for (int step = 0; step < 64; ++step) {
    const int p = port("123456", std::to_string(step));
    CHECK(p % 2 == 0);
    seen.insert(p);
  }
  CHECK(seen.size() == 64);
  CHECK(port("9777", "0") == 26738);
  // The first steps of 4500 consecutive jobs all differ (review diff37 #1: x 16 reached 1125 ports, and job J's
  // step 16 was job J+1's step 0).
  std::set<int> jobs;
  for (int job = 50000; job < 54500; ++job) jobs.insert(port(std::to_string(job), "0"));
  CHECK(jobs.size() == 4500);
  CHECK(port("50000", "16") != port("50001", "0"));
  CHECK(slurm_default_port(with({{"SLURM_JOB_ID", "9777"}, {"SLURM_STEPID", "3"}})).port == port("9777", "3"));
  for (long long job = 0; job < 20000; ++job)
    for (int step : {0, 1, 7}) {
      const int p = port(std::to_string(job), std::to_string(step));
      if (p < 20000 || p > 28998 || p == 29400 || p == 29500) FAIL("job " << job << " step " << step << ": " << p);
    }
  CHECK_THROWS_WITH(port("12x", "0"), "SLURM_JOB_ID='12x' is not a job id (a whole number)");
  CHECK_THROWS_WITH(port("-5", "0"), Catch::Contains("SLURM_JOB_ID='-5'"));
  CHECK_THROWS_WITH(port("5", "0x"), Catch::Contains("SLURM_STEP_ID='0x' is not a step id"));
  CHECK_THROWS_WITH(slurm_default_port(with({{"SLURM_STEP_ID", "0"}})), Catch::Contains("SLURM_JOB_ID is not set"));
  // ... and through launch_info, where a task reads them.
  const std::map<std::string, std::string> task = {{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}, {"SLURM_STEP_ID", "0"},
                                                   {"SLURM_JOB_NODELIST", "localhost"}, {"SLURM_JOB_ID", "12x"}};
  CHECK_THROWS_AS(launch_info(with(task)), LaunchError);
  std::map<std::string, std::string> given = task;
  given["MASTER_PORT"] = "29600";  // the job id is not used then
  CHECK(launch_info(with(given))->master_port == 29600);
}

TEST_CASE("SLURM: every count strict, and the node list's first host checked as MASTER_ADDR is",
          "[launch][launch_env][slurm]") {
  std::map<std::string, std::string> task = {{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}, {"SLURM_STEP_ID", "0"},
                                             {"SLURM_JOB_ID", "5"}, {"SLURM_JOB_NODELIST", "localhost"}};
  REQUIRE(launch_info(with(task)));
  auto refused = [&](const std::string& name, const std::string& value) -> std::string {
    std::map<std::string, std::string> t = task;
    t[name] = value;
    try {
      (void)launch_info(with(t));
    } catch (const LaunchError& e) {
      return e.what();
    }
    return "(accepted)";
  };
  CHECK(refused("SLURM_NTASKS", "8x") == "SLURM_NTASKS='8x' is not an integer >= 1");
  CHECK(refused("SLURM_TASKS_PER_NODE", "abc") ==
        "SLURM_TASKS_PER_NODE='abc' is not a task count per node (such as 4 or 4(x2))");
  CHECK(refused("SLURM_TASKS_PER_NODE", "2(x2)") == "(accepted)");
  CHECK(refused("SLURM_JOB_NODELIST", "n[1-3") ==
        "SLURM_JOB_NODELIST='n[1-3' is not a SLURM node list: its first host 'n[1-3' has a bracket that closes no range");
  CHECK(refused("SLURM_JOB_NODELIST", "node01 node02").find(
            "SLURM_JOB_NODELIST='node01 node02' is not a SLURM node list: its first host 'node01 node02' has a blank or "
            "control character") == 0);
  CHECK(refused("SLURM_JOB_NODELIST", "a]b") != "(accepted)");
  for (const char* good : {"rack1-gpu[3-4]-x[1-2]", "gpu[017-018],cpu1", "node[007]", "a,b[1-2]", "x[09-10]"})
    CHECK(refused("SLURM_JOB_NODELIST", good) == "(accepted)");
  CHECK_THROWS_AS(slurm_int(with({{"SLURM_NNODES", "2x"}}), "SLURM_NNODES", 1), LaunchError);
  CHECK(slurm_int(with({}), "SLURM_NNODES", 1) == std::nullopt);
  CHECK(slurm_int(with({{"SLURM_NNODES", "3"}}), "SLURM_NNODES", 1) == 3);
}

TEST_CASE("SLURM: a task of an srun step is a rank of a job; the batch script itself (no SLURM_STEP_ID) is not",
          "[launch][launch_env][slurm]") {
  // sbatch's batch step: SLURM_PROCID=0 and the allocation's SLURM_NTASKS, no step id (slurmstepd sets SLURM_STEP_ID
  // only for a step id >= 0; the batch step's is SLURM_BATCH_SCRIPT). Read as a task, it would be rank 0 of 16 ranks
  // that no srun started.
  const std::map<std::string, std::string> batch = {{"SLURM_PROCID", "0"},       {"SLURM_NTASKS", "16"},
                                                    {"SLURM_JOB_NUM_NODES", "2"}, {"SLURM_JOB_ID", "77"},
                                                    {"SLURM_JOB_NODELIST", "gpu[1-2]"}};
  CHECK_FALSE(slurm_step_task(with(batch)));
  CHECK_FALSE(launch_info(with(batch)));
  std::optional<std::string> notice = slurm_batch_script_notice(with(batch), 8);
  REQUIRE(notice);
  CHECK(*notice == "[launch.slurm-batch-script] SLURM_PROCID is set but SLURM_STEP_ID is not: this is a SLURM batch "
                   "script, not a task that srun started, so SLURM's task variables (SLURM_NTASKS=16, "
                   "SLURM_JOB_NUM_NODES=2) are not read: a launch from this script starts its workers on this node only "
                   "(--nproc-per-node of them, 1 without it), as torchrun would; to use the allocation, start it with "
                   "srun: `srun --ntasks-per-node=1 megatron-run --nproc-per-node N ...` (one launcher per node) or "
                   "`srun megatron-run ...` (one task per rank)");
  // A task of a step (either spelling of the step id) is a rank, and nothing is said.
  for (const char* step : {"SLURM_STEP_ID", "SLURM_STEPID"}) {
    std::map<std::string, std::string> task = batch;
    task[step] = "0";
    CHECK(slurm_step_task(with(task)));
    std::optional<LaunchInfo> info = launch_info(with(task));
    REQUIRE(info);
    CHECK(info->source == LaunchInfo::Source::Slurm);
    CHECK(info->world_size == 16);
    CHECK_FALSE(slurm_batch_script_notice(with(task), 8));
  }
  // torchrun's RANK inside the batch script (a job of its own) wins: no SLURM notice. No SLURM at all: none either.
  std::map<std::string, std::string> torchrun = batch;
  torchrun["RANK"] = "0";
  CHECK_FALSE(slurm_batch_script_notice(with(torchrun), 8));
  CHECK_FALSE(slurm_batch_script_notice(with({}), 0));
  // The batch script of an allocation without --ntasks has no SLURM_NTASKS: the nodes alone are named, by the
  // variable that gave them (SLURM_NNODES, the older name, where SLURM_JOB_NUM_NODES is not set).
  std::optional<std::string> nodes_only =
      slurm_batch_script_notice(with({{"SLURM_PROCID", "0"}, {"SLURM_NNODES", "4"}}), 8);
  REQUIRE(nodes_only);
  CHECK(nodes_only->find("task variables (SLURM_NNODES=4) are not read") != std::string::npos);
  REQUIRE(slurm_nodes(with({{"SLURM_NNODES", "4"}, {"SLURM_JOB_NUM_NODES", "3"}})));
  CHECK(slurm_nodes(with({{"SLURM_NNODES", "4"}, {"SLURM_JOB_NUM_NODES", "3"}}))->variable == "SLURM_JOB_NUM_NODES");
  CHECK_FALSE(slurm_nodes(with({})));
  // Said only where the launch leaves part of the allocation unused (review diff35 #2): several nodes, or several
  // tasks for a launch of one worker (no --nproc-per-node). A one-node batch script running --nproc-per-node 8
  // uses what it has.
  auto unused = [&](const std::map<std::string, std::string>& vars, int nproc_per_node) {
    std::map<std::string, std::string> script = vars;
    script["SLURM_PROCID"] = "0";
    return slurm_batch_script_notice(with(script), nproc_per_node).has_value();
  };
  CHECK(unused(batch, 8));                                                      // 2 nodes
  CHECK_FALSE(unused({{"SLURM_JOB_NUM_NODES", "1"}, {"SLURM_NTASKS", "8"}}, 8));
  CHECK(unused({{"SLURM_JOB_NUM_NODES", "1"}, {"SLURM_NTASKS", "8"}}, 0));     // 1 worker of 8
  CHECK_FALSE(unused({{"SLURM_JOB_NUM_NODES", "1"}}, 0));
  CHECK(unused({{"SLURM_NNODES", "3"}}, 4));
  CHECK_FALSE(unused({{"SLURM_JOB_NUM_NODES", "x"}, {"SLURM_NTASKS", "2x"}}, 0));
}
