// The picture formats of `topology` (svg, dot) and `params` (svg), and their refusals. How the pictures look in
// a browser and in Graphviz: tests/pictures/render.py (CTest pictures_render).
#include <catch2/catch.hpp>

#include <string>

#include "binary.h"

namespace {
using Result = mrtest::Proc;
Result sh(const std::string& args) { return mrtest::megatron_run_merged(args); }
Result out_only(const std::string& args) { return mrtest::megatron_run_stdout(args); }
const std::string kCorpus = std::string(MR_DATA_DIR) + "/corpus/functional-tests/";
const std::string kDefault = std::string(MR_SOURCE_DIR) + "/configs/default.yaml";
size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}
}  // namespace

TEST_CASE("topology: svg and dot draw every GPU, by node", "[cli][pictures]") {
  const std::string moe = " --env-placeholder /p --config " + kCorpus + "moe__gpt3_mcore_tp2_pp2_ep2_te_4experts2parallel.yaml";
  Result s = out_only("topology --world-size 16 --format svg" + moe);
  REQUIRE(s.exit == 0);
  CHECK(s.out.rfind("<?xml", 0) == 0);
  CHECK(count(s.out, "<g><title>rank ") == 16);
  CHECK(s.out.find("moe__gpt3_mcore_tp2_pp2_ep2_te_4experts2parallel.yaml: rank layout") != std::string::npos);
  CHECK(s.out.find(">EP group 5</text>") != std::string::npos);
  Result four = out_only("topology --world-size 16 --gpus-per-node 4 --format svg" + moe);
  CHECK(count(four.out, ">node ") == 4);
  Result d = out_only("topology --world-size 16 --format dot" + moe);
  REQUIRE(d.exit == 0);
  CHECK(d.out.rfind("graph topology {", 0) == 0);
  CHECK(count(d.out, "subgraph cluster_node") == 2);
  // The same layout as the text output: rank 3 is in TP group [2, 3].
  Result t = out_only("topology --world-size 16 --format json" + moe);
  CHECK(t.out.find("\"tp\": [[0, 1], [2, 3]") != std::string::npos);
  CHECK(d.out.find("r2 -- r3 [constraint=false") != std::string::npos);
}

TEST_CASE("topology and params: picture refusals name the flag", "[cli][pictures]") {
  Result r = sh("topology --world-size 2 --gpus-per-node 0 --format svg --config " + kDefault);
  CHECK(r.exit == 2);
  CHECK(r.out.find("argument --gpus-per-node: must be at least 1") != std::string::npos);
  const std::string big = " --config " + kDefault +
                          " --micro-batch-size 1 --global-batch-size 8192 --eval-micro-batch-size 1 --eval-global-batch-size 8192";
  r = sh("topology --world-size 8192 --format svg" + big);
  CHECK(r.exit == 2);
  CHECK(r.out.find("a picture of 8192 ranks is too large (at most 4096; --world-size") != std::string::npos);
  r = out_only("topology --world-size 8192 --format json" + big);
  CHECK(r.exit == 0);  // the text and JSON outputs have no such limit
  r = sh("topology --world-size 2 --format png --config " + kDefault);
  CHECK(r.exit == 2);
  CHECK(r.out.find("(choose from 'text', 'json', 'svg', 'dot')") != std::string::npos);
  r = sh("params --world-size 1 --format svg --device-memory 80GB/s --config " + kDefault);
  CHECK(r.exit == 2);
  CHECK(r.out.find("argument --device-memory: '80GB/s' is not a memory size") != std::string::npos);
  r = sh("params --world-size 1 --format svg --device-memory 0 --config " + kDefault);
  CHECK(r.exit == 2);
}

TEST_CASE("params: svg draws a bar per rank against --device-memory", "[cli][pictures]") {
  Result r = out_only("params --world-size 4 --format svg --device-memory 141GB --config " + kDefault +
                      " --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --target-gpu-arch sm_100");
  REQUIRE(r.exit == 0);
  CHECK(count(r.out, "<g><title>(tp ") == 4);
  CHECK(r.out.find(">device memory 141GB</text>") != std::string::npos);
  CHECK(r.out.find("world size 4: TP=2 PP=2 CP=1 DP=1") != std::string::npos);
  // A model that does not fit: every bar is marked over capacity.
  r = out_only("params --world-size 1 --format svg --device-memory 1MiB --config " + kDefault);
  REQUIRE(r.exit == 0);
  CHECK(r.out.find("(over 1MiB)") != std::string::npos);
}
