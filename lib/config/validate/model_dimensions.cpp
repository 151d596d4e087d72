// Seed arguments.py 1145-1180 and 1188-1200 (validate_args): layer counts, the required model arguments, the
// derived ffn_hidden_size / kv_channels, and the sequence lengths against CP and max_position_embeddings.
#include <cmath>
#include <cstdint>
#include <string>

#include "config/validate/section_functions.h"

namespace mr::section {

MR_RULE(kLayersConflict, "model-shape.num-layers-conflict",
        "--num-layers and --encoder-num-layers cannot both be given.");
MR_RULE(kLayersMissing, "model-shape.num-layers-missing", "One of --num-layers or --encoder-num-layers is required.");
MR_RULE(kRequiredArg, "model-shape.required-argument",
        "--num-layers, --hidden-size, --num-attention-heads and --max-position-embeddings are required.");
MR_RULE(kHeadsDivide, "model-shape.hidden-size-divisible-by-heads",
        "Without --kv-channels, --hidden-size must be a multiple of --num-attention-heads.");
MR_RULE(kCpDivisible, "seq-length.context-parallel-divisible",
        "--seq-length must be a multiple of 2 x the context-parallel size when CP > 1.");
MR_RULE(kEncoderSeqConflict, "seq-length.encoder-seq-length-conflict",
        "--seq-length and --encoder-seq-length cannot both be given.");
MR_RULE(kSeqMissing, "seq-length.missing", "One of --seq-length or --encoder-seq-length is required.");
MR_RULE(kSeqExceedsMaxPos, "seq-length.exceeds-max-position-embeddings",
        "--max-position-embeddings must be at least --seq-length.");
MR_RULE(kDecoderSeqExceedsMaxPos, "seq-length.decoder-exceeds-max-position-embeddings",
        "--max-position-embeddings must be at least --decoder-seq-length.");

namespace {

constexpr const char* kWhy = "model-dimensions";

// Python's // on ints (rounds toward negative infinity).
int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

std::string num(const Context& ctx, std::string_view dest) { return ctx[dest].py_str(); }

}  // namespace

void model_dimensions(Context& ctx) {
  // seed 1145-1152
  if (!ctx.is_none("num_layers")) {
    ctx.require(ctx.is_none("encoder_num_layers"), kLayersConflict,
                "give either --num-layers (" + num(ctx, "num_layers") + ") or --encoder-num-layers (" +
                    num(ctx, "encoder_num_layers") + "), not both",
                {"num_layers", "encoder_num_layers"});
    ctx.set("encoder_num_layers", ctx["num_layers"], kWhy);
  } else {
    ctx.require(!ctx.is_none("encoder_num_layers"), kLayersMissing,
                "the number of layers is missing: set --num-layers (or --encoder-num-layers)",
                {"num_layers", "encoder_num_layers"});
    ctx.set("num_layers", ctx["encoder_num_layers"], kWhy);
  }

  // seed 1154-1158
  for (std::string_view dest : {"num_layers", "hidden_size", "num_attention_heads", "max_position_embeddings"})
    ctx.require(!ctx.is_none(dest), kRequiredArg, Context::flag(dest) + " is required but was not given", {dest});

  // seed 1161-1170: with SwiGLU two projections share the budget of one 4h MLP, so 8h/3 rounded down to a
  // multiple of 64 (computed in floating point, as the seed does).
  if (ctx.is_none("ffn_hidden_size")) {
    const int64_t h = ctx.i("hidden_size");
    int64_t ffn;
    if (ctx.on("swiglu"))
      ffn = ctx.mul(static_cast<int64_t>(std::trunc(static_cast<double>(ctx.mul(8, h, "8 x --hidden-size",
                                                                                  {"hidden_size"})) /
                                                    3.0 / 64.0)),
                    64, "the SwiGLU --ffn-hidden-size derived from --hidden-size", {"hidden_size"});
    else
      ffn = ctx.mul(4, h, "the --ffn-hidden-size derived as 4 x --hidden-size", {"hidden_size"});
    ctx.set("ffn_hidden_size", ffn, kWhy);
  }

  // seed 1172-1174
  if (ctx.is_none("kv_channels")) {
    const int64_t h = ctx.i("hidden_size"), heads = ctx.i("num_attention_heads");
    if (heads == 0 || h % heads != 0)
      ctx.fail(kHeadsDivide,
               "--hidden-size (" + std::to_string(h) + ") must be divisible by --num-attention-heads (" +
                   std::to_string(heads) + ") to derive --kv-channels; otherwise set --kv-channels",
               {"hidden_size", "num_attention_heads", "kv_channels"});
    ctx.set("kv_channels", floor_div(h, heads), kWhy);
  }

  // seed 1176-1180: the resolved CP size includes GTP sequence shards.
  if (!ctx.is_none("seq_length") && ctx.i("context_parallel_size") > 1) {
    const int64_t seq = ctx.i("seq_length"), cp = ctx.i("context_parallel_size");
    if (seq % ctx.mul(cp, 2, "2 x the context-parallel size", {"context_parallel_size"}) != 0)
      ctx.fail(kCpDivisible,
               "--seq-length (" + std::to_string(seq) + ") must be a multiple of 2 x the resolved context-parallel "
               "size (" + std::to_string(cp) + ", GTP sequence shards included)",
               {"seq_length", "context_parallel_size"});
  }
}

void sequence_lengths(Context& ctx) {
  // seed 1188-1193
  if (!ctx.is_none("seq_length")) {
    ctx.require(ctx.is_none("encoder_seq_length"), kEncoderSeqConflict,
                "give either --seq-length (" + num(ctx, "seq_length") + ") or --encoder-seq-length (" +
                    num(ctx, "encoder_seq_length") + "), not both",
                {"seq_length", "encoder_seq_length"});
    ctx.set("encoder_seq_length", ctx["seq_length"], "sequence-lengths");
  } else {
    ctx.require(!ctx.is_none("encoder_seq_length"), kSeqMissing,
                "the sequence length is missing: set --seq-length (or --encoder-seq-length)",
                {"seq_length", "encoder_seq_length"});
    ctx.set("seq_length", ctx["encoder_seq_length"], "sequence-lengths");
  }

  // seed 1195-1200
  if (!ctx.is_none("seq_length") && ctx.i("max_position_embeddings") < ctx.i("seq_length"))
    ctx.fail(kSeqExceedsMaxPos,
             "--max-position-embeddings (" + num(ctx, "max_position_embeddings") +
                 ") must be greater than or equal to --seq-length (" + num(ctx, "seq_length") + ")",
             {"max_position_embeddings", "seq_length"});
  if (!ctx.is_none("decoder_seq_length") && ctx.i("max_position_embeddings") < ctx.i("decoder_seq_length"))
    ctx.fail(kDecoderSeqExceedsMaxPos,
             "--max-position-embeddings (" + num(ctx, "max_position_embeddings") +
                 ") must be greater than or equal to --decoder-seq-length (" + num(ctx, "decoder_seq_length") + ")",
             {"max_position_embeddings", "decoder_seq_length"});
}

}  // namespace mr::section
