// --step-batch-size-schedule's text (config/step_batch_schedule.h).
#include "config/step_batch_schedule.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <sstream>

#include "config/converters.h"

namespace mr {

namespace {

const std::string kFlag = "--step-batch-size-schedule";

// _parse_numeric_value: strip, upper-case, one trailing K/M/B/T, then int(float(rest) * multiplier).
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
  double x = 0;
  try {
    x = parse_py_float(v) * mult;  // Python's float(): underscores between digits, no hex
  } catch (const ConvError&) {
    throw StepScheduleError(kFlag + ": '" + entry + "' is not THRESHOLD:BATCH_SIZE with numbers (K, M, B, T allowed)");
  }
  if (std::isnan(x) || std::isinf(x))  // int(nan) is a ValueError, int(inf) an OverflowError
    throw StepScheduleError(kFlag + ": '" + entry + "' has a number that is not finite");
  if (std::fabs(x) > 9e18) throw StepScheduleError(kFlag + ": '" + entry + "' has a number beyond 9e18");
  return static_cast<int64_t>(std::trunc(x));  // int(): toward zero
}

}  // namespace

std::vector<std::pair<int64_t, int64_t>> parse_step_batch_schedule(const std::string& text,
                                                                   std::optional<int64_t> seq_length) {
  std::string s = text;
  std::replace(s.begin(), s.end(), ',', ' ');
  std::istringstream in(s);
  struct Entry {
    int64_t threshold, batch;
    std::string text;
  };
  std::vector<Entry> entries;
  std::string entry;
  const bool tokens = seq_length && *seq_length > 0;
  while (in >> entry) {
    const size_t colon = entry.find(':');
    if (colon == std::string::npos)
      throw StepScheduleError(kFlag + ": invalid entry '" + entry + "'; expected THRESHOLD:BATCH_SIZE");
    int64_t threshold = numeric(entry.substr(0, colon), entry);
    const int64_t batch = numeric(entry.substr(colon + 1), entry);
    if (tokens) {  // Python's // rounds toward minus infinity
      const int64_t q = *seq_length;
      threshold = threshold >= 0 ? threshold / q : -((-threshold + q - 1) / q);
    }
    entries.push_back(Entry{threshold, batch, entry});
  }
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.threshold < b.threshold; });
  // "'2K:8' (its tokens / --seq-length 128 = 15 samples)": where a threshold in samples came from.
  auto samples = [&](const Entry& e) {
    return "'" + e.text + "' (" +
           (tokens ? "its tokens / --seq-length " + std::to_string(*seq_length) + " = " : std::string()) +
           std::to_string(e.threshold) + " samples)";
  };
  if (entries.empty()) throw StepScheduleError(kFlag + ": the schedule has no entry");
  if (entries.front().threshold != 0)
    throw StepScheduleError(kFlag + ": the first entry must have threshold 0, not " + samples(entries.front()));
  for (size_t i = 1; i < entries.size(); ++i)
    if (entries[i].threshold <= entries[i - 1].threshold)
      throw StepScheduleError(kFlag + ": thresholds must increase strictly: " + samples(entries[i - 1]) + ", then " +
                              samples(entries[i]));
  std::vector<std::pair<int64_t, int64_t>> out;
  for (const Entry& e : entries) {
    if (e.batch <= 0)
      throw StepScheduleError(kFlag + ": a batch size must be above 0, not " + std::to_string(e.batch) + " ('" +
                              e.text + "')");
    out.emplace_back(e.threshold, e.batch);
  }
  return out;
}

}  // namespace mr
