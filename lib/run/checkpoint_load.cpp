// Checkpointer::load (run/checkpoint.h): the checkpoint --load (or --pretrained-checkpoint) names, located,
// announced and verified, then read in the steps of LoadSteps, every rank agreeing on the outcome.
#include "run/host_collectives.h"
#include "run/checkpoint.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <new>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iostream>
#include <optional>
#include <sstream>
#include <set>
#include <thread>
#include <vector>

#include "config/schema.h"
#include "run/atomic_dir.h"
#include "run/checkpoint_args.h"
#include "run/checkpoint_format.h"
#include "run/checkpoint_integrity.h"
#include "run/checkpoint_io.h"
#include "run/checkpoint_locate.h"
#include "run/checkpoint_resume_args.h"
#include "run/checkpoint_shared.h"
#include "run/frozen_layers.h"
#include "run/run_scope.h"
#include "run/tokenizer_vocab.h"
#include "run/tracker_agreement.h"
#include "util/exit_signal.h"
#include "util/rule_id.h"
#include "util/text.h"

namespace mr::run {

using namespace ckpt_detail;

namespace {

optim::ScheduleState sched_from(const Value& v, const std::string& path) {
  auto num = [&](const char* k) -> const Value& {
    const Value* x = field_of(v, k);
    if (!x || !x->is_number()) throw CheckpointError(kCkptCorrupt, path + ": opt_param_scheduler." + k + " is not a number");
    return *x;
  };
  // A step count the scheduler adds to or subtracts from: at most kMaxCheckpointCount either way (the scheduler
  // refuses a negative or empty one itself, naming it).
  auto count = [&](const Value& x, const char* k) -> int64_t {
    const int64_t n = x.as_int();
    if (n > kMaxCheckpointCount || n < -kMaxCheckpointCount)
      throw CheckpointError(kCkptCorrupt, path + ": opt_param_scheduler: \"" + k + "\" is " + std::to_string(n) +
                                              ", past the limit 2^62");
    return n;
  };
  optim::ScheduleState s;
  try {
    s.max_lr = num("max_lr").as_float();
    s.min_lr = num("min_lr").as_float();
    s.lr_warmup_steps = num("lr_warmup_steps").as_float();
    s.lr_decay_steps = count(num("lr_decay_steps"), "lr_decay_steps");
    s.num_steps = count(num("num_steps"), "num_steps");
    const Value* style = field_of(v, "lr_decay_style");
    if (!style || !style->is_str()) throw CheckpointError(kCkptCorrupt, path + ": opt_param_scheduler.lr_decay_style");
    s.lr_decay_style = optim::lr_decay_style_from_string(style->as_str());
    if (const Value* x = field_of(v, "start_wd"); x && x->is_number()) s.start_wd = x->as_float();
    if (const Value* x = field_of(v, "end_wd"); x && x->is_number()) s.end_wd = x->as_float();
    if (const Value* x = field_of(v, "wd_incr_steps"); x && x->is_int()) s.wd_incr_steps = count(*x, "wd_incr_steps");
    if (const Value* x = field_of(v, "wd_incr_style"); x && x->is_str()) s.wd_incr_style = optim::wd_incr_style_from_string(x->as_str());
  } catch (const CheckpointError&) {
    throw;
  } catch (const std::exception& e) {
    throw CheckpointError(kCkptCorrupt, path + ": opt_param_scheduler: " + abbreviate(e.what()));
  }
  return s;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s;
  for (int64_t x : shape) s += (s.empty() ? "" : ", ") + std::to_string(x);
  return "[" + s + "]";
}

// Why the word embedding or output layer `q` has `there` rows in the checkpoint and another number here when both
// pad this run's vocabulary: Megatron pads it to a multiple of --make-vocab-size-divisible-by x TP, so another TP
// (or divisor) pads it otherwise; names a divisor that gives the checkpoint's rows under this TP. Empty for any
// other shape difference.
std::string padded_vocab_differs(const Args& a, RunContext& c, const RankMeta& m, const ParamSpec& q,
                                 const std::vector<int64_t>& g) {
  const auto ends_with = [&](std::string_view tail) {
    return q.key.size() >= tail.size() && q.key.compare(q.key.size() - tail.size(), tail.size(), tail) == 0;
  };
  if (!ends_with("word_embeddings.weight") && !ends_with("output_layer.weight")) return {};
  const int64_t here = c.plan.padded_vocab_size;
  if (q.full_shape.empty() || q.full_shape[0] != here || g.size() != q.full_shape.size() ||
      !std::equal(g.begin() + 1, g.end(), q.full_shape.begin() + 1))
    return {};
  const int64_t vocab = tokenizer_vocab_size(a), there = g[0], d = a.make_vocab_size_divisible_by, tp = c.tp.size();
  if (there < vocab || vocab < 1 || d < 1) return {};  // fewer rows than the vocabulary: not a padding of it
  std::string saved;
  if (const Value* st = field_of(m.layout, "tp"); st && st->is_int()) saved += "TP=" + std::to_string(st->as_int());
  if (const Value* sd = saved_arg(m.args, ArgId::make_vocab_size_divisible_by); sd && sd->is_int() && sd->as_int() != d)
    saved += (saved.empty() ? "" : ", ") + std::string("--make-vocab-size-divisible-by ") + std::to_string(sd->as_int());
  std::string s = "the padded vocabulary differs: " + std::to_string(there) + " rows in the checkpoint" +
                  (saved.empty() ? "" : " (saved with " + saved + ")") + ", " + std::to_string(here) +
                  " here (the vocabulary of " + std::to_string(vocab) + " rounded up to a multiple of "
                  "--make-vocab-size-divisible-by " + std::to_string(d) + " x TP " + std::to_string(tp) +
                  ", as Megatron pads it)";
  // A divisor that pads the vocabulary to the checkpoint's rows under this TP: the largest divisor of this run's
  // --make-vocab-size-divisible-by, else the smallest value that does.
  int64_t fit = 0;
  for (int64_t k = d; k >= 1 && !fit; --k)
    if (d % k == 0 && padded_vocab_size(vocab, k, tp) == there) fit = k;
  if (there % tp == 0)
    for (int64_t k = 1; k <= there / tp && !fit; ++k)
      if (padded_vocab_size(vocab, k, tp) == there) fit = k;
  if (!fit)
    return s + "; no --make-vocab-size-divisible-by pads " + std::to_string(vocab) + " to " + std::to_string(there) +
           " rows under TP " + std::to_string(tp) + ": load it under the TP it was saved with";
  s += "; --make-vocab-size-divisible-by " + std::to_string(fit) + " pads it to " + std::to_string(there) +
       " under TP " + std::to_string(tp) + " and loads it";
  if (a.vocab_file && !a.finetune)
    s += " (with --vocab-file, Megatron's check_checkpoint_args also compares --make-vocab-size-divisible-by with "
         "the checkpoint's: only a --finetune load takes another)";
  return s;
}

// No checkpoint under --load: rank 0 says so (why, where it can tell) and the run starts from random; with
// --exit-on-missing-checkpoint, CheckpointError checkpoint.missing.
void no_checkpoint_found(const Args& a, bool rank0, std::ostream& log_, const std::string& prefix_) {
  std::error_code ec;  // a tracker that is there but no file (Megatron's os.path.isfile) is named so
  const bool not_a_file = std::filesystem::exists(tracker_path(*a.load), ec);
  // --load naming a file (a checkpoint's file, say, not its directory) is said: the tracker cannot be in it.
  const bool load_is_file = std::filesystem::is_regular_file(*a.load, ec);
  if (rank0)
    log_ << prefix_ << "WARNING: could not find the metadata file " << tracker_path(*a.load)
         << (not_a_file ? " (it is there, but not a regular file)"
             : load_is_file ? " (--load " + shown_path(*a.load) + " is a file, not a checkpoint directory)"
                            : iteration_dir_hint(*a.load))
         << "\n"
         << prefix_ << "    will not load any checkpoints and will start from random" << std::endl;
  if (a.exit_on_missing_checkpoint)
    throw CheckpointError(kCkptMissing, "--exit-on-missing-checkpoint is set but no checkpoint was found under --load " +
                                            shown_path(*a.load) + " (no " + shown_path(tracker_path(*a.load)) + ")");
}

// Before any file of the checkpoint `found` is read: rank 0 names it and, with --verify-integrity, checks its files;
// Megatron's own checkpoint is refused as what it is.
void announce_and_verify(const Args& a, bool rank0, const std::optional<Found>& found, std::ostream& log_,
                         const std::string& prefix_) {
  // Megatron's line when --load holds no checkpoint and --pretrained-checkpoint does (run/checkpoint_locate.h).
  if (rank0 && found->pretrained)
    log_ << prefix_ << "Checkpoint file not found in load directory " << (a.load ? shown_path(*a.load) : "None")
         << " attempting to finetune with checkpoint in " << shown_path(found->base)
         << " (--pretrained-checkpoint: weights only, from iteration 0, as --finetune)" << std::endl;
  if (rank0) log_ << prefix_ << " loading checkpoint from " << found->base << " at iteration " << found->iteration << std::endl;
  // --verify-integrity: rank 0 checks every file against the manifest before anything is read (Megatron's
  // verify_integrity_manifest); its refusal reaches every rank through the verdict below.
  if (a.verify_integrity && rank0) {
    const size_t n = verify_integrity_manifest(found->dir);
    log_ << prefix_ << "  checkpoint integrity verified: " << n << " file(s) OK in " << found->dir << std::endl;
  }
  // Megatron's own checkpoint (torch_dist, torch) is not a damaged one of ours: said as what it is.
  if (const std::string kind = megatron_checkpoint_kind(found->dir); !kind.empty())
    throw megatron_checkpoint_refusal(found->dir, kind, found->flag_words());
}

// --freeze-all-layers: why its load resumes at iteration 0 where it does (Megatron's read_frozen_resume_iteration
// returns 0 without --save, without a tracker there, and for a tracker that says 'release'; or
// --override-ckpt-iteration 0). The tracker is read through `trackers` after the load read it (no error then).
std::string frozen_zero_words(const Args& a, const TrackerSource& trackers) {
  if (!a.freeze_all_layers) return "";
  if (a.override_ckpt_iteration) return "--override-ckpt-iteration " + std::to_string(*a.override_ckpt_iteration);
  if (!a.save) return "--save not given";
  const std::optional<TrackerValue> t = trackers.read(*a.save);
  const std::string save = "--save " + shown_path(*a.save);
  if (!t) return save + " has no tracker";
  if (t->release)
    return save + "'s tracker says release: iteration 0 (Megatron's read_frozen_resume_iteration returns 0 for it)";
  return save + "'s tracker says " + std::to_string(t->iteration);
}

// One load of the located checkpoint `found` (read through `r`), as the steps Checkpointer::load calls in this order:
// the arguments that fix the model, its parameters, the optimizer state, (the group hyper-parameters,
// take_saved_hyper), the buffers, the scheduler and the loss scaler, the progress to resume from, and rank 0's line.
struct LoadSteps {
  LoadSteps(const Args& args, RunContext& c, std::ostream& log, const std::string& prefix, const Found& f,
            CheckpointReader& reader, int64_t given_seed, std::optional<int64_t> from_save,
            std::string frozen_zero)
      : frozen_zero_(std::move(frozen_zero)),
        a(args),
        c_(c),
        log_(log),
        prefix_(prefix),
        rank0(c.rt.rank() == 0),
        found(&f),
        r(reader),
        m(reader.meta()),
        as_finetune(args.finetune || f.pretrained),
        finetune(as_finetune || f.release),
        saved_optim(saved_with_optimizer(m)),
        with_opt(!finetune && !args.no_load_optim.value_or(false) && saved_optim),
        given_seed_(given_seed),
        from_save_(from_save) {}

