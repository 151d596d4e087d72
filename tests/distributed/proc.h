// Test helpers: start ranks of a job as separate processes (as torchrun would), each with its own output
// files and a hard timeout, so that no test can hang.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../launch/sockets.h"
#include "launch/spawn.h"

extern char** environ;

namespace mrtest {

inline std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// A scratch directory, removed at the end of the test.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    char tmpl[] = "/tmp/mr-dist-test-XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

// The small valid job every process test starts from (configs/default.yaml: gloo backend) and the environment
// validation needs for TP > 1 on the default target (sm_90).
inline std::vector<std::string> job_args(std::vector<std::string> extra) {
  std::vector<std::string> a = {"--config", std::string(MR_SOURCE_DIR) + "/configs/default.yaml"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

// configs/default.yaml as dir/name without the lines that start with one of `drop`, and with `extra` appended
// (a job that must not have one of its settings, e.g. --global-batch-size next to a batch schedule).
inline std::string default_config_with(const TempDir& dir, const std::string& name, const std::vector<std::string>& drop,
                                       const std::string& extra) {
  const std::string cfg = dir / name;
  std::ifstream in(std::string(MR_SOURCE_DIR) + "/configs/default.yaml");
  std::ofstream out(cfg);
  for (std::string line; std::getline(in, line);) {
    bool keep = true;
    for (const std::string& d : drop) keep = keep && line.rfind(d, 0) != 0;
    if (keep) out << line << "\n";
  }
  out << extra;
  return cfg;
}

// The same, stopping after the process groups' self-check (--bring-up-only): the distributed tests.
inline std::vector<std::string> bring_up_args(std::vector<std::string> extra) {
  extra.insert(extra.begin(), "--bring-up-only");
  return job_args(extra);
}

struct Proc {
  pid_t pid = -1;
  int rank = 0;
  std::string out_path, err_path;
  int status = -1;
  bool done = false;
  bool timed_out = false;
  double seconds = 0;  // from start to exit
  std::chrono::steady_clock::time_point start;

  int exit_code() const {
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
    return -1;
  }
  std::string out() const { return slurp(out_path); }
  std::string err() const { return slurp(err_path); }
};

// Starts `argv` with the current environment plus `env` (overriding), stdout/stderr to files in `dir`.
inline Proc start(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
                  const TempDir& dir, const std::string& tag, int rank = 0) {
  Proc p;
  p.rank = rank;
  p.out_path = dir / (tag + ".out");
  p.err_path = dir / (tag + ".err");
  std::vector<std::string> envs;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    std::string key = kv.substr(0, kv.find('='));
    if (env.count(key)) continue;
    static const char* drop[] = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                                 "TORCHELASTIC_USE_AGENT_STORE", "MR_SPAWNED", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_STEP_ID",
                                 "SLURM_STEPID"};
    bool skip = false;
    for (const char* d : drop) skip = skip || key == d;
    if (!skip) envs.push_back(kv);
  }
  for (const auto& [k, v] : env) envs.push_back(k + "=" + v);
  std::vector<char*> envp, args;
  for (auto& e : envs) envp.push_back(e.data());
  envp.push_back(nullptr);
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, p.out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 2, p.err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);  // own process group: the hard timeout kills it all
  posix_spawnattr_setpgroup(&attr, 0);
  p.start = std::chrono::steady_clock::now();
  if (posix_spawn(&p.pid, args[0], &fa, &attr, args.data(), envp.data()) != 0) p.pid = -1;
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  return p;
}

