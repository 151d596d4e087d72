// Launching a validated job, and `megatron-run topology`.
//
// megatron-run never links LibTorch. Without --dry-run, after validation it either
//   (a) spawns --nproc-per-node workers itself (each one is megatron-run again, with torchrun's environment), or
//   (b) inside a job (torchrun's RANK/WORLD_SIZE, or SLURM's SLURM_PROCID/SLURM_NTASKS) execs the torch-linked
//       megatron-run-worker found beside itself, handing it the resolved arguments through an inherited memfd.
// Outside any job and without --nproc-per-node it runs a one-rank job through (a).
#include "launch.h"

#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "config/parse/command_line.h"
#include "config/print.h"
#include "launch/launch_env.h"
#include "launch/program.h"
#include "parallel/layout.h"
#include "launch/spawn.h"
#include "launch/worker_input.h"
#include "util/log.h"

namespace mr::app {

namespace {

const char* const kLaunchFlags[] = {"--nproc-per-node", "--nnodes", "--node-rank", "--master-addr", "--master-port"};

std::string self_path() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) throw std::runtime_error("cannot find megatron-run's own path (/proc/self/exe)");
  return std::string(buf, static_cast<size_t>(n));
}

std::string worker_path() {
  if (const char* w = std::getenv("MR_WORKER"); w && *w) return w;
  return (std::filesystem::path(self_path()).parent_path() / "megatron-run-worker").string();
}

// Starts --nproc-per-node workers running `argv` (one when not given) and supervises them: the job's exit code,
// or 2 when they cannot start.
int spawn_local(const LaunchOptions& lo, std::vector<std::string> argv) {
  launch::SpawnOptions so;
  so.nproc_per_node = lo.nproc_per_node > 0 ? lo.nproc_per_node : 1;
  so.nnodes = lo.nproc_per_node > 0 ? lo.nnodes : 1;
  so.node_rank = lo.nproc_per_node > 0 ? lo.node_rank : 0;
  so.master_addr = lo.master_addr;
  so.master_port = lo.master_port;
  so.prefix_output = so.nproc_per_node * so.nnodes > 1;
  so.argv = std::move(argv);
  if (so.nproc_per_node > kMaxLocalWorkers) {
    print_error(std::cerr, "argument --nproc-per-node: " + std::to_string(so.nproc_per_node) +
                               " local workers is more than the " + std::to_string(kMaxLocalWorkers) +
                               " megatron-run starts on one node (a dry run validates any size)");
    return 2;
  }
  try {
    return launch::spawn_workers(so);
  } catch (const std::exception& e) {
    print_error(std::cerr, e.what());
    return 2;
  }
}

// The user's training program on every rank (launch/program.h), validated for the world size already: spawned
// with torchrun's environment when we start the workers, else (inside a torchrun/SLURM job) exec'd in place.
int launch_program(const Outcome& resolved, const launch::Program& program, const LaunchOptions& lo,
                   const std::optional<launch::LaunchInfo>& job) {
  std::vector<std::string> argv;
  try {
    argv = launch::program_argv(program, resolved_argv(resolved.parsed));
    argv.front() = launch::resolve_command(argv.front());
  } catch (const UsageError& e) {
    print_error(std::cerr, e.what());
    return 2;
  } catch (const launch::LaunchError& e) {
    print_error(std::cerr, e.what());
    return 2;
  }
  if (job && lo.nproc_per_node == 0) {
    std::vector<char*> a;
    for (std::string& w : argv) a.push_back(w.data());
    a.push_back(nullptr);
    std::cout.flush();
    std::cerr.flush();
    execv(argv.front().c_str(), a.data());
    print_error(std::cerr, "cannot run " + argv.front() + ": " + std::strerror(errno));
    return 2;
  }
  return spawn_local(lo, argv);
}

}  // namespace

void LaunchOptions::add_to(po::options_description& desc) {
  desc.add_options()
      ("nproc-per-node", po::value<int>()->notifier([this](int v) { nproc_per_node = v, nproc_given = true; }),
       "workers to start on this node")
      ("nnodes", po::value(&nnodes), "nodes in the job")
      ("node-rank", po::value(&node_rank), "this node's index")
      ("master-addr", po::value(&master_addr), "rendezvous host (rank 0's node)")
      ("master-port", po::value(&master_port), "rendezvous port")
      ("bring-up-only", po::bool_switch(&bring_up_only), "stop after the process groups' self-check")
      ("heartbeat-timeout", po::value(&heartbeat_timeout),
       "seconds without a rank's heartbeat before the job fails (default 30)");
}

