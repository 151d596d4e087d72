// The validation chain's checks of MoE: MoE spec, expert parallelism, router arguments, upcycling.
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

// ---------------------------------------------------------------------------------------------------------
// MoE spec, expert parallelism and router arguments (seed arguments.py:1496-1513 validate_args)

TEST_CASE("MoE spec defaults", "[validate-moe]") {
  // seed arguments.py:1497-1498
  auto r = upto_sequence_packing(mrtest::with({"--num-experts", "0"}));
  CHECK(r.exit == 0);
  CHECK(r["num_experts"].is_none());
  CHECK(r["moe_ffn_hidden_size"].is_none());
  CHECK_FALSE(r.warned("moe-spec.ffn-hidden-size-default"));
  // seed arguments.py:1499-1501: ffn_hidden_size = 4 * 64 = 256 (seed 1160)
  r = upto_sequence_packing(mrtest::with({"--num-experts", "4"}));
  CHECK(r["moe_ffn_hidden_size"].as_int() == 256);
  CHECK(r.warned("moe-spec.ffn-hidden-size-default"));
  r = upto_sequence_packing(mrtest::with({"--num-experts", "4", "--ffn-hidden-size", "96"}));
  CHECK(r["moe_ffn_hidden_size"].as_int() == 96);
  r = upto_sequence_packing(mrtest::with({"--num-experts", "4", "--moe-ffn-hidden-size", "32"}));
  CHECK(r["moe_ffn_hidden_size"].as_int() == 32);
  CHECK_FALSE(r.warned("moe-spec.ffn-hidden-size-default"));
}

TEST_CASE("expert parallelism needs a divisible number of experts", "[validate-moe]") {
  const Env w2 = {{"WORLD_SIZE", "2"}};
  // seed arguments.py:1505
  auto r = upto_sequence_packing(mrtest::with({"--expert-model-parallel-size", "2"}), w2);
  CHECK(r.exit == 1);
  CHECK(r.rule == "expert-parallel.needs-num-experts");
  // --num-experts 0 became None just before (seed 1497)
  r = upto_sequence_packing(mrtest::with({"--expert-model-parallel-size", "2", "--num-experts", "0"}), w2);
  CHECK(r.rule == "expert-parallel.needs-num-experts");
  // seed arguments.py:1506
  r = upto_sequence_packing(mrtest::with({"--expert-model-parallel-size", "2", "--num-experts", "3"}), w2);
  CHECK(r.rule == "expert-parallel.experts-divisible");
  CHECK(upto_sequence_packing(mrtest::with({"--expert-model-parallel-size", "2", "--num-experts", "4"}), w2).exit == 0);
  CHECK(upto_sequence_packing(mrtest::with({"--num-experts", "3"})).exit == 0);  // ep = 1: any count
}

TEST_CASE("single-valued router arguments are unwrapped", "[validate-moe]") {
  // seed arguments.py:1510-1513
  auto r = upto_sequence_packing(mrtest::base_args());
  CHECK(r["moe_router_load_balancing_type"] == mr::Value("aux_loss"));
  CHECK(r["moe_aux_loss_coeff"].is_float());
  r = upto_sequence_packing(
      mrtest::with({"--moe-router-load-balancing-type", "seq_aux_loss", "--moe-aux-loss-coeff", "0.01"}));
  CHECK(r["moe_router_load_balancing_type"] == mr::Value("seq_aux_loss"));
  CHECK(r["moe_aux_loss_coeff"].is_float());
  CHECK(r["moe_aux_loss_coeff"].as_float() == Approx(0.01));
  r = upto_sequence_packing(mrtest::with(
      {"--moe-router-load-balancing-type", "seq_aux_loss", "aux_loss", "--moe-aux-loss-coeff", "0.01", "0.001"}));
  CHECK(r["moe_router_load_balancing_type"] == strs({"seq_aux_loss", "aux_loss"}));
  CHECK(r["moe_aux_loss_coeff"].is_list());
  CHECK(r["moe_aux_loss_coeff"].as_list().size() == 2);
}

TEST_CASE("MoE upcycling", "[validate-moe]") {
  fails(from_data_blend_with({"--moe-use-upcycling"}), "upcycling.save-required");
  auto r = from_data_blend_with({"--moe-use-upcycling", "--save", "/ckpt"});
  passes(r);
  CHECK(r.warned("upcycling.no-load-optim"));
  CHECK(r.warned("upcycling.no-load-rng"));
  r = from_data_blend_with({"--moe-use-upcycling", "--save", "/ckpt", "--no-load-optim", "--no-load-rng"});
  passes(r);
  CHECK_FALSE(r.warned("upcycling.no-load-optim"));
  CHECK_FALSE(r.warned("upcycling.no-load-rng"));
}
