// The saved arguments and what a resume takes from them (run/checkpoint_resume_args.h): the arguments a save
// writes, the optimizer's group hyper-parameters a load restores (kGroupHyper), the notice that names them, and
// the seed a resume continues with.
#include "run/checkpoint_resume_args.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "config/schema.h"
#include "run/checkpoint_format.h"
#include "run/checkpoint_locate.h"
#include "run/run_scope.h"
#include "util/text.h"

namespace mr::run {

namespace {

// The optimizer hyper-parameters Megatron keeps in each param group, which its optimizer's load_state_dict
// replaces with the saved groups' (torch's Optimizer.load_state_dict; the distributed optimizer builds its groups
// from the saved ones): Adam's betas and eps (also Lion's and SOAP's betas and Muon's scalar Adam here), SGD's
// momentum, Lion's betas as Muon's scalar optimizer, Muon's momentum and Nesterov switch. The learning rate and
// weight decay are group values too, but the scheduler sets them every step. The others (Muon's Newton-Schulz
// steps, coefficients, scale) are the optimizer's own attributes, not saved: this run's stay.
struct HyperField {
  ArgId id;
  double OptimizerConfig::*number = nullptr;
  bool OptimizerConfig::*flag = nullptr;
};
const HyperField kGroupHyper[] = {
    {ArgId::adam_beta1, &OptimizerConfig::adam_beta1},     {ArgId::adam_beta2, &OptimizerConfig::adam_beta2},
    {ArgId::adam_eps, &OptimizerConfig::adam_eps},         {ArgId::sgd_momentum, &OptimizerConfig::sgd_momentum},
    {ArgId::lion_beta1, &OptimizerConfig::lion_beta1},     {ArgId::lion_beta2, &OptimizerConfig::lion_beta2},
    {ArgId::muon_momentum, &OptimizerConfig::muon_momentum}, {ArgId::muon_nesterov, nullptr, &OptimizerConfig::muon_nesterov},
};

}  // namespace

std::pair<int64_t, int64_t> checkpoint_tp_pp(const Value& layout) {
  const Value* tp = field_of(layout, "tp");
  const Value* pp = field_of(layout, "pp");
  // Megatron's default when the checkpoint's arguments lack them: 1 each.
  return {tp && tp->is_int() ? tp->as_int() : 1, pp && pp->is_int() ? pp->as_int() : 1};
}

bool same_tp_pp(const Value& layout, const Args& a) {
  const auto [ctp, cpp] = checkpoint_tp_pp(layout);
  return ctp == std::max<int64_t>(1, a.tensor_model_parallel_size) &&
         cpp == std::max<int64_t>(1, a.pipeline_model_parallel_size);
}

const Value* field_of(const Value& o, const char* k) {
  if (!o.is_object()) return nullptr;
  for (const auto& [key, v] : o.as_object())
    if (key == k) return &v;
  return nullptr;
}

const Value* saved_arg(const Value& saved_args, ArgId id) {
  const std::string dest(dest_of(id));
  return field_of(saved_args, dest.c_str());
}

// The saved arguments: this run's, with the group hyper-parameters its optimizer stepped with (after a load, the
// checkpoint's: the next resume takes them from here, as Megatron's from the saved param groups).
Value args_json(const Args& a, const OptimizerConfig& cfg) {
  Object o;
  for (size_t i = 0; i < kArgCount; ++i) {
    const ArgId id = static_cast<ArgId>(i);
    Value v = a.value(id);
    for (const HyperField& f : kGroupHyper)
      if (f.id == id) v = f.number ? Value(cfg.*f.number) : Value(cfg.*f.flag);
    o.emplace_back(std::string(dest_of(id)), std::move(v));
  }
  return Value::object(std::move(o));
}

// Puts the checkpoint's values (its saved arguments at `path`) of the group hyper-parameters this run's optimizer
// uses into `cfg`; returns those that differ from the command line's. A checkpoint without one keeps this run's.
std::vector<HyperChange> take_saved_hyper(OptimizerConfig& cfg, const Args& a, const Value& saved_args,
                                          const std::string& path) {
  std::vector<HyperChange> out;
  for (const HyperField& f : kGroupHyper) {
    if (!unused_by_optimizer(f.id, a).empty()) continue;  // no group of this optimizer holds it
    const std::string dest(dest_of(f.id));
    const Value* v = saved_arg(saved_args, f.id);
    if (!v || v->is_none()) continue;
    if (f.number) {
      if (!v->is_number() || !std::isfinite(v->as_float()))
        throw CheckpointError(kCkptCorrupt, path + ": \"args\": the saved argument \"" + dest + "\" is " +
                                                abbreviate(v->json(), 120) + ", not a finite number");
      const double x = v->as_float();
      if (x != cfg.*f.number) out.push_back({f.id, Value(cfg.*f.number), Value(x)});
      cfg.*f.number = x;
    } else {
      if (!v->is_bool())
        throw CheckpointError(kCkptCorrupt, path + ": \"args\": the saved argument \"" + dest + "\" is " +
                                                abbreviate(v->json(), 120) + ", not true or false");
      if (v->as_bool() != cfg.*f.flag) out.push_back({f.id, Value(cfg.*f.flag), *v});
      cfg.*f.flag = v->as_bool();
    }
  }
  return out;
}

std::string hyper_notice(const std::string& load, const std::vector<HyperChange>& changes) {
  std::string s = "notice: --load " + load + ": the optimizer state loads with the hyper-parameters it was saved "
                  "with, as Megatron's optimizer.load_state_dict restores its param groups:";
  for (size_t i = 0; i < changes.size(); ++i) {
    const std::string flag = Schema::megatron().flag_for_dest(dest_of(changes[i].id));
    s += std::string(i ? "," : "") + " " + flag + " " + changes[i].given.py_repr() + " -> the checkpoint's " +
         changes[i].saved.py_repr();
  }
  return s + " (--no-load-optim or --finetune keeps this run's values)";
}

Args resume_args(const Args& args) {
  Args out = args;
  std::optional<Found> f = locate(args);
  if (!f || !loads_rng(args, *f)) return out;
  // Megatron's own checkpoint: said as what it is (as Checkpointer's load); "" for one of ours.
  if (const std::string kind = megatron_checkpoint_kind(f->dir); !kind.empty())
    throw megatron_checkpoint_refusal(f->dir, kind, "--load " + shown_path(*args.load));
  const std::string first = f->dir + "/" + rank_stem(0) + ".json";
  const RankMeta m = parse_rank_meta(read_small_file(first, kMaxMetadataBytes), first);
  // Saved with --no-save-rng: no RNG state to restore (Megatron's load keeps the run's own; the Checkpointer's
  // load says so, checkpoint.no-rng-state).
  if (saved_without_rng(m.args)) return out;
  // Another (TP, PP) than the checkpoint's: Megatron's torch_dist load ignores its RNG state ("(TP, PP) mismatch
  // after resume ...: RNG state will be ignored"), and the generators stay as --seed set them; so does the run.
  // (With --ckpt-format torch such a load is refused: checkpoint.args-mismatch.)
  if (!same_tp_pp(m.layout, args)) return out;
  out.seed = static_cast<int64_t>(m.seed);
  return out;
}

}  // namespace mr::run
