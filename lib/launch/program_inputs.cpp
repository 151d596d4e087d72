// The program's input files and output directories on this node (launch/program_inputs.h).
#include "launch/program_inputs.h"

#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <regex>

#include "config/converters.h"
#include "config/schema.h"
#include "util/text.h"

namespace mr::launch {

namespace fs = std::filesystem;

const Rule kInputMissingRule{
    "launch.input-missing", Rule::Level::Error,
    "A user's program is not started when a file it reads by its flags is not on this node: a --data-path (or "
    "--train/valid/test-data-path, --data-args-path, --per-split-data-args-path) prefix without its .bin and .idx, "
    "the tokenizer's --vocab-file, --merge-file or --tokenizer-model, or the quantization recipe "
    "(--kitchen-config-file, --te-precision-config-file) (not in --dry-run or check).",
    __FILE__, __LINE__, kStageInit};
const Rule kOutputUnwritableRule{
    "launch.output-unwritable", Rule::Level::Error,
    "A user's program is not started when --save or --tensorboard-dir is not a directory this user can create or "
    "write on this node (not in --dry-run or check).",
    __FILE__, __LINE__, kStageInit};
const Rule kCacheUnwritableRule{
    "launch.data-cache-unwritable", Rule::Level::Warning,
    "--data-cache-path is not a directory this user can create or write on this node: Megatron writes a dataset's "
    "index caches there when they are missing, and only reads them when they are built (not with "
    "--dataloader-fast-cache-load, which reads built caches only).",
    __FILE__, __LINE__, kStageInit};
const Rule kLoadEmptyRule{
    "launch.load-empty", Rule::Level::Warning,
    "--load (other than --save) or --pretrained-checkpoint holds no latest_checkpointed_iteration.txt on this node "
    "and --ckpt-step is not given: the program will start from random initialization (with "
    "--exit-on-missing-checkpoint it would exit 1 after building the model: launch.input-missing).",
    __FILE__, __LINE__, kStageInit};

namespace {
// What an error's message ends with: the way past the check.
constexpr const char* kWayOut = "; --no-file-checks starts the program without these checks";
}  // namespace

namespace {

bool has_scheme(const std::string& p) { return p.find("://") != std::string::npos; }

bool exists(const std::string& p) {
  std::error_code ec;
  return fs::exists(p, ec);
}

bool is_dir(const std::string& p) {
  std::error_code ec;
  return fs::is_directory(p, ec);
}

// A dataset prefix's problem ("" when the program will find what it reads).
std::string prefix_problem(const std::string& p) {
  const std::string bin = p + ".bin", idx = p + ".idx";
  const bool has_bin = exists(bin), has_idx = exists(idx);
  if (has_bin && has_idx) return "";
  // The data file itself given: Megatron appends .bin and .idx to what it is given.
  if (p.size() > 4 && (p.ends_with(".bin") || p.ends_with(".idx"))) {
    const std::string stem = p.substr(0, p.size() - 4);
    if (exists(stem + ".bin") && exists(stem + ".idx"))
      return p + " is a dataset's file, and Megatron reads " + bin + " and " + idx +
             " from what it is given: give the prefix " + stem;
  }
  if (exists(p)) return "";  // a file or directory of its own (a dataset description the program reads as it is)
  if (has_bin) return idx + " does not exist (" + bin + " does)";
  if (has_idx) return bin + " does not exist (" + idx + " does)";
  return "neither " + bin + " nor " + idx + " exists";
}

std::string flag_of(ArgId id) { return Schema::megatron().flag_for_dest(dest_of(id)); }

// The findings for a blend's prefixes: one per flag, naming at most a few of them.
void check_blend(std::vector<InputFinding>& out, ArgId id, const std::vector<std::string>& words,
                 const std::string& from = "") {
  constexpr size_t kNamed = 3;
  std::vector<std::string> problems;
  size_t checked = 0;
  for (const std::string& p : blend_prefixes(words)) {
    if (p.empty() || has_scheme(p)) continue;
    ++checked;
    if (std::string why = prefix_problem(p); !why.empty()) problems.push_back(std::move(why));
  }
  if (problems.empty()) return;
  std::string msg = "argument " + flag_of(id) + from + ": ";
  if (checked > 1) msg += std::to_string(problems.size()) + " of its " + std::to_string(checked) + " dataset prefixes cannot be read here: ";
  for (size_t i = 0; i < problems.size() && i < kNamed; ++i) msg += (i ? "; " : "") + problems[i];
  if (problems.size() > kNamed) msg += "; and " + std::to_string(problems.size() - kNamed) + " more";
  msg += " (Megatron's indexed datasets read PREFIX.bin and PREFIX.idx; it would fail when it builds the datasets, "
         "after the model)";
  msg += kWayOut;
  out.push_back({&kInputMissingRule, id, msg});
}

// A file the program opens: missing, a directory, or unreadable.
void check_file(std::vector<InputFinding>& out, ArgId id, const std::optional<std::string>& path,
                const std::string& what) {
  if (!path || path->empty() || has_scheme(*path)) return;
  std::string why;
  if (!exists(*path))
    why = "no such file";
  else if (is_dir(*path))
    why = "a directory, not a file";
  else if (access(path->c_str(), R_OK) != 0)
    why = std::string("cannot be read (") + std::strerror(errno) + ")";
  if (why.empty()) return;
  out.push_back({&kInputMissingRule, id,
                 "argument " + flag_of(id) + " " + echo_word(*path) + ": " + why + " (" + what + ")" + kWayOut});
}

// The words of a whitespace-separated file, bounded: nullopt when it cannot be read or is too big to be a blend.
std::optional<std::vector<std::string>> file_words(const std::string& path) {
  constexpr std::uintmax_t kMax = 64u << 20;
  std::error_code ec;
  const std::uintmax_t size = fs::file_size(path, ec);
  if (ec || size > kMax) return std::nullopt;
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::vector<std::string> words{std::istream_iterator<std::string>(in), std::istream_iterator<std::string>()};
  return words;
}

void check_output(std::vector<InputFinding>& out, ArgId id, const std::optional<std::string>& dir,
                  const std::string& what, const Rule& rule = kOutputUnwritableRule) {
  if (!dir || dir->empty() || has_scheme(*dir)) return;
  if (std::string why = unwritable_dir_reason(*dir); !why.empty())
    out.push_back({&rule, id,
                   "argument " + flag_of(id) + " " + *dir + ": " + why + " (" + what + ")" +
                       (rule.level == Rule::Level::Error ? kWayOut : "")});
}

// --load or --pretrained-checkpoint where Megatron finds no checkpoint to load: it starts from random
// initialization, or with --exit-on-missing-checkpoint exits 1 once the model is built (load_checkpoint).
void check_load(std::vector<InputFinding>& out, ArgId id, const std::string& dir, bool exits) {
  if (dir.empty() || has_scheme(dir)) return;
  const std::string tracker = (fs::path(dir) / "latest_checkpointed_iteration.txt").string();
  std::error_code ec;
  if (fs::is_regular_file(tracker, ec)) return;  // Megatron's os.path.isfile: a directory of that name is none
  std::string msg = "argument " + flag_of(id) + " " + dir + ": ";
  if (!exists(dir)) {
    msg += "no such directory";
  } else if (exists(tracker)) {
    msg += "its latest_checkpointed_iteration.txt is not a file";
  } else {
    msg += "no latest_checkpointed_iteration.txt there";
    static const std::regex kIterDir("(iter_[0-9]+|release)/*");
    const fs::path normal = fs::path(dir).lexically_normal();  // "ck/iter_0000010/" ends in an empty filename
    const std::string base = (normal.has_filename() ? normal : normal.parent_path()).filename().string();
    if (std::regex_match(base, kIterDir))
      msg += " (it is one iteration's directory: give its parent, with --ckpt-step for an iteration other than the "
             "latest)";
  }
  if (exits) {
    msg += "; with --exit-on-missing-checkpoint the program would exit 1 once it has built the model";
    out.push_back({&kInputMissingRule, id, msg + kWayOut});
    return;
  }
  msg += "; the program will find no checkpoint and start from random initialization";
  out.push_back({&kLoadEmptyRule, id, msg});
}

bool same_dir(const std::string& a, const std::string& b) {
  std::error_code ea, eb;
  const fs::path pa = fs::weakly_canonical(a, ea), pb = fs::weakly_canonical(b, eb);
  if (ea || eb) return fs::path(a).lexically_normal() == fs::path(b).lexically_normal();
  return pa == pb;
}

}  // namespace

bool python_float(std::string_view s) {
  try {
    (void)parse_py_float(s);  // config/converters.h: Python's float()
    return true;
  } catch (const ConvError&) {
    return false;
  }
}

std::vector<std::string> blend_prefixes(const std::vector<std::string>& words) {
  bool weighted = !words.empty() && words.size() % 2 == 0;
  for (size_t i = 0; weighted && i < words.size(); i += 2) weighted = python_float(words[i]);
  std::vector<std::string> prefixes;
  for (size_t i = weighted ? 1 : 0; i < words.size(); i += weighted ? 2 : 1) {
    // Megatron strips each prefix.
    std::string_view p = words[i];
    while (!p.empty() && std::isspace(static_cast<unsigned char>(p.front()))) p.remove_prefix(1);
    while (!p.empty() && std::isspace(static_cast<unsigned char>(p.back()))) p.remove_suffix(1);
    prefixes.emplace_back(p);
  }
  return prefixes;
}

std::string unwritable_dir_reason(const std::string& dir) {
  std::error_code ec;
  // A symbolic link to nothing (a scratch file system not mounted here): os.makedirs fails on it, and under it.
  auto dangling = [&](const fs::path& p) {
    std::error_code e;
    return fs::is_symlink(fs::symlink_status(p, e)) && !fs::exists(p, e);
  };
  if (dangling(dir)) return "it is a symbolic link to " + fs::read_symlink(dir, ec).string() + ", which does not exist";
  if (fs::exists(dir, ec)) {
    if (!fs::is_directory(dir, ec)) return "it is there and is not a directory";
    if (access(dir.c_str(), W_OK | X_OK) != 0) return std::string("this user cannot write in it (") + std::strerror(errno) + ")";
    return "";
  }
  // The nearest existing parent: the program makes the rest (os.makedirs).
  fs::path p = fs::absolute(dir, ec).lexically_normal();
  if (ec) return std::string("cannot be made: ") + ec.message();
  while (!fs::exists(p, ec)) {
    if (dangling(p)) return "cannot be made: " + p.string() + " is a symbolic link to " + fs::read_symlink(p, ec).string() +
                            ", which does not exist";
    if (p == p.root_path() || !p.has_parent_path()) return "cannot be made: none of its parents exists";
    p = p.parent_path();
  }
  const std::string ps = p.string();
  if (!fs::is_directory(p, ec)) return "cannot be made: " + ps + " is not a directory";
  if (access(ps.c_str(), W_OK | X_OK) != 0)
    return "cannot be made: this user cannot write in " + ps + " (" + std::strerror(errno) + ")";
  return "";
}

std::string finding_flag(const InputFinding& f) { return flag_of(f.arg); }

std::vector<InputFinding> program_input_findings(const Args& a) {
  std::vector<InputFinding> out;
  // --sft and --use-varlen-dataset read HuggingFace datasets (a Hub id, a jsonl or parquet file, a glob): no
  // indexed-dataset prefixes to look for.
  if (!a.mock_data && !a.sft && !a.use_varlen_dataset) {
    if (a.data_path) check_blend(out, ArgId::data_path, *a.data_path);
    check_file(out, ArgId::data_args_path, a.data_args_path, "the blend's weights and prefixes");
    if (a.data_args_path && !has_scheme(*a.data_args_path) && out.empty())
      if (std::optional<std::vector<std::string>> words = file_words(*a.data_args_path))
        check_blend(out, ArgId::data_args_path, *words, " (the prefixes in " + *a.data_args_path + ")");
    if (a.train_data_path) check_blend(out, ArgId::train_data_path, *a.train_data_path);
    if (a.valid_data_path) check_blend(out, ArgId::valid_data_path, *a.valid_data_path);
    if (a.test_data_path) check_blend(out, ArgId::test_data_path, *a.test_data_path);
    check_file(out, ArgId::per_split_data_args_path, a.per_split_data_args_path,
               "the JSON of the train, valid and test blends");
  }
  using T = arg::TokenizerType;
  if (a.tokenizer_type) {
    const T t = *a.tokenizer_type;
    const std::string type = " read by --tokenizer-type " + std::string(arg::to_string(t));
    if (t == T::BertWordPieceLowerCase || t == T::BertWordPieceCase || t == T::GPT2BPETokenizer)
      check_file(out, ArgId::vocab_file, a.vocab_file, "the vocabulary," + type);
    if (t == T::GPT2BPETokenizer) check_file(out, ArgId::merge_file, a.merge_file, "the BPE merges," + type);
    if (t == T::SentencePieceTokenizer || t == T::GPTSentencePieceTokenizer || t == T::Llama2Tokenizer ||
        t == T::TikTokenizer)
      check_file(out, ArgId::tokenizer_model, a.tokenizer_model, "the tokenizer's model file," + type);
  }
  // core_transformer_config_from_args opens the quantization recipe on every rank before it builds the model
  // (load_quantization_recipe: FileNotFoundError): --kitchen-config-file when it is not None, else
  // --te-precision-config-file when it is truthy (argument_utils.py).
  if (a.kitchen_config_file && a.kitchen_config_file->empty())
    out.push_back({&kInputMissingRule, ArgId::kitchen_config_file,
                   "argument " + flag_of(ArgId::kitchen_config_file) +
                       ": an empty path, which Megatron opens as given (the Kitchen quantization recipe)" + kWayOut});
  check_file(out, ArgId::kitchen_config_file, a.kitchen_config_file,
             "the Kitchen quantization recipe, which Megatron opens as it builds the model");
  check_file(out, ArgId::te_precision_config_file, a.te_precision_config_file,
             "the Transformer Engine quantization recipe, which Megatron opens as it builds the model");
  check_output(out, ArgId::save, a.save, "the program writes its checkpoints there");
  check_output(out, ArgId::tensorboard_dir, a.tensorboard_dir, "the program writes its TensorBoard logs there");
  if (!a.dataloader_fast_cache_load)
    check_output(out, ArgId::data_cache_path, a.data_cache_path,
                 "the program writes a dataset's index caches there when they are missing", kCacheUnwritableRule);
  // With --use-checkpoint-args the launcher has read the checkpoint already (or refused it); with a non-persistent
  // checkpoint type Megatron may load a newer one from elsewhere, without --load's tracker.
  if (!a.ckpt_step && !a.use_checkpoint_args && !a.non_persistent_ckpt_type) {
    const bool exits = a.exit_on_missing_checkpoint;
    if (a.load && !(a.save && same_dir(*a.load, *a.save) && !exits)) check_load(out, ArgId::load, *a.load, exits);
    if (a.pretrained_checkpoint)
      check_load(out, ArgId::pretrained_checkpoint, *a.pretrained_checkpoint, exits);
  }
  return out;
}

}  // namespace mr::launch
