// launch_env.h: the wait notice's period (MR_WAIT_NOTICE_S); the setting a taken port's advice names.
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
  LaunchInfo slurm = *launch_info(with({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"MASTER_ADDR", "node1"}}));
  CHECK(master_port_setting(slurm) == "MASTER_PORT");
}
