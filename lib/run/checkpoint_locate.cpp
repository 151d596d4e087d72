// Where a run's checkpoints are (run/checkpoint_locate.h): the checkpoint --load names, the non-persistent saves'
// directory and how a message names it, and the directories a non-persistent save must not share.
#include "run/checkpoint_locate.h"

#include <filesystem>
#include <string>
#include <system_error>

#include "run/checkpoint_args.h"
#include "run/checkpoint_format.h"
#include "run/checkpoint_resume_args.h"

namespace mr::run {

namespace {

// `p` as the kernel would find it, whether or not it exists yet: absolute, each symbolic link of it followed (a
// dangling one too: its target is where a save would write), "." and ".." taken in order after the links, no
// trailing separator. Two spellings of one directory give the same path, before either is created.
std::filesystem::path resolved_path(const std::filesystem::path& p, int depth = 0) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path in = p.is_absolute() ? p : fs::current_path(ec) / p;
  fs::path cur = in.root_path();
  for (const fs::path& part : in.relative_path()) {
    if (part.empty() || part == ".") continue;
    if (part == "..") {
      cur = cur.parent_path();
      continue;
    }
    fs::path next = cur / part;
    if (depth < 40 && fs::is_symlink(fs::symlink_status(next, ec))) {
      const fs::path target = fs::read_symlink(next, ec);
      if (!ec) next = resolved_path(target.is_absolute() ? target : cur / target, depth + 1);
    }
    cur = next;
  }
  return cur;
}

}  // namespace

std::string non_persistent_dir(const Args& a, const std::string& base) {
  if (a.non_persistent_global_ckpt_dir) return *a.non_persistent_global_ckpt_dir;
  return default_non_persistent_dir(base);
}

// How a message names the directory a save writes to: the flag that gave it.
std::string save_dir_words(const Args& a, bool non_persistent) {
  if (!non_persistent) return "--save " + shown_path(*a.save);
  if (a.non_persistent_global_ckpt_dir)
    return "--non-persistent-global-ckpt-dir " + shown_path(*a.non_persistent_global_ckpt_dir);
  return "the non-persistent directory " + shown_path(non_persistent_dir(a, *a.save)) + " (--save " +
         shown_path(*a.save) + ")";
}

// Whether two directory paths name one directory: the same file where both exist (std::filesystem::equivalent: a
// bind mount too), else the same resolved path (resolved_path: "./d", "d/.", "d/", a link to d, before d exists).
bool same_directory(const std::string& a, const std::string& b) {
  std::error_code ec;
  const std::string x = a.empty() ? "." : a, y = b.empty() ? "." : b;
  if (std::filesystem::exists(x, ec) && std::filesystem::exists(y, ec)) {
    const bool same = std::filesystem::equivalent(x, y, ec);
    if (!ec) return same;
  }
  return resolved_path(x) == resolved_path(y);
}

// Non-persistent saves keep only the newest iter_N of their directory (Megatron's
// cleanup_old_non_persistent_checkpoint): that directory must be none the run reads its checkpoint from, or the
// first non-persistent save removes it (checkpoint.unsupported). The directories are compared as same_directory
// does (a link or another spelling of one is the same), also before they exist: refused on the first run as on the
// next, whose load the first run's non-persistent saves would have filled.
void refuse_np_dir_on_load(const Args& a) {
  const std::string np = non_persistent_dir(a, *a.save);
  auto check = [&](const std::optional<std::string>& dir, const char* flag) {
    if (!dir || !same_directory(np, *dir)) return;
    throw CheckpointError(kCkptUnsupported,
                          save_dir_words(a, true) + " is the " + flag + " directory " + shown_path(*dir) +
                              ": each non-persistent save keeps only the newest checkpoint of its directory, so it "
                              "would remove the checkpoints there; give another directory (the non-persistent "
                              "checkpoints of --non-persistent-global-ckpt-dir DIR are loaded through --load of the "
                              "persistent directory with --non-persistent-ckpt-type global)");
  };
  check(a.load, "--load");
  check(a.pretrained_checkpoint, "--pretrained-checkpoint");
}

