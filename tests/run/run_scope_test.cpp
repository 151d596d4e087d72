// Which flags the synthetic run acts on (run/run_scope.h): every flag of the schema is either acted on or has a
// reason, and the notice names exactly the flags the user set that the run does not act on.
#include <catch2/catch.hpp>

#include <set>

#include "../distributed/proc.h"
#include "config/schema.h"
#include "run/run_scope.h"

using namespace mr;

TEST_CASE("every flag of the schema is acted on by the run or has a reason", "[run][scope]") {
  std::vector<std::string> holes;
  size_t acted = 0, reasoned = 0;
  for (const Arg& a : Schema::megatron().args()) {
    const std::optional<ArgId> id = find_arg(a.dest());
    REQUIRE(id);
    if (run::acts_on(*id)) {
      ++acted;
      CHECK(run::why_not_acted_on(*id, a.spec->group) == nullptr);
    } else if (run::why_not_acted_on(*id, a.spec->group)) {
      ++reasoned;
    } else {
      holes.push_back(std::string(a.flags[0]) + " (group '" + a.spec->group + "')");
    }
  }
  INFO("flags neither acted on nor listed with a reason (lib/run/run_scope.cpp):");
  for (const std::string& h : holes) INFO(h);
  CHECK(holes.empty());
  CHECK(acted > 100);
  CHECK(acted + reasoned == Schema::megatron().args().size());
}

TEST_CASE("the notice names the flags the user set that the run does not act on, with the reason",
          "[run][scope]") {
  mrtest::TempDir dir;
  std::vector<mrtest::Proc> p = {mrtest::start(
      {mrtest::megatron_run(), "--config", std::string(MR_SOURCE_DIR) + "/configs/default.yaml", "--train-iters", "3",
       "--eval-interval", "5", "--tensorboard-dir", dir / "tb", "--log-params-norm", "--log-num-zeros-in-grad"},
      {}, dir, "notice")};
  mrtest::wait_all(p, std::chrono::seconds(120));
  INFO(p[0].out() << p[0].err());
  REQUIRE(p[0].exit_code() == 0);
  const std::string err = p[0].err();
  CHECK_THAT(err, Catch::Contains("notice: the synthetic training run does not act on --eval-interval (no evaluation in a synthetic run)"));
  CHECK_THAT(err, Catch::Contains("--tensorboard-dir (no TensorBoard writer in the synthetic run)"));
  // Once, from the spawner, not once per rank; and not for flags it does act on.
  CHECK(err.find("notice:") == err.rfind("notice:"));
  CHECK_THAT(err, !Catch::Contains("--log-params-norm") && !Catch::Contains("--lr ") && !Catch::Contains("--mock-data"));
  // The two logging flags it does act on: Megatron's fields in the iteration line.
  CHECK_THAT(p[0].out(), Catch::Contains("| num zeros: ") && Catch::Contains("| params norm: "));
}

TEST_CASE("a deprecated alias validation replaces is named as the user wrote it", "[run][scope]") {
  // --recompute-activations becomes --recompute-granularity selective and is erased (Megatron's validate_args).
  mrtest::TempDir dir;
  std::vector<mrtest::Proc> p = {mrtest::start(
      {mrtest::megatron_run(), "--config", std::string(MR_SOURCE_DIR) + "/configs/default.yaml", "--train-iters", "3",
       "--lr-warmup-iters", "1", "--recompute-activations"},
      {}, dir, "alias")};
  mrtest::wait_all(p, std::chrono::seconds(120));
  INFO(p[0].out() << p[0].err());
  REQUIRE(p[0].exit_code() == 0);
  CHECK_THAT(p[0].err(), Catch::Contains("does not act on --recompute-activations (no model forward/backward"));
  CHECK_THAT(p[0].err(), !Catch::Contains("--recompute-granularity"));
}

TEST_CASE("the default job's notice names only --seq-length", "[run][scope]") {
  mrtest::TempDir dir;
  std::vector<mrtest::Proc> p = {mrtest::start(
      {mrtest::megatron_run(), "--config", std::string(MR_SOURCE_DIR) + "/configs/default.yaml", "--train-iters", "3"},
      {}, dir, "default")};
  mrtest::wait_all(p, std::chrono::seconds(120));
  INFO(p[0].out() << p[0].err());
  REQUIRE(p[0].exit_code() == 0);
  // Megatron requires a sequence length; a run without a forward pass has no use for it.
  CHECK_THAT(p[0].err(), Catch::Contains("notice: the synthetic training run does not act on --seq-length (no model "
                                         "forward/backward: sequences have no effect on synthetic gradients)\n"));
}

