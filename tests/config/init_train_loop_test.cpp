// The init stage's training-loop checks (lib/config/validate/init_train_loop.cpp): an interval the loop takes the
// iteration modulo of set to 0, and fault-injector settings setup_fault_injection asserts on at train start, each
// next to neighbours that pass; and the datasets' sample counts (--phase-transition-iterations without
// --train-samples).
#include "init_support.h"
#include "validate_support.h"

namespace {

using Env = std::map<std::string, std::string>;

struct IntervalCase {
  const char* rule;
  std::vector<std::string> bad;
  std::vector<std::vector<std::string>> good;  // neighbours: a positive or negative interval, none, the switch off
  const char* prefix;                          // the message starts with it
};

const std::vector<IntervalCase> kIntervals = {
    {"init.weight-hash-interval-positive",
     {"--check-weight-hash-across-dp-replicas-interval", "0"},
     {{"--check-weight-hash-across-dp-replicas-interval", "1"},
      {"--check-weight-hash-across-dp-replicas-interval", "100"}},
     "Megatron would fail in its training loop (train): --check-weight-hash-across-dp-replicas-interval 0"},
    {"init.gpu-sniff-test-interval-positive",
     {"--gpu-sniff-test-interval", "0"},
     {{"--gpu-sniff-test-interval", "5"}, {"--gpu-sniff-test-interval", "-1"}},
     "Megatron would fail in its training loop (train): --gpu-sniff-test-interval 0 is taken modulo"},
    {"init.adlr-autoresume-interval-positive",
     {"--adlr-autoresume", "--adlr-autoresume-interval", "0"},
     {{"--adlr-autoresume-interval", "0"}, {"--adlr-autoresume", "--adlr-autoresume-interval", "10"},
      {"--adlr-autoresume", "--adlr-autoresume-interval", "-2"}, {"--adlr-autoresume"}},
     "Megatron would fail in its training loop (train): --adlr-autoresume-interval 0 with --adlr-autoresume"},
};

std::vector<std::string> fi(std::vector<std::string> extra) {
  std::vector<std::string> a = {"--fault-injector-fault-types", "rank_killed", "--fault-injector-fault-delay", "5"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

// 4 ranks: data parallelism 4 with base_args()' micro-batch 2 and global batch 8.
const Env kWs4 = {{"WORLD_SIZE", "4"}};

const std::vector<mrtest::InitCase> kFaultCases = {
    {"init.fault-injector.ranks-or-num-ranks", fi({"--fault-injector-ranks", "1", "--fault-injector-num-ranks", "2"}),
     fi({"--fault-injector-ranks", "1"}), kWs4,
     "--fault-injector-ranks 1 and --fault-injector-num-ranks 2 cannot both be given"},
    {"init.fault-injector.ranks-in-world", fi({"--fault-injector-ranks", "0,99"}), fi({"--fault-injector-ranks", "0,3"}),
     kWs4, "'99' is not a rank of the world; fault ranks must be between 0 and 3 (world size 4)"},
    {"init.fault-injector.ranks-in-world", fi({"--fault-injector-ranks", "a,b"}), fi({"--fault-injector-ranks", " 3 "}),
     kWs4, "'a' is not an integer"},
    {"init.fault-injector.ranks-in-world", fi({"--fault-injector-ranks", "-1"}), fi({"--fault-injector-ranks", "+0"}),
     kWs4, "'-1' is not a rank of the world"},
    {"init.fault-injector.num-ranks-range", fi({"--fault-injector-num-ranks", "4"}), fi({"--fault-injector-num-ranks", "3"}),
     kWs4, "--fault-injector-num-ranks 4: the ranks are sampled from ranks 1 to 3"},
    {"init.fault-injector.num-ranks-range", fi({"--fault-injector-num-ranks", "-1"}),
     fi({"--fault-injector-num-ranks", "0"}), kWs4, "random.sample: ValueError"},
    {"init.fault-injector.fault-types-required", {"--fault-injector-num-ranks", "2", "--fault-injector-fault-delay", "5"},
     fi({"--fault-injector-num-ranks", "2"}), kWs4, "--fault-injector-fault-types is not given"},
    {"init.fault-injector.probabilities-match-types",
     {"--fault-injector-ranks", "1", "--fault-injector-fault-types", "a,b", "--fault-injector-fault-probabilities", "1.0",
      "--fault-injector-fault-delay", "5"},
     {"--fault-injector-ranks", "1", "--fault-injector-fault-types", "a,b", "--fault-injector-fault-probabilities",
      "1.0,3", "--fault-injector-fault-delay", "5"},
     kWs4, "gives 1 probabilities for 2 fault types"},
    {"init.fault-injector.probabilities-match-types",
     fi({"--fault-injector-ranks", "1", "--fault-injector-fault-probabilities", "x"}),
     fi({"--fault-injector-ranks", "1", "--fault-injector-fault-probabilities", "0.5"}), kWs4, "'x' is not a number"},
    {"init.fault-injector.probabilities-match-types",
     fi({"--fault-injector-ranks", "1", "--fault-injector-fault-probabilities", "0"}),
     fi({"--fault-injector-ranks", "1", "--fault-injector-fault-probabilities", "2"}), kWs4, "sums to 0"},
    {"init.fault-injector.delay-required", {"--fault-injector-num-ranks", "2", "--fault-injector-fault-types", "rank_killed"},
     {"--fault-injector-num-ranks", "2", "--fault-injector-fault-types", "rank_killed", "--fault-injector-mtti-seconds",
      "60"},
     kWs4, "neither --fault-injector-fault-delay nor --fault-injector-mtti-seconds is given"},
    {"init.fault-injector.delay-required",
     {"--fault-injector-num-ranks", "2", "--fault-injector-fault-types", "rank_killed", "--fault-injector-mtti-seconds",
      "0"},
     {"--fault-injector-num-ranks", "2", "--fault-injector-fault-types", "rank_killed", "--fault-injector-mtti-seconds",
      "0", "--fault-injector-fault-delay", "1"},
     kWs4, "--fault-injector-mtti-seconds 0"},
};

}  // namespace

TEST_CASE("init stage, training loop: an interval of 0 that the loop takes modulo", "[init]") {
  const Env env = {{"WORLD_SIZE", "1"}};
  for (const IntervalCase& c : kIntervals) {
    INFO(c.rule);
    mrtest::Run bad = mrtest::run(mrtest::with(c.bad), env);
    INFO(bad.rule << ": " << bad.message);
    CHECK(bad.exit == 1);
    CHECK(bad.rule == c.rule);
    CHECK(bad.message.rfind(c.prefix, 0) == 0);
    CHECK(bad.out.passed(mr::kStageValidateArgs));
    CHECK(bad.out.passed(mr::kStageSanity));
    CHECK_FALSE(bad.out.passed(mr::kStageInit));
    for (const auto& words : c.good) {
      mrtest::Run good = mrtest::run(mrtest::with(words), env);
      INFO("neighbour " << mrtest::joined(words) << ": " << good.rule << ": " << good.message);
      CHECK(good.exit == 0);
    }
  }
  mrtest::Run none = mrtest::run(mrtest::base_args(), env);
  CHECK(none.exit == 0);
  CHECK(none.out.passed(mr::kStageInit));
}

TEST_CASE("init stage, training loop: the fault injector's settings, next to neighbours that pass", "[init]") {
  const std::set<std::string> fault = mrtest::check_init_cases(kFaultCases);
  // A setup deferred to --fault-injector-delay-start-iteration D fails the same way at the end of iteration D, when
  // the run reaches it (base_args(): --train-iters 20, from scratch).
  auto deferred = [](std::vector<std::string> extra) {
    std::vector<std::string> a = {"--fault-injector-num-ranks", "2", "--fault-injector-delay-start-iteration", "3"};
    a.insert(a.end(), extra.begin(), extra.end());
    return mrtest::run(mrtest::with(a), kWs4);
  };
  mrtest::Run reached = deferred({});
  CHECK(reached.exit == 1);
  CHECK(reached.rule == "init.fault-injector.fault-types-required");
  CHECK(reached.message.rfind("Megatron would fail in its training loop at the end of iteration 3 (train: "
                              "setup_fault_injection, deferred by --fault-injector-delay-start-iteration): "
                              "--fault-injector-num-ranks injects faults, but --fault-injector-fault-types is not given",
                              0) == 0);
  CHECK(deferred({"--fault-injector-num-ranks", "4"}).rule == "init.fault-injector.num-ranks-range");
  CHECK(deferred({"--exit-interval", "4"}).rule == "init.fault-injector.fault-types-required");  // steps 0-3 run
  // Neighbours it does not reach (or may not): past the last iteration, an exit interval that ends the loop first,
  // the step skipped, a checkpoint's iteration, a run counted in samples, a time limit.
  for (const std::vector<std::string>& words :
       std::vector<std::vector<std::string>>{{"--train-iters", "3"},
                                             {"--exit-interval", "3"},
                                             {"--iterations-to-skip", "4"},
                                             {"--load", "/ckpt"},
                                             {"--pretrained-checkpoint", "/ckpt"},
                                             {"--exit-duration-in-mins", "10"}}) {
    mrtest::Run r = deferred(words);
    INFO(mrtest::joined(words) << ": " << r.rule << ": " << r.message);
    CHECK(r.exit == 0);
  }
  CHECK(deferred({"--train-iters", "4"}).exit == 1);
  CHECK(deferred({"--iterations-to-skip", "3", "5"}).exit == 1);
  // A skipped step takes no exit check: with iteration 3 skipped, --exit-interval 3 does not stop the loop before
  // the end of iteration 3 (review diff34 #2); with 3 and 6 skipped, --exit-interval 3 lets iteration 7 run too.
  CHECK(deferred({"--exit-interval", "3", "--iterations-to-skip", "3"}).exit == 1);
  CHECK(deferred({"--exit-interval", "2", "--iterations-to-skip", "2"}).exit == 1);  // it stops after iteration 3
  CHECK(deferred({"--exit-interval", "2", "--iterations-to-skip", "5"}).exit == 0);  // it stops after iteration 1
  CHECK(deferred({"--exit-interval", "1", "--iterations-to-skip", "1", "2", "3"}).exit == 1);
  // RL's inference-only mode (--perform-rl-step --skip-train) runs train()'s loop without training steps: a deferred
  // setup never runs (review diff34 #1); without deferral it is still checked at train()'s start.
  CHECK(deferred({"--perform-rl-step", "--skip-train"}).exit == 0);
  mrtest::Run at_start = mrtest::run(mrtest::with({"--fault-injector-num-ranks", "2", "--perform-rl-step", "--skip-train"}), kWs4);
  CHECK(at_start.rule == "init.fault-injector.fault-types-required");
  // Without ranks or a number of ranks nothing is injected, whatever else is set.
  CHECK(mrtest::run(mrtest::with({"--fault-injector-fault-probabilities", "1,2"}), kWs4).exit == 0);

  std::set<std::string> all = fault;
  for (const IntervalCase& c : kIntervals) all.insert(c.rule);
  all.insert("init.phase-transition-needs-train-samples");  // its own case below
  CHECK(mrtest::init_rules_of("validate/init_train_loop.cpp") == all);
}

TEST_CASE("init stage, training loop: not checked under --skip-train, where pretrain never calls train()", "[init]") {
  // training.py, pretrain: train() only `if not skip_train or (perform_rl_step and do_train)` (review diff33 #4).
  const std::vector<std::vector<std::string>> bad = {
      fi({"--fault-injector-ranks", "0,99"}),
      {"--gpu-sniff-test-interval", "0"},
      {"--check-weight-hash-across-dp-replicas-interval", "0"},
      {"--adlr-autoresume", "--adlr-autoresume-interval", "0"},
  };
  for (const auto& words : bad) {
    INFO(mrtest::joined(words));
    CHECK(mrtest::run(mrtest::with(words), kWs4).exit == 1);
    std::vector<std::string> skip = words;
    skip.push_back("--skip-train");
    mrtest::Run r = mrtest::run(mrtest::with(skip), kWs4);
    INFO(r.rule << ": " << r.message);
    CHECK(r.exit == 0);
    CHECK(r.out.passed(mr::kStageInit));
  }
}

TEST_CASE("init stage, training loop: the fault injector's messages escape the values they echo", "[init]") {
  // A newline in a value would start a line of its own in `check --format text` (review diff33 #3).
  mrtest::Run r = mrtest::run(mrtest::with(fi({"--fault-injector-ranks", "0\n::error::fi"})), kWs4);
  INFO(r.message);
  CHECK(r.rule == "init.fault-injector.ranks-in-world");
  CHECK(r.message.find('\n') == std::string::npos);
  CHECK(r.message.find("--fault-injector-ranks 0\\x0a::error::fi: '0\\x0a::error::fi' is not an integer") !=
        std::string::npos);
  mrtest::Run p = mrtest::run(
      mrtest::with(fi({"--fault-injector-ranks", "1", "--fault-injector-fault-probabilities", "x\n::error::p"})), kWs4);
  INFO(p.message);
  CHECK(p.rule == "init.fault-injector.probabilities-match-types");
  CHECK(p.message.find('\n') == std::string::npos);
}

TEST_CASE("init stage, datasets: --phase-transition-iterations with --train-iters (train_samples None), next to "
          "--train-samples",
          "[init]") {
  // Review diff35 #6: training.py, get_train_valid_test_num_samples: the phase boundaries end at args.train_samples,
  // None with --train-iters, and max(s for s in them if s <= current_sample) raises TypeError when pretrain builds
  // the datasets (under --skip-train too); --perform-rl-step builds none.
  const Env env = {{"WORLD_SIZE", "1"}};
  mrtest::Run bad = mrtest::run(mrtest::with({"--phase-transition-iterations", "6, 3"}), env);
  INFO(bad.rule << ": " << bad.message);
  CHECK(bad.exit == 1);
  CHECK(bad.rule == "init.phase-transition-needs-train-samples");
  CHECK(bad.message.rfind("Megatron would fail building the datasets (get_train_valid_test_num_samples): "
                          "--phase-transition-iterations 3,6 with --train-iters 10 ends the last phase at "
                          "train_samples, which is None without --train-samples (TypeError",
                          0) == 0);
  CHECK(bad.message.find("give --train-samples") != std::string::npos);
  CHECK(bad.out.passed(mr::kStageValidateArgs));
  CHECK(bad.out.passed(mr::kStageSanity));
  CHECK_FALSE(bad.out.passed(mr::kStageInit));
  mrtest::Run skip = mrtest::run(mrtest::with({"--phase-transition-iterations", "3", "--skip-train"}), env);
  CHECK(skip.rule == "init.phase-transition-needs-train-samples");
  // Neighbours: the run counted in samples; no phases; Megatron's falsy "" (no phases); an RL step, which builds
  // no datasets (pretrain's --perform-rl-step path), with the same phases and --train-iters.
  for (const std::vector<std::string>& words :
       std::vector<std::vector<std::string>>{mrtest::without("--train-iters", {"--train-samples", "80",
                                                                               "--phase-transition-iterations", "6,3"}),
                                             mrtest::with({"--phase-transition-iterations", "6,3", "--perform-rl-step"}),
                                             mrtest::without("--train-iters", {"--train-samples", "80"}),
                                             mrtest::plus(mrtest::base_args(), {"--phase-transition-iterations", ""})}) {
    mrtest::Run good = mrtest::run(words, env);
    INFO(mrtest::joined(words) << ": " << good.rule << ": " << good.message);
    CHECK(good.exit == 0);
    CHECK(good.out.passed(mr::kStageInit));
  }
}