void LaunchOptions::apply(Invocation& inv) const {
  // Launcher options are ours, not Megatron's: a value no job can have is a usage error (exit 2), dry run or not.
  if (nproc_given && nproc_per_node < 1)
    throw UsageError("argument --nproc-per-node: must be at least 1 (got " + std::to_string(nproc_per_node) + ")",
                     {"--nproc-per-node"});
  if (nnodes < 1)
    throw UsageError("argument --nnodes: must be at least 1 (got " + std::to_string(nnodes) + ")", {"--nnodes"});
  if (node_rank < 0 || node_rank >= nnodes)
    throw UsageError("argument --node-rank: must be between 0 and --nnodes - 1 = " + std::to_string(nnodes - 1) +
                         " (got " + std::to_string(node_rank) + ")",
                     {"--node-rank", "--nnodes"});
  if (master_port < 0 || master_port > 65535)
    throw UsageError("argument --master-port: must be a TCP port, 0 to 65535 (got " + std::to_string(master_port) + ")",
                     {"--master-port"});
  if (nproc_per_node > 0) {
    inv.world_size = static_cast<long long>(nproc_per_node) * nnodes;
    return;
  }
  auto env = launch::process_env();
  if (!env("RANK") && !env("WORLD_SIZE") && env("SLURM_PROCID") && env("SLURM_NTASKS") && !inv.world_size) {
    try {
      inv.world_size = std::stoll(*env("SLURM_NTASKS"));
    } catch (const std::exception&) {
      throw UsageError("SLURM_NTASKS='" + *env("SLURM_NTASKS") + "' is not an integer");
    }
  }
}

std::vector<std::string> strip_launch_options(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--") {
      out.insert(out.end(), args.begin() + static_cast<long>(i), args.end());
      break;
    }
    bool dropped = false;
    for (const char* f : kLaunchFlags) {
      std::string flag = f;
      if (args[i] == flag) {
        ++i;  // and its value
        dropped = true;
        break;
      }
      if (args[i].rfind(flag + "=", 0) == 0) {
        dropped = true;
        break;
      }
    }
    if (!dropped) out.push_back(args[i]);
  }
  return out;
}

int launch(const Outcome& resolved, const std::vector<std::string>& args, const launch::Program& program) {
  po::options_description desc("launch");
  CommonOptions common;
  common.add_to(desc);
  LaunchOptions lo;
  lo.add_to(desc);
  split_args(args, 1, desc, /*allow_unregistered=*/true);

  std::optional<launch::LaunchInfo> job;
  try {
    job = launch::launch_info();
  } catch (const launch::LaunchError& e) {
    print_error(std::cerr, e.what());
    return 2;
  }

  // What the worker gets; its time limits are checked here already, before any worker starts.
  const Namespace& ns = resolved.parsed.ns;
  launch::WorkerInput in;
  in.ns = ns;
  in.backend_explicit = ns.has("distributed_backend") &&
                        ns.provenance("distributed_backend").kind != Provenance::Kind::Default;
  in.log_level = common.log_level;
  in.train = !lo.bring_up_only;
  in.argv = args;
  for (const auto& e : ns.entries())  // sorted by dest
    if (e.prov.kind == Provenance::Kind::Config || e.prov.kind == Provenance::Kind::Cli) in.given.push_back(e.dest);
  try {
    in.args = Args::from(ns);  // the typed view the worker rebuilds (a value of the wrong shape fails here already)
    if (!lo.heartbeat_timeout.empty()) {
      char* end = nullptr;
      double s = std::strtod(lo.heartbeat_timeout.c_str(), &end);
      if (end == lo.heartbeat_timeout.c_str() || *end)
        throw std::runtime_error("--heartbeat-timeout '" + lo.heartbeat_timeout + "' is not a number of seconds");
      in.heartbeat_timeout_s = s;
    }
    (void)launch::job_timeouts(in);
  } catch (const std::runtime_error& e) {
    print_error(std::cerr, e.what());
    return 2;
  }

  if (program.named()) return launch_program(resolved, program, lo, job);

  if (lo.nproc_per_node > 0 || !job) {
    // (a) our spawner; every worker is megatron-run again, inside the job we set up.
    if (job && lo.nproc_per_node > 0)
      print_warning(std::cerr, "already inside a job (" + job->describe() + "); --nproc-per-node starts a nested one");
    std::vector<std::string> argv = {self_path()};
    for (const std::string& a : strip_launch_options(args)) argv.push_back(a);
    return spawn_local(lo, std::move(argv));
  }

  // (b) inside a job: hand over to the torch-linked worker.
  std::string worker = worker_path();
  if (access(worker.c_str(), X_OK) != 0) {
    print_error(std::cerr, "the worker " + worker +
                               " is missing (megatron-run-worker is built only where LibTorch is found; MR_WORKER "
                               "overrides its path)");
    return 2;
  }
  int fd = launch::memfd_with(in.encode());
  std::string fd_s = std::to_string(fd);
  std::vector<char*> argv = {const_cast<char*>(worker.c_str()), const_cast<char*>("--input-fd"), fd_s.data(), nullptr};
  std::cout.flush();
  std::cerr.flush();
  execv(worker.c_str(), argv.data());
  print_error(std::cerr, "cannot run " + worker + ": " + std::strerror(errno));
  return 2;
}

}  // namespace mr::app
