// The init stage's --pipeline-model-parallel-layout checks (lib/config/validate/init_pipeline_layout.cpp): each
// rule fires on a layout validate_args accepts but TransformerConfig refuses, next to one that passes; and the
// layer placement (config/pipeline_layout.h) that the model plan reads.
#include "init_support.h"

#include <algorithm>

#include "config/pipeline_layout.h"

namespace {

using mrtest::InitCase;

std::map<std::string, std::string> ws(const char* n) { return {{"WORLD_SIZE", n}}; }

std::vector<std::string> pp2(std::string layout, std::vector<std::string> more = {}) {
  std::vector<std::string> a = {"--pipeline-model-parallel-size", "2", "--num-layers", "4",
                                "--pipeline-model-parallel-layout", std::move(layout)};
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

const std::vector<InitCase> kCases = {
    {"init.pipeline.layout-with-other-split", pp2("Ett|ttL", {"--decoder-first-pipeline-num-layers", "2"}),
     pp2("Ett|ttL"), ws("2"), "cannot be set with --decoder-first-pipeline-num-layers (2)"},
    {"init.pipeline.layout-with-other-split", pp2("Ett|ttL", {"--account-for-loss-in-pipeline-split"}),
     pp2("Ett|ttL"), ws("2"), "cannot be set with --account-for-loss-in-pipeline-split"},
    {"init.pipeline.layout-embedding-and-loss", pp2("tEt|ttL"), pp2("Ett|ttL"), ws("2"),
     "its first layer must be the embedding (E)"},
    {"init.pipeline.layout-embedding-and-loss", pp2("Ett|tLt"), pp2("Ett|ttL"), ws("2"),
     "its last layer must be the loss (L)"},
    {"init.pipeline.layout-embedding-and-loss", pp2("Ett|tEtL"), pp2("Ett|ttL"), ws("2"), "exactly once"},
    {"init.pipeline.layout-layer-count", pp2("Ett|tttL"), pp2("Ettt|tL"), ws("2"),
     "it has 5 decoder layers (t), --num-layers is 4"},
    {"init.pipeline.layout-layer-count", pp2("Ett|ttmL"), pp2("Ett|ttmL", {"--mtp-num-layers", "1", "--position-embedding-type", "rope"}), ws("2"),
     "it has 1 MTP layers (m), --mtp-num-layers is unset"},
    {"init.pipeline.layout-mtp-placement", pp2("Ett|mttL", {"--mtp-num-layers", "1", "--position-embedding-type", "rope"}),
     pp2("Ett|ttmL", {"--mtp-num-layers", "1", "--position-embedding-type", "rope"}), ws("2"), "decoder layers (t) must come before the MTP layers (m)"},
    // PP=2 x 2 chunks: 'm' in rank 1's first chunk (stage 1), not its last (stage 3).
    {"init.pipeline.layout-mtp-placement", pp2("Et|tttm||L", {"--mtp-num-layers", "1", "--position-embedding-type", "rope"}),
     pp2("Et|ttt||mL", {"--mtp-num-layers", "1", "--position-embedding-type", "rope"}), ws("2"), "pipeline rank 1, virtual chunk 0"},
};

}  // namespace

TEST_CASE("init stage, --pipeline-model-parallel-layout: each rule fires next to a neighbour that passes", "[init]") {
  mrtest::check_init_table(kCases, "validate/init_pipeline_layout.cpp");
}

TEST_CASE("pipeline layout: each rank's decoder layers, chunk by chunk, and its MTP layers", "[init][layout]") {
  using mr::pipeline_layout::parse;
  using mr::pipeline_layout::rank_stages;
  // "Et*3|(tt|)*6mL" (a corpus config): "Ettt|tt|tt|tt|tt|tt|tt|mL", 15 layers on PP=2 x 4 chunks, stage s = chunk s/2 of rank s%2.
  const std::vector<std::string> st = parse("Et*3|(tt|)*6mL").stages;
  REQUIRE(st.size() == 8);
  const auto r0 = rank_stages(st, 2, 0), r1 = rank_stages(st, 2, 1);
  CHECK(r0.decoder_layers == std::vector<int64_t>{0, 1, 2, 5, 6, 9, 10, 13, 14});
  CHECK(r1.decoder_layers == std::vector<int64_t>{3, 4, 7, 8, 11, 12});
  CHECK(r0.mtp_layers == 0);
  CHECK(r1.mtp_layers == 1);
  CHECK(r1.mtp_chunks == std::vector<int64_t>{3});
  // Every layer on exactly one rank, for a few layouts and pipeline sizes.
  for (auto [layout, pp] : std::vector<std::pair<const char*, int64_t>>{
           {"Et*2|(tt|)*5t|tmL", 4}, {"Et*7|t*7mL", 2}, {"E|t|tt|ttt|tttt|L", 3}, {"Ettt|tL", 1}}) {
    const std::vector<std::string> s = parse(layout).stages;
    std::vector<int64_t> all;
    for (int64_t r = 0; r < pp; ++r)
      for (int64_t l : rank_stages(s, pp, r).decoder_layers) all.push_back(l);
    std::sort(all.begin(), all.end());
    INFO(layout);
    for (size_t i = 0; i < all.size(); ++i) CHECK(all[i] == static_cast<int64_t>(i));
    CHECK(mr::pipeline_layout::check_layers(s, pp, static_cast<int64_t>(all.size()),
                                            std::string(layout).find('m') != std::string::npos ? 1 : -1)
              .problem == mr::pipeline_layout::Check::Problem::None);
  }
}