  // Whether the checkpoint holds optimizer state: not one saved with --no-save-optim.
  static bool saved_with_optimizer(const RankMeta& m) {
    const Value* nso = saved_arg(m.args, ArgId::no_save_optim);
    return !(nso && nso->truthy());
  }

  // How a message names the checkpoint: the flag it came from and its iteration's directory.
  std::string where() const { return (found->pretrained ? "--pretrained-checkpoint " : "--load ") + found->dir; }

  void check_model_args() {
    // Megatron's check_checkpoint_args on every load but a fine-tune (--finetune, or --pretrained-checkpoint in
    // place of --load): the arguments that fix the model must be the checkpoint's (another head count leaves every
    // shape the same). A release checkpoint is checked too.
    if (as_finetune) return;
    std::vector<ArgId> fixed = {ArgId::num_layers, ArgId::hidden_size, ArgId::num_attention_heads,
                                ArgId::add_position_embedding};
    if (a.vocab_file)
      fixed.insert(fixed.end(), {ArgId::max_position_embeddings, ArgId::make_vocab_size_divisible_by, ArgId::tokenizer_type});
    for (ArgId id : fixed) {
      const Value here = a.value(id);
      const Value saved = saved_value(id, id == ArgId::add_position_embedding ? Value(true) : Value());
      if (!(saved == here))
        throw CheckpointError(kCkptModelMismatch, mismatch_text(id, saved, here) +
                                                      " (Megatron's check_checkpoint_args; --finetune loads the weights anyway)");
    }
    // Its conditional comparisons, in its order (checkpoint_version 3.0, as megatron-run's checkpoints count).
    struct Conditional {
      ArgId id;
      const char* why;
    };
    std::vector<Conditional> conditional;
    if (a.data_parallel_random_init)
      conditional.push_back({ArgId::data_parallel_random_init,
                             "with --data-parallel-random-init; --finetune loads the weights anyway"});
    if (a.phase_transition_iterations && !a.phase_transition_iterations->empty())
      conditional.push_back({ArgId::global_batch_size,
                             "with --phase-transition-iterations: the global batch size must stay fixed across the "
                             "phases; --finetune loads the weights anyway"});
    if (!a.use_dist_ckpt) {
      // --ckpt-format torch: Megatron's torch checkpoints load under the (TP, PP) they were saved with only.
      static const char* kTorch =
          "with --ckpt-format torch, whose checkpoints Megatron loads under the TP and PP sizes they were saved with "
          "only; megatron-run's own checkpoint would load under this layout, as a Megatron torch_dist checkpoint "
          "(the default --ckpt-format) would: leave --ckpt-format torch out to reshard, or keep the checkpoint's "
          "sizes";
      conditional.push_back({ArgId::tensor_model_parallel_size, kTorch});
      conditional.push_back({ArgId::pipeline_model_parallel_size, kTorch});
    }
    for (const Conditional& k : conditional) {
      const Value here = a.value(k.id);
      const Value saved = saved_value(k.id, Value());
      if (!(saved == here))
        throw CheckpointError(kCkptArgsMismatch, mismatch_text(k.id, saved, here) +
                                                     " (Megatron's check_checkpoint_args compares it " + k.why + ")");
    }
  }

