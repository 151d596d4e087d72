// The same job under every layout ends with the same bits (run/synthetic_grad.h, run/exact_stats.h): losses,
// grad norms and the whole model's checksum, for every optimizer the run steps.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <regex>

#include "../distributed/proc.h"

namespace {

struct End {
  std::string checksum, loss, grad_norm;  // as logged: hex checksum, hex floats
  std::vector<std::string> lines;         // the per-iteration loss and grad norm fields
};

End run_job(int n, std::vector<std::string> extra, const mrtest::TempDir& dir, const std::string& tag) {
  std::vector<std::string> argv = {mrtest::megatron_run(), "--nproc-per-node", std::to_string(n)};
  extra.insert(extra.end(), {"--train-iters", "4", "--lr-warmup-iters", "0"});
  for (const std::string& a : mrtest::job_args(extra)) argv.push_back(a);
  std::vector<mrtest::Proc> p = {mrtest::start(argv, {{"MR_DIST_TIMEOUT_S", "60"}, {"CUDA_DEVICE_MAX_CONNECTIONS", "1"}}, dir, tag)};
  mrtest::wait_all(p, std::chrono::seconds(180));
  INFO(tag << "\n" << p[0].out() << p[0].err());
  REQUIRE(p[0].exit_code() == 0);
  End e;
  std::smatch m;
  const std::string out = p[0].out();
  static const std::regex fin(R"(parameter checksum ([0-9a-f]+); last loss (\S+), last grad norm ([^)]+)\))");
  REQUIRE(std::regex_search(out, m, fin));
  e.checksum = m[1];
  e.loss = m[2];
  e.grad_norm = m[3];
  static const std::regex it(R"((synthetic loss: \S+ \|.*grad norm: \S+))");
  for (auto i = std::sregex_iterator(out.begin(), out.end(), it); i != std::sregex_iterator(); ++i)
    e.lines.push_back((*i)[1]);
  REQUIRE(e.lines.size() == 4);
  return e;
}

void same(const End& a, const End& b, const std::string& what) {
  INFO(what);
  CHECK(b.checksum == a.checksum);
  CHECK(b.loss == a.loss);
  CHECK(b.grad_norm == a.grad_norm);
  CHECK(b.lines == a.lines);
}

}  // namespace

TEST_CASE("every layout ends with the same bits: 1 rank, DP=4, distributed optimizer, TP=2xDP=2, PP=2xDP=2",
          "[run][layout]") {
  mrtest::TempDir dir;
  for (const char* opt : {"adam", "sgd", "lion", "muon"}) {
    const std::vector<std::string> o = {"--optimizer", opt};
    auto with = [&](std::vector<std::string> more) {
      more.insert(more.begin(), o.begin(), o.end());
      return more;
    };
    const End one = run_job(1, o, dir, std::string(opt) + "-1");
    same(one, run_job(4, o, dir, std::string(opt) + "-dp4"), std::string(opt) + ": DP=4");
    // Muon and lion take the layer-wise path (whole parameters per rank, broadcast after the step), adam and sgd
    // shard element ranges.
    same(one, run_job(4, with({"--use-distributed-optimizer"}), dir, std::string(opt) + "-dist"),
         std::string(opt) + ": DP=4, distributed optimizer");
    if (std::string(opt) == "muon")  // Megatron's deprecated spelling of the same
      same(one, run_job(4, {"--optimizer", "dist_muon"}, dir, "dist_muon"), "--optimizer dist_muon: DP=4");
    same(one, run_job(4, with({"--tensor-model-parallel-size", "2"}), dir, std::string(opt) + "-tp2"),
         std::string(opt) + ": TP=2 x DP=2");
    same(one, run_job(4, with({"--pipeline-model-parallel-size", "2"}), dir, std::string(opt) + "-pp2"),
         std::string(opt) + ": PP=2 x DP=2");
  }
}

