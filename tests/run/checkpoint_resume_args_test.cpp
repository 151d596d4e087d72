// The saved arguments and what a resume takes from them (lib/run/checkpoint_resume_args.cpp, docs/checkpoints.md):
// the optimizer's group hyper-parameters (kGroupHyper) come from the checkpoint, as Megatron's load_state_dict
// restores its param groups. Every job has a hard timeout.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "checkpoint_jobs.h"
#include "run/checkpoint_format.h"

using namespace mrtest::ckpt;  // spawn, bytes_of, checksum_line, joined

TEST_CASE("a resume takes the optimizer's group hyper-parameters from the checkpoint, as Megatron's "
          "load_state_dict; --no-load-optim keeps the ones given", "[run][checkpoint]") {
  mrtest::TempDir dir;
  const std::string ck = dir / "ck";
  const std::vector<std::string> small = {"--num-layers", "1", "--hidden-size", "64", "--vocab-size", "128",
                                          "--train-iters", "6"};
  auto with = [&](std::vector<std::string> more) { return joined(small, more); };
  // configs/default.yaml says --adam-beta2 0.95.
  mrtest::Proc a = spawn(1, with({"--save", ck, "--save-interval", "3"}), dir, "full");
  INFO(a.out() << a.err());
  REQUIRE(a.exit_code() == 0);
  const std::string full = checksum_line(a.out());
  REQUIRE(!full.empty());
  // Another beta2 on the command line: the checkpoint's wins (the run continues as the one that saved it), with a
  // notice; the checkpoint this run saves records the value its optimizer stepped with.
  const std::string ck2 = dir / "ck2";
  mrtest::Proc b = spawn(1, with({"--load", ck, "--ckpt-step", "3", "--adam-beta2", "0.999", "--adam-eps", "1e-3",
                                  "--save", ck2, "--save-interval", "3"}),
                         dir, "resume");
  INFO(b.out() << b.err());
  REQUIRE(b.exit_code() == 0);
  CHECK(checksum_line(b.out()) == full);
  CHECK_THAT(b.out(), Catch::Contains("the optimizer state loads with the hyper-parameters it was saved with") &&
                          Catch::Contains("--adam-beta2 0.999 -> the checkpoint's 0.95") &&
                          Catch::Contains("--adam-eps 0.001 -> the checkpoint's 1e-08") &&
                          !Catch::Contains("--adam-beta1 "));
  const mr::run::RankMeta saved = mr::run::parse_rank_meta(bytes_of(ck2 + "/iter_0000006/rank_00000.json"), "meta");
  double beta2 = 0;
  for (const auto& [k, v] : saved.args.as_object())
    if (k == "adam_beta2") beta2 = v.as_float();
  CHECK(beta2 == 0.95);
  // The same values as saved: nothing to say.
  mrtest::Proc c = spawn(1, with({"--load", ck, "--ckpt-step", "3"}), dir, "same");
  INFO(c.out() << c.err());
  REQUIRE(c.exit_code() == 0);
  CHECK(checksum_line(c.out()) == full);
  CHECK_THAT(c.out(), !Catch::Contains("hyper-parameters it was saved with"));
  // A fresh optimizer state takes the values given: another beta2 gives another run.
  mrtest::Proc d = spawn(1, with({"--load", ck, "--ckpt-step", "3", "--no-load-optim"}), dir, "fresh");
  mrtest::Proc e = spawn(1, with({"--load", ck, "--ckpt-step", "3", "--no-load-optim", "--adam-beta2", "0.999"}), dir,
                         "fresh-beta2");
  INFO(d.out() << d.err() << e.out() << e.err());
  REQUIRE(d.exit_code() == 0);
  REQUIRE(e.exit_code() == 0);
  CHECK_THAT(e.out(), !Catch::Contains("hyper-parameters it was saved with"));
  CHECK(!checksum_line(d.out()).empty());
  CHECK(checksum_line(d.out()) != checksum_line(e.out()));
}
