// The schedule of a whole run (schedule_series.h).
#include "optim/schedule_series.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "config/checked.h"

namespace mr::optim {

std::string_view to_string(SchedulePhase p) {
  switch (p) {
    case SchedulePhase::Warmup: return "warmup";
    case SchedulePhase::Constant: return "constant";
    case SchedulePhase::Stable: return "stable";
    case SchedulePhase::Decay: return "decay";
    case SchedulePhase::Anneal: return "anneal";
    case SchedulePhase::Floor: return "floor";
  }
  return "?";
}

// The same tests, in the same order, as ParamScheduler::lr_at.
SchedulePhase phase_at(const ScheduleConfig& c, int64_t samples) {
  const double n = static_cast<double>(samples);
  if (c.lr_warmup_steps > 0 && n <= c.lr_warmup_steps) return SchedulePhase::Warmup;
  if (c.lr_decay_style == LrDecayStyle::Constant) return SchedulePhase::Constant;
  if (samples > c.lr_decay_steps) return SchedulePhase::Floor;
  if (c.lr_decay_style == LrDecayStyle::WSD && c.wsd_decay_steps)
    return samples <= c.lr_decay_steps - *c.wsd_decay_steps ? SchedulePhase::Stable : SchedulePhase::Anneal;
  return SchedulePhase::Decay;
}

int64_t ScheduleRun::samples_at(int64_t step) const {
  if (sample_based) return step;
  // Piece by piece: the iterations of a piece's size until the consumed samples reach the next threshold.
  int64_t consumed = 0, left = step;
  for (size_t k = 0; k < batches.size(); ++k) {
    const int64_t bs = batches[k].second;
    if (k + 1 < batches.size() && consumed < batches[k + 1].first) {
      const int64_t n = (batches[k + 1].first - consumed + bs - 1) / bs;
      if (left > n) {
        consumed += n * bs, left -= n;  // below the next threshold plus bs: no overflow
        continue;
      }
    } else if (k + 1 < batches.size()) {
      continue;  // already past the next threshold
    }
    const auto more = checked_mul(left, bs);
    const auto s = more ? checked_add(consumed, *more) : std::nullopt;
    if (s) return *s;
    break;
  }
  throw std::overflow_error("the samples of iteration " + std::to_string(step) + " (batches of " +
                            std::to_string(batches.empty() ? 0 : batches.back().second) +
                            ") do not fit in 64 bits");
}

int64_t ScheduleRun::step_at(double samples) const {
  if (sample_based) return static_cast<int64_t>(samples);
  int64_t consumed = 0, step = 0;
  for (size_t k = 0; k < batches.size(); ++k) {
    const int64_t bs = batches[k].second;
    const bool last = k + 1 == batches.size();
    if (!last && consumed >= batches[k + 1].first) continue;
    const int64_t n = last ? 0 : (batches[k + 1].first - consumed + bs - 1) / bs;
    const double in_piece = (samples - static_cast<double>(consumed)) / static_cast<double>(bs);
    if (last || in_piece < static_cast<double>(n)) return step + static_cast<int64_t>(std::floor(in_piece));
    consumed += n * bs, step += n;
  }
  return step;
}

ScheduleRun ScheduleRun::from_args(const Args& a, BatchPieces batches) {
  ScheduleRun r;
  r.config = ScheduleConfig::from_args(a);
  r.config.check();
  r.sample_based = !(a.train_iters && *a.train_iters != 0);
  r.batches = batches.empty() ? BatchPieces{{0, a.global_batch_size}} : std::move(batches);
  if (r.batches.front().first != 0) throw std::invalid_argument("the batch sizes must start at 0 samples");
  for (size_t k = 0; k < r.batches.size(); ++k)
    if (r.batches[k].second <= 0 || (k && r.batches[k].first <= r.batches[k - 1].first))
      throw std::invalid_argument("the batch sizes must be above 0, their thresholds increasing");
  r.global_batch_size = r.batches.front().second;
  r.end = r.sample_based ? a.train_samples.value_or(0) : a.train_iters.value_or(0);
  if (r.end < 0) throw std::invalid_argument(std::string(r.sample_based ? "--train-samples" : "--train-iters") +
                                             " must not be negative");
  // A phase boundary in samples, on the x axis: the last step whose samples are not past it.
  auto step_of = [&](double samples) { return r.step_at(samples); };
  const ScheduleConfig& c = r.config;
  const char* decay_flag = r.sample_based ? "--lr-decay-samples" : "--lr-decay-iters";
  if (c.lr_warmup_steps > 0) r.marks.push_back({step_of(c.lr_warmup_steps), "warmup ends"});
  if (c.lr_decay_style == LrDecayStyle::WSD && c.wsd_decay_steps)
    r.marks.push_back({step_of(static_cast<double>(c.lr_decay_steps - *c.wsd_decay_steps)), "annealing begins"});
  if (c.lr_decay_style != LrDecayStyle::Constant && c.lr_decay_style != LrDecayStyle::InverseSquareRoot)
    r.marks.push_back({step_of(static_cast<double>(c.lr_decay_steps)), std::string("decay ends (") + decay_flag + ")"});
  std::erase_if(r.marks, [&](const ScheduleMark& m) { return m.step < 0 || m.step > r.end; });
  return r;
}

std::vector<SchedulePoint> ScheduleRun::at(const std::vector<int64_t>& steps) const {
  ParamScheduler s(config);
  const GroupOverride dec = config.embedding_output_group();
  std::vector<SchedulePoint> out;
  out.reserve(steps.size());
  for (int64_t step : steps) {
    if (step < 0) throw std::invalid_argument("a step of the schedule must not be negative");
    SchedulePoint p;
    p.step = step;
    p.samples = samples_at(step);
    p.lr = s.lr_at(p.samples, config.max_lr, config.min_lr);
    p.weight_decay = s.wd_at(p.samples, config.start_wd, config.end_wd);
    if (config.decoupled_lr)
      p.decoupled_lr = s.lr_at(p.samples, dec.max_lr.value_or(config.max_lr), dec.min_lr.value_or(config.min_lr));
    p.phase = phase_at(config, p.samples);
    out.push_back(p);
  }
  return out;
}

namespace {
std::vector<int64_t> sorted_unique(std::vector<int64_t> v, int64_t end) {
  std::erase_if(v, [&](int64_t s) { return s < 0 || s > end; });
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}
}  // namespace

std::vector<int64_t> even_steps(const ScheduleRun& run, int64_t count) {
  count = std::max<int64_t>(count, 1);
  std::vector<int64_t> v;
  for (int64_t i = 0; i <= count; ++i)
    v.push_back(static_cast<int64_t>(static_cast<long double>(run.end) * i / count));
  for (const ScheduleMark& m : run.marks)
    for (int64_t d : {-1, 0, 1}) v.push_back(m.step + d);
  return sorted_unique(std::move(v), run.end);
}

std::vector<int64_t> every_steps(const ScheduleRun& run, int64_t k) {
  k = std::max<int64_t>(k, 1);
  std::vector<int64_t> v;
  for (int64_t s = 0; s <= run.end; s += k) {
    v.push_back(s);
    if (s > run.end - k) break;  // no overflow past end
  }
  v.push_back(run.end);
  return sorted_unique(std::move(v), run.end);
}

}  // namespace mr::optim
