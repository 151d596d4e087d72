// Which flags the synthetic run acts on (run/run_scope.h): every flag of the schema is either acted on or has a
// reason, and the notice names exactly the flags the user set that the run does not act on.
#include <catch2/catch.hpp>

#include <filesystem>
#include <set>

#include "../distributed/proc.h"
#include "config/optimizer_config_from_args.h"
#include "config/parse/argparse.h"
#include "config/schema.h"
#include "config/validate/resolve.h"
#include "optim/grad_scaler.h"
#include "run/run_scope.h"
#include "../config/validated_fills.h"

using namespace mr;

namespace {

// The typed view of a namespace built by hand: what validation always fills, filled as it would (the notice reads
// the namespace as given).
Args view(const Namespace& ns) {
  Namespace v = ns;
  mrtest::fill_as_validated(v);
  return Args::from(v);
}

// The notice for flags set as a user sets them (command line); the rest at the schema's defaults.
std::string notice(std::vector<std::pair<std::string, Value>> set) {
  Namespace ns;
  for (auto& [k, v] : set) ns.set(k, v, {Provenance::Kind::Cli, "argv"});
  return run::unacted_notice(ns, view(ns));
}

// Every flag the notice names.
std::set<std::string> named(const Namespace& ns, const Args& a) {
  std::set<std::string> out;
  for (const run::Unacted& u : run::unacted_flags(ns, a))
    for (const std::string& f : u.flags) out.insert(f);
  return out;
}

// A small job resolved as the launcher resolves it (Megatron's parse_args, then its validation chain), with `more`.
Outcome resolved(const std::vector<std::string>& more) {
  std::vector<std::string> words = {"--num-layers", "1", "--hidden-size", "64", "--num-attention-heads", "4",
                                    "--seq-length", "32", "--max-position-embeddings", "32", "--micro-batch-size", "2",
                                    "--global-batch-size", "4", "--train-iters", "4", "--lr", "0.001", "--mock-data",
                                    "--tokenizer-type", "NullTokenizer", "--vocab-size", "128"};
  words.insert(words.end(), more.begin(), more.end());
  Invocation inv;
  inv.env = TargetEnv{};
  inv.env.vars["WORLD_SIZE"] = "1";
  inv.env.vars["RANK"] = "0";
  inv.cli = argv_tokens(words);
  return resolve(Schema::megatron(), inv);
}

}  // namespace

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

TEST_CASE("a flag the user gave stays named when validation rewrites its value", "[run][scope]") {
  // The reviewer's flags: a one-element list unwrapped, dtype names turned into torch's, an enum's name.
  struct Case {
    std::vector<std::string> flags;
    const char* dest;
    const char* flag;
  };
  const std::vector<Case> cases = {
      {{"--num-experts", "4", "--moe-ffn-hidden-size", "32", "--moe-aux-loss-coeff", "0.1"}, "moe_aux_loss_coeff",
       "--moe-aux-loss-coeff"},
      {{"--num-experts", "4", "--moe-ffn-hidden-size", "32", "--moe-router-load-balancing-type", "seq_aux_loss"},
       "moe_router_load_balancing_type", "--moe-router-load-balancing-type"},
      {{"--megatron-fsdp-main-grads-dtype", "fp32", "--megatron-fsdp-main-params-dtype", "bf16"},
       "megatron_fsdp_main_params_dtype", "--megatron-fsdp-main-params-dtype"},
      {{"--mamba-inference-ssm-states-dtype", "fp16"}, "mamba_inference_ssm_states_dtype",
       "--mamba-inference-ssm-states-dtype"},
      {{"--inference-cuda-graph-scope", "none"}, "inference_cuda_graph_scope", "--inference-cuda-graph-scope"},
  };
  for (const Case& c : cases) {
    INFO(c.flag);
    const Outcome out = resolved(c.flags);
    REQUIRE(out.exit_code() == 0);
    const Namespace& ns = out.parsed.ns;
    // Validation did rewrite it (what --explain shows is unchanged: the derivation), and it is still the user's.
    CHECK(ns.provenance(c.dest).kind == Provenance::Kind::Derived);
    CHECK(ns.provenance(c.dest).by_user());
    CHECK(named(ns, Args::from(ns)).count(c.flag) == 1);
    CHECK_THAT(run::unacted_notice(ns, Args::from(ns)), Catch::Contains(c.flag));
  }
}

