// Where a run's checkpoint is (lib/run/checkpoint_locate.cpp, docs/checkpoints.md): --load without a checkpoint
// (a warning, or checkpoint.missing), the tracker's details and what is in its place, --load of one iteration's
// directory, and a non-persistent directory that is --save or --load under another spelling. Every job has a hard
// timeout.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint_jobs.h"

namespace fs = std::filesystem;
using namespace mrtest::ckpt;  // spawn, tracker, joined

TEST_CASE("loading without a checkpoint (--load): a warning, or an error with --exit-on-missing-checkpoint",
          "[run][checkpoint]") {
  mrtest::TempDir dir;
  mrtest::Proc a = spawn(1, {"--lr-warmup-iters", "1", "--train-iters", "2", "--load", dir / "none"}, dir, "warn");
  INFO(a.out() << a.err());
  CHECK(a.exit_code() == 0);
  CHECK_THAT(a.out(), Catch::Contains("will not load any checkpoints and will start from random"));
  mrtest::Proc b = spawn(1, {"--lr-warmup-iters", "1", "--train-iters", "2", "--load", dir / "none", "--exit-on-missing-checkpoint"}, dir, "exit");
  INFO(b.out() << b.err());
  CHECK(b.exit_code() == 1);
  CHECK_THAT(b.err(), Catch::Contains("--exit-on-missing-checkpoint") && Catch::Contains("checkpoint.missing"));
  CHECK_THAT(b.out(), !Catch::Contains("iteration        1/"));
  // --load of one iteration's directory (a common slip): the warning says to give its parent, with --ckpt-step
  // where the tracker names another iteration. Another directory without a tracker gets no such words.
  const std::string ck = dir / "ck";
  REQUIRE(spawn(1, {"--lr-warmup-iters", "1", "--train-iters", "4", "--save-interval", "2", "--save", ck}, dir, "save")
              .exit_code() == 0);
  for (const auto& [load, step] : std::vector<std::pair<std::string, std::string>>{
           {ck + "/iter_0000004", ""}, {ck + "/iter_0000004/", ""}, {ck + "/iter_0000002", " with --ckpt-step 2"}}) {
    mrtest::Proc c = spawn(1, {"--lr-warmup-iters", "1", "--train-iters", "2", "--load", load}, dir, "iterdir");
    INFO(c.out() << c.err());
    CHECK(c.exit_code() == 0);
    CHECK_THAT(c.out(), Catch::Contains("(--load " + load + " is the directory of one checkpoint iteration, not a "
                                        "checkpoint directory: give its parent, --load " + ck + step + ")\n"));
  }
  CHECK_THAT(a.out(), !Catch::Contains("give its parent"));
}

