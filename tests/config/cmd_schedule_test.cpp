// `megatron-run schedule`: the learning rate and weight decay over a run, from the scheduler the run uses. The CSV
// equals Megatron's own OptimizerParamScheduler on corpus configs (tests/optim/data/schedule_golden.json, written
// by scripts/dev/schedule_golden.py from Megatron-LM's Python), and the other formats carry the same points.
#include <catch2/catch.hpp>

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "binary.h"
#include "scratch.h"
#include "config/value.h"

namespace {

using Result = mrtest::Proc;
Result sh(const std::string& args) { return mrtest::megatron_run_merged(args); }
Result out_only(const std::string& args) { return mrtest::megatron_run_stdout(args); }

const std::string kCorpus = std::string(MR_DATA_DIR) + "/corpus/functional-tests/";
const std::string kDefault = std::string(MR_SOURCE_DIR) + "/configs/default.yaml";

const mr::Value& field(const mr::Value& obj, const std::string& k) {
  for (const auto& [key, v] : obj.as_object())
    if (key == k) return v;
  throw std::out_of_range("no field " + k);
}
bool has_field(const mr::Value& obj, const std::string& k) {
  for (const auto& [key, v] : obj.as_object())
    if (key == k) return true;
  return false;
}

const mr::Value& golden() {
  static const mr::Value g = [] {
    std::ifstream in(std::string(MR_SOURCE_DIR) + "/tests/optim/data/schedule_golden.json");
    std::stringstream ss;
    ss << in.rdbuf();
    return mr::Value::parse_json(ss.str());
  }();
  return g;
}

std::vector<std::vector<std::string>> csv(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  std::stringstream ss(text);
  std::string line;
  while (std::getline(ss, line)) {
    std::vector<std::string> cells;
    std::stringstream ls(line);
    std::string c;
    while (std::getline(ls, c, ',')) cells.push_back(c);
    rows.push_back(cells);
  }
  return rows;
}

}  // namespace

TEST_CASE("schedule: the CSV equals Megatron's scheduler on corpus configs", "[cli][schedule][golden]") {
  // Iteration- and sample-based runs; linear and cosine decay; with and without the --decoupled-lr group.
  const std::vector<std::string> files = {"bert__bert_mcore_tp1_pp2", "gpt__gpt3_mcore_te_tp1_pp4_vp1_decoupled_lr",
                                          "gpt__gpt3_7b_tp4_pp1_memory_speed", "gpt__gpt3_15b_8t_release_gb200",
                                          "mixtral__mixtral_8x7b_tp1pp4ep8vpp8_release"};
  std::map<std::string, const mr::Value*> cases;
  for (const mr::Value& c : field(golden(), "corpus").as_list()) cases[field(c, "file").as_str()] = &c;
  int compared = 0, sample_based = 0, decoupled = 0;
  for (const std::string& f : files) {
    INFO("corpus config " << f);
    REQUIRE(cases.count(f));
    const mr::Value& c = *cases.at(f);
    const std::string cfg = " --world-size 8 --env-placeholder /placeholder --config " + kCorpus + f + ".yaml";
    // The run's unit and batch size, from the JSON of the same command.
    Result j = out_only("schedule --format json --points 1" + cfg);
    REQUIRE(j.exit == 0);
    const mr::Value meta = mr::Value::parse_json(j.out);
    const bool iters = field(meta, "unit").as_str() == "iteration";
    const int64_t gbs = field(meta, "global_batch_size").as_int();
    const size_t groups = field(c, "groups").as_list().size();
    REQUIRE(groups <= 2);
    // Megatron's sample counts that are steps of this run: all of them (samples), or whole iterations.
    std::map<int64_t, const mr::List*> want;
    std::string at;
    for (const mr::Value& row : field(c, "points").as_list()) {
      const int64_t n = row.as_list()[0].as_int();
      if (iters && n % gbs != 0) continue;
      const int64_t step = iters ? n / gbs : n;
      want[step] = &row.as_list();
      at += (at.empty() ? "" : ",") + std::to_string(step);
    }
    REQUIRE(want.size() >= 10);
    Result r = out_only("schedule --format csv --at " + at + cfg);
    REQUIRE(r.exit == 0);
    const auto rows = csv(r.out);
    REQUIRE(rows.size() == want.size() + 1);
    const std::vector<std::string> header = rows[0];
    const size_t lr = iters ? 2 : 1;
    CHECK(header[0] == (iters ? "iteration" : "samples"));
    CHECK(header[lr] == "lr");
    CHECK(header[lr + 1] == "weight_decay");
    CHECK(header.back() == "phase");
    if (groups == 2) CHECK(header[lr + 2] == "decoupled_lr");
    for (size_t i = 1; i < rows.size(); ++i) {
      const auto& row = rows[i];
      const int64_t step = std::stoll(row[0]);
      REQUIRE(want.count(step));
      const mr::List& g = *want.at(step);
      if (iters) CHECK(std::stoll(row[1]) == step * gbs);
      INFO("step " << step);
      // Bit-equal: the CSV writes Python's repr, which reads back to the same double.
      CHECK(std::stod(row[lr]) == g[1].as_float());
      CHECK(std::stod(row[lr + 1]) == g[2].as_float());
      if (groups == 2) CHECK(std::stod(row[lr + 2]) == g[3].as_float());
      ++compared;
    }
    sample_based += !iters;
    decoupled += groups == 2;
  }
  CHECK(compared > 150);
  CHECK(sample_based >= 1);
  CHECK(decoupled >= 2);
}

