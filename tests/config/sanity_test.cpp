// The sanity stage (lib/config/validate/sanity.cpp): megatron-run's own rules, `sanity.*`, for values Megatron's
// validate_args() accepts but no job can run with. Each rule fires next to a neighbour that passes; the stage
// runs after Megatron's chain (so Megatron's verdict is never pre-empted) and every diagnostic says its stage.
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "config/validate/sanity.h"
#include "support.h"

namespace {

using mrtest::run;
using mrtest::with;
using Env = std::map<std::string, std::string>;

struct Case {
  const char* rule;
  std::vector<std::string> bad;   // appended to base_args(): the rule fires
  std::vector<std::string> good;  // the neighbour: passes the whole chain
  Env env = {};
  const char* fragment = "";      // in the message
};

// Every sanity rule (but sanity.integer-overflow, tested below) with at least one failing value per flag it checks.
const std::vector<Case> kCases = {
    {"sanity.num-layers-positive", {"--num-layers", "0"}, {"--num-layers", "1"}, {}, "--num-layers (0) must be at least 1"},
    {"sanity.num-layers-positive", {"--num-layers", "-3"}, {"--num-layers", "4"}, {}, "--num-layers (-3)"},
    {"sanity.hybrid-pattern-has-layers",
     {"--hybrid-layer-pattern", "/MM", "--position-embedding-type", "rope"},
     {"--hybrid-layer-pattern", "M/MM", "--position-embedding-type", "rope"}, {}, "holds no layer"},
    {"sanity.hidden-size-positive", {"--hidden-size", "-64", "--kv-channels", "16", "--ffn-hidden-size", "256"},
     {"--hidden-size", "128"}, {}, "--hidden-size (-64)"},
    {"sanity.ffn-hidden-size-positive", {"--ffn-hidden-size", "-5"}, {"--ffn-hidden-size", "5"}, {}, "--ffn-hidden-size (-5)"},
    {"sanity.ffn-hidden-size-positive", {"--ffn-hidden-size", "0"}, {"--ffn-hidden-size", "1"}, {}, "--ffn-hidden-size (0)"},
    {"sanity.attention-heads-positive", {"--num-attention-heads", "-4"}, {"--num-attention-heads", "8"}, {},
     "--num-attention-heads (-4)"},
    {"sanity.attention-heads-positive", {"--group-query-attention", "--num-query-groups", "0"},
     {"--group-query-attention", "--num-query-groups", "2"}, {}, "--num-query-groups (0)"},
    {"sanity.kv-channels-positive", {"--kv-channels", "-1"}, {"--kv-channels", "1"}, {}, "--kv-channels (-1)"},
    {"sanity.sequence-length-positive", {"--seq-length", "-1"}, {"--seq-length", "1"}, {}, "--seq-length (-1)"},
    {"sanity.sequence-length-positive", {"--decoder-seq-length", "0"}, {"--decoder-seq-length", "64"}, {},
     "--decoder-seq-length (0)"},
    {"sanity.vocab-size-positive", {"--vocab-size", "0"}, {"--vocab-size", "1"}, {}, "--vocab-size (0)"},
    {"sanity.vocab-size-positive", {"--make-vocab-size-divisible-by", "0"}, {"--make-vocab-size-divisible-by", "1"}, {},
     "--make-vocab-size-divisible-by (0)"},
    {"sanity.moe-sizes-positive", {"--num-experts", "4", "--moe-router-topk", "0"},
     {"--num-experts", "4", "--moe-router-topk", "1", "--moe-router-pre-softmax"}, {}, "--moe-router-topk (0)"},
    {"sanity.moe-sizes-positive", {"--num-experts", "4", "--moe-ffn-hidden-size", "-1"},
     {"--num-experts", "4", "--moe-ffn-hidden-size", "32"}, {}, "--moe-ffn-hidden-size (-1)"},
    {"sanity.moe-sizes-positive", {"--num-experts", "4", "--moe-shared-expert-intermediate-size", "0"},
     {"--num-experts", "4", "--moe-shared-expert-intermediate-size", "64"}, {}, "--moe-shared-expert-intermediate-size (0)"},
    {"sanity.train-length-nonnegative", {"--train-iters", "-1"}, {"--train-iters", "0"}, {}, "--train-iters (-1)"},
    {"sanity.train-length-nonnegative", {"--eval-iters", "-1"}, {"--eval-iters", "0"}, {}, "--eval-iters (-1)"},
    {"sanity.train-length-nonnegative", {"--lr-decay-iters", "-1"}, {"--lr-decay-iters", "10"}, {}, "--lr-decay-iters (-1)"},
    {"sanity.train-length-nonnegative", {"--lr-warmup-fraction", "-0.1"}, {"--lr-warmup-fraction", "0"}, {}, "--lr-warmup-fraction (-0.1)"},
    {"sanity.train-length-nonnegative", {"--lr-decay-style", "WSD", "--lr-wsd-decay-iters", "-5"},
     {"--lr-decay-style", "WSD", "--lr-wsd-decay-iters", "5"}, {}, "--lr-wsd-decay-iters (-5)"},
    {"sanity.train-length-nonnegative", {"--lr-wsd-decay-samples", "-5"}, {"--lr-wsd-decay-samples", "0"}, {}, "--lr-wsd-decay-samples (-5)"},
    {"sanity.eval-batch-sizes-positive", {"--eval-micro-batch-size", "-2"}, {"--eval-micro-batch-size", "2"}, {},
     "--eval-micro-batch-size (-2)"},
    {"sanity.eval-batch-sizes-positive", {"--eval-global-batch-size", "-8"}, {"--eval-global-batch-size", "8"}, {},
     "--eval-global-batch-size (-8)"},
    // Python's `iteration % -1 == 0`: a negative log interval logs every |n| iterations in Megatron (review parity32).
    {"sanity.intervals-positive", {"--log-interval", "0"}, {"--log-interval", "-1"}, {}, "--log-interval (0)"},
    {"sanity.intervals-positive", {"--eval-interval", "0"}, {"--eval-interval", "0", "--skip-train"}, {},
     "--eval-interval (0) must be other than 0 (unless --skip-train or --full-validation): Megatron divides --train-iters"},
    {"sanity.intervals-positive", {"--tensorboard-dir", "/tb", "--tensorboard-log-interval", "0"},
     {"--tensorboard-log-interval", "0"}, {}, "--tensorboard-log-interval (0) must be other than 0 with --tensorboard-dir"},
    {"sanity.intervals-positive", {"--save-interval", "-1"}, {"--save-interval", "0"}, {}, "--save-interval (-1)"},
    {"sanity.intervals-positive", {"--eval-interval", "-1"}, {"--eval-interval", "5"}, {}, "--eval-interval (-1)"},
    {"sanity.intervals-positive", {"--ckpt-step", "-1"}, {"--ckpt-step", "0"}, {}, "--ckpt-step (-1)"},
    {"sanity.intervals-positive", {"--exit-duration-in-mins", "-1"}, {"--exit-duration-in-mins", "0"}, {},
     "--exit-duration-in-mins (-1) must be 0 or more: Megatron would save and exit after the first iteration"},
    {"sanity.intervals-positive", {"--non-persistent-save-interval", "-3"}, {"--non-persistent-save-interval", "3"}, {},
     "--non-persistent-save-interval (-3)"},
    {"sanity.save-nonempty", {"--save", "", "--save-interval", "3"}, {"--save", "ck", "--save-interval", "3"}, {},
     "--save is empty"},
    {"sanity.num-workers-nonnegative", {"--num-workers", "-1"}, {"--num-workers", "0"}, {}, "--num-workers (-1)"},
    {"sanity.learning-rates-finite", {"--lr", "inf"}, {"--lr", "0.5"}, {}, "--lr (inf)"},
    {"sanity.learning-rates-finite", {"--lr", "-0.1", "--min-lr", "-0.2"}, {"--lr", "0", "--min-lr", "0"}, {}, "--lr (-0.1)"},
    {"sanity.learning-rates-finite", {"--min-lr", "-1"}, {"--min-lr", "0"}, {}, "--min-lr (-1.0)"},
    {"sanity.learning-rates-finite", {"--decoupled-lr", "inf"}, {"--decoupled-lr", "0.001"}, {}, "--decoupled-lr (inf)"},
    {"sanity.learning-rates-finite", {"--lr-warmup-init", "nan"}, {"--lr-warmup-init", "0"}, {}, "--lr-warmup-init (nan)"},
    {"sanity.weight-decay-finite", {"--weight-decay", "nan"}, {"--weight-decay", "0"}, {}, "--weight-decay (nan)"},
    {"sanity.weight-decay-finite", {"--weight-decay", "-0.1"}, {"--weight-decay", "0.1"}, {}, "--weight-decay (-0.1)"},
    {"sanity.clip-grad-finite", {"--clip-grad", "nan"}, {"--clip-grad", "0"}, {}, "--clip-grad (nan)"},
    {"sanity.clip-grad-finite", {"--clip-grad", "inf"}, {"--clip-grad", "1e9"}, {}, "--clip-grad (inf)"},
    {"sanity.adam-betas-range", {"--adam-beta2", "5"}, {"--adam-beta2", "0.95"}, {}, "--adam-beta2 (5.0) must be in [0, 1)"},
    {"sanity.adam-betas-range", {"--adam-beta1", "1"}, {"--adam-beta1", "0"}, {}, "--adam-beta1 (1.0)"},
    {"sanity.adam-betas-range", {"--adam-beta1", "nan"}, {"--adam-beta1", "0.5"}, {}, "--adam-beta1 (nan)"},
    {"sanity.adam-eps-positive", {"--adam-eps", "0"}, {"--adam-eps", "1e-30"}, {}, "--adam-eps (0.0)"},
    {"sanity.adam-eps-positive", {"--adam-eps", "nan"}, {"--adam-eps", "1e-8"}, {}, "--adam-eps (nan)"},
    {"sanity.sgd-momentum-finite", {"--optimizer", "sgd", "--sgd-momentum", "nan"}, {"--optimizer", "sgd", "--sgd-momentum", "0"},
     {}, "--sgd-momentum (nan)"},
    // --loss-scale 0 is none (Megatron's `if config.loss_scale`): fp16 then scales dynamically (review parity32).
    {"sanity.loss-scale-positive", {"--fp16", "--loss-scale", "-1"}, {"--fp16", "--loss-scale", "0"}, {}, "--loss-scale (-1.0)"},
    {"sanity.loss-scale-positive", {"--bf16", "--loss-scale", "-1"}, {"--bf16", "--loss-scale", "0"}, {}, "--loss-scale (-1.0)"},
    // fp32 without the distributed optimizer builds no scaler: --loss-scale is not read (review diff32).
    {"sanity.loss-scale-positive", {"--use-distributed-optimizer", "--loss-scale", "-1"}, {"--loss-scale", "-1"}, {},
     "--loss-scale (-1.0)"},
    // The dynamic scaler's values are read only where --fp16 builds it.
    {"sanity.loss-scale-positive", {"--fp16", "--initial-loss-scale", "inf"}, {"--initial-loss-scale", "inf"}, {},
     "--initial-loss-scale (inf)"},
    {"sanity.loss-scale-positive", {"--fp16", "--min-loss-scale", "0"}, {"--bf16", "--min-loss-scale", "0"}, {},
     "--min-loss-scale (0.0)"},
    {"sanity.loss-scale-positive", {"--fp16", "--hysteresis", "0"}, {"--hysteresis", "0"}, {}, "--hysteresis (0)"},
    {"sanity.loss-scale-positive", {"--fp16", "--loss-scale-window", "0"}, {"--fp16", "--loss-scale-window", "0.5"}, {},
     "--loss-scale-window (0.0) must be greater than 0: Megatron's DynamicGradScaler asserts growth_interval > 0"},
    {"sanity.loss-scale-positive", {"--fp16", "--hysteresis", "0"}, {"--fp16", "--loss-scale", "8", "--hysteresis", "0"},
     {}, "--hysteresis (0)"},
    {"sanity.loss-scale-positive", {"--fp16", "--loss-scale", "1e39"}, {"--fp16", "--loss-scale", "3.4028235e38"}, {},
     "--loss-scale (1e+39) must be a number greater than 0 that float32 holds (below 3.4028235677973366e+38): the "
     "scaler keeps it in an fp32 tensor"},
    // The dynamic scaler's start is an fp32 tensor with --fp16 only (review: today31 8).
    {"sanity.loss-scale-positive", {"--fp16", "--initial-loss-scale", "1e39"}, {"--bf16", "--initial-loss-scale", "1e39"}, {},
     "--initial-loss-scale (1e+39) must be a number greater than 0 that float32 holds"},
    {"sanity.init-method-std-finite", {"--init-method-std", "-1"}, {"--init-method-std", "0"}, {}, "--init-method-std (-1.0)"},
    {"sanity.dropout-range", {"--hidden-dropout", "1.5"}, {"--hidden-dropout", "1"}, {}, "--hidden-dropout (1.5)"},
    {"sanity.dropout-range", {"--attention-dropout", "-0.5"}, {"--attention-dropout", "0"}, {}, "--attention-dropout (-0.5)"},
    // Megatron's chain lets WORLD_SIZE=-1 through (8 % (1 x -1) == 0 in Python); no job has -1 ranks.
    {"sanity.world-size-range", {"--micro-batch-size", "1"}, {"--micro-batch-size", "1"}, {{"WORLD_SIZE", "-1"}},
     "the world size (-1"},
    {"sanity.world-size-range", {"--micro-batch-size", "1", "--global-batch-size", "4294967296"},
     {"--micro-batch-size", "1", "--global-batch-size", "2147483647"}, {{"WORLD_SIZE", "4294967296"}},
     "must be between 1 and 2147483647"},
    {"sanity.rank-in-world", {}, {}, {{"WORLD_SIZE", "2"}, {"RANK", "5"}}, "the rank (5"},
    {"sanity.rank-in-world", {}, {}, {{"WORLD_SIZE", "2"}, {"RANK", "-1"}}, "the rank (-1"},
};

}  // namespace