  // The checkpoint's saved value of `id` (its "args"), `absent` where it has none.
  Value saved_value(ArgId id, Value absent) const {
    const Value* there = saved_arg(m.args, id);
    return there ? *there : absent;
  }

  // Megatron's words for a comparison that failed.
  std::string mismatch_text(ArgId id, const Value& saved, const Value& here) const {
    return where() + ": " + std::string(dest_of(id)) + " value from checkpoint (" + abbreviate(saved.py_str()) +
           ") is not equal to the input argument value (" + here.py_str() + ")";
  }

  void check_parameters() {
    // The first parameter of this rank's model that the checkpoint lacks or shapes differently, then the
    // first parameter of the checkpoint the model does not have.
    for (const ParamSpec& q : c_.plan.params) {
      const std::vector<int64_t> g = r.global_shape(q.key);
      if (g.empty())
        throw CheckpointError(kCkptModelMismatch, where() + ": the checkpoint is of another model: it has no parameter " + q.key);
      if (g != q.full_shape) {
        if (std::string why = padded_vocab_differs(a, c_, m, q, g); !why.empty())
          throw CheckpointError(kCkptModelMismatch, where() + ": parameter " + q.key + ": " + why);
        throw CheckpointError(kCkptModelMismatch, where() + ": the checkpoint is of another model: parameter " + q.key +
                                                      " has shape " + shape_text(g) + " there and " + shape_text(q.full_shape) + " here");
      }
    }
    std::set<std::string> model_keys;
    const int64_t ep = c_.rt.group("ep").size();
    for (int64_t pr = 0; pr < c_.pp.size(); ++pr)
      for (int64_t er = 0; er < ep; ++er) {
        RankCoord at{0, c_.tp.size(), pr, c_.pp.size(), ep, er, 0, c_.etp.size()};
        for (const ParamSpec& q : plan_gpt_model(a, at).params) model_keys.insert(q.key);
      }
    for (const std::string& k : r.param_keys())
      if (!model_keys.count(k))
        throw CheckpointError(kCkptModelMismatch, where() + ": the checkpoint is of another model: it has a parameter " + k +
                                                      " that this model does not");
  }

