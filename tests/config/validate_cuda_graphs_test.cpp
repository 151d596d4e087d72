// The validation chain's checks of CUDA graphs: CUDA-graph module normalisation and runtime requirements.
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

TEST_CASE("--enable-cuda-graph / --external-cuda-graph", "[validate-cuda-graphs]") {
  // seed arguments.py:546: not with --cuda-graph-impl.
  CHECK(fails_with(run(with({"--enable-cuda-graph", "--cuda-graph-impl", "local"}), kWorld1),
                   "deprecated.cuda-graph-flag-with-impl"));
  CHECK(fails_with(run(with({"--external-cuda-graph", "--cuda-graph-impl", "transformer_engine"}), kWorld1),
                   "deprecated.cuda-graph-flag-with-impl"));
  // seed arguments.py:549: not both.
  CHECK(fails_with(run(with({"--enable-cuda-graph", "--external-cuda-graph"}), kWorld1),
                   "deprecated.cuda-graph-flags-exclusive"));
  // seed arguments.py:553-565: translated and deleted; --cuda-graph-impl none given explicitly is fine.
  auto r = run(with({"--enable-cuda-graph", "--cuda-graph-impl", "none"}), kWorld1);
  CHECK(passes_opening(r));
  CHECK(r["cuda_graph_impl"] == mr::Value("local"));
  CHECK_FALSE(r.has("enable_cuda_graph"));
  CHECK(r["external_cuda_graph"] == mr::Value(false));
  // seed 580: local graphs default the inference scope to layer.
  CHECK(r["inference_cuda_graph_scope"] == mr::Value("InferenceCudaGraphScope.layer"));
  r = run(with({"--external-cuda-graph"}), kWorld1);
  CHECK(passes_opening(r));
  CHECK(r["cuda_graph_impl"] == mr::Value("transformer_engine"));
  CHECK_FALSE(r.has("external_cuda_graph"));
  CHECK(r["enable_cuda_graph"] == mr::Value(false));
  CHECK(r["inference_cuda_graph_scope"] == mr::Value("InferenceCudaGraphScope.none"));
}

TEST_CASE("--cuda-graph-scope is forwarded to --cuda-graph-modules", "[validate-cuda-graphs]") {
  // seed arguments.py:568: not together with --cuda-graph-modules.
  CHECK(fails_with(run(with({"--cuda-graph-scope", "attn", "--cuda-graph-modules", "mlp"}), kWorld1),
                   "deprecated.cuda-graph-scope-with-modules"));
  // seed arguments.py:571-575: warned, forwarded, deleted.
  auto r = run(with({"--cuda-graph-impl", "transformer_engine", "--cuda-graph-scope", "attn", "mlp"}), kWorld1);
  CHECK(passes_opening(r));
  CHECK(r.warned("deprecated.cuda-graph-scope"));
  CHECK(r["cuda_graph_modules"] == str_list({"CudaGraphModule.attn", "CudaGraphModule.mlp"}));
  CHECK_FALSE(r.has("cuda_graph_scope_deprecated"));
  r = run(with({"--cuda-graph-impl", "transformer_engine", "--cuda-graph-modules", "attn"}), kWorld1);
  CHECK_FALSE(r.warned("deprecated.cuda-graph-scope"));
}

// ---------------------------------------------------------------------------------------------------------------
// seed 577-588 with 286-325: CUDA-graph module and inference-scope normalisation.

