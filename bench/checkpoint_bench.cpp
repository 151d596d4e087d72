// Checkpoint benchmarks (docs/checkpoints.md, docs/performance.md): one rank's save and load of a GPT in the
// default job's shape (hidden 1024, 7 layers: ~88 M parameters, fp32 + Adam: ~1.06 GB of params and optimizer
// state; --quick: 2 layers of hidden 512), each against plain system calls moving the same bytes in the same run.
//   run.checkpoint_save  the save (pieces, safetensors + JSON written and fsynced into iter_N.tmp, the directory
//                        fsynced and renamed, the tracker replaced) vs write() + fsync of the same bytes into one
//                        file; ratio = baseline time / ours
//   run.checkpoint_load  the load (metadata parsed, headers checked, every piece read into the buffers) vs
//                        pread() of the same bytes from one file into the same (already touched) buffers,
//                        alternating; ratio = baseline time / ours
//   run.checkpoint_integrity  --verify-integrity's check of a checkpoint of 8 rank files holding the same bytes
//                        (SHA-256 of each against integrity.json) on the threads it uses vs on one thread;
//                        ratio = one thread's time / ours (at most min(cores, 8))
// All read from the page cache (the files were just written), so the figures compare the code's overhead
// over the system calls, not the disk.
#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <stdexcept>

#include "bench.h"
#include "optim/optimizer_table.h"
#include "run/atomic_dir.h"
#include "run/buffers.h"
#include "run/checkpoint_format.h"
#include "run/checkpoint_io.h"
#include "run/checkpoint_integrity.h"