TEST_CASE("sanity rules: each fires on a value no job can run with, next to a neighbour that passes", "[sanity]") {
  for (const Case& c : kCases) {
    INFO(c.rule << " with " << [&] {
      std::string s;
      for (const auto& w : c.bad) s += w + " ";
      for (const auto& [k, v] : c.env) s += k + "=" + v + " ";
      return s;
    }());
    Env env = c.env.count("WORLD_SIZE") ? c.env : Env{{"WORLD_SIZE", "1"}};
    for (const auto& [k, v] : c.env) env[k] = v;
    mrtest::Run bad = run(with(c.bad), env);
    CHECK(bad.exit == 1);
    CHECK(bad.rule == c.rule);
    CHECK(bad.message.find(c.fragment) != std::string::npos);
    // Megatron's own chain passed: the sanity stage alone refuses.
    CHECK(bad.out.passed(mr::kStageValidateArgs));
    CHECK_FALSE(bad.out.passed(mr::kStageSanity));
    for (const auto& d : bad.out.diagnostics)
      if (d.level == mr::Diagnostic::Level::Error) CHECK(d.stage == mr::kStageSanity);

    Env good_env = env;
    if (std::string(c.rule) == "sanity.world-size-range") good_env["WORLD_SIZE"] = c.bad.size() > 2 ? "2147483647" : "1";
    if (std::string(c.rule) == "sanity.rank-in-world") good_env["RANK"] = "1";
    mrtest::Run good = run(with(c.good), good_env);
    INFO("neighbour: " << good.rule << ": " << good.message);
    CHECK(good.exit == 0);
    CHECK(good.out.passed(mr::kStageSanity));
  }
}