TEST_CASE("cuda_graph_modules normalisation", "[validate-cuda-graphs]") {
  struct Case {
    const char* why;
    std::vector<std::string> extra;
    std::vector<std::string> modules;
    const char* impl;
    const char* scope;
  };
  const std::vector<Case> cases = {
      // seed arguments.py:319 + 580: empty list, impl none -> scope none.
      {"defaults", {}, {}, "none", "InferenceCudaGraphScope.none"},
      // enum members kept in order.
      {"modules",
       {"--cuda-graph-impl", "transformer_engine", "--cuda-graph-modules", "attn", "moe_router"},
       {"CudaGraphModule.attn", "CudaGraphModule.moe_router"},
       "transformer_engine",
       "InferenceCudaGraphScope.none"},
      // cuda_graph_config.py normalize_cuda_graph_modules: full -> [] (whole layer).
      {"full",
       {"--cuda-graph-impl", "local", "--cuda-graph-modules", "full"},
       {},
       "local",
       "InferenceCudaGraphScope.layer"},
      // full_iteration migrates to --cuda-graph-impl full_iteration (seed arguments.py:317).
      {"full_iteration",
       {"--cuda-graph-modules", "full_iteration"},
       {},
       "full_iteration",
       "InferenceCudaGraphScope.none"},
      {"full_iteration + attn",
       {"--cuda-graph-impl", "local", "--cuda-graph-modules", "attn", "full_iteration"},
       {"CudaGraphModule.attn"},
       "full_iteration",
       "InferenceCudaGraphScope.none"},
      // full_iteration_inference with local graphs migrates to scope block.
      {"full_iteration_inference local",
       {"--cuda-graph-impl", "local", "--cuda-graph-modules", "full_iteration_inference"},
       {},
       "local",
       "InferenceCudaGraphScope.block"},
      // ... and does nothing with impl none (seed arguments.py:303-309).
      {"full_iteration_inference none",
       {"--cuda-graph-modules", "full_iteration_inference"},
       {},
       "none",
       "InferenceCudaGraphScope.none"},
      // explicit scope with local graphs.
      {"local block",
       {"--cuda-graph-impl", "local", "--inference-cuda-graph-scope", "block"},
       {},
       "local",
       "InferenceCudaGraphScope.block"},
  };
  for (const Case& c : cases) {
    INFO(c.why);
    auto r = run(with(c.extra), kWorld1);
    CHECK(passes_opening(r));
    CHECK(r["cuda_graph_modules"] == str_list(c.modules));
    CHECK(r["cuda_graph_impl"] == mr::Value(c.impl));
    CHECK(r["inference_cuda_graph_scope"] == mr::Value(c.scope));
  }
}

TEST_CASE("cuda_graph_modules warnings", "[validate-cuda-graphs]") {
  // seed arguments.py:296-297
  CHECK(run(with({"--cuda-graph-impl", "local", "--cuda-graph-modules", "full"}), kWorld1)
            .warned("cuda-graph-modules.full-deprecated"));
  // seed arguments.py:303-309
  auto r = run(with({"--cuda-graph-modules", "full_iteration_inference"}), kWorld1);
  CHECK(r.warned("cuda-graph-modules.deprecated-no-effect"));
  CHECK_FALSE(r.warned("cuda-graph-modules.deprecated-migrated"));
  // seed arguments.py:311-317
  r = run(with({"--cuda-graph-modules", "full_iteration"}), kWorld1);
  CHECK(r.warned("cuda-graph-modules.deprecated-migrated"));
  CHECK_FALSE(r.warned("cuda-graph-modules.deprecated-no-effect"));
  // Neighbour: plain modules warn about nothing.
  r = run(with({"--cuda-graph-impl", "local", "--cuda-graph-modules", "attn"}), kWorld1);
  CHECK_FALSE(r.warned("cuda-graph-modules.full-deprecated"));
  CHECK_FALSE(r.warned("cuda-graph-modules.deprecated-migrated"));
}

