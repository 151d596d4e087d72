// --use-checkpoint-args (run/checkpoint_args.h, docs/checkpoints.md): Megatron's override list over a namespace,
// and end to end: a job whose model comes from the checkpoint under --load, a missing checkpoint with and without
// --exit-on-missing-checkpoint, a corrupt metadata file, a user program. Every job has a hard timeout.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "../distributed/proc.h"
#include "config/schema.h"
#include "run/checkpoint_args.h"

namespace fs = std::filesystem;

namespace {

mr::Namespace ns_of(const std::vector<std::pair<std::string, mr::Value>>& kv) {
  mr::Namespace ns;
  for (const auto& [k, v] : kv) ns.set(k, v, {mr::Provenance::Kind::Cli, "argv"});
  return ns;
}

std::string changed_names(const std::vector<mr::run::ArgChange>& c) {
  std::string s;
  for (const auto& x : c) s += (s.empty() ? "" : " ") + x.dest;
  return s;
}

}  // namespace

TEST_CASE("checkpoint args: Megatron's list, given values kept unless forced", "[checkpoint-args]") {
  using mr::Value;
  mr::Namespace ns = ns_of({{"num_layers", Value(2)},
                            {"hidden_size", Value()},
                            {"ffn_hidden_size", Value()},
                            {"swiglu", Value(false)},
                            {"num_query_groups", Value(4)},
                            {"moe_ffn_hidden_size", Value(64)},
                            {"seed", Value(7)},
                            {"tensor_model_parallel_size", Value(1)},
                            {"use_mp_args_from_checkpoint_args", Value(false)},
                            {"use_tokenizer_model_from_checkpoint_args", Value(true)},
                            {"tokenizer_type", Value("NullTokenizer")}});
  const Value saved = Value::object({{"num_layers", Value(3)},
                                     {"hidden_size", Value(128)},
                                     {"ffn_hidden_size", Value(512)},
                                     {"swiglu", Value(true)},
                                     {"num_query_groups", Value()},  // None in the checkpoint: kept
                                     {"num_experts", Value()},
                                     {"moe_ffn_hidden_size", Value(32)},
                                     {"seed", Value(9)},            // not in the list
                                     {"tensor_model_parallel_size", Value(2)},
                                     {"tokenizer_type", Value("GPT2BPETokenizer")}});
  const auto changed = mr::run::override_from_checkpoint_args(ns, saved, "test");
  // num_layers was given (not None): Megatron keeps it; hidden_size and ffn_hidden_size were None: taken.
  CHECK(changed_names(changed) == "hidden_size ffn_hidden_size swiglu moe_ffn_hidden_size tokenizer_type");
  CHECK(ns["num_layers"] == Value(2));
  CHECK(ns["hidden_size"] == Value(128));
  CHECK(ns["swiglu"] == Value(true));
  CHECK(ns.provenance("swiglu").kind == mr::Provenance::Kind::Derived);
  CHECK(ns["num_query_groups"] == Value(4));
  CHECK(ns["moe_ffn_hidden_size"].is_none());  // no experts in the checkpoint: Megatron sets it to None
  CHECK(ns["seed"] == Value(7));
  CHECK(ns["tensor_model_parallel_size"] == Value(1));  // only with --use-mp-args-from-checkpoint-args
  CHECK(ns["tokenizer_type"] == Value("GPT2BPETokenizer"));

  mr::Namespace mp = ns_of({{"tensor_model_parallel_size", Value(1)},
                            {"use_mp_args_from_checkpoint_args", Value(true)},
                            {"use_tokenizer_model_from_checkpoint_args", Value(false)},
                            {"tokenizer_type", Value("NullTokenizer")}});
  CHECK(changed_names(mr::run::override_from_checkpoint_args(mp, saved, "test")) == "tensor_model_parallel_size");
  CHECK(mp["tokenizer_type"] == Value("NullTokenizer"));

  // An older checkpoint's hybrid_override_pattern stands for hybrid_layer_pattern, and its num_layers is dropped.
  mr::Namespace hy = ns_of({{"num_layers", Value()}, {"hybrid_layer_pattern", Value()}});
  const Value old = Value::object({{"num_layers", Value(4)}, {"hybrid_override_pattern", Value("M*M*")}});
  CHECK(changed_names(mr::run::override_from_checkpoint_args(hy, old, "test")) == "hybrid_layer_pattern");
  CHECK(hy["num_layers"].is_none());
}

