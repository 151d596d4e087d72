// The memory plan as stacked bars (lib/run/memory_picture.h).
#include <catch2/catch.hpp>

#include <cmath>
#include <string>

#include "run/memory_picture.h"

using namespace mr::run;
using Catch::Matchers::Contains;

namespace {
constexpr double GiB = 1024.0 * 1024 * 1024;
size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}
}  // namespace

TEST_CASE("memory picture: a bar per rank against the device's capacity", "[pictures][memory]") {
  std::vector<RankMemory> ranks;
  for (int64_t p = 0; p < 2; ++p)
    for (int64_t t = 0; t < 2; ++t) ranks.push_back({t, p, {10 * GiB, 20 * GiB, 20 * GiB, 40 * GiB}});
  ranks[3].mem.optimizer_state = 10 * GiB;  // (1, 1) fits in 80 GiB, the others do not
  ranks[3].mem.activations = 5 * GiB;
  const std::string s = memory_svg(ranks, 80 * GiB, "80GiB", "cfg.yaml: memory per rank", "sub");
  CHECK(count(s, "<g><title>(tp ") == 4);
  CHECK_THAT(s, Contains("<title>(tp 1, pp 1)\nweights: 10.00 GiB\ngradients: 20.00 GiB\nmain params: 20.00 GiB\n"
                         "optimizer state: 10.00 GiB\nactivations: 5.00 GiB\ntotal: 65.00 GiB</title>"));
  CHECK_THAT(s, Contains("total: 90.00 GiB (over 80GiB)"));
  // Three bars over capacity, the legend's box and the capacity line.
  CHECK(count(s, "stroke=\"#d62728\" stroke-width=\"2\"") == 3 + 1 + 1);
  CHECK_THAT(s, Contains(">device memory 80GiB</text>"));
  CHECK_THAT(s, Contains(">1,0</text>"));
  CHECK_THAT(s, Contains(">activations</text>"));  // in the legend
}

TEST_CASE("memory picture: optimizer state that is not modelled is left out and said so", "[pictures][memory]") {
  std::vector<RankMemory> ranks{{0, 0, {1 * GiB, 1 * GiB, 0, std::nan("")}}};
  const std::string s = memory_svg(ranks, 80 * GiB, "80GiB", "t", "s");
  CHECK_THAT(s, Contains("optimizer state: not modelled"));
  CHECK_THAT(s, Contains("total: 2.00 GiB</title>"));
  CHECK(s.find("nan") == std::string::npos);
}

TEST_CASE("memory picture: activations only where the estimate applies, named in the legend", "[pictures][memory]") {
  // Two pipeline stages: the first stage's rank carries Megatron's estimate, the second's does not.
  MemoryEstimate first{1 * GiB, 2 * GiB, 0, 4 * GiB, 3 * GiB};
  first.activation_estimate = "compute_activation_memory_without_sp";
  MemoryEstimate second = first;
  second.activations = 0;
  std::vector<RankMemory> ranks{{0, 0, first, true}, {0, 1, second, false}};
  const std::string s = memory_svg(ranks, 80 * GiB, "80GiB", "t", "s");
  CHECK_THAT(s, Contains("<title>(tp 0, pp 0)\nweights: 1.00 GiB\ngradients: 2.00 GiB\nmain params: 0.00 GiB\n"
                         "optimizer state: 4.00 GiB\nactivations: 3.00 GiB\ntotal: 10.00 GiB</title>"));
  CHECK_THAT(s, Contains("<title>(tp 0, pp 1)\nweights: 1.00 GiB\ngradients: 2.00 GiB\nmain params: 0.00 GiB\n"
                         "optimizer state: 4.00 GiB\nactivations: not estimated (Megatron estimates the first pipeline "
                         "stage)\ntotal: 7.00 GiB</title>"));
  CHECK_THAT(s, Contains(">(formula without SP)</text>"));
  CHECK_THAT(s, Contains(">first pipeline stage only</text>"));
  CHECK(s.find("not modelled") == std::string::npos);
  // One stage with sequence parallelism: the other formula, and nothing about stages.
  first.activation_estimate = "compute_activation_memory";
  const std::string one = memory_svg({{0, 0, first, true}}, 80 * GiB, "80GiB", "t", "s");
  CHECK_THAT(one, Contains(">(SP, selective recompute)</text>"));
  CHECK(one.find("first pipeline stage only") == std::string::npos);
}