TEST_CASE("cuda_graph_modules errors", "[validate-cuda-graphs]") {
  // normalize_cuda_graph_modules: full only on its own.
  CHECK(fails_with(run(with({"--cuda-graph-impl", "local", "--cuda-graph-modules", "full", "attn"}), kWorld1),
                   "cuda-graph-modules.full-alone"));
  // validate_deprecated_cuda_graph_modules_migration_inputs: one kind of deprecated word.
  CHECK(fails_with(run(with({"--cuda-graph-modules", "full_iteration", "full_iteration_inference"}), kWorld1),
                   "cuda-graph-modules.one-deprecated-word"));
  CHECK(passes_opening(run(with({"--cuda-graph-modules", "full_iteration", "full_iteration"}), kWorld1)));
  // full_iteration: impl none/local/full_iteration, inference scope unset or none.
  CHECK(fails_with(run(with({"--cuda-graph-impl", "transformer_engine", "--cuda-graph-modules", "full_iteration"}),
                       kWorld1),
                   "cuda-graph-modules.full-iteration-impl"));
  CHECK(fails_with(run(with({"--cuda-graph-impl", "local", "--cuda-graph-modules", "full_iteration",
                             "--inference-cuda-graph-scope", "layer"}),
                       kWorld1),
                   "cuda-graph-modules.full-iteration-scope-none"));
  CHECK(passes_opening(run(with({"--cuda-graph-impl", "full_iteration", "--cuda-graph-modules", "full_iteration",
                                "--inference-cuda-graph-scope", "none"}),
                          kWorld1)));
  // full_iteration_inference: impl none/local, inference scope unset or block.
  CHECK(fails_with(run(with({"--cuda-graph-impl", "transformer_engine", "--cuda-graph-modules",
                             "full_iteration_inference"}),
                       kWorld1),
                   "cuda-graph-modules.full-iteration-inference-impl"));
  CHECK(fails_with(run(with({"--cuda-graph-impl", "local", "--cuda-graph-modules", "full_iteration_inference",
                             "--inference-cuda-graph-scope", "layer"}),
                       kWorld1),
                   "cuda-graph-modules.full-iteration-inference-scope-block"));
  CHECK(passes_opening(run(with({"--cuda-graph-impl", "local", "--cuda-graph-modules", "full_iteration_inference",
                                "--inference-cuda-graph-scope", "block"}),
                          kWorld1)));
}

TEST_CASE("cuda_graph_modules values the command line cannot produce", "[validate-cuda-graphs]") {
  // normalize_cuda_graph_modules: CudaGraphModule[name] of an unknown name, or a non-string value.
  auto d = direct(mr::section::cuda_graph_normalize, mrtest::base_args(),
                  [](mr::Namespace& ns) { ns.set("cuda_graph_modules", str_list({"bogus"}), {}); });
  CHECK(d.rule == "cuda-graph-modules.known-module");
  d = direct(mr::section::cuda_graph_normalize, mrtest::base_args(),
             [](mr::Namespace& ns) { ns.set("cuda_graph_modules", mr::Value(mr::List{mr::Value(3)}), {}); });
  CHECK(d.rule == "cuda-graph-modules.known-module");
  // A comma-separated string of plain names is split and mapped to members.
  d = direct(mr::section::cuda_graph_normalize, mrtest::base_args(),
             [](mr::Namespace& ns) { ns.set("cuda_graph_modules", mr::Value("attn,mlp"), {}); });
  CHECK(d.rule.empty());
  CHECK(d["cuda_graph_modules"] == str_list({"CudaGraphModule.attn", "CudaGraphModule.mlp"}));
}

TEST_CASE("--inference-cuda-graph-scope must suit --cuda-graph-impl", "[validate-cuda-graphs]") {
  // seed arguments.py:581-588 (ALLOWED_INFERENCE_SCOPES)
  CHECK(fails_with(run(with({"--inference-cuda-graph-scope", "layer"}), kWorld1),
                   "cuda-graph-modules.inference-scope-for-impl"));
  CHECK(fails_with(run(with({"--cuda-graph-impl", "local", "--inference-cuda-graph-scope", "none"}), kWorld1),
                   "cuda-graph-modules.inference-scope-for-impl"));
  CHECK(fails_with(run(with({"--cuda-graph-impl", "transformer_engine", "--inference-cuda-graph-scope", "block"}),
                       kWorld1),
                   "cuda-graph-modules.inference-scope-for-impl"));
  CHECK(passes_opening(run(with({"--cuda-graph-impl", "local", "--inference-cuda-graph-scope", "layer"}), kWorld1)));
  CHECK(passes_opening(run(with({"--inference-cuda-graph-scope", "none"}), kWorld1)));
}

// ---------------------------------------------------------------------------------------------------------------
// seed 1881-1925: CUDA graphs, multi-latent attention, MoE latent projections

