// The program's input files and output directories checked before its workers start (launch/program_inputs.h):
// Megatron's blend reading, the dataset prefixes, the tokenizer's files, the output directories and --load.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "../config/scratch.h"
#include "launch/program_inputs.h"

namespace fs = std::filesystem;
using mr::launch::InputFinding;
using mr::launch::program_input_findings;

namespace {

// A fresh folder of empty files (a name ending in '/' is a folder) for one test case; its path.
std::string tree(const std::string& name, std::initializer_list<const char*> paths) {
  return mrtest::fake_root(name, paths, "program-inputs");
}

std::string ids(const std::vector<InputFinding>& fs) {
  std::string s;
  for (const InputFinding& f : fs) s += std::string(f.rule->id) + " " + mr::launch::finding_flag(f) + "\n";
  return s;
}

}  // namespace

TEST_CASE("python_float: what Python's float() accepts", "[launch][program-inputs]") {
  for (const char* yes : {"30", "0.3", ".5", "5.", "1e-3", "1E+3", " 7 ", "-2", "+2.5", "1_000", "inf", "-Infinity", "NaN", "1_0.2_5e1_0"})
    CHECK(mr::launch::python_float(yes));
  for (const char* no : {"", ".", "e3", "1e", "1__0", "_1", "1_", "0x10", "data/a", "1.2.3", "infinit", "- 1", "1e3.0"})
    CHECK_FALSE(mr::launch::python_float(no));
}

TEST_CASE("blend_prefixes: weights and prefixes as Megatron's get_blend_from_list reads them", "[launch][program-inputs]") {
  using V = std::vector<std::string>;
  CHECK(mr::launch::blend_prefixes(V{"a"}) == V{"a"});
  CHECK(mr::launch::blend_prefixes(V{"30", "a", "70", "b"}) == V{"a", "b"});
  CHECK(mr::launch::blend_prefixes(V{"a", "b"}) == V{"a", "b"});             // even, but no weights
  CHECK(mr::launch::blend_prefixes(V{"30", "a", "b", "c"}) == V{"30", "a", "b", "c"});  // not every other word a number
  CHECK(mr::launch::blend_prefixes(V{"0.5", "a", "0.5"}) == V{"0.5", "a", "0.5"});      // odd: prefixes only
  CHECK(mr::launch::blend_prefixes(V{"1", " a "}) == V{"a"});                 // stripped
  CHECK(mr::launch::blend_prefixes(V{}).empty());
}

TEST_CASE("dataset prefixes: .bin and .idx both there, a file of its own, or named", "[launch][program-inputs]") {
  const std::string d = tree("prefixes", {"a.bin", "a.idx", "b.bin", "c.idx", "desc.yaml", "dir/"});
  mr::Args a;
  a.data_path = std::vector<std::string>{"0.5", d + "/a", "0.5", d + "/desc.yaml"};
  CHECK(program_input_findings(a).empty());
  a.data_path = std::vector<std::string>{d + "/dir", "s3://bucket/x", "msc://p/y"};  // a folder; schemes unchecked
  CHECK(program_input_findings(a).empty());

  a.data_path = std::vector<std::string>{"1", d + "/a", "1", d + "/b", "1", d + "/c", "1", d + "/none"};
  std::vector<InputFinding> f = program_input_findings(a);
  REQUIRE(f.size() == 1);
  CHECK(f[0].rule == &mr::launch::kInputMissingRule);
  CHECK(f[0].arg == mr::ArgId::data_path);
  CHECK(f[0].message == "argument --data-path: 3 of its 4 dataset prefixes cannot be read here: " + d + "/b.idx does not exist (" + d +
                           "/b.bin does); " + d + "/c.bin does not exist (" + d + "/c.idx does); neither " + d + "/none.bin nor " + d +
                           "/none.idx exists (Megatron's indexed datasets read PREFIX.bin and PREFIX.idx; it would fail when it "
                           "builds the datasets, after the model); --no-file-checks starts the program without these "
                           "checks");

  // The data file given for the prefix.
  a.data_path = std::vector<std::string>{d + "/a.bin"};
  f = program_input_findings(a);
  REQUIRE(f.size() == 1);
  CHECK(f[0].message.find(d + "/a.bin is a dataset's file, and Megatron reads " + d + "/a.bin.bin and " + d + "/a.bin.idx from what it "
                          "is given: give the prefix " + d + "/a") != std::string::npos);

  // More than three named: the rest counted.
  a.data_path = std::vector<std::string>{d + "/n1", d + "/n2", d + "/n3", d + "/n4", d + "/n5"};
  f = program_input_findings(a);
  REQUIRE(f.size() == 1);
  CHECK(f[0].message.find("5 of its 5 dataset prefixes") != std::string::npos);
  CHECK(f[0].message.find("n3.idx exists; and 2 more (") != std::string::npos);
  CHECK(f[0].message.find("n4") == std::string::npos);

  // --mock-data reads none (validation refuses it beside a data path; the check does not look then).
  a.mock_data = true;
  CHECK(program_input_findings(a).empty());
  a.mock_data = false;

  // The per-split flags, each on its own.
  a.data_path.reset();
  a.train_data_path = std::vector<std::string>{d + "/a"};
  a.valid_data_path = std::vector<std::string>{d + "/b"};
  a.test_data_path = std::vector<std::string>{d + "/x"};
  CHECK(ids(program_input_findings(a)) ==
        "launch.input-missing --valid-data-path\nlaunch.input-missing --test-data-path\n");
}

