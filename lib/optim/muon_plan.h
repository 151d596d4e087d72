// How a Muon step groups its parameters into jobs: which matrices share one batched Newton-Schulz call
// (--muon-ns-batch-size), which are orthogonalised alone (a fused QKV weight split into Q, K, V; a tensor-parallel
// shard whose NS spans the TP group). One planner for the CPU (muon_cpu.cpp) and the CUDA path (gpu_muon.cu), so
// the two cannot batch differently. Plain C++: no LibTorch, no CUDA.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "optim/kernels.h"
#include "optim/muon.h"

namespace mr::optim {

// One unit of a Muon step: the parameters (indices into the step's list, in list order) whose updates are
// orthogonalised together. All members have the same rows x cols. More than one member only for batchable
// matrices: neither split QKV nor orthogonalised across TP ranks.
struct MuonJob {
  std::vector<size_t> members;
  int64_t rows = 0, cols = 0;
  bool split_qkv = false;   // a fused QKV weight, orthogonalised part by part (o.split_qkv && is_qkv)
  int partition_dim = -1;   // the dimension NS works across the TP group (muon_partition_dim); -1: this block alone
  int home = 0;             // layer-sharded: the TP rank that orthogonalises the whole matrix (round robin)
  bool batched() const { return members.size() > 1; }
};

// The TP dimension Newton-Schulz has to work across for `p`: p.partition_dim in the duplicated, distributed and
// layer-sharded modes with more than one TP rank, else -1 (blockwise, or no TP group: the shard is orthogonalised on
// its own). Throws std::invalid_argument for auto with more than one TP rank (not implemented).
// Throws std::invalid_argument for a partition_dim other than -1, 0, 1 when it matters.
int muon_partition_dim(const MuonParam& p, const MuonOptions& o, int tp_size);

// Throws std::invalid_argument naming the first parameter that is not a 2-D matrix with param, grad and
// momentum buffers, or whose group is out of range ("muon step: param I: ...").
void check_muon_params(std::span<const MuonParam> params, std::span<const GroupHyper> groups);
// The same, and with Adaptive Muon (o.adaptive) every parameter's moment2 buffer.
void check_muon_params(std::span<const MuonParam> params, std::span<const GroupHyper> groups, const MuonOptions& o);

// The jobs of one step over `params` with `tp_size` TP ranks (1 without a TP group), in the order of their first
// member. With o.ns_batch_size > 1, each batchable matrix joins the job its shape last opened while that job has
// fewer than ns_batch_size members, else opens a new one; everything else is a job of its own.
std::vector<MuonJob> plan_muon_jobs(std::span<const MuonParam> params, const MuonOptions& o, int tp_size);

// The device scratch the CUDA Muon step (gpu_muon.cu) takes: one area per purpose (the momentum updates and their
// orthogonalised values, a QKV part in and out, Newton-Schulz's iterates, Gram matrices, partial sums and norms,
// the TP modes' gathered and whole matrices), each kept at the largest size a job asks of it. add() plans the jobs
// of one step as muon_step does (plan_muon_jobs) and grows each area to what they need; the layer-sharded mode is
// counted as on the home rank (the most). For the run's device-memory check (run/buffers.h, BufferBytes::work).
class MuonDeviceWork {
 public:
  void add(std::span<const MuonParam> params, const MuonOptions& o, int tp_size);
  int64_t bytes() const;  // the areas together

 private:
  enum Area { Update, Orth, QkvIn, QkvOut, NsW, NsY, NsA, NsB, NsPartial, NsDenom, NsTotal, NsGram32, TpGathered,
              TpWhole, TpWholeOrth, kAreas };
  void need(Area a, int64_t bytes);
  void newton_schulz(int64_t batch, int64_t rows, int64_t cols, const NsOptions& o, int pdim_distributed);
  void orthogonalize(int64_t batch, int64_t rows, int64_t cols, int pdim, const MuonOptions& o, int tp_size);
  int64_t area_[kAreas] = {};
};

}  // namespace mr::optim
