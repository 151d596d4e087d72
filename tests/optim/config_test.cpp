// Kernel options from OptimizerConfig (no LibTorch in this file).
#include <catch2/catch.hpp>

#include "optim/config.h"

using namespace mr::optim;

TEST_CASE("kernel options follow the OptimizerConfig fields", "[optim][config]") {
  mr::OptimizerConfig c;
  AdamOptions a = adam_options(c);
  REQUIRE(a.beta1 == 0.9);
  REQUIRE(a.beta2 == 0.999);
  REQUIRE(a.eps == 1e-8);
  REQUIRE(a.decoupled_weight_decay);
  c.decoupled_weight_decay = false;
  REQUIRE_FALSE(adam_options(c).decoupled_weight_decay);
  REQUIRE(sgd_options(c).momentum == 0.9);
  REQUIRE_FALSE(sgd_options(c).nesterov);
  REQUIRE(lion_options(c).beta1 == 0.95);
  REQUIRE(lion_options(c).beta2 == 0.98);

  MuonOptions m = muon_options(c, {512, 128, 128});
  REQUIRE(m.momentum == 0.95);
  REQUIRE_FALSE(m.nesterov);
  REQUIRE(m.ns.coefficients == NsCoefficients::Quintic);
  REQUIRE(m.ns.steps == 5);
  REQUIRE(m.ns.precision == MatmulPrecision::Medium);
  REQUIRE(m.scale_mode == MuonScaleMode::Spectral);
  REQUIRE(m.extra_scale_factor == 1.0);
  REQUIRE(m.split_qkv);
  REQUIRE(m.qkv_split_shapes == std::vector<int64_t>{512, 128, 128});
  REQUIRE(m.tp_mode == MuonTpMode::Duplicated);
  REQUIRE(m.decoupled_weight_decay);  // TensorParallelMuon's use_decoupled_weight_decay is never set by Megatron
  REQUIRE(m.ns_batch_size == 1);
  REQUIRE(muon_scalar_optimizer(c) == ScalarOptimizer::Adam);
  c.muon_scalar_optimizer = "lion";
  REQUIRE(muon_scalar_optimizer(c) == ScalarOptimizer::Lion);

  c.muon_coefficient_type = "polar_express";
  c.muon_num_ns_steps = 8;
  c.muon_fp32_matmul_prec = "high";
  c.muon_scale_mode = "unit_rms_norm";
  c.muon_tp_mode = "blockwise";
  c.muon_nesterov = true;
  c.muon_ns_batch_size = 32;
  m = muon_options(c);
  REQUIRE(m.ns.coefficients == NsCoefficients::PolarExpress);
  REQUIRE(m.ns.steps == 8);
  REQUIRE(m.ns.precision == MatmulPrecision::High);
  REQUIRE(m.scale_mode == MuonScaleMode::UnitRmsNorm);
  REQUIRE(m.tp_mode == MuonTpMode::Blockwise);
  REQUIRE(m.nesterov);
  REQUIRE(m.ns_batch_size == 32);
  // --muon-use-syrk: Emerging-Optimizers' newton_schulz takes the SYRK step under "medium" precision only.
  REQUIRE_FALSE(m.ns.use_syrk);
  c.muon_use_syrk = true;
  REQUIRE_FALSE(muon_options(c).ns.use_syrk);
  c.muon_fp32_matmul_prec = "medium";
  REQUIRE(muon_options(c).ns.use_syrk);
  c.muon_fp32_matmul_prec = "high";
  c.muon_use_syrk = false;

  c.muon_tp_mode = "layer_sharded";
  REQUIRE(muon_options(c).tp_mode == MuonTpMode::LayerSharded);
  c.muon_tp_mode = "duplicated";
  c.muon_coefficient_type = "cubic5";
  c.muon_num_ns_steps = 4;
  REQUIRE_THROWS_WITH(muon_options(c), Catch::Contains("fixed 5-step"));
  c.muon_coefficient_type = "bogus";
  REQUIRE_THROWS_WITH(muon_options(c), Catch::Contains("unsupported muon coefficient type 'bogus'"));
}
