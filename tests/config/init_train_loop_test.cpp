// The init stage's training-loop check (lib/config/validate/init_train_loop.cpp): a weight-hash interval of 0, next
// to neighbours that pass (a positive interval, none).
#include "init_support.h"

TEST_CASE("init stage, training loop: a weight-hash interval of 0", "[init]") {
  const std::map<std::string, std::string> env = {{"WORLD_SIZE", "1"}};
  mrtest::Run bad = mrtest::run(mrtest::with({"--check-weight-hash-across-dp-replicas-interval", "0"}), env);
  INFO(bad.rule << ": " << bad.message);
  CHECK(bad.exit == 1);
  CHECK(bad.rule == "init.weight-hash-interval-positive");
  CHECK(bad.message.rfind("Megatron would fail in its training loop (train): "
                          "--check-weight-hash-across-dp-replicas-interval 0", 0) == 0);
  CHECK(bad.out.passed(mr::kStageValidateArgs));
  CHECK(bad.out.passed(mr::kStageSanity));
  CHECK_FALSE(bad.out.passed(mr::kStageInit));
  for (const char* every : {"1", "100"}) {
    mrtest::Run good = mrtest::run(mrtest::with({"--check-weight-hash-across-dp-replicas-interval", every}), env);
    INFO(every << ": " << good.rule << ": " << good.message);
    CHECK(good.exit == 0);
  }
  mrtest::Run none = mrtest::run(mrtest::base_args(), env);
  CHECK(none.exit == 0);
  CHECK(none.out.passed(mr::kStageInit));
  CHECK(mrtest::init_rules_of("validate/init_train_loop.cpp") ==
        std::set<std::string>{"init.weight-hash-interval-positive"});
}
