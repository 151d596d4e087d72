// Helpers for tests that run the megatron-run executable: stdout and stderr apart, an environment, files with
// arbitrary bytes, and the bad-input runner's "printable UTF-8" check (tests/bad-inputs/run.py).
#pragma once

#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "scratch.h"
#include "util/text.h"

namespace mrtest {

struct Proc {
  int exit = -1;
  std::string out, err;
  std::string all() const { return out + err; }
};

// Runs `cmd` through /bin/sh; `out` is its stdout (redirect stderr in `cmd` to keep it).
inline Proc run_shell(const std::string& cmd) {
  Proc r;
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  int status = pclose(p);
  r.exit = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// Runs `ENV megatron-run ARGS` through /bin/sh (so ARGS may use "$(printf '\001')" for bytes argv can carry);
// ENV is "VAR=value ..." or empty.
inline Proc megatron_run(const std::string& args, const std::string& env = "") {
  const std::string err_file = (scratch_dir() / "stderr").string();
  const std::string cmd = env + (env.empty() ? "" : " ") + "'" + MR_BINARY + "' " + args + " 2>'" + err_file + "'";
  Proc r = run_shell(cmd);
  std::ifstream e(err_file, std::ios::binary);
  std::stringstream ss;
  ss << e.rdbuf();
  r.err = ss.str();
  return r;
}

// `megatron-run ARGS` with stderr merged into `out` (2>&1), and with stderr dropped (stdout only).
inline Proc megatron_run_merged(const std::string& args) {
  return run_shell(std::string("'") + MR_BINARY + "' " + args + " 2>&1");
}
inline Proc megatron_run_stdout(const std::string& args) {
  return run_shell(std::string("'") + MR_BINARY + "' " + args + " 2>/dev/null");
}

// What tests/bad-inputs/run.py accepts as printable output: valid UTF-8 with no control character but \n and \t
// (C0, DEL, C1).
inline bool printable_output(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    uint32_t cp = 0;
    size_t n = mr::utf8_char(s, i, cp);
    if (n == 0) return false;
    if ((cp < 0x20 && cp != '\n' && cp != '\t') || cp == 0x7f || (cp >= 0x80 && cp < 0xa0)) return false;
    i += n;
  }
  return true;
}

}  // namespace mrtest
