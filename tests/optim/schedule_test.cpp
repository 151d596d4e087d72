// The learning-rate / weight-decay schedule (lib/optim/schedule.h): hand-computed values, the argument
// derivation, errors, checkpoint state, and golden values from Megatron-LM's own Python scheduler
// (tests/optim/data/schedule_golden.json, written by scripts/dev/schedule_golden.py).
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <numbers>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "../config/support.h"
#include "../config/validated_fills.h"
#include "config/validate/resolve.h"
#include "optim/schedule.h"

using namespace mr::optim;
using Catch::Matchers::Contains;

namespace {

namespace fs = std::filesystem;

// A schedule in round numbers: lr 1 -> 0 over samples 10..110 after a 10-sample warmup.
ScheduleConfig simple(LrDecayStyle style) {
  ScheduleConfig c;
  c.max_lr = 1.0;
  c.min_lr = 0.0;
  c.lr_warmup_steps = 10;
  c.lr_decay_steps = 110;
  c.lr_decay_style = style;
  c.start_wd = c.end_wd = 0.1;
  c.wd_incr_steps = 110;
  return c;
}

// The arguments ScheduleConfig::from_args reads, at the seed's defaults (as the resolved namespace has them).
mr::Namespace args_ns(const std::map<std::string, mr::Value>& over) {
  std::map<std::string, mr::Value> a = {
      {"lr", 1e-4},
      {"min_lr", 0.0},
      {"lr_warmup_init", 0.0},
      {"lr_decay_style", "linear"},
      {"lr_wsd_decay_style", "exponential"},
      {"lr_decay_iters", nullptr},
      {"lr_decay_samples", nullptr},
      {"lr_wsd_decay_iters", nullptr},
      {"lr_wsd_decay_samples", nullptr},
      {"lr_warmup_fraction", nullptr},
      {"lr_warmup_iters", 0},
      {"lr_warmup_samples", 0},
      {"train_iters", nullptr},
      {"train_samples", nullptr},
      {"global_batch_size", 32},
      {"weight_decay", 0.01},
      {"start_weight_decay", nullptr},
      {"end_weight_decay", nullptr},
      {"weight_decay_incr_style", "constant"},
      {"decoupled_lr", nullptr},
      {"decoupled_min_lr", nullptr},
      {"use_checkpoint_opt_param_scheduler", false},
      {"override_opt_param_scheduler", false},
      {"skip_train", false},
  };
  for (const auto& [k, v] : over) a[k] = v;
  mr::Namespace ns;
  for (const auto& [k, v] : a) ns.set(k, v, {});
  mrtest::fill_as_validated(ns);  // what the resolved namespace also has (the view refuses it missing)
  return ns;
}

mr::Namespace from_object(const mr::Value& obj) {
  mr::Namespace ns;
  for (const auto& [k, v] : obj.as_object()) ns.set(k, v, {});
  mrtest::fill_as_validated(ns);
  return ns;
}

const mr::Value& field(const mr::Value& obj, const std::string& k) {
  for (const auto& [key, v] : obj.as_object())
    if (key == k) return v;
  throw std::out_of_range("golden data: no field " + k);
}
bool has_field(const mr::Value& obj, const std::string& k) {
  for (const auto& [key, v] : obj.as_object())
    if (key == k) return true;
  return false;
}

const mr::Value& golden() {
  static const mr::Value data = [] {
    std::ifstream in(fs::path(MR_SOURCE_DIR) / "tests/optim/data/schedule_golden.json");
    REQUIRE(in.good());
    std::stringstream ss;
    ss << in.rdbuf();
    return mr::Value::parse_json(ss.str());
  }();
  return data;
}

// Relative difference, with exact zeros compared exactly.
double rel_diff(double a, double b) {
  if (a == b) return 0.0;
  return std::abs(a - b) / std::max(std::abs(a), std::abs(b));
}

struct Tally {
  int values = 0;
  int exact = 0;
};

// Megatron's settings as its scheduler object holds them == ours, exactly.
void check_derived(const ScheduleConfig& c, const mr::Value& d) {
  CHECK(c.init_lr == field(d, "init_lr").as_float());
  CHECK(c.max_lr == field(d, "max_lr").as_float());
  CHECK(c.min_lr == field(d, "min_lr").as_float());
  CHECK(c.lr_warmup_steps == field(d, "lr_warmup_steps").as_float());
  CHECK(c.lr_decay_steps == field(d, "lr_decay_steps").as_int());
  CHECK(to_string(c.lr_decay_style) == field(d, "lr_decay_style").as_str());
  CHECK(to_string(c.lr_wsd_decay_style) == field(d, "lr_wsd_decay_style").as_str());
  if (field(d, "wsd_decay_steps").is_none()) {
    CHECK_FALSE(c.wsd_decay_steps.has_value());
  } else {
    REQUIRE(c.wsd_decay_steps.has_value());
    CHECK(*c.wsd_decay_steps == field(d, "wsd_decay_steps").as_int());
  }
  CHECK(c.start_wd == field(d, "start_wd").as_float());
  CHECK(c.end_wd == field(d, "end_wd").as_float());
  CHECK(c.wd_incr_steps == field(d, "wd_incr_steps").as_int());
  CHECK(to_string(c.wd_incr_style) == field(d, "wd_incr_style").as_str());
}

// Drives our scheduler through the golden sample counts by step(increment), comparing every group's lr and
// weight decay with Megatron's.
void check_rows(const ScheduleConfig& cfg, const mr::Value& groups_json, const mr::Value& rows, Tally& t) {
  std::vector<GroupOverride> groups;
  for (const mr::Value& g : groups_json.as_list()) {
    if (has_field(g, "decoupled")) {
      groups.push_back(cfg.embedding_output_group());
      continue;
    }
    GroupOverride o;
    if (has_field(g, "max_lr")) o.max_lr = field(g, "max_lr").as_float();
    if (has_field(g, "min_lr")) o.min_lr = field(g, "min_lr").as_float();
    if (has_field(g, "start_wd")) o.start_wd = field(g, "start_wd").as_float();
    if (has_field(g, "end_wd")) o.end_wd = field(g, "end_wd").as_float();
    if (has_field(g, "wd_mult")) o.wd_mult = field(g, "wd_mult").as_float();
    groups.push_back(o);
  }
  ParamScheduler s(cfg);
  REQUIRE(!rows.as_list().empty());
  for (const mr::Value& row_v : rows.as_list()) {
    const mr::List& row = row_v.as_list();
    REQUIRE(row.size() == 1 + 2 * groups.size());
    const int64_t n = row[0].as_int();
    s.step(n - s.num_steps());
    REQUIRE(s.num_steps() == n);
    for (size_t g = 0; g < groups.size(); ++g) {
      const double lr = s.lr(groups[g]), wd = s.weight_decay(groups[g]);
      const double want_lr = row[1 + 2 * g].as_float(), want_wd = row[2 + 2 * g].as_float();
      INFO("samples " << n << ", group " << g << ": lr " << mr::py_float_repr(lr) << " vs Megatron's "
                      << mr::py_float_repr(want_lr) << ", wd " << mr::py_float_repr(wd) << " vs "
                      << mr::py_float_repr(want_wd));
      CHECK(rel_diff(lr, want_lr) <= 1e-12);
      CHECK(rel_diff(wd, want_wd) <= 1e-12);
      t.values += 2;
      t.exact += (lr == want_lr) + (wd == want_wd);
    }
  }
}

}  // namespace

