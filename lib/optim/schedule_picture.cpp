// The schedule as a picture (schedule_picture.h).
#include "optim/schedule_picture.h"

#include <algorithm>
#include <cmath>

#include "config/value.h"
#include "util/svg.h"

namespace mr::optim {

namespace {

std::string phase_colour(SchedulePhase p) {
  switch (p) {
    case SchedulePhase::Warmup: return "#fdf1dc";
    case SchedulePhase::Constant: return "#eef3f8";
    case SchedulePhase::Stable: return "#eef3f8";
    case SchedulePhase::Decay: return "#eaf4e8";
    case SchedulePhase::Anneal: return "#f6e9f1";
    case SchedulePhase::Floor: return "#f1f1f1";
  }
  return "#ffffff";
}

struct Panel {
  double top, height;
  double lo, hi;  // value range
};

}  // namespace

std::string schedule_svg(const ScheduleRun& run, const std::vector<SchedulePoint>& points, const std::string& title) {
  const double left = 84, right = 24, width = 820, top = 70, panel_h = 200, gap = 56, bottom = 70;
  const double plot_w = width - left - right;
  const double height = top + 2 * panel_h + gap + bottom;
  const double x_end = std::max<double>(static_cast<double>(run.end), 1);
  auto x_of = [&](double step) { return left + plot_w * step / x_end; };

  double lr_hi = 0, wd_hi = 0, wd_lo = 0;
  for (const SchedulePoint& p : points) {
    lr_hi = std::max({lr_hi, p.lr, p.decoupled_lr.value_or(0)});
    wd_hi = std::max(wd_hi, p.weight_decay);
  }
  if (!(lr_hi > 0)) lr_hi = 1;
  if (!(wd_hi > 0)) wd_hi = 1;
  const Panel lr_panel{top, panel_h, 0, lr_hi * 1.1}, wd_panel{top + panel_h + gap, panel_h, wd_lo, wd_hi * 1.1};
  auto y_of = [](const Panel& p, double v) { return p.top + p.height - p.height * (v - p.lo) / (p.hi - p.lo); };

  svg::Document d(width, height, "megatron-run schedule: " + title);
  d.text(10, 22, title, {.size = 15, .bold = true});
  const ScheduleConfig& c = run.config;
  std::string sub = "--lr-decay-style " + std::string(to_string(c.lr_decay_style));
  if (c.lr_decay_style == LrDecayStyle::WSD) sub += " (" + std::string(to_string(c.lr_wsd_decay_style)) + ")";
  sub += ", peak " + py_float_repr(c.max_lr) + ", floor " + py_float_repr(c.min_lr) + "; weight decay " +
         py_float_repr(c.start_wd) + (c.start_wd != c.end_wd ? " to " + py_float_repr(c.end_wd) : "") + " (" +
         std::string(to_string(c.wd_incr_style)) + "); " +
         (run.sample_based       ? "sample-based"
          : run.constant_batch() ? "global batch " + std::to_string(run.global_batch_size)
                                 : "global batch " + std::to_string(run.global_batch_size) + " to " +
                                       std::to_string(run.batches.back().second) + " (--step-batch-size-schedule)");
  d.text(10, 40, sub, {.size = 12, .fill = "#444444"});

  // Phases as shaded bands behind both panels, named once above the first.
  size_t i = 0;
  while (i < points.size()) {
    size_t j = i;
    while (j + 1 < points.size() && points[j + 1].phase == points[i].phase) ++j;
    const double x0 = x_of(static_cast<double>(points[i].step));
    const double x1 = j + 1 < points.size() ? x_of(static_cast<double>(points[j + 1].step)) : x_of(x_end);
    for (const Panel* p : {&lr_panel, &wd_panel}) d.rect(x0, p->top, x1 - x0, p->height, phase_colour(points[i].phase));
    if (x1 - x0 > 40)
      d.text((x0 + x1) / 2, top - 6, std::string(to_string(points[i].phase)),
             {.size = 11, .anchor = svg::Anchor::Middle, .fill = "#555555"});
    i = j + 1;
  }

  auto draw_panel = [&](const Panel& p, const char* name) {
    for (double t : svg::nice_ticks(p.lo, p.hi, 5)) {
      const double y = y_of(p, t);
      d.line(left, y, left + plot_w, y, {.stroke = "#dddddd"});
      d.text(left - 6, y + 4, svg::tick_label(t), {.size = 10, .anchor = svg::Anchor::End, .fill = "#444444"});
    }
    d.line(left, p.top, left, p.top + p.height, {.stroke = "#444444"});
    d.line(left, p.top + p.height, left + plot_w, p.top + p.height, {.stroke = "#444444"});
    d.text(16, p.top + p.height / 2, name, {.size = 12, .anchor = svg::Anchor::Middle, .bold = true, .rotate = -90});
    for (double t : svg::nice_ticks(0, x_end, 8)) {
      const double x = x_of(t);
      d.line(x, p.top + p.height, x, p.top + p.height + 4, {.stroke = "#444444"});
      d.text(x, p.top + p.height + 16, svg::tick_label(t), {.size = 10, .anchor = svg::Anchor::Middle,
                                                            .fill = "#444444"});
    }
  };
  draw_panel(lr_panel, "learning rate");
  draw_panel(wd_panel, "weight decay");
  d.text(left + plot_w / 2, wd_panel.top + wd_panel.height + 36,
         run.sample_based ? "consumed samples" : "iteration", {.size = 12, .anchor = svg::Anchor::Middle});

  for (const ScheduleMark& m : run.marks) {
    const double x = x_of(static_cast<double>(m.step));
    for (const Panel* p : {&lr_panel, &wd_panel})
      d.line(x, p->top, x, p->top + p->height, {.stroke = "#888888", .dash = "4 3"});
    // Labels right of their line, or left of it in the right half of the plot (they would run off the page).
    const bool right_half = x > left + plot_w / 2;
    d.text(right_half ? x - 4 : x + 4, lr_panel.top + 14 + 12 * static_cast<double>(&m - run.marks.data()),
           m.what + " @ " + std::to_string(m.step),
           {.size = 10, .anchor = right_half ? svg::Anchor::End : svg::Anchor::Start, .fill = "#555555"});
  }

  std::vector<std::pair<double, double>> lr, dec, wd;
  for (const SchedulePoint& p : points) {
    const double x = x_of(static_cast<double>(p.step));
    lr.emplace_back(x, y_of(lr_panel, p.lr));
    if (p.decoupled_lr) dec.emplace_back(x, y_of(lr_panel, *p.decoupled_lr));
    wd.emplace_back(x, y_of(wd_panel, p.weight_decay));
  }
  d.polyline(lr, {.stroke = "#1f5fa6", .width = 2});
  // The legend, below the marks' labels at the plot's right.
  const double lx = left + plot_w - 210, ly = lr_panel.top + 24 + 12 * static_cast<double>(run.marks.size());
  d.line(lx, ly, lx + 30, ly, {.stroke = "#1f5fa6", .width = 2});
  d.text(lx + 36, ly + 4, "learning rate (--lr)", {.size = 10});
  if (!dec.empty()) {
    d.polyline(dec, {.stroke = "#e15759", .width = 2, .dash = "6 3"});
    d.line(lx, ly + 16, lx + 30, ly + 16, {.stroke = "#e15759", .width = 2, .dash = "6 3"});
    d.text(lx + 36, ly + 20, "embedding/output (--decoupled-lr)", {.size = 10});
  }
  d.polyline(wd, {.stroke = "#2f8a3b", .width = 2});
  d.text(10, height - 10,
         "Values from megatron-run's port of Megatron's OptimizerParamScheduler; a point at iteration i is the value "
         "logged at i.",
         {.size = 10, .fill = "#666666"});
  return d.str();
}

}  // namespace mr::optim