TEST_CASE("every flag the run does not act on is named when the user gave it, whatever validation derived from it",
          "[run][scope]") {
  // Each flag set by the user, then rewritten as a validation rule rewrites (Context::set: derive).
  size_t walked = 0;
  for (const Arg& a : Schema::megatron().args()) {
    const std::optional<ArgId> id = find_arg(a.dest());
    REQUIRE(id);
    if (run::acts_on(*id)) continue;
    Namespace ns;
    ns.set(a.dest(), default_of(*id), {Provenance::Kind::Cli, "argv[1]"});
    ns.derive(a.dest(), default_of(*id), "a rule");
    const Args args = view(ns);
    if (run::acts_in_this_job(*id, args)) continue;
    INFO(std::string(a.flags[0]));
    CHECK(named(ns, args).count(Schema::megatron().flag_for_dest(a.dest())) == 1);
    ++walked;
  }
  CHECK(walked > 600);
}

TEST_CASE("the corpus: every flag a config sets that validation rewrites, and the run does not act on, is named",
          "[run][scope][corpus]") {
  // Megatron's functional-test configs resolved with our validation chain: the dests the user gave that it derived
  // anew (the rewrites the notice once dropped).
  size_t configs = 0, rewritten = 0;
  for (const auto& f : std::filesystem::directory_iterator(std::string(MR_DATA_DIR) + "/corpus/functional-tests")) {
    if (f.path().extension() != ".yaml") continue;
    Invocation inv;
    inv.env = TargetEnv{};
    inv.env.vars["WORLD_SIZE"] = "8";
    inv.env.vars["RANK"] = "0";
    inv.config.env = [](const std::string& n) -> std::optional<std::string> { return "/placeholder/" + n; };
    inv.config_files = {f.path().string()};
    std::optional<Outcome> out;
    std::optional<Args> args;
    try {
      out = resolve(Schema::megatron(), inv);
      if (out->exit_code() != 0) continue;
      args = Args::from(out->parsed.ns);
    } catch (const std::exception&) {
      continue;  // refused, or not a job the run could start (the launcher refuses it before the notice)
    }
    ++configs;
    const Namespace& ns = out->parsed.ns;
    const std::set<std::string> names = named(ns, *args);
    for (const auto& e : ns.entries()) {
      if (e.prov.kind != Provenance::Kind::Derived || !e.prov.alias.empty() || !e.prov.by_user()) continue;
      const std::optional<ArgId> id = find_arg(e.dest);
      if (!id || run::acts_on(*id) || run::acts_in_this_job(*id, *args)) continue;
      INFO(f.path().filename().string() << ": " << e.dest << " (" << e.prov.describe() << ")");
      CHECK(names.count(Schema::megatron().flag_for_dest(e.dest)) == 1);
      ++rewritten;
    }
  }
  CHECK(configs > 100);
  CHECK(rewritten > 0);
}