// ------------------------------------------------------------------------------------------------------------
// Hand-computed values.

TEST_CASE("schedule: linear warmup, then each decay style", "[optim][schedule]") {
  SECTION("warmup is linear from init_lr and reaches the peak at its last step") {
    ScheduleConfig c = simple(LrDecayStyle::Linear);
    c.init_lr = 0.5;
    ParamScheduler s(c);
    CHECK(s.lr() == 0.5);
    CHECK(s.lr_at(5, 1.0, 0.0) == 0.75);
    CHECK(s.lr_at(10, 1.0, 0.0) == 1.0);
    // A group with its own peak warms up from the common init_lr to that peak.
    CHECK(s.lr_at(5, 2.0, 0.0) == 1.25);
  }
  SECTION("linear") {
    ParamScheduler s(simple(LrDecayStyle::Linear));
    CHECK(s.lr_at(60, 1.0, 0.0) == 0.5);
    CHECK(s.lr_at(110, 1.0, 0.0) == 0.0);
    CHECK(s.lr_at(35, 1.0, 0.2) == Approx(0.8));
    CHECK(s.lr_at(1000, 1.0, 0.2) == 0.2);  // past the decay: the floor
  }
  SECTION("cosine") {
    ParamScheduler s(simple(LrDecayStyle::Cosine));
    CHECK(s.lr_at(60, 1.0, 0.0) == Approx(0.5));
    CHECK(s.lr_at(35, 1.0, 0.0) == Approx(0.5 * (std::cos(std::numbers::pi / 4) + 1)));
    CHECK(s.lr_at(110, 1.0, 0.1) == Approx(0.1));
    CHECK(s.lr_at(111, 1.0, 0.1) == 0.1);
  }
  SECTION("constant: the peak after the warmup, also past the decay") {
    ParamScheduler s(simple(LrDecayStyle::Constant));
    CHECK(s.lr_at(5, 1.0, 0.0) == 0.5);
    CHECK(s.lr_at(60, 1.0, 0.0) == 1.0);
    CHECK(s.lr_at(100000, 1.0, 0.0) == 1.0);
  }
  SECTION("inverse square root, floored at min_lr; min_lr past the decay") {
    ParamScheduler s(simple(LrDecayStyle::InverseSquareRoot));
    CHECK(s.lr_at(40, 1.0, 0.0) == Approx(0.5));
    CHECK(s.lr_at(90, 1.0, 0.0) == Approx(1.0 / 3));
    CHECK(s.lr_at(90, 1.0, 0.4) == 0.4);
    CHECK(s.lr_at(111, 1.0, 0.01) == 0.01);
    ScheduleConfig c = simple(LrDecayStyle::InverseSquareRoot);
    c.lr_warmup_steps = 0;  // both counts floored at 1
    ParamScheduler z(c);
    CHECK(z.lr_at(0, 1.0, 0.0) == 1.0);
    CHECK(z.lr_at(1, 1.0, 0.0) == 1.0);
    CHECK(z.lr_at(4, 1.0, 0.0) == Approx(0.5));
  }
  SECTION("WSD: stable at the peak, then each annealing shape down to min_lr") {
    const std::vector<std::pair<WsdDecayStyle, double>> half = {
        {WsdDecayStyle::Linear, 0.5},
        {WsdDecayStyle::Cosine, 0.5},
        {WsdDecayStyle::Exponential, 2 * std::sqrt(0.5) - 1},
        {WsdDecayStyle::MinusSqrt, 1 - std::sqrt(0.5)},
    };
    for (const auto& [style, coeff] : half) {
      INFO(to_string(style));
      ScheduleConfig c = simple(LrDecayStyle::WSD);
      c.wsd_decay_steps = 20;  // annealing over samples 90..110
      c.lr_wsd_decay_style = style;
      ParamScheduler s(c);
      CHECK(s.lr_at(11, 1.0, 0.0) == 1.0);
      CHECK(s.lr_at(90, 1.0, 0.0) == 1.0);
      CHECK(s.lr_at(100, 1.0, 0.0) == Approx(coeff));
      CHECK(s.lr_at(100, 1.0, 0.2) == Approx(0.2 + 0.8 * coeff));
      CHECK(s.lr_at(110, 1.0, 0.2) == Approx(0.2).margin(1e-15));
      CHECK(s.lr_at(111, 1.0, 0.2) == 0.2);
    }
  }
}