TEST_CASE("checkpoint args: a saved value of another JSON type than its argument's is refused as corrupt, naming the "
          "file and the argument", "[checkpoint-args]") {
  using mr::Value;
  // Every argument of Megatron's override list this Megatron has (with --use-mp-args-from-checkpoint-args and the
  // tokenizer's), each from a namespace where it is None (so that the unforced ones are taken too).
  const std::vector<std::string> dests = {
      "num_layers", "hidden_size", "ffn_hidden_size", "seq_length", "num_attention_heads", "num_query_groups",
      "group_query_attention", "kv_channels", "max_position_embeddings", "position_embedding_type",
      "add_position_embedding", "rotary_base", "rotary_percent", "rotary_interleaved", "add_bias_linear",
      "add_qkv_bias", "swiglu", "untie_embeddings_and_output_weights", "normalization",
      "apply_query_key_layer_scaling", "attention_dropout", "hidden_dropout", "mtp_num_layers", "num_experts",
      "moe_layer_freq", "moe_ffn_hidden_size", "moe_router_topk", "moe_token_dispatcher_type",
      "moe_router_pre_softmax", "moe_grouped_gemm", "moe_shared_expert_intermediate_size",
      "moe_router_score_function", "moe_router_enable_expert_bias", "moe_router_topk_scaling_factor",
      "mamba_state_dim", "mamba_head_dim", "mamba_num_groups", "hybrid_layer_pattern", "tokenizer_model",
      "tokenizer_type", "ckpt_format", "tensor_model_parallel_size", "pipeline_model_parallel_size",
      "num_layers_per_virtual_pipeline_stage", "expert_model_parallel_size"};
  const std::string file = "ck/iter_0000006/rank_00000.json";
  size_t refused = 0;
  for (const std::string& dest : dests) {
    const std::vector<const mr::Arg*> args = mr::Schema::megatron().find_dest(dest);
    REQUIRE(!args.empty());
    const mr::Arg& arg = *args.front();
    // A value of another JSON type than the declared one (a string for a number or a switch, a number otherwise).
    const bool numeric = arg.spec->type == mr::ArgType::Int || arg.spec->type == mr::ArgType::Float ||
                         arg.spec->type == mr::ArgType::MoeFreq;
    const Value bad = arg.is_switch() ? Value("yes") : numeric ? Value("x") : Value(7);
    mr::Namespace ns;
    for (const auto& [d, v] : mr::Schema::megatron().defaults()) ns.set(d, v, {});
    ns.set(dest, Value(), {});
    ns.set("use_mp_args_from_checkpoint_args", Value(true), {});
    ns.set("use_tokenizer_model_from_checkpoint_args", Value(true), {});
    const Value saved = Value::object({{dest, bad}, {"num_experts", dest == "num_experts" ? bad : Value(2)}});
    INFO(dest << " = " << bad.json());
    CHECK_THROWS_WITH(mr::run::override_from_checkpoint_args(ns, saved, file),
                      Catch::Contains("[checkpoint.corrupt]") && Catch::Contains(file) &&
                          Catch::Contains("\"" + dest + "\" is " + bad.json() + ", not "));
    ++refused;
  }
  CHECK(refused == dests.size());

  // The review's cases, with what each should have been.
  auto why = [&](const std::string& dest, const Value& v) {
    mr::Namespace ns;
    for (const auto& [d, x] : mr::Schema::megatron().defaults()) ns.set(d, x, {});
    ns.set(dest, Value(), {});
    ns.set("use_mp_args_from_checkpoint_args", Value(true), {});
    try {
      (void)mr::run::override_from_checkpoint_args(ns, Value::object({{dest, v}}), file);
    } catch (const mr::run::CheckpointError& e) {
      return std::string(e.what());
    }
    return std::string("(taken)");
  };
  CHECK_THAT(why("num_layers", Value("two")), Catch::Contains("\"num_layers\" is \"two\", not an integer (--use-checkpoint-args "
                                                              "would put it in --num-layers)"));
  CHECK_THAT(why("seq_length", Value("128")), Catch::Contains("not an integer"));
  CHECK_THAT(why("max_position_embeddings", Value(mr::List{})), Catch::Contains("[], not an integer"));
  CHECK_THAT(why("num_layers", Value::parse_json("1000000000000000000000000000000")), Catch::Contains("not an integer of 64 bits"));
  CHECK_THAT(why("hybrid_layer_pattern", Value(5)), Catch::Contains("5, not a string"));
  CHECK_THAT(why("normalization", Value("BatchNorm")), Catch::Contains("not one of 'LayerNorm', 'RMSNorm'"));
  CHECK_THAT(why("expert_model_parallel_size", Value(mr::List{Value(2)})), Catch::Contains("[2], not an integer"));
  CHECK_THAT(why("tensor_model_parallel_size", Value("x")), Catch::Contains("not an integer"));
  CHECK(why("num_layers", Value(3)) == "(taken)");
  CHECK(why("attention_dropout", Value(0)) == "(taken)");  // an int for a float: Python's 0 == 0.0
}

