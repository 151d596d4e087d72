// The loss scalers (lib/optim/grad_scaler.h): Megatron's update rule step by step, against golden sequences from
// Megatron's own DynamicGradScaler (tests/optim/data/grad_scaler_golden.txt, scripts/dev/clip_scaler_golden.py),
// and the factory's choice for each precision setting.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "optim/grad_scaler.h"

using mr::optim::DynamicScalerOptions;
using mr::optim::GradScaler;
using mr::optim::GradScalerState;
using mr::optim::make_grad_scaler;

namespace {

DynamicScalerOptions opts(double initial, double min, double interval, int64_t hysteresis) {
  DynamicScalerOptions o;
  o.initial_scale = initial;
  o.min_scale = min;
  o.growth_interval = interval;
  o.hysteresis = hysteresis;
  return o;
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

}  // namespace

TEST_CASE("dynamic scaler, hysteresis 1: every overflow halves the scale", "[optim][scaler]") {
  GradScaler s = GradScaler::dynamic(opts(1024.0, 1.0, 3, 1));
  REQUIRE(s.is_dynamic());
  REQUIRE(s.scale() == 1024.0f);
  REQUIRE(s.inv_scale() == 1.0f / 1024.0f);
  REQUIRE(s.hysteresis_tracker() == 1);
  s.update(true);
  REQUIRE(s.scale() == 512.0f);
  s.update(true);
  REQUIRE(s.scale() == 256.0f);
  REQUIRE(s.hysteresis_tracker() == -1);  // keeps counting down; only a growth refills it
  s.update(false);
  s.update(false);
  REQUIRE(s.scale() == 256.0f);
  REQUIRE(s.growth_tracker() == 2);
  s.update(false);  // third consecutive good step: growth
  REQUIRE(s.scale() == 512.0f);
  REQUIRE(s.growth_tracker() == 0);
  REQUIRE(s.hysteresis_tracker() == 1);
  s.update(false);
  s.update(true);  // an overflow resets the growth count
  REQUIRE(s.growth_tracker() == 0);
  REQUIRE(s.scale() == 256.0f);
  s.update(false);
  s.update(false);
  REQUIRE(s.scale() == 256.0f);
}

TEST_CASE("dynamic scaler, hysteresis 2 and 3: back off after that many overflows since the last growth",
          "[optim][scaler]") {
  GradScaler s = GradScaler::dynamic(opts(1024.0, 1.0, 4, 2));
  s.update(true);  // 1st overflow: tolerated
  REQUIRE(s.scale() == 1024.0f);
  REQUIRE(s.hysteresis_tracker() == 1);
  s.update(false);  // a good step does not refill the hysteresis tracker
  REQUIRE(s.hysteresis_tracker() == 1);
  s.update(true);  // 2nd overflow (not consecutive): backs off
  REQUIRE(s.scale() == 512.0f);
  REQUIRE(s.hysteresis_tracker() == 0);
  s.update(true);  // and every further overflow until a growth
  REQUIRE(s.scale() == 256.0f);
  for (int i = 0; i < 4; ++i) s.update(false);
  REQUIRE(s.scale() == 512.0f);
  REQUIRE(s.hysteresis_tracker() == 2);
  s.update(true);
  REQUIRE(s.scale() == 512.0f);

  GradScaler t = GradScaler::dynamic(opts(64.0, 1.0, 1000, 3));
  t.update(true);
  t.update(true);
  REQUIRE(t.scale() == 64.0f);
  t.update(true);
  REQUIRE(t.scale() == 32.0f);
}

TEST_CASE("dynamic scaler: growth interval and the min-scale floor", "[optim][scaler]") {
  GradScaler s = GradScaler::dynamic(opts(1.0, 1.0, 5, 2));
  for (int i = 1; i <= 20; ++i) {
    s.update(false);
    REQUIRE(s.scale() == std::ldexp(1.0f, i / 5));
  }
  GradScaler f = GradScaler::dynamic(opts(10.0, 3.0, 1000, 1));
  f.update(true);
  REQUIRE(f.scale() == 5.0f);
  f.update(true);
  REQUIRE(f.scale() == 3.0f);  // max(2.5, 3)
  f.update(true);
  REQUIRE(f.scale() == 3.0f);
  // Megatron compares the tracker with a float window using ==: a window of 2.5 never grows the scale.
  GradScaler w = GradScaler::dynamic(opts(8.0, 1.0, 2.5, 2));
  for (int i = 0; i < 10; ++i) w.update(false);
  REQUIRE(w.scale() == 8.0f);
  // Values Megatron's asserts refuse.
  REQUIRE_THROWS_AS(GradScaler::dynamic(opts(0.0, 1.0, 10, 1)), std::invalid_argument);
  REQUIRE_THROWS_AS(GradScaler::dynamic(opts(4.0, 8.0, 10, 1)), std::invalid_argument);
  REQUIRE_THROWS_AS(GradScaler::dynamic(opts(4.0, 0.0, 10, 1)), std::invalid_argument);
  REQUIRE_THROWS_AS(GradScaler::dynamic(opts(4.0, 1.0, 0, 1)), std::invalid_argument);
  REQUIRE_THROWS_AS(GradScaler::dynamic(opts(4.0, 1.0, 10, 0)), std::invalid_argument);
  DynamicScalerOptions o = opts(4.0, 1.0, 10, 1);
  o.growth_factor = 1.0;
  REQUIRE_THROWS_AS(GradScaler::dynamic(o), std::invalid_argument);
  o = opts(4.0, 1.0, 10, 1);
  o.backoff_factor = 1.0;
  REQUIRE_THROWS_AS(GradScaler::dynamic(o), std::invalid_argument);
  o.backoff_factor = 0.0;
  REQUIRE_THROWS_AS(GradScaler::dynamic(o), std::invalid_argument);
}

TEST_CASE("constant scaler never changes; state save and restore", "[optim][scaler]") {
  GradScaler c = GradScaler::constant(4096.0);
  REQUIRE_FALSE(c.is_dynamic());
  for (bool f : {true, true, false, true, false, false}) c.update(f);
  REQUIRE(c.scale() == 4096.0f);
  REQUIRE(c.inv_scale() == 1.0f / 4096.0f);
  REQUIRE_FALSE(c.state().has_value());  // Megatron: an empty state dict
  c.load_state(GradScalerState{2.0f, 3, 4});
  REQUIRE(c.scale() == 4096.0f);
  REQUIRE_THROWS_AS(GradScaler::constant(0.0), std::invalid_argument);
  REQUIRE_THROWS_AS(GradScaler::constant(-1.0), std::invalid_argument);
  // inv_scale is the reciprocal in double rounded to fp32.
  GradScaler odd = GradScaler::constant(3.0);
  REQUIRE(odd.inv_scale() == static_cast<float>(1.0 / 3.0));

  GradScaler a = GradScaler::dynamic(opts(1024.0, 1.0, 3, 2));
  for (bool f : {true, false, true, true, false}) a.update(f);
  auto st = a.state();
  REQUIRE(st.has_value());
  REQUIRE(*st == GradScalerState{256.0f, 1, -1});
  GradScaler b = GradScaler::dynamic(opts(1024.0, 1.0, 3, 2));
  b.load_state(*st);  // the saved scale wins over initial_scale
  for (bool f : {false, false, true, false, false, false, true, true}) {
    a.update(f);
    b.update(f);
    REQUIRE(a.state() == b.state());
  }
}

TEST_CASE("factory: the scaler Megatron's get_megatron_optimizer picks", "[optim][scaler]") {
  mr::OptimizerConfig c;  // fp32, no loss_scale
  REQUIRE_FALSE(make_grad_scaler(c).has_value());
  c.loss_scale = 128.0;  // plain fp32 (no distributed optimizer) ignores --loss-scale
  REQUIRE_FALSE(make_grad_scaler(c).has_value());
  c.use_distributed_optimizer = true;  // ... but the distributed optimizer honours it
  auto d = make_grad_scaler(c);
  REQUIRE(d.has_value());
  REQUIRE_FALSE(d->is_dynamic());
  REQUIRE(d->scale() == 128.0f);

  mr::OptimizerConfig bf;
  bf.bf16 = true;
  REQUIRE_FALSE(make_grad_scaler(bf).has_value());  // bf16 without --loss-scale: no scaler
  bf.loss_scale = 0.0;                               // 0 is "not set" (Python truthiness)
  REQUIRE_FALSE(make_grad_scaler(bf).has_value());
  bf.loss_scale = 1024.0;
  auto b = make_grad_scaler(bf);
  REQUIRE(b.has_value());
  REQUIRE_FALSE(b->is_dynamic());
  REQUIRE(b->scale() == 1024.0f);

  mr::OptimizerConfig h;
  h.fp16 = true;
  h.initial_loss_scale = 65536.0;
  h.min_loss_scale = 2.0;
  h.loss_scale_window = 500;
  h.hysteresis = 3;
  auto f = make_grad_scaler(h);
  REQUIRE(f.has_value());
  REQUIRE(f->is_dynamic());
  REQUIRE(f->scale() == 65536.0f);
  REQUIRE(f->options().min_scale == 2.0);
  REQUIRE(f->options().growth_factor == 2.0);
  REQUIRE(f->options().backoff_factor == 0.5);
  REQUIRE(f->options().growth_interval == 500.0);
  REQUIRE(f->options().hysteresis == 3);
  REQUIRE(f->hysteresis_tracker() == 3);
  h.loss_scale = 256.0;  // fp16 with --loss-scale: constant
  auto fc = make_grad_scaler(h);
  REQUIRE(fc.has_value());
  REQUIRE_FALSE(fc->is_dynamic());
  REQUIRE(fc->scale() == 256.0f);

  mr::OptimizerConfig def;  // OptimizerConfig's defaults: 2**32, min 1, window 1000, hysteresis 2
  def.fp16 = true;
  auto dd = make_grad_scaler(def);
  REQUIRE(dd->scale() == 4294967296.0f);
  REQUIRE(dd->options().growth_interval == 1000.0);
  REQUIRE(dd->hysteresis_tracker() == 2);

  // Parameters an emerging optimizer (Muon) steps itself: no scaler; fp16 refused.
  REQUIRE_FALSE(make_grad_scaler(bf, true).has_value());
  REQUIRE_THROWS_AS(make_grad_scaler(h, true), std::invalid_argument);
}

TEST_CASE("dynamic scaler matches Megatron's DynamicGradScaler on golden sequences", "[optim][scaler]") {
  std::ifstream in(std::string(MR_SOURCE_DIR) + "/tests/optim/data/grad_scaler_golden.txt");
  REQUIRE(in.good());
  std::string line;
  int cases = 0, steps = 0;
  std::optional<GradScaler> s;
  std::string name;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ls(line);
    std::string kind;
    ls >> kind;
    if (kind == "case") {
      double init, min, growth, backoff, interval;
      int64_t hysteresis;
      ls >> name >> init >> min >> growth >> backoff >> interval >> hysteresis;
      REQUIRE_FALSE(ls.fail());
      DynamicScalerOptions o = opts(init, min, interval, hysteresis);
      o.growth_factor = growth;
      o.backoff_factor = backoff;
      s = GradScaler::dynamic(o);
      ++cases;
    } else if (kind == "step") {
      REQUIRE(s.has_value());
      int found;
      std::string scale_hex, inv_hex;
      int64_t growth_tracker, hysteresis_tracker;
      ls >> found >> scale_hex >> inv_hex >> growth_tracker >> hysteresis_tracker;
      REQUIRE_FALSE(ls.fail());
      s->update(found != 0);
      const float scale = static_cast<float>(std::strtod(scale_hex.c_str(), nullptr));
      const float inv = static_cast<float>(std::strtod(inv_hex.c_str(), nullptr));
      INFO(name << " step " << steps);
      REQUIRE(same_bits(s->scale(), scale));
      REQUIRE(same_bits(s->inv_scale(), inv));
      REQUIRE(s->growth_tracker() == growth_tracker);
      REQUIRE(s->hysteresis_tracker() == hysteresis_tracker);
      ++steps;
    } else if (kind == "end") {
      s.reset();
    }
  }
  REQUIRE(cases == 10);
  REQUIRE(steps > 2000);
}