TEST_CASE("schedule: weight decay increments and group overrides", "[optim][schedule]") {
  ScheduleConfig c = simple(LrDecayStyle::Linear);
  c.start_wd = 0.0;
  c.end_wd = 0.1;
  c.wd_incr_steps = 100;
  SECTION("linear") {
    c.wd_incr_style = WdIncrStyle::Linear;
    ParamScheduler s(c);
    CHECK(s.weight_decay() == 0.0);
    CHECK(s.wd_at(50, 0.0, 0.1) == Approx(0.05));
    CHECK(s.wd_at(100, 0.0, 0.1) == Approx(0.1));
    CHECK(s.wd_at(101, 0.0, 0.1) == 0.1);
  }
  SECTION("cosine") {
    c.wd_incr_style = WdIncrStyle::Cosine;
    ParamScheduler s(c);
    CHECK(s.weight_decay() == Approx(0.0).margin(1e-18));
    CHECK(s.wd_at(50, 0.0, 0.1) == Approx(0.05));
    CHECK(s.wd_at(25, 0.0, 0.1) == Approx(0.05 * (1 - std::cos(std::numbers::pi / 4))));
    CHECK(s.wd_at(100, 0.0, 0.1) == Approx(0.1));
  }
  SECTION("constant needs start == end, also in a group") {
    c.start_wd = c.end_wd = 0.05;
    ParamScheduler s(c);
    CHECK(s.weight_decay() == 0.05);
    GroupOverride g;
    g.start_wd = 0.01;
    g.end_wd = 0.02;
    CHECK_THROWS_WITH(s.weight_decay(g), Contains("--weight-decay-incr-style constant"));
  }
  SECTION("groups: own lr range, own wd range, wd_mult") {
    c.wd_incr_style = WdIncrStyle::Linear;
    ParamScheduler s(c);
    s.step(60);
    GroupOverride g;
    g.max_lr = 3.0;
    g.min_lr = 1.0;
    g.start_wd = 0.2;
    g.end_wd = 0.4;
    g.wd_mult = 0.5;
    CHECK(s.lr(g) == Approx(2.0));
    CHECK(s.lr(3.0, 1.0) == s.lr(g));
    CHECK(s.weight_decay(g) == Approx(0.5 * 0.32));
    GroupOverride no_wd;
    no_wd.wd_mult = 0.0;
    CHECK(s.weight_decay(no_wd) == 0.0);
    CHECK(s.lr(no_wd) == s.lr());
    CHECK(s.lr(GroupOverride{}) == s.lr());
  }
  SECTION("decoupled lr: the embedding/output group") {
    c.wd_incr_style = WdIncrStyle::Linear;
    c.decoupled_lr = 5.0;
    ParamScheduler s(c);
    GroupOverride g = c.embedding_output_group();
    CHECK(g.max_lr == 5.0);
    CHECK_FALSE(g.min_lr.has_value());
    CHECK(s.lr_at(60, 5.0, 0.0) == 2.5);
    c.decoupled_min_lr = 1.0;
    CHECK(c.embedding_output_group().min_lr == 1.0);
    c.decoupled_lr.reset();
    CHECK_FALSE(c.embedding_output_group().max_lr.has_value());
  }
}

