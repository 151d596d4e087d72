// An in-process TpGroup: the ranks are threads of one process sharing a LocalTpHub. For tests of the TP modes
// (and single-process runs) until the dist layer's collectives are wired in.
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