TEST_CASE("tracker and directory details: a signed count, --load '' (the working directory), a release checkpoint, "
          "a file where the iteration's directory should be",
          "[run][checkpoint]") {
  mrtest::TempDir dir;
  const std::string ck = dir / "ck";
  REQUIRE(spawn(1, {"--lr-warmup-iters", "1", "--train-iters", "2", "--save-interval", "2", "--save", ck}, dir, "save")
              .exit_code() == 0);
  const std::vector<std::string> more = {"--lr-warmup-iters", "1", "--train-iters", "4", "--override-opt-param-scheduler"};
  auto with = [&](std::vector<std::string> v) { return joined(std::move(v), more); };
  { std::ofstream(ck + "/latest_checkpointed_iteration.txt") << "+2\n"; }  // Python's int() reads it
  mrtest::Proc a = spawn(1, with({"--load", ck}), dir, "signed");
  INFO(a.out() << a.err());
  CHECK(a.exit_code() == 0);
  CHECK_THAT(a.out(), Catch::Contains("at iteration 2"));
  // --load '' is the working directory (os.path.join('', ...)), not the root.
  std::vector<std::string> argv = {"/usr/bin/env", "-C", ck, mrtest::megatron_run(), "--nproc-per-node", "1"};
  for (const std::string& w : mrtest::job_args(with({"--load", ""}))) argv.push_back(w);
  std::vector<mrtest::Proc> ev = {mrtest::start(argv, {{"MR_DIST_TIMEOUT_S", "60"}}, dir, "empty")};
  mrtest::wait_all(ev, std::chrono::seconds(180));
  const mrtest::Proc& e = ev[0];
  INFO(e.out() << e.err());
  CHECK(e.exit_code() == 0);
  CHECK_THAT(e.out(), Catch::Contains("at iteration 2") && !Catch::Contains("/latest_checkpointed_iteration.txt"));
  // A release checkpoint says so (not --finetune, which was not given).
  fs::rename(ck + "/iter_0000002", ck + "/release");
  { std::ofstream(ck + "/latest_checkpointed_iteration.txt") << "release"; }
  mrtest::Proc r = spawn(1, with({"--load", ck}), dir, "release");
  INFO(r.out() << r.err());
  CHECK(r.exit_code() == 0);
  CHECK_THAT(r.out(), Catch::Contains("(a release checkpoint: weights only, iteration 0, 16 samples consumed as saved)"));
  // Megatron's load_checkpoint takes consumed_train_samples from the checkpoint's args unless --finetune, a release
  // checkpoint too: the first iteration consumes the samples after the saved 16; with --finetune after none.
  static const std::regex first_line(R"(iteration +1/ +4 \| consumed samples: +([0-9]+) \|)");
  auto first_consumed = [](const std::string& out) {
    std::smatch m;
    return std::regex_search(out, m, first_line) ? m[1].str() : std::string("(no first iteration line)");
  };
  CHECK(first_consumed(r.out()) == "24");
  mrtest::Proc rf = spawn(1, with({"--load", ck, "--finetune"}), dir, "release-finetune");
  INFO(rf.out() << rf.err());
  CHECK(rf.exit_code() == 0);
  CHECK(first_consumed(rf.out()) == "8");
  // With --override-ckpt-iteration (Megatron: release, iteration 0, then N) the line names N and does not say 0.
  mrtest::Proc ro = spawn(1, with({"--load", ck, "--override-ckpt-iteration", "3"}), dir, "release-override");
  INFO(ro.out() << ro.err());
  CHECK(ro.exit_code() == 0);
  CHECK_THAT(ro.out(), Catch::Contains("] at iteration 3 (a release checkpoint: weights only, at the iteration "
                                       "--override-ckpt-iteration gives)") &&
                           !Catch::Contains("iteration 0)") && Catch::Contains("iteration        4/"));
  // A file where iter_0000002 should be.
  { std::ofstream(ck + "/iter_0000002") << "x"; }
  { std::ofstream(ck + "/latest_checkpointed_iteration.txt") << "2"; }
  mrtest::Proc f = spawn(1, with({"--load", ck}), dir, "file");
  INFO(f.out() << f.err());
  CHECK(f.exit_code() == 1);
  CHECK_THAT(f.err(), Catch::Contains(ck + "/iter_0000002 is not a directory"));
  // Something other than a file where the tracker should be (a directory, a FIFO, a link to itself, a dangling link)
  // is no tracker, as Megatron's os.path.isfile has it: a run from random, whose warning says what is there. A FIFO
  // is never opened (no wait for a writer).
  const std::string tracker = ck + "/latest_checkpointed_iteration.txt";
  for (const std::string kind : {"dir", "fifo", "loop", "dangling"}) {
    fs::remove_all(tracker);
    if (kind == "dir") fs::create_directory(tracker);
    if (kind == "fifo") REQUIRE(::mkfifo(tracker.c_str(), 0600) == 0);
    if (kind == "loop") fs::create_symlink("latest_checkpointed_iteration.txt", tracker);
    if (kind == "dangling") fs::create_symlink("nowhere", tracker);
    mrtest::Proc t = spawn(1, with({"--load", ck}), dir, "tracker-" + kind);
    INFO(kind << "\n" << t.out() << t.err());
    CHECK(t.exit_code() == 0);
    CHECK_THAT(t.out() + t.err(), Catch::Contains("could not find the metadata file " + tracker) &&
                                      Catch::Contains("will start from random"));
    if (kind == "dir" || kind == "fifo")
      CHECK_THAT(t.out() + t.err(), Catch::Contains(tracker + " (it is there, but not a regular file)"));
  }
  fs::remove_all(tracker);
  // --load naming a file, not a directory: a run from random, whose warning says so.
  const std::string file = ck + "/iter_0000002";
  mrtest::Proc lf = spawn(1, with({"--load", file}), dir, "load-file");
  INFO(lf.out() << lf.err());
  CHECK(lf.exit_code() == 0);
  CHECK_THAT(lf.out() + lf.err(), Catch::Contains("could not find the metadata file " + file +
                                                  "/latest_checkpointed_iteration.txt (--load " + file +
                                                  " is a file, not a checkpoint directory)"));
}

