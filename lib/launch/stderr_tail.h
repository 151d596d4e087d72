// The last lines of a worker's stderr that the failure summary shows (failure_report.h), without the log lines
// of torch's C++ side: c10d and its process groups log through glog's line format ("W1205 12:00:00.123456 1234
// file.cpp:12] ...", or "[W1205 12:00:00.123 file.cpp:12] ..." from c10's own logger, optionally after
// "[rank0]:"). At info and warning level those lines can fill the whole tail and push out the line that says why
// the rank failed; they are left out of it and counted. Error and fatal lines (E, F) stay: they may be the cause,
// and so does Gloo's warning that the host name does not resolve (the hint for a loopback-bound Gloo). The date is
// MMDD, or YYYYMMDD in the glog that LibTorch 2.x links.
// Torch-free.
#pragma once

#include <cstddef>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

namespace mr::launch {

// `line` (without its newline) is a glog-formatted log line at info or warning level (I or W), other than Gloo's
// unresolvable-host-name warning.
bool is_torch_log_noise(std::string_view line);

class StderrTail {
 public:
  explicit StderrTail(size_t max_lines = 10) : max_(max_lines) {}

  void add(std::string line);
  // The tail: the last `max_lines` lines that are not torch log noise; when the stream had no other lines, the
  // last noise lines themselves (then nothing is left out).
  std::vector<std::string> lines() const;
  // How many torch log lines were left out among and after the lines lines() returns (those before the oldest
  // line it shows are not counted: they were not in the tail's window anyway).
  size_t left_out() const;

 private:
  struct Kept {
    std::string text;
    size_t noise_before = 0;  // noise lines between the previous kept line and this one
  };
  size_t max_;
  std::deque<Kept> kept_;
  std::deque<std::string> noise_;  // the last noise lines (shown only when nothing else was written)
  size_t noise_since_last_ = 0;    // noise lines after the newest kept line
};

}  // namespace mr::launch
