// What the checkpoint tests share (checkpoint_test.cpp, checkpoint_locate_test.cpp,
// checkpoint_resume_args_test.cpp): megatron-run jobs with a hard timeout, and reading what they printed and wrote.
#pragma once

#include <map>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "../distributed/proc.h"

namespace mrtest::ckpt {

inline mrtest::Proc spawn(int n, const std::vector<std::string>& extra, const mrtest::TempDir& dir, const std::string& tag,
                          std::map<std::string, std::string> env = {}) {
  return mrtest::spawn_job(n, extra, dir, tag, std::move(env));
}

inline std::string bytes_of(const std::string& path) { return mrtest::slurp(path); }

inline std::string checksum_line(const std::string& out) {
  std::smatch m;
  static const std::regex re(R"(parameter checksum ([0-9a-f]+))");
  return std::regex_search(out, m, re) ? m[1].str() : "";
}

inline std::string tracker(const std::string& dir) { return bytes_of(dir + "/latest_checkpointed_iteration.txt"); }

// `head`'s flags, then `tail`'s: a test's common flags and one job's own (of two same flags, the later one wins).
inline std::vector<std::string> joined(std::vector<std::string> head, const std::vector<std::string>& tail) {
  head.insert(head.end(), tail.begin(), tail.end());
  return head;
}

}  // namespace mrtest::ckpt