TEST_CASE("flags set for nothing in this job are named: the loss scaler's, WSD's, --decoupled-min-lr, loading and "
          "saving flags without --load or --save",
          "[run][scope]") {
  using S = std::string;
  const Value on(true);
  // The loss scale: no scaler in fp32 training without the distributed optimizer; a constant one from --loss-scale
  // in bf16 or under the distributed optimizer; the dynamic one with --fp16 (optim/grad_scaler.h).
  CHECK_THAT(notice({{"loss_scale", Value(1024.0)}, {"initial_loss_scale", Value(1024.0)}, {"hysteresis", Value(5)}}),
             Catch::Contains("--loss-scale (fp32 training without the distributed optimizer has no loss scaler)") &&
                 Catch::Contains("--initial-loss-scale, --hysteresis (the dynamic loss scaler runs with --fp16 only)"));
  CHECK(notice({{"loss_scale", Value(1024.0)}, {"use_distributed_optimizer", on}}).empty());
  CHECK(notice({{"loss_scale", Value(1024.0)}, {"bf16", on}}).empty());
  CHECK(notice({{"fp16", on}, {"initial_loss_scale", Value(1024.0)}, {"min_loss_scale", Value(2.0)},
                {"loss_scale_window", Value(10.0)}, {"hysteresis", Value(5)}})
            .empty());
  CHECK_THAT(notice({{"fp16", on}, {"loss_scale", Value(8.0)}, {"min_loss_scale", Value(2.0)}}),
             Catch::Contains("--min-loss-scale (--loss-scale sets a constant scale: the dynamic loss scaler's options "
                             "are unused)") &&
                 !Catch::Contains("--loss-scale ("));
  // The notice's reading agrees with the scaler the run makes, in every precision.
  for (const char* precision : {"fp32", "fp16", "bf16"})
    for (bool dist : {false, true})
      for (bool constant : {false, true}) {
        std::vector<std::pair<S, Value>> set = {{"use_distributed_optimizer", Value(dist)}, {"hysteresis", Value(5)}};
        if (S(precision) != "fp32") set.push_back({precision, on});
        if (constant) set.push_back({"loss_scale", Value(64.0)});
        Namespace ns;
        for (auto& [k, v] : set) ns.set(k, v, {Provenance::Kind::Cli, "argv"});
        const Args args = view(ns);
        const std::optional<optim::GradScaler> scaler = optim::make_grad_scaler(optimizer_config_from(args));
        const std::set<S> n = named(ns, args);
        INFO(precision << (dist ? " distributed" : "") << (constant ? " --loss-scale" : ""));
        CHECK(n.count("--hysteresis") == (scaler && scaler->is_dynamic() ? 0u : 1u));
        if (constant) CHECK(n.count("--loss-scale") == (scaler && !scaler->is_dynamic() ? 0u : 1u));
      }
  // The schedule.
  CHECK_THAT(notice({{"lr_decay_style", Value(S("cosine"))}, {"lr_wsd_decay_iters", Value(2)},
                     {"lr_wsd_decay_style", Value(S("linear"))}}),
             Catch::Contains("--lr-wsd-decay-style, --lr-wsd-decay-iters (only --lr-decay-style WSD uses it)"));
  CHECK(notice({{"lr_decay_style", Value(S("WSD"))}, {"lr_wsd_decay_iters", Value(2)}}).empty());
  // WSD's decay length: iterations in an iteration-based run, samples in a sample-based one (review: worker 5).
  CHECK_THAT(notice({{"train_iters", Value(10)}, {"lr_decay_style", Value(S("WSD"))}, {"lr_wsd_decay_iters", Value(2)},
                     {"lr_wsd_decay_samples", Value(10)}}),
             Catch::Contains("--lr-wsd-decay-samples (an iteration-based run (--train-iters) takes WSD's decay from "
                             "--lr-wsd-decay-iters)") && !Catch::Contains("--lr-wsd-decay-iters ("));
  CHECK_THAT(notice({{"train_samples", Value(40)}, {"lr_decay_style", Value(S("WSD"))}, {"lr_wsd_decay_iters", Value(2)},
                     {"lr_wsd_decay_samples", Value(16)}}),
             Catch::Contains("--lr-wsd-decay-iters (a sample-based run (--train-samples) takes WSD's decay from "
                             "--lr-wsd-decay-samples)") && !Catch::Contains("--lr-wsd-decay-samples ("));
  // A constant schedule decays nothing.
  CHECK_THAT(notice({{"lr_decay_style", Value(S("constant"))}, {"min_lr", Value(0.0001)}, {"lr_decay_iters", Value(10)}}),
             Catch::Contains("--lr-decay-iters, --min-lr (--lr-decay-style constant keeps --lr after the warmup: no decay)"));
  CHECK(notice({{"lr_decay_style", Value(S("linear"))}, {"min_lr", Value(0.0001)}, {"lr_decay_iters", Value(10)}}).empty());
  // ... but the decay length sets a --lr-warmup-fraction's warmup (review: today31 4).
  CHECK_THAT(notice({{"lr_decay_style", Value(S("constant"))}, {"min_lr", Value(0.0001)}, {"lr_decay_iters", Value(10)},
                     {"lr_warmup_fraction", Value(0.5)}}),
             Catch::Contains("--min-lr (--lr-decay-style constant") && !Catch::Contains("--lr-decay-iters"));
  // Weight decay of norms the model does not have.
  CHECK_THAT(notice({{"apply_wd_to_qk_layernorm", on}, {"rmsnorm_weight_decay_mult", Value(0.5)}}),
             Catch::Contains("--apply-wd-to-qk-layernorm (the model has no q/k norms without --qk-layernorm)") &&
                 Catch::Contains("--rmsnorm-weight-decay-mult (the model's norms are not RMSNorm (--normalization))"));
  CHECK(notice({{"apply_wd_to_qk_layernorm", on}, {"qk_layernorm", on}, {"normalization", Value(S("RMSNorm"))},
                {"rmsnorm_weight_decay_mult", Value(0.5)}})
            .empty());
  // --muon-use-syrk: Emerging-Optimizers takes the SYRK step under "medium" precision only.
  CHECK_THAT(notice({{"optimizer", Value(S("muon"))}, {"muon_fp32_matmul_prec", Value(S("high"))}, {"muon_use_syrk", on}}),
             Catch::Contains("--muon-use-syrk (used with --muon-fp32-matmul-prec medium only"));
  CHECK(notice({{"optimizer", Value(S("muon"))}, {"muon_use_syrk", on}}).empty());  // medium is the default
  // --muon-tp-mode: how a matrix split over tensor parallelism is orthogonalised; at TP 1 none is (review worker37
  // #3: it was not named). With TP 2, or expert TP 2 in a MoE model, it acts.
  CHECK_THAT(notice({{"optimizer", Value(S("muon"))}, {"muon_tp_mode", Value(S("distributed"))}}),
             Catch::Contains("--muon-tp-mode (no matrix is split over tensor parallelism (--tensor-model-parallel-size "
                             "1): every mode is the whole-matrix Newton-Schulz)"));
  CHECK(notice({{"optimizer", Value(S("muon"))}, {"muon_tp_mode", Value(S("distributed"))},
                {"tensor_model_parallel_size", Value(int64_t{2})}})
            .empty());
  CHECK(notice({{"optimizer", Value(S("muon"))}, {"muon_tp_mode", Value(S("blockwise"))}, {"num_experts", Value(int64_t{4})},
                {"expert_tensor_parallel_size", Value(int64_t{2})}})
            .empty());
  CHECK_THAT(notice({{"decoupled_min_lr", Value(0.001)}}),
             Catch::Contains("--decoupled-min-lr (not used without --decoupled-lr)"));
  CHECK(notice({{"decoupled_lr", Value(0.01)}, {"decoupled_min_lr", Value(0.001)}}).empty());
  // Checkpoints.
  const S no_load = notice({{"override_opt_param_scheduler", on}, {"finetune", on}, {"no_load_optim", on},
                            {"no_load_rng", on}, {"exit_on_missing_checkpoint", on}});
  CHECK_THAT(no_load, Catch::Contains("--override-opt_param-scheduler, --finetune, --exit-on-missing-checkpoint, "
                                      "--no-load-optim, --no-load-rng (not used without --load)"));
  CHECK_THAT(notice({{"use_checkpoint_opt_param_scheduler", on}}),
             Catch::Contains("--use-checkpoint-opt_param-scheduler (not used without --load)"));
  CHECK(notice({{"load", Value(S("/ckpt"))}, {"finetune", on}, {"no_load_rng", on}}).empty());
  CHECK_THAT(notice({{"non_persistent_save_interval", Value(1)}, {"no_save_optim", on}}),
             Catch::Contains("(not used without --save)") && Catch::Contains("--non-persistent-save-interval") &&
                 Catch::Contains("--no-save-optim"));
  CHECK(notice({{"save", Value(S("/ckpt"))}, {"no_save_optim", on}}).empty());
  // The flags that act on a load or a save only, in the one notice (validation checks --save-retain-interval against
  // --save-interval only with --save).
  const S unused = notice({{"ckpt_step", Value(7)}, {"save_interval", Value(1)}, {"save_retain_interval", Value(3)},
                           {"override_ckpt_iteration", Value(5)}, {"load_main_params_from_ckpt", on},
                           {"verify_integrity", on}});
  CHECK_THAT(unused, Catch::Contains("--load-main-params-from-ckpt, --ckpt-step, --override-ckpt-iteration (not used "
                                     "without --load)") &&
                         Catch::Contains("--save-interval, --save-retain-interval (not used without --save)") &&
                         Catch::Contains("--verify-integrity (checks nothing without --load or --save)"));
  CHECK(notice({{"ckpt_step", Value(0)}}).empty());  // Megatron's "not given"
  CHECK(notice({{"load", Value(S("/ckpt"))}, {"ckpt_step", Value(7)}, {"override_ckpt_iteration", Value(5)},
                {"load_main_params_from_ckpt", on}, {"verify_integrity", on}})
            .empty());
  CHECK(notice({{"save", Value(S("/ckpt"))}, {"save_interval", Value(1)}, {"save_retain_interval", Value(3)},
                {"verify_integrity", on}})
            .empty());
  // Only what the user gave: the same values from the schema's defaults or derived by validation are not named.
  Namespace ns;
  ns.set("hysteresis", Value(5), {});
  ns.set("no_load_optim", Value(true), {Provenance::Kind::Derived, "--skip-train"});
  CHECK(run::unacted_notice(ns, view(ns)).empty());
}

