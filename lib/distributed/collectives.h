// The collective API the runtime layers use: all-reduce (sum/max), reduce-scatter, all-gather, broadcast, gather,
// scatter and barrier on one process group, each with a timeout. Buffers are raw memory (host memory for Gloo, device
// memory for NCCL), so callers need no LibTorch headers.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace mr::distributed {

enum class DType { F32, F64, F16, BF16, I32, I64, U8 };
enum class Device { Cpu, Cuda };
enum class ReduceOp { Sum, Max };

size_t dtype_size(DType t);
const char* to_string(DType t);
const char* to_string(ReduceOp op);

struct Buffer {
  void* data = nullptr;
  size_t count = 0;  // elements
  DType dtype = DType::F32;
  Device device = Device::Cpu;

  size_t bytes() const { return count * dtype_size(dtype); }
  static Buffer cpu(float* p, size_t n) { return {p, n, DType::F32, Device::Cpu}; }
  static Buffer cpu(double* p, size_t n) { return {p, n, DType::F64, Device::Cpu}; }
  static Buffer cpu(int64_t* p, size_t n) { return {p, n, DType::I64, Device::Cpu}; }
  static Buffer cpu(int32_t* p, size_t n) { return {p, n, DType::I32, Device::Cpu}; }
};

using Timeout = std::chrono::milliseconds;

// Any failure of the distributed layer: rendezvous, a collective, a peer that is gone. The message is meant
// for the user (it names the group, the ranks and what to check).
struct DistError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A failure this rank has only because another rank failed the same collective check (every rank all-reduces a
// flag and all stop alike): the worker says it, then lingers up to kFollowerLinger before it exits, so that the rank
// with the root cause ends first, says its own error, and is the one the launcher names as the first failure.
// What an error of a rank that fails only because another rank failed says of it: that rank (-1: not known which).
// The worker writes it into its TORCHELASTIC_ERROR_FILE (extraInfo.follows_rank: launch/failure_report.h), so that
// the launcher names that rank as the root cause whichever rank exits first (review user39 #4). An error type
// derives from it as well (FollowerError; a failure every rank learns from a collective, as a checkpoint load's).
struct FollowsRank {
  int64_t root_rank = -1;
};
struct FollowerError : std::runtime_error, FollowsRank {
  explicit FollowerError(const std::string& what, int64_t rank = -1) : std::runtime_error(what), FollowsRank{rank} {}
};
inline constexpr std::chrono::milliseconds kFollowerLinger{3000};

// The other side of a FollowerError: this rank saw the value every rank then agreed to stop on. The worker says it,
// then waits kRootCauseGrace (well under kFollowerLinger, so it still ends first) before it exits, so that the
// followers, which passed the same collective, have said theirs before the launcher stops them.
struct RootCauseError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
inline constexpr std::chrono::milliseconds kRootCauseGrace{1000};

// A failure inside one backend call (before the runtime has worked out which peer is to blame).
struct CollectiveError : std::runtime_error {
  bool timed_out = false;
  CollectiveError(const std::string& what, bool timeout) : std::runtime_error(what), timed_out(timeout) {}
};

// One communicator: a backend's view of one group of ranks. All calls are synchronous and collective over the
// group; `timeout` bounds the wait (nullopt: the communicator's default, --distributed-timeout-minutes).
class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual const char* backend() const = 0;  // "gloo", "nccl", "local"
  virtual Device device() const = 0;        // where its buffers live

  virtual void all_reduce(Buffer buf, ReduceOp op, std::optional<Timeout> timeout) = 0;
  // in.count == out.count * size; rank i receives the reduction of block i.
  virtual void reduce_scatter(Buffer in, Buffer out, ReduceOp op, std::optional<Timeout> timeout) = 0;
  // out.count == in.count * size; block i holds rank i's input.
  virtual void all_gather(Buffer in, Buffer out, std::optional<Timeout> timeout) = 0;
  virtual void broadcast(Buffer buf, int root, std::optional<Timeout> timeout) = 0;  // root: index in the group
  // On `root`, out.count == in.count * size and block i holds rank i's input; `out` is not touched elsewhere.
  virtual void gather(Buffer in, Buffer out, int root, std::optional<Timeout> timeout) = 0;
  // Block i of root's `in` (in.count == out.count * size, read on root only) to rank i's `out`.
  virtual void scatter(Buffer in, Buffer out, int root, std::optional<Timeout> timeout) = 0;
  virtual void barrier(std::optional<Timeout> timeout) = 0;
  // Changes the default timeout of the calls that follow (--distributed-timeout-seconds-after-init).
  virtual void set_timeout(Timeout) {}
  // This rank is leaving on an error: the teardown that follows must not wait for the peers (NCCL aborts the
  // communicator instead of finalizing it, which needs every peer). Gloo's teardown is local: nothing to do.
  virtual void abandon() {}
};

// A group of the job as the optimizer sees it: its ranks and the collectives, dispatched to the communicator for
// the buffer's device. Failures come out as DistError naming the missing rank when one is gone.
class Runtime;
class Group {
 public:
  const std::string& kind() const { return kind_; }  // "tp", "dp-cp", ...
  const std::vector<int>& ranks() const { return ranks_; }
  int rank() const { return index_; }  // this rank's index in the group
  int size() const { return static_cast<int>(ranks_.size()); }
  std::string describe() const;        // "dp [0, 2]"

  void all_reduce(Buffer buf, ReduceOp op = ReduceOp::Sum, std::optional<Timeout> timeout = std::nullopt);
  void reduce_scatter(Buffer in, Buffer out, ReduceOp op = ReduceOp::Sum, std::optional<Timeout> timeout = std::nullopt);
  void all_gather(Buffer in, Buffer out, std::optional<Timeout> timeout = std::nullopt);
  void broadcast(Buffer buf, int root = 0, std::optional<Timeout> timeout = std::nullopt);
  // Every member's `in` to `root` (Communicator::gather), and root's blocks back to the members (scatter): the
  // layer-sharded Muon's shards to their matrix's home rank and its result back, each at 1/size of an all-gather's
  // traffic.
  void gather(Buffer in, Buffer out, int root, std::optional<Timeout> timeout = std::nullopt);
  void scatter(Buffer in, Buffer out, int root, std::optional<Timeout> timeout = std::nullopt);
  void barrier(std::optional<Timeout> timeout = std::nullopt);

  bool has(Device d) const { return d == Device::Cpu ? cpu_ != nullptr : gpu_ != nullptr; }
  Communicator* communicator(Device d) const { return d == Device::Cpu ? cpu_.get() : gpu_.get(); }

 private:
  friend class Runtime;
  template <class F>
  void run(const char* op, Device d, F&& f);
  Communicator& pick(const char* op, Device d);
  void check_root(const char* op, int root) const;  // DistError unless 0 <= root < size()

  Runtime* rt_ = nullptr;
  std::string kind_;
  std::vector<int> ranks_;
  int index_ = 0;
  std::shared_ptr<Communicator> cpu_, gpu_;
};

}  // namespace mr::distributed