TEST_CASE("CUDA graphs: TE RNG tracker and the allocator environment", "[validate-cuda-graphs]") {
  auto r = from_data_blend_with({"--cuda-graph-impl", "local"});
  passes(r);
  CHECK(r.warned("cuda-graph-runtime.te-rng-tracker-enabled"));
  CHECK_FALSE(from_data_blend_with({"--cuda-graph-impl", "local", "--te-rng-tracker"})
                  .warned("cuda-graph-runtime.te-rng-tracker-enabled"));
  CHECK_FALSE(from_data_blend_with({}).warned("cuda-graph-runtime.te-rng-tracker-enabled"));

  const Env expandable = {{"PYTORCH_CUDA_ALLOC_CONF", "max_split_size_mb:128,expandable_segments:True"}};
  fails(from_data_blend_with({"--cuda-graph-impl", "transformer_engine"}, expandable),
        "cuda-graph-runtime.expandable-segments-nccl-register");
  Env registered = expandable;
  registered["NCCL_GRAPH_REGISTER"] = "0";
  passes(from_data_blend_with({"--cuda-graph-impl", "transformer_engine"}, registered));
  passes(from_data_blend_with({"--cuda-graph-impl", "local"}, expandable));
  passes(from_data_blend_with({"--cuda-graph-impl", "transformer_engine"},
                              {{"PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:False"}}));
}

TEST_CASE("derivation: te_rng_tracker", "[validate-cuda-graphs]") {
  struct Case {
    Args extra;
    bool expected;
  };
  // seed arguments.py:1882-1888 validate_args: CUDA graphs with TE (as model or graph implementation) need it
  const Case cases[] = {
      {{}, false},
      {{"--cuda-graph-impl", "local"}, true},
      {{"--cuda-graph-impl", "local", "--transformer-impl", "local"}, false},
      {{"--cuda-graph-impl", "transformer_engine", "--transformer-impl", "local"}, true},
      {{"--cuda-graph-impl", "full_iteration", "--transformer-impl", "local"}, false},
      {{"--te-rng-tracker"}, true},
  };
  for (const auto& c : cases) {
    auto r = from_data_blend_with(c.extra);
    passes(r);
    CHECK(r["te_rng_tracker"] == mr::Value(c.expected));
  }
}

TEST_CASE("CUDA graphs: full iteration and the MoE shortcut connection", "[validate-cuda-graphs]") {
  fails(from_data_blend_with({"--cuda-graph-impl", "full_iteration", "--cuda-graph-modules", "attn"}),
        "cuda-graph-runtime.full-iteration-no-modules");
  passes(from_data_blend_with({"--cuda-graph-impl", "full_iteration"}));
  passes(from_data_blend_with({"--cuda-graph-impl", "local", "--cuda-graph-modules", "attn"}));

  fails(from_data_blend_with({"--moe-shortcut-connection", "--cuda-graph-impl", "local"}),
        "cuda-graph-runtime.moe-shortcut-connection");
  fails(from_data_blend_with({"--moe-shortcut-connection", "--cuda-graph-impl", "transformer_engine",
                              "--inference-cuda-graph-scope", "block"}),
        "cuda-graph-runtime.moe-shortcut-connection");
  fails(from_data_blend_with(
            {"--moe-shortcut-connection", "--cuda-graph-impl", "local", "--inference-cuda-graph-scope", "layer"}),
        "cuda-graph-runtime.moe-shortcut-connection");
  passes(from_data_blend_with(
      {"--moe-shortcut-connection", "--cuda-graph-impl", "local", "--inference-cuda-graph-scope", "block"}));
  passes(from_data_blend_with({"--moe-shortcut-connection"}));
  // The normalised enum spelling (cuda-graph-normalize) is recognised too.
  passes(from_data_blend_with(
      {"--moe-shortcut-connection", "--cuda-graph-impl", "local"}, {}, nullptr,
      [](mr::Namespace& ns) { ns.derive("inference_cuda_graph_scope", mr::Value("InferenceCudaGraphScope.block")); }));
  fails(from_data_blend_with({"--moe-shortcut-connection", "--cuda-graph-impl", "local"}, {}, nullptr,
               [](mr::Namespace& ns) {
                 ns.derive("inference_cuda_graph_scope", mr::Value("InferenceCudaGraphScope.none"));
               }),
        "cuda-graph-runtime.moe-shortcut-connection");
}
