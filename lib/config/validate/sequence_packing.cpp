// Variable sequence lengths, the SFT mock-dataset default, --use-varlen-dataset and the sequence-packing
// scheduler checks (seed arguments.py 1296-1312 and 1527-1595, validate_args).
#include "config/validate/section_functions.h"

namespace mr::section {

MR_RULE(kVarlenNotSft, "varlen.sft-exclusive", "--use-varlen-dataset and --sft are mutually exclusive.");
MR_RULE(kVarlenSbhdScheduler, "varlen.sbhd-without-scheduler",
        "--varlen-sbhd-validation does not take a --sequence-packing-scheduler.");
MR_RULE(kVarlenSbhdMock, "varlen.sbhd-without-mock-data",
        "--varlen-sbhd-validation needs a real dataset, not --mock-data.");
MR_RULE(kDynamicSchedulerNeedsDcp, "sequence-packing.dynamic-cp-scheduler",
        "--sequence-packing-scheduler default_dynamic_cp needs --dynamic-context-parallel.");
MR_RULE(kPackingPerTokenLoss, "sequence-packing.per-token-loss",
        "Sequence packing needs --calculate-per-token-loss.");
MR_RULE(kPackingBufferSize, "sequence-packing.buffer-size",
        "The packed-sequence buffer (CP ranks x --max-seqlen-per-dp-cp-rank) must hold --seq-length tokens.");
MR_RULE(kSchedulerGraphsVarlen, "sequence-packing.cuda-graph-varlen-mbs1",
        "Scheduler CUDA graphs (dp_balanced + transformer_engine) need --use-varlen-dataset and "
        "--micro-batch-size 1.");
MR_RULE(kSchedulerGraphsFixedBatch, "sequence-packing.cuda-graph-fixed-batch",
        "Scheduler CUDA graphs need a fixed global batch size (no --step-batch-size-schedule).");

void variable_seq_lengths(Context& ctx) {
  // Set again below when a packing scheduler makes sequence lengths vary between microbatches.
  ctx.set("variable_seq_lengths", false, "validate_args default");

  if (ctx.on("mock_data") && ctx.on("sft") && ctx.is_none("sft_mock_dataset_config_json")) {
    const int64_t seq = ctx.i("seq_length");
    // json.dumps() of the default lognormal distribution, with Python's default separators.
    const std::string json = std::string("{\"mode\": \"distribution\", \"type\": \"lognormal\", ") +
                             "\"min_seq_len\": " + std::to_string(py_floordiv(seq, 2)) + ", " +
                             "\"max_seq_len\": " + std::to_string(seq) + ", " +
                             "\"mean_seq_len\": " + std::to_string(py_floordiv(seq, 4) * 3) + ", " +
                             "\"lognormal_sigma\": 1.1}";
    ctx.set("sft_mock_dataset_config_json", json, "--mock-data --sft default lognormal distribution");
  }
}

void varlen_dataset(Context& ctx) {
  if (!ctx.on("use_varlen_dataset")) return;
  ctx.require(!ctx.on("sft"), kVarlenNotSft,
              "--use-varlen-dataset and --sft both select the packed-sequence dataset: use only one",
              {"use_varlen_dataset", "sft"});
  if (ctx.on("varlen_sbhd_validation")) {
    ctx.require(ctx.is_none("sequence_packing_scheduler"), kVarlenSbhdScheduler,
                "--varlen-sbhd-validation emits unpacked SBHD samples: remove --sequence-packing-scheduler (" +
                    show(ctx, "sequence_packing_scheduler") + ")",
                {"varlen_sbhd_validation", "sequence_packing_scheduler"});
    ctx.require(!ctx.on("mock_data"), kVarlenSbhdMock,
                "--varlen-sbhd-validation compares against a real dataset and cannot be used with --mock-data",
                {"varlen_sbhd_validation", "mock_data"});
  } else if (ctx.is_none("sequence_packing_scheduler")) {
    // VarlenDataset yields one unpacked sample per item and relies on a packing scheduler.
    ctx.set("sequence_packing_scheduler", ctx.on("dynamic_context_parallel") ? "default_dynamic_cp" : "dp_balanced",
            "--use-varlen-dataset default packing scheduler");
  }
}

void sequence_packing(Context& ctx) {
  const Value scheduler = ctx["sequence_packing_scheduler"];
  if (scheduler == Value("default_dynamic_cp") && !ctx.on("dynamic_context_parallel"))
    ctx.fail(kDynamicSchedulerNeedsDcp,
             "--sequence-packing-scheduler default_dynamic_cp requires --dynamic-context-parallel",
             {"sequence_packing_scheduler", "dynamic_context_parallel"});

  if (!ctx.is_none("sequence_packing_scheduler")) {
    ctx.set("variable_seq_lengths", true, "sequence packing scheduler " + scheduler.py_str());
    // Packed microbatches hold different numbers of tokens, so the loss must be averaged per token.
    ctx.require(ctx.on("calculate_per_token_loss"), kPackingPerTokenLoss,
                "--sequence-packing-scheduler " + scheduler.py_str() + " needs --calculate-per-token-loss",
                {"sequence_packing_scheduler", "calculate_per_token_loss"});
    if (!ctx.is_none("max_seqlen_per_dp_cp_rank")) {
      int64_t total_cp_ranks = ctx.i("context_parallel_size");
      if (scheduler == Value("default_dynamic_cp"))
        total_cp_ranks = ctx.mul(total_cp_ranks, ctx.i("data_parallel_size"),
                                 "the context-parallel x data-parallel size", {"context_parallel_size", "world_size"});
      const int64_t buffer = ctx.mul(total_cp_ranks, ctx.i("max_seqlen_per_dp_cp_rank"),
                                     "the packed-sequence buffer (CP ranks x --max-seqlen-per-dp-cp-rank)",
                                     {"max_seqlen_per_dp_cp_rank"});
      ctx.require(buffer >= ctx.i("seq_length"), kPackingBufferSize,
                  "packed-sequence buffer of " + std::to_string(buffer) + " tokens (" +
                      std::to_string(total_cp_ranks) + " CP rank(s) x --max-seqlen-per-dp-cp-rank " +
                      show(ctx, "max_seqlen_per_dp_cp_rank") + ") is smaller than --seq-length " +
                      show(ctx, "seq_length"),
                  {"max_seqlen_per_dp_cp_rank", "seq_length", "context_parallel_size"});
    }
  }

  if (scheduler == Value("dp_balanced") && ctx["cuda_graph_impl"] == Value("transformer_engine")) {
    ctx.require(ctx.on("use_varlen_dataset") && ctx["micro_batch_size"] == Value(1), kSchedulerGraphsVarlen,
                "--sequence-packing-scheduler dp_balanced with --cuda-graph-impl transformer_engine needs "
                "--use-varlen-dataset (one variable-length sample per item) and --micro-batch-size 1 (got " +
                    show(ctx, "micro_batch_size") + ")",
                {"sequence_packing_scheduler", "cuda_graph_impl", "use_varlen_dataset", "micro_batch_size"});
    ctx.require(ctx.is_none("step_batch_size_schedule"), kSchedulerGraphsFixedBatch,
                "--sequence-packing-scheduler dp_balanced with --cuda-graph-impl transformer_engine needs a fixed "
                "global batch size: remove --step-batch-size-schedule",
                {"step_batch_size_schedule", "sequence_packing_scheduler", "cuda_graph_impl"});
  }
}

}  // namespace mr::section
