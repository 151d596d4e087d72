// The schedule over a run (lib/optim/schedule_series.h) and its picture (schedule_picture.h).
#include <catch2/catch.hpp>

#include <string>

#include "optim/schedule_picture.h"
#include "optim/schedule_series.h"
#include "run/batch_schedule.h"

using namespace mr::optim;
using Catch::Matchers::Contains;

namespace {

mr::Args args(int64_t train_iters, int64_t gbs) {
  mr::Args a;
  a.lr = 1.0;
  a.min_lr = 0.1;
  a.train_iters = train_iters;
  a.global_batch_size = gbs;
  a.lr_warmup_iters = 10;
  a.lr_decay_iters = 60;
  a.weight_decay = 0.01;
  return a;
}

}  // namespace

TEST_CASE("schedule series: iterations, samples, phases and marks", "[pictures][schedule]") {
  const ScheduleRun run = ScheduleRun::from_args(args(100, 4));
  CHECK_FALSE(run.sample_based);
  CHECK(run.end == 100);
  CHECK(std::string(run.unit()) == "iteration");
  REQUIRE(run.marks.size() == 2);
  CHECK(run.marks[0].step == 10);
  CHECK(run.marks[0].what == "warmup ends");
  CHECK(run.marks[1].step == 60);
  CHECK(run.marks[1].what == "decay ends (--lr-decay-iters)");
  const auto pts = run.at({0, 5, 10, 11, 35, 60, 61, 100});
  REQUIRE(pts.size() == 8);
  CHECK(pts[1].samples == 20);
  CHECK(pts[1].lr == 0.5);  // half the warmup
  CHECK(pts[1].phase == SchedulePhase::Warmup);
  CHECK(pts[2].lr == 1.0);
  CHECK(pts[2].phase == SchedulePhase::Warmup);  // the last warmup step is still warmup, as in lr_at
  CHECK(pts[3].phase == SchedulePhase::Decay);
  CHECK(pts[4].lr == Approx(0.55));  // half-way through the linear decay from 1.0 to 0.1
  CHECK(pts[5].lr == Approx(0.1));
  CHECK(pts[6].phase == SchedulePhase::Floor);
  CHECK(pts[7].lr == 0.1);
  for (const auto& p : pts) CHECK(p.weight_decay == 0.01);
  // The same values as the scheduler stepped by the global batch size, as the run steps it.
  ParamScheduler s(run.config);
  for (const auto& p : pts) {
    s.step(p.samples - s.num_steps());
    CHECK(s.lr() == p.lr);
    CHECK(s.weight_decay() == p.weight_decay);
  }
  CHECK_THROWS_AS(run.at({-1}), std::invalid_argument);
}

TEST_CASE("schedule series: sample-based runs, WSD and the decoupled group", "[pictures][schedule]") {
  mr::Args a = args(0, 4);
  a.train_iters.reset();
  a.lr_warmup_iters = 0;
  a.lr_decay_iters.reset();
  a.train_samples = 1000;
  a.lr_warmup_samples = 100;
  a.lr_decay_samples = 800;
  a.lr_decay_style = mr::arg::LrDecayStyle::WSD;
  a.lr_wsd_decay_samples = 200;
  a.decoupled_lr = 2.0;
  const ScheduleRun run = ScheduleRun::from_args(a);
  CHECK(run.sample_based);
  CHECK(run.end == 1000);
  REQUIRE(run.marks.size() == 3);
  CHECK(run.marks[1].step == 600);
  CHECK(run.marks[1].what == "annealing begins");
  CHECK(run.marks[2].what == "decay ends (--lr-decay-samples)");
  const auto pts = run.at({50, 300, 700, 900});
  CHECK(pts[0].samples == 50);
  CHECK(pts[1].phase == SchedulePhase::Stable);
  CHECK(pts[1].lr == 1.0);
  REQUIRE(pts[1].decoupled_lr.has_value());
  CHECK(*pts[1].decoupled_lr == 2.0);
  CHECK(pts[2].phase == SchedulePhase::Anneal);
  CHECK(pts[3].phase == SchedulePhase::Floor);
}

