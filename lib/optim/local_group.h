// An in-process TpGroup: the ranks are threads of one process sharing a LocalTpHub. For the tests of the TP modes
// (the run uses the dist layer's groups: run/tp_adapter.h on the CPU, DeviceTp in run/backend_cuda.cpp on the GPU).
#pragma once

#include <barrier>
#include <memory>
#include <vector>

#include "optim/muon.h"

namespace mr::optim {

class LocalTpHub {
 public:
  explicit LocalTpHub(int size);
  int size() const { return size_; }
  // The TpGroup of rank r; each rank's thread uses its own.
  std::unique_ptr<TpGroup> group(int r);

 private:
  friend class LocalTpRank;
  int size_;
  std::barrier<> barrier_;
  std::vector<const float*> ptrs_;
};

}  // namespace mr::optim
