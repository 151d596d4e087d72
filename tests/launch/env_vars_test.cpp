// A config's ENV_VARS (docs/config-files.md, apps/megatron-run/launch.h): what a launch exports to every rank, and
// what a --dry-run says a launch would give. One predicate (launch_sets_variable) decides both: a variable the launch
// sets for each rank itself (WORLD_SIZE, RANK, ...) or megatron-run's own (MR_*) is never given to the ranks, and a
// dry run names it as a launch does.
#include <catch2/catch.hpp>

#include <string>

#include "../config/scratch.h"
#include "launch_test_util.h"

namespace {

using mrtest::Proc;
using mrtest::launcher::has;
using mrtest::launcher::kBin;
using mrtest::launcher::sh;

std::string config_with_env(const std::string& name, const std::string& env_vars) {
  return mrtest::launcher::env_vars_config(name, env_vars, "env-vars");
}

// The rest of the line that starts with `start` in `out` ("" when none does).
std::string line_after(const std::string& out, const std::string& start) {
  const size_t at = out.find(start);
  if (at == std::string::npos) return "";
  const size_t from = at + start.size();
  return out.substr(from, out.find('\n', from) - from);
}

}  // namespace

// Review refactor38 #4: a dry run listed WORLD_SIZE and RANK among what "a launch gives every rank", and warned that
// the ranks get the config's RANK over the environment's, where a launch keeps its own values and says so.
TEST_CASE("ENV_VARS: a dry run lists only what a launch gives the ranks, and names the kept-by-launch ones as a launch "
          "does",
          "[launch][program][env-vars]") {
  const std::string cfg = config_with_env("env-vars-kept.yaml",
                                          "  CUDA_DEVICE_MAX_CONNECTIONS: 1\n  WORLD_SIZE: 4\n  RANK: 1\n"
                                          "  MY_OPS_VAR: x\n");
  const std::string given = "CUDA_DEVICE_MAX_CONNECTIONS=1 MY_OPS_VAR=x";
  // The environment holds another RANK: no launch gives the ranks the config's. (The dry run validates with the
  // config's WORLD_SIZE and RANK, as it reads ENV_VARS whole.)
  Proc d = sh("RANK=0 " + kBin + " --target-gpu-arch sm_90 --dry-run --config '" + cfg + "'");
  INFO(d.out);
  CHECK(d.exit == 0);
  CHECK(line_after(d.out, "megatron-run: a launch gives every rank the config's ENV_VARS: ") == given);
  CHECK(has(d.out, cfg + ":3: warning[launch.env-vars-override]: ENV_VARS sets WORLD_SIZE, which the launch sets "
                         "for each rank itself: a launch does not export it"));
  CHECK(has(d.out, cfg + ":4: warning[launch.env-vars-override]: ENV_VARS sets RANK, which the launch sets for each "
                         "rank itself: a launch does not export it"));
  CHECK_FALSE(has(d.out, "ENV_VARS sets RANK=1"));
  CHECK_FALSE(has(d.out, "the ranks get the config's value"));

  // The launch gives the same, and names the same two.
  Proc r = sh("-u CUDA_DEVICE_MAX_CONNECTIONS -u MY_OPS_VAR " + kBin + " --target-gpu-arch sm_90 --nproc-per-node 2 "
              "--config '" + cfg + "' --no-append-args --no-python /usr/bin/env");
  INFO(r.out);
  CHECK(r.exit == 0);
  CHECK(line_after(r.out, "megatron-run: every rank gets the config's ENV_VARS: ") == given);
  CHECK(has(r.out, cfg + ":3: warning[launch.env-vars-override]: ENV_VARS sets WORLD_SIZE, which the launch sets "
                         "for each rank itself"));
  CHECK(has(r.out, cfg + ":4: warning[launch.env-vars-override]: ENV_VARS sets RANK, which the launch sets for each "
                         "rank itself"));
  CHECK(has(r.out, "[rank 0] RANK=0\n"));
  CHECK(has(r.out, "[rank 0] WORLD_SIZE=2\n"));
  CHECK_FALSE(has(r.out, "WORLD_SIZE=4\n"));

  // ENV_VARS that a launch gives none of: no line at all (it printed "...ENV_VARS: " with nothing after it).
  const std::string kept = config_with_env("env-vars-kept-only.yaml", "  WORLD_SIZE: 2\n  MR_DIST_TIMEOUT_S: 5\n");
  Proc k = sh(kBin + " --target-gpu-arch sm_100 --dry-run --config '" + kept + "'");
  INFO(k.out);
  CHECK(k.exit == 0);
  CHECK_FALSE(has(k.out, "the config's ENV_VARS"));
  CHECK(has(k.out, kept + ":2: warning[launch.env-vars-override]: ENV_VARS sets WORLD_SIZE, which the launch sets for each rank itself"));
  CHECK(has(k.out, "ENV_VARS sets MR_DIST_TIMEOUT_S, one of megatron-run's own settings"));
}
