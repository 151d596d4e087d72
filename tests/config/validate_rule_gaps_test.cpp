// Failing branches of validation rules that no other test reached (found with the `rules_all_tested` test and
// scripts/coverage.sh; see docs/validation-coverage.md). Every rule already fired somewhere; these are the
// rules' other ways to fail: a second call site, or a path into the same failure that needs inputs the other
// tests did not use. Each case triggers the rule (asserting its id) next to a neighbour that passes. Where
// argparse's choices or nargs keep the command line from producing the input, the section runs directly on
// an edited namespace, as the subject tests do.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "config/validate/section_functions.h"
#include "config/pipeline_layout.h"
#include "config/validate/sections.h"
#include "support.h"
#include "validate_support.h"

namespace {

using mrtest::fails_with;
using mrtest::run;
using mrtest::with;
using Env = std::map<std::string, std::string>;

const Env kWorld1 = {{"WORLD_SIZE", "1"}};
const Env kWorld8 = {{"WORLD_SIZE", "8"}};

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

// One section run directly on the parsed (not yet validated) namespace, after `edit` changed it.
mrtest::Run direct(void (*section)(mr::Context&), const std::function<void(mr::Namespace&)>& edit = {},
                   const std::vector<std::string>& args = mrtest::base_args(), const Env& env = kWorld1) {
  return mrtest::run_body(args, section, env, nullptr, edit);
}

void set(mr::Namespace& ns, const std::string& dest, mr::Value v) { ns.set(dest, std::move(v), {}); }

// A file in a directory of this process's own (test_config may run twice at once under ctest -j).
std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("mr_rule_gaps_" + std::to_string(::getpid()) + "_" + name))
      .string();
}
std::string write_temp(const std::string& name, const std::string& text) {
  const std::string path = temp_path(name);
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

std::string replace(std::string s, const std::string& from, const std::string& to) {
  auto at = s.find(from);
  REQUIRE(at != std::string::npos);
  return s.replace(at, from.size(), to);
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// parallel.world-size-divisible (model_parallel_sizes.cpp): a TP x PP x CP x GTP product beyond 64 bits cannot
// divide any world size; it is reported as this rule rather than overflowing.

TEST_CASE("gaps: parallel.world-size-divisible with a model size beyond 64 bits", "[rule-gaps]") {
  auto r = run(with({"--tensor-model-parallel-size", "4294967296", "--pipeline-model-parallel-size", "4294967296"}),
               kWorld8);
  CHECK(fails_with(r, "parallel.world-size-divisible"));
  CHECK(r.message.find("beyond 64 bits") != std::string::npos);
  // Neighbour: the same shape that fits the world.
  r = run(with({"--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "2"}),
          {{"WORLD_SIZE", "8"}, {"CUDA_DEVICE_MAX_CONNECTIONS", "1"}});
  CHECK(r.exit == 0);
}

// ---------------------------------------------------------------------------------------------------------------
// parallel.a2a-p2p-needs-hierarchical-cp (model_parallel_sizes.cpp): `'a2a+p2p' in args.cp_comm_type` is a
// substring test when cp_comm_type is a plain string (nargs='+' always gives a list on the command line).

TEST_CASE("gaps: parallel.a2a-p2p-needs-hierarchical-cp with a plain-string --cp-comm-type", "[rule-gaps]") {
  auto d = direct(&mr::section::model_parallel_sizes,
                  [](mr::Namespace& ns) { set(ns, "cp_comm_type", mr::Value("a2a+p2p")); });
  CHECK(d.rule == "parallel.a2a-p2p-needs-hierarchical-cp");
  d = direct(&mr::section::model_parallel_sizes, [](mr::Namespace& ns) { set(ns, "cp_comm_type", mr::Value("p2p")); });
  CHECK(d.rule == "");
}

// ---------------------------------------------------------------------------------------------------------------
// cuda_graph_normalize.cpp: values argparse's choices and type converter never produce.

TEST_CASE("gaps: cuda-graph-modules.inference-scope-for-impl for a scope that is no member", "[rule-gaps]") {
  // InferenceCudaGraphScope[name] raises for an unknown name (the flag's choices keep the CLI from it).
  auto d = direct(&mr::section::cuda_graph_normalize,
                  [](mr::Namespace& ns) { set(ns, "inference_cuda_graph_scope", mr::Value("sideways")); });
  CHECK(d.rule == "cuda-graph-modules.inference-scope-for-impl");
  CHECK(d.message.find("not one of none, layer, block") != std::string::npos);
  // Neighbour: a member, spelled with its enum prefix.
  d = direct(&mr::section::cuda_graph_normalize, [](mr::Namespace& ns) {
    set(ns, "inference_cuda_graph_scope", mr::Value("InferenceCudaGraphScope.none"));
  });
  CHECK(d.rule == "");
  CHECK(d["inference_cuda_graph_scope"] == mr::Value("InferenceCudaGraphScope.none"));
}

TEST_CASE("gaps: cuda-graph-modules.known-module for one value that is neither a list nor a string",
          "[rule-gaps]") {
  // A lone value is wrapped in a list, then found to be no name.
  auto d = direct(&mr::section::cuda_graph_normalize,
                  [](mr::Namespace& ns) { set(ns, "cuda_graph_modules", mr::Value(3)); });
  CHECK(d.rule == "cuda-graph-modules.known-module");
  // Neighbour: a lone member is wrapped and kept.
  d = direct(&mr::section::cuda_graph_normalize,
             [](mr::Namespace& ns) { set(ns, "cuda_graph_modules", mr::Value("CudaGraphModule.attn")); });
  CHECK(d.rule == "");
  CHECK(d["cuda_graph_modules"] == mr::Value(mr::List{mr::Value("CudaGraphModule.attn")}));
}

// ---------------------------------------------------------------------------------------------------------------
// heterogeneous.config-unreadable (heterogeneous_config.cpp): the shapes of block_configs and the head counts
// Python cannot iterate or divide.

namespace {
using mrtest::kHeteroFlags;
using mrtest::kHeteroJson;
const std::string kBlocks =
    R"([{"attention": {"n_heads_in_group": 2}}, {"attention": {"n_heads_in_group": null}}])";

mrtest::Run hetero(const std::string& json) {
  auto a = with(kHeteroFlags);
  a.push_back("--heterogeneous-layers-config-encoded-json");
  a.push_back(json);
  return run(a, kWorld1);
}
bool hetero_ok(const mrtest::Run& r) { return r.exit == 0 || !starts_with(r.rule, "heterogeneous."); }
}  // namespace

TEST_CASE("gaps: heterogeneous.config-unreadable for block_configs that is no list", "[rule-gaps]") {
  // A non-empty dict or string iterates to keys / characters, which cannot be indexed by "attention".
  CHECK(fails_with(hetero(replace(kHeteroJson, kBlocks, R"({"attention": {"n_heads_in_group": 2}})")),
                   "heterogeneous.config-unreadable"));
  CHECK(fails_with(hetero(replace(kHeteroJson, kBlocks, R"("blocks")")), "heterogeneous.config-unreadable"));
  // A number is not iterable.
  CHECK(fails_with(hetero(replace(kHeteroJson, kBlocks, "5")), "heterogeneous.config-unreadable"));
  // An empty dict iterates to nothing: then no block sets n_heads_in_group (IndexError).
  auto r = hetero(replace(kHeteroJson, kBlocks, "{}"));
  CHECK(fails_with(r, "heterogeneous.config-unreadable"));
  CHECK(r.message.find("no attention block sets n_heads_in_group") != std::string::npos);
  // Neighbour: the list of blocks.
  CHECK(hetero_ok(hetero(kHeteroJson)));
}

TEST_CASE("gaps: heterogeneous.config-unreadable for num_attention_heads that is no number", "[rule-gaps]") {
  // num_attention_heads // n_heads_in_group with a string raises TypeError.
  auto r = hetero(replace(kHeteroJson, "\"num_attention_heads\": 4", "\"num_attention_heads\": \"four\""));
  CHECK(fails_with(r, "heterogeneous.config-unreadable"));
  CHECK(r.message.find("cannot be divided by n_heads_in_group") != std::string::npos);
  CHECK(hetero_ok(hetero(kHeteroJson)));
}

// ---------------------------------------------------------------------------------------------------------------
// rerun.tracker-file-unreadable (rerun_tracker.cpp): int() of the iteration field, digit underscores.

TEST_CASE("gaps: rerun.tracker-file-unreadable for an iteration int() rejects", "[rule-gaps]") {
  const std::string pre = "ts=2025-01-01 node=n1 device=0 jobID=J1 ";
  const std::string line4 = pre + "rank=0 iteration=4 status=RERUN_DISABLED result=1 message=a\n";
  // Python's int() accepts single underscores between digits: 1_0 is iteration 10.
  const std::string ok = line4 + line4 + pre + "rank=0 iteration=1_0 status=RERUN_DISABLED result=1 message=a\n" +
                         pre + "rank=0 iteration=10 status=RERUN_DISABLED result=1 message=a\n";
  auto r = run(with({"--result-rejected-tracker-filename", write_temp("tracker_ok.txt", ok)}), kWorld1);
  CHECK(r.exit == 0);
  CHECK_FALSE(r.warned("rerun.tracker-file-unreadable"));
  CHECK(r["iterations_to_skip"] == mr::Value(mr::List{mr::Value(4), mr::Value(10)}));

  // A bad iteration stops the reading with a warning; a leading, trailing or doubled underscore is bad too.
  for (const char* bad_it : {"x", "_1", "1_", "1__0"}) {
    INFO(bad_it);
    const std::string bad =
        line4 + line4 + pre + "rank=0 iteration=" + bad_it + " status=RERUN_DISABLED result=1 message=a\n";
    r = run(with({"--result-rejected-tracker-filename", write_temp("tracker_bad_it.txt", bad)}), kWorld1);
    CHECK(r.exit == 0);
    CHECK(r.warned("rerun.tracker-file-unreadable"));
    CHECK(r["iterations_to_skip"] == mr::Value(mr::List{mr::Value(4)}));
  }
  std::remove(temp_path("tracker_ok.txt").c_str());
  std::remove(temp_path("tracker_bad_it.txt").c_str());
}

// ---------------------------------------------------------------------------------------------------------------
// pipeline-layout.too-large (pipeline_layout.cpp): the parenthesised repeat '(...)*N' of the first pass.

TEST_CASE("gaps: pipeline-layout.too-large from a parenthesised repeat", "[rule-gaps]") {
  auto r = run(with({"--pipeline-model-parallel-layout", "(tt)*99999999999"}), kWorld1);
  CHECK(fails_with(r, "pipeline-layout.too-large"));
  bool too_large = false;
  CHECK(mr::pipeline_layout::expand("(tt)*99999999999", &too_large).empty());
  CHECK(too_large);
  // Neighbour: a small repeat unrolls.
  CHECK(mr::pipeline_layout::expand("E(tt)*2L", &too_large) == "EttttL");
  CHECK_FALSE(too_large);
}

// ---------------------------------------------------------------------------------------------------------------
// batch-size.step-schedule-with-global-batch-size (batch_size.cpp): without parse_args' record of an explicit
// --global-batch-size, the current value decides (getattr(args, '_is_global..._specified', gbs is not None)).

TEST_CASE("gaps: batch-size.step-schedule-with-global-batch-size without the explicit-gbs record", "[rule-gaps]") {
  auto d = direct(&mr::section::batch_size, [](mr::Namespace& ns) {
    ns.erase("_is_global_batch_size_explicitly_specified");
    set(ns, "step_batch_size_schedule", mr::Value("0:8 100:16"));
    set(ns, "batch_parallel_size", mr::Value(1));  // derived by the parallel-size sections before this one
  });
  CHECK(d.rule == "batch-size.step-schedule-with-global-batch-size");
  // Neighbour: no global batch size, so the schedule alone decides.
  d = direct(&mr::section::batch_size, [](mr::Namespace& ns) {
    ns.erase("_is_global_batch_size_explicitly_specified");
    set(ns, "step_batch_size_schedule", mr::Value("0:8 100:16"));
    set(ns, "batch_parallel_size", mr::Value(1));  // derived by the parallel-size sections before this one
    set(ns, "global_batch_size", mr::Value());
  });
  CHECK(d.rule != "batch-size.step-schedule-with-global-batch-size");
}

// ---------------------------------------------------------------------------------------------------------------
// optimizer.unknown-dtype through the chain (optimizer_config_checks.cpp): finalize_optimizer_config fails inside the
// optimizer.finalize section (argparse's choices keep the command line from an unknown dtype).

TEST_CASE("gaps: optimizer.unknown-dtype reported by the optimizer.finalize section", "[rule-gaps]") {
  const mr::Section* finalize = nullptr;
  for (const mr::Section& s : mr::validation_sections())
    if (std::string(s.name) == "optimizer.finalize") finalize = &s;
  REQUIRE(finalize != nullptr);
  auto d = direct(finalize->run, [](mr::Namespace& ns) { set(ns, "exp_avg_dtype", mr::Value("float32")); });
  CHECK(d.rule == "optimizer.unknown-dtype");
  d = direct(finalize->run, [](mr::Namespace& ns) { set(ns, "exp_avg_dtype", mr::Value("fp32")); });
  CHECK(d.rule == "");
}
