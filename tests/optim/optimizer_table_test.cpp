// The optimizer table (optim/optimizer_table.h): a row for every --optimizer choice, the state layouts the run
// and the memory estimate rely on.
#include <catch2/catch.hpp>

#include "config/schema.h"
#include "optim/optimizer_table.h"

using namespace mr::optim;

TEST_CASE("optimizer table: a row for every --optimizer choice", "[optim][table]") {
  const auto args = mr::Schema::megatron().find_dest("optimizer");
  REQUIRE(args.size() == 1);
  for (const mr::Value& choice : args.front()->choices) {
    INFO(choice.as_str());
    mr::arg::Optimizer id{};
    REQUIRE(mr::arg::from_string(choice.as_str(), id));
    const OptimizerInfo& o = optimizer_info(id);
    CHECK(o.id == id);
    CHECK(o.name == choice.as_str());
  }
}

TEST_CASE("optimizer table: kernels and state", "[optim][table]") {
  const OptimizerInfo& adam = optimizer_info(mr::arg::Optimizer::adam);
  CHECK(adam.kernel == Kernel::Adam);
  CHECK(adam.state.fp32_bytes_per_param() == 8);
  CHECK(optimizer_info(mr::arg::Optimizer::sgd).state.fp32_bytes_per_param() == 4);
  const OptimizerInfo& lion = optimizer_info(mr::arg::Optimizer::lion);
  CHECK(lion.state.fp32_bytes_per_param() == 4);
  // Megatron's emerging-optimizer defaults: 2-D weights to Lion, the rest (norms, biases, embeddings) to Adam.
  CHECK(lion.scalar_rule == ScalarRule::EmergingAdam);
  CHECK(takes_own_rule(lion, 2, false, false));  // use_muon does not matter to lion
  CHECK_FALSE(takes_own_rule(lion, 1, false, true));
  CHECK_FALSE(takes_own_rule(lion, 2, true, true));
  CHECK(state_of(lion, false).buffers() == 2);
  const OptimizerInfo& muon = optimizer_info(mr::arg::Optimizer::muon);
  CHECK(muon.kernel == Kernel::Muon);
  CHECK(muon.scalar_rule == ScalarRule::MuonScalarOptimizer);
  CHECK(state_of(muon, true).buffers() == 1);   // the momentum buffer
  CHECK(state_of(muon, false).buffers() == 2);  // the scalar parameters: Adam's moments
  CHECK(optimizer_info(mr::arg::Optimizer::dist_muon).kernel == Kernel::Muon);  // muon, distributed
  // SOAP: the emerging defaults too; its matrices keep two moments and the preconditioner.
  const OptimizerInfo& soap = optimizer_info(mr::arg::Optimizer::soap);
  CHECK(soap.kernel == Kernel::Soap);
  CHECK(soap.scalar_rule == ScalarRule::EmergingAdam);
  CHECK(state_of(soap, true).kronecker);
  CHECK(state_of(soap, true).buffers() == 2);
  CHECK_FALSE(state_of(soap, false).kronecker);
  CHECK(kronecker_floats(4, 3) == 2 * (16 + 9) + 7);
}
