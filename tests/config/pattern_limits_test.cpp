// Limits of the layer-pattern language (lib/config/converters.h) and of hybrid layer patterns: a pattern is bounded
// as a whole (expression length, values in the result counting nested ones, values built while evaluating it),
// its integer arithmetic is checked, evaluation takes linear time, and a refused pattern is a usage error that
// names the flag and the limit. Every pattern-typed flag of the schema is covered.
#include <set>
#include <string>
#include <vector>

#include "config/schema.h"
#include "config/converters.h"
#include "support.h"

namespace {

using mrtest::run;
using mrtest::with;

// The flags whose type is a layer pattern (the schema's MoeFreq, LaFreq, NoRopeFreq, CompressRatios types).
std::vector<std::string> pattern_flags() {
  std::vector<std::string> out;
  for (const mr::Arg& a : mr::Schema::megatron().args()) {
    const mr::ArgType t = a.spec->type;
    if (t == mr::ArgType::MoeFreq || t == mr::ArgType::LaFreq || t == mr::ArgType::NoRopeFreq ||
        t == mr::ArgType::CompressRatios)
      out.push_back(a.flags.front());
  }
  return out;
}

std::string repeat(const std::string& s, size_t n) {
  std::string out;
  out.reserve(s.size() * n);
  for (size_t i = 0; i < n; ++i) out += s;
  return out;
}

std::string conv_error(const std::string& pattern) {
  try {
    mr::eval_pattern(pattern);
  } catch (const mr::ConvError& e) {
    return e.what();
  }
  return "";
}


}  // namespace

TEST_CASE("pattern limits: the schema's pattern-typed flags", "[patterns]") {
  const auto flags = pattern_flags();
  CHECK(std::set<std::string>(flags.begin(), flags.end()) ==
        std::set<std::string>{"--moe-layer-freq", "--window-attn-skip-freq", "--linear-attention-freq",
                              "--csa-compress-ratios", "--no-rope-freq"});
  CHECK(flags.size() == 5);
}

TEST_CASE("pattern limits: every pattern flag refuses huge, overflowing, nested and deep patterns by name", "[patterns]") {
  struct Bad {
    std::string pattern, fragment;
  };
  const std::vector<Bad> bad = {
      {"[[1]*1000000]*1000000", "expands to more than 1000000 values"},        // nested: 10^12 values
      {"[1]*(2147483648*2147483648)", "expands to more than 1000000 values"},  // 2^62 copies
      {"[1,1]*(2147483648*2147483648*2)", "integer overflow"},                 // 2^63: the count itself overflows
      {"[1]*(999999999999999999*999999999999999999)", "integer overflow"},
      {"[1]*(9223372036854775807+1)", "number too large"},                    // 19 digits
      {"[1]*(999999999999999999*9+999999999999999999*9)", "integer overflow"},  // + overflows
      {"[1]*1000000", "expands to more than 1000000 values"},
      {"[[[1]*100]*100]*101", "expands to more than 1000000 values"},         // 1020201 values, nested
      {repeat("[", 70) + repeat("]", 70), "nesting too deep"},
      {"[" + repeat("1,", 60000) + "1]", "longer than 100000 characters"},
      {"[1]*999990" + repeat("*1", 20000), "builds more than 4000000 values"},  // quadratic copying refused
  };
  for (const std::string& flag : pattern_flags()) {
    for (const Bad& b : bad) {
      INFO(flag << " " << b.pattern.substr(0, 80));
      auto r = run(with({flag, b.pattern}));
      CHECK(r.exit == 2);
      CHECK(r.message.find("argument " + flag + ": invalid pattern") != std::string::npos);
      CHECK(r.message.find(b.fragment) != std::string::npos);
      CHECK(r.message.size() < 400);  // a long pattern is abbreviated in the message
    }
    // The neighbour: a pattern at the limits parses (validation then decides, on its length and values).
    INFO(flag);
    auto ok = run(with({flag, "([1]*1+[0]*1)*1"}));
    CHECK(ok.rule != "usage");
  }
}

