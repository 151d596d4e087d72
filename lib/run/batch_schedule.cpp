// The global batch size of each step (run/batch_schedule.h).
#include "run/batch_schedule.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <sstream>

#include "run/model.h"

namespace mr::run {

namespace {

const char* const kFlag = "--step-batch-size-schedule";

// Megatron's _parse_numeric_value: a number (int(float(text)), so "1.5K" is 1500) with an optional K/M/B/T suffix.
int64_t numeric(std::string v, const std::string& entry) {
  for (char& ch : v) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  double mult = 1;
  if (!v.empty()) {
    const char last = v.back();
    if (last == 'T') mult = 1e12;
    if (last == 'B') mult = 1e9;
    if (last == 'M') mult = 1e6;
    if (last == 'K') mult = 1e3;
    if (mult != 1) v.pop_back();
  }
  size_t used = 0;
  double x = 0;
  try {
    x = std::stod(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (v.empty() || used != v.size() || !std::isfinite(x) || std::fabs(x * mult) > 9e18)
    throw RunError(std::string(kFlag) + ": '" + entry + "' is not THRESHOLD:BATCH_SIZE with numbers (K, M, B, T allowed)");
  return static_cast<int64_t>(std::trunc(x * mult));  // Python's int(): toward zero
}

}  // namespace

std::vector<std::pair<int64_t, int64_t>> parse_batch_schedule(const std::string& text, int64_t seq_length) {
  std::string s = text;
  std::replace(s.begin(), s.end(), ',', ' ');
  std::istringstream in(s);
  std::vector<std::pair<int64_t, int64_t>> out;
  std::string entry;
  while (in >> entry) {
    const size_t colon = entry.find(':');
    if (colon == std::string::npos)
      throw RunError(std::string(kFlag) + ": invalid entry '" + entry + "'; expected THRESHOLD:BATCH_SIZE");
    int64_t threshold = numeric(entry.substr(0, colon), entry);
    const int64_t batch = numeric(entry.substr(colon + 1), entry);
    if (seq_length > 0) threshold = threshold >= 0 ? threshold / seq_length : -((-threshold + seq_length - 1) / seq_length);
    out.emplace_back(threshold, batch);
  }
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  return out;
}

BatchSchedule BatchSchedule::from(const Args& args) {
  BatchSchedule b;
  b.micro_ = std::max<int64_t>(1, args.micro_batch_size.value_or(1));
  b.dp_ = std::max<int64_t>(1, args.data_parallel_size) * std::max<int64_t>(1, args.gtp_weight_remat_size);
  b.decrease_ = args.decrease_batch_size_if_needed;
  if (args.step_batch_size_schedule) {
    if (b.decrease_)
      throw RunError("--step-batch-size-schedule does not go with --decrease-batch-size-if-needed (Megatron refuses "
                     "both at initialisation)");
    b.from_schedule_ = true;
    b.steps_ = parse_batch_schedule(*args.step_batch_size_schedule, args.seq_length.value_or(0));
    if (b.steps_.empty()) throw RunError(std::string(kFlag) + ": the schedule has no entry");
    if (b.steps_.front().first != 0)
      throw RunError(std::string(kFlag) + ": the first entry must have threshold 0, not " +
                     std::to_string(b.steps_.front().first) + " samples");
    for (size_t i = 1; i < b.steps_.size(); ++i)
      if (b.steps_[i].first <= b.steps_[i - 1].first)
        throw RunError(std::string(kFlag) + ": thresholds must increase strictly (" +
                       std::to_string(b.steps_[i - 1].first) + " samples, then " + std::to_string(b.steps_[i].first) +
                       (args.seq_length ? "; tokens are divided by --seq-length" : "") + ")");
    for (const auto& [t, bs] : b.steps_)
      if (bs <= 0) throw RunError(std::string(kFlag) + ": a batch size must be above 0, not " + std::to_string(bs));
    return b;
  }
  if (!args.global_batch_size) throw RunError("the training run needs --global-batch-size");
  b.steps_ = {{0, *args.global_batch_size}};
  return b;
}

BatchSchedule::Step BatchSchedule::peek(int64_t consumed) const {
  int64_t global = steps_.front().second;
  for (const auto& [threshold, bs] : steps_) {
    if (consumed < threshold) break;
    global = bs;
  }
  const int64_t unit = micro_ * dp_;
  Step s;
  s.global = global;
  s.running = decrease_ ? global - global % unit : global;
  s.microbatches = s.running / unit;
  return s;
}

BatchSchedule::Step BatchSchedule::at(int64_t consumed) const {
  const Step s = peek(consumed);
  const int64_t global = s.global, unit = micro_ * dp_;
  if (!decrease_ && global % unit != 0)
    throw RunError("the global batch size " + std::to_string(global) + (scheduled() ? " (--step-batch-size-schedule)" : "") +
                   " is not divisible by --micro-batch-size " + std::to_string(micro_) + " x data-parallel size " +
                   std::to_string(dp_) + " (Megatron's consistency check)");
  if (s.microbatches < 1)
    throw RunError("the global batch size " + std::to_string(global) + " is smaller than --micro-batch-size " +
                   std::to_string(micro_) + " x data-parallel size " + std::to_string(dp_));
  return s;
}

int64_t BatchSchedule::iterations_for(int64_t train_samples) const {
  if (!from_schedule_) return train_samples / steps_.front().second;
  // Megatron: while consumed < train_samples: consumed += the current global batch size (no consistency check).
  int64_t consumed = 0, iterations = 0;
  for (size_t k = 0; k < steps_.size() && consumed < train_samples; ++k) {
    const int64_t bs = steps_[k].second;
    const int64_t until = k + 1 < steps_.size() ? std::min(steps_[k + 1].first, train_samples) : train_samples;
    if (consumed >= until) continue;
    const int64_t n = (until - consumed + bs - 1) / bs;  // steps of this size until the next threshold is reached
    consumed += n * bs;
    iterations += n;
  }
  return iterations;
}

int64_t BatchSchedule::largest() const {
  int64_t m = 0;
  for (const auto& [t, bs] : steps_) m = std::max(m, bs);
  return m;
}

}  // namespace mr::run