TEST_CASE("schedule: text, JSON and SVG carry the same points and phases", "[cli][schedule]") {
  const std::string cfg = " --world-size 8 --env-placeholder /p --config " + kCorpus +
                          "gpt__gpt3_mcore_te_tp1_pp4_vp1_decoupled_lr.yaml --train-iters 400000";
  Result t = sh("schedule" + cfg);
  REQUIRE(t.exit == 0);
  CHECK(t.out.find("400000 iterations of 32 samples (--train-iters, --global-batch-size)") != std::string::npos);
  CHECK(t.out.find("warmup ends at iteration 3200") != std::string::npos);
  CHECK(t.out.find("decay ends (--lr-decay-iters) at iteration 320000") != std::string::npos);
  CHECK(t.out.find("        3200         102400 0.00015") != std::string::npos);
  CHECK(t.out.find("floor") != std::string::npos);
  Result j = out_only("schedule --format json --at 0,3200,320001" + cfg);
  REQUIRE(j.exit == 0);
  const mr::Value v = mr::Value::parse_json(j.out);
  const mr::List& pts = field(v, "points").as_list();
  REQUIRE(pts.size() == 3);
  CHECK(field(pts[1], "lr").as_float() == 0.00015);
  CHECK(field(pts[1], "decoupled_lr").as_float() == 0.0002);
  CHECK(field(pts[1], "phase").as_str() == "warmup");
  CHECK(field(pts[2], "phase").as_str() == "floor");
  CHECK(field(pts[2], "samples").as_int() == 320001LL * 32);
  CHECK(field(field(v, "settings"), "lr_decay_style").as_str() == "cosine");
  Result s = out_only("schedule --format svg" + cfg);
  REQUIRE(s.exit == 0);
  CHECK(s.out.rfind("<?xml", 0) == 0);
  CHECK(s.out.find(">warmup ends @ 3200</text>") != std::string::npos);
  CHECK(s.out.find("embedding/output (--decoupled-lr)") != std::string::npos);
  CHECK(s.out.find("<script") == std::string::npos);
  // --every: every K iterations and the run's end; sample-based runs count samples.
  Result e = out_only("schedule --format csv --every 20 --config " + kDefault);
  REQUIRE(e.exit == 0);
  CHECK(e.out.rfind("iteration,samples,lr,weight_decay,phase\n0,0,", 0) == 0);
  Result sb = out_only("schedule --format csv --points 4 --world-size 8 --env-placeholder /p --config " + kCorpus +
                       "gpt__gpt3_15b_8t_release_gb200.yaml");
  REQUIRE(sb.exit == 0);
  CHECK(sb.out.rfind("samples,lr,weight_decay,decoupled_lr,phase\n0,0.0,", 0) == 0);
}

