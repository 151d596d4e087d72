// The validation chain's checks of memory: activation recompute and activation offloading.
//
// For every rule a config that triggers it next to a neighbour that passes it, and derived values worked out
// by hand from the seed (../shared/spec/arguments.py). Most cases run a stretch of the chain (validate_support.h)
// so that a later section cannot mask what is tested; a few run one section on a namespace no command line
// can produce, or the whole chain.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "config/pipeline_layout.h"
#include "config/validate/section_functions.h"
#include "validate_support.h"

using namespace mrtest;

TEST_CASE("--recompute-activations means selective recompute", "[validate-memory]") {
  // seed arguments.py:541-543
  auto r = run(with({"--recompute-activations"}), kWorld1);
  CHECK(passes_opening(r));
  CHECK(r["recompute_granularity"] == mr::Value("selective"));
  CHECK_FALSE(r.has("recompute_activations"));
  r = run(mrtest::base_args(), kWorld1);
  CHECK(r["recompute_granularity"].is_none());
}

// ---------------------------------------------------------------------------------------------------------
// Activation recomputing (seed arguments.py:1227-1246 validate_args)

TEST_CASE("distributed recompute needs TP > 1, full granularity, a method and torch >= 1.10", "[validate-memory]") {
  const std::vector<std::string> dist = {"--distribute-saved-activations", "--recompute-granularity", "full",
                                         "--recompute-method", "uniform"};
  const Env tp2 = {{"WORLD_SIZE", "2"}, {"CUDA_DEVICE_MAX_CONNECTIONS", "1"}};
  // seed arguments.py:1229
  auto r = upto_sequence_packing(mrtest::with(dist));
  CHECK(r.exit == 1);
  CHECK(r.rule == "recompute.distribute-needs-tensor-parallel");
  // Neighbour: all four conditions hold.
  auto ok =
      upto_sequence_packing(mrtest::with(dist + std::vector<std::string>{"--tensor-model-parallel-size", "2"}), tp2);
  CHECK(ok.exit == 0);
  CHECK(ok.message == "");
  // seed arguments.py:1232
  r = upto_sequence_packing(mrtest::with({"--distribute-saved-activations", "--tensor-model-parallel-size", "2",
                                          "--recompute-method", "uniform"}),
                            tp2);
  CHECK(r.rule == "recompute.distribute-needs-full-granularity");
  // seed arguments.py:1235
  r = upto_sequence_packing(mrtest::with({"--distribute-saved-activations", "--tensor-model-parallel-size", "2",
                          "--recompute-granularity", "full"}),
            tp2);
  CHECK(r.rule == "recompute.distribute-needs-method");
  // seed arguments.py:1238
  auto old_torch = target("sm_90", "2.20.2", "1.9.0");
  r = upto_sequence_packing(mrtest::with(dist + std::vector<std::string>{"--tensor-model-parallel-size", "2"}), tp2,
                            &old_torch);
  CHECK(r.rule == "recompute.distribute-torch-version");
}

TEST_CASE("selective recompute takes no method", "[validate-memory]") {
  // seed arguments.py:1243
  auto r = upto_sequence_packing(mrtest::with({"--recompute-granularity", "selective", "--recompute-method", "block"}));
  CHECK(r.exit == 1);
  CHECK(r.rule == "recompute.selective-without-method");
  auto ok = upto_sequence_packing(mrtest::with({"--recompute-granularity", "selective"}));
  CHECK(ok.exit == 0);
  ok = upto_sequence_packing(mrtest::with({"--recompute-granularity", "full", "--recompute-method", "block"}));
  CHECK(ok.exit == 0);
}

TEST_CASE("fine-grained activation offloading", "[validate-memory]") {
  const Args fg = {"--fine-grained-activation-offloading"};
  fails(from_data_blend_with(plus(fg, {"--transformer-impl", "local"}), {{"NVTE_CPU_OFFLOAD_V1", "1"}}),
        "activation-offloading.needs-transformer-engine");
  fails(from_data_blend_with(fg), "activation-offloading.nvte-cpu-offload-v1");
  fails(from_data_blend_with(fg, {{"NVTE_CPU_OFFLOAD_V1", "0"}}), "activation-offloading.nvte-cpu-offload-v1");
  passes(from_data_blend_with(fg, {{"NVTE_CPU_OFFLOAD_V1", "1"}}));
  auto t29 = te("2.9.0");
  passes(from_data_blend_with(fg, {}, &t29));
}

TEST_CASE("derivation: cpu_offloading", "[validate-memory]") {
  // seed arguments.py:1877-1879 validate_args: only set (to True) when layers are offloaded; otherwise absent.
  auto r = from_data_blend_with({"--cpu-offloading-num-layers", "2"});
  passes(r);
  REQUIRE(r.has("cpu_offloading"));
  CHECK(r["cpu_offloading"] == mr::Value(true));
  CHECK_FALSE(from_data_blend_with({}).has("cpu_offloading"));
  CHECK_FALSE(from_data_blend_with({"--cpu-offloading-num-layers", "0"}).has("cpu_offloading"));
}