TEST_CASE("--data-args-path and --per-split-data-args-path: the files, and the prefixes the first one lists",
          "[launch][program-inputs]") {
  const std::string d = tree("args-path", {"a.bin", "a.idx", "split.json"});
  std::ofstream(d + "/good.txt") << "0.7 " << d << "/a\n0.3\t" << d << "/a\n";
  std::ofstream(d + "/bad.txt") << d << "/a " << d << "/gone\n";
  mr::Args a;
  a.data_args_path = d + "/good.txt";
  CHECK(program_input_findings(a).empty());
  a.data_args_path = d + "/bad.txt";
  std::vector<InputFinding> f = program_input_findings(a);
  REQUIRE(f.size() == 1);
  CHECK(f[0].message.rfind("argument --data-args-path (the prefixes in " + d + "/bad.txt): 1 of its 2 dataset prefixes cannot be "
                           "read here: neither " + d + "/gone.bin nor " + d + "/gone.idx exists", 0) == 0);
  a.data_args_path = d + "/missing.txt";
  f = program_input_findings(a);
  REQUIRE(f.size() == 1);
  CHECK(f[0].message == "argument --data-args-path " + d + "/missing.txt: no such file (the blend's weights and prefixes)"
                        "; --no-file-checks starts the program without these checks");
  a.data_args_path.reset();
  a.per_split_data_args_path = d + "/split.json";
  CHECK(program_input_findings(a).empty());
  a.per_split_data_args_path = d;
  f = program_input_findings(a);
  REQUIRE(f.size() == 1);
  CHECK(f[0].message == "argument --per-split-data-args-path " + d + ": a directory, not a file (the JSON of the train, valid "
                        "and test blends); --no-file-checks starts the program without these checks");
}

TEST_CASE("the tokenizer's files: checked for the tokenizer types that read them", "[launch][program-inputs]") {
  const std::string d = tree("tokenizer", {"vocab.json", "merges.txt", "tok.model"});
  using T = mr::arg::TokenizerType;
  mr::Args a;
  a.vocab_file = d + "/vocab.json";
  a.merge_file = d + "/merges.txt";
  a.tokenizer_model = d + "/tok.model";
  for (T t : {T::GPT2BPETokenizer, T::BertWordPieceCase, T::SentencePieceTokenizer, T::Llama2Tokenizer, T::TikTokenizer,
              T::HuggingFaceTokenizer, T::NullTokenizer}) {
    a.tokenizer_type = t;
    CHECK(program_input_findings(a).empty());
  }
  a.vocab_file = d + "/gone.json";
  a.merge_file = d;
  a.tokenizer_model = "meta-llama/Llama-3.1-8B";  // a HuggingFace hub name, for the types that take one
  a.tokenizer_type = T::GPT2BPETokenizer;
  CHECK(ids(program_input_findings(a)) == "launch.input-missing --vocab-file\nlaunch.input-missing --merge-file\n");
  CHECK(program_input_findings(a)[0].message ==
        "argument --vocab-file " + d + "/gone.json: no such file (the vocabulary, read by --tokenizer-type GPT2BPETokenizer)"
        "; --no-file-checks starts the program without these checks");
  CHECK(program_input_findings(a)[1].message ==
        "argument --merge-file " + d + ": a directory, not a file (the BPE merges, read by --tokenizer-type GPT2BPETokenizer)"
        "; --no-file-checks starts the program without these checks");
  a.tokenizer_type = T::BertWordPieceLowerCase;
  CHECK(ids(program_input_findings(a)) == "launch.input-missing --vocab-file\n");
  a.tokenizer_type = T::HuggingFaceTokenizer;  // a name or a folder: HuggingFace decides
  CHECK(program_input_findings(a).empty());
  a.tokenizer_type = T::GPTSentencePieceTokenizer;
  CHECK(ids(program_input_findings(a)) == "launch.input-missing --tokenizer-model\n");
  a.tokenizer_type = T::NullTokenizer;
  CHECK(program_input_findings(a).empty());
  a.tokenizer_type.reset();
  CHECK(program_input_findings(a).empty());
}

