// The Muon step's jobs (muon_plan.h), shared by the CPU and the CUDA step.
#include "optim/muon_plan.h"

#include <map>
#include <stdexcept>
#include <string>
#include <utility>

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

}  // namespace mr::optim
