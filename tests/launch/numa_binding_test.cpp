// torchrun 2.x's --numa-binding (launch/numa_binding.h): each strategy of torch/numa/binding.py over a made-up
// machine in a scratch sysfs (24 CPUs, two threads per core, three NUMA nodes on two sockets, an L3 cache per two
// cores, five GPUs), the CPU list format, and the launcher binding its workers (a scratch sysfs built from this
// machine's own CPUs, the GPUs' PCI addresses given by MR_NUMA_GPU_PCI_ADDRESSES).
#include <catch2/catch.hpp>
#include <sched.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "launch/numa_binding.h"
#include "launch_test_util.h"

using mr::launch::NumaMode;
using mrtest::Proc;
using mrtest::launcher::has;
using mrtest::launcher::kRun;
using mrtest::launcher::ScratchDir;
using mrtest::launcher::sh;
namespace fs = std::filesystem;

namespace {

void put(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text << "\n";
}

// The CPUs this process may run on (sched_getaffinity), of which the launcher's tests make their NUMA nodes.
std::set<int> allowed_cpus() {
  cpu_set_t set;
  REQUIRE(sched_getaffinity(0, sizeof set, &set) == 0);
  std::set<int> mine;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) mine.insert(c);
  return mine;
}

// CPUs 0-23: core c (0-11) has threads c and c + 12; node n (0-2) has cores 4n..4n+3; nodes 0 and 1 are socket 0,
// node 2 socket 1; each pair of cores shares an L3 (with a per-core L2, an L1d and an L1i below it). GPUs 0 and 1
// sit on node 0, GPU 2 on node 1, GPU 3 on node 2, GPU 4 says -1 (one node: read as node 0).
mr::launch::NumaMachine machine(const fs::path& root) {
  mr::launch::NumaMachine m;
  m.sysfs_root = root.string();
  const fs::path sys = root / "sys/devices/system";
  put(sys / "node/possible", "0-3");  // node 3 possible, not present
  for (int n = 0; n < 3; ++n)
    put(sys / ("node/node" + std::to_string(n)) / "cpulist",
        std::to_string(4 * n) + "-" + std::to_string(4 * n + 3) + "," + std::to_string(4 * n + 12) + "-" +
            std::to_string(4 * n + 15));
  for (int cpu = 0; cpu < 24; ++cpu) {
    const int core = cpu % 12, pair = core / 2 * 2;
    const fs::path c = sys / ("cpu/cpu" + std::to_string(cpu));
    put(c / "topology/thread_siblings_list", std::to_string(core) + "," + std::to_string(core + 12));
    put(c / "topology/physical_package_id", core < 8 ? "0" : "1");
    auto cache = [&](int index, const char* type, int level, const std::string& shared) {
      const fs::path d = c / ("cache/index" + std::to_string(index));
      put(d / "type", type);
      put(d / "level", std::to_string(level));
      put(d / "shared_cpu_list", shared);
    };
    const std::string own = std::to_string(core) + "," + std::to_string(core + 12);
    cache(0, "Data", 1, own);
    cache(1, "Instruction", 1, own);
    cache(2, "Unified", 2, own);
    cache(3, "Unified", 3,
          std::to_string(pair) + "-" + std::to_string(pair + 1) + "," + std::to_string(pair + 12) + "-" +
              std::to_string(pair + 13));
  }
  const char* nodes[] = {"0", "0", "1", "2", "-1"};
  for (int g = 0; g < 5; ++g) {
    const std::string pci = "0000:" + std::to_string(10 + g) + ":00.0";
    put(root / "sys/bus/pci/devices" / pci / "numa_node", nodes[g]);
    m.gpu_pci.push_back(pci);
  }
  for (int cpu = 0; cpu < 24; ++cpu)
    if (cpu != 15) m.allowed.insert(cpu);  // the launcher may not use CPU 15 (core 3's second thread)
  return m;
}

std::set<int> cpus(const std::string& list) { return mr::launch::parse_cpu_list(list); }

}  // namespace

TEST_CASE("CPU lists in sysfs's format", "[launch][numa]") {
  CHECK(cpus("0-3,8,10-11\n") == std::set<int>{0, 1, 2, 3, 8, 10, 11});
  CHECK(cpus(" ").empty());
  CHECK(mr::launch::cpu_list({0, 1, 2, 4, 6, 7}) == "0-2,4,6-7");
  CHECK(mr::launch::cpu_list({}).empty());
  for (const char* bad : {"a", "3-1", "1-", "-2", "1,,2", "99999999"})
    CHECK_THROWS_AS(cpus(bad), mr::launch::NumaError);
  CHECK(mr::launch::numa_mode_from_string("core-complex") == NumaMode::CoreComplex);
  CHECK_FALSE(mr::launch::numa_mode_from_string("core_complex"));
}

