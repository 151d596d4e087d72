// A Megatron-flavoured client (tests/launch/programs/megatron_client.py) as the program megatron-run launches:
// it builds argparse from Megatron's argument table (tests/data/spec/reference-schema.json: dests, types, nargs,
// actions) and parses the flags megatron-run appended; every value must equal megatron-run's parsed namespace
// and, where Megatron's validate_args does not rewrite it, its resolved namespace (`--dry-run --format json`).
// A dozen corpus configs, each launched as one rank of a torchrun job of 8 (megatron-run validates for 8 and
// runs the client in its own place).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <string>

#include "../config/binary.h"

namespace fs = std::filesystem;

namespace {

const std::string kBin = std::string("'") + MR_BINARY + "'";
const std::string kSrc = MR_SOURCE_DIR;

}  // namespace

TEST_CASE("a Megatron-style argparse client parses the appended flags to megatron-run's values",
          "[launch][program][client][process]") {
  const char* configs[] = {
      "bert__bert_mcore_tp2_pp2",
      "gpt__gpt3_mcore_reruns_enable",
      "gpt__gpt3_mcore_te_tp2_pp1_gdn_1node",
      "gpt__gpt3_mcore_te_tp2_zp_z3_resume_fsdp_dtensor_1node",
      "hybrid__hybrid_mr_mcore_te_tp2_pp1_cp4_dgx_a100_1N8G",
      "moe__deepseek_proxy_fsdp_ep2_fsdp2_1node",
      "moe__gpt3_mcore_te_tp2_pp2_ep4_etp1_resume_torch_dist_attn_cudagraph",
      "moe__gpt3_mcore_te_tp2_pp1_te_8experts2parallel_top2router",
      "multimodal-llava__multimodal_llava_mcore_te_tp1_pp1",
      "nemotron__nemotron3_5_lightning_nightly_tp1_pp1_cp1_ep8_dgx_gb200",
      "t5__t5_mcore_te_tp2_pp1_vp1",
      "t5__t5_release_sm",
  };
  const fs::path dir = fs::temp_directory_path() / ("mr-client-" + std::to_string(getpid()));
  fs::create_directories(dir);
  // One rank of a torchrun job of 8 on an sm_90 machine (the corpus's target).
  const std::string job = "RANK=0 WORLD_SIZE=8 LOCAL_RANK=0 LOCAL_WORLD_SIZE=8 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 ";
  for (const char* name : configs) {
    const std::string config = kSrc + "/tests/data/corpus/functional-tests/" + name + ".yaml";
    const std::string common = " --env-placeholder /placeholder --target-gpu-arch sm_90 --config " + config;
    const std::string parsed = (dir / "parsed.json").string(), resolved = (dir / "resolved.json").string();
    INFO(name);
    REQUIRE(mrtest::run_shell("env " + job + kBin + " --dry-run --parse-only --format json" + common + " 2>/dev/null >" + parsed).exit == 0);
    REQUIRE(mrtest::run_shell("env " + job + kBin + " --dry-run --format json" + common + " 2>/dev/null >" + resolved).exit == 0);
    // --no-file-checks: the client reads none of the corpus's data, tokenizer or checkpoint paths (placeholders).
    mrtest::Proc r = mrtest::run_shell("timeout -k 5 60 env " + job + kBin + common + " --no-file-checks -- /usr/bin/python3 " + kSrc +
                                       "/tests/launch/programs/megatron_client.py " + kSrc +
                                       "/tests/data/spec/reference-schema.json " + parsed + " " + resolved + " 2>&1");
    INFO(r.out);
    CHECK(r.exit == 0);
    CHECK(r.out.find("all equal megatron-run's parsed namespace") != std::string::npos);
  }
  fs::remove_all(dir);
}
