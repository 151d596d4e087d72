// Pictures of a rank layout (lib/parallel/layout_picture.h): where each rank sits, the SVG grid, the DOT graph.
#include <catch2/catch.hpp>

#include <regex>
#include <set>
#include <string>

#include "parallel/layout_picture.h"

using namespace mr::parallel;
using Catch::Matchers::Contains;

namespace {

Layout layout(int64_t world, int64_t tp, int64_t pp, int64_t ep = 1) {
  LayoutSpec s;
  s.world_size = world;
  s.tp = tp;
  s.pp = pp;
  s.ep = ep;
  return Layout::build(s);
}

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("layout picture: each rank's node, TP group, stage and replica", "[pictures][layout]") {
  // TP=2 PP=2 on 8 ranks (order tp-cp-ep-dp-pp): DP=2; tp groups [0,1] [2,3] ...; pp groups [0,4] [1,5] ...
  const Layout L = layout(8, 2, 2);
  const auto p = rank_places(L, 4);
  REQUIRE(p.size() == 8);
  CHECK(p[5].node == 1);
  CHECK(p[5].local == 1);
  CHECK(p[5].tp_group == 2);    // [4, 5]
  CHECK(p[5].pp_stage == 1);    // [1, 5]
  CHECK(p[5].dp_replica == 0);  // [5, 7]
  CHECK(p[7].dp_replica == 1);
  CHECK(p[2].tp_group == 1);
  CHECK(p[2].pp_stage == 0);
  CHECK(p[0].ep_group == -1);  // no expert parallelism
  CHECK_THROWS(rank_places(L, 0));
  // With experts: EP=2 (the expert layout tp-cp-ep-dp-pp over TP=2): the ep groups are [0,2] [1,3] ...
  const auto e = rank_places(layout(8, 2, 2, 2), 8);
  CHECK(e[0].ep_group == 0);
  CHECK(e[1].ep_group == 1);
  CHECK(e[2].ep_group == 0);
}

TEST_CASE("layout picture: the SVG has one cell per GPU and a legend", "[pictures][layout]") {
  const Layout L = layout(16, 2, 2, 2);
  const std::string s = layout_svg(L, 8, "my.yaml: rank layout");
  CHECK(count(s, "<g><title>rank ") == 16);
  CHECK_THAT(s, Contains("<title>rank 9 (node 1, GPU 1): TP group 4, pipeline stage 1 of 2, data-parallel replica 0 "
                         "of 4, EP group 5</title>"));
  CHECK_THAT(s, Contains(">node 1</text>"));
  CHECK_THAT(s, Contains(">GPU 7</text>"));
  CHECK(count(s, ">node ") == 2);
  CHECK_THAT(s, Contains("EP: expert-parallel group"));
  CHECK_THAT(s, Contains("world size 16, 8 GPUs per node: TP=2 PP=2 CP=1 DP=4 EP=2 expert TP=2"));
  // Without experts there is no EP stripe; a partial last node is drawn as far as it goes.
  const std::string t = layout_svg(layout(6, 1, 1), 4, "t");
  CHECK(t.find("EP group") == std::string::npos);
  CHECK(count(t, "<g><title>rank ") == 6);
  CHECK_THAT(t, Contains(">node 1</text>"));
}

TEST_CASE("layout picture: the DOT graph has a cluster per node and the groups as edges", "[pictures][layout]") {
  const std::string d = layout_dot(layout(8, 2, 2), 4, "a \"quoted\" title");
  CHECK(d.rfind("graph topology {\n", 0) == 0);
  CHECK_THAT(d, Contains("label=\"a &quot;quoted&quot; title\\nTP=2 PP=2"));
  CHECK(count(d, "subgraph cluster_node") == 2);
  // Group indices are called groups, positions what they are; the TP rank tells apart the two members of TP group 0.
  CHECK_THAT(d, Contains("r0 [label=\"rank 0\\nTP group 0, TP rank 0\\nPP stage 0 · DP replica 0\""));
  CHECK_THAT(d, Contains("r1 [label=\"rank 1\\nTP group 0, TP rank 1\\nPP stage 0 · DP replica 0\""));
  CHECK_THAT(d, Contains("r4 [label=\"rank 4\\nTP group 2, TP rank 0\\nPP stage 1 · DP replica 0\""));
  CHECK_THAT(d, Contains("r3 [label=\"rank 3\\nTP group 1, TP rank 1\\nPP stage 0 · DP replica 1\""));
  {  // no two ranks share the part of the label after "rank N"
    std::set<std::string> seen;
    const std::regex lab("\\[label=\"rank [0-9]+\\\\n([^\"]*)\"");
    for (auto it = std::sregex_iterator(d.begin(), d.end(), lab); it != std::sregex_iterator(); ++it)
      CHECK(seen.insert((*it)[1].str()).second);
    CHECK(seen.size() == 8);
  }
  CHECK_THAT(d, Contains("r0 -- r1 [constraint=false, color="));      // TP group [0, 1]
  CHECK_THAT(d, Contains("r1 -- r5 [style=dashed"));                  // pipeline [1, 5]
  CHECK(count(d, " -- ") == 4 + 4);                                   // 4 TP pairs, 4 PP pairs
  CHECK(d.back() == '\n');
}
