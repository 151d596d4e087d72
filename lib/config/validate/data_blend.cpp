// Data blend checks (seed arguments.py 1597-1629): at most one data source, the FIM dataset's arguments and the
// Transformer Engine cross-entropy fusion gate.
#include "config/validate/section_functions.h"

namespace mr::section {

MR_RULE(kSingleDataSource, "data-blend.single-source",
        "At most one of --mock-data, --data-path and --train/valid/test-data-path may be given.");
MR_RULE(kFimNoMock, "data-blend.fim-no-mock-data", "--fim-data cannot be combined with --mock-data.");
MR_RULE(kFimRate, "data-blend.fim-rate-required", "--fim-data needs a non-zero --fim-rate.");
MR_RULE(kFimSpmRate, "data-blend.fim-spm-rate-required", "--fim-data needs a non-zero --fim-spm-rate.");
MR_RULE(kFimTokens, "data-blend.fim-tokens-required",
        "--fim-data needs all FIM extra tokens (prefix, middle, suffix, pad, eod).");
MR_RULE(kTeCrossEntropy, "data-blend.te-cross-entropy-fusion-version",
        "--cross-entropy-loss-fusion with --cross-entropy-fusion-impl te needs Transformer Engine >= 2.19.0.");

void data_blend(Context& ctx) {
  // seed 1598-1601: the three kinds of data source are mutually exclusive (none at all is fine).
  int sources = (ctx.on("mock_data") ? 1 : 0) + (ctx.on("data_path") ? 1 : 0) +
                ((ctx.on("train_data_path") || ctx.on("valid_data_path") || ctx.on("test_data_path")) ? 1 : 0);
  ctx.require(sources <= 1, kSingleDataSource,
              "give a single data source: --mock-data, --data-path, or the split --train-data-path / "
              "--valid-data-path / --test-data-path, not several of them",
              {"mock_data", "data_path", "train_data_path", "valid_data_path", "test_data_path"});

  // seed 1603-1615
  if (ctx.on("fim_data")) {
    ctx.require(!ctx.on("mock_data"), kFimNoMock, "--fim-data builds a FIM dataset from real data: drop --mock-data",
                {"fim_data", "mock_data"});
    ctx.require(ctx.on("fim_rate"), kFimRate, "--fim-data needs --fim-rate (got " + ctx["fim_rate"].py_str() + ")",
                {"fim_data", "fim_rate"});
    ctx.require(ctx.on("fim_spm_rate"), kFimSpmRate,
                "--fim-data needs --fim-spm-rate (got " + ctx["fim_spm_rate"].py_str() + ")",
                {"fim_data", "fim_spm_rate"});
    for (const char* tok :
         {"fim_prefix_token", "fim_middle_token", "fim_suffix_token", "fim_pad_token", "fim_eod_token"})
      ctx.require(!ctx.is_none(tok), kFimTokens, "--fim-data needs " + Context::flag(tok) + " to be set",
                  {"fim_data", tok});
  }

  // seed 1617-1625
  bool te_fusion = ctx.on("cross_entropy_loss_fusion") && ctx["cross_entropy_fusion_impl"] == Value("te");
  ctx.require(!(te_fusion && !ctx.te_min("2.19.0")), kTeCrossEntropy,
              "--cross-entropy-loss-fusion with --cross-entropy-fusion-impl te is disabled before Transformer "
              "Engine 2.19.0 (target has " +
                  ctx.env().te_version +
                  "): use --cross-entropy-fusion-impl native or drop --cross-entropy-loss-fusion",
              {"cross_entropy_loss_fusion", "cross_entropy_fusion_impl"});
}

}  // namespace mr::section
