// megatron-run handing its own run to the torch-linked worker (apps/megatron-run/launch.cpp): the environment the
// worker starts with. MR_WORKER stands in for the worker with a script that prints what it got.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include "../config/binary.h"
#include "../config/scratch.h"

namespace {

const std::string kConfig = std::string(MR_SOURCE_DIR) + "/configs/default.yaml";

// The stand-in worker's output: OMP_WAIT_POLICY and GOMP_SPINCOUNT as it sees them ("-" when unset).
std::string worker_sees(const std::string& env) {
  const std::string script = mrtest::write_file(
      "print-omp-env.sh", "#!/bin/sh\necho \"policy=${OMP_WAIT_POLICY:--} spin=${GOMP_SPINCOUNT:--}\"\n", "launch-worker");
  std::filesystem::permissions(script, std::filesystem::perms::owner_all);
  return mrtest::run_shell("env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT " + env + " MR_WORKER='" + script + "' '" +
                           MR_BINARY + "' --config " + kConfig + " 2>/dev/null")
      .out;
}

}  // namespace

TEST_CASE("the own worker's OpenMP threads wait passively unless the user chose a wait policy", "[launch][worker]") {
  // Spinning threads make a run that shares its cores 20-200x slower per iteration (docs/optim.md).
  CHECK(worker_sees("") == "policy=PASSIVE spin=-\n");
  CHECK(worker_sees("OMP_WAIT_POLICY=active") == "policy=active spin=-\n");
  CHECK(worker_sees("GOMP_SPINCOUNT=1000") == "policy=- spin=1000\n");
  // Several local workers: each is megatron-run again, then the worker, with the same default.
  const std::string script = mrtest::scratch_dir("launch-worker").string() + "/print-omp-env.sh";
  const mrtest::Proc two = mrtest::run_shell("env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT MR_WORKER='" + script + "' '" +
                                             MR_BINARY + "' --nproc-per-node 2 --config " + kConfig + " 2>/dev/null");
  CHECK(two.exit == 0);
  CHECK(two.out.find("policy=PASSIVE spin=-") != std::string::npos);
}