// Waits for every process; kills (SIGKILL, whole process group) whatever is still running after `limit`.
inline void wait_all(std::vector<Proc>& procs, std::chrono::seconds limit) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    bool running = false;
    for (Proc& p : procs) {
      if (p.done || p.pid <= 0) continue;
      int status = 0;
      if (waitpid(p.pid, &status, WNOHANG) == p.pid) {
        p.status = status;
        p.done = true;
        p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - p.start).count();
      } else {
        running = true;
      }
    }
    if (!running) return;
    if (std::chrono::steady_clock::now() > deadline) {
      for (Proc& p : procs)
        if (!p.done && p.pid > 0) {
          kill(-p.pid, SIGKILL);
          waitpid(p.pid, &p.status, 0);
          p.done = true;
          p.timed_out = true;
        }
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

inline std::string megatron_run() { return MR_BINARY; }

// The torchrun-style environment of one rank of a one-node job.
inline std::map<std::string, std::string> rank_env(int rank, int world, int port,
                                                   std::map<std::string, std::string> extra = {}) {
  std::map<std::string, std::string> env = {
      {"RANK", std::to_string(rank)},        {"WORLD_SIZE", std::to_string(world)},
      {"LOCAL_RANK", std::to_string(rank)},  {"LOCAL_WORLD_SIZE", std::to_string(world)},
      {"MASTER_ADDR", "127.0.0.1"},          {"MASTER_PORT", std::to_string(port)},
      {"CUDA_DEVICE_MAX_CONNECTIONS", "1"},  {"MR_DIST_TIMEOUT_S", "60"},
      {"MR_DIST_HEARTBEAT_S", "0.5"}};
  for (auto& [k, v] : extra) env[k] = v;
  return env;
}

// Starts `world` ranks of `megatron-run ARGS` on loopback.
inline std::vector<Proc> start_job(int world, const std::vector<std::string>& args, const TempDir& dir,
                                   std::map<std::string, std::string> extra = {}, int port = 0) {
  if (!port) port = mrtest::store_port();
  std::vector<Proc> procs;
  std::vector<std::string> argv = {megatron_run()};
  argv.insert(argv.end(), args.begin(), args.end());
  for (int r = 0; r < world; ++r)
    procs.push_back(start(argv, rank_env(r, world, port, extra), dir, "rank" + std::to_string(r), r));
  return procs;
}

inline std::string all_output(const std::vector<Proc>& procs) {
  std::string s;
  for (const Proc& p : procs)
    s += "--- rank " + std::to_string(p.rank) + " (exit " + std::to_string(p.exit_code()) + (p.timed_out ? ", KILLED" : "") +
         ")\n" + p.out() + p.err();
  return s;
}

// The children of a process (/proc/PID/task/*/children), in no particular order.
inline std::vector<pid_t> children_of(pid_t pid) {
  std::vector<pid_t> out;
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
    std::istringstream in(slurp(task.path().string() + "/children"));
    for (pid_t c; in >> c;) out.push_back(c);
  }
  return out;
}

// The process is gone: no /proc entry, or a zombie nobody has reaped yet (it runs no code any more).
inline bool gone(pid_t pid) {
  std::string stat = slurp("/proc/" + std::to_string(pid) + "/stat");
  if (stat.empty()) return true;
  size_t paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() && (stat[paren + 2] == 'Z' || stat[paren + 2] == 'X');
}

// A variable of a process's environment ("" when unset or unreadable).
inline std::string env_of(pid_t pid, const std::string& name) {
  std::string env = slurp("/proc/" + std::to_string(pid) + "/environ");
  std::string key = name + "=";
  for (size_t at = 0; at < env.size();) {
    size_t end = env.find('\0', at);
    if (end == std::string::npos) end = env.size();
    if (env.compare(at, key.size(), key) == 0) return env.substr(at + key.size(), end - at - key.size());
    at = end + 1;
  }
  return "";
}

// The workers megatron-run --nproc-per-node started: its children that lead a process group of their own and have
// a LOCAL_RANK (its guardian, launch/guardian.h, is a child that leads a group too, with the launcher's environment).
inline std::vector<pid_t> workers_of(pid_t launcher) {
  std::vector<pid_t> out;
  for (pid_t c : children_of(launcher))
    if (getpgid(c) == c && !env_of(c, "LOCAL_RANK").empty()) out.push_back(c);
  return out;
}

// Polls `pred` every 20 ms until it holds or `limit` passes; returns whether it held.
template <class Pred>
bool wait_for(Pred pred, std::chrono::milliseconds limit) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

// Kills (SIGKILL) the given processes' groups and the processes at the end of a scope: a failing test leaves no
// worker behind.
struct KillOnExit {
  std::vector<pid_t> pids;
  ~KillOnExit() {
    for (pid_t p : pids)
      if (p > 0 && !gone(p)) {
        kill(-p, SIGKILL);
        kill(p, SIGKILL);
      }
  }
};

// `megatron-run --nproc-per-node N` with the default job (job_args) and `extra` flags, waited for (180 s at
// most): the spawner's process.
inline Proc spawn_job(int n, const std::vector<std::string>& extra, const TempDir& dir, const std::string& tag,
                      std::map<std::string, std::string> env = {}) {
  std::vector<std::string> argv = {megatron_run(), "--nproc-per-node", std::to_string(n)};
  for (const std::string& a : job_args(extra)) argv.push_back(a);
  env.emplace("CUDA_DEVICE_MAX_CONNECTIONS", "1");
  env.emplace("MR_DIST_TIMEOUT_S", "60");
  std::vector<Proc> p = {start(argv, env, dir, tag)};
  wait_all(p, std::chrono::seconds(180));
  return p[0];
}

}  // namespace mrtest
