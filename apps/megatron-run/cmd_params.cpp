// `megatron-run params`: the parameters each (tensor, pipeline) rank of a job holds and what they cost in memory
// (weights, gradients, main params, optimizer state, activations), from the validated arguments alone: no LibTorch, no
// processes started. The same model plan the training run allocates (lib/run/model.h).
#include <cmath>
#include <cstdio>
#include <iostream>
#include <sstream>

#include "cli.h"
#include "config/checked.h"
#include "config/print.h"
#include "launch.h"
#include "run/memory_picture.h"
#include "run/model.h"
#include "util/byte_size.h"

namespace mr::app {

namespace {

std::string gib(double bytes) { return std::isnan(bytes) ? "?" : format_gib(bytes, /*unit=*/false); }
std::string json_num(double v) {
  if (std::isnan(v)) return "null";
  std::ostringstream s;
  s.precision(17);
  s << v;
  return s.str();
}

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

  // One row per (tensor, pipeline) rank; a row keeps the counts, not the plan, so memory stays bounded by one
  // plan however many ranks there are. Every count is checked: a sum beyond 64 bits is an error, not a wrap.
  struct Row {
    int64_t tp_rank, pp_rank;
    size_t layers = 0;
    int64_t numel = 0;
    run::MemoryEstimate mem;
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
        int64_t counted = 0;
        for (const auto& s : plan.params)
          if (!(s.tp_duplicate && t != 0) && !s.shared_copy && !s.expert) counted = add(counted, s.numel());
        unique = add(unique, counted);
        if (t == 0) unique = add(unique, plan.expert_numel_total);  // every routed expert once, whole
        rows.push_back(r);
      }
  } catch (const run::RunError& e) {
    return report_failure(common, Diagnostic{Diagnostic::Level::Error, "model-plan", e.what(), {}, {}, kStagePlan});
  }

  if (common.format == "svg") {
    std::vector<run::RankMemory> bars;
    for (const Row& r : rows) bars.push_back({r.tp_rank, r.pp_rank, r.mem});
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
              << ", \"ranks\": [";
    for (size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      std::cout << (i ? ", " : "") << "{\"tp_rank\": " << r.tp_rank << ", \"pp_rank\": " << r.pp_rank
                << ", \"layers\": " << r.layers << ", \"parameters\": " << r.numel
                << ", \"bytes\": {\"params\": " << json_num(r.mem.params) << ", \"grads\": " << json_num(r.mem.grads)
                << ", \"main_params\": " << json_num(r.mem.main_params)
                << ", \"optimizer_state\": " << json_num(r.mem.optimizer_state)
                << ", \"weights_and_optimizer\": " << json_num(r.mem.weights_and_optimizer())
                << ", \"activations\": " << json_num(r.mem.activations) << ", \"total\": " << json_num(r.mem.total())
                << "}, \"sharding\": \"" << r.mem.sharding << "\"}";
    }
    std::cout << "]}\n";
    return 0;
  }
  std::cout << "world size " << layout.spec.world_size << ": TP=" << tp << " PP=" << pp << " CP=" << layout.spec.cp
            << " DP=" << dp;
  if (layout.spec.ep > 1 || layout.etp != tp) std::cout << " EP=" << layout.spec.ep << " expert TP=" << layout.etp;
  std::cout << "; " << unique << " parameters in the model (each counted once)\n";
  std::cout << "memory per rank in GiB (weights, gradients, main params, optimizer state";
  if (!rows.empty()) std::cout << "; sharding: " << rows.front().mem.sharding;
  const bool no_activations = !rows.empty() && std::isnan(rows.front().mem.activations);
  std::cout << (no_activations ? "; activations: not estimated for hybrid models, Megatron has no estimate; total: "
                                 "weights and optimizer + ?)\n"
                               : "; activations: Megatron's theoretical estimate for the first pipeline stage)\n");
  char line[256];
  std::snprintf(line, sizeof line, "%-10s %7s %15s %9s %9s %9s %9s %9s %9s\n", "(tp, pp)", "layers", "parameters",
                "params", "grads", "main", "optim", "activ", "total");
  std::cout << line;
  for (const Row& r : rows) {
    std::string at = "(" + std::to_string(r.tp_rank) + ", " + std::to_string(r.pp_rank) + ")";
    std::snprintf(line, sizeof line, "%-10s %7zu %15lld %9s %9s %9s %9s %9s %9s\n", at.c_str(), r.layers,
                  static_cast<long long>(r.numel), gib(r.mem.params).c_str(), gib(r.mem.grads).c_str(),
                  gib(r.mem.main_params).c_str(), gib(r.mem.optimizer_state).c_str(), gib(r.mem.activations).c_str(),
                  (std::isnan(r.mem.activations) ? gib(r.mem.weights_and_optimizer()) + "+?" : gib(r.mem.total())).c_str());
    std::cout << line;
  }
  return 0;
}

}  // namespace mr::app