  void check_optimizer_state() {
    // Then the optimizer's (Megatron checks the arguments before it reads any state: a checkpoint of another
    // model is named as such, not as a missing optimizer state of a parameter it does not have).
    // A --no-save-optim checkpoint has neither optimizer state nor scheduler: Megatron's load_checkpoint, unless
    // --no-load-optim or --finetune (or a release checkpoint), reads state_dict['optimizer'] and stops on its
    // KeyError ("Unable to load optimizer from checkpoint ... exiting").
    if (!finetune && !a.no_load_optim.value_or(false) && !saved_optim)
      throw CheckpointError(kCkptOptimizerMismatch,
                            where() + ": the checkpoint was saved with --no-save-optim: it holds no "
                            "optimizer state and no learning-rate scheduler, and Megatron stops here (\"Unable to "
                            "load optimizer from checkpoint\"); give --no-load-optim (its weights and iteration, a "
                            "fresh optimizer and scheduler) or --finetune (its weights only, from iteration 0)");
    if (with_opt && m.optimizer != c_.optimizer.name)
      throw CheckpointError(kCkptOptimizerMismatch,
                            where() + ": the checkpoint holds " + m.optimizer + " state, this run steps --optimizer " +
                                std::string(c_.optimizer.name) + " (--no-load-optim or --finetune loads the weights only)");
    // The optimizer state this run keeps must be there (a lion checkpoint saved before the run stepped lion's
    // non-matrix parameters with Adam has no exp_avg_sq): asked of the first parameter that keeps it.
    if (with_opt && !c_.plan.params.empty())
      for (const std::string& kind : buffer_kinds(c_.buf, true)) {
        size_t k = 0;
        if (kind == kExpAvgSqKind)
          while (k + 1 < c_.plan.params.size() && !c_.buf.keeps_sq[k]) ++k;
        if ((kind == kExpAvgKind || kind == kExpAvgSqKind) && !r.has(c_.plan.params[k].key, kind))
          throw CheckpointError(kCkptOptimizerMismatch,
                                where() + ": the checkpoint holds no " + kind + " state, which --optimizer " +
                                    std::string(c_.optimizer.name) + " keeps here for " + c_.plan.params[k].key +
                                    " (a checkpoint of another --muon-scalar-optimizer, or a lion checkpoint from "
                                    "before megatron-run stepped lion's norms, biases and embeddings with Adam, has "
                                    "none; --no-load-optim or --finetune loads the weights only)");
      }
    // Megatron initializes main params from a checkpoint in its distributed optimizer only: the other one's
    // Float16OptimizerWithFloat16Params asserts ("Initialize main params from state dict is not supported").
    if (a.load_main_params_from_ckpt && !with_opt && c_.buf.has_main && !c_.cfg.use_distributed_optimizer)
      throw CheckpointError(kCkptUnsupported,
                            "--load-main-params-from-ckpt needs --use-distributed-optimizer in " + dtype_name(c_) +
                                " training: Megatron's optimizer without it cannot initialize main params from a "
                                "checkpoint (it fails with \"Initialize main params from state dict is not supported\")");
  }