TEST_CASE("adaptive_muon: the same bits under DP, PP and its layer-wise distributed optimizer; TP changes the "
          "update as in Megatron",
          "[run][layout][adaptive]") {
  mrtest::TempDir dir;
  const std::vector<std::string> o = {"--optimizer", "adaptive_muon"};
  const End one = run_job(1, o, dir, "am-1");
  same(one, run_job(4, {"--optimizer", "adaptive_muon", "--use-distributed-optimizer", "--pipeline-model-parallel-size", "2"},
                    dir, "am-pp2-dist"),
       "adaptive_muon: PP=2 x DP=2, layer-wise distributed optimizer");
  // TensorParallelAdaptiveMuon scales the normalised update once more by the TP shard's shape
  // (AdaptiveMuon._apply_muon_scale(update, update.size(-2), update.size(-1))): TP=2 is a different run. Its ranks
  // still agree (the replica check) and its first loss, before any step, is the same.
  const End tp2 = run_job(2, {"--optimizer", "adaptive_muon", "--tensor-model-parallel-size", "2"}, dir, "am-tp2");
  CHECK(tp2.lines.front() == one.lines.front());
  CHECK(tp2.checksum != one.checksum);
}

TEST_CASE("soap: the same bits under DP, PP and its layer-wise distributed optimizer; TP changes the update as in "
          "Megatron",
          "[run][layout][soap]") {
  mrtest::TempDir dir;
  const std::vector<std::string> o = {"--optimizer", "soap"};
  const End one = run_job(1, o, dir, "soap-1");
  same(one, run_job(2, o, dir, "soap-dp2"), "soap: DP=2");
  same(one, run_job(4, {"--optimizer", "soap", "--use-distributed-optimizer", "--pipeline-model-parallel-size", "2"}, dir,
                    "soap-pp2-dist"),
       "soap: PP=2 x DP=2, layer-wise distributed optimizer");
  // SOAP preconditions each TP shard as a matrix of its own (Megatron hands it the local parameter): TP=2 is a
  // different run, whose ranks agree (the replica check) and whose first loss, before any step, is the same.
  const End tp2 = run_job(2, {"--optimizer", "soap", "--tensor-model-parallel-size", "2"}, dir, "soap-tp2");
  CHECK(tp2.lines.front() == one.lines.front());
  CHECK(tp2.checksum != one.checksum);
}

TEST_CASE("bf16 with the distributed optimizer and TP: the same bits as one rank", "[run][layout]") {
  mrtest::TempDir dir;
  const End one = run_job(1, {"--bf16"}, dir, "bf16-1");
  same(one, run_job(4, {"--bf16", "--use-distributed-optimizer", "--tensor-model-parallel-size", "2"}, dir, "bf16-4"),
       "bf16: TP=2 x DP=2, distributed optimizer");
  // Muon's layer-wise distributed optimizer with TP: the TP peers own the same matrices (duplicated mode gathers
  // them over TP), fp32 main params in the owner's shard.
  const std::vector<std::string> muon = {"--bf16", "--optimizer", "muon"};
  const End muon_one = run_job(1, muon, dir, "muon-bf16-1");
  same(muon_one,
       run_job(4, {"--bf16", "--optimizer", "muon", "--use-distributed-optimizer", "--tensor-model-parallel-size", "2"},
               dir, "muon-bf16-4"),
       "muon bf16: TP=2 x DP=2, layer-wise distributed optimizer");
  // The precision-aware optimizer with bf16 moments and remainders: elementwise state, the same bits on every layout
  // (fp16 states are not: each shard has its own scale).
  const std::vector<std::string> aware = {"--bf16", "--use-precision-aware-optimizer", "--use-distributed-optimizer",
                                          "--exp-avg-dtype", "bf16", "--exp-avg-sq-dtype", "bf16"};
  std::vector<std::string> aware4 = aware;
  aware4.insert(aware4.end(), {"--tensor-model-parallel-size", "2"});
  same(run_job(1, aware, dir, "aware-1"), run_job(4, aware4, dir, "aware-4"),
       "precision-aware bf16 moments and remainders: TP=2 x DP=2, distributed optimizer");
  // bf16 gradients (--grad-reduce-in-bf16): one rounding after the exact reduction (run/grad_format.h).
  same(run_job(1, {"--bf16", "--grad-reduce-in-bf16"}, dir, "bf16-grads-1"),
       run_job(4, {"--bf16", "--grad-reduce-in-bf16", "--use-distributed-optimizer", "--tensor-model-parallel-size", "2"},
               dir, "bf16-grads-4"),
       "bf16 gradients: TP=2 x DP=2, distributed optimizer");
}