TEST_CASE("a non-persistent directory that is --save (or --load) under another spelling is refused also before "
          "the directory exists (a job's first run): ./d, d/., d/, a link to d",
          "[run][checkpoint]") {
  mrtest::TempDir dir;
  // Relative spellings, as typed in a job's directory: the test moves there while the jobs run.
  struct Cwd {
    fs::path old = fs::current_path();
    explicit Cwd(const fs::path& to) { fs::current_path(to); }
    ~Cwd() { fs::current_path(old); }
  } cwd(fs::path(dir / ""));
  fs::create_directory_symlink("np3", "np3link");  // dangling until np3 is created
  const std::vector<std::pair<std::string, std::string>> spellings = {
      {"np3", "./np3"}, {"np3", "np3/."}, {"np3", "np3/"}, {"np3", "np3link"}, {"np3", "np3link/"},
      {"./np3", "np3"}, {"np3/", "np3"},  {"np3link", "np3"}, {"np3", "x/../np3"}, {"np3", dir / "np3"}};
  for (const auto& [save, np] : spellings) {
    fs::remove_all("np3");
    fs::remove_all("x");
    mrtest::Proc p = spawn(1, {"--train-iters", "3", "--save", save, "--save-interval", "2",
                               "--non-persistent-save-interval", "1", "--non-persistent-ckpt-type", "global",
                               "--non-persistent-global-ckpt-dir", np},
                           dir, "fresh");
    INFO("--save " << save << " --non-persistent-global-ckpt-dir " << np << "\n" << p.out() << p.err());
    CHECK(p.exit_code() == 1);
    CHECK_THAT(p.err(), Catch::Contains("[checkpoint.unsupported]: --non-persistent-global-ckpt-dir " + np +
                                        " is the --save directory"));
    CHECK(!fs::exists("np3/iter_0000002"));
  }
  // The default directory named in the message has no doubled separator when --save ends in '/'.
  {
    mrtest::Proc p = spawn(1, {"--train-iters", "3", "--save", "np5/", "--save-interval", "2",
                               "--non-persistent-save-interval", "1", "--non-persistent-ckpt-type", "global",
                               "--non-persistent-global-ckpt-dir", "./np5"},
                           dir, "slash");
    INFO(p.out() << p.err());
    CHECK(p.exit_code() == 1);
    CHECK_THAT(p.err(), Catch::Contains("(without the flag: np5/non_persistent)"));
  }
  // --load that does not exist yet, spelt otherwise than the non-persistent directory: refused on the first run as
  // on the next (whose load the first run's non-persistent saves would fill).
  {
    mrtest::Proc p = spawn(1, {"--train-iters", "3", "--save", "other", "--load", "./ld/", "--save-interval", "2",
                               "--non-persistent-save-interval", "1", "--non-persistent-ckpt-type", "global",
                               "--non-persistent-global-ckpt-dir", "ld"},
                           dir, "freshload");
    INFO(p.out() << p.err());
    CHECK(p.exit_code() == 1);
    CHECK_THAT(p.err(), Catch::Contains("[checkpoint.unsupported]: --non-persistent-global-ckpt-dir ld is the --load "
                                        "directory ./ld/"));
  }
  // Other directories still run: the non-persistent saves beside the persistent ones.
  fs::remove_all("np3");
  mrtest::Proc ok = spawn(1, {"--train-iters", "3", "--save", "np3", "--save-interval", "2",
                              "--non-persistent-save-interval", "1", "--non-persistent-ckpt-type", "global",
                              "--non-persistent-global-ckpt-dir", "./np3/../np3x"},
                          dir, "other");
  INFO(ok.out() << ok.err());
  CHECK(ok.exit_code() == 0);
  CHECK(fs::exists("np3/iter_0000002/rank_00000.json"));
  CHECK(fs::exists("np3x/latest_checkpointed_iteration.txt"));
}