TEST_CASE("sanity warning: --embedding-min-norm without the distributed optimizer", "[sanity]") {
  const Env env = {{"WORLD_SIZE", "1"}};
  auto warned = [](const mrtest::Run& r) {
    for (const auto& d : r.out.diagnostics)
      if (d.rule == "sanity.embedding-min-norm-needs-distributed-optimizer") {
        CHECK(d.level == mr::Diagnostic::Level::Warning);
        CHECK(d.stage == mr::kStageSanity);
        CHECK(d.message.find("--embedding-min-norm 0.5 is documented as requiring the distributed optimizer") !=
              std::string::npos);
        return true;
      }
    return false;
  };
  mrtest::Run alone = run(with({"--embedding-min-norm", "0.5"}), env);
  CHECK(alone.exit == 0);  // a warning: Megatron accepts it
  CHECK(warned(alone));
  mrtest::Run dist = run(with({"--embedding-min-norm", "0.5", "--use-distributed-optimizer"}), env);
  CHECK(dist.exit == 0);
  CHECK_FALSE(warned(dist));
  mrtest::Run none = run(with({}), env);
  CHECK_FALSE(warned(none));
}

TEST_CASE("sanity warning: a negative --clip-grad trains without clipping, as 0 does (Megatron clips when > 0)",
          "[sanity]") {
  const Env env = {{"WORLD_SIZE", "1"}};
  auto warned = [](const mrtest::Run& r) {
    for (const auto& d : r.out.diagnostics)
      if (d.rule == "sanity.clip-grad-negative") {
        CHECK(d.level == mr::Diagnostic::Level::Warning);
        CHECK(d.message.find("--clip-grad -1.0 is negative: Megatron clips the gradient norm only when --clip-grad is "
                             "greater than 0") != std::string::npos);
        return true;
      }
    return false;
  };
  mrtest::Run negative = run(with({"--clip-grad", "-1"}), env);
  CHECK(negative.exit == 0);  // Megatron accepts it (review parity35 #2)
  CHECK(warned(negative));
  for (const char* ok : {"0", "1.0"}) {
    mrtest::Run r = run(with({"--clip-grad", ok}), env);
    CHECK(r.exit == 0);
    CHECK_FALSE(warned(r));
  }
}