TEST_CASE("checkpoint args: nothing without --use-checkpoint-args; a missing or corrupt checkpoint", "[checkpoint-args]") {
  using mr::Value;
  mrtest::TempDir dir;
  mr::Namespace off = ns_of({{"use_checkpoint_args", Value(false)}, {"load", Value(dir / "none")}});
  CHECK(mr::run::apply_checkpoint_args(off).empty());
  mr::Namespace on = ns_of({{"use_checkpoint_args", Value(true)}, {"load", Value(dir / "none")},
                            {"exit_on_missing_checkpoint", Value(false)}});
  const auto r = mr::run::apply_checkpoint_args(on);
  REQUIRE(r.size() == 1);
  CHECK(r[0].file.empty());
  CHECK_THAT(mr::run::checkpoint_args_notice(r[0]), Catch::Contains("no checkpoint under --load " + dir / "none"));
  on.set("exit_on_missing_checkpoint", Value(true), {});
  CHECK_THROWS_WITH(mr::run::apply_checkpoint_args(on), Catch::Contains("[checkpoint.missing]"));
  fs::create_directories(dir / "ck/iter_0000003");
  std::ofstream(dir / "ck/latest_checkpointed_iteration.txt") << "3";
  std::ofstream(dir / "ck/iter_0000003/rank_00000.json") << "{\"format\": ";
  mr::Namespace bad = ns_of({{"use_checkpoint_args", Value(true)}, {"load", Value(dir / "ck")}});
  CHECK_THROWS_WITH(mr::run::apply_checkpoint_args(bad),
                    Catch::Contains(dir / "ck/iter_0000003/rank_00000.json") && Catch::Contains("[checkpoint.corrupt]"));
  // A local non-persistent checkpoint cannot give arguments (rule checkpoint-args.not-local): nothing is read, so
  // the corrupt file above does not hide that refusal.
  bad.set("non_persistent_ckpt_type", Value(std::string("local")), {});
  CHECK(mr::run::apply_checkpoint_args(bad).empty());
  // A tracker that is there but not a file is no checkpoint (Megatron's os.path.isfile), and is named as such.
  fs::create_directories(dir / "dirtracker/latest_checkpointed_iteration.txt");
  mr::Namespace odd = ns_of({{"use_checkpoint_args", Value(true)}, {"load", Value(dir / "dirtracker")},
                             {"exit_on_missing_checkpoint", Value(false)}});
  const auto o = mr::run::apply_checkpoint_args(odd);
  REQUIRE(o.size() == 1);
  CHECK_THAT(mr::run::checkpoint_args_notice(o[0]),
             Catch::Contains("latest_checkpointed_iteration.txt is not a regular file") && !Catch::Contains("does not exist"));
  odd.set("exit_on_missing_checkpoint", Value(true), {});
  CHECK_THROWS_WITH(mr::run::apply_checkpoint_args(odd), Catch::Contains("is not a regular file"));
}