TEST_CASE("--numa-binding: torch's node, socket, exclusive and core-complex strategies", "[launch][numa]") {
  ScratchDir dir("mr-numa");
  const mr::launch::NumaMachine m = machine(dir.path);
  using mr::launch::numa_cpus_for_device;
  // node: the GPU's node, less what the launcher may not use; GPU 4's -1 is node 0.
  CHECK(numa_cpus_for_device(m, 0, NumaMode::Node) == cpus("0-3,12-14"));
  CHECK(numa_cpus_for_device(m, 2, NumaMode::Node) == cpus("4-7,16-19"));
  CHECK(numa_cpus_for_device(m, 4, NumaMode::Node) == cpus("0-3,12-14"));
  // socket: nodes 0 and 1 for a GPU on either; node 2 alone on socket 1.
  CHECK(numa_cpus_for_device(m, 2, NumaMode::Socket) == cpus("0-7,12-14,16-19"));
  CHECK(numa_cpus_for_device(m, 3, NumaMode::Socket) == cpus("8-11,20-23"));
  // exclusive: node 0's four cores (core 3 has only CPU 3 left) over its GPUs 0, 1 and 4: 2, 1 and 1 cores.
  CHECK(numa_cpus_for_device(m, 0, NumaMode::Exclusive) == cpus("0-1,12-13"));
  CHECK(numa_cpus_for_device(m, 1, NumaMode::Exclusive) == cpus("2,14"));
  CHECK(numa_cpus_for_device(m, 4, NumaMode::Exclusive) == cpus("3"));
  CHECK(numa_cpus_for_device(m, 3, NumaMode::Exclusive) == cpus("8-11,20-23"));  // alone on node 2
  // core-complex: node 0's L3 domains {0,1,12,13} and {2,3,14}, the larger first; the third GPU wraps around.
  CHECK(numa_cpus_for_device(m, 0, NumaMode::CoreComplex) == cpus("0-1,12-13"));
  CHECK(numa_cpus_for_device(m, 1, NumaMode::CoreComplex) == cpus("2-3,14"));
  CHECK(numa_cpus_for_device(m, 4, NumaMode::CoreComplex) == cpus("0-1,12-13"));
  CHECK(numa_cpus_for_device(m, 2, NumaMode::CoreComplex) == cpus("4-5,16-17"));
  // Refused, naming what is missing.
  CHECK_THROWS_WITH(numa_cpus_for_device(m, 5, NumaMode::Node), Catch::Contains("there is no GPU 5 for local rank 5 (5 GPU(s) visible)"));
  mr::launch::NumaMachine few = m;
  few.allowed = {20};
  CHECK_THROWS_WITH(numa_cpus_for_device(few, 0, NumaMode::Node),
                    Catch::Contains("none of its CPUs is in this launcher's affinity"));
  few.allowed = {0, 1};  // node 0: two usable cores for three GPUs
  CHECK_THROWS_WITH(numa_cpus_for_device(few, 4, NumaMode::Exclusive),
                    Catch::Contains("there are only 2 physical cores on NUMA node 0, but 3 GPUs on it"));
  // No thread siblings or no data cache listed for a CPU: torch fails there (min of nothing), and so does this.
  put(dir.path / "sys/devices/system/cpu/cpu0/topology/thread_siblings_list", "");
  CHECK_THROWS_WITH(numa_cpus_for_device(m, 0, NumaMode::Exclusive), Catch::Contains("no thread siblings are listed for CPU 0"));
  for (int i = 0; i < 4; ++i) fs::remove_all(dir.path / ("sys/devices/system/cpu/cpu4/cache/index" + std::to_string(i)));
  CHECK_THROWS_WITH(numa_cpus_for_device(m, 2, NumaMode::CoreComplex),
                    Catch::Contains("no data or unified cache is listed for CPU 4"));
  fs::remove(dir.path / "sys/bus/pci/devices/0000:12:00.0/numa_node");
  CHECK_THROWS_WITH(numa_cpus_for_device(m, 2, NumaMode::Node), Catch::Contains("cannot read") && Catch::Contains("numa_node"));
}