TEST_CASE("pipeline splits: embedding and loss counted as layers, first/last stage sizes with virtual chunks",
          "[run][layout]") {
  mrtest::TempDir dir;
  same(run_job(1, {"--num-layers", "6"}, dir, "six"),
       run_job(2, {"--num-layers", "6", "--pipeline-model-parallel-size", "2", "--num-virtual-stages-per-pipeline-rank",
                   "2", "--account-for-embedding-in-pipeline-split", "--account-for-loss-in-pipeline-split"},
               dir, "six-pp2vp2"),
       "6 layers, PP=2 x 2 virtual chunks, the embedding and the loss counted as layers");
  same(run_job(1, {"--num-layers", "10"}, dir, "ten"),
       run_job(3, {"--num-layers", "10", "--pipeline-model-parallel-size", "3", "--num-virtual-stages-per-pipeline-rank",
                   "2", "--decoder-first-pipeline-num-layers", "2", "--decoder-last-pipeline-num-layers", "4"},
               dir, "ten-pp3vp2"),
       "10 layers, PP=3 x 2 virtual chunks, first stage 2, last stage 4");
}

TEST_CASE("--pipeline-model-parallel-layout: chunks, MTP on the last rank and on a middle one, the same bits",
          "[run][layout][mtp]") {
  mrtest::TempDir dir;
  auto job = [](const char* layers, std::vector<std::string> more) {
    std::vector<std::string> a = {"--num-layers", layers, "--mtp-num-layers", "1", "--position-embedding-type", "rope"};
    a.insert(a.end(), more.begin(), more.end());
    return a;
  };
  // PP=2 x 2 chunks: rank 0 builds layers 0, 3, 4; rank 1 layers 1, 2, 5 and the MTP layer.
  same(run_job(1, job("6", {}), dir, "lay6"),
       run_job(2, job("6", {"--pipeline-model-parallel-size", "2", "--pipeline-model-parallel-layout", "Et|tt|tt|tmL"}),
               dir, "lay6-pp2vp2"),
       "6 layers and MTP, PP=2 x 2 chunks by layout");
  // "Standalone" MTP: on pipeline rank 2 of 4, which then holds an embedding copy in the embedding group (with the
  // first stage and, tied, the last).
  same(run_job(1, job("4", {}), dir, "lay4"),
       run_job(4, job("4", {"--pipeline-model-parallel-size", "4", "--pipeline-model-parallel-layout", "Ett|tt|m|L"}),
               dir, "lay4-pp4"),
       "4 layers, MTP on pipeline rank 2 of 4, tied");
  same(run_job(1, job("4", {"--untie-embeddings-and-output-weights"}), dir, "lay4u"),
       run_job(3, job("4", {"--untie-embeddings-and-output-weights", "--pipeline-model-parallel-size", "3",
                            "--pipeline-model-parallel-layout", "Et|tttm|L"}),
               dir, "lay4u-pp3"),
       "4 layers, MTP on pipeline rank 1 of 3, untied");
}