// Megatron's load_checkpoint: with --pretrained-checkpoint P and no checkpoint under --load (no tracker), P is loaded
// with args.finetune = True (weights only, iteration 0); P without one either is its FileNotFoundError.
TEST_CASE("--pretrained-checkpoint: a fine-tune from it where --load holds no checkpoint; none there either is "
          "checkpoint.pretrained-missing",
          "[run][checkpoint]") {
  mrtest::TempDir dir;
  const std::string pt = dir / "pt", ft = dir / "ft";
  REQUIRE(spawn(1, {"--train-iters", "4", "--save-interval", "4", "--save", pt}, dir, "base").exit_code() == 0);
  const std::vector<std::string> job = {"--train-iters", "6", "--exit-interval", "3", "--load", ft, "--save", ft,
                                        "--save-interval", "100", "--pretrained-checkpoint", pt};
  mrtest::Proc a = spawn(1, job, dir, "finetune-from-pt");
  INFO(a.out() << a.err());
  REQUIRE(a.exit_code() == 0);
  CHECK_THAT(a.out(), Catch::Contains("Checkpoint file not found in load directory " + ft +
                                      " attempting to finetune with checkpoint in " + pt) &&
                          Catch::Contains("(--pretrained-checkpoint: a fine-tune, weights only, iteration 0)") &&
                          Catch::Contains("iteration        1/") && !Catch::Contains("will start from random"));
  CHECK_THAT(a.out() + a.err(), !Catch::Contains("--pretrained-checkpoint ("));  // acted on: not in the notice
  CHECK(tracker(ft) == "3");
  // The same weights as --load P --finetune, not a run from random.
  mrtest::Proc f = spawn(1, {"--train-iters", "6", "--exit-interval", "3", "--load", pt, "--finetune"}, dir, "finetune");
  mrtest::Proc s = spawn(1, {"--train-iters", "6", "--exit-interval", "3"}, dir, "scratch");
  REQUIRE(f.exit_code() == 0);
  REQUIRE(s.exit_code() == 0);
  CHECK(!checksum_line(a.out()).empty());
  CHECK(checksum_line(a.out()) == checksum_line(f.out()));
  CHECK(checksum_line(a.out()) != checksum_line(s.out()));
  // The next run of the job resumes its own checkpoint under --load.
  mrtest::Proc b = spawn(1, job, dir, "resume-ft");
  INFO(b.out() << b.err());
  CHECK(b.exit_code() == 0);
  CHECK_THAT(b.out(), Catch::Contains("successfully loaded checkpoint from " + ft) && Catch::Contains("at iteration 3") &&
                          Catch::Contains("iteration        4/") && !Catch::Contains("attempting to finetune"));
  // --pretrained-checkpoint without --load loads it too (Megatron's pretrain calls load_checkpoint for either).
  mrtest::Proc c = spawn(1, {"--train-iters", "3", "--pretrained-checkpoint", pt}, dir, "no-load");
  INFO(c.out() << c.err());
  CHECK(c.exit_code() == 0);
  CHECK_THAT(c.out(), Catch::Contains("Checkpoint file not found in load directory None attempting to finetune with "
                                      "checkpoint in " + pt));
  // No checkpoint in either: refused, naming both (a typo in the base path no longer trains from random).
  const std::string none = dir / "none", typo = dir / "typo";
  mrtest::Proc m = spawn(1, {"--train-iters", "3", "--load", none, "--pretrained-checkpoint", typo}, dir, "missing");
  INFO(m.out() << m.err());
  CHECK(m.exit_code() == 1);
  CHECK_THAT(m.err(), Catch::Contains("[checkpoint.pretrained-missing]: --pretrained-checkpoint " + typo +
                                      ": no checkpoint there (no " + typo + "/latest_checkpointed_iteration.txt), and "
                                      "none under --load " + none) &&
                          Catch::Contains("No checkpoint found in load directory or pretrained directory"));
  CHECK_THAT(m.out(), !Catch::Contains("iteration        1/"));
}