TEST_CASE("--seq-length and --fp8-format/--fp8-recipe are named only where they change nothing", "[run][scope]") {
  using S = std::string;
  const Value on(true);
  // --step-batch-size-schedule's thresholds are tokens divided by --seq-length.
  CHECK_THAT(notice({{"seq_length", Value(32)}}), Catch::Contains("--seq-length (no model forward/backward"));
  CHECK(notice({{"seq_length", Value(32)}, {"step_batch_size_schedule", Value(S("0:4 512:8"))}}).empty());
  // fp8 training (not the delayed recipe) stops Megatron's Adam keeping the masters as remainders.
  const std::vector<std::pair<S, Value>> pao = {{"bf16", on}, {"use_precision_aware_optimizer", on},
                                                {"use_distributed_optimizer", on}};
  auto with = [&](std::vector<std::pair<S, Value>> more) {
    more.insert(more.end(), pao.begin(), pao.end());
    return notice(more);
  };
  CHECK(with({{"fp8", Value(S("hybrid"))}, {"fp8_recipe", Value(S("tensorwise"))}}).empty());
  const S delayed = with({{"fp8", Value(S("hybrid"))}, {"fp8_recipe", Value(S("delayed"))}});
  CHECK_THAT(delayed, Catch::Contains("--fp8-format") && Catch::Contains("--fp8-recipe"));
  // No remainders to keep without the precision-aware optimizer: the flags change nothing.
  CHECK_THAT(notice({{"bf16", on}, {"fp8", Value(S("hybrid"))}, {"fp8_recipe", Value(S("tensorwise"))}}),
             Catch::Contains("--fp8-format") && Catch::Contains("--fp8-recipe"));
  // An older Transformer Engine stores no remainders either.
  Namespace ns;
  for (auto& [k, v] : pao) ns.set(k, v, {Provenance::Kind::Cli, "argv"});
  ns.set("fp8", Value(S("hybrid")), {Provenance::Kind::Cli, "argv"});
  ns.set("fp8_recipe", Value(S("tensorwise")), {Provenance::Kind::Cli, "argv"});
  TargetEnv old;
  old.te_version = "2.0.0";
  CHECK_THAT(run::unacted_notice(ns, view(ns), old), Catch::Contains("--fp8-format, --fp8-recipe ("));
  CHECK(run::unacted_notice(ns, view(ns)).empty());
}