TEST_CASE("sanity rules: every rule of the stage is exercised by the table or the overflow tests", "[sanity]") {
  std::set<std::string> tabled = {"sanity.integer-overflow", "sanity.embedding-min-norm-needs-distributed-optimizer",
                                   "sanity.clip-grad-negative"};
  for (const Case& c : kCases) tabled.insert(c.rule);
  for (const mr::Rule* r : mr::all_rules()) {
    if (std::string(r->stage) != mr::kStageSanity || std::string(r->id).rfind("sanity.", 0) != 0) continue;
    INFO(r->id);
    CHECK(tabled.count(r->id) == 1);
  }
}

TEST_CASE("sanity stage: runs after Megatron's chain, whose verdict comes first", "[sanity]") {
  // --micro-batch-size 0 is Megatron's own rule; the sanity stage does not run.
  auto megatron = run(with({"--micro-batch-size", "0", "--num-layers", "0"}), {{"WORLD_SIZE", "1"}});
  CHECK(megatron.rule == "batch-size.micro-batch-size-positive");
  CHECK_FALSE(megatron.out.passed(mr::kStageValidateArgs));
  REQUIRE(!megatron.out.diagnostics.empty());
  CHECK(megatron.out.diagnostics.back().stage == mr::kStageValidateArgs);
  // --lr nan: Megatron's OptimizerConfig (min_lr <= lr is False for NaN) refuses it before the sanity stage.
  auto nan_lr = run(with({"--lr", "nan"}), {{"WORLD_SIZE", "1"}});
  CHECK(nan_lr.rule == "optimizer.min-lr-above-lr");
  // A valid job passes every stage, in order (the init stage: tests/config/init_*_test.cpp).
  auto ok = run(mrtest::base_args(), {{"WORLD_SIZE", "1"}});
  CHECK(ok.exit == 0);
  CHECK(ok.out.stages_passed ==
        std::vector<std::string>{mr::kStageValidateArgs, mr::kStageSanity, mr::kStageInit});
  // The stages, as `megatron-run rules` and docs/validation.md list them.
  const auto& stages = mr::validation_stages();
  REQUIRE(stages.size() == 3);
  CHECK(std::string(stages[0].name) == "validate_args");
  CHECK(std::string(stages[1].name) == "sanity");
  CHECK(std::string(stages[2].name) == "init");
  CHECK(stages[0].sections.size() == mr::validation_sections().size());
}

