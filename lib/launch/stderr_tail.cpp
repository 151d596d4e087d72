// A worker's stderr tail without torch's info and warning log lines (stderr_tail.h).
#include "launch/stderr_tail.h"

#include <cctype>

namespace mr::launch {

namespace {

bool digit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }

// `n` digits at s[i]; advances i past them.
bool digits(std::string_view s, size_t& i, size_t n) {
  for (size_t k = 0; k < n; ++k, ++i)
    if (i >= s.size() || !digit(s[i])) return false;
  return true;
}

// At least one digit at s[i]; advances i past all of them.
bool some_digits(std::string_view s, size_t& i) {
  const size_t start = i;
  while (i < s.size() && digit(s[i])) ++i;
  return i > start;
}

// The level letter of a glog-formatted line ('I', 'W', 'E', 'F'), or 0 when `line` is not one. The forms:
//   glog:         "W1205 12:00:00.123456  1234 file.cpp:12] text"       (level, MMDD, time, thread id, place);
//                 the glog that LibTorch 2.x links writes the year too: "W20261205 12:00:00.123456  1234 ..."
//   c10's logger: "[W1205 12:00:00.123 file.cpp:12] text"             (no thread id; bracketed)
// either after torch's "[rank0]:" prefix.
char glog_level(std::string_view s) {
  size_t i = 0;
  if (s.substr(0, 5) == "[rank") {  // "[rank3]:"
    i = 5;
    if (!some_digits(s, i) || s.substr(i, 2) != "]:") return 0;
    i += 2;
  }
  const bool bracketed = i < s.size() && s[i] == '[';
  if (bracketed) ++i;
  if (i >= s.size()) return 0;
  const char level = s[i++];
  if (level != 'I' && level != 'W' && level != 'E' && level != 'F') return 0;
  const size_t date = i;
  if (!some_digits(s, i) || (i - date != 4 && i - date != 8) || i >= s.size() || s[i++] != ' ')
    return 0;                                                                                 // MMDD or YYYYMMDD
  if (!digits(s, i, 2) || s.substr(i, 1) != ":" || !digits(s, ++i, 2) || s.substr(i, 1) != ":" ||
      !digits(s, ++i, 2))
    return 0;                                                                                 // HH:MM:SS
  if (i < s.size() && s[i] == '.') {
    ++i;
    if (!some_digits(s, i)) return 0;                                                         // .fraction
  }
  // The rest up to the closing ']': an optional thread id, then the place "file:line".
  const size_t close = s.find(']', i);
  if (close == std::string_view::npos) return 0;
  std::string_view mid = s.substr(i, close - i);
  while (!mid.empty() && mid.front() == ' ') mid.remove_prefix(1);
  const size_t space = mid.rfind(' ');
  std::string_view place = space == std::string_view::npos ? mid : mid.substr(space + 1);
  if (space != std::string_view::npos) {
    std::string_view before = mid.substr(0, space);
    while (!before.empty() && before.back() == ' ') before.remove_suffix(1);
    if (bracketed && !before.empty()) return 0;  // c10's form has nothing between the time and the place
    size_t k = 0;
    if (!before.empty() && (!some_digits(before, k) || k != before.size())) return 0;  // glog's thread id
  } else if (!bracketed) {
    return 0;  // glog's form always has the thread id
  }
  const size_t colon = place.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return 0;
  size_t k = colon + 1;
  if (!some_digits(place, k) || k != place.size()) return 0;
  return level;
}

}  // namespace

bool is_torch_log_noise(std::string_view line) {
  const char level = glog_level(line);
  if (level != 'I' && level != 'W') return false;
  // Gloo's warning that the host name does not resolve: it then binds loopback, and a multi-node job fails with a
  // loopback "connect ... refused" that only this line explains (docs/distributed.md, GLOO_SOCKET_IFNAME).
  return line.find("Unable to resolve hostname") == std::string_view::npos;
}

void StderrTail::add(std::string line) {
  if (max_ == 0) return;
  if (is_torch_log_noise(line)) {
    noise_.push_back(std::move(line));
    if (noise_.size() > max_) noise_.pop_front();
    ++noise_since_last_;
    return;
  }
  kept_.push_back({std::move(line), noise_since_last_});
  noise_since_last_ = 0;
  if (kept_.size() > max_) kept_.pop_front();
}

std::vector<std::string> StderrTail::lines() const {
  std::vector<std::string> out;
  if (kept_.empty()) return {noise_.begin(), noise_.end()};
  for (const Kept& k : kept_) out.push_back(k.text);
  return out;
}

size_t StderrTail::left_out() const {
  if (kept_.empty()) return 0;
  size_t n = noise_since_last_;
  for (size_t i = 1; i < kept_.size(); ++i) n += kept_[i].noise_before;
  return n;
}

}  // namespace mr::launch