  void read_buffers() {
    // The buffers' values on the host (the CPU backend's storage; the CUDA backend copies them there and back).
    c_.backend->to_host(c_.buf);
    r.load_buffers(c_.plan, c_.buf, place_of(c_), with_opt);
    FlatBuffers& b = c_.buf;
    if (!with_opt) {
      // Megatron's reload_model_params: the main params from the loaded model params; fresh optimizer state.
      // With --load-main-params-from-ckpt (Megatron's distributed optimizer only, and not the precision-aware
      // one, which keeps its own masters) from the checkpoint's stored params at their stored precision.
      if (a.load_main_params_from_ckpt && b.has_main && c_.cfg.use_distributed_optimizer && !c_.cfg.use_precision_aware_optimizer)
        r.load_main_from_stored_params(c_.plan, b, place_of(c_));
      else
        b.main_from_model(c_.plan);
    }
    c_.backend->from_host(c_.buf);
  }

  // The learning-rate scheduler, the loss scaler and the optimizer's step count (a load with the optimizer state).
  void restore_scheduler_and_scaler(Progress& p) {
    const std::string path = found->dir + "/" + rank_stem(0) + ".json";
    if (!m.scheduler.is_none()) {
      try {
        c_.schedule->load_state(sched_from(m.scheduler, path));
      } catch (const CheckpointError&) {
        throw;
      } catch (const std::exception& e) {
        throw CheckpointError(kCkptSchedulerMismatch, where() + ": the learning-rate schedule: " + e.what());
      }
    }
    if (c_.scaler && m.grad_scaler.is_object()) {
      const Value* s = field_of(m.grad_scaler, "scale");
      const Value* g = field_of(m.grad_scaler, "growth_tracker");
      const Value* h = field_of(m.grad_scaler, "hysteresis_tracker");
      if (!s || !s->is_number() || !g || !g->is_int() || !h || !h->is_int())
        throw CheckpointError(kCkptCorrupt, path + ": grad_scaler is not {scale, growth_tracker, hysteresis_tracker}");
      // A scale no scaler can reach (the scaler keeps it finite and at least --min-loss-scale): every
      // iteration after the load would be skipped, or the gradients scaled by a negative number.
      const double sv = s->as_float();
      // The hysteresis tracker goes below 0 in a run with more overflows in a row than --hysteresis (Megatron's
      // DynamicGradScaler counts it down on every overflow and resets it only on growth), so a saved one may be
      // negative; only a magnitude the next updates would wrap is refused.
      const int64_t gv = g->as_int(), hv = h->as_int();
      if (!std::isfinite(sv) || sv <= 0 || sv > std::numeric_limits<float>::max() || gv < 0 ||
          gv > kMaxCheckpointCount || hv < -kMaxCheckpointCount || hv > kMaxCheckpointCount)
        throw CheckpointError(kCkptCorrupt, path + ": grad_scaler holds scale " + s->py_str() + ", growth_tracker " +
                                                g->py_str() + ", hysteresis_tracker " + h->py_str() +
                                                " (the scale must be a positive finite float32, the growth tracker "
                                                "0 to 2^62, the hysteresis tracker -2^62 to 2^62)");
      c_.scaler->load_state({static_cast<float>(s->as_float()), g->as_int(), h->as_int()});
    }
    p.optimizer_steps = m.optimizer_steps;
  }