TEST_CASE("hybrid model (Mamba, attention, MLP, MoE, MTP): PP=2 x EP=2 ends with the same bits as one rank",
          "[run][layout][hybrid]") {
  mrtest::TempDir dir;
  for (const char* opt : {"adam", "muon"}) {  // muon: in_proj goes to the scalar optimizer, as Megatron marks it
    const std::vector<std::string> o = {"--num-experts", "4", "--position-embedding-type", "rope", "--optimizer", opt};
    auto with = [&](std::vector<std::string> more) {
      more.insert(more.begin(), o.begin(), o.end());
      return more;
    };
    same(run_job(1, with({"--hybrid-layer-pattern", "M*-MEM*-/*E"}), dir, std::string("hy1-") + opt),
         run_job(4, with({"--hybrid-layer-pattern", "M*-M|EM*-/*E", "--pipeline-model-parallel-size", "2",
                          "--expert-model-parallel-size", "2", "--use-distributed-optimizer"}),
                 dir, std::string("hy4-") + opt),
         std::string(opt) + ": hybrid, PP=2 by '|' x DP=2 x EP=2, distributed optimizer");
  }
  // TP=2: in_proj (z, x, B, C, dt) and conv1d (x, B, C) split part by part, the rest as GPT's; with the distributed
  // optimizer over DP=2, and a checkpoint of TP=2 read back by one rank (its pieces are the parts' slices).
  const std::vector<std::string> hy = {"--hybrid-layer-pattern", "M*-M", "--position-embedding-type", "rope",
                                       "--mamba-num-groups", "2", "--mamba-head-dim", "32"};
  auto with = [&](std::vector<std::string> more) {
    more.insert(more.begin(), hy.begin(), hy.end());
    return more;
  };
  same(run_job(1, with({}), dir, "hytp-1"),
       run_job(4, with({"--tensor-model-parallel-size", "2", "--use-distributed-optimizer", "--sequence-parallel"}), dir,
               "hytp-4"),
       "hybrid, TP=2 x DP=2, distributed optimizer");
  // '+' and 'D': multi-latent attention layers (validation turns --multi-latent-attention on), up projections split
  // by heads; 'D' with the DSA indexer, replicated over TP (DSA's attention takes no linear bias and no RoPE fusion:
  // TransformerConfig, init.transformer.dsa-attention).
  const std::vector<std::string> mla = {"--hybrid-layer-pattern", "M+-D", "--disable-bias-linear", "--no-rope-fusion", "--position-embedding-type", "rope",
                                        "--kv-lora-rank", "32", "--qk-head-dim", "16", "--qk-pos-emb-head-dim", "8",
                                        "--v-head-dim", "16", "--q-lora-rank", "48", "--dsa-indexer-n-heads", "4",
                                        "--dsa-indexer-head-dim", "32", "--dsa-indexer-topk", "16"};
  std::vector<std::string> mla_tp = mla;
  mla_tp.insert(mla_tp.end(), {"--tensor-model-parallel-size", "2"});
  same(run_job(1, mla, dir, "hymla-1"), run_job(2, mla_tp, dir, "hymla-tp2"), "hybrid with MLA and DSA layers, TP=2");
  // 'G': gated delta net layers, in_proj (q, k, v, z, beta, alpha) and conv1d (q, k, v) split part by part.
  const std::vector<std::string> gdn = {"--hybrid-layer-pattern", "MG*-G", "--position-embedding-type", "rope",
                                        "--linear-num-key-heads", "2", "--linear-key-head-dim", "32",
                                        "--linear-num-value-heads", "4", "--linear-value-head-dim", "32"};
  std::vector<std::string> gdn_tp = gdn;
  gdn_tp.insert(gdn_tp.end(), {"--tensor-model-parallel-size", "2"});
  same(run_job(1, gdn, dir, "hygdn-1"), run_job(2, gdn_tp, dir, "hygdn-tp2"), "hybrid with gated delta net layers, TP=2");
}

TEST_CASE("multi-latent attention: TP=2 x DP=2 ends with the same bits as one rank", "[run][layout][mla]") {
  mrtest::TempDir dir;
  for (const char* opt : {"adam", "muon"}) {
    const std::vector<std::string> mla = {"--multi-latent-attention", "--q-lora-rank", "64", "--qk-layernorm",
                                          "--optimizer", opt};
    std::vector<std::string> tp2 = mla;
    tp2.insert(tp2.end(), {"--tensor-model-parallel-size", "2"});
    same(run_job(1, mla, dir, std::string("mla1-") + opt), run_job(4, tp2, dir, std::string("mla-tp2-") + opt),
         std::string(opt) + ": MLA, TP=2 x DP=2");
    // --mla-down-proj-fusion: the fused down projection split over TP part by part (each rank: its share of the q
    // latent, then of the rest). Adam: the same bits. Muon gathers the shards in rank order, [q0 kv0 q1 kv1], a
    // row permutation of the whole matrix (as Megatron's duplicated mode does): Newton-Schulz commutes with it,
    // but the sums of A A run in another order, so the run agrees to rounding, not to the bit.
    std::vector<std::string> fused = mla, fused_tp2 = tp2;
    fused.push_back("--mla-down-proj-fusion"), fused_tp2.push_back("--mla-down-proj-fusion");
    const End f1 = run_job(1, fused, dir, std::string("mlaf1-") + opt);
    const End f2 = run_job(4, fused_tp2, dir, std::string("mlaf-tp2-") + opt);
    if (std::string(opt) == "adam") {
      same(f1, f2, "adam: fused MLA down projection, TP=2 x DP=2");
    } else {
      CHECK(f2.lines.front() == f1.lines.front());
      CHECK(std::strtod(f2.loss.c_str(), nullptr) == Approx(std::strtod(f1.loss.c_str(), nullptr)).epsilon(1e-4));
    }
  }
}

