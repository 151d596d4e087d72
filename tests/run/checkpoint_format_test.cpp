// run/checkpoint_format.h's save_settings_refusal: the save settings Megatron's save fails on are refused only
// where Megatron's training would make such a save (review diff38 #1), with the flags they are about (#10b).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "../distributed/proc.h"
#include "run/checkpoint_format.h"
#include "run/frozen_layers.h"

using mr::Args;
namespace arg = mr::arg;

namespace {

// --save DIR --save-interval S --train-iters T --non-persistent-save-interval N (no type).
Args non_persistent(int64_t n, std::optional<int64_t> save_interval, std::optional<int64_t> iters) {
  Args a;
  a.save = "/tmp/ck";
  a.save_interval = save_interval;
  a.train_iters = iters;
  a.non_persistent_save_interval = n;
  return a;
}

std::optional<std::string> refused(const Args& a) {
  const std::optional<mr::run::SaveSettingsRefusal> r = mr::run::save_settings_refusal(a);
  if (!r) return std::nullopt;
  return std::string(r->rule->id);
}

}  // namespace

TEST_CASE("--non-persistent-save-interval without a type: refused only where Megatron makes a non-persistent save",
          "[run][checkpoint-format]") {
  const std::optional<std::string> missing = std::string("checkpoint.non-persistent-type-missing");
  // Iteration 3 is a multiple of 3 and not of 10: Megatron's elif saves non-persistently there, and raises.
  CHECK(refused(non_persistent(3, 10, 20)) == missing);
  // Every multiple of 10 is one of --save-interval 5: the persistent save wins each time, nothing raises.
  CHECK(refused(non_persistent(10, 5, 20)) == std::nullopt);
  CHECK(refused(non_persistent(10, 10, 20)) == std::nullopt);
  // 100 is past --train-iters 20: no multiple of it is trained.
  CHECK(refused(non_persistent(100, 5, 20)) == std::nullopt);
  CHECK(refused(non_persistent(20, 7, 20)) == missing);  // iteration 20 itself, not one of 7
  // --skip-train: no training loop, no save.
  Args skip = non_persistent(3, 10, 20);
  skip.skip_train = true;
  CHECK(refused(skip) == std::nullopt);
  // --train-samples: Megatron's update_train_iters (10 samples of 4 a step: 2 iterations).
  Args samples = non_persistent(3, 10, std::nullopt);
  samples.train_samples = 10;
  samples.micro_batch_size = 1;
  samples.global_batch_size = 4;
  CHECK(refused(samples) == std::nullopt);
  samples.train_samples = 40;  // 10 iterations: 3 is one
  CHECK(refused(samples) == missing);
  // Iterations that cannot be known here (no global batch size: a view of arguments validation did not finish,
  // Args::from_unvalidated, holds 0): any N that some multiple saves non-persistently.
  Args unknown = non_persistent(3, 10, std::nullopt);
  unknown.train_samples = 40;
  unknown.global_batch_size = 0;
  CHECK(refused(unknown) == missing);
  unknown.non_persistent_save_interval = 20;  // a multiple of 10: never
  CHECK(refused(unknown) == std::nullopt);
  // The flags it is about, not words found in its text (a --save path naming a flag adds none).
  Args named = non_persistent(3, 10, 20);
  named.save = "/tmp/--async-save/--ckpt-format";
  const std::optional<mr::run::SaveSettingsRefusal> r = mr::run::save_settings_refusal(named);
  REQUIRE(r);
  CHECK(r->flags == std::vector<std::string>{"--non-persistent-save-interval", "--non-persistent-ckpt-type"});
  CHECK_THAT(r->message, Catch::Contains("at its first non-persistent save (iteration 3 of a run from the start up to "
                                         "iteration 20, where no --save-interval 10 save is due)"));
  // Type local (not modelled by the run): the same condition.
  Args local = non_persistent(10, 5, 20);
  local.non_persistent_ckpt_type = arg::NonPersistentCkptType::local;
  CHECK(refused(local) == std::nullopt);
  local.non_persistent_save_interval = 3;
  CHECK(refused(local) == std::optional<std::string>("checkpoint.unsupported"));
}

TEST_CASE("--async-save with --ckpt-format torch: refused where the run trains (it saves at least once)",
          "[run][checkpoint-format]") {
  Args a;
  a.save = "/tmp/ck";
  a.save_interval = 100;
  a.train_iters = 20;  // no multiple of 100: Megatron saves after training, and raises there
  a.async_save = true;
  a.ckpt_format = arg::CkptFormat::torch;
  const std::optional<mr::run::SaveSettingsRefusal> r = mr::run::save_settings_refusal(a);
  REQUIRE(r);
  CHECK(std::string(r->rule->id) == "checkpoint.async-save-torch-format");
  CHECK(r->flags == std::vector<std::string>{"--async-save", "--ckpt-format"});
  a.skip_train = true;  // no training loop: no save
  CHECK(refused(a) == std::nullopt);
  a.skip_train = false;
  a.train_iters = 0;  // pretrain calls train() only with train_iters > 0; the final save needs iteration != 0
  CHECK(refused(a) == std::nullopt);
  a.train_iters = 20;
  a.ckpt_format = arg::CkptFormat::torch_dist;
  CHECK(refused(a) == std::nullopt);
}

