// `megatron-run schedule`: the learning rate and weight decay over a job's run (iterations, or consumed samples
// for a sample-based run), from the validated arguments alone and the scheduler the run itself uses
// (lib/optim/schedule_series.h): as a table, CSV, JSON or a picture. No LibTorch, nothing started.
#include <charconv>
#include <iostream>
#include <limits>
#include <sstream>

#include "cli.h"
#include "launch.h"
#include "config/print.h"
#include "optim/schedule_picture.h"
#include "optim/schedule_series.h"
#include "run/batch_schedule.h"

namespace mr::app {

void ScheduleOptions::add_to(po::options_description& desc) {
  common.add_to(desc, "text|csv|json|svg");
  desc.add_options()
      ("points", po::value<long long>()->notifier([this](long long v) { points = v; }),
       "evenly spaced points over the run, plus each phase boundary (default 20 for text, 500 otherwise)")
      ("every", po::value<long long>()->notifier([this](long long v) { every = v; }),
       "a point every K iterations (samples for a sample-based run)")
      ("at", po::value<std::string>()->notifier([this](const std::string& v) { at = v; }), "exactly these iterations (samples for a sample-based run), comma-separated");
}

namespace {

// What the schedule command cannot plot (its diagnostics carry the plan stage): the learning-rate scheduler's own
// refusals are init.lr-schedule, as in a dry run.
const Rule kScheduleSettingsRule{
    "schedule.settings", Rule::Level::Error,
    "schedule: the batch-size settings (--rampup-batch-size, --step-batch-size-schedule, the batch sizes) or the "
    "arguments cannot give the schedule to plot: exit 1, naming them.",
    __FILE__, __LINE__, kStagePlan};

std::vector<int64_t> parse_steps(const std::string& text) {
  std::vector<int64_t> out;
  std::stringstream ss(text);
  std::string w;
  while (std::getline(ss, w, ',')) {
    int64_t v = -1;
    auto [end, ec] = std::from_chars(w.data(), w.data() + w.size(), v);
    if (ec == std::errc::result_out_of_range && end == w.data() + w.size() && w[0] != '-')
      throw UsageError("argument --at: " + w + " is past the largest step, " +
                           std::to_string(std::numeric_limits<int64_t>::max()),
                       {"--at"}, {}, "input.schedule-steps");
    if (w.empty() || ec != std::errc() || end != w.data() + w.size() || v < 0)
      throw UsageError("argument --at: '" + w + "' is not a non-negative integer (--at N,N,...)", {"--at"}, {},
                       "input.schedule-steps");
    out.push_back(v);
  }
  if (out.empty()) throw UsageError("argument --at: expected N,N,...", {"--at"}, {}, "input.schedule-steps");
  if (out.size() > static_cast<size_t>(optim::kMaxScheduleRows))
    throw UsageError("argument --at: more than " + std::to_string(optim::kMaxScheduleRows) + " steps", {"--at"}, {},
                     "input.schedule-rows");
  return out;
}

std::string num(double v) { return py_float_repr(v); }

}  // namespace

int cmd_schedule(const std::vector<std::string>& args) {
  ScheduleOptions opts;
  const std::vector<Token> rest = parse_command_options("schedule", args, opts);
  CommonOptions& common = opts.common;
  const int chosen = (opts.points ? 1 : 0) + (opts.every ? 1 : 0) + (opts.at ? 1 : 0);
  if (chosen > 1)
    throw UsageError("--points, --every and --at choose the points in different ways: give one of them",
                     {"--points", "--every", "--at"}, {}, "input.schedule-steps");
  for (auto [flag, v] : {std::pair{"--points", opts.points}, std::pair{"--every", opts.every}})
    if (v && *v < 1)
      throw UsageError(std::string("argument ") + flag + ": must be at least 1, got " + std::to_string(*v), {flag}, {},
                       "input.schedule-steps");
  std::vector<int64_t> at;
  if (opts.at) at = parse_steps(*opts.at);

  Invocation inv = common.invocation({"csv", "svg"});
  inv.cli = rest;
  if (const std::optional<Diagnostic> d = world_size_not_job(inv)) print_warning_diagnostic(*d);
  Outcome out = resolve(Schema::megatron(), inv);
  log_warnings(out);
  if (!out.ok()) return report_failure(common, out.diagnostics);
  if (out.parsed.yaml_cfg)
    throw UsageError("schedule: --yaml-cfg configs are not supported (their namespace holds sections, not flags)",
                     {"--yaml-cfg"});
  optim::ScheduleRun run;
  bool rounded = false;  // --decrease-batch-size-if-needed rounded --global-batch-size down
  try {
    const Args args = Args::from(out.parsed.ns);
    // The samples each iteration consumes, as the run steps its scheduler (run/batch_schedule.h): a
    // --step-batch-size-schedule, or --global-batch-size rounded down by --decrease-batch-size-if-needed.
    optim::BatchPieces batches;
    if (args.train_iters && *args.train_iters != 0) {
      const run::BatchSchedule b = run::BatchSchedule::from(args);
      if (b.scheduled()) {
        batches = b.steps();
      } else {
        const run::BatchSchedule::Step first = b.at(0);  // RunError: a batch below micro-batch x data-parallel
        batches = {{0, first.running}};
        rounded = first.running != first.global;
      }
    }
    run = optim::ScheduleRun::from_args(args, batches);
  } catch (const std::invalid_argument& e) {  // the scheduler's settings: the rule and message of the dry run's check
    return report_failure(common, lr_schedule_diagnostic(e.what(), /*trains=*/true));
  } catch (const std::exception& e) {  // ArgsError, RunError (the batch schedule)
    return report_failure(common, Diagnostic{Diagnostic::Level::Error, kScheduleSettingsRule.id, e.what(), {}, {},
                                             kStagePlan});
  }
  std::vector<int64_t> steps;
  if (!at.empty()) {
    steps = at;
  } else if (opts.every) {
    // every_steps' rows: 0, k, 2k, ... up to the end, and the end itself where it is no multiple of k.
    if (run.end / *opts.every + 1 + (run.end % *opts.every != 0 ? 1 : 0) > optim::kMaxScheduleRows)
      throw UsageError("argument --every: " + std::to_string(*opts.every) + " over " + std::to_string(run.end) + " " +
                           run.unit() + "s is more than " + std::to_string(optim::kMaxScheduleRows) +
                           " rows; take a larger step or --points",
                       {"--every"}, {}, "input.schedule-rows");
    steps = optim::every_steps(run, *opts.every);
  } else {
    const int64_t n = opts.points.value_or(common.format == "text" ? 20 : 500);
    if (n > optim::kMaxScheduleRows)
      throw UsageError("argument --points: at most " + std::to_string(optim::kMaxScheduleRows), {"--points"}, {},
                       "input.schedule-rows");
    steps = optim::even_steps(run, n);
  }
  std::vector<optim::SchedulePoint> points;
  try {
    points = run.at(steps);
  } catch (const std::exception& e) {  // an iteration whose sample count overflows
    throw UsageError(std::string("schedule: ") + e.what(), {"--at"}, {}, "input.schedule-steps");
  }
  const bool iters = !run.sample_based;
  const bool dec = run.config.decoupled_lr.has_value();
  const std::string unit = run.unit();

  if (common.format == "svg") {
    std::cout << optim::schedule_svg(run, points, picture_title(common, "learning rate and weight decay"));
  } else if (common.format == "csv") {
    std::cout << (iters ? "iteration,samples" : "samples") << ",lr,weight_decay" << (dec ? ",decoupled_lr" : "")
              << ",phase\n";
    for (const auto& p : points) {
      if (iters) std::cout << p.step << ",";
      std::cout << p.samples << "," << num(p.lr) << "," << num(p.weight_decay);
      if (dec) std::cout << "," << num(*p.decoupled_lr);
      std::cout << "," << optim::to_string(p.phase) << "\n";
    }
  } else if (common.format == "json") {
    const optim::ScheduleConfig& c = run.config;
    std::cout << "{\"unit\": \"" << unit << "\", \"end\": " << run.end
              << ", \"global_batch_size\": " << run.global_batch_size << ", \"batches\": [";
    for (size_t k = 0; k < run.batches.size(); ++k)
      std::cout << (k ? ", " : "") << "{\"from_samples\": " << run.batches[k].first
                << ", \"samples\": " << run.batches[k].second << "}";
    std::cout << "], \"settings\": {\"init_lr\": "
              << num(c.init_lr) << ", \"max_lr\": " << num(c.max_lr) << ", \"min_lr\": " << num(c.min_lr)
              << ", \"lr_warmup_samples\": " << num(c.lr_warmup_steps) << ", \"lr_decay_samples\": " << c.lr_decay_steps
              << ", \"lr_decay_style\": \"" << optim::to_string(c.lr_decay_style) << "\", \"start_wd\": "
              << num(c.start_wd) << ", \"end_wd\": " << num(c.end_wd) << ", \"wd_incr_samples\": " << c.wd_incr_steps
              << ", \"wd_incr_style\": \"" << optim::to_string(c.wd_incr_style) << "\"}, \"marks\": [";
    for (size_t i = 0; i < run.marks.size(); ++i)
      std::cout << (i ? ", " : "") << "{\"" << unit << "\": " << run.marks[i].step
                << ", \"what\": " << Value(run.marks[i].what).json() << "}";
    std::cout << "], \"points\": [";
    for (size_t i = 0; i < points.size(); ++i) {
      const auto& p = points[i];
      std::cout << (i ? ", " : "") << "{";
      if (iters) std::cout << "\"iteration\": " << p.step << ", ";
      std::cout << "\"samples\": " << p.samples << ", \"lr\": " << num(p.lr) << ", \"weight_decay\": "
                << num(p.weight_decay);
      if (dec) std::cout << ", \"decoupled_lr\": " << num(*p.decoupled_lr);
      std::cout << ", \"phase\": \"" << optim::to_string(p.phase) << "\"}";
    }
    std::cout << "]}\n";
  } else {
    const optim::ScheduleConfig& c = run.config;
    if (!iters) {
      std::cout << run.end << " samples (--train-samples)\n";
    } else if (run.constant_batch()) {
      std::cout << run.end << " iterations of " << run.global_batch_size << " samples (--train-iters, "
                << (rounded ? "--global-batch-size rounded down by --decrease-batch-size-if-needed)"
                            : "--global-batch-size)")
                << "\n";
    } else {
      std::cout << run.end << " iterations (--train-iters) of";
      for (size_t k = 0; k < run.batches.size(); ++k)
        std::cout << (k ? ", then " : " ") << run.batches[k].second << " samples from " << run.batches[k].first;
      std::cout << " consumed (--step-batch-size-schedule)\n";
    }
    // Counts in samples, and in iterations for an iteration-based run.
    auto span = [&](double samples) {
      std::string t = num(samples) + " samples";
      if (iters) t = std::to_string(static_cast<long long>(run.step_at(samples))) + " iterations (" + t + ")";
      return t;
    };
    std::cout << "learning rate: warmup from " << num(c.init_lr) << " to " << num(c.max_lr) << " over "
              << span(c.lr_warmup_steps) << ", then " << optim::to_string(c.lr_decay_style);
    if (c.lr_decay_style == optim::LrDecayStyle::WSD)
      std::cout << " (annealing " << optim::to_string(c.lr_wsd_decay_style) << " over the last "
                << span(static_cast<double>(c.wsd_decay_steps.value_or(0))) << ")";
    if (c.lr_decay_style != optim::LrDecayStyle::Constant)
      std::cout << " to " << num(c.min_lr) << " at " << span(static_cast<double>(c.lr_decay_steps));
    std::cout << (dec ? "; the embedding and output layers peak at --decoupled-lr " + num(*c.decoupled_lr) : "")
              << "\n";
    std::cout << "weight decay: " << num(c.start_wd);
    if (c.start_wd != c.end_wd)
      std::cout << " to " << num(c.end_wd) << " (" << optim::to_string(c.wd_incr_style) << ") over "
                << span(static_cast<double>(c.wd_incr_steps));
    std::cout << "\n";
    for (const auto& m : run.marks) std::cout << m.what << " at " << unit << " " << m.step << "\n";
    char line[200];
    std::snprintf(line, sizeof line, "%12s %14s %-24s %-24s%s %s\n", iters ? "iteration" : "samples",
                  iters ? "samples" : "", "lr", "weight_decay", dec ? " decoupled_lr            " : "", "phase");
    std::cout << line;
    for (const auto& p : points) {
      std::snprintf(line, sizeof line, "%12lld %14s %-24s %-24s%s %s\n", static_cast<long long>(p.step),
                    iters ? std::to_string(p.samples).c_str() : "", num(p.lr).c_str(), num(p.weight_decay).c_str(),
                    dec ? (" " + num(*p.decoupled_lr) + std::string(24 - std::min<size_t>(24, num(*p.decoupled_lr).size()), ' ')).c_str() : "",
                    std::string(optim::to_string(p.phase)).c_str());
      std::cout << line;
    }
  }
  return 0;
}

}  // namespace mr::app
