// launch/torchrun_env.h: the variables torchrun gives each worker, for one worker of a 2-node job; the launcher's
// notices for MASTER_ADDR / MASTER_PORT it does not read.
#include <catch2/catch.hpp>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "launch/torchrun_env.h"

TEST_CASE("torchrun_env: every torchrun variable, with torchrun's values", "[launch][torchrun-env]") {
  mr::launch::WorkerPlace w;
  w.nproc_per_node = 4;
  w.nnodes = 2;
  w.node_rank = 1;
  w.local_rank = 2;
  w.rank = 6;
  w.master_addr = "node0";
  w.master_port = 29400;
  w.restart_count = 1;
  w.max_restarts = 3;
  w.run_id = "job7";
  w.error_file = "/logs/job7/attempt_1/2/error.json";
  auto none = [](const std::string&) -> std::optional<std::string> { return std::nullopt; };
  std::map<std::string, std::string> env;
  for (const auto& [k, v] : mr::launch::torchrun_env(w, none)) env[k] = v;
  const std::map<std::string, std::string> want = {
      {"LOCAL_RANK", "2"}, {"RANK", "6"}, {"GROUP_RANK", "1"}, {"ROLE_RANK", "6"}, {"ROLE_NAME", "default"},
      {"LOCAL_WORLD_SIZE", "4"}, {"WORLD_SIZE", "8"}, {"GROUP_WORLD_SIZE", "2"}, {"ROLE_WORLD_SIZE", "8"},
      {"MASTER_ADDR", "node0"}, {"MASTER_PORT", "29400"}, {"TORCHELASTIC_RESTART_COUNT", "1"},
      {"TORCHELASTIC_MAX_RESTARTS", "3"}, {"TORCHELASTIC_RUN_ID", "job7"}, {"TORCHELASTIC_USE_AGENT_STORE", "False"},
      {"TORCH_NCCL_ASYNC_ERROR_HANDLING", "1"}, {"TORCHELASTIC_ERROR_FILE", "/logs/job7/attempt_1/2/error.json"},
      {"TORCHELASTIC_SIGNALS_TO_HANDLE", "SIGTERM,SIGINT,SIGHUP,SIGQUIT"}};
  CHECK(env == want);
  CHECK(mr::launch::torchrun_env_names().size() == want.size());
  // An inherited TORCH_NCCL_ASYNC_ERROR_HANDLING is kept.
  auto set = [](const std::string& k) -> std::optional<std::string> {
    if (k == "TORCH_NCCL_ASYNC_ERROR_HANDLING") return std::string("3");
    return std::nullopt;
  };
  bool seen = false;
  for (const auto& [k, v] : mr::launch::torchrun_env(w, set))
    if (k == "TORCH_NCCL_ASYNC_ERROR_HANDLING") seen = v == "3";
  CHECK(seen);
  // --log-dir /dev/null: the error file is set, empty (torchrun's); --signals-to-handle: its list.
  w.error_file.clear();
  w.signals_to_handle = "SIGTERM,SIGUSR1";
  env.clear();
  for (const auto& [k, v] : mr::launch::torchrun_env(w, none)) env[k] = v;
  CHECK(env.count("TORCHELASTIC_ERROR_FILE"));
  CHECK(env["TORCHELASTIC_ERROR_FILE"].empty());
  CHECK(env["TORCHELASTIC_SIGNALS_TO_HANDLE"] == "SIGTERM,SIGUSR1");
}

TEST_CASE("unread_master_env: MASTER_ADDR / MASTER_PORT the launcher does not read are named with what sets them",
          "[launch][torchrun-env]") {
  auto env = [](const std::string& k) -> std::optional<std::string> {
    if (k == "MASTER_PORT") return std::string("29555");
    if (k == "MASTER_ADDR") return std::string("node9");
    return std::nullopt;
  };
  auto none = [](const std::string&) -> std::optional<std::string> { return std::nullopt; };
  const std::vector<std::string> both = mr::launch::unread_master_env(env, false, false);
  REQUIRE(both.size() == 2);
  CHECK(both[0] == "MASTER_ADDR=node9 is set in the launcher's environment: not read (torchrun reads PET_MASTER_ADDR "
                   "instead); the workers get this job's own MASTER_ADDR (127.0.0.1 unless --master-addr is given)");
  CHECK(both[1] == "MASTER_PORT=29555 is set in the launcher's environment: not read (torchrun reads PET_MASTER_PORT "
                   "instead); the workers get this job's own MASTER_PORT (a free port unless --master-port is given)");
  // Read (SLURM's mode, or the option given): not named.
  const std::vector<std::string> port_only = mr::launch::unread_master_env(env, true, false);
  REQUIRE(port_only.size() == 1);
  CHECK(port_only[0].rfind("MASTER_PORT=29555 ", 0) == 0);
  CHECK(mr::launch::unread_master_env(env, true, true).empty());
  CHECK(mr::launch::unread_master_env(none, false, false).empty());
  // Inside an enclosing job its launcher set them: nothing to say.
  auto nested = [&](const std::string& k) -> std::optional<std::string> {
    if (k == "RANK") return std::string("1");
    if (k == "TORCHELASTIC_RUN_ID") return std::string("outer");
    return env(k);
  };
  CHECK(mr::launch::unread_master_env(nested, false, false).empty());
  // Several nodes: the port's default is torchrun's 29500, not a free one.
  const std::vector<std::string> nodes = mr::launch::unread_master_env(env, false, false, "", true);
  REQUIRE(nodes.size() == 2);
  CHECK(nodes[1].find("(29500, torchrun's default, unless --master-port is given)") != std::string::npos);
  // The c10d rendezvous chooses the master: no option to name.
  const std::vector<std::string> c10d = mr::launch::unread_master_env(env, false, false, "the c10d rendezvous chooses it");
  REQUIRE(c10d.size() == 2);
  CHECK(c10d[1].find("(the c10d rendezvous chooses it)") != std::string::npos);
  CHECK(c10d[1].find("--master-port") == std::string::npos);
  // A huge value is abbreviated.
  auto huge = [](const std::string& k) -> std::optional<std::string> {
    if (k == "MASTER_PORT") return std::string(5000, '9');
    return std::nullopt;
  };
  const std::vector<std::string> h = mr::launch::unread_master_env(huge, false, false);
  REQUIRE(h.size() == 1);
  CHECK(h[0].size() < 500);
  CHECK(h[0].find("(5000 bytes)") != std::string::npos);
}