TEST_CASE("schedule: refusals name the flag", "[cli][schedule]") {
  Result r = sh("schedule --at 1,x --config " + kDefault);
  CHECK(r.exit == 2);
  CHECK(r.out.find("argument --at: 'x' is not a non-negative integer") != std::string::npos);
  r = sh("schedule --at '' --config " + kDefault);  // given empty: refused, not taken for "not given"
  CHECK(r.exit == 2);
  CHECK(r.out.find("argument --at: expected N,N,...") != std::string::npos);
  r = sh("schedule --at 99999999999999999999 --config " + kDefault);
  CHECK(r.exit == 2);
  CHECK(r.out.find("argument --at: 99999999999999999999 is past the largest step, 9223372036854775807") !=
        std::string::npos);
  r = sh("schedule --at 1 --every 2 --config " + kDefault);
  CHECK(r.exit == 2);
  CHECK(r.out.find("give one of them") != std::string::npos);
  r = sh("schedule --points 0 --config " + kDefault);
  CHECK(r.exit == 2);
  CHECK(r.out.find("argument --points: must be at least 1") != std::string::npos);
  r = sh("schedule --every 1 --config " + kDefault + " --train-iters 100000000");
  CHECK(r.exit == 2);
  CHECK(r.out.find("argument --every:") != std::string::npos);
  r = sh("schedule --format xml --config " + kDefault);
  CHECK(r.exit == 2);
  CHECK(r.out.find("'text', 'json', 'csv', 'svg'") != std::string::npos);
  // The scheduler's own checks are a failed rule (exit 1), with --format json one document on stdout: the rule,
  // stage and message (hint included) of the dry run's check, init.lr-schedule.
  r = out_only("schedule --format json --config " + kDefault + " --lr-warmup-iters 1000");
  CHECK(r.exit == 1);
  const mr::Value v = mr::Value::parse_json(r.out);
  const mr::Value& d = field(v, "diagnostics").as_list()[0];
  CHECK(field(d, "rule").as_str() == "init.lr-schedule");
  CHECK(field(d, "stage").as_str() == "init");
  const std::string msg = field(d, "message").as_str();
  CHECK(msg.rfind("the training run would fail when it builds its learning-rate scheduler: the warmup", 0) == 0);
  CHECK(msg.find("To fix it, shorten the warmup") != std::string::npos);
  CHECK_FALSE(has_field(v, "points"));
  const Result dry = out_only("--format json --config " + kDefault + " --lr-warmup-iters 1000");
  CHECK(dry.exit == 1);
  const mr::Value dv = mr::Value::parse_json(dry.out);
  bool same = false;  // the dry run's JSON reports the same diagnostic
  for (const mr::Value& e : field(dv, "diagnostics").as_list())
    same = same || (field(e, "rule").as_str() == "init.lr-schedule" && field(e, "message").as_str() == msg);
  CHECK(same);
  r = sh("schedule --help");
  CHECK(r.exit == 0);
  CHECK(r.out.find("usage: megatron-run schedule") != std::string::npos);
}

TEST_CASE("schedule: the batch the run consumes (a step schedule, a rounded-down batch) steps the scheduler",
          "[cli][schedule]") {
  // The training run logs, for this job: iteration 9 at 24 consumed samples, learning rate 3.546845E-05, and from
  // iteration 10 the floor 3.0E-05 (batches of 2 until 16 samples, then 8; Megatron steps its scheduler by the
  // samples consumed).
  // configs/default.yaml without its --global-batch-size (a step schedule sets each step's).
  std::ifstream in(kDefault);
  std::string config, line;
  while (std::getline(in, line))
    if (line.rfind("--global-batch-size:", 0) != 0) config += line + "\n";
  const std::string stepped = mrtest::write_file("stepped.yaml", config, "schedule");
  const std::string job = "schedule --format csv --config " + stepped +
                          " --step-batch-size-schedule '0:2 2048:8' --train-iters 13";
  Result r = out_only(job + " --at 8,9,10");
  REQUIRE(r.exit == 0);
  const auto rows = csv(r.out);
  REQUIRE(rows.size() == 4);
  CHECK(rows[1][1] == "16");
  CHECK(rows[2][1] == "24");
  CHECK(std::stod(rows[2][2]) == Approx(3.546845e-05).epsilon(1e-6));
  CHECK(rows[3][1] == "32");
  CHECK(rows[3][2] == "3e-05");
  CHECK(rows[3].back() == "floor");
  r = out_only("schedule --config " + stepped + " --step-batch-size-schedule '0:2 2048:8' --train-iters 13 --at 1");
  CHECK(r.out.find("13 iterations (--train-iters) of 2 samples from 0, then 8 samples from 16 consumed") !=
        std::string::npos);
  // --decrease-batch-size-if-needed: 7 rounds down to 6 (micro-batch 2 x data-parallel 1), as the run logs.
  r = out_only("schedule --format csv --config " + kDefault +
               " --global-batch-size 7 --eval-global-batch-size 8 --decrease-batch-size-if-needed --at 1");
  REQUIRE(r.exit == 0);
  CHECK(csv(r.out)[1][1] == "6");
  // Both at once are refused, as the run refuses them: by validation's init stage (Megatron's calculator),
  // before the schedule is drawn.
  r = sh("schedule --config " + stepped + " --step-batch-size-schedule '0:2' --decrease-batch-size-if-needed");
  CHECK(r.exit == 1);
  CHECK(r.out.find("error[init.step-batch-size-schedule-no-decrease]: Megatron would fail at initialisation (the "
                   "number-of-microbatches calculator): --step-batch-size-schedule cannot be combined with "
                   "--decrease-batch-size-if-needed") != std::string::npos);
}