  // The iteration and samples to resume from (none with --finetune; a release checkpoint: iteration 0 with the
  // saved samples, as Megatron's load_checkpoint takes consumed_train_samples and skipped_train_samples from the
  // checkpoint's args whenever it is no fine-tune), --override-ckpt-iteration and --override-opt-param-scheduler.
  void resume_progress(Progress& p) {
    if (!as_finetune) {
      p.consumed_samples = m.consumed_samples;
      p.skipped_samples = m.skipped_train_samples;
    }
    if (!finetune) {
      p.iteration = m.iteration;
      p.skipped = m.skipped_iterations;
    }
    if (a.override_ckpt_iteration) {
      // Megatron's --override-ckpt-iteration: the checkpoint counts as saved at N; consumed samples become
      // N x --global-batch-size (this run's), skipped samples 0 (a release checkpoint too; --finetune is refused).
      // Under --freeze-all-layers N may be the iteration of --save's tracker (run/frozen_layers.h), and the load is
      // a fine-tune's: no batch-size warning (Megatron's `not args.finetune`).
      // A negative N never gets here (run_support.h refuses it before launch and in set_up).
      const int64_t n = *a.override_ckpt_iteration, gbs = a.global_batch_size;
      if (n > kMaxCheckpointCount / std::max<int64_t>(gbs, 1))
        throw CheckpointError(kCkptUnsupported, "--override-ckpt-iteration " + std::to_string(n) +
                                                    " is out of range (0 to 2^62 samples at --global-batch-size " +
                                                    std::to_string(gbs) + ")");
      const Value* saved_gbs = saved_arg(m.args, ArgId::global_batch_size);
      if (rank0 && !finetune && saved_gbs && saved_gbs->is_int() && saved_gbs->as_int() != gbs)
        warn_rule(log_, prefix_, kCkptOverrideIterationBatchSize,
                  "--override-ckpt-iteration " + std::to_string(n) + " counts consumed samples at this run's "
                  "--global-batch-size " + std::to_string(gbs) + " (" + std::to_string(n) + " x " +
                      std::to_string(gbs) + "); the checkpoint was written with " +
                      std::to_string(saved_gbs->as_int()) +
                      ", so an iteration counted in that run's batches starts from other samples");
      p.iteration = n;
      p.consumed_samples = n * gbs;
      p.skipped_samples = 0;
      if (rank0 && from_save_)
        log_ << prefix_ << "  --freeze-all-layers: resuming at iteration " << n << ", the highest iteration the ranks read in --save "
             << shown_path(*a.save) << "'s tracker (Megatron's read_frozen_resume_iteration, taken as "
             << "--override-ckpt-iteration " << n << "), with " << p.consumed_samples << " samples consumed"
             << std::endl;
      else if (rank0)
        log_ << prefix_ << "  --override-ckpt-iteration " << n << ": the checkpoint counts as saved at iteration " << n
             << ", with " << p.consumed_samples << " samples consumed" << std::endl;
    }
    // Megatron's --override-opt-param-scheduler also moves the loaded scheduler to the consumed samples.
    if (with_opt && a.override_opt_param_scheduler && c_.schedule->num_steps() != p.consumed_samples) {
      if (rank0)
        warn_rule(log_, prefix_, kCkptOverrideScheduler,
                  "--override-opt-param-scheduler: the loaded scheduler stood at " +
                      std::to_string(c_.schedule->num_steps()) + " samples, the run at " +
                      std::to_string(p.consumed_samples) +
                      " consumed samples; the scheduler is moved to the consumed samples");
      c_.schedule->set_num_steps(p.consumed_samples);
    }
  }

