// The init stage's optimizer-factory check (lib/config/validate/init_optimizer.cpp): an emerging optimizer with
// fp16, the precision-aware optimizer without the distributed one, next to neighbours that pass (the same optimizer
// with bf16, adam and sgd with fp16; the distributed optimizer added).
#include "init_support.h"

namespace {

using mrtest::InitCase;

const std::vector<InitCase> kCases = {
    {"init.emerging-optimizer-fp16", {"--optimizer", "lion", "--fp16"}, {"--optimizer", "lion", "--bf16"}, {},
     "(get_megatron_optimizer): --optimizer lion takes Megatron's emerging-optimizer path, which does not support "
     "--fp16"},
    {"init.emerging-optimizer-fp16", {"--optimizer", "muon", "--fp16"}, {"--optimizer", "adam", "--fp16"}, {},
     "--optimizer muon"},
    {"init.emerging-optimizer-fp16", {"--optimizer", "adaptive_muon", "--fp16"}, {"--optimizer", "sgd", "--fp16"},
     {}, "train with --bf16, or use --optimizer adam or sgd with --fp16"},
    {"init.precision-aware-needs-distributed-optimizer", {"--bf16", "--use-precision-aware-optimizer"},
     {"--bf16", "--use-precision-aware-optimizer", "--use-distributed-optimizer"}, {},
     "(get_megatron_optimizer): --use-precision-aware-optimizer is only supported with the distributed optimizer"},
    {"init.precision-aware-needs-distributed-optimizer",
     {"--use-precision-aware-optimizer", "--exp-avg-dtype", "bf16"},
     {"--use-precision-aware-optimizer", "--exp-avg-dtype", "bf16", "--use-distributed-optimizer"}, {},
     "add --use-distributed-optimizer"},
    {"init.fp16-min-loss-scale-above-initial", {"--fp16", "--min-loss-scale", "1e6", "--initial-loss-scale", "1024"},
     {"--fp16", "--min-loss-scale", "1e6", "--initial-loss-scale", "1024", "--loss-scale", "512"}, {},
     "(get_megatron_optimizer): --min-loss-scale (1000000.0) is above --initial-loss-scale (1024.0): the fp16 dynamic "
     "loss scaler asserts min_scale <= initial_scale"},
    {"init.fp16-min-loss-scale-above-initial", {"--fp16", "--min-loss-scale", "2048", "--initial-loss-scale", "1024"},
     {"--bf16", "--min-loss-scale", "2048", "--initial-loss-scale", "1024"}, {}, "--min-loss-scale (2048.0)"},
};

}  // namespace

TEST_CASE("init stage, optimizer factory: each rule fires next to a neighbour that passes", "[init]") {
  std::set<std::string> seen = mrtest::check_init_cases(kCases);
  for (const std::string& id : mrtest::init_rules_of("validate/init_optimizer.cpp")) {
    INFO(id << " has no case");
    CHECK(seen.count(id) == 1);
  }
}