TEST_CASE("the notice names the optimizer flags the chosen --optimizer has no use for", "[run][scope]") {
  // The flags as a user sets them (command line); the rest at the schema's defaults.
  auto notice = [](std::vector<std::pair<std::string, Value>> set) {
    Namespace ns;
    for (auto& [k, v] : set) ns.set(k, v, {Provenance::Kind::Cli, "argv"});
    return run::unacted_notice(ns, Args::from(ns));
  };
  using S = std::string;
  // --optimizer lion: Megatron's Lion takes --adam-beta1/2; --lion-beta1/2 are unused and named.
  const S lion = notice({{"optimizer", Value(S("lion"))}, {"lion_beta1", Value(0.8)}, {"adam_beta1", Value(0.85)}});
  CHECK_THAT(lion, Catch::Contains("--lion-beta1 (--optimizer lion takes Lion's betas from --adam-beta1/2"));
  CHECK_THAT(lion, !Catch::Contains("--adam-beta1 ("));
  // Muon with a Lion scalar optimizer: --lion-beta1/2 act, the Adam options do not.
  const S ml = notice({{"optimizer", Value(S("muon"))}, {"muon_scalar_optimizer", Value(S("lion"))},
                       {"lion_beta2", Value(0.9)}, {"adam_eps", Value(1e-6)}, {"muon_momentum", Value(0.9)}});
  CHECK_THAT(ml, !Catch::Contains("--lion-beta2") && !Catch::Contains("--muon-momentum"));
  CHECK_THAT(ml, Catch::Contains("--adam-eps (--optimizer muon with --muon-scalar-optimizer lion uses no Adam options)"));
  // Adam: --sgd-momentum and the Muon options named; its own options not.
  const S adam = notice({{"optimizer", Value(S("adam"))}, {"sgd_momentum", Value(0.5)}, {"muon_momentum", Value(0.9)},
                         {"adam_beta2", Value(0.99)}});
  CHECK_THAT(adam, Catch::Contains("--sgd-momentum (only --optimizer sgd uses it, not --optimizer adam)"));
  CHECK_THAT(adam, Catch::Contains("--muon-momentum (Muon's options; --optimizer adam is no Muon)"));
  CHECK_THAT(adam, !Catch::Contains("--adam-beta2"));
  // SGD: the Adam options named; --sgd-momentum not. Adaptive Muon is a Muon.
  CHECK_THAT(notice({{"optimizer", Value(S("sgd"))}, {"adam_beta1", Value(0.9)}, {"sgd_momentum", Value(0.5)}}),
             Catch::Contains("--adam-beta1 (--optimizer sgd uses no Adam options)") && !Catch::Contains("--sgd-momentum"));
  CHECK(notice({{"optimizer", Value(S("adaptive_muon"))}, {"muon_momentum", Value(0.9)}, {"adam_beta1", Value(0.9)}}).empty());
}

TEST_CASE("the precision-aware optimizer's dtypes (fp8 moments too) and the gradient dtype act; fp16 main params in "
          "fp32 training and bf16 gradients where the buffer is another dtype are named",
          "[run][scope]") {
  auto notice = [](std::vector<std::pair<std::string, Value>> set) {
    Namespace ns;
    for (auto& [k, v] : set) ns.set(k, v, {Provenance::Kind::Cli, "argv"});
    return run::unacted_notice(ns, Args::from(ns));
  };
  using S = std::string;
  const Value on(true);
  CHECK(notice({{"use_precision_aware_optimizer", on}, {"exp_avg_dtype", Value(S("bf16"))},
                {"exp_avg_sq_dtype", Value(S("fp16"))}})
            .empty());
  CHECK(notice({{"use_precision_aware_optimizer", on}, {"exp_avg_dtype", Value(S("fp8"))},
                {"exp_avg_sq_dtype", Value(S("fp8"))}})
            .empty());  // fp8 (e4m3) moments with a scale (optim/dtype.h)
  CHECK(notice({{"use_precision_aware_optimizer", on}, {"bf16", on}, {"main_params_dtype", Value(S("fp16"))}}).empty());
  CHECK_THAT(notice({{"use_precision_aware_optimizer", on}, {"main_params_dtype", Value(S("fp16"))}}),
             Catch::Contains("--main-params-dtype (fp32 training keeps no main params)"));
  // The gradient buffer: bf16 gradients act under --bf16 (run/grad_format.h); elsewhere the buffer's dtype is named.
  CHECK(notice({{"use_precision_aware_optimizer", on}, {"bf16", on}, {"main_grads_dtype", Value(S("bf16"))}}).empty());
  CHECK(notice({{"bf16", on}, {"grad_reduce_in_bf16", on}}).empty());
  CHECK(notice({{"fp16", on}, {"accumulate_allreduce_grads_in_fp32", on}}).empty());
  CHECK_THAT(notice({{"use_precision_aware_optimizer", on}, {"main_grads_dtype", Value(S("bf16"))}}),
             Catch::Contains("--main-grads-dtype (the gradients are fp32 here: Megatron's gradient buffer is fp32 in "
                             "fp32 training or with --accumulate-allreduce-grads-in-fp32, else the parameters' dtype)"));
  CHECK_THAT(notice({{"fp16", on}, {"grad_reduce_in_bf16", on}}),
             Catch::Contains("--grad-reduce-in-bf16 (the gradients are fp16 here"));
  // fp8 parameters: the estimate counts them, the run keeps the model dtype, and says so.
  CHECK_THAT(notice({{"bf16", on}, {"fp8", Value(S("hybrid"))}, {"fp8_param_gather", on}}),
             Catch::Contains("--fp8-param-gather (fp8 parameters are not modelled"));
}
