// Which checkpoint a --load names, and --use-checkpoint-args (run/checkpoint_args.h).
#include "run/checkpoint_args.h"

#include <sys/stat.h>

#include <cerrno>

#include <filesystem>
#include <utility>

#include "config/arg_fit.h"
#include "config/schema.h"
#include "util/text.h"

namespace mr::run {

namespace {

// A dest's value in `ns`, None when absent.
Value value_of(const Namespace& ns, std::string_view dest) { return ns.has(dest) ? ns[dest] : Value(); }

std::optional<std::string> str_of(const Namespace& ns, std::string_view dest) {
  const Value v = value_of(ns, dest);
  if (v.is_str()) return v.as_str();
  return std::nullopt;
}

const Value* saved_value(const Value& saved, std::string_view dest) {
  if (!saved.is_object()) return nullptr;
  for (const auto& [k, v] : saved.as_object())
    if (k == dest) return &v;
  return nullptr;
}

// The saved arguments with Megatron's conversions of older checkpoints: a hybrid_override_pattern without a
// hybrid_layer_pattern becomes the latter (and num_layers is then derived from it, so the saved one is dropped).
Value upgraded(const Value& saved) {
  const Value* over = saved_value(saved, "hybrid_override_pattern");
  const Value* layer = saved_value(saved, "hybrid_layer_pattern");
  if (!over || over->is_none() || (layer && !layer->is_none())) return saved;
  Object o = saved.as_object();
  bool have_layer = false;
  for (auto& [k, v] : o) {
    if (k == "hybrid_layer_pattern") v = *over, have_layer = true;
    if (k == "num_layers") v = Value();
  }
  if (!have_layer) o.emplace_back("hybrid_layer_pattern", *over);
  return Value::object(std::move(o));
}

class Overrider {
 public:
  Overrider(Namespace& ns, const Value& saved, std::string file)
      : ns_(ns), saved_(saved), file_(std::move(file)), prov_("--use-checkpoint-args: " + file_) {}

  // Megatron's _set_arg: unless forced, only an argument the command line left None; the checkpoint's value
  // when it has one (not None).
  void set(std::string_view dest, bool force = false, std::string_view saved_dest = {}) {
    if (!ns_.has(dest)) return;  // not an argument of this Megatron (nor, then, of the checkpoint's)
    if (!force && !ns_[dest].is_none()) return;
    const Value* v = saved_value(saved_, saved_dest.empty() ? dest : saved_dest);
    if (!v || v->is_none()) return;
    put(dest, *v);
  }
  // The value goes in only if the parser could have stored it (a metadata file is plain JSON that a user or
  // another tool may have edited): another JSON type is the file's fault, refused naming the file and argument.
  void put(std::string_view dest, const Value& v) {
    if (!ns_.has(dest)) return;
    if (const std::optional<std::string> want = arg_value_misfit(dest, v))
      throw CheckpointError(kCkptCorrupt, file_ + ": \"args\": the saved argument \"" + std::string(dest) + "\" is " +
                                              abbreviate(v.json(), 120) + ", not " + *want +
                                              " (--use-checkpoint-args would put it in " +
                                              Schema::megatron().flag_for_dest(dest) + ")");
    if (ns_[dest] == v) return;
    changed_.push_back({std::string(dest), ns_[dest], v});
    ns_.set(dest, v, {Provenance::Kind::Derived, prov_});
  }
  const Value* saved(std::string_view dest) const { return saved_value(saved_, dest); }
  std::vector<ArgChange> take() { return std::move(changed_); }

