// megatron-run handing its own run to the torch-linked worker (apps/megatron-run/launch.cpp): the environment the
// worker starts with, and the launcher's refusal of --distributed-backend nccl where the worker cannot run it
// (launch/nccl_check.h). MR_WORKER stands in for the worker with a script that prints what it got.
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

namespace {

// megatron-run's own run with MR_WORKER standing in for the worker (it says that it started) on the machine
// whose root is `root` (util/gpu_devices.h's MR_DEVICE_ROOT), stdout and stderr together.
mrtest::Proc own_run(const std::string& root, const std::string& env, const std::string& args) {
  const std::string stub = mrtest::write_file("started.sh", "#!/bin/sh\necho worker started\n", "launch-worker");
  std::filesystem::permissions(stub, std::filesystem::perms::owner_all);
  return mrtest::run_shell("env -u CUDA_VISIBLE_DEVICES MR_DEVICE_ROOT='" + root + "' MR_WORKER='" + stub + "' " + env +
                           " '" + MR_BINARY + "' --config " + kConfig + " " + args + " 2>&1");
}

bool has_text(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

const bool kWorkerHasNccl = std::string(MR_WORKER_NCCL) == "built";

}  // namespace

TEST_CASE("--distributed-backend nccl that the own worker cannot run: one refusal before any worker starts",
          "[launch][worker][nccl-check]") {
  const std::string bare = mrtest::fake_root("bare", {"dev/null"}, "launch-worker");
  const mrtest::Proc r = own_run(bare, "", "--nproc-per-node 2 --distributed-backend nccl");
  INFO(r.out);
  CHECK(r.exit == 1);
  CHECK(count(r.out, "[dist.nccl-unavailable]") == 1);
  CHECK(has_text(r.out, "megatron-run: error[dist.nccl-unavailable]: argument --distributed-backend nccl: "
                        "megatron-run's worker cannot run it here: "));
  CHECK(has_text(r.out, "; use --distributed-backend gloo (the CPU path)\n"));
  CHECK(has_text(r.out, kWorkerHasNccl ? "this machine shows no NVIDIA GPU (no /dev/nvidia<N> device, no NVIDIA "
                                         "driver: /proc/driver/nvidia absent)"
                                       : "megatron-run was built with"));
  CHECK_FALSE(has_text(r.out, "worker started"));
  // From a config file: its line is the place, as validation's errors show it.
  const std::string cfg = mrtest::write_file("nccl.yaml", "--distributed-backend: nccl\n", "launch-worker");
  const mrtest::Proc from_file = own_run(bare, "", "--config " + cfg);
  INFO(from_file.out);
  CHECK(from_file.exit == 1);
  CHECK(has_text(from_file.out, "megatron-run: " + cfg + ":1: error[dist.nccl-unavailable]: "));
  // A dry run is not a launch: nothing to refuse. gloo runs anywhere.
  const mrtest::Proc dry = own_run(bare, "", "--dry-run --distributed-backend nccl");
  CHECK(dry.exit == 0);
  CHECK_FALSE(has_text(dry.out, "nccl-unavailable"));
  const mrtest::Proc gloo = own_run(bare, "", "--distributed-backend gloo");
  CHECK(gloo.exit == 0);
  CHECK(has_text(gloo.out, "worker started"));
}

TEST_CASE("--distributed-backend nccl on a machine with NVIDIA GPUs: refused only when CUDA_VISIBLE_DEVICES hides them "
          "or the build lacks NCCL; ROCm is not ours", "[launch][worker][nccl-check]") {
  const std::string gpus = mrtest::fake_root(
      "gpus", {"dev/nvidia0", "dev/nvidia1", "dev/nvidiactl", "proc/driver/nvidia/gpus/0000:01:00.0/"}, "launch-worker");
  const mrtest::Proc shown = own_run(gpus, "", "--distributed-backend nccl");
  INFO(shown.out);
  if (kWorkerHasNccl) {  // the launcher lets it through; the worker checks CUDA itself
    CHECK(shown.exit == 0);
    CHECK(has_text(shown.out, "worker started"));
  } else {
    CHECK(shown.exit == 1);
    CHECK(has_text(shown.out, "error[dist.nccl-unavailable]: argument --distributed-backend nccl: megatron-run's "
                              "worker cannot run it here: megatron-run was built with"));
  }
  for (const char* hiding : {"", "-1", "NoDevFiles"}) {
    const mrtest::Proc hidden = own_run(gpus, "CUDA_VISIBLE_DEVICES='" + std::string(hiding) + "'", "--distributed-backend nccl");
    INFO(hidden.out);
    CHECK(hidden.exit == 1);
    CHECK_FALSE(has_text(hidden.out, "worker started"));
    if (kWorkerHasNccl)
      CHECK(has_text(hidden.out, "cannot run it here: CUDA_VISIBLE_DEVICES='" + std::string(hiding) + "' hides every GPU;"));
  }
  const std::string amd = mrtest::fake_root("amd", {"dev/kfd", "dev/dri/renderD128"}, "launch-worker");
  const mrtest::Proc rocm = own_run(amd, "", "--distributed-backend nccl");
  INFO(rocm.out);
  CHECK(rocm.exit == 1);
  if (kWorkerHasNccl) CHECK(has_text(rocm.out, "/dev/kfd is an AMD GPU, which megatron-run's CUDA path does not drive"));
}

TEST_CASE("a config's ENV_VARS reach megatron-run's own worker on every rank", "[launch][worker][env-vars]") {
  const std::string stub = mrtest::write_file("print-ops-env.sh", "#!/bin/sh\necho \"ops=${MY_OPS_VAR:--}\"\n",
                                              "launch-worker");
  std::filesystem::permissions(stub, std::filesystem::perms::owner_all);
  const std::string env = mrtest::write_file("env-only.yaml", "ENV_VARS:\n  MY_OPS_VAR: hello\nMODEL_ARGS: {}\n",
                                             "launch-worker");
  const mrtest::Proc two = mrtest::run_shell("env -u MY_OPS_VAR MR_WORKER='" + stub + "' '" + MR_BINARY +
                                             "' --nproc-per-node 2 --config " + kConfig + " --config '" + env +
                                             "' 2>&1");
  INFO(two.out);
  CHECK(two.exit == 0);
  CHECK(count(two.out, "ops=hello") == 2);
  CHECK(count(two.out, "ops=-") == 0);
}

TEST_CASE("a missing worker is refused once before any worker starts, not retried", "[launch][worker]") {
  const mrtest::Proc r = mrtest::run_shell("MR_WORKER=/nonexistent/megatron-run-worker '" + std::string(MR_BINARY) +
                                           "' --max-restarts 2 --nproc-per-node 2 --config " + kConfig + " 2>&1");
  INFO(r.out);
  CHECK(r.exit == 2);
  CHECK(count(r.out, "error[launch.worker-missing]: megatron-run's worker /nonexistent/megatron-run-worker is "
                     "missing (No such file or directory): named by MR_WORKER") == 1);
  CHECK_FALSE(has_text(r.out, "restart 1"));
  CHECK_FALSE(has_text(r.out, "[rank 0]"));
  // Not executable: said so.
  const std::string plain = mrtest::write_file("not-exec-worker", "#!/bin/sh\n", "launch-worker");
  std::filesystem::permissions(plain, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  const mrtest::Proc n = mrtest::run_shell("MR_WORKER='" + plain + "' '" + std::string(MR_BINARY) +
                                           "' --config " + kConfig + " 2>&1");
  INFO(n.out);
  CHECK(n.exit == 2);
  CHECK(has_text(n.out, "error[launch.worker-missing]: megatron-run's worker " + plain + " is not executable"));
}