// A resume at or past the last iteration trains none (Megatron's `while iteration < args.train_iters`), and its
// final save is skipped at a multiple of --save-interval: Megatron calls no save, so nothing raises (review
// ckpt39 #3). The start is the checkpoint's iteration (tracker, --ckpt-step), 0 with --finetune or a release one.
TEST_CASE("--async-save with --ckpt-format torch: a resume that saves nothing is not refused",
          "[run][checkpoint-format]") {
  namespace fs = std::filesystem;
  mrtest::TempDir dir;
  const std::string ck = dir / "ck";
  fs::create_directories(ck + "/iter_0000020");
  fs::create_directories(ck + "/iter_0000015");
  std::ofstream(ck + "/latest_checkpointed_iteration.txt") << "20";
  Args a;
  a.save = dir / "out";
  a.load = ck;
  a.save_interval = 10;
  a.train_iters = 20;
  a.async_save = true;
  a.ckpt_format = arg::CkptFormat::torch;
  const std::optional<std::string> torch = std::string("checkpoint.async-save-torch-format");
  CHECK(mr::run::resumed_iteration(a) == 20);
  CHECK(refused(a) == std::nullopt);  // starts at 20 = --train-iters, a multiple of 10: no save
  a.train_iters = 15;
  CHECK(refused(a) == std::nullopt);  // past the last iteration, still a multiple of 10: no save
  a.save_interval = 7;
  CHECK(refused(a) == torch);  // 20 is no multiple of 7: the final save after training raises
  a.save_interval = 10;
  a.train_iters = 30;
  CHECK(refused(a) == torch);  // iterations 21 to 30 are trained: the save at 30 raises
  a.train_iters = 20;
  a.ckpt_step = 15;
  CHECK(mr::run::resumed_iteration(a) == 15);
  CHECK(refused(a) == torch);  // from 15: iteration 20 saves
  a.ckpt_step.reset();
  a.override_ckpt_iteration = 15;
  CHECK(refused(a) == torch);  // the checkpoint counts as saved at 15
  a.override_ckpt_iteration.reset();
  a.finetune = true;
  CHECK(mr::run::resumed_iteration(a) == 0);
  CHECK(refused(a) == torch);  // a fine-tune starts at 0
  a.finetune = false;
  std::ofstream(ck + "/latest_checkpointed_iteration.txt", std::ios::trunc) << "abc";
  CHECK(mr::run::resumed_iteration(a) == std::nullopt);
  CHECK(refused(a) == torch);  // the start cannot be known: refused (the load refuses the tracker anyway)
  fs::remove(ck + "/latest_checkpointed_iteration.txt");
  CHECK(refused(a) == torch);  // no checkpoint: from 0
}

// --freeze-all-layers: Megatron's load_checkpoint makes the load a fine-tune (iteration 0) and, unless
// --override-ckpt-iteration is given, resumes at the iteration of --save's own tracker (read_frozen_resume_iteration:
// 0 without one, 'release' too); the start the --async-save refusal reads follows it.
TEST_CASE("--freeze-all-layers: the start is --save's tracker's iteration, not --load's", "[run][checkpoint-format][freeze]") {
  namespace fs = std::filesystem;
  mrtest::TempDir dir;
  const std::string ck = dir / "ck", out = dir / "out";
  fs::create_directories(ck + "/iter_0000020");
  std::ofstream(ck + "/latest_checkpointed_iteration.txt") << "20";
  Args a;
  a.save = out;
  a.load = ck;
  a.save_interval = 10;
  a.train_iters = 20;
  a.freeze_all_layers = true;
  CHECK(mr::run::frozen_resume_iteration(a) == 0);  // --save has no tracker
  CHECK(mr::run::resumed_iteration(a) == 0);        // a fine-tune, from 0 (not --load's 20)
  fs::create_directories(out);
  std::ofstream(out + "/latest_checkpointed_iteration.txt") << "7";
  CHECK(mr::run::frozen_resume_iteration(a) == 7);
  CHECK(mr::run::resumed_iteration(a) == 7);
  std::optional<int64_t> from_save;
  const Args f = mr::run::frozen_load_args(a, &from_save);
  CHECK(f.finetune);
  CHECK(f.override_ckpt_iteration == std::optional<int64_t>(7));
  CHECK(from_save == std::optional<int64_t>(7));
  a.override_ckpt_iteration = 3;  // given: it wins, and nothing is taken from --save
  CHECK(mr::run::resumed_iteration(a) == 3);
  CHECK(mr::run::frozen_load_args(a, &from_save).override_ckpt_iteration == std::optional<int64_t>(3));
  CHECK(!from_save);
  a.override_ckpt_iteration.reset();
  std::ofstream(out + "/latest_checkpointed_iteration.txt", std::ios::trunc) << "release";
  CHECK(mr::run::frozen_resume_iteration(a) == 0);
  CHECK(!mr::run::frozen_load_args(a).override_ckpt_iteration);
  std::ofstream(out + "/latest_checkpointed_iteration.txt", std::ios::trunc) << "abc";  // Megatron stops on it
  CHECK_THROWS_WITH(mr::run::frozen_resume_iteration(a), Catch::Contains("checkpoint.corrupt") &&
                                                             Catch::Contains("not an iteration number or 'release'"));
  CHECK(mr::run::resumed_iteration(a) == std::nullopt);
  a.freeze_all_layers = false;  // without the flag: --load's iteration, whatever --save holds
  CHECK(mr::run::resumed_iteration(a) == 20);
  CHECK(!mr::run::frozen_load_args(a).finetune);
}