TEST_CASE("--muon-fp32-matmul-prec low is named: torch ignores it", "[run][scope]") {
  using S = std::string;
  CHECK_THAT(notice({{"optimizer", Value(S("muon"))}, {"muon_fp32_matmul_prec", Value(S("low"))}}),
             Catch::Contains("--muon-fp32-matmul-prec ('low' is no torch precision"));
  CHECK(notice({{"optimizer", Value(S("muon"))}, {"muon_fp32_matmul_prec", Value(S("high"))}}).empty());
}

TEST_CASE("--embedding-init-method-std and --init-method-std are acted on", "[run][scope]") {
  CHECK(notice({{"embedding_init_method_std", Value(0.5)}, {"init_method_std", Value(0.0)}}).empty());
}

TEST_CASE("--ckpt-format and --auto-detect-ckpt-format are named only where they change nothing; "
          "--ckpt-convert-save alone has no effect in Megatron either", "[run][scope][checkpoint]") {
  using S = std::string;
  const Value on(true);
  // A load compares TP and PP with a torch checkpoint's (Megatron's check_checkpoint_args): acted on.
  CHECK(notice({{"ckpt_format", Value(S("torch"))}, {"load", Value(S("ck"))}}).empty());
  // On any load the format decides whether Megatron's torch_dist load prints "(TP, PP) mismatch after resume"
  // (tp_pp_mismatch_notice): torch_dist and fsdp_dtensor print it, torch_dcp does not, nor a fine-tune's torch.
  for (const char* f : {"torch_dist", "fsdp_dtensor", "torch_dcp"}) {
    INFO(f);
    CHECK(notice({{"ckpt_format", Value(S(f))}, {"load", Value(S("ck"))}}).empty());
    CHECK(notice({{"ckpt_format", Value(S(f))}, {"pretrained_checkpoint", Value(S("ck"))}}).empty());
  }
  CHECK(notice({{"ckpt_format", Value(S("torch"))}, {"load", Value(S("ck"))}, {"finetune", on}}).empty());
  // --auto-detect-ckpt-format prints the mismatch notice under torch or torch_dcp only (torch_dist, the default,
  // prints it anyway); with it, a format other than a torch load's comparison changes nothing.
  CHECK(notice({{"ckpt_format", Value(S("torch"))}, {"auto_detect_ckpt_format", on}, {"load", Value(S("ck"))}}).empty());
  const S no_checkpoint = " (not modelled by the synthetic run's checkpoints";
  // torch_dcp with it: the flag acts (the notice is printed because of it), the format does not.
  const S dcp = notice({{"ckpt_format", Value(S("torch_dcp"))}, {"auto_detect_ckpt_format", on}, {"load", Value(S("ck"))}});
  CHECK_THAT(dcp, Catch::Contains("--ckpt-format (the synthetic run writes"));
  CHECK_THAT(dcp, !Catch::Contains("--auto-detect-ckpt-format" + no_checkpoint));
  CHECK_THAT(notice({{"auto_detect_ckpt_format", on}, {"load", Value(S("ck"))}}),
             Catch::Contains("does not act on --auto-detect-ckpt-format" + no_checkpoint));
  CHECK_THAT(notice({{"ckpt_format", Value(S("fsdp_dtensor"))}, {"auto_detect_ckpt_format", on},
                     {"load", Value(S("ck"))}}),
             Catch::Contains("--ckpt-format (the synthetic run writes") &&
                 Catch::Contains("--auto-detect-ckpt-format" + no_checkpoint));
  CHECK_THAT(notice({{"ckpt_format", Value(S("torch_dcp"))}, {"auto_detect_ckpt_format", on},
                     {"pretrained_checkpoint", Value(S("ck"))}}),
             Catch::Contains("does not act on --ckpt-format (the synthetic run writes"));
  // Without a load: both named, saying what the format does on a load.
  for (const char* f : {"torch", "torch_dist", "torch_dcp"}) {
    INFO(f);
    const S n = notice({{"ckpt_format", Value(S(f))}, {"auto_detect_ckpt_format", on}});
    CHECK_THAT(n, Catch::Contains("--ckpt-format (the synthetic run writes its own format whatever the value, "
                                  "safetensors + JSON per rank; only a load depends on it: torch compares TP and PP "
                                  "with the checkpoint's, and torch or torch_dcp without --auto-detect-ckpt-format "
                                  "print no (TP, PP) mismatch notice (docs/checkpoints.md))"));
    CHECK_THAT(n, Catch::Contains("--auto-detect-ckpt-format" + no_checkpoint));
  }
  // Megatron reads --ckpt-convert-save only under --ckpt-convert-format (refused by the run: init.training-run).
  const S alone = notice({{"ckpt_convert_save", Value(S("conv"))}});
  CHECK_THAT(alone, Catch::Contains("--ckpt-convert-save (Megatron reads it only with --ckpt-convert-format, to "
                                    "convert and exit; without that flag it has no effect in Megatron either)"));
  CHECK_THAT(alone, !Catch::Contains("not modelled"));
}
