// --embedding-min-norm in the training run (run/embedding_norm.h): it changes the result, rows end at twice the
// threshold, the same bits under every layout (rows cut by the distributed optimizer's shard boundaries, TP's vocab
// slices, PP's tied copy), and an exact resume. The refusal without the distributed optimizer: train_test.cpp.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <regex>

#include "../distributed/proc.h"
#include "optim/dtype.h"
#include "run/checkpoint_format.h"

namespace {

// A vocabulary of 8190 rows (no padding at TP 1 or 2) and 129 positions: the model's 14491 x 256 dense elements put
// DP=2's shard boundary in the middle of embedding row 7245.
const std::vector<std::string> kBase = {"--vocab-size", "8190", "--make-vocab-size-divisible-by", "1",
                                        "--max-position-embeddings", "129", "--lr-warmup-iters", "0",
                                        "--train-iters", "3"};

std::string checksum_of(int n, std::vector<std::string> extra, const mrtest::TempDir& dir, const std::string& tag) {
  extra.insert(extra.begin(), kBase.begin(), kBase.end());
  mrtest::Proc p = mrtest::spawn_job(n, extra, dir, tag);
  INFO(tag << "\n" << p.out() << p.err());
  REQUIRE(p.exit_code() == 0);
  std::smatch m;
  const std::string out = p.out();
  static const std::regex fin(R"(parameter checksum ([0-9a-f]+))");
  REQUIRE(std::regex_search(out, m, fin));
  return m[1];
}

}  // namespace

TEST_CASE("--embedding-min-norm changes the run and gives the same bits on 1 rank, DP=2 (a row cut by the "
          "distributed optimizer's shards), TP=2 and PP=2 (the tied copy rescaled alike)",
          "[run][embedding-norm]") {
  mrtest::TempDir dir;
  // bf16 with fp32 main params: the masters rescaled, the model params stored from them. Rows start near
  // 0.02 x sqrt(256) = 0.32: about half are below the threshold.
  const std::vector<std::string> on = {"--bf16", "--use-distributed-optimizer", "--embedding-min-norm", "0.32"};
  auto with = [&](std::vector<std::string> more) {
    more.insert(more.begin(), on.begin(), on.end());
    return more;
  };
  const std::string off = checksum_of(1, {"--bf16"}, dir, "off");
  const std::string one = checksum_of(1, on, dir, "one");
  CHECK(one != off);
  CHECK(checksum_of(2, on, dir, "dp2") == one);
  CHECK(checksum_of(2, with({"--tensor-model-parallel-size", "2"}), dir, "tp2") == one);
  CHECK(checksum_of(2, with({"--pipeline-model-parallel-size", "2"}), dir, "pp2") == one);
  // Muon with the distributed optimizer: Megatron's layer-wise path (the embedding whole on one rank, to Adam).
  CHECK(checksum_of(2, with({"--optimizer", "muon"}), dir, "muon-dp2") == checksum_of(1, with({"--optimizer", "muon"}), dir, "muon-1"));
}

TEST_CASE("--embedding-min-norm far above every row: after the first step each row of the fp32 masters has norm 2 x "
          "threshold, the bf16 params rounded from them; a resume is exact",
          "[run][embedding-norm]") {
  mrtest::TempDir dir;
  const std::string ck = dir / "ck";
  const std::vector<std::string> on = {"--use-distributed-optimizer", "--embedding-min-norm", "1000", "--bf16"};
  const std::string whole = checksum_of(1, on, dir, "huge");
  std::vector<std::string> save = on;
  save.insert(save.end(), {"--save", ck, "--save-interval", "100", "--exit-interval", "1"});  // saves iteration 1, stops
  (void)checksum_of(1, save, dir, "huge-1");
  // After the first step every row is at 2T (above T: later steps move it, as Adam does, and leave it).
  const std::string it = ck + "/iter_0000001";
  const mr::run::SafetensorsHeader h = mr::run::read_safetensors_header(it + "/rank_00000.safetensors");
  mr::run::InFile f(it + "/rank_00000.safetensors");
  const mr::run::TensorEntry* master = h.find("optimizer.state.fp32_param.embedding.word_embeddings.weight");
  const mr::run::TensorEntry* param = h.find("embedding.word_embeddings.weight");
  REQUIRE(master);
  REQUIRE(param);
  REQUIRE(master->dtype == "F32");
  REQUIRE(param->dtype == "BF16");
  REQUIRE(master->shape == std::vector<int64_t>{8190, 256});
  std::vector<float> m(8190 * 256);
  std::vector<uint16_t> p(m.size());
  REQUIRE(master->end - master->begin == m.size() * 4);
  f.read(h.data_start + master->begin, m.data(), m.size() * 4);
  f.read(h.data_start + param->begin, p.data(), p.size() * 2);
  int off = 0, bad_param = 0;
  for (size_t r = 0; r < 8190; ++r) {
    double s = 0;
    for (size_t j = 0; j < 256; ++j) s += static_cast<double>(m[r * 256 + j]) * m[r * 256 + j];
    // One fp32 rounding per element: the norm within a few fp32 ulps of 2000.
    if (std::fabs(std::sqrt(s) - 2000.0) > 2000.0 * 1e-6) ++off;
  }
  for (size_t i = 0; i < m.size(); ++i) bad_param += p[i] != mr::optim::f32_to_bf16(m[i]);
  CHECK(off == 0);
  CHECK(bad_param == 0);
  // Resumed from iteration 1: the same bits as the run that did not stop (nothing new to save: the rescale is part of
  // the step's masters).
  std::vector<std::string> load = on;
  load.insert(load.end(), {"--load", ck});
  CHECK(checksum_of(1, load, dir, "resumed") == whole);
}