TEST_CASE("pattern limits: at the limits a pattern evaluates, with Python's semantics", "[patterns]") {
  CHECK(mr::eval_pattern("[1]*999999").as_list().size() == 999999);          // 1000000 values with the list
  CHECK(conv_error("[1]*999999").empty());
  CHECK(mr::eval_pattern("[[1]*1000]*999").as_list().size() == 999);         // 999 x 1001 + 1 = 1000000 values
  CHECK(conv_error("[[1]*1000]*1000").find("more than 1000000 values") != std::string::npos);
  CHECK(mr::eval_pattern("[1]*0").as_list().empty());                        // Python: a zero count gives []
  CHECK(mr::eval_pattern("[]*999999999999999999").as_list().empty());        // an empty list stays empty, in no time
  CHECK(mr::eval_pattern("[[]]*999999").as_list().size() == 999999);         // each [] is a value
  CHECK(conv_error("[[]]*1000000").find("more than 1000000 values") != std::string::npos);
  CHECK(mr::eval_pattern("(1000000000*1000000000)").as_int() == 1000000000000000000);
  CHECK(mr::eval_pattern("999999999999999999").as_int() == 999999999999999999);
  CHECK(mr::eval_pattern(repeat("[", 64) + "1" + repeat("]", 64)).is_list());
  CHECK(mr::eval_pattern("[" + repeat("1,", 49998) + "1]").as_list().size() == 49999);  // 99999 characters
}

TEST_CASE("pattern limits: the worst patterns under the limits evaluate, the ones past them are refused",
          "[patterns]") {
  // Each of these builds close to the limits. Their cost (linear: appends in place, refusal at the budget before
  // building) is measured by the benchmark input.pattern_worst against building the same values directly;
  // here, what they give. A quadratic or unbounded evaluation shows as the CTest entry's timeout.
  CHECK(mr::eval_pattern("[1]*999999").as_list().size() == 999999);
  CHECK(mr::eval_pattern("[[1]*1000]*999").as_list().size() == 999);
  CHECK(mr::eval_pattern("[1]*500000" + repeat("+[1]", 24000)).as_list().size() == 524000);  // appends in place
  CHECK(mr::eval_pattern("[1]*999990" + repeat("+[]", 30000)).as_list().size() == 999990);
  CHECK(conv_error("[1]*999990" + repeat("*1", 30000)).find("evaluating it builds more than") != std::string::npos);
  CHECK(conv_error("[[1]*1000000]*1000000").find("more than 1000000 values") != std::string::npos);
  CHECK(!conv_error("[" + repeat("1,", 60000) + "1]").empty());  // past the pattern length limit
}

TEST_CASE("hybrid layer patterns: linear in the pattern, abbreviated in messages, the MTP copies bounded",
          "[patterns][hybrid]") {
  // A long invalid pattern: the message quotes its start, not all of it.
  const std::string long_bad = repeat("M", 100000) + "x";
  auto bad = run(with({"--hybrid-layer-pattern", long_bad}));
  CHECK(bad.rule == "hybrid-pattern.invalid-symbol");
  CHECK(bad.message.size() < 500);
  CHECK(bad.message.find("(100001 bytes)") != std::string::npos);
  // Many MTP depths: compared one by one (no list of a million parts), quickly.
  std::string many = "M" + repeat("/M", 100000);
  auto r = run(with({"--hybrid-layer-pattern", many, "--position-embedding-type", "rope"}));
  CHECK(r["mtp_num_layers"].as_int() == 100000);
  auto differ = run(with({"--hybrid-layer-pattern", "M/M/M/E", "--position-embedding-type", "rope"}));
  CHECK(differ.rule == "hybrid-pattern.mtp-patterns-differ");
  CHECK(differ.message.find("depth 3 has 'E'") != std::string::npos);
  // The legacy MTP pattern copied --mtp-num-layers times: bounded (a sanity-stage rule: megatron-run's limit).
  auto huge = run(with({"--hybrid-layer-pattern", "M", "--mtp-hybrid-override-pattern", "M", "--mtp-num-layers",
                        "9223372036854775807", "--position-embedding-type", "rope"}));
  CHECK(huge.rule == "hybrid-pattern.too-large");
  CHECK(huge.message.find("4194304 characters") != std::string::npos);
  REQUIRE(!huge.out.diagnostics.empty());
  CHECK(huge.out.diagnostics.back().stage == mr::kStageSanity);
  auto fits = run(with({"--hybrid-layer-pattern", "M", "--mtp-hybrid-override-pattern", "M", "--mtp-num-layers", "4",
                        "--position-embedding-type", "rope"}));
  CHECK(fits.rule != "hybrid-pattern.too-large");
  CHECK(fits["hybrid_layer_pattern"].as_str() == "M/M/M/M/M");
}