TEST_CASE("--numa-binding: the launcher starts each worker on its GPU's CPUs", "[launch][numa][process]") {
  const std::set<int> mine = allowed_cpus();
  // Two NUMA nodes made of this machine's own CPUs: the first allowed one, and the rest (or the same one again).
  const int first = *mine.begin();
  std::set<int> rest(std::next(mine.begin()), mine.end());
  if (rest.empty()) rest = {first};
  ScratchDir dir("mr-numa-run");
  const fs::path sys = dir.path / "sys/devices/system";
  put(sys / "node/possible", "0-1");
  put(sys / "node/node0/cpulist", std::to_string(first));
  put(sys / "node/node1/cpulist", mr::launch::cpu_list(rest));
  put(dir.path / "sys/bus/pci/devices/0000:01:00.0/numa_node", "0");
  put(dir.path / "sys/bus/pci/devices/0000:02:00.0/numa_node", "1");
  const std::string env = "MR_NUMA_SYSFS_ROOT='" + dir.path.string() +
                          "' MR_NUMA_GPU_PCI_ADDRESSES=0000:01:00.0,0000:02:00.0 ";
  const std::string job = kRun + "--nproc-per-node 2 --no-python --no-append-args -- sh -c "
                                 "'grep Cpus_allowed_list /proc/self/status'";
  // torchrun's spellings and choices.
  for (const char* opt : {"--numa-binding node ", "--numa_binding=node "}) {
    Proc p = sh(env + kRun + opt + job.substr(kRun.size()));
    INFO(p.out);
    CHECK(p.exit == 0);
    CHECK(has(p.out, "--numa-binding node: local rank 0: CPUs " + std::to_string(first) + "; local rank 1: CPUs " +
                         mr::launch::cpu_list(rest)));
    CHECK(has(p.out, "[rank 0] Cpus_allowed_list:\t" + std::to_string(first) + "\n"));
    CHECK(has(p.out, "[rank 1] Cpus_allowed_list:\t" + mr::launch::cpu_list(rest) + "\n"));
  }
  // A bad choice is a usage error; a machine that cannot say fails before any worker starts.
  Proc bad = sh(env + kRun + "--numa-binding nodes " + job.substr(kRun.size()));
  CHECK(bad.exit == 2);
  CHECK(has(bad.out, "argument --numa-binding/--numa_binding: invalid choice: 'nodes' (choose from 'node', 'socket', 'exclusive', "
                     "'core-complex')"));
  Proc three = sh(env + kRun + "--numa-binding node --nproc-per-node 4 --no-python -- true");
  INFO(three.out);
  CHECK(three.exit == 1);
  CHECK(has(three.out, "--numa-binding node: there is no GPU 2 for local rank 2 (2 GPU(s) visible)"));
  Proc nogpu =
      sh("MR_NUMA_GPU_PCI_ADDRESSES= CUDA_VISIBLE_DEVICES= " + kRun + "--numa-binding node --no-python -- true");
  INFO(nogpu.out);
  CHECK(nogpu.exit == 1);
  CHECK(has(nogpu.out, "--numa-binding node: "));
  CHECK_FALSE(has(nogpu.out, "Cpus_allowed_list"));
}

// The binding is set in the forked child, between fork and exec: a failure there (here sched_setaffinity refused
// by a seccomp filter, tests/launch/support/seccomp_run.cpp; a cpuset changed under the launcher alike) is the
// launcher's, reported through the child's note: the worker could not be started, exit 1, --numa-binding named.
TEST_CASE("--numa-binding: a binding the kernel refuses in the child is megatron-run's failure, exit 1",
          "[launch][numa][process]") {
  const std::set<int> mine = allowed_cpus();
  ScratchDir dir("mr-numa-refused");
  put(dir.path / "sys/devices/system/node/possible", "0");
  put(dir.path / "sys/devices/system/node/node0/cpulist", mr::launch::cpu_list(mine));
  put(dir.path / "sys/bus/pci/devices/0000:01:00.0/numa_node", "0");
  Proc p = sh("MR_NUMA_SYSFS_ROOT='" + dir.path.string() +
              "' MR_NUMA_GPU_PCI_ADDRESSES=0000:01:00.0 PYTHON_EXEC=/usr/bin/python3 '" + MR_SECCOMP_RUN +
              "' deny-setaffinity " + mrtest::launcher::kBin + " --config " + mrtest::launcher::kConfig +
              " --numa-binding node --nproc-per-node 1 --no-python --no-append-args -- true");
  INFO(p.out);
  if (p.exit == 125 && has(p.out, "mr_test_seccomp_run: cannot install the filter")) {
    WARN("skipped: a seccomp filter cannot be installed here");
    return;
  }
  const std::string why = "cannot bind local rank 0 to its CPUs (--numa-binding): Operation not permitted";
  CHECK(p.exit == 1);
  CHECK(has(p.out, "--numa-binding node: local rank 0: CPUs " + mr::launch::cpu_list(mine)));
  CHECK(has(p.out, "megatron-run: " + why + "\n"));  // the child's own line
  CHECK(has(p.out, ") could not be started (" + why + ")\n"));
  CHECK(has(p.out, "  root cause (first failure): rank 0 (local rank 0), pid "));
  CHECK(has(p.out, "could not be started by megatron-run (" + why + "; the exit code 1 is megatron-run's) at "));
  CHECK_FALSE(has(p.out, "exited with code"));
  CHECK_FALSE(has(p.out, "hint: exit code"));
}