TEST_CASE("heterogeneous layers (configs/examples/heterogeneous.yaml): TP=2 x DP=2 and PP=2 x DP=2 end with one "
          "rank's bits",
          "[run][layout][heterogeneous]") {
  mrtest::TempDir dir;
  const std::string src = MR_SOURCE_DIR;
  for (const char* opt : {"adam", "muon"}) {
    const std::vector<std::string> het = {"--config", src + "/configs/examples/heterogeneous.yaml",
                                          "--heterogeneous-layers-config-path",
                                          src + "/configs/examples/heterogeneous-blocks.json", "--optimizer", opt};
    auto with = [&](std::vector<std::string> more) {
      more.insert(more.begin(), het.begin(), het.end());
      return more;
    };
    const End one = run_job(1, het, dir, std::string("het1-") + opt);
    same(one, run_job(4, with({"--tensor-model-parallel-size", "2"}), dir, std::string("het-tp2-") + opt),
         std::string(opt) + ": heterogeneous, TP=2 x DP=2");
    same(one, run_job(4, with({"--pipeline-model-parallel-size", "2"}), dir, std::string("het-pp2-") + opt),
         std::string(opt) + ": heterogeneous, PP=2 x DP=2");
  }
}

TEST_CASE("multi-token prediction: PP=2 (tied and untied, and with experts) ends with the same bits as one rank",
          "[run][layout][mtp]") {
  mrtest::TempDir dir;
  const std::vector<std::string> mtp = {"--mtp-num-layers", "2", "--position-embedding-type", "rope"};
  auto with = [&](std::vector<std::string> more) {
    more.insert(more.begin(), mtp.begin(), mtp.end());
    return more;
  };
  same(run_job(1, mtp, dir, "mtp1"), run_job(4, with({"--pipeline-model-parallel-size", "2"}), dir, "mtp-pp2"),
       "MTP: PP=2 x DP=2, tied");
  const std::vector<std::string> untied = with({"--untie-embeddings-and-output-weights"});
  std::vector<std::string> untied_pp2 = untied;
  untied_pp2.insert(untied_pp2.end(), {"--pipeline-model-parallel-size", "2"});
  same(run_job(1, untied, dir, "mtp1u"), run_job(2, untied_pp2, dir, "mtp-pp2u"), "MTP: PP=2, untied");
  const std::vector<std::string> moe = with({"--num-experts", "4", "--mtp-num-layers", "1"});
  std::vector<std::string> moe_pp2 = moe;
  moe_pp2.insert(moe_pp2.end(), {"--pipeline-model-parallel-size", "2", "--expert-model-parallel-size", "2"});
  same(run_job(1, moe, dir, "mtp1moe"), run_job(4, moe_pp2, dir, "mtp-pp2moe"), "MTP with experts: PP=2 x EP=2");
}

TEST_CASE("MoE: EP=2 (and EP=2 x TP=2) end with the same bits as one rank", "[run][layout][moe]") {
  mrtest::TempDir dir;
  for (const char* opt : {"adam", "sgd", "lion", "muon"}) {
    const std::vector<std::string> moe = {"--num-experts", "4", "--optimizer", opt};
    const End one = run_job(1, moe, dir, std::string("moe1-") + opt);
    std::vector<std::string> ep2 = moe;
    ep2.insert(ep2.end(), {"--expert-model-parallel-size", "2"});
    same(one, run_job(4, ep2, dir, std::string("moe-ep2-") + opt), std::string(opt) + ": EP=2 on 4 ranks");
  }
  // Muon orthogonalises each routed expert's whole matrix: with expert TP 2 (TP=2 x EP=2, no biases) the
  // duplicated mode gathers the expert's shards over the expert TP group.
  const std::vector<std::string> muon = {"--num-experts", "4", "--optimizer", "muon", "--disable-bias-linear"};
  std::vector<std::string> tp2ep2 = muon;
  tp2ep2.insert(tp2ep2.end(), {"--tensor-model-parallel-size", "2", "--expert-model-parallel-size", "2",
                               "--expert-tensor-parallel-size", "2", "--sequence-parallel"});
  // Latent MoE: the experts in the latent space, the projections replicated over TP.
  const std::vector<std::string> latent = {"--num-experts", "4", "--moe-latent-size", "64", "--disable-bias-linear"};
  std::vector<std::string> latent4 = latent;
  latent4.insert(latent4.end(), {"--tensor-model-parallel-size", "2", "--expert-model-parallel-size", "2",
                                 "--expert-tensor-parallel-size", "1", "--use-distributed-optimizer"});
  same(run_job(1, latent, dir, "moe1-latent"), run_job(4, latent4, dir, "moe-latent-4"),
       "latent MoE: TP=2 x EP=2, distributed optimizer");
  const End muon_one = run_job(1, muon, dir, "moe1-muon-nobias");
  same(muon_one, run_job(4, tp2ep2, dir, "moe-tp2ep2-muon"), "muon: TP=2 x EP=2, expert TP 2");
  // Muon's layer-wise distributed optimizer with experts: whole expert matrices in runs over the expert DP group
  // (EP=2 on 4 ranks: a group of 2; EP=4: a group of one), broadcast after the step.
  for (const char* ep : {"2", "4"}) {
    std::vector<std::string> dist = muon;
    dist.insert(dist.end(), {"--expert-model-parallel-size", ep, "--use-distributed-optimizer"});
    same(muon_one, run_job(4, dist, dir, std::string("moe-muon-lw-ep") + ep),
         std::string("muon: DP=4, EP=") + ep + ", layer-wise distributed optimizer");
  }
}