TEST_CASE("schedule: step(increment) counts samples", "[optim][schedule]") {
  ParamScheduler s(simple(LrDecayStyle::Cosine));
  CHECK(s.num_steps() == 0);
  s.step(0);
  CHECK(s.num_steps() == 0);
  for (int i = 0; i < 7; ++i) s.step(8);  // seven iterations of a global batch of 8
  CHECK(s.num_steps() == 56);
  CHECK(s.lr() == s.lr_at(56, 1.0, 0.0));
  s.step(3);  // a smaller batch (ramp-up)
  CHECK(s.num_steps() == 59);
  CHECK_THROWS_AS(s.step(-1), std::invalid_argument);
}

// ------------------------------------------------------------------------------------------------------------
// From the resolved arguments.

TEST_CASE("schedule: settings derived from the arguments", "[optim][schedule]") {
  SECTION("iteration-based: counts in samples, decay defaults to --train-iters") {
    auto c = ScheduleConfig::from_args(args_ns({{"train_iters", 100}, {"global_batch_size", 16},
                                                {"lr_warmup_iters", 10}, {"lr", 3e-4}, {"min_lr", 3e-5},
                                                {"lr_warmup_init", 1e-6}, {"lr_decay_style", "cosine"}}));
    CHECK(c.lr_decay_steps == 1600);
    CHECK(c.lr_warmup_steps == 160);
    CHECK(c.wd_incr_steps == 1600);
    CHECK(c.max_lr == 3e-4);
    CHECK(c.min_lr == 3e-5);
    CHECK(c.init_lr == 1e-6);
    CHECK(c.lr_decay_style == LrDecayStyle::Cosine);
    CHECK_FALSE(c.wsd_decay_steps.has_value());
    CHECK(c.start_wd == 0.01);
    CHECK(c.end_wd == 0.01);
    CHECK(c.wd_incr_style == WdIncrStyle::Constant);
    CHECK_FALSE(c.use_checkpoint_opt_param_scheduler);
  }
  SECTION("iteration-based: --lr-decay-iters, --lr-warmup-fraction (fractional samples), WSD iters") {
    auto c = ScheduleConfig::from_args(args_ns({{"train_iters", 100}, {"global_batch_size", 7},
                                                {"lr_decay_iters", 90}, {"lr_warmup_fraction", 0.013},
                                                {"lr_decay_style", "WSD"}, {"lr_wsd_decay_iters", 20},
                                                {"lr_wsd_decay_style", "minus_sqrt"}}));
    CHECK(c.lr_decay_steps == 630);
    CHECK(c.lr_warmup_steps == 0.013 * 630.0);
    CHECK(c.wd_incr_steps == 700);
    CHECK(c.wsd_decay_steps == 140);
    CHECK(c.lr_wsd_decay_style == WsdDecayStyle::MinusSqrt);
  }
  SECTION("sample-based") {
    auto c = ScheduleConfig::from_args(args_ns({{"train_samples", 10000}, {"lr_warmup_samples", 100},
                                                {"lr_decay_style", "WSD"}, {"lr_wsd_decay_samples", 999}}));
    CHECK(c.lr_decay_steps == 10000);
    CHECK(c.lr_warmup_steps == 100);
    CHECK(c.wd_incr_steps == 10000);
    CHECK(c.wsd_decay_steps == 999);
    auto f = ScheduleConfig::from_args(
        args_ns({{"train_samples", 10000}, {"lr_decay_samples", 8000}, {"lr_warmup_fraction", 0.1}}));
    CHECK(f.lr_decay_steps == 8000);
    CHECK(f.lr_warmup_steps == 0.1 * 8000.0);
    CHECK(f.wd_incr_steps == 10000);
  }
  SECTION("weight-decay ramp, decoupled lr, checkpoint policy") {
    auto c = ScheduleConfig::from_args(args_ns({{"train_iters", 10}, {"weight_decay_incr_style", "cosine"},
                                                {"start_weight_decay", 0.0}, {"end_weight_decay", 0.1},
                                                {"decoupled_lr", 5e-4}, {"decoupled_min_lr", 5e-6},
                                                {"use_checkpoint_opt_param_scheduler", true}}));
    CHECK(c.start_wd == 0.0);
    CHECK(c.end_wd == 0.1);
    CHECK(c.wd_incr_style == WdIncrStyle::Cosine);
    CHECK(c.decoupled_lr == 5e-4);
    CHECK(c.decoupled_min_lr == 5e-6);
    CHECK(c.use_checkpoint_opt_param_scheduler);
  }
  SECTION("through our parser and validation chain") {
    auto r = mrtest::run(mrtest::with({"--lr-decay-style", "cosine", "--lr-warmup-iters", "2", "--min-lr", "1e-5",
                                       "--decoupled-lr", "2e-4"}),
                         {{"WORLD_SIZE", "1"}});
    REQUIRE(r.exit == 0);
    auto c = ScheduleConfig::from_args(r.out.parsed.ns);
    CHECK(c.lr_decay_steps == 80);  // 10 iterations x 8
    CHECK(c.lr_warmup_steps == 16);
    CHECK(c.max_lr == 1e-4);
    CHECK(c.min_lr == 1e-5);
    CHECK(c.lr_decay_style == LrDecayStyle::Cosine);
    CHECK(c.embedding_output_group().max_lr == 2e-4);
    ParamScheduler s(c);
    s.step(8);
    CHECK(s.lr() == Approx(0.5e-4));
  }
}