TEST_CASE("checkpoint args: a value of any length from the checkpoint stays a short notice; a checkpoint error is "
          "cut to a bounded line", "[checkpoint-args]") {
  using mr::Value;
  mr::run::CheckpointArgsResult r;
  r.flag = "--load";
  r.dir = "ck";
  r.file = "ck/iter_0000004/rank_00000.json";
  r.changed.push_back({"hybrid_layer_pattern", Value(), Value(std::string(10'000'000, 'M'))});
  const std::string notice = mr::run::checkpoint_args_notice(r);
  CHECK(notice.size() < 1000);
  CHECK_THAT(notice, Catch::Contains("hybrid_layer_pattern None -> 'MMMM") && Catch::Contains("(10000002 bytes)"));
  const mr::run::CheckpointError e(mr::run::kCkptCorrupt, "f.json: piece \"" + std::string(5'000'000, 't') + "\": bad");
  CHECK(std::string(e.what()).size() < mr::run::kMaxCheckpointMessageBytes + 100);
  // The id first ("[id] text", printed as error[id]: text), then the message cut inside: its end (the reason) kept.
  CHECK_THAT(std::string(e.what()), Catch::StartsWith("[checkpoint.corrupt] f.json: piece \"ttt") &&
                                        Catch::Contains(" bytes cut] ... ") && Catch::EndsWith("\": bad"));
}