  // Rank 0's "successfully loaded" line (printed once every rank has loaded), with the RNG notice.
  std::string loaded_line(const Progress& p) const {
    std::ostringstream line;
    line << prefix_ << "  successfully loaded checkpoint from " << found->base << " [ t " << c_.tp.rank() + 1 << "/"
         << c_.tp.size() << ", p " << c_.pp.rank() + 1 << "/" << c_.pp.size() << " ] at iteration " << p.iteration
         << (a.freeze_all_layers
                 ? (p.iteration == 0 ? std::string(" (--freeze-all-layers: weights only, as --finetune: no optimizer, "
                                                   "scheduler or RNG state, no argument check; iteration 0, ") +
                                           frozen_zero_ + ")"
                                     : std::string(" (--freeze-all-layers: weights only, as --finetune: no optimizer, "
                                                   "scheduler or RNG state, no argument check)"))
             : a.finetune ? " (--finetune: weights only, iteration 0)"
             : found->pretrained ? " (--pretrained-checkpoint: a fine-tune, weights only, iteration 0)"
             : finetune  ? (a.override_ckpt_iteration ? " (a release checkpoint: weights only, at the iteration --override-ckpt-iteration gives)"
                                                      : " (a release checkpoint: weights only, iteration 0, " +
                                                            std::to_string(p.consumed_samples) +
                                                            " samples consumed as saved)")
             : !with_opt ? " (weights only: fresh optimizer state)"
                         : "");
    // Another (TP, PP) than the checkpoint's: Megatron's torch_dist load says so whenever the sizes differ
    // (load_checkpoint: `if ckpt_tp_pp != run_tp_pp: print_rank_0('{}: RNG state will be ignored'...)`, in the
    // else of its "load the RNG state" test, which a release checkpoint, --finetune, --no-load-rng or a
    // --no-save-rng checkpoint reach too), and its generators stay as --seed set them. So does the run
    // (resume_args: the synthetic data's generator is keyed by the seed): said with Megatron's words, and what the
    // run continues with.
    const auto [ckpt_tp, ckpt_pp] = checkpoint_tp_pp(m.layout);
    const bool no_rng = saved_without_rng(m.args);
    if (tp_pp_mismatch_notice(a) && !same_tp_pp(m.layout, a)) {
      line << "\n" << prefix_ << "notice: (TP, PP) mismatch after resume ((" << c_.tp.size() << ", " << c_.pp.size()
           << ") vs (" << ckpt_tp << ", " << ckpt_pp << ") from checkpoint): RNG state will be ignored";
      if (loads_rng(a, *found) && !no_rng)
        line << ", as Megatron's load ignores it: this run keeps --seed " << given_seed_
             << (static_cast<int64_t>(m.seed) != given_seed_
                     ? " (not the seed " + std::to_string(m.seed) + " of the run that saved it: the data differs from "
                       "an uninterrupted run's; --seed " + std::to_string(m.seed) + " continues it)"
                     : std::string());
      else
        line << ", as Megatron's load says (it would not restore it anyway: "
             << (a.freeze_all_layers ? "--freeze-all-layers loads the weights only"
                 : a.finetune ? "--finetune"
                 : found->pretrained ? "a --pretrained-checkpoint load is a fine-tune"
                 : found->release ? "a release checkpoint"
                 : a.no_load_rng.value_or(false) ? "--no-load-rng"
                                                 : "the checkpoint was saved with --no-save-rng")
             << "); this run keeps --seed " << given_seed_;
    }
    // A --no-save-rng checkpoint holds no RNG state: Megatron ignores it then (its torch_dist load) and keeps
    // --seed, as the run does (resume_args).
    if (loads_rng(a, *found) && no_rng)
      line << "\n" << prefix_
           << rule_heading("warning", kCkptNoRngState.id,
                           where() + ": the checkpoint was saved with --no-save-rng and holds no RNG state: this run "
                           "keeps --seed " + std::to_string(given_seed_) +
                               (static_cast<int64_t>(m.seed) != given_seed_
                                    ? " (not the seed " + std::to_string(m.seed) + " of the run that saved it)"
                                    : std::string()) +
                               ", as Megatron does");
    return line.str();
  }

