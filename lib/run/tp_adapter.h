// Muon's view of the tensor-parallel group (optim::TpGroup) over host buffers, for the CPU backend's Muon step
// (the CUDA backend's is DeviceTp in run/backend_cuda.cpp, on device buffers). Internal to lib/run.
#pragma once

#include "distributed/runtime.h"
#include "optim/muon.h"
#include "run/host_collectives.h"

namespace mr::run {

class TpAdapter : public optim::TpGroup {
 public:
  explicit TpAdapter(distributed::Group& g) : g_(g) {}
  int size() const override { return g_.size(); }
  int rank() const override { return g_.rank(); }
  void all_gather(const float* send, int64_t count, float* recv) override {
    host_all_gather(g_, distributed::Buffer::cpu(const_cast<float*>(send), static_cast<size_t>(count)),
                    distributed::Buffer::cpu(recv, static_cast<size_t>(count) * static_cast<size_t>(g_.size())));
  }
  void all_reduce_sum(float* data, int64_t count) override {
    host_all_reduce(g_, distributed::Buffer::cpu(data, static_cast<size_t>(count)), distributed::ReduceOp::Sum);
  }

  void gather(const float* send, int64_t count, float* recv, int root) override {
    host_gather(g_, distributed::Buffer::cpu(const_cast<float*>(send), static_cast<size_t>(count)),
                distributed::Buffer::cpu(recv, static_cast<size_t>(count) * static_cast<size_t>(g_.size())), root);
  }
  void scatter(const float* send, int64_t count, float* recv, int root) override {
    host_scatter(g_, distributed::Buffer::cpu(const_cast<float*>(send), static_cast<size_t>(count) * static_cast<size_t>(g_.size())),
                 distributed::Buffer::cpu(recv, static_cast<size_t>(count)), root);
  }

 private:
  distributed::Group& g_;
};

}  // namespace mr::run