 private:
  Namespace& ns_;
  const Value& saved_;
  std::string file_, prov_;
  std::vector<ArgChange> changed_;
};

// Why a tracker read_tracker took for absent is not there (Megatron's os.path.isfile: anything but a file).
std::string not_there(const std::string& path) {
  std::error_code ec;
  return std::filesystem::exists(path, ec) ? " is not a regular file" : " does not exist";
}

}  // namespace

std::optional<TrackerValue> read_tracker(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return std::nullopt;
  const std::string text = read_small_file(path, 4096);
  auto t = parse_tracker(text);
  if (!t) throw CheckpointError(kCkptCorrupt, path + ": not an iteration number or 'release'");
  return t;
}

bool TrackerSource::exists(const std::string& dir) const {
  std::error_code ec;
  return std::filesystem::is_regular_file(tracker_path(dir), ec);
}

std::optional<TrackerValue> TrackerSource::read(const std::string& dir, std::string* note) const {
  if (note) note->clear();
  return read_tracker(tracker_path(dir));
}

std::string default_non_persistent_dir(const std::string& base) {
  if (base.empty()) return "non_persistent";
  return base.back() == '/' ? base + "non_persistent" : base + "/non_persistent";
}

std::optional<CheckpointPlace> locate_checkpoint(const LoadQuery& q) {
  const TrackerSource own;
  const TrackerSource& trackers = q.trackers ? *q.trackers : own;
  std::string note;  // what the message of a missing iteration adds about the tracker that named it
  std::optional<TrackerValue> t = trackers.read(q.load, &note);
  CheckpointPlace f;
  f.base = q.load;
  int64_t iteration = t ? t->iteration : -1;
  f.release = t && t->release;
  if (q.ckpt_step != 0) {
    iteration = q.ckpt_step;
    f.release = false;
  }
  if (q.non_persistent_global) {
    const std::string np = q.non_persistent_dir ? *q.non_persistent_dir : default_non_persistent_dir(q.load);
    std::string np_note;
    std::optional<TrackerValue> n = trackers.read(np, &np_note);
    if (n && !n->release && n->iteration >= iteration) {
      f.base = np;
      iteration = n->iteration;
      note = np_note;
    }
  }
  if (iteration < 0 && !f.release) return std::nullopt;
  f.iteration = f.release ? 0 : iteration;
  f.dir = iteration_dir(f.base, f.iteration, f.release);
  std::error_code ec;
  if (!std::filesystem::is_directory(f.dir, ec)) {
    // There, but not to be looked at (a symbolic link loop, a directory on the way that may not be searched): why.
    const bool absent = !ec || ec == std::errc::no_such_file_or_directory || ec == std::errc::not_a_directory;
    if (!absent)
      throw CheckpointError(kCkptStepMissing, (q.ckpt_step != 0 ? "--ckpt-step " + std::to_string(q.ckpt_step)
                                                                 : q.flag + " " + q.load) +
                                                  ": " + f.dir + " cannot be opened: " + ec.message());
    if (q.ckpt_step != 0)
      throw CheckpointError(kCkptStepMissing, "--ckpt-step " + std::to_string(q.ckpt_step) + ": there is no " + f.dir);
    throw CheckpointError(kCkptStepMissing, q.flag + " " + q.load + ": " + tracker_path(f.base) + " names " +
                                                (f.release ? std::string("'release'")
                                                           : "iteration " + std::to_string(f.iteration)) +
                                                note + " but " + f.dir +
                                                (std::filesystem::exists(f.dir, ec) ? " is not a directory" : " does not exist"));
  }
  return f;
}

std::vector<ArgChange> override_from_checkpoint_args(Namespace& ns, const Value& saved_args, const std::string& file) {
  const Value saved = upgraded(saved_args);
  Overrider o(ns, saved, file);
  // Model arguments (load_args_from_checkpoint's order). Megatron's list also names arguments this Megatron no
  // longer has (use_rotary_position_embeddings, squared_relu, ...): absent from the namespace, they are skipped.
  o.set("num_layers");
  o.set("hidden_size");
  o.set("ffn_hidden_size");
  o.set("seq_length");
  o.set("num_attention_heads");
  for (const char* d : {"num_query_groups", "group_query_attention"}) o.set(d, true);
  o.set("kv_channels");
  o.set("max_position_embeddings");
  for (const char* d : {"position_embedding_type", "add_position_embedding", "use_rotary_position_embeddings",
                        "rotary_base", "rotary_percent", "rotary_interleaved", "add_bias_linear", "add_qkv_bias",
                        "squared_relu", "swiglu", "untie_embeddings_and_output_weights", "apply_layernorm_1p",
                        "normalization", "apply_query_key_layer_scaling", "attention_dropout", "hidden_dropout",
                        "mtp_hybrid_override_pattern", "mtp_num_layers", "mtp_use_repeated_layer", "spec",
                        "num_experts", "mtp_num_layers", "moe_layer_freq"})
    o.set(d, true);
  if (const Value* e = o.saved("num_experts"); e && !e->is_none())
    o.set("moe_ffn_hidden_size", true);
  else
    o.put("moe_ffn_hidden_size", Value());
  o.set("moe_router_topk", true);
  o.set("moe_token_dispatcher_type");
  for (const char* d : {"moe_router_pre_softmax", "moe_grouped_gemm", "moe_single_grouped_weight",
                        "moe_single_grouped_bias", "moe_shared_expert_intermediate_size", "moe_router_score_function",
                        "moe_router_enable_expert_bias", "moe_router_topk_scaling_factor", "mamba_state_dim",
                        "mamba_head_dim", "mamba_num_groups", "mamba_num_heads", "gdp_num_householder"})
    o.set(d, true);
  o.set("hybrid_layer_pattern");  // not forced: the command line may give another pipelining of it
  for (const char* d : {"heterogeneous_layers_config_path", "heterogeneous_layers_config_encoded_json",
                        "moe_latent_size"})
    o.set(d, true);
  // Tokenizer.
  if (value_of(ns, "use_tokenizer_model_from_checkpoint_args").truthy()) {
    o.set("tokenizer_model", true);
    o.set("tokenizer_type", true);
  }
  o.set("tiktoken_pattern", true);
  o.set("padded_vocab_size");
  o.set("ckpt_format");
  // Model parallelism (a megatron-run checkpoint has the names of Megatron's checkpoint_version 3.0 and later).
  if (value_of(ns, "use_mp_args_from_checkpoint_args").truthy()) {
    o.set("tensor_model_parallel_size", true);
    o.set("pipeline_model_parallel_size", true);
    o.set("virtual_pipeline_model_parallel_size", true);
    o.set("num_layers_per_virtual_pipeline_stage");
    o.set("expert_model_parallel_size", true);
  }
  return o.take();
}

std::vector<CheckpointArgsResult> apply_checkpoint_args(Namespace& ns) {
  std::vector<CheckpointArgsResult> out;
  if (!value_of(ns, "use_checkpoint_args").truthy()) return out;
  // Megatron asserts before it reads a checkpoint that a local non-persistent checkpoint cannot give arguments;
  // the chain's rule checkpoint-args.not-local refuses it, so nothing is read (or noticed) first.
  if (str_of(ns, "non_persistent_ckpt_type") == std::optional<std::string>("local")) return out;
  for (const char* dest : {"pretrained_checkpoint", "load"}) {
    const std::optional<std::string> dir = str_of(ns, dest);
    if (!dir) continue;  // Megatron: "No load directory specified, using provided arguments."
    CheckpointArgsResult r;
    r.flag = std::string(dest) == "load" ? "--load" : "--pretrained-checkpoint";
    r.dir = *dir;
    LoadQuery q;
    q.load = *dir;
    q.flag = r.flag;
    if (const Value s = value_of(ns, "ckpt_step"); s.is_int()) q.ckpt_step = s.as_int();
    q.non_persistent_global = str_of(ns, "non_persistent_ckpt_type") == std::optional<std::string>("global");
    q.non_persistent_dir = str_of(ns, "non_persistent_global_ckpt_dir");
    const std::optional<CheckpointPlace> place = locate_checkpoint(q);
    if (!place) {
      r.missing_tracker = tracker_path(*dir);
      if (value_of(ns, "exit_on_missing_checkpoint").truthy())
        throw CheckpointError(kCkptMissing, "--use-checkpoint-args with --exit-on-missing-checkpoint: no checkpoint under " +
                                                r.flag + " " + *dir + " (" + r.missing_tracker +
                                                not_there(r.missing_tracker) + ") to take the model's arguments from");
      out.push_back(std::move(r));
      continue;
    }
    r.file = place->dir + "/" + rank_stem(0) + ".json";
    struct stat st {};
    if (stat(r.file.c_str(), &st) != 0 && errno == ENOENT && !holds_rank_metadata(place->dir)) {  // Megatron's own?
      if (const std::string kind = megatron_checkpoint_kind(place->dir); !kind.empty())
        throw megatron_checkpoint_refusal(place->dir, kind);
      throw CheckpointError(kCkptCorrupt, r.file + ": cannot open: No such file or directory", /*foreign=*/true);
    }
    const RankMeta m = parse_rank_meta(read_small_file(r.file, kMaxMetadataBytes), r.file);
    if (!m.args.is_object())
      throw CheckpointError(kCkptCorrupt, r.file + ": \"args\" is not an object of the run's arguments");
    r.changed = override_from_checkpoint_args(ns, m.args, r.file);
    out.push_back(std::move(r));
  }
  return out;
}

std::string checkpoint_args_notice(const CheckpointArgsResult& r) {
  if (r.file.empty())
    return "--use-checkpoint-args: no checkpoint under " + r.flag + " " + r.dir + " (" + r.missing_tracker +
           not_there(r.missing_tracker) + "): using the arguments given (Megatron: \"Checkpoint not found to provide arguments\")";
  std::string s = "--use-checkpoint-args: ";
  if (r.changed.empty()) return s + "the model's arguments of " + r.file + " are the ones given; nothing changed";
  s += std::to_string(r.changed.size()) + (r.changed.size() == 1 ? " argument" : " arguments") +
       " taken from the checkpoint " + r.file + ":";
  // Each value cut short (the checkpoint's file may hold a value of any length: the notice stays a line).
  for (size_t i = 0; i < r.changed.size(); ++i)
    s += std::string(i ? "," : "") + " " + r.changed[i].dest + " " + abbreviate(r.changed[i].before.py_repr()) +
         " -> " + abbreviate(r.changed[i].after.py_repr());
  return s;
}

}  // namespace mr::run
