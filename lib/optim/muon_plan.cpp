// The Muon step's jobs (muon_plan.h), shared by the CPU and the CUDA step.
#include "optim/muon_plan.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <stdexcept>
#include <string>
#include <utility>

#include "optim/launch_geometry.h"

namespace mr::optim {

int muon_partition_dim(const MuonParam& p, const MuonOptions& o, int tp_size) {
  if (o.tp_mode == MuonTpMode::Blockwise || tp_size <= 1) return -1;
  if (o.tp_mode == MuonTpMode::Auto)
    throw std::invalid_argument("muon: --muon-tp-mode auto with a TP group of " + std::to_string(tp_size) +
                                " ranks is not implemented (a TP group of one is)");
  if (p.partition_dim != -1 && p.partition_dim != 0 && p.partition_dim != 1)
    throw std::invalid_argument("muon: partition_dim must be -1, 0 or 1");
  return p.partition_dim;
}

void check_muon_params(std::span<const MuonParam> params, std::span<const GroupHyper> groups) {
  for (size_t i = 0; i < params.size(); ++i) {
    const MuonParam& p = params[i];
    if (p.group < 0 || static_cast<size_t>(p.group) >= groups.size())
      throw std::invalid_argument("muon step: param " + std::to_string(i) + ": group out of range");
    if (p.rows <= 0 || p.cols <= 0 || !p.param || !p.grad || !p.momentum_buffer)
      throw std::invalid_argument("muon step: param " + std::to_string(i) + ": needs a 2-D param, grad and momentum");
  }
}

void check_muon_params(std::span<const MuonParam> params, std::span<const GroupHyper> groups, const MuonOptions& o) {
  check_muon_params(params, groups);
  if (o.adaptive.method == Moment2Method::None) return;
  for (size_t i = 0; i < params.size(); ++i)
    if (!params[i].moment2_buffer)
      throw std::invalid_argument("muon step: param " + std::to_string(i) + ": adaptive muon needs a moment2 buffer");
}

std::vector<MuonJob> plan_muon_jobs(std::span<const MuonParam> params, const MuonOptions& o, int tp_size) {
  std::vector<MuonJob> jobs;
  std::map<std::pair<int64_t, int64_t>, size_t> open;  // shape -> the job of that shape still taking members
  int sharded = 0;  // the TP-split jobs so far (layer-sharded homes)
  for (size_t i = 0; i < params.size(); ++i) {
    const MuonParam& p = params[i];
    MuonJob job;
    job.rows = p.rows, job.cols = p.cols;
    job.split_qkv = o.split_qkv && p.is_qkv;
    job.partition_dim = muon_partition_dim(p, o, tp_size);
    // Layer-sharded: each matrix split over the TP group gets one home rank, round robin in step order.
    if (o.tp_mode == MuonTpMode::LayerSharded && job.partition_dim >= 0) job.home = sharded++ % tp_size;
    if (o.ns_batch_size > 1 && !job.split_qkv && job.partition_dim < 0) {
      const auto key = std::make_pair(p.rows, p.cols);
      auto it = open.find(key);
      if (it != open.end() && jobs[it->second].members.size() < static_cast<size_t>(o.ns_batch_size)) {
        jobs[it->second].members.push_back(i);
        continue;
      }
      open[key] = jobs.size();
    }
    job.members.push_back(i);
    jobs.push_back(std::move(job));
  }
  return jobs;
}


void MuonDeviceWork::need(Area a, int64_t bytes) { area_[a] = std::max(area_[a], bytes); }

int64_t MuonDeviceWork::bytes() const { return std::accumulate(area_, area_ + kAreas, int64_t{0}); }

// gpu_muon.cu's ns_device: the iterate and the next one (m x n), A and B (m x m) in the GEMMs' element type (bf16
// for medium precision, else fp32), a double per block and matrix, a float per matrix; distributed (pdim >= 0):
// the summed norm and an fp32 Gram matrix.
void MuonDeviceWork::newton_schulz(int64_t batch, int64_t rows, int64_t cols, const NsOptions& o, int pdim) {
  if (batch <= 0 || rows <= 0 || cols <= 0) return;
  const bool transpose = pdim >= 0 ? pdim == 0 : rows > cols;
  const int64_t m = transpose ? cols : rows, n = transpose ? rows : cols, mn = m * n, mm = m * m;
  const int64_t elem = o.precision == MatmulPrecision::Medium ? 2 : 4;
  need(NsW, batch * mn * elem);
  need(NsY, batch * mn * elem);
  need(NsA, batch * mm * elem);
  need(NsB, batch * mm * elem);
  need(NsPartial, batch * geom::sumsq_blocks(mn) * 8);
  need(NsDenom, batch * 4);
  if (pdim >= 0) {
    need(NsTotal, 4);
    if (elem == 2) need(NsGram32, mm * 4);
  }
}

// gpu_muon.cu's orthogonalize: blockwise NS, the distributed NS over the TP group, or (duplicated, layer-sharded)
// the whole matrix gathered and orthogonalised.
void MuonDeviceWork::orthogonalize(int64_t batch, int64_t rows, int64_t cols, int pdim, const MuonOptions& o,
                                   int tp_size) {
  if (pdim < 0) return newton_schulz(batch, rows, cols, o.ns, -1);
  if (o.tp_mode == MuonTpMode::Distributed) return newton_schulz(1, rows, cols, o.ns, pdim);
  const int64_t whole = rows * cols * tp_size * 4;
  need(TpGathered, whole);
  need(TpWhole, whole);
  if (pdim == 0) {
    newton_schulz(1, rows * tp_size, cols, o.ns, -1);
  } else {
    need(TpWholeOrth, whole);
    newton_schulz(1, rows, cols * tp_size, o.ns, -1);
  }
}

void MuonDeviceWork::add(std::span<const MuonParam> params, const MuonOptions& o, int tp_size) {
  for (const MuonJob& job : plan_muon_jobs(params, o, tp_size)) {
    const MuonParam& first = params[job.members.front()];
    const int64_t n = job.rows * job.cols, batch = static_cast<int64_t>(job.members.size());
    need(Update, n * batch * 4);
    need(Orth, n * batch * 4);
    if (job.split_qkv) {
      const std::vector<int64_t>& shapes = first.qkv_split_shapes.empty() ? o.qkv_split_shapes : first.qkv_split_shapes;
      const int64_t total = std::accumulate(shapes.begin(), shapes.end(), int64_t{0});
      if (total <= 0 || first.rows % total != 0) continue;  // the step refuses it
      need(QkvIn, n * 4);
      need(QkvOut, n * 4);
      for (int64_t s : shapes) orthogonalize(1, first.rows / total * s, first.cols, job.partition_dim, o, tp_size);
    } else {
      orthogonalize(batch, job.rows, job.cols, job.partition_dim, o, tp_size);
    }
  }
}

}  // namespace mr::optim