  // --freeze-all-layers: why the load starts at iteration 0 ("--save DIR has no tracker", ...), for loaded_line.
  const std::string frozen_zero_;
  const Args& a;
  RunContext& c_;
  std::ostream& log_;
  const std::string& prefix_;
  const bool rank0;
  const Found* found;
  CheckpointReader& r;
  const RankMeta& m;
  const bool as_finetune;  // Megatron's args.finetune: --finetune, or --pretrained-checkpoint taken for --load
  const bool finetune;  // weights only: as_finetune or a release checkpoint (from iteration 0)
  const bool saved_optim, with_opt;  // the checkpoint holds optimizer state; this load restores it
  const int64_t given_seed_;
  const std::optional<int64_t> from_save_;  // --freeze-all-layers: the iteration of --save's tracker, taken as
                                            // --override-ckpt-iteration (run/frozen_layers.h)
};
}  // namespace

Progress Checkpointer::load() {
  const Args& given = c_.args;
  const bool rank0 = c_.rt.rank() == 0;
  if (!given.load && !given.pretrained_checkpoint) return {};  // (Megatron's pretrain: load_checkpoint for either)
  // The arguments the load works with: --freeze-all-layers makes it a fine-tune that resumes where --save's tracker
  // says (run/frozen_layers.h; read first, as Megatron's load_checkpoint does, before it looks for the checkpoint).
  Args frozen;
  std::optional<int64_t> from_save;
  const Args& a = given.freeze_all_layers ? frozen : given;
  std::optional<Found> found;
  Progress p;
  std::string err, loaded;  // this rank's error; rank 0's "successfully loaded" line
  std::vector<HyperChange> hyper;  // the optimizer's hyper-parameters the checkpoint changed
  CheckpointError failure(kCkptCorrupt, "");
  // Every rank reads the trackers the load may take (--save's under --freeze-all-layers without
  // --override-ckpt-iteration, the global non-persistent directory's, --load's, --pretrained-checkpoint's), and the
  // ranks take the highest value read, as Megatron's read_metadata all-reduces the iteration with MAX, saying so on
  // a rank that read another (run/tracker_agreement.h). Each rank's read apart would let the ranks resume at
  // different iterations. A rank whose read fails takes part as one without that tracker, and its error reaches
  // every rank through the verdict below once the load asks for the tracker.
  std::vector<AgreedTrackers::Read> reads;
  if (given.freeze_all_layers && !given.override_ckpt_iteration && given.save)
    reads.push_back({*given.save, "--save " + shown_path(*given.save)});
  if (given.load) {
    if (given.non_persistent_ckpt_type == arg::NonPersistentCkptType::global) {
      const std::string np = non_persistent_dir(given, *given.load);
      reads.push_back({np, "the non-persistent directory " + shown_path(np)});
    }
    reads.push_back({*given.load, "--load " + shown_path(*given.load)});
  }
  if (given.pretrained_checkpoint) {
    if (given.non_persistent_ckpt_type == arg::NonPersistentCkptType::global) {
      const std::string np = non_persistent_dir(given, *given.pretrained_checkpoint);
      reads.push_back({np, "the non-persistent directory " + shown_path(np)});
    }
    reads.push_back({*given.pretrained_checkpoint, "--pretrained-checkpoint " + shown_path(*given.pretrained_checkpoint)});
  }
  const AgreedTrackers trackers(c_.rt.group("world"), c_.rt.rank(), reads, log_, prefix_);
  try {
    if (given.freeze_all_layers) frozen = frozen_load_args(given, &from_save, &trackers);
    found = locate(a, &trackers);
    if (!found) {
      no_checkpoint_found(a, rank0, log_, prefix_);
    } else {
      announce_and_verify(a, rank0, found, log_, prefix_);
      CheckpointReader r(found->dir, found->release ? std::nullopt : std::optional<int64_t>(found->iteration));
      LoadSteps s(a, c_, log_, prefix_, *found, r, given_seed_, from_save, frozen_zero_words(given, trackers));
      s.check_model_args();
      s.check_parameters();
      s.check_optimizer_state();
      // Megatron's optimizer.load_state_dict puts the saved param groups' hyper-parameters in place.
      if (s.with_opt) hyper = take_saved_hyper(c_.cfg, a, s.m.args, found->dir + "/" + rank_stem(0) + ".json");
      s.read_buffers();
      if (s.with_opt) s.restore_scheduler_and_scaler(p);
      s.resume_progress(p);
      if (rank0) loaded = s.loaded_line(p);
    }
  } catch (const CheckpointError& e) {
    err = message_of(e);
    failure = e;
  } catch (const std::bad_alloc&) {
    // A file within the readers' limits that still does not fit in this process's memory (a memory limit, a
    // small machine): named as such, with the checkpoint, rather than as a bare "std::bad_alloc".
    failure = CheckpointError(kCkptCorrupt, (found ? found->flag_words() : load_words(a)) +
                                                ": out of memory while reading the checkpoint's files");
    err = message_of(failure);
  } catch (const std::exception& e) {
    err = message_of(e);
    failure = CheckpointError(kCkptCorrupt, message_of(e));
  }
  // The failed rank's rule id travels with its message ("id<US>message"), so that every rank names the same kind.
  const Verdict v = verdict(c_, err.empty() ? err : failure.id + '\x1f' + err);
  if (v.rank >= 0) {
    if (v.rank == c_.rt.rank()) throw failure;  // the lowest failed rank: its own error; every other rank names it
    const size_t us = v.error.find('\x1f');
    CheckpointError follows(us == std::string::npos ? kCkptCorrupt : checkpoint_rule(v.error.substr(0, us)),
                            load_words(a) + ": loading failed on rank " + std::to_string(v.rank) + ": " +
                                (us == std::string::npos ? v.error : v.error.substr(us + 1)));
    follows.root_rank = v.rank;  // the worker's error file names it: the launcher's root cause (review user39 #4)
    throw follows;
  }
  if (!loaded.empty()) log_ << loaded << std::endl;
  if (rank0 && !hyper.empty()) log_ << prefix_ << hyper_notice(*a.load, hyper) << std::endl;
  return p;
}

}  // namespace mr::run