TEST_CASE("sanity.integer-overflow: a size Megatron's chain computes that does not fit in 64 bits", "[sanity][overflow]") {
  // The default global batch size: --micro-batch-size x the data-parallel size (no --global-batch-size given).
  std::vector<std::string> no_gbs;
  for (const std::string& w : with({"--micro-batch-size", "9223372036854775807"}))
    if (w != "--global-batch-size" && w != "8") no_gbs.push_back(w);
  auto gbs = run(no_gbs, {{"WORLD_SIZE", "8"}});
  CHECK(gbs.rule == "sanity.integer-overflow");
  CHECK(gbs.message.find("--global-batch-size") != std::string::npos);
  CHECK(gbs.message.find("9223372036854775807") != std::string::npos);
  // The sanity rule stopped Megatron's chain: Megatron's verdict is not known (neither stage passed).
  CHECK_FALSE(gbs.out.passed(mr::kStageValidateArgs));
  CHECK(gbs.out.diagnostics.back().stage == mr::kStageSanity);
  auto fits = run(with({"--micro-batch-size", "1152921504606846975"}), {{"WORLD_SIZE", "8"}});
  CHECK(fits.rule != "sanity.integer-overflow");
  // WORLD_SIZE at the top of the int64 range.
  auto world = run(with({"--micro-batch-size", "2"}), {{"WORLD_SIZE", "9223372036854775807"}});
  CHECK(world.rule == "sanity.integer-overflow");
  // The eval unit: --eval-micro-batch-size x the batch-parallel size.
  auto eval = run(with({"--eval-micro-batch-size", "9223372036854775807"}), {{"WORLD_SIZE", "8"}});
  CHECK(eval.rule == "sanity.integer-overflow");
  CHECK(eval.message.find("--eval-micro-batch-size") != std::string::npos);
  // The derived --ffn-hidden-size (4 x --hidden-size; 8h/3 with SwiGLU).
  auto ffn = run(with({"--hidden-size", "4611686018427387904", "--kv-channels", "16"}), {{"WORLD_SIZE", "1"}});
  CHECK(ffn.rule == "sanity.integer-overflow");
  CHECK(ffn.message.find("--hidden-size") != std::string::npos);
  auto swiglu = run(with({"--hidden-size", "2305843009213693952", "--kv-channels", "16", "--swiglu"}), {{"WORLD_SIZE", "1"}});
  CHECK(swiglu.rule == "sanity.integer-overflow");
  auto ffn_ok = run(with({"--hidden-size", "64", "--swiglu"}), {{"WORLD_SIZE", "1"}});
  CHECK(ffn_ok.exit == 0);
  // 2 x the context-parallel size (--seq-length must divide by it).
  auto cp = run(with({"--context-parallel-size", "4611686018427387904", "--global-batch-size", "8"}),
                {{"WORLD_SIZE", "4611686018427387904"}});
  CHECK(cp.rule == "sanity.integer-overflow");
}