namespace mr::bench {
namespace {

using namespace mr::run;

ModelPlan gpt_plan(int64_t layers, int64_t h, int64_t vocab) {
  ModelPlan plan;
  auto add = [&](std::string name, std::vector<int64_t> shape, ParamSpec::Init init = ParamSpec::Init::Normal) {
    ParamSpec p;
    p.name = p.key = std::move(name);
    p.shape = p.full_shape = std::move(shape);
    p.no_weight_decay = p.shape.size() == 1;
    p.init = init;
    plan.params.push_back(std::move(p));
  };
  add("embedding.word_embeddings.weight", {vocab, h});
  add("embedding.position_embeddings.weight", {128, h});
  for (int64_t l = 0; l < layers; ++l) {
    const std::string p = "decoder.layers." + std::to_string(l) + ".";
    add(p + "self_attention.linear_qkv.layer_norm_weight", {h}, ParamSpec::Init::One);
    add(p + "self_attention.linear_qkv.weight", {3 * h, h});
    add(p + "self_attention.linear_qkv.bias", {3 * h}, ParamSpec::Init::Zero);
    add(p + "self_attention.linear_proj.weight", {h, h});
    add(p + "mlp.linear_fc1.layer_norm_weight", {h}, ParamSpec::Init::One);
    add(p + "mlp.linear_fc1.weight", {4 * h, h});
    add(p + "mlp.linear_fc2.weight", {h, 4 * h});
    plan.layers.push_back(l);
  }
  add("decoder.final_layernorm.weight", {h}, ParamSpec::Init::One);
  return plan;
}

struct Setup {
  ModelPlan plan;
  FlatBuffers buf;
  std::string dir;
  explicit Setup(const Options& o) {
    plan = o.quick ? gpt_plan(2, 512, 1024) : gpt_plan(7, 1024, 1024);
    buf.build(plan, optim::optimizer_info(arg::Optimizer::adam), optim::DType::F32, run::ShardGroups{}, 0, 0, 1234, 0.02, false);
    char tmpl[] = "/tmp/mr-bench-ckpt-XXXXXX";
    if (!mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
    dir = tmpl;
  }
  ~Setup() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The best of `reps` timed runs of `f`, each after an untimed `prepare`.
template <class P, class F>
double best(int reps, P&& prepare, F&& f) {
  double b = 1e300;
  for (int i = 0; i < reps; ++i) {
    prepare();
    auto t0 = std::chrono::steady_clock::now();
    f();
    b = std::min(b, seconds_since(t0));
  }
  return b;
}

void save_once(Setup& s) {
  const std::string final_dir = iteration_dir(s.dir + "/ck", 10), tmp = final_dir + ".tmp";
  std::filesystem::create_directories(tmp);
  RankMeta m;
  m.iteration = 10;
  m.optimizer = "adam";
  m.params_dtype = "fp32";
  RankLayout layout;  // one rank holding the whole buffer
  layout.shard_hi = static_cast<int64_t>(s.buf.hi);
  layout.expert_shard_lo = static_cast<int64_t>(s.buf.elo);
  layout.expert_shard_hi = static_cast<int64_t>(s.buf.ehi);
  m.layout = layout.to_value();
  const RankSave rs = collect_pieces(s.plan, s.buf, RankPlace{}, true);
  write_rank_files(tmp, m, rs);
  fsync_path(tmp);
  bool in_place = false;
  replace_dir(tmp, final_dir, in_place);
  write_file_atomic(tracker_path(s.dir + "/ck"), "10");
}

// The same bytes with plain write() + fsync into one file.
void plain_write(Setup& s) {
  const RankSave rs = collect_pieces(s.plan, s.buf, RankPlace{}, true);
  const std::string path = s.dir + "/plain.bin";
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) throw std::runtime_error("open " + path);
  for (const TensorOut& t : rs.tensors) {
    const char* p = static_cast<const char*>(t.data);
    for (size_t left = t.bytes; left > 0;) {
      ssize_t w = ::write(fd, p, left);
      if (w <= 0) throw std::runtime_error("write " + path);
      p += w;
      left -= static_cast<size_t>(w);
    }
  }
  if (::fsync(fd) != 0) throw std::runtime_error("fsync " + path);
  ::close(fd);
}

uint64_t state_bytes(const Setup& s) { return collect_pieces(s.plan, s.buf, RankPlace{}, true).bytes; }

Result checkpoint_save(const Options& o) {
  Setup s(o);
  const int reps = o.quick ? 2 : 3;
  const double ours = best(reps, [&] { remove_tree(s.dir + "/ck"); }, [&] { save_once(s); });
  const double plain = best(reps, [&] { std::filesystem::remove(s.dir + "/plain.bin"); }, [&] { plain_write(s); });
  const double gb = static_cast<double>(state_bytes(s)) / 1e9;
  std::fprintf(stderr, "run.checkpoint_save: %.3f GB; save %.3f s, write+fsync %.3f s\n", gb, ours, plain);
  return with_target({"run.checkpoint_save", gb / ours, "GB/s", "write() + fsync of the same bytes", gb / plain, plain / ours},
                     ratio_at_least(0.8));
}

Result checkpoint_load(const Options& o) {
  Setup s(o);
  save_once(s);
  plain_write(s);
  const RankSave rs = collect_pieces(s.plan, s.buf, RankPlace{}, true);
  // Both sides read the same bytes from the page cache (both files were just written) into the same buffers
  // (rs.tensors point into s.buf, whose pages the setup touched): the ratio is the load's own overhead (metadata
  // parsed, headers checked, one read per piece) over plain reads. Alternating, each once untimed first: a busy
  // machine's slow phases hit both sides.
  auto load = [&] {
    CheckpointReader r(iteration_dir(s.dir + "/ck", 10));
    r.load_buffers(s.plan, s.buf, RankPlace{}, true);
  };
  auto plain_read = [&] {
    InFile f(s.dir + "/plain.bin");
    uint64_t at = 0;
    for (const TensorOut& t : rs.tensors) {
      f.read(at, const_cast<void*>(t.data), t.bytes);
      at += t.bytes;
    }
  };
  load();
  plain_read();
  double ours = 1e300, plain = 1e300;
  for (int i = 0; i < (o.quick ? 3 : 5); ++i) {
    ours = std::min(ours, best(1, [] {}, load));
    plain = std::min(plain, best(1, [] {}, plain_read));
  }
  const double gb = static_cast<double>(rs.bytes) / 1e9;
  std::fprintf(stderr, "run.checkpoint_load: %.3f GB; load %.3f s, pread %.3f s\n", gb, ours, plain);
  return with_target({"run.checkpoint_load", gb / ours, "GB/s", "pread() of the same bytes", gb / plain, plain / ours},
                     ratio_at_least(0.8));
}

Result checkpoint_integrity(const Options& o) {
  Setup s(o);
  const RankSave rs = collect_pieces(s.plan, s.buf, RankPlace{}, true);
  // The state's bytes cut into 8 rank files, as 8 ranks would save them.
  const std::string dir = s.dir + "/iter_0000010";
  std::filesystem::create_directories(dir);
  std::string bytes;
  for (const TensorOut& t : rs.tensors) bytes.append(static_cast<const char*>(t.data), t.bytes);
  const size_t per = bytes.size() / 8 + 1;
  for (int r = 0; r < 8; ++r) {
    char name[40];
    std::snprintf(name, sizeof name, "/rank_%05d.safetensors", r);
    const size_t at = std::min(bytes.size(), static_cast<size_t>(r) * per);
    write_file_atomic(dir + name, bytes.substr(at, per));
  }
  write_integrity_manifest(dir);
  const int reps = o.quick ? 2 : 3;
  const double ours = best(reps, [] {}, [&] { verify_integrity_manifest(dir); });
  const double one = best(reps, [] {}, [&] { verify_integrity_manifest(dir, 1); });
  const double gb = static_cast<double>(bytes.size()) / 1e9;
  std::fprintf(stderr, "run.checkpoint_integrity: %.3f GB in 8 files; %.3f s, one thread %.3f s\n", gb, ours, one);
  cpu_set_t cpus;
  const int usable = sched_getaffinity(0, sizeof cpus, &cpus) == 0 ? CPU_COUNT(&cpus) : 1;
  return with_target({"run.checkpoint_integrity", gb / ours, "GB/s", "the same check on one thread", gb / one, one / ours},
                     ratio_at_least(0.8 * std::min(usable, 8)));  // 0.8 x the threads it hashes on
}

MR_BENCHMARK("run.checkpoint_save", checkpoint_save);
MR_BENCHMARK("run.checkpoint_load", checkpoint_load);
MR_BENCHMARK("run.checkpoint_integrity", checkpoint_integrity);

}  // namespace
}  // namespace mr::bench