TEST_CASE("the quantization recipe files: --kitchen-config-file and --te-precision-config-file", "[launch][program-inputs]") {
  // core_transformer_config_from_args opens them as it builds the model (review diff33 #2: a launch-time check).
  const std::string d = tree("recipe", {"kitchen.yaml", "te.yaml"});
  mr::Args a;
  a.kitchen_config_file = d + "/kitchen.yaml";
  a.te_precision_config_file = d + "/te.yaml";
  CHECK(program_input_findings(a).empty());
  a.kitchen_config_file = d + "/gone.yaml";
  a.te_precision_config_file = d;
  CHECK(ids(program_input_findings(a)) ==
        "launch.input-missing --kitchen-config-file\nlaunch.input-missing --te-precision-config-file\n");
  CHECK(program_input_findings(a)[0].message ==
        "argument --kitchen-config-file " + d + "/gone.yaml: no such file (the Kitchen quantization recipe, which "
        "Megatron opens as it builds the model); --no-file-checks starts the program without these checks");
  CHECK(program_input_findings(a)[1].message ==
        "argument --te-precision-config-file " + d + ": a directory, not a file (the Transformer Engine quantization "
        "recipe, which Megatron opens as it builds the model); --no-file-checks starts the program without these checks");
  // An empty --te-precision-config-file is falsy (not read); an empty --kitchen-config-file is opened as given.
  a.te_precision_config_file = "";
  a.kitchen_config_file = "";
  CHECK(ids(program_input_findings(a)) == "launch.input-missing --kitchen-config-file\n");
  a.kitchen_config_file.reset();
  CHECK(program_input_findings(a).empty());
  // A path is echoed escaped: a newline in it starts no line of its own.
  a.te_precision_config_file = d + "/a\n::error::b";
  REQUIRE(program_input_findings(a).size() == 1);
  CHECK(program_input_findings(a)[0].message.find('\n') == std::string::npos);
  CHECK(program_input_findings(a)[0].message.find("/a\\x0a::error::b: no such file") != std::string::npos);
}

TEST_CASE("output directories: there and writable, or makeable below a writable one", "[launch][program-inputs]") {
  const std::string d = tree("outputs", {"ck/", "file"});
  CHECK(mr::launch::unwritable_dir_reason(d + "/ck") == "");
  CHECK(mr::launch::unwritable_dir_reason(d + "/new/deeper/ck") == "");
  CHECK(mr::launch::unwritable_dir_reason(d + "/ck/") == "");
  CHECK(mr::launch::unwritable_dir_reason(d + "/file") == "it is there and is not a directory");
  CHECK(mr::launch::unwritable_dir_reason(d + "/file/ck") == "cannot be made: " + d + "/file is not a directory");
  CHECK(mr::launch::unwritable_dir_reason(d + "/file/a/b") == "cannot be made: " + d + "/file is not a directory");

  mr::Args a;
  a.save = d + "/file/ck";
  a.tensorboard_dir = d + "/file";
  a.data_cache_path = d + "/cache";
  std::vector<InputFinding> f = program_input_findings(a);
  CHECK(ids(f) == "launch.output-unwritable --save\nlaunch.output-unwritable --tensorboard-dir\n");
  REQUIRE(f.size() == 2);
  CHECK(f[0].rule == &mr::launch::kOutputUnwritableRule);
  CHECK(f[0].message == "argument --save " + d + "/file/ck: cannot be made: " + d + "/file is not a directory (the program writes "
                        "its checkpoints there); --no-file-checks starts the program without these checks");
  // A symbolic link to nothing (a scratch file system not mounted here), and a path under one.
  fs::create_symlink(d + "/nowhere/target", d + "/dangling");
  CHECK(mr::launch::unwritable_dir_reason(d + "/dangling") ==
        "it is a symbolic link to " + d + "/nowhere/target, which does not exist");
  CHECK(mr::launch::unwritable_dir_reason(d + "/dangling/sub") ==
        "cannot be made: " + d + "/dangling is a symbolic link to " + d + "/nowhere/target, which does not exist");
  // --data-cache-path: a warning (Megatron writes there only when a cache is missing), none with
  // --dataloader-fast-cache-load (built caches only).
  a = mr::Args();
  a.data_cache_path = d + "/file";
  f = program_input_findings(a);
  REQUIRE(f.size() == 1);
  CHECK(f[0].rule == &mr::launch::kCacheUnwritableRule);
  CHECK(f[0].rule->level == mr::Rule::Level::Warning);
  CHECK(f[0].message == "argument --data-cache-path " + d + "/file: it is there and is not a directory (the program writes a "
                        "dataset's index caches there when they are missing)");
  a.dataloader_fast_cache_load = true;
  CHECK(program_input_findings(a).empty());

  // Without write permission (a user's; root writes anyway, and the case is checked by the cases above then).
  if (geteuid() != 0) {
    const std::string ro = d + "/ro";
    fs::create_directories(ro);
    chmod(ro.c_str(), 0555);
    CHECK(mr::launch::unwritable_dir_reason(ro) == "this user cannot write in it (Permission denied)");
    CHECK(mr::launch::unwritable_dir_reason(ro + "/ck") ==
          "cannot be made: this user cannot write in " + ro + " (Permission denied)");
    chmod(ro.c_str(), 0755);
  }
}