TEST_CASE("MoE with the distributed optimizer: experts sharded over their data-parallel group, the same bits",
          "[run][layout][moe]") {
  mrtest::TempDir dir;
  for (const char* dtype : {"--fp32", "--bf16"}) {
    std::vector<std::string> moe = {"--num-experts", "4", "--optimizer", "adam"};
    if (std::string(dtype) == "--bf16") moe.push_back(dtype);
    const End one = run_job(1, moe, dir, std::string("moed1") + dtype);
    auto with = [&](std::vector<std::string> more) {
      more.insert(more.begin(), moe.begin(), moe.end());
      more.push_back("--use-distributed-optimizer");
      return more;
    };
    // DP=4, EP=2: the experts' data-parallel group has 2 ranks (their gradients reduce-scattered, params gathered).
    same(one, run_job(4, with({"--expert-model-parallel-size", "2"}), dir, std::string("moed-ep2") + dtype),
         std::string(dtype) + ": DP=4, EP=2, distributed optimizer");
    // EP=4: a group of one (every rank holds its experts' whole state). TP=2 x DP=2 with EP=2, expert TP 1: the
    // dense shards over 2 ranks, the experts' over 2 others.
    same(one, run_job(4, with({"--expert-model-parallel-size", "4"}), dir, std::string("moed-ep4") + dtype),
         std::string(dtype) + ": DP=4, EP=4, distributed optimizer");
    same(one,
         run_job(4, with({"--tensor-model-parallel-size", "2", "--expert-model-parallel-size", "2",
                          "--expert-tensor-parallel-size", "1"}), dir,
                 std::string("moed-tp2ep2") + dtype),
         std::string(dtype) + ": TP=2 x DP=2, EP=2, distributed optimizer");
  }
}

TEST_CASE("--muon-tp-mode auto (without TP) and layer_sharded: duplicated's bits on every layout", "[run][layout]") {
  // With no matrix split over TP every mode orthogonalises each whole matrix on the rank that owns it;
  // layer_sharded under TP orthogonalises each whole matrix once, on its home rank.
  mrtest::TempDir dir;
  const End one = run_job(1, {"--optimizer", "muon"}, dir, "muon-1");
  same(one, run_job(4, {"--optimizer", "muon", "--muon-tp-mode", "auto", "--pipeline-model-parallel-size", "2"}, dir,
                    "muon-auto"),
       "--muon-tp-mode auto: PP=2 x DP=2");
  // layer_sharded: Megatron's LayerShardedMuon needs the layer-wise distributed optimizer and no QKV split.
  const std::vector<std::string> ls = {"--optimizer", "muon", "--muon-no-split-qkv"};
  const End nosplit = run_job(1, ls, dir, "muon-nosplit-1");
  same(nosplit,
       run_job(4, {"--optimizer", "muon", "--muon-no-split-qkv", "--muon-tp-mode", "layer_sharded",
                   "--use-distributed-optimizer", "--muon-ns-batch-size", "4"},
               dir, "muon-layer-sharded"),
       "--muon-tp-mode layer_sharded: DP=4, layer-wise distributed optimizer, 4 matrices per NS call");
  same(nosplit,
       run_job(4, {"--optimizer", "muon", "--muon-no-split-qkv", "--muon-tp-mode", "layer_sharded",
                   "--use-distributed-optimizer", "--tensor-model-parallel-size", "2"},
               dir, "muon-layer-sharded-tp2"),
       "--muon-tp-mode layer_sharded: TP=2 x DP=2, layer-wise distributed optimizer");
}
