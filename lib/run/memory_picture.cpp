// The memory plan as stacked bars (memory_picture.h).
#include "run/memory_picture.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "util/svg.h"
#include "util/byte_size.h"

namespace mr::run {

std::string memory_svg(const std::vector<RankMemory>& ranks, double capacity_bytes, const std::string& capacity_label,
                       const std::string& title, const std::string& subtitle) {
  struct Part {
    const char* name;
    double MemoryEstimate::*field;
    const char* colour;
  };
  const Part parts[] = {{"weights", &MemoryEstimate::params, "#4e79a7"},
                        {"gradients", &MemoryEstimate::grads, "#f28e2b"},
                        {"main params", &MemoryEstimate::main_params, "#59a14f"},
                        {"optimizer state", &MemoryEstimate::optimizer_state, "#b07aa1"},
                        {"activations", &MemoryEstimate::activations, "#e15759"}};
  // A part's value for a rank: NaN where it is not modelled or not estimated for that rank.
  auto value = [](const RankMemory& r, const Part& p) {
    return p.field == &MemoryEstimate::activations && !r.activations_shown ? std::nan("") : r.mem.*p.field;
  };
  double top_bytes = capacity_bytes;
  bool unknown_state = false, first_stage_only = false;
  for (const RankMemory& r : ranks) {
    if (!r.activations_shown) first_stage_only = true;
    double t = 0;
    for (const Part& p : parts) {
      const double v = value(r, p);
      if (p.field == &MemoryEstimate::activations && std::isnan(v)) continue;
      if (std::isnan(v)) unknown_state = true;
      else t += v;
    }
    top_bytes = std::max(top_bytes, t);
  }
  if (!(top_bytes > 0)) top_bytes = 1;
  const std::vector<double> ticks = svg::nice_ticks(0, top_bytes * 1.08 / kGiB, 6);
  const double axis_top_gib = std::max(ticks.empty() ? 1.0 : ticks.back(), top_bytes * 1.08 / kGiB);

  const double left = 70, right = 170, top = 64, plot_h = 300, bottom = 70;
  const double bar_w = ranks.size() > 32 ? 12 : 34, gap = ranks.size() > 32 ? 4 : 14;
  const double plot_w = std::max(360.0, static_cast<double>(ranks.size()) * (bar_w + gap) + gap);
  const double width = left + plot_w + right, height = top + plot_h + bottom;
  auto y_of = [&](double bytes) { return top + plot_h - plot_h * (bytes / kGiB) / axis_top_gib; };

  svg::Document d(width, height, "megatron-run params: " + title);
  d.text(10, 22, title, {.size = 15, .bold = true});
  d.text(10, 40, subtitle, {.size = 12, .fill = "#444444"});
  // Axis and grid.
  for (double t : ticks) {
    const double y = y_of(t * kGiB);
    d.line(left, y, left + plot_w, y, {.stroke = "#e3e3e3"});
    d.text(left - 6, y + 4, svg::tick_label(t), {.size = 10, .anchor = svg::Anchor::End, .fill = "#444444"});
  }
  d.text(18, top + plot_h / 2, "GiB per GPU", {.size = 11, .anchor = svg::Anchor::Middle, .rotate = -90});
  d.line(left, top, left, top + plot_h, {.stroke = "#444444"});
  d.line(left, top + plot_h, left + plot_w, top + plot_h, {.stroke = "#444444"});

  for (size_t i = 0; i < ranks.size(); ++i) {
    const RankMemory& r = ranks[i];
    const double x = left + gap + static_cast<double>(i) * (bar_w + gap);
    double base = 0, total = 0;
    std::string tip = "(tp " + std::to_string(r.tp_rank) + ", pp " + std::to_string(r.pp_rank) + ")";
    for (const Part& p : parts) {
      const double v = value(r, p);
      const bool activ = p.field == &MemoryEstimate::activations;
      std::string shown = "not modelled";
      if (!std::isnan(v)) shown = format_gib(v);
      else if (activ && !r.activations_shown) shown = "not estimated (Megatron estimates the first pipeline stage)";
      tip += std::string("\n") + p.name + ": " + shown;
      if (!std::isnan(v)) total += v;
    }
    tip += "\ntotal: " + format_gib(total) + (total > capacity_bytes ? " (over " + capacity_label + ")" : "");
    d.begin_group(tip);
    for (const Part& p : parts) {
      const double v = value(r, p);
      if (std::isnan(v) || v <= 0) continue;
      d.rect(x, y_of(base + v), bar_w, y_of(base) - y_of(base + v), p.colour);
      base += v;
    }
    if (total > capacity_bytes)
      d.rect(x - 1.5, y_of(total), bar_w + 3, y_of(0) - y_of(total), "none", {}, "#d62728", 2);
    d.end_group();
    const std::string label = std::to_string(r.tp_rank) + "," + std::to_string(r.pp_rank);
    d.text(x + bar_w / 2, top + plot_h + 14, label,
           {.size = ranks.size() > 32 ? 7.5 : 10, .anchor = svg::Anchor::Middle, .fill = "#333333"});
  }
  d.text(left + plot_w / 2, top + plot_h + 32, "(tensor rank, pipeline rank)",
         {.size = 11, .anchor = svg::Anchor::Middle});

  // The device's capacity.
  const double cy = y_of(capacity_bytes);
  d.line(left, cy, left + plot_w, cy, {.stroke = "#d62728", .width = 2, .dash = "6 4"});
  d.text(left + plot_w - 4, cy - 5, "device memory " + capacity_label, {.size = 11, .anchor = svg::Anchor::End,
                                                                        .fill = "#d62728", .bold = true});

  // Legend.
  double ly = top + 8;
  const double lx = left + plot_w + 20;
  for (auto it = std::rbegin(parts); it != std::rend(parts); ++it) {
    d.rect(lx, ly - 10, 14, 14, it->colour);
    d.text(lx + 20, ly + 2, it->name, {.size = 11});
    ly += 22;
  }
  d.rect(lx, ly - 10, 14, 14, "none", {}, "#d62728", 2);
  d.text(lx + 20, ly + 2, "over capacity", {.size = 11});
  ly += 26;
  // Which estimate the activations are (Megatron's function), and where they apply.
  const std::string fn = ranks.empty() ? std::string() : ranks.front().mem.activation_estimate;
  d.text(lx, ly, fn.empty() ? "activations: not estimated" : "activations: Megatron's",
         {.size = 10, .fill = "#666666"});
  if (!fn.empty()) {
    // compute_activation_memory (SP with selective recompute) or compute_activation_memory_without_sp, in words
    // that fit the legend.
    d.text(lx, ly + 14, "theoretical estimate", {.size = 10, .fill = "#666666"});
    ly += 14;
    d.text(lx, ly + 14, fn == "compute_activation_memory" ? "(SP, selective recompute)" : "(formula without SP)",
           {.size = 10, .fill = "#666666"});
    if (first_stage_only) {
      ly += 14;
      d.text(lx, ly + 14, "first pipeline stage only", {.size = 10, .fill = "#666666"});
    }
  }
  if (unknown_state) d.text(lx, ly + 32, "optimizer state: not modelled", {.size = 10, .fill = "#666666"});
  d.text(10, height - 12, "Bars: weights, gradients, main params, optimizer state and activations of each rank (megatron-run params).",
         {.size = 10, .fill = "#666666"});
  return d.str();
}

}  // namespace mr::run