TEST_CASE("schedule series: even and every-k steps include the ends and the corners", "[pictures][schedule]") {
  const ScheduleRun run = ScheduleRun::from_args(args(100, 4));
  CHECK(even_steps(run, 4) == std::vector<int64_t>{0, 9, 10, 11, 25, 50, 59, 60, 61, 75, 100});
  CHECK(every_steps(run, 30) == std::vector<int64_t>{0, 30, 60, 90, 100});
  CHECK(every_steps(run, 1000) == std::vector<int64_t>{0, 100});
  CHECK(to_string(SchedulePhase::Anneal) == "anneal");
}

TEST_CASE("schedule picture: both panels, the phases and the marks", "[pictures][schedule]") {
  const ScheduleRun run = ScheduleRun::from_args(args(100, 4));
  const std::string s = schedule_svg(run, run.at(even_steps(run, 50)), "cfg.yaml: schedule");
  CHECK_THAT(s, Contains(">learning rate</text>"));
  CHECK_THAT(s, Contains(">weight decay</text>"));
  CHECK_THAT(s, Contains(">iteration</text>"));
  CHECK_THAT(s, Contains(">warmup ends @ 10</text>"));
  CHECK_THAT(s, Contains(">decay ends (--lr-decay-iters) @ 60</text>"));
  CHECK_THAT(s, Contains(">decay</text>"));
  CHECK_THAT(s, Contains(">floor</text>"));
  CHECK_THAT(s, Contains("--lr-decay-style linear, peak 1.0, floor 0.1; weight decay 0.01 (constant); global batch 4"));
  size_t lines = 0;
  for (size_t p = s.find("<polyline"); p != std::string::npos; p = s.find("<polyline", p + 1)) ++lines;
  CHECK(lines == 2);  // lr and weight decay; no decoupled group here
}

TEST_CASE("schedule series: iterations consume the running batch size, as the run's batch schedule gives it",
          "[pictures][schedule]") {
  // Each schedule against a walk of the run's own BatchSchedule (run/batch_schedule.h): iteration k starts after
  // samples_at(k) samples and consumes the batch of the last threshold at or below them.
  for (const char* text : {"0:2 16:8", "0:3 10:5", "0:10 5:2 12:4", "0:4"}) {
    INFO(text);
    mr::Args a = args(200, 2);  // the scheduler's iterations-to-samples conversion still reads --global-batch-size
    a.step_batch_size_schedule = text;
    const mr::run::BatchSchedule b = mr::run::BatchSchedule::from(a);
    const ScheduleRun run = ScheduleRun::from_args(a, b.steps());
    int64_t consumed = 0;
    for (int64_t k = 0; k <= 200; ++k) {
      INFO("iteration " << k);
      REQUIRE(run.samples_at(k) == consumed);
      CHECK(run.step_at(static_cast<double>(consumed)) == k);
      const int64_t bs = b.peek(consumed).running;
      CHECK(run.step_at(static_cast<double>(consumed + bs) - 0.5) == k);  // inside the iteration
      consumed += bs;
    }
  }
  // With 2 then 8 samples (16 samples in 8 iterations, then 8 a step), a phase ends at the last iteration not past
  // its samples: the warmup (lr_warmup_steps = 10 x --global-batch-size 2 = 20 samples) at iteration 8 (16 samples),
  // the decay (60 x 2 = 120 samples) at iteration 21 (120 samples).
  mr::Args a = args(100, 2);
  const ScheduleRun run = ScheduleRun::from_args(a, {{0, 2}, {16, 8}});
  CHECK(run.samples_at(9) == 24);
  REQUIRE(run.marks.size() == 2);
  CHECK(run.marks[0].step == 8);
  CHECK(run.marks[1].step == 21);
  CHECK(run.at({100})[0].samples == 16 + 92 * 8);
  CHECK_THROWS_AS(ScheduleRun::from_args(a, {{1, 2}}), std::invalid_argument);
  CHECK_THROWS_AS(ScheduleRun::from_args(a, {{0, 2}, {0, 4}}), std::invalid_argument);
  CHECK_THROWS_AS(ScheduleRun::from_args(a, {{0, 0}}), std::invalid_argument);
  CHECK_THROWS_AS(ScheduleRun::from_args(args(100, 2), {{0, 2}, {16, int64_t{1} << 62}}).samples_at(100),
                  std::overflow_error);
}
