// What the launcher's process tests share: the binary, the default config and the test programs, a shell command
// under `timeout`, a launcher sent a signal once its workers are ready (under an 80 s guard instead), and a scratch
// directory. No command can hang.
#pragma once

#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "../config/binary.h"
#include "../config/scratch.h"

namespace mrtest::launcher {

namespace fs = std::filesystem;

inline const std::string kBin = std::string("'") + MR_BINARY + "'";
inline const std::string kConfig = std::string(MR_SOURCE_DIR) + "/configs/default.yaml";
inline const std::string kProbe = std::string(MR_SOURCE_DIR) + "/tests/launch/programs/probe.py";
inline const std::string kFaults = std::string(MR_SOURCE_DIR) + "/tests/launch/programs/faults.py";
// megatron-run with the default config, its Python programs under Debian's /usr/bin/python3.
inline const std::string kRun = "PYTHON_EXEC=/usr/bin/python3 " + kBin + " --config " + kConfig + " ";

// stdout and stderr together, the command (ENV=... PROGRAM ARGS) killed after 90 s.
inline Proc sh(const std::string& cmd) { return run_shell("timeout -k 5 90 env " + cmd + " 2>&1"); }

inline bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// A guard for a background process $pid: SIGKILLs it after 80 s. Its output goes to /dev/null, and `kill $guard`
// ends its `sleep` too (the trap): a `sleep` left holding run_shell's pipe kept it reading for the whole 80 s.
inline const std::string kGuard =
    "(trap 'kill $s 2>/dev/null; exit 0' TERM; sleep 80 & s=$!; wait $s && kill -9 $pid) >/dev/null 2>&1";

// Starts `env` + kRun + `launch` (tests/launch/programs/faults.py on 2 local ranks, each touching `dir`/ready.<rank>
// when it listens) in the background in `dir`, sends the launcher itself `signal` (a kill(1) name: TERM, USR1)
// once both workers are ready, and returns "exit=<its status>" followed by its output (out.txt). The launcher gets
// the signal, so it runs under no `timeout`: a guard kills it after 80 s instead.
inline Proc signal_launcher(const fs::path& dir, const std::string& env, const std::string& launch,
                            const std::string& signal) {
  const std::string ready = (dir / "ready").string();
  return run_shell("cd '" + dir.string() + "' && rm -f ready.*; (exec env " + env + " FAULT_READY='" + ready + "' " +
                   kRun + "--nproc-per-node 2 " + launch + " --no-append-args " + kFaults +
                   " > out.txt 2>&1) & pid=$!; " + kGuard + " & guard=$!; "
                   "for i in $(seq 600); do [ -e ready.0 ] && [ -e ready.1 ] && break; sleep 0.1; done; kill -" +
                   signal + " $pid; wait $pid; echo \"exit=$?\"; kill $guard 2>/dev/null; cat out.txt");
}

inline std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A scratch directory, /tmp/<prefix>-<pid>, made empty and removed at the end.
struct ScratchDir {
  fs::path path;
  explicit ScratchDir(const std::string& prefix)
      : path(fs::temp_directory_path() / (prefix + "-" + std::to_string(getpid()))) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~ScratchDir() { fs::remove_all(path); }
};

// What signal_launcher's output says when every worker handled the forwarded signal `number` (`name`, "SIGTERM")
// and exited 0: the launcher forwarded it, each rank's faults.py line, the launcher's line, exit 0.
inline void check_handled_stop(const std::string& out, int number, const std::string& name) {
  INFO(out);
  const std::string sig = "signal " + std::to_string(number) + " (" + name + ")";
  CHECK(has(out, "received " + sig + "; forwarding it to the workers"));
  CHECK(has(out, "[rank 0] rank 0 got " + name));
  CHECK(has(out, "[rank 1] rank 1 got " + name));
  CHECK(has(out, "megatron-run: every worker exited with code 0 after the forwarded " + sig +
                     ": they handled the stop; exit 0"));
  CHECK(has(out, "exit=0"));
}

// A Megatron CI config (functional-test layout) with the given ENV_VARS lines ("  NAME: value\n" each) and a small
// TP=2 model, written into the scratch folder `scratch`: what the ENV_VARS tests launch and dry-run.
inline std::string env_vars_config(const std::string& name, const std::string& env_vars, const std::string& scratch) {
  return mrtest::write_file(name,
                            "ENV_VARS:\n" + env_vars +
                                "MODEL_ARGS:\n"
                                "  {--num-layers: 2, --hidden-size: 256, --num-attention-heads: 4,\n"
                                "   --max-position-embeddings: 128, --seq-length: 128, --micro-batch-size: 2,\n"
                                "   --global-batch-size: 8, --train-iters: 4, --lr: 0.0003, --mock-data: true,\n"
                                "   --tokenizer-type: NullTokenizer, --vocab-size: 1024,\n"
                                "   --tensor-model-parallel-size: 2}\n",
                            scratch);
}

}  // namespace mrtest::launcher
