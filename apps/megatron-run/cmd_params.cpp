// `megatron-run params`: the parameters each (tensor, pipeline) rank of a job holds and what they cost in memory
// (weights, gradients, main params, optimizer state, activations), from the validated arguments alone: no LibTorch, no
// processes started. The same model plan the training run allocates (lib/run/model.h).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <sstream>

#include "cli.h"
#include "config/checked.h"
#include "config/print.h"
#include "config/rule.h"
#include "config/value.h"
#include "launch.h"
#include "parallel/layout_picture.h"
#include "run/memory_picture.h"
#include "run/model.h"
#include "util/text.h"
#include "run/model_family.h"
#include "run/tokenizer_vocab.h"
#include "util/byte_size.h"

namespace mr::app {

namespace {

// What `params` cannot count (its diagnostics carry the plan stage): the model plan's own refusals, RunErrors naming
// the flag, as the training run's (init.training-run) are in a launch.
const Rule kModelPlanRule{
    "model-plan", Rule::Level::Error,
    "params: the model plan (lib/run/model.h) cannot count this config: a model it does not plan (another of "
    "Megatron's model families, options that add parameters it does not know) or sizes past its limits; exit 1, "
    "naming the flag.",
    __FILE__, __LINE__, kStagePlan};

// The text table's unit: the largest of GiB, MiB, KiB that the table's largest figure reaches, so a small test model
// reads "30.47" MiB rather than "0.03" GiB everywhere (JSON stays in bytes).
struct Unit {
  const char* name;
  double bytes;
};
Unit table_unit(double largest) {
  for (Unit u : {Unit{"GiB", kGiB}, Unit{"MiB", kMiB}, Unit{"KiB", 1024.0}})
    if (largest >= u.bytes) return u;
  return {"B", 1.0};
}
std::string in_unit(double bytes, Unit u) {
  if (std::isnan(bytes)) return "?";
  char b[32];
  std::snprintf(b, sizeof b, "%.2f", bytes / u.bytes);
  return b;
}
// Python's repr of the float (the shortest digits that read back to it), as json.dumps writes Megatron's figures.
std::string json_num(double v) { return std::isnan(v) ? "null" : py_float_repr(v); }

}  // namespace

void ParamsOptions::add_to(po::options_description& desc) {
  common.add_to(desc, "text|json|svg");
  desc.add_options()("device-memory", po::value(&device_memory),
                     "the GPU's memory the picture's bars are drawn against (default 80GiB)");
}

int cmd_params(const std::vector<std::string>& args) {
  ParamsOptions opts;
  const std::vector<Token> rest = parse_command_options("params", args, opts);
  CommonOptions& common = opts.common;
  const std::optional<double> capacity = parse_byte_size(opts.device_memory);
  if (!capacity || *capacity <= 0)
    throw UsageError("argument --device-memory: '" + opts.device_memory +
                         "' is not a memory size (a positive number with B, KiB, MiB, GiB, TiB, KB, MB, GB or TB)",
                     {"--device-memory"}, {}, "input.device-memory");
  Outcome out;
  Args job_args;
  parallel::Layout layout;
  if (int rc = resolve_job_layout("params", common, rest, out, job_args, layout, {"svg"})) return rc;
  const int64_t tp = layout.spec.tp, pp = layout.spec.pp, dp = layout.dp;
  // One bar a (tensor, pipeline) rank: a picture has topology's bound (a 65536-stage job drew a 134 MB SVG).
  if (common.format == "svg" && tp * pp > parallel::kMaxPictureRanks)
    throw UsageError("params --format svg: a picture of " + std::to_string(tp * pp) +
                         " (tensor, pipeline) ranks is too large (at most " +
                         std::to_string(parallel::kMaxPictureRanks) +
                         "; --tensor-model-parallel-size x --pipeline-model-parallel-size, or --format text|json)",
                     {"--tensor-model-parallel-size", "--pipeline-model-parallel-size"}, {}, "input.picture-too-large");

  // One row per (tensor, pipeline) rank; a row keeps the counts, not the plan, so memory stays bounded by one
  // plan however many ranks there are. Every count is checked: a sum beyond 64 bits is an error, not a wrap.
  struct Row {
    int64_t tp_rank, pp_rank;
    size_t layers = 0;
    int64_t numel = 0;
    run::MemoryEstimate mem;
    // Megatron's activation estimate is the first pipeline stage's (its in-flight microbatches, the embedding): it
    // is shown, and counted in the total, on that stage's rows only; the later stages' rows leave activations out.
    bool activations_shown = true;
  };
  std::vector<Row> rows;
  int64_t unique = 0;
  auto add = [](int64_t a, int64_t b) {
    if (auto r = checked_add(a, b)) return *r;
    throw run::RunError("the parameter count of the model (" + std::to_string(a) + " + " + std::to_string(b) +
                        ") does not fit in a 64-bit integer (--num-layers, --hidden-size, --num-experts ...)");
  };
  try {
    for (int64_t p = 0; p < pp; ++p)
      for (int64_t t = 0; t < tp; ++t) {
        run::RankCoord at{t, tp, p, pp, layout.spec.ep, t % layout.etp, layout.etp};
        const run::ModelPlan plan = run::plan_gpt_model(job_args, at);
        Row r{t, p, plan.layers.size(), plan.megatron_numel(), {}};
        r.mem = run::estimate_memory(plan, job_args, dp * layout.spec.cp, layout.expert_dp, out.parsed.env);
        if (p > 0 && !std::isnan(r.mem.activations)) {
          r.activations_shown = false;
          r.mem.activations = 0;  // total() is then weights and optimizer
        }
        int64_t counted = 0;
        for (const auto& s : plan.params)
          if (!(s.tp_duplicate && t != 0) && !s.shared_copy && !s.expert) counted = add(counted, s.numel());
        unique = add(unique, counted);
        if (t == 0) unique = add(unique, plan.expert_numel_total);  // every routed expert once, whole
        rows.push_back(r);
      }
  } catch (const run::RunError& e) {
    kModelPlanRule.record_hit();
    return report_failure(common, Diagnostic{Diagnostic::Level::Error, kModelPlanRule.id, e.what(), {}, {}, kStagePlan});
  }

  // What Megatron's activation formula leaves out though the job has it (theoretical_memory_usage.py: s*b*h per
  // layer, whole): said in the text's header, as "activation_caveats" in JSON and on stderr beside a picture.
  std::vector<std::string> caveats;
  const bool estimated = !rows.empty() && !std::isnan(rows.front().mem.activations);
  if (estimated && layout.spec.cp > 1)
    caveats.push_back("the whole sequence's, not the 1/" + std::to_string(layout.spec.cp) +
                      " each rank holds under --context-parallel-size " + std::to_string(layout.spec.cp));
  if (estimated && job_args.recompute_granularity == arg::RecomputeGranularity::full)
    caveats.push_back("every layer's kept, though --recompute-granularity full recomputes them");
  auto caveat_text = [&] {
    return "activations as Megatron's formula counts them: " + join(caveats, "; ");
  };
  if (!caveats.empty() && common.format == "svg") std::cerr << "megatron-run: notice: " << caveat_text() << std::endl;

  // --vocab-size where Megatron's tokenizer sizes the model (run/tokenizer_vocab.h): the text says so under the
  // totals; json and svg keep stdout a document, so it goes to stderr there.
  std::string vocab_notice;
  try {
    vocab_notice = run::model_vocab(job_args).notice;
  } catch (const std::exception&) {  // the plan above would have refused it
  }
  if (!vocab_notice.empty() && common.format != "text")
    std::cerr << "megatron-run: notice: " << vocab_notice << std::endl;
  // A config that looks like another model family than the plan's decoder (run/model_family.h): said likewise.
  const std::string family_notice = run::other_family_notice(out.parsed.ns, job_args);
  if (!family_notice.empty() && common.format != "text")
    std::cerr << "megatron-run: notice: " << family_notice << std::endl;

  if (common.format == "svg") {
    std::vector<run::RankMemory> bars;
    for (const Row& r : rows) bars.push_back({r.tp_rank, r.pp_rank, r.mem, r.activations_shown});
    std::string sub = "world size " + std::to_string(layout.spec.world_size) + ": TP=" + std::to_string(tp) +
                      " PP=" + std::to_string(pp) + " CP=" + std::to_string(layout.spec.cp) + " DP=" +
                      std::to_string(dp);
    if (layout.spec.ep > 1) sub += " EP=" + std::to_string(layout.spec.ep);
    sub += "; " + std::to_string(unique) + " parameters; optimizer " + std::string(arg::to_string(job_args.optimizer));
    std::cout << run::memory_svg(bars, *capacity, opts.device_memory, picture_title(common, "memory per rank"), sub);
    return 0;
  }
  if (common.format == "json") {
    std::cout << "{\"world_size\": " << layout.spec.world_size << ", \"tp\": " << tp << ", \"pp\": " << pp
              << ", \"dp\": " << dp << ", \"cp\": " << layout.spec.cp << ", \"parameters\": " << unique
              << ", \"unit\": \"bytes\", \"activation_estimate\": "
              << (rows.empty() || rows.front().mem.activation_estimate.empty()
                      ? std::string("null")
                      : "\"" + rows.front().mem.activation_estimate + "\"")
              << ", \"activations_on\": \"first pipeline stage\", \"activation_caveats\": [";
    for (size_t i = 0; i < caveats.size(); ++i) std::cout << (i ? ", " : "") << json_quote(caveats[i]);
    std::cout << "], \"ranks\": [";
    for (size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      std::cout << (i ? ", " : "") << "{\"tp_rank\": " << r.tp_rank << ", \"pp_rank\": " << r.pp_rank
                << ", \"layers\": " << r.layers << ", \"parameters\": " << r.numel
                << ", \"bytes\": {\"params\": " << json_num(r.mem.params) << ", \"grads\": " << json_num(r.mem.grads)
                << ", \"main_params\": " << json_num(r.mem.main_params)
                << ", \"optimizer_state\": " << json_num(r.mem.optimizer_state)
                << ", \"weights_and_optimizer\": " << json_num(r.mem.weights_and_optimizer())
                << ", \"activations\": " << (r.activations_shown ? json_num(r.mem.activations) : "null")
                << ", \"total\": " << json_num(r.mem.total())
                << "}, \"sharding\": \"" << r.mem.sharding << "\"}";
    }
    std::cout << "]}\n";
    return 0;
  }
  std::cout << "world size " << layout.spec.world_size << ": TP=" << tp << " PP=" << pp << " CP=" << layout.spec.cp
            << " DP=" << dp;
  if (layout.spec.ep > 1 || layout.etp != tp) std::cout << " EP=" << layout.spec.ep << " expert TP=" << layout.etp;
  std::cout << "; " << unique << " parameters in the model (each counted once)\n";
  if (!vocab_notice.empty()) std::cout << "vocabulary: " << vocab_notice << "\n";
  if (!family_notice.empty()) std::cout << "model: " << family_notice << "\n";
  double largest = 0;
  for (const Row& r : rows)
    for (double v : {r.mem.params, r.mem.grads, r.mem.main_params, r.mem.optimizer_state, r.mem.activations,
                     r.mem.total(), r.mem.weights_and_optimizer()})  // the last: a hybrid's "N+?" total (mem41 #2)
      if (!std::isnan(v)) largest = std::max(largest, v);
  const Unit unit = table_unit(largest);
  std::cout << "memory per rank in " << unit.name << " (weights, gradients, main params, optimizer state";
  if (!rows.empty()) std::cout << "; sharding: " << rows.front().mem.sharding;
  const bool no_activations = !rows.empty() && std::isnan(rows.front().mem.activations);
  if (no_activations) {
    std::cout << "; activations: not estimated for hybrid models, Megatron has no estimate; total: weights and "
                 "optimizer + ?)\n";
  } else {
    // Which of Megatron's two formulas report_theoretical_memory uses for these arguments.
    const std::string& fn = rows.empty() ? std::string() : rows.front().mem.activation_estimate;
    std::cout << "; activations: Megatron's theoretical estimate, " << fn
              << (fn == "compute_activation_memory" ? " (--sequence-parallel, selective recompute)"
                                                    : " (no --sequence-parallel with selective recompute)");
    if (pp > 1)
      std::cout << ", for the first pipeline stage: on its rows only; the other stages' \"-\" and totals leave "
                   "activations out";
    std::cout << ")\n";
  }
  if (!caveats.empty()) std::cout << caveat_text() << "\n";
  char line[256];
  std::snprintf(line, sizeof line, "%-10s %7s %15s %9s %9s %9s %9s %9s %9s\n", "(tp, pp)", "layers", "parameters",
                "params", "grads", "main", "optim", "activ", "total");
  std::cout << line;
  for (const Row& r : rows) {
    std::string at = "(" + std::to_string(r.tp_rank) + ", " + std::to_string(r.pp_rank) + ")";
    const std::string activ = r.activations_shown ? in_unit(r.mem.activations, unit) : "-";
    const std::string total = std::isnan(r.mem.activations) ? in_unit(r.mem.weights_and_optimizer(), unit) + "+?"
                                                            : in_unit(r.mem.total(), unit);
    std::snprintf(line, sizeof line, "%-10s %7zu %15lld %9s %9s %9s %9s %9s %9s\n", at.c_str(), r.layers,
                  static_cast<long long>(r.numel), in_unit(r.mem.params, unit).c_str(),
                  in_unit(r.mem.grads, unit).c_str(), in_unit(r.mem.main_params, unit).c_str(),
                  in_unit(r.mem.optimizer_state, unit).c_str(), activ.c_str(), total.c_str());
    std::cout << line;
  }
  return 0;
}

}  // namespace mr::app
