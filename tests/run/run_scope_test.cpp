// Which flags the synthetic run acts on (run/run_scope.h): every flag of the schema is either acted on or has a
// reason, and the notice names exactly the flags the user set that the run does not act on.
#include <catch2/catch.hpp>

#include <set>

#include "../distributed/proc.h"
#include "config/schema.h"
#include "run/run_scope.h"

using namespace mr;

TEST_CASE("every flag of the schema is acted on by the run or has a reason", "[run][scope]") {
  std::vector<std::string> holes;
  size_t acted = 0, reasoned = 0;
  for (const Arg& a : Schema::megatron().args()) {
    const std::optional<ArgId> id = find_arg(a.dest());
    REQUIRE(id);
    if (run::acts_on(*id)) {
      ++acted;
      CHECK(run::why_not_acted_on(*id, a.spec->group) == nullptr);
    } else if (run::why_not_acted_on(*id, a.spec->group)) {
      ++reasoned;
    } else {
      holes.push_back(std::string(a.flags[0]) + " (group '" + a.spec->group + "')");
    }
  }
  INFO("flags neither acted on nor listed with a reason (lib/run/run_scope.cpp):");
  for (const std::string& h : holes) INFO(h);
  CHECK(holes.empty());
  CHECK(acted > 100);
  CHECK(acted + reasoned == Schema::megatron().args().size());
}

TEST_CASE("the notice names the flags the user set that the run does not act on, with the reason",
          "[run][scope]") {
  mrtest::TempDir dir;
  std::vector<mrtest::Proc> p = {mrtest::start(
      {mrtest::megatron_run(), "--config", std::string(MR_SOURCE_DIR) + "/configs/default.yaml", "--train-iters", "3",
       "--eval-interval", "5", "--tensorboard-dir", dir / "tb", "--log-params-norm", "--log-num-zeros-in-grad"},
      {}, dir, "notice")};
  mrtest::wait_all(p, std::chrono::seconds(120));
  INFO(p[0].out() << p[0].err());
  REQUIRE(p[0].exit_code() == 0);
  const std::string err = p[0].err();
  CHECK_THAT(err, Catch::Contains("notice: the synthetic training run does not act on --eval-interval (no evaluation in a synthetic run)"));
  CHECK_THAT(err, Catch::Contains("--tensorboard-dir (no TensorBoard writer in the synthetic run)"));
  // Once, from the spawner, not once per rank; and not for flags it does act on.
  CHECK(err.find("notice:") == err.rfind("notice:"));
  CHECK_THAT(err, !Catch::Contains("--log-params-norm") && !Catch::Contains("--lr ") && !Catch::Contains("--mock-data"));
  // The two logging flags it does act on: Megatron's fields in the iteration line.
  CHECK_THAT(p[0].out(), Catch::Contains("| num zeros: ") && Catch::Contains("| params norm: "));
}

TEST_CASE("the default job's notice names only --seq-length", "[run][scope]") {
  mrtest::TempDir dir;
  std::vector<mrtest::Proc> p = {mrtest::start(
      {mrtest::megatron_run(), "--config", std::string(MR_SOURCE_DIR) + "/configs/default.yaml", "--train-iters", "3"},
      {}, dir, "default")};
  mrtest::wait_all(p, std::chrono::seconds(120));
  INFO(p[0].out() << p[0].err());
  REQUIRE(p[0].exit_code() == 0);
  // Megatron requires a sequence length; a run without a forward pass has no use for it.
  CHECK_THAT(p[0].err(), Catch::Contains("notice: the synthetic training run does not act on --seq-length (no model "
                                         "forward/backward: sequences have no effect on synthetic gradients)\n"));
}
