// cli.*: process wall time of megatron-run's config path against a trivial C++ process, in the same run.
#include <algorithm>
#include <filesystem>

#include "bench.h"

namespace mr::bench {
namespace {

std::vector<std::string> corpus_files(const Options& o) {
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(o.source_dir + "/tests/data/corpus/functional-tests"))
    if (e.path().extension() == ".yaml") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

Result versus_trivial(const Options& o, const std::vector<std::string>& cmd, int n) {
  double trivial = process_seconds({o.bin_dir + "/mr-trivial"}, n);
  double t = process_seconds(cmd, n);
  Result r;
  r.value = t * 1e3;
  r.unit = "ms";
  r.baseline = "trivial C++ process";
  r.baseline_value = trivial * 1e3;
  r.ratio = trivial / t;  // 1.0 = as cheap as starting a process at all
  return r;
}

// `megatron-run --dry-run --config configs/default.yaml`: parse, validate, print.
MR_BENCHMARK("cli.dry_run", [](const Options& o) {
  return with_target(versus_trivial(o, {o.bin_dir + "/megatron-run", "--dry-run", "--config",
                                        o.source_dir + "/configs/default.yaml"}, o.quick ? 30 : 200),
                     value_at_most(5));  // ms of wall time: an absolute target (docs/performance.md)
});

// `megatron-run params` for Megatron's Mixtral 8x7B CI config on 32 ranks: validation plus the model plan and
// memory of every (tensor, pipeline) rank (8 of them, 46.7 B parameters), no LibTorch.
MR_BENCHMARK("cli.params_mixtral", [](const Options& o) {
  const std::string cfg =
      o.source_dir + "/tests/data/corpus/functional-tests/mixtral__mixtral_8x7b_alltoall_tp2pp4ep4_release.yaml";
  std::string line = "CUDA_DEVICE_MAX_CONNECTIONS=1 '" + o.bin_dir + "/megatron-run' params --world-size 32 " +
                     "--env-placeholder /p --vocab-size 32000 --config '" + cfg + "' >/dev/null 2>&1";
  return versus_trivial(o, {"/bin/sh", "-c", line}, o.quick ? 30 : 200);
});

// `megatron-run check` over the whole functional-test corpus (167 files) in one process.
MR_BENCHMARK("cli.check_corpus", [](const Options& o) {
  std::vector<std::string> cmd = {o.bin_dir + "/megatron-run", "check", "--world-size", "8", "--env-placeholder",
                                  "/placeholder", "--quiet"};
  auto files = corpus_files(o);
  cmd.insert(cmd.end(), files.begin(), files.end());
  // check exits 1 when a file is invalid (the corpus has such files); run it through a shell that ignores that.
  std::string line;
  for (const auto& c : cmd) line += "'" + c + "' ";
  return with_target(versus_trivial(o, {"/bin/sh", "-c", line + ">/dev/null 2>&1; exit 0"}, o.quick ? 5 : 20),
                     value_below(1000));  // ms: "instant", an absolute target
});

}  // namespace
}  // namespace mr::bench
