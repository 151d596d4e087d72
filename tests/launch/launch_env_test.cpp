// launch_env.h: the wait notice's period (MR_WAIT_NOTICE_S); the setting a taken port's advice names; which SLURM
// process is a task of a job (an srun step's, not the batch script).
#include "launch/launch_env.h"

#include <catch2/catch.hpp>

#include <chrono>
#include <map>
#include <optional>
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
  LaunchInfo torchrun = *launch_info(with({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"},
                                           {"MASTER_PORT", "29500"}}));
  CHECK(master_port_setting(torchrun) == "torchrun's --master-port, or MASTER_PORT");
  LaunchInfo slurm = *launch_info(with({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_STEP_ID", "0"},
                                        {"MASTER_ADDR", "node1"}}));
  CHECK(master_port_setting(slurm) == "MASTER_PORT");
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