// --load that is one iteration's directory of a checkpoint (it holds rank_00000.json: iter_0000020, release)
// rather than the checkpoint's directory: " (... give its parent ...)", with --ckpt-step N where the parent's tracker
// names another iteration; "" for any other directory.
std::string iteration_dir_hint(const std::string& load) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (load.empty() || !fs::is_regular_file(load + "/" + rank_stem(0) + ".json", ec)) return "";
  fs::path dir = fs::path(load).lexically_normal();
  if (dir.filename().empty()) dir = dir.parent_path();  // "ck/iter_0000020/" -> "ck/iter_0000020"
  const std::string name = dir.filename().string();
  fs::path parent = dir.parent_path();
  if (parent.empty()) parent = ".";
  std::string s = " (--load " + shown_path(load) + " is the directory of one checkpoint iteration, not a checkpoint "
                  "directory: give its parent, --load " + shown_path(parent.string());
  int64_t iteration = -1;
  if (name.size() >= 12 && name.size() <= 23 && name.rfind("iter_", 0) == 0 &&
      name.find_first_not_of("0123456789", 5) == std::string::npos)
    iteration = std::stoll(name.substr(5));
  if (iteration >= 0) {
    std::optional<TrackerValue> t;
    try {
      t = read_tracker(tracker_path(parent.string()));
    } catch (const CheckpointError&) {  // an unreadable tracker: the --ckpt-step hint holds all the same
    }
    if (!t || t->release || t->iteration != iteration) s += " with --ckpt-step " + std::to_string(iteration);
  }
  return s + ")";
}

std::string Found::flag_words() const {
  return (pretrained ? "--pretrained-checkpoint " : "--load ") + shown_path(base);
}

namespace {

LoadQuery query_for(const Args& a, const std::string& dir, const char* flag, const TrackerSource* trackers) {
  LoadQuery q;
  q.trackers = trackers;
  q.load = dir;
  q.flag = flag;
  q.ckpt_step = a.ckpt_step.value_or(0);
  q.non_persistent_global = a.non_persistent_ckpt_type == arg::NonPersistentCkptType::global;
  q.non_persistent_dir = a.non_persistent_global_ckpt_dir;
  return q;
}

}  // namespace

// Megatron's load_checkpoint: `pretrained_dir is not None and not checkpoint_exists(load_dir)` switches to
// --pretrained-checkpoint with args.finetune = True, and a pretrained directory without a tracker is its
// FileNotFoundError; then _load_base_checkpoint (run/checkpoint_args.h) with the same --ckpt-step and
// non-persistent flags.
std::optional<Found> locate(const Args& a, const TrackerSource* trackers) {
  // Megatron's checkpoint_exists: a regular file (os.path.isfile: a link to one too) is the tracker of a directory.
  const TrackerSource own;
  const TrackerSource& t = trackers ? *trackers : own;
  if (a.pretrained_checkpoint && !(a.load && t.exists(*a.load))) {
    const std::string& p = *a.pretrained_checkpoint;
    std::optional<CheckpointPlace> place;
    if (t.exists(p)) place = locate_checkpoint(query_for(a, p, "--pretrained-checkpoint", trackers));
    if (!place)
      throw CheckpointError(kCkptPretrainedMissing,
                            "--pretrained-checkpoint " + shown_path(p) + ": no checkpoint there (no " +
                                shown_path(tracker_path(p)) + ")" +
                                (a.load ? ", and none under --load " + shown_path(*a.load) + " (no " +
                                              shown_path(tracker_path(*a.load)) + ")"
                                        : std::string(", and no --load")) +
                                ": Megatron stops here (FileNotFoundError: No checkpoint found in load directory or "
                                "pretrained directory); give the directory of a checkpoint (its tracker, "
                                "latest_checkpointed_iteration.txt, is in it)");
    Found f{*place};
    f.pretrained = true;
    return f;
  }
  if (!a.load) return std::nullopt;
  std::optional<CheckpointPlace> place = locate_checkpoint(query_for(a, *a.load, "--load", trackers));
  if (!place) return std::nullopt;
  return Found{*place};
}

std::string load_words(const Args& a) {
  if (a.load) return "--load " + shown_path(*a.load);
  return "--pretrained-checkpoint " + shown_path(a.pretrained_checkpoint.value_or(""));
}

bool saved_without_rng(const Value& saved_args) {
  const Value* v = saved_arg(saved_args, ArgId::no_save_rng);
  return v && v->truthy();
}

bool loads_rng(const Args& a, const Found& f) {
  // --freeze-all-layers: Megatron's load_checkpoint sets args.finetune (run/frozen_layers.h).
  return !a.finetune && !a.freeze_all_layers && !f.pretrained && !f.release && !a.no_load_rng.value_or(false);
}

}  // namespace mr::run