TEST_CASE("schedule: errors name the flags", "[optim][schedule]") {
  auto err = [](const std::map<std::string, mr::Value>& over) -> std::string {
    try {
      ParamScheduler s(ScheduleConfig::from_args(args_ns(over)));
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "(no error)";
  };
  const mr::Value it = 100;
  CHECK_THAT(err({{"train_iters", it}, {"lr_decay_style", "exponential"}}), Contains("--lr-decay-style"));
  CHECK_THAT(err({{"train_iters", it}, {"lr_wsd_decay_style", "quadratic"}}), Contains("--lr-wsd-decay-style"));
  CHECK_THAT(err({{"train_iters", it}, {"weight_decay_incr_style", "step"}}), Contains("--weight-decay-incr-style"));
  CHECK_THAT(err({{"train_iters", it}, {"lr", nullptr}}), Contains("--lr is required"));
  CHECK_THAT(err({}), Contains("--train-iters or --train-samples"));
  CHECK_THAT(err({{"train_iters", 0}}), Contains("--train-iters or --train-samples"));
  CHECK_THAT(err({{"train_iters", it}, {"lr", 1e-5}, {"min_lr", 1e-4}}), Contains("--min-lr"));
  CHECK_THAT(err({{"train_iters", it}, {"min_lr", -1.0}}), Contains("--min-lr"));
  CHECK_THAT(err({{"train_iters", it}, {"lr_warmup_init", 1.0}}), Contains("--lr-warmup-init"));
  CHECK_THAT(err({{"train_iters", it}, {"lr_warmup_iters", 100}}), Contains("--lr-warmup-iters"));
  CHECK_THAT(err({{"train_iters", it}, {"lr_warmup_fraction", 1.0}}), Contains("--lr-warmup-fraction"));
  CHECK_THAT(err({{"train_iters", it}, {"lr_decay_iters", 0}}), Contains("--lr-decay-iters"));
  CHECK_THAT(err({{"train_iters", it}, {"lr_decay_style", "WSD"}}), Contains("--lr-wsd-decay-iters"));
  CHECK_THAT(err({{"train_samples", 1000}, {"lr_decay_style", "WSD"}, {"lr_wsd_decay_iters", 5}}),
             Contains("--lr-wsd-decay-samples"));
  // A warmup as long as the decay (the default config's 2 warmup iterations with --train-iters 2): Megatron's
  // assert, with the way out in the message.
  const std::string warm = err({{"train_iters", 2}, {"lr_warmup_iters", 2}});
  CHECK_THAT(warm, Contains("must be shorter than the decay"));
  // Both lengths are whole sample counts: printed alike, "the warmup (N samples ... the decay (N samples".
  CHECK_THAT(warm, Contains("the warmup (64 samples;"));  // 2 iterations of 32 samples; not "64.0"
  CHECK_THAT(warm, Contains("shorten the warmup (lower --lr-warmup-iters / --lr-warmup-samples, or use "
                            "--lr-warmup-fraction) or lengthen the decay (raise --train-iters"));
  CHECK(err({{"train_iters", 3}, {"lr_warmup_iters", 2}}) == "(no error)");
  // validate_args' iteration-vs-sample asserts.
  CHECK_THAT(err({{"train_iters", it}, {"train_samples", 1000}}), Contains("--train-samples"));
  CHECK_THAT(err({{"train_iters", it}, {"lr_decay_samples", 1000}}), Contains("--lr-decay-samples"));
  CHECK_THAT(err({{"train_iters", it}, {"lr_warmup_samples", 10}}), Contains("--lr-warmup-samples"));
  CHECK_THAT(err({{"train_iters", it}, {"lr_warmup_fraction", 0.1}, {"lr_warmup_iters", 1}}),
             Contains("--lr-warmup-fraction"));
  CHECK_THAT(err({{"train_samples", 1000}, {"lr_decay_iters", 10}}), Contains("--lr-decay-iters"));
  CHECK_THAT(err({{"train_samples", 1000}, {"lr_warmup_iters", 10}}), Contains("--lr-warmup-iters"));
  CHECK_THAT(err({{"train_samples", 1000}, {"lr_warmup_fraction", 0.1}, {"lr_warmup_samples", 1}}),
             Contains("--lr-warmup-samples"));
  // ... which Megatron skips with --skip-train (the iteration-based settings win).
  CHECK(err({{"train_iters", it}, {"lr_decay_samples", 1000}, {"skip_train", true}}) == "(no error)");
  // Weight decay.
  CHECK_THAT(err({{"train_iters", it}, {"start_weight_decay", 0.1}}), Contains("--start-weight-decay"));
  CHECK_THAT(err({{"train_iters", it}, {"weight_decay_incr_style", "linear"}, {"start_weight_decay", 0.1}}),
             Contains("--end-weight-decay"));
  CHECK_THAT(err({{"train_iters", it}, {"weight_decay_incr_style", "linear"}, {"start_weight_decay", 0.1},
                  {"end_weight_decay", 0.01}}),
             Contains("--end-weight-decay"));
  CHECK_THAT(err({{"train_iters", it}, {"weight_decay_incr_style", "cosine"}, {"start_weight_decay", -0.1},
                  {"end_weight_decay", 0.01}}),
             Contains("--start-weight-decay"));
  CHECK_THAT(err({{"train_iters", it}, {"override_opt_param_scheduler", true},
                  {"use_checkpoint_opt_param_scheduler", true}}),
             Contains("--override-opt-param-scheduler"));
  // Wrong kinds and missing arguments.
  CHECK_THAT(err({{"train_iters", it}, {"lr", "fast"}}), Contains("--lr"));
  mr::Namespace empty;
  // A namespace that did not go through validation: refused by the typed view, with nothing defaulted.
  CHECK_THROWS_WITH(ScheduleConfig::from_args(empty), Contains("though validation always gives it one"));
  mrtest::fill_as_validated(empty);  // validated, but without --lr
  CHECK_THROWS_WITH(ScheduleConfig::from_args(empty), Contains("--lr"));
  // A hand-built config is checked by the scheduler.
  ScheduleConfig c = simple(LrDecayStyle::Linear);
  c.wd_incr_style = WdIncrStyle::Linear;
  c.wd_incr_steps = 0;
  CHECK_THROWS_AS(ParamScheduler(c), std::invalid_argument);
  CHECK_THROWS_WITH(lr_decay_style_from_string("Cosine"), Contains("constant, linear, cosine"));
  CHECK(lr_decay_style_from_string("inverse-square-root") == LrDecayStyle::InverseSquareRoot);
  CHECK(wsd_decay_style_from_string("minus_sqrt") == WsdDecayStyle::MinusSqrt);
  CHECK(wd_incr_style_from_string("cosine") == WdIncrStyle::Cosine);
}

TEST_CASE("schedule: checkpoint state", "[optim][schedule]") {
  ScheduleConfig c = simple(LrDecayStyle::Cosine);
  c.use_checkpoint_opt_param_scheduler = false;
  ParamScheduler a(c);
  a.step(40);
  ScheduleState st = a.state();
  CHECK(st.num_steps == 40);
  CHECK(st.lr_decay_steps == 110);

  SECTION("same settings: the step count is added") {
    ParamScheduler b(c);
    b.load_state(st);
    CHECK(b.num_steps() == 40);
    CHECK(b.lr() == a.lr());
  }
  SECTION("different settings: refused, overridden, or taken from the checkpoint") {
    ScheduleConfig other = c;
    other.max_lr = 2.0;
    ParamScheduler strict(other);
    CHECK_THROWS_WITH(strict.load_state(st), Contains("--override-opt-param-scheduler"));
    other.override_opt_param_scheduler = true;
    ParamScheduler keep(other);
    keep.load_state(st);
    CHECK(keep.config().max_lr == 2.0);
    CHECK(keep.num_steps() == 40);
    other.override_opt_param_scheduler = false;
    other.use_checkpoint_opt_param_scheduler = true;
    ParamScheduler take(other);
    take.load_state(st);
    CHECK(take.config().max_lr == 1.0);
    CHECK(take.lr() == a.lr());
  }
  SECTION("sample counts are printed alike: a whole warmup length as an integer, as the decay length") {
    ScheduleConfig other = c;
    other.lr_warmup_steps = st.lr_warmup_steps + 6.0;
    ParamScheduler w(other);
    const std::string warm = std::to_string(static_cast<int64_t>(st.lr_warmup_steps));
    CHECK_THROWS_WITH(w.load_state(st), Contains("the checkpoint's warmup length in samples (" + warm +
                                                 ") differs from this job's (" +
                                                 std::to_string(static_cast<int64_t>(st.lr_warmup_steps) + 6) + ")"));
    other = c;
    other.lr_warmup_steps = st.lr_warmup_steps + 0.5;  // --lr-warmup-fraction: a fraction of a sample, shown so
    ParamScheduler f(other);
    CHECK_THROWS_WITH(f.load_state(st), Contains("differs from this job's (" + warm + ".5)"));
  }
  SECTION("checkpoints without the weight-decay schedule keep ours") {
    ScheduleState old = st;
    old.start_wd.reset();
    old.end_wd.reset();
    old.wd_incr_steps.reset();
    old.wd_incr_style.reset();
    ParamScheduler b(c);
    b.load_state(old);
    CHECK(b.weight_decay() == 0.1);
  }
}

// ------------------------------------------------------------------------------------------------------------
// Megatron's own values.

TEST_CASE("schedule: golden values from Megatron's scheduler, hand-picked settings", "[optim][schedule][golden]") {
  const mr::Value& g = golden();
  INFO("Megatron-LM " << field(g, "megatron_commit").as_str());
  Tally t;
  int cases = 0;
  for (const mr::Value& c : field(g, "hand_picked").as_list()) {
    INFO("case " << field(c, "name").as_str());
    ScheduleConfig cfg = ScheduleConfig::from_args(from_object(field(c, "args")));
    check_derived(cfg, field(c, "derived"));
    check_rows(cfg, field(c, "groups"), field(c, "points"), t);
    ++cases;
  }
  CHECK(cases >= 30);
  int errors = 0;
  for (const mr::Value& c : field(g, "errors").as_list()) {
    INFO("error case " << field(c, "name").as_str() << " (Megatron: " << field(c, "python_error").as_str() << ")");
    mr::Namespace ns = from_object(field(c, "args"));
    CHECK_THROWS_AS(ParamScheduler(ScheduleConfig::from_args(ns)), std::invalid_argument);
    ++errors;
  }
  CHECK(errors >= 13);
  // Compared values; with the same C library they are all bit-equal to Megatron's (t.exact == t.values here).
  CHECK(t.values > 4000);
  CHECK(t.exact > 0);
}

TEST_CASE("schedule: golden values from Megatron's scheduler, every accepted corpus config",
          "[optim][schedule][golden][corpus]") {
  const mr::Value& g = golden();
  std::map<std::string, const mr::Value*> by_file;
  for (const mr::Value& c : field(g, "corpus").as_list()) by_file[field(c, "file").as_str()] = &c;
  Tally t;
  int configs = 0;
  for (const mr::Value& c : field(g, "corpus").as_list()) {
    const std::string file = field(c, "file").as_str();
    INFO("corpus config " << file);
    // Resolve the config with our own parser and validation chain, as the reference was run.
    mr::Invocation inv;
    inv.env = mr::TargetEnv{};
    inv.env.vars["WORLD_SIZE"] = "8";
    inv.env.vars["RANK"] = "0";
    inv.config.env = [](const std::string& n) -> std::optional<std::string> { return "/placeholder/" + n; };
    inv.config_files = {std::string(MR_DATA_DIR) + "/corpus/functional-tests/" + file + ".yaml"};
    mr::Outcome out = mr::resolve(mr::Schema::megatron(), inv);
    REQUIRE(out.exit_code() == 0);
    ScheduleConfig cfg = ScheduleConfig::from_args(out.parsed.ns);
    check_derived(cfg, field(c, "derived"));
    const mr::Value& rows_case = has_field(c, "rows_of") ? *by_file.at(field(c, "rows_of").as_str()) : c;
    check_rows(cfg, field(c, "groups"), field(rows_case, "points"), t);
    ++configs;
  }
  CHECK(configs == 125);
  CHECK(t.values > 12000);
  CHECK(t.exact > 0);
}
