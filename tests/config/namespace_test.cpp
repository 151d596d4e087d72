// The namespace's provenance (config/namespace.h): a value validation derives over one the user gave stays the
// user's (Provenance::by_user), while describe() shows the derivation as before.
#include <catch2/catch.hpp>

#include "config/namespace.h"

using mr::Namespace;
using mr::Provenance;
using mr::Value;

TEST_CASE("namespace: a value derived over the user's keeps the user's origin; one derived over a default does not",
          "[namespace]") {
  Namespace ns;
  ns.set("moe_aux_loss_coeff", Value(0.1), {Provenance::Kind::Cli, "argv[3]"});
  ns.set("hysteresis", Value(int64_t{5}), {Provenance::Kind::Config, "job.yaml:4"});
  ns.set("no_load_optim", Value(), {});
  ns.set("rank", Value(int64_t{0}), {Provenance::Kind::Env, "RANK"});
  for (const char* d : {"moe_aux_loss_coeff", "hysteresis", "no_load_optim", "rank"})
    ns.derive(d, Value(true), "a rule");
  CHECK(ns.provenance("moe_aux_loss_coeff").given == Provenance::Kind::Cli);
  CHECK(ns.provenance("hysteresis").given == Provenance::Kind::Config);
  CHECK(ns.provenance("moe_aux_loss_coeff").by_user());
  CHECK(ns.provenance("hysteresis").by_user());
  CHECK_FALSE(ns.provenance("no_load_optim").by_user());  // validation's own choice (--skip-train)
  CHECK_FALSE(ns.provenance("rank").by_user());           // a launcher's variable
  // Derived twice: still the user's; what --explain shows is the derivation.
  ns.derive("moe_aux_loss_coeff", Value(0.2), "another rule");
  CHECK(ns.provenance("moe_aux_loss_coeff").given == Provenance::Kind::Cli);
  CHECK(ns.provenance("moe_aux_loss_coeff").describe() == "derived by another rule");
  // The user setting it again (a later file, the command line) is a plain user value.
  ns.set("moe_aux_loss_coeff", Value(0.3), {Provenance::Kind::Cli, "argv[5]"});
  CHECK(ns.provenance("moe_aux_loss_coeff").by_user());
  CHECK(ns.provenance("moe_aux_loss_coeff").describe() == "command line argv[5]");
  // A default replaced by a default stays nobody's.
  ns.set("no_load_optim", Value(false), {});
  CHECK_FALSE(ns.provenance("no_load_optim").by_user());
}
