// Seed arguments.py 443-522: generalized-TP (GTP) weight and sequence shards, the total model size,
// the data-parallel and batch-parallel sizes, and the context-parallel layout checks.
#include <string>

#include "config/validate/section_functions.h"

namespace mr::section {

MR_RULE(kWeightShardsAtLeastTp, "parallel.weight-shards-at-least-tp",
        "--tensor-parallel-num-weight-shards must be at least --tensor-model-parallel-size.");
MR_RULE(kWeightShardsDivisible, "parallel.weight-shards-divisible-by-tp",
        "--tensor-parallel-num-weight-shards must be a multiple of --tensor-model-parallel-size.");
MR_RULE(kSeqShardsDivisible, "parallel.sequence-shards-divisible-by-sp",
        "--tensor-parallel-num-sequence-shards must be a positive multiple of the sequence-parallel size "
        "(TP with --sequence-parallel, else 1).");
MR_RULE(kSeqShardsNeedSp, "parallel.sequence-shards-need-sequence-parallel",
        "GTP sequence sharding with --tensor-model-parallel-size > 1 needs --sequence-parallel.");
MR_RULE(kSeqShardsDivideRemat, "parallel.sequence-shards-divide-weight-remat",
        "The GTP sequence-shard factor must divide the GTP weight-remat size "
        "(--tensor-parallel-num-weight-shards / --tensor-model-parallel-size).");
MR_RULE(kGtpSeqTorchDist, "parallel.gtp-sequence-needs-torch-dist",
        "GTP sequence sharding needs --ckpt-format torch_dist.");
MR_RULE(kGtpSeqNoFsdp, "parallel.gtp-sequence-no-fsdp",
        "GTP sequence sharding runs on Megatron DDP; it cannot be combined with --use-torch-fsdp2 or "
        "--use-megatron-fsdp.");
MR_RULE(kGtpSeqNoTpPpDp, "parallel.gtp-sequence-no-tp-pp-dp-mapping",
        "GTP sequence sharding cannot be combined with --use-tp-pp-dp-mapping.");
MR_RULE(kWorldSizeDivisible, "parallel.world-size-divisible",
        "World size must be a multiple of the total model size TP x PP x CP x GTP weight-remat size.");
MR_RULE(kLocalBackendSpec, "parallel.local-attention-backend-needs-local-spec",
        "--attention-backend local works only with --spec local.");
MR_RULE(kHierarchicalCpProduct, "parallel.hierarchical-cp-product",
        "The product of --hierarchical-context-parallel-sizes must equal the context-parallel size.");
MR_RULE(kA2aP2pNeedsHierarchy, "parallel.a2a-p2p-needs-hierarchical-cp",
        "--cp-comm-type a2a+p2p needs --hierarchical-context-parallel-sizes.");

namespace {

std::string str(int64_t v) { return std::to_string(v); }

// A product that overflows 64 bits cannot divide any real world size: report it as the divisibility failure.
int64_t product(Context& ctx, std::initializer_list<int64_t> factors, int64_t world_size) {
  int64_t p = 1;
  for (int64_t f : factors) {
    auto next = checked_mul(p, f);
    if (!next)
      ctx.fail(kWorldSizeDivisible,
               "world size (" + str(world_size) + ") cannot be divided by a total model size beyond 64 bits",
               {"tensor_model_parallel_size", "pipeline_model_parallel_size", "context_parallel_size"});
    p = *next;
  }
  return p;
}

}  // namespace

void model_parallel_sizes(Context& ctx) {
  const int64_t world_size = ctx.i("world_size");
  const int64_t tp = ctx.i("tensor_model_parallel_size");
  const int64_t pp = ctx.i("pipeline_model_parallel_size");
  const int64_t cp = ctx.i("context_parallel_size");

  // seed 449-455 -> megatron/core/model_parallel_config.py resolve_tensor_parallel_weight_shards: the total
  // number of weight shards is the source of truth; the GTP weight-remat size is what it adds on top of TP.
  int64_t gtp = ctx.has("gtp_weight_remat_size") ? ctx.i("gtp_weight_remat_size") : 1;
  int64_t weight_shards = 0;
  if (ctx.is_none("tensor_parallel_num_weight_shards")) {
    weight_shards = product(ctx, {tp, gtp}, world_size);
  } else {
    weight_shards = ctx.i("tensor_parallel_num_weight_shards");
    ctx.require(weight_shards >= tp, kWeightShardsAtLeastTp,
                "--tensor-parallel-num-weight-shards (" + str(weight_shards) +
                    ") is smaller than --tensor-model-parallel-size (" + str(tp) + ")",
                {"tensor_parallel_num_weight_shards", "tensor_model_parallel_size"});
    ctx.require(tp != 0 && py_mod(weight_shards, tp) == 0, kWeightShardsDivisible,
                "--tensor-parallel-num-weight-shards (" + str(weight_shards) +
                    ") is not a multiple of --tensor-model-parallel-size (" + str(tp) + ")",
                {"tensor_parallel_num_weight_shards", "tensor_model_parallel_size"});
    gtp = py_floordiv(weight_shards, tp);
  }
  ctx.set("tensor_parallel_num_weight_shards", weight_shards, "model-parallel-sizes: resolve_tensor_parallel_weight_shards");
  ctx.set("gtp_weight_remat_size", gtp, "model-parallel-sizes: resolve_tensor_parallel_weight_shards");

  // seed 456-463 -> resolve_tensor_parallel_sequence_shards. The public repository has no
  // megatron/core/tensor_parallel/gtp_parallel_layout.py; rules inferred from the seed's use and the reference
  // stand-in: TP counts as sequence shards only with --sequence-parallel, and the factor beyond that must
  // divide the weight-remat size.
  const bool sp = ctx.on("sequence_parallel");
  const int64_t sp_size = sp ? tp : 1;
  const int64_t seq_shards =
      ctx.is_none("tensor_parallel_num_sequence_shards") ? sp_size : ctx.i("tensor_parallel_num_sequence_shards");
  ctx.require(seq_shards >= sp_size && sp_size != 0 && py_mod(seq_shards, sp_size) == 0, kSeqShardsDivisible,
              "--tensor-parallel-num-sequence-shards (" + str(seq_shards) +
                  ") must be positive and a multiple of the sequence-parallel size (" + str(sp_size) + ")",
              {"tensor_parallel_num_sequence_shards", "tensor_model_parallel_size", "sequence_parallel"});
  const int64_t gtp_seq = py_floordiv(seq_shards, sp_size);
  ctx.require(!(gtp_seq > 1 && tp > 1 && !sp), kSeqShardsNeedSp,
              "--tensor-parallel-num-sequence-shards (" + str(seq_shards) + ") shards sequences across GTP ranks, "
                  "which with --tensor-model-parallel-size " + str(tp) + " needs --sequence-parallel",
              {"tensor_parallel_num_sequence_shards", "tensor_model_parallel_size", "sequence_parallel"});
  ctx.require(gtp_seq != 0 && py_mod(gtp, gtp_seq) == 0, kSeqShardsDivideRemat,
              "the GTP sequence-shard factor (" + str(gtp_seq) + ") must divide the GTP weight-remat size (" +
                  str(gtp) + ", from --tensor-parallel-num-weight-shards)",
              {"tensor_parallel_num_sequence_shards", "tensor_parallel_num_weight_shards"});
  ctx.set("tensor_parallel_num_sequence_shards", seq_shards, "model-parallel-sizes: resolve_tensor_parallel_sequence_shards");
  ctx.set("gtp_remat_num_sequence_shards", gtp_seq, "model-parallel-sizes: resolve_tensor_parallel_sequence_shards");

  // seed 464-469: the model size is measured with the command-line CP, before it absorbs the sequence shards.
  const int64_t total_model_size = product(ctx, {tp, pp, cp, gtp}, world_size);

  // seed 472: the context-parallel group includes the GTP sequence shards from here on.
  const int64_t cp_full = product(ctx, {cp, gtp_seq}, world_size);
  ctx.set("context_parallel_size", cp_full, "model-parallel-sizes: CP x GTP sequence shards");
  if (gtp_seq > 1) {
    // seed 473-479
    ctx.require(ctx["ckpt_format"] == Value("torch_dist"), kGtpSeqTorchDist,
                "GTP sequence sharding (--tensor-parallel-num-sequence-shards " + str(seq_shards) +
                    ") needs --ckpt-format torch_dist, not " + ctx["ckpt_format"].py_str(),
                {"tensor_parallel_num_sequence_shards", "ckpt_format"});
    ctx.require(!(ctx.on("use_torch_fsdp2") || ctx.on("use_megatron_fsdp")), kGtpSeqNoFsdp,
                "GTP sequence sharding (--tensor-parallel-num-sequence-shards " + str(seq_shards) +
                    ") runs on Megatron DDP; drop --use-torch-fsdp2 / --use-megatron-fsdp",
                {"tensor_parallel_num_sequence_shards", "use_torch_fsdp2", "use_megatron_fsdp"});
    ctx.require(!ctx.on("use_tp_pp_dp_mapping"), kGtpSeqNoTpPpDp,
                "GTP sequence sharding (--tensor-parallel-num-sequence-shards " + str(seq_shards) +
                    ") does not work with --use-tp-pp-dp-mapping",
                {"tensor_parallel_num_sequence_shards", "use_tp_pp_dp_mapping"});
  }

  // seed 482-484
  ctx.require(total_model_size != 0 && py_mod(world_size, total_model_size) == 0, kWorldSizeDivisible,
              "world size (" + str(world_size) + ") is not a multiple of the total model size " +
                  str(total_model_size) + " = --tensor-model-parallel-size (" + str(tp) +
                  ") x --pipeline-model-parallel-size (" + str(pp) + ") x --context-parallel-size (" + str(cp) +
                  ") x GTP weight-remat size (" + str(gtp) + ")",
              {"tensor_model_parallel_size", "pipeline_model_parallel_size", "context_parallel_size",
               "tensor_parallel_num_weight_shards"});

  // seed 486-487: the local attention backend exists only in the local (non-TE) layer spec. spec[0] of an
  // unset or empty --spec fails in Megatron too (TypeError / IndexError).
  if (ctx["attention_backend"] == Value("AttnBackend.local")) {
    const Value& spec = ctx["spec"];
    bool ok = spec.is_list() && !spec.as_list().empty() && spec.as_list().front() == Value("local");
    ctx.require(ok, kLocalBackendSpec,
                "--attention-backend local needs --spec local (got --spec " + spec.py_str() + ")",
                {"attention_backend", "spec"});
  }

  // seed 490-496
  // The derivations read as the user's sizes (--explain, --provenance): "derived by model-parallel-sizes: world
  // size 8 / (TP 2 x PP 2 x CP 1) = 2".
  const std::string sizes = "TP " + str(tp) + " x PP " + str(pp) + " x CP " + str(cp) +
                            (gtp > 1 ? " x GTP weight shards " + str(gtp) : std::string());
  ctx.set("transformer_pipeline_model_parallel_size", pp, "model-parallel-sizes: --pipeline-model-parallel-size");
  const int64_t dp = py_floordiv(world_size, total_model_size);
  ctx.set("data_parallel_size", dp,
          "model-parallel-sizes: world size " + str(world_size) + " / (" + sizes + ") = " + str(dp));
  const int64_t bp = py_floordiv(world_size, product(ctx, {tp, pp, cp_full}, world_size));
  ctx.set("batch_parallel_size", bp,
          "model-parallel-sizes: world size " + str(world_size) + " / (TP " + str(tp) + " x PP " + str(pp) +
              " x CP " + str(cp_full) + ") = " + str(bp));

  // seed 497-499: RLConfig and InferenceSetupConfig are built from the arguments here. RLConfig's __post_init__
  // checks an RL run's generation settings (rl_config.cpp); the public repository's InferenceSetupConfig has no
  // validate() method, so nothing is checked for it (skip_train_rl.cpp uses the RL fields again at seed 1807).
  rl_config(ctx);

  // seed 514-516: numpy.prod of the hierarchy must equal the (resolved) CP size.
  const Value& hier = ctx["hierarchical_context_parallel_sizes"];
  if (hier.truthy()) {
    uint64_t prod = 1;  // numpy's int64 product wraps on overflow
    std::string sizes;
    for (const Value& v : hier.as_list()) {
      prod *= static_cast<uint64_t>(v.as_int());
      sizes += (sizes.empty() ? "" : " x ") + v.py_str();
    }
    ctx.require(static_cast<int64_t>(prod) == cp_full, kHierarchicalCpProduct,
                "--hierarchical-context-parallel-sizes multiply to " + str(static_cast<int64_t>(prod)) + " (" +
                    sizes + ") but the context-parallel size is " + str(cp_full),
                {"hierarchical_context_parallel_sizes", "context_parallel_size"});
  }
  // seed 517-519: `in` on the list of comm types (a substring test if it were a plain string).
  const Value& comm = ctx["cp_comm_type"];
  bool a2a_p2p = false;
  if (comm.is_list()) {
    for (const Value& v : comm.as_list()) a2a_p2p = a2a_p2p || v == Value("a2a+p2p");
  } else if (comm.is_str()) {
    a2a_p2p = comm.as_str().find("a2a+p2p") != std::string::npos;
  }
  if (a2a_p2p)
    ctx.require(!hier.is_none(), kA2aP2pNeedsHierarchy,
                "--cp-comm-type a2a+p2p needs --hierarchical-context-parallel-sizes (the a2a and p2p group sizes)",
                {"cp_comm_type", "hierarchical_context_parallel_sizes"});

  // seed 521-522
  if (ctx.is_none("expert_tensor_parallel_size"))
    ctx.set("expert_tensor_parallel_size", tp, "model-parallel-sizes: defaults to --tensor-model-parallel-size");
}

}  // namespace mr::section