TEST_CASE("--load and --pretrained-checkpoint without a tracker file: a warning, not for a first run's --load = --save",
          "[launch][program-inputs]") {
  const std::string d = tree("load", {"ck/latest_checkpointed_iteration.txt", "ck/iter_0000010/", "empty/",
                                      "odd/latest_checkpointed_iteration.txt/"});
  mr::Args a;
  a.load = d + "/ck";
  CHECK(program_input_findings(a).empty());
  a.load = d + "/odd";  // a directory named like the tracker: Megatron's os.path.isfile finds no tracker there
  std::vector<InputFinding> odd = program_input_findings(a);
  REQUIRE(odd.size() == 1);
  CHECK(odd[0].rule == &mr::launch::kLoadEmptyRule);
  CHECK(odd[0].message == "argument --load " + d + "/odd: its latest_checkpointed_iteration.txt is not a file; the "
                          "program will find no checkpoint and start from random initialization");
  a.load = d + "/empty";
  std::vector<InputFinding> f = program_input_findings(a);
  REQUIRE(f.size() == 1);
  CHECK(f[0].rule == &mr::launch::kLoadEmptyRule);
  CHECK(f[0].rule->level == mr::Rule::Level::Warning);
  CHECK(f[0].message == "argument --load " + d + "/empty: no latest_checkpointed_iteration.txt there; the program will find no "
                        "checkpoint and start from random initialization");
  a.load = d + "/ck/iter_0000010/";
  f = program_input_findings(a);
  REQUIRE(f.size() == 1);
  CHECK(f[0].message.find("there (it is one iteration's directory: give its parent, with --ckpt-step for an iteration other "
                          "than the latest)") != std::string::npos);
  a.load = d + "/first-run";
  f = program_input_findings(a);
  REQUIRE(f.size() == 1);
  CHECK(f[0].message.find(": no such directory;") != std::string::npos);
  a.save = d + "/./first-run";  // the same folder: a run that saves where it resumes from, the first time
  CHECK(program_input_findings(a).empty());
  a.save.reset();
  a.ckpt_step = 10;  // the iteration named: Megatron needs no tracker
  CHECK(program_input_findings(a).empty());
  a.ckpt_step.reset();
  a.load = "s3://bucket/ck";
  CHECK(program_input_findings(a).empty());
  a.load.reset();
  a.pretrained_checkpoint = d + "/empty";
  CHECK(ids(program_input_findings(a)) == "launch.load-empty --pretrained-checkpoint\n");
  a.use_checkpoint_args = true;  // the launcher read (or refused) the checkpoint already
  CHECK(program_input_findings(a).empty());
  a.use_checkpoint_args = false;
  // A non-persistent checkpoint type: Megatron may load a newer one from elsewhere, without --load's tracker.
  a.pretrained_checkpoint.reset();
  a.load = d + "/empty";
  a.non_persistent_ckpt_type = mr::arg::NonPersistentCkptType::global;
  CHECK(program_input_findings(a).empty());
  a.non_persistent_ckpt_type.reset();
  // --exit-on-missing-checkpoint: Megatron exits 1 once the model is built; refused, a first run's --load = --save too.
  a.exit_on_missing_checkpoint = true;
  f = program_input_findings(a);
  REQUIRE(f.size() == 1);
  CHECK(f[0].rule == &mr::launch::kInputMissingRule);
  CHECK(f[0].message == "argument --load " + d + "/empty: no latest_checkpointed_iteration.txt there; with "
                        "--exit-on-missing-checkpoint the program would exit 1 once it has built the model; "
                        "--no-file-checks starts the program without these checks");
  a.load = a.save = d + "/first-run";
  CHECK(ids(program_input_findings(a)) == "launch.input-missing --load\n");
}

TEST_CASE("--sft and --use-varlen-dataset: their data paths are HuggingFace datasets, not checked as prefixes",
          "[launch][program-inputs]") {
  mr::Args a;
  a.data_path = std::vector<std::string>{"HuggingFaceH4/no_robots"};
  CHECK(ids(program_input_findings(a)) == "launch.input-missing --data-path\n");  // a prefix otherwise
  a.use_varlen_dataset = true;
  CHECK(program_input_findings(a).empty());
  a.use_varlen_dataset = false;
  a.sft = true;
  a.data_path = std::vector<std::string>{"sft*.jsonl"};
  CHECK(program_input_findings(a).empty());
}
