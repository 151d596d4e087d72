#include "optim/local_group.h"

#include <cstring>
#include <stdexcept>

namespace mr::optim {

class LocalTpRank : public TpGroup {
 public:
  LocalTpRank(LocalTpHub& hub, int rank) : hub_(hub), rank_(rank) {}
  int size() const override { return hub_.size_; }
  int rank() const override { return rank_; }

  void all_gather(const float* send, int64_t count, float* recv) override {
    hub_.ptrs_[static_cast<size_t>(rank_)] = send;
    hub_.barrier_.arrive_and_wait();
    for (int r = 0; r < hub_.size_; ++r)
      std::memcpy(recv + r * count, hub_.ptrs_[static_cast<size_t>(r)], static_cast<size_t>(count) * sizeof(float));
    hub_.barrier_.arrive_and_wait();  // senders keep their buffers until everyone has copied
  }

  void all_reduce_sum(float* data, int64_t count) override {
    hub_.ptrs_[static_cast<size_t>(rank_)] = data;
    hub_.barrier_.arrive_and_wait();
    std::vector<float> sum(static_cast<size_t>(count), 0.0f);
    for (int r = 0; r < hub_.size_; ++r) {  // rank order: every rank gets the same bits
      const float* p = hub_.ptrs_[static_cast<size_t>(r)];
      for (int64_t i = 0; i < count; ++i) sum[static_cast<size_t>(i)] += p[i];
    }
    hub_.barrier_.arrive_and_wait();
    std::memcpy(data, sum.data(), static_cast<size_t>(count) * sizeof(float));
    hub_.barrier_.arrive_and_wait();
  }

  void gather(const float* send, int64_t count, float* recv, int root) override {
    check_root(root);
    hub_.ptrs_[static_cast<size_t>(rank_)] = send;
    hub_.barrier_.arrive_and_wait();
    if (rank_ == root)
      for (int r = 0; r < hub_.size_; ++r)
        std::memcpy(recv + r * count, hub_.ptrs_[static_cast<size_t>(r)], static_cast<size_t>(count) * sizeof(float));
    hub_.barrier_.arrive_and_wait();  // senders keep their buffers until the root has copied
  }

  void scatter(const float* send, int64_t count, float* recv, int root) override {
    check_root(root);
    hub_.ptrs_[static_cast<size_t>(rank_)] = send;
    hub_.barrier_.arrive_and_wait();
    std::memcpy(recv, hub_.ptrs_[static_cast<size_t>(root)] + rank_ * count, static_cast<size_t>(count) * sizeof(float));
    hub_.barrier_.arrive_and_wait();  // the root keeps its buffer until everyone has copied
  }

 private:
  void check_root(int root) const {
    if (root < 0 || root >= hub_.size_) throw std::invalid_argument("LocalTpHub: root out of range");
  }
  LocalTpHub& hub_;
  int rank_;
};

LocalTpHub::LocalTpHub(int size) : size_(size), barrier_(size), ptrs_(static_cast<size_t>(size), nullptr) {
  if (size < 1) throw std::invalid_argument("LocalTpHub: size must be >= 1");
}

std::unique_ptr<TpGroup> LocalTpHub::group(int r) {
  if (r < 0 || r >= size_) throw std::invalid_argument("LocalTpHub: rank out of range");
  return std::make_unique<LocalTpRank>(*this, r);
}

}  // namespace mr::optim
