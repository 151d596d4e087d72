// The synthetic gradient on the GPU (run/gpu_synthetic.h) equals the CPU's bit for bit: every dtype, split and
// odd size. Runs where a GPU is visible (scripts/gpu-check.sh runs "[gpu]"); says it skipped elsewhere.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <vector>

#include "optim/gpu.h"
#include "run/buffers.h"
#include "run/gpu_synthetic.h"

using namespace mr::run;

TEST_CASE("the CUDA synthetic gradient equals the CPU's bit for bit", "[run][gpu]") {
  if (mr::optim::gpu::device_count() == 0) {
    WARN("skipping GPU test: " << mr::optim::gpu::describe());
    return;
  }
  struct Case {
    ParamSpec p;
    int64_t tp_rank;
  };
  std::vector<Case> cases;
  for (int64_t n : {int64_t{1}, int64_t{3}, int64_t{65537}}) {
    Case c;
    c.p.name = c.p.key = "replicated";
    c.p.shape = c.p.full_shape = {n};
    c.tp_rank = 0;
    cases.push_back(c);
  }
  Case rows;  // rows split, 2-D
  rows.p.name = rows.p.key = "rows";
  rows.p.shape = {37, 129};
  rows.p.full_shape = {74, 129};
  rows.p.split_dim = 0;
  rows.tp_rank = 1;
  cases.push_back(rows);
  Case cols = rows;  // columns split
  cols.p.name = cols.p.key = "cols";
  cols.p.full_shape = {37, 387};
  cols.p.split_dim = 1;
  cols.tp_rank = 2;
  cases.push_back(cols);
  Case wrap;  // 1-D shard whose whole-tensor indices cross 2^32
  wrap.p.name = wrap.p.key = "wrap";
  wrap.p.shape = {10000};
  wrap.p.full_shape = {int64_t{10000} * 429497};
  wrap.p.split_dim = 0;
  wrap.tp_rank = 429496;
  cases.push_back(wrap);

  const SampleTable table(dense_samples(5, 2, 16, 64, 2, 4, 1));
  const int bits = quantize_bits(64);
  for (const Case& c : cases) {
    const int64_t n = c.p.numel();
    for (mr::optim::DType dt : {mr::optim::DType::F32, mr::optim::DType::BF16, mr::optim::DType::F16}) {
      for (bool zero : {false, true}) {
        std::vector<uint8_t> model(static_cast<size_t>(n) * 4);
        std::vector<float> target(static_cast<size_t>(n)), cpu(static_cast<size_t>(n)), gpu(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) {
          mr::optim::store_element(model.data(), dt, i, 0.1f * uniform(static_cast<uint64_t>(i)));
          target[static_cast<size_t>(i)] = 0.1f * uniform(static_cast<uint64_t>(i) + 99);
        }
        const float cm = synthetic_grads(c.p, c.tp_rank, 0xfeedu, table, bits, zero,
                                         {model.data(), dt, target.data(), cpu.data(), n});
        mr::optim::gpu::DeviceBuffer dm(model.size()), dtg(target.size() * 4), dg(gpu.size() * 4);
        dm.upload(model.data(), model.size());
        dtg.upload(target.data(), target.size() * 4);
        const float gm = gpu::synthetic_grads(c.p, c.tp_rank, 0xfeedu, table, bits, zero,
                                              {dm.get(), dt, dtg.as<float>(), dg.as<float>(), n});
        dg.download(gpu.data(), gpu.size() * 4);
        INFO(c.p.name << " n " << n << " dtype " << static_cast<int>(dt) << (zero ? " zero" : ""));
        CHECK(gm == cm);
        CHECK(std::memcmp(cpu.data(), gpu.data(), cpu.size() * 4) == 0);
      }
    }
  }
  // A NaN anywhere is the max on both devices, an inf the max without a NaN (run/abs_max.h).
  ParamSpec v;
  v.name = v.key = "nonfinite";
  v.shape = v.full_shape = {65537};
  const int64_t n = v.numel();
  for (float bad : {NAN, INFINITY}) {
    std::vector<float> model(static_cast<size_t>(n), 0.5f), target(static_cast<size_t>(n), 0.0f), cpu(model.size());
    model[40000] = bad;
    model[3] = -INFINITY;
    const float cm = synthetic_grads(v, 0, 0xfeedu, table, bits, false,
                                     {model.data(), mr::optim::DType::F32, target.data(), cpu.data(), n});
    mr::optim::gpu::DeviceBuffer dm(model.size() * 4), dtg(target.size() * 4), dg(model.size() * 4);
    dm.upload(model.data(), model.size() * 4);
    dtg.upload(target.data(), target.size() * 4);
    const float gm = gpu::synthetic_grads(v, 0, 0xfeedu, table, bits, false,
                                          {dm.get(), mr::optim::DType::F32, dtg.as<float>(), dg.as<float>(), n});
    INFO("bad " << bad);
    CHECK(std::isnan(cm) == std::isnan(bad));
    CHECK(std::isnan(gm) == std::isnan(bad));
    if (!std::isnan(bad)) CHECK(gm == cm);
  }
}