TEST_CASE("--use-checkpoint-args: the run takes the checkpoint's model; given values stay as in Megatron",
          "[run][checkpoint][checkpoint-args]") {
  mrtest::TempDir dir;
  const std::string ck = dir / "ck";
  // The checkpoint: 3 layers, hidden 128, SwiGLU (the default job is 2 layers, hidden 256, GELU).
  mrtest::Proc s = mrtest::spawn_job(1, {"--num-layers", "3", "--hidden-size", "128", "--swiglu", "--train-iters", "2",
                                         "--lr-warmup-iters", "1", "--save-interval", "2", "--save", ck},
                                     dir, "save");
  INFO(s.out() << s.err());
  REQUIRE(s.exit_code() == 0);
  // A config without the model's size: Megatron takes num_layers and hidden_size from the checkpoint (they are
  // None), and SwiGLU whatever was given.
  const std::string cfg = mrtest::default_config_with(dir, "nosize.yaml", {"--num-layers", "--hidden-size"}, "");
  auto job = [&](std::vector<std::string> extra, const std::string& tag) {
    std::vector<std::string> argv = {mrtest::megatron_run(), "--nproc-per-node", "1", "--config", cfg,
                                     "--train-iters", "3", "--override-opt-param-scheduler"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    std::vector<mrtest::Proc> p = {mrtest::start(argv, {{"MR_DIST_TIMEOUT_S", "60"}}, dir, tag)};
    mrtest::wait_all(p, std::chrono::seconds(180));
    return p[0];
  };
  mrtest::Proc a = job({"--use-checkpoint-args", "--load", ck}, "use");
  INFO(a.out() << a.err());
  CHECK(a.exit_code() == 0);
  CHECK_THAT(a.err(), Catch::Contains("[checkpoint.use-checkpoint-args]") &&
                          Catch::Contains("taken from the checkpoint " + ck + "/iter_0000002/rank_00000.json") &&
                          Catch::Contains("num_layers None -> 3") && Catch::Contains("hidden_size None -> 128") &&
                          Catch::Contains("swiglu False -> True"));
  // Once, by the spawner (the rank applies it again, quietly).
  CHECK(a.err().find("[checkpoint.use-checkpoint-args]") == a.err().rfind("[checkpoint.use-checkpoint-args]"));
  CHECK_THAT(a.out(), Catch::Contains("(3 layers;") && Catch::Contains("successfully loaded checkpoint from " + ck) &&
                          Catch::Contains("iteration        3/"));
  CHECK_THAT(a.err(), !Catch::Contains("checkpoint.model-mismatch"));

  // A dry run of the same job takes the checkpoint's model as the launch does (review ckpt37 #4); where there is no
  // checkpoint (yet), what validation refuses of the model's shape is only said: the launch reads the one there then,
  // and refuses the values given if there is still none (the dry run says so, review diff38 #8).
  auto dry = [&](std::vector<std::string> extra, const std::string& tag) {
    std::vector<std::string> argv = {mrtest::megatron_run(), "--config", cfg, "--train-iters", "3",
                                     "--override-opt-param-scheduler", "--dry-run"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    std::vector<mrtest::Proc> p = {mrtest::start(argv, {}, dir, tag)};
    mrtest::wait_all(p, std::chrono::seconds(60));
    return p[0];
  };
  mrtest::Proc da = dry({"--use-checkpoint-args", "--load", ck}, "dry-use");
  INFO(da.out() << da.err());
  CHECK(da.exit_code() == 0);
  CHECK_THAT(da.err(), Catch::Contains("warning[checkpoint.use-checkpoint-args]") &&
                           Catch::Contains("num_layers None -> 3") && !Catch::Contains("model-shape."));
  const size_t at = da.out().find("\n  num_layers .");
  REQUIRE(at != std::string::npos);
  const std::string line = da.out().substr(at + 1, da.out().find('\n', at + 1) - at - 1);
  CHECK_THAT(line, Catch::EndsWith(" 3"));
  mrtest::Proc dn = dry({"--use-checkpoint-args", "--load", dir / "none"}, "dry-none");
  INFO(dn.out() << dn.err());
  CHECK(dn.exit_code() == 0);
  CHECK_THAT(dn.err(), Catch::Contains("--use-checkpoint-args: this dry run cannot read the checkpoint's arguments "
                                       "(no checkpoint under --load " + std::string(dir / "none") + " now:") &&
                           Catch::Contains("if a checkpoint is there when the job starts, the launch replaces the "
                                           "model's shape with the checkpoint's before it validates; if there is "
                                           "still none then, the launch refuses the values given as errors (exit 1)") &&
                           !Catch::Contains("checkpoint's there before it validates") &&
                           Catch::Contains("warning[model-shape.num-layers-missing]"));
  // Without --use-checkpoint-args: refused.
  mrtest::Proc dw = dry({"--load", ck}, "dry-without");
  INFO(dw.out() << dw.err());
  CHECK(dw.exit_code() == 1);
  CHECK_THAT(dw.err(), Catch::Contains("error[model-shape.num-layers-missing]"));

  // Values given on the command line are not replaced (Megatron's _set_arg without force): the checkpoint's model
  // is then refused as before; the forced ones (swiglu) are replaced all the same.
  mrtest::Proc b = job({"--num-layers", "2", "--hidden-size", "256", "--use-checkpoint-args", "--load", ck}, "given");
  INFO(b.out() << b.err());
  CHECK(b.exit_code() == 1);
  CHECK_THAT(b.err(), Catch::Contains("swiglu False -> True") && !Catch::Contains("num_layers None") &&
                          Catch::Contains("num_layers value from checkpoint (3) is not equal to the input argument "
                                          "value (2)") &&
                          Catch::Contains("checkpoint.model-mismatch"));

  // Without --use-checkpoint-args: refused as before.
  mrtest::Proc c = job({"--num-layers", "3", "--hidden-size", "128", "--load", ck}, "without");
  INFO(c.out() << c.err());
  CHECK(c.exit_code() == 1);
  CHECK_THAT(c.err(), Catch::Contains("checkpoint.model-mismatch") && !Catch::Contains("--use-checkpoint-args:"));

  // A saved argument of another JSON type (a user's or another tool's edit of the metadata): refused before any
  // worker starts, naming the file and the argument (it was an internal error, exit 3).
  const std::string typed = dir / "typed";
  fs::copy(ck, typed, fs::copy_options::recursive);
  const std::string edit = "/usr/bin/python3 -c \"import json; f='" + typed + "/iter_0000002/rank_00000.json'; "
                           "d=json.load(open(f)); d['args']['num_layers']='two'; json.dump(d, open(f, 'w'))\"";
  REQUIRE(std::system(edit.c_str()) == 0);
  mrtest::Proc t = job({"--use-checkpoint-args", "--load", typed}, "typed");
  INFO(t.out() << t.err());
  CHECK(t.exit_code() == 1);
  CHECK_THAT(t.err(), Catch::Contains("[checkpoint.corrupt]") && Catch::Contains(typed + "/iter_0000002/rank_00000.json") &&
                          Catch::Contains("\"num_layers\" is \"two\", not an integer") && !Catch::Contains("internal error"));

  // --use-mp-args-from-checkpoint-args: a TP=2 checkpoint on 3 ranks. The TP size the world size does not divide
  // came from the checkpoint, so the refusal names its file, as the values --use-checkpoint-args takes are named.
  const std::string tp2 = dir / "tp2";
  mrtest::Proc s2 = mrtest::spawn_job(2, {"--tensor-model-parallel-size", "2", "--train-iters", "2",
                                          "--lr-warmup-iters", "1", "--save-interval", "2", "--save", tp2},
                                      dir, "save-tp2");
  INFO(s2.out() << s2.err());
  REQUIRE(s2.exit_code() == 0);
  {
    std::vector<mrtest::Proc> p = {mrtest::start(
        {mrtest::megatron_run(), "--nproc-per-node", "3", "--config", cfg, "--train-iters", "3", "--load", tp2,
         "--use-checkpoint-args", "--use-mp-args-from-checkpoint-args"},
        {{"MR_DIST_TIMEOUT_S", "60"}}, dir, "mp3")};
    mrtest::wait_all(p, std::chrono::seconds(180));
    INFO(p[0].out() << p[0].err());
    CHECK(p[0].exit_code() == 1);
    CHECK_THAT(p[0].err(), Catch::Contains("error[parallel.world-size-divisible]: world size (3) is not a multiple") &&
                               Catch::Contains("(set by --use-checkpoint-args: " + tp2 +
                                               "/iter_0000002/rank_00000.json)"));
  }

  // A corrupt metadata file: refused before any worker starts, naming the file.
  const std::string meta = ck + "/iter_0000002/rank_00000.json";
  std::ofstream(meta, std::ios::trunc) << "{\"format\": \"megatron-run checkpoint\", ";
  mrtest::Proc d = job({"--use-checkpoint-args", "--load", ck}, "corrupt");
  INFO(d.out() << d.err());
  CHECK(d.exit_code() == 1);
  CHECK_THAT(d.err(), Catch::Contains("[checkpoint.corrupt]") && Catch::Contains(meta));
  CHECK_THAT(d.out(), !Catch::Contains("iteration        1/"));
}

TEST_CASE("--use-checkpoint-args without a checkpoint: a notice, or checkpoint.missing with --exit-on-missing-checkpoint",
          "[run][checkpoint][checkpoint-args]") {
  mrtest::TempDir dir;
  const std::string none = dir / "none";
  mrtest::Proc a = mrtest::spawn_job(1, {"--train-iters", "3", "--use-checkpoint-args", "--load", none}, dir, "notice");
  INFO(a.out() << a.err());
  CHECK(a.exit_code() == 0);
  CHECK_THAT(a.err(), Catch::Contains("warning[checkpoint.use-checkpoint-args]: --use-checkpoint-args: no checkpoint under --load " +
                                      none) &&
                          Catch::Contains("using the arguments given"));
  CHECK_THAT(a.out(), Catch::Contains("(2 layers;") && Catch::Contains("iteration        1/"));
  mrtest::Proc b = mrtest::spawn_job(
      1, {"--train-iters", "3", "--use-checkpoint-args", "--load", none, "--exit-on-missing-checkpoint"}, dir, "exit");
  INFO(b.out() << b.err());
  CHECK(b.exit_code() == 1);
  CHECK_THAT(b.err(), Catch::Contains("[checkpoint.missing]") && Catch::Contains("--exit-on-missing-checkpoint") &&
                          Catch::Contains(none + "/latest_checkpointed_iteration.txt"));
  CHECK_THAT(b.out(), !Catch::Contains("iteration        1/"));
}

// (An unreadable checkpoint, a Megatron one: tests/launch/launch_program_test.cpp.)
TEST_CASE("--use-checkpoint-args with a user program: validated with the values given, and a notice says so",
          "[run][checkpoint][checkpoint-args]") {
  mrtest::TempDir dir;
  std::vector<mrtest::Proc> p = {mrtest::start({mrtest::megatron_run(), "--nproc-per-node", "1", "--config",
                                                std::string(MR_SOURCE_DIR) + "/configs/default.yaml",
                                                "--use-checkpoint-args", "--load", dir / "none", "--no-python", "--",
                                                "/bin/echo", "program"},
                                               {}, dir, "program")};
  mrtest::wait_all(p, std::chrono::seconds(60));
  INFO(p[0].out() << p[0].err());
  CHECK(p[0].exit_code() == 0);
  CHECK_THAT(p[0].err(), Catch::Contains("--use-checkpoint-args: no checkpoint under --load " + std::string(dir / "none")) &&
                             Catch::Contains("using the arguments given"));
  CHECK_THAT(p[0].out(), Catch::Contains("program --num-layers 2") && Catch::Contains("--use-checkpoint-args"));
}

TEST_CASE("locating a checkpoint: the newer global non-persistent one under --load/non_persistent, one separator",
          "[checkpoint-args]") {
  mrtest::TempDir dir;
  fs::create_directories(dir / "ck/iter_0000003");
  fs::create_directories(dir / "ck/non_persistent/iter_0000005");
  std::ofstream(dir / "ck/latest_checkpointed_iteration.txt") << "3";
  std::ofstream(dir / "ck/non_persistent/latest_checkpointed_iteration.txt") << "5";
  mr::run::LoadQuery q;
  q.load = std::string(dir / "ck") + "/";  // --load ck/: Megatron's default is ck/non_persistent
  q.non_persistent_global = true;
  const std::optional<mr::run::CheckpointPlace> f = mr::run::locate_checkpoint(q);
  REQUIRE(f);
  CHECK(f->iteration == 5);
  CHECK(f->base == std::string(dir / "ck") + "/non_persistent");
}

TEST_CASE("locating a checkpoint: --ckpt-step overrides the tracker's iteration, not an unreadable tracker",
          "[checkpoint-args]") {
  mrtest::TempDir dir;
  fs::create_directories(dir / "ck/iter_0000003");
  fs::create_directories(dir / "ck/iter_0000007");
  std::ofstream(dir / "ck/latest_checkpointed_iteration.txt") << "7";
  mr::run::LoadQuery q;
  q.load = dir / "ck";
  REQUIRE(mr::run::locate_checkpoint(q));
  CHECK(mr::run::locate_checkpoint(q)->iteration == 7);
  q.ckpt_step = 3;  // whatever iteration the tracker names
  REQUIRE(mr::run::locate_checkpoint(q));
  CHECK(mr::run::locate_checkpoint(q)->iteration == 3);
  CHECK(mr::run::locate_checkpoint(q)->dir == dir / "ck/iter_0000003");
  // A tracker holding neither a number nor 'release': Megatron's read_metadata reads it before looking at
  // --ckpt-step and stops the run, so the load is refused with or without the step.
  std::ofstream(dir / "ck/latest_checkpointed_iteration.txt", std::ios::trunc) << "abc";
  CHECK_THROWS_WITH(mr::run::locate_checkpoint(q),
                    Catch::Contains("not an iteration number or 'release'") && Catch::Contains("[checkpoint.corrupt]"));
  q.ckpt_step = 0;
  CHECK_THROWS_WITH(mr::run::locate_checkpoint(q), Catch::Contains("[checkpoint.corrupt]"));
  // No tracker at all: --ckpt-step still names the iteration (Megatron's iteration = args.ckpt_step).
  fs::remove(dir / "ck/latest_checkpointed_iteration.txt");
  CHECK_FALSE(mr::run::locate_checkpoint(q));
  q.ckpt_step = 3;
  REQUIRE(mr::run::locate_checkpoint(q));
  CHECK(mr::run::locate_checkpoint(q)->iteration == 3);
}
