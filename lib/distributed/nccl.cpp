// NCCL communicators for device buffers, used directly (Debian's LibTorch has no CUDA, so c10d's
// ProcessGroupNCCL is not available): the unique id travels through the rendezvous store, every call runs on a
// private stream and is polled so that a timeout aborts the communicator instead of hanging.
#include "distributed/store.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#ifdef MR_HAVE_CUDA
#include <cuda_runtime.h>
#include <nccl.h>

#include <thread>

#include "launch/nccl_check.h"
#include "util/gpu_devices.h"
#include "util/text.h"
#endif

namespace mr::distributed {

bool built_with_cuda() {
#ifdef MR_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

#ifdef MR_HAVE_CUDA

std::string nccl_unavailable(int local_ranks) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return std::string("no usable GPU: cudaGetDeviceCount says \"") + cudaGetErrorString(e) +
           "\" (no NVIDIA driver, or no GPU in this machine)";
  }
  if (n == 0) {
    const char* vis = std::getenv("CUDA_VISIBLE_DEVICES");
    return std::string("no GPU is visible") + (vis ? " (CUDA_VISIBLE_DEVICES=" + std::string(vis) + ")" : "");
  }
  if (local_ranks > n)
    return std::to_string(local_ranks) + " ranks on this machine but " + std::to_string(n) + " GPU" +
           (n == 1 ? " is" : "s are") + " visible (NCCL needs a GPU of its own for each rank)";
  int version = 0;
  if (ncclGetVersion(&version) != ncclSuccess) return "the NCCL runtime does not answer (ncclGetVersion failed)";
  return {};
}

int gpu_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" error
    return 0;
  }
  return n;
}

namespace {

std::string hex(const void* p, size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    unsigned char c = static_cast<const unsigned char*>(p)[i];
    s += digits[c >> 4];
    s += digits[c & 15];
  }
  return s;
}

void unhex(const std::string& s, void* p, size_t n) {
  auto val = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
  if (s.size() != 2 * n) throw DistError("malformed NCCL unique id in the store");
  for (size_t i = 0; i < n; ++i)
    static_cast<unsigned char*>(p)[i] = static_cast<unsigned char>(val(s[2 * i]) * 16 + val(s[2 * i + 1]));
}

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::F32: return ncclFloat32;
    case DType::F64: return ncclFloat64;
    case DType::F16: return ncclFloat16;
    case DType::BF16: return ncclBfloat16;
    case DType::I32: return ncclInt32;
    case DType::I64: return ncclInt64;
    case DType::U8: return ncclUint8;
  }
  return ncclFloat32;
}

// The device of a rank, as the CUDA backend picks it (util::choose_device); DistError with its refusal.
int device_for(int local_rank) {
  const util::DeviceChoice c = util::choose_device(local_rank, gpu_count(), util::cuda_visible_devices_env());
  if (!c.refusal.empty()) throw DistError(launch::device_refusal(c, "the nccl backend"));
  return c.device;
}

// A CUDA failure deliberately ignored (a cleanup): cleared, so that a later cudaGetLastError (the kernels' launch
// checks) does not report it as its own.
void ignore_cuda(cudaError_t e) {
  if (e != cudaSuccess) (void)cudaGetLastError();
}

// A CUDA stream, event or device area, released when its holder goes: also when the communicator's constructor
// throws half way (no destructor of the communicator runs then, its members' do).
// The longest a communicator's teardown waits for its peers to finalize with it (then it aborts): every peer of a
// healthy job gets there within moments of the others.
constexpr std::chrono::seconds kFinalizeWait{30};

template <class T, cudaError_t (*Release)(T)>
struct CudaOwned {
  T h{};
  CudaOwned() = default;
  CudaOwned(const CudaOwned&) = delete;
  CudaOwned& operator=(const CudaOwned&) = delete;
  ~CudaOwned() {
    if (h) ignore_cuda(Release(h));
  }
  operator T() const { return h; }
};

void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw CollectiveError(std::string(what) + ": " + cudaGetErrorString(e), false);
}

// An NCCL failure in words: ncclGetErrorString's generic text ("unhandled cuda error") and, where NCCL says more,
// the text of its last WARN (ncclGetLastError, NCCL >= 2.13), which otherwise reaches only a run with NCCL_DEBUG
// set. Asked before the communicator is aborted (abort() forgets it).
std::string nccl_error(ncclResult_t r, ncclComm_t comm) {
  std::string s = ncclGetErrorString(r);
#if defined(NCCL_VERSION_CODE) && NCCL_VERSION_CODE >= 21300
  const char* last = ncclGetLastError(comm);
  if (last && *last) s += std::string(" (NCCL: ") + last + ")";
#else
  (void)comm;
#endif
  return s;
}

class NcclCommunicator final : public Communicator {
 public:
  explicit NcclCommunicator(const CommSpec& spec) : spec_(spec) {
    device_ = device_for(spec.local_rank);
    check_cuda(cudaSetDevice(device_), "cudaSetDevice");
    ncclUniqueId id;
    if (spec.index == 0) {
      if (const ncclResult_t r = ncclGetUniqueId(&id); r != ncclSuccess)
        throw DistError("ncclGetUniqueId failed for group " + spec.name + ": " + nccl_error(r, nullptr));
      spec.store->set("nccl_id", hex(&id, sizeof id));
    } else {
      // Within the collective timeout (not the store's), the peers polled meanwhile: a root that failed before
      // publishing the id ends this wait with its cause or a timeout naming the group.
      unhex(get_within(*spec.store, "nccl_id", spec.timeout, spec.poll, "the NCCL unique id of group " + spec.name), &id,
            sizeof id);
    }
    check_cuda(cudaStreamCreateWithFlags(&stream_.h, cudaStreamNonBlocking), "cudaStreamCreate");
    check_cuda(cudaEventCreateWithFlags(&ready_.h, cudaEventDisableTiming), "cudaEventCreate");
    // barrier()'s all-reduce operand: its value does not matter, but it is set once (no read of uninitialised
    // device memory, which compute-sanitizer's initcheck would report). Before the communicator: whatever throws
    // here leaves no initialised communicator behind (no destructor runs for a constructor that throws).
    check_cuda(cudaMalloc(&scratch_.h, sizeof(float)), "cudaMalloc");
    check_cuda(cudaMemset(scratch_.h, 0, sizeof(float)), "cudaMemset");
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;  // every call returns at once; wait() polls, so a timeout can abort
    ncclResult_t r = ncclCommInitRankConfig(&comm_, static_cast<int>(spec.ranks.size()), id, spec.index, &config);
    // From here on the constructor must not leave by an exception with comm_ alive: the peers would wait for it in
    // their next collective until the timeout. abort() is a no-op where wait_comm aborted already.
    try {
      if (r != ncclSuccess && r != ncclInProgress)
        throw CollectiveError(std::string("ncclCommInitRank: ") + nccl_error(r, comm_), false);
      wait_comm("ncclCommInitRank", spec.timeout, /*stream=*/false);
    } catch (...) {
      abort();
      throw;
    }
  }
  ~NcclCommunicator() override {
    if (comm_) {
      // A non-blocking communicator is finalized first (its pending work flushed, ncclInProgress until done), then
      // destroyed; one that does not finish within the group's timeout or kFinalizeWait, whichever is shorter, or
      // fails, is aborted (a destructor must not hang on a peer that is gone).
      bool finalized = false;
      const ncclResult_t started = aborted_ ? ncclInternalError : ncclCommFinalize(comm_);
      if (started == ncclSuccess || started == ncclInProgress) {  // non-blocking: usually ncclInProgress
        const auto wait = std::min<std::chrono::steady_clock::duration>(spec_.timeout, kFinalizeWait);
        const auto deadline = std::chrono::steady_clock::now() + wait;
        for (;;) {
          ncclResult_t state = ncclSuccess;
          if (ncclCommGetAsyncError(comm_, &state) != ncclSuccess) break;
          if (state == ncclSuccess) {
            finalized = true;
            break;
          }
          if (state != ncclInProgress || std::chrono::steady_clock::now() > deadline) break;
          std::this_thread::sleep_for(std::chrono::microseconds(50));
        }
      }
      if (finalized) ncclCommDestroy(comm_);
      else ncclCommAbort(comm_);
    }
    // scratch_, ready_ and stream_ go with their holders, after the communicator.
  }

  const char* backend() const override { return "nccl"; }
  Device device() const override { return Device::Cuda; }

  void all_reduce(Buffer buf, ReduceOp op, std::optional<Timeout> timeout) override {
    need_device(buf, "all_reduce");
    launch("ncclAllReduce", timeout, [&] {
      return ncclAllReduce(buf.data, buf.data, buf.count, nccl_type(buf.dtype), op == ReduceOp::Sum ? ncclSum : ncclMax,
                           comm_, stream_);
    });
  }
  void reduce_scatter(Buffer in, Buffer out, ReduceOp op, std::optional<Timeout> timeout) override {
    need_device(in, "reduce_scatter");
    need_device(out, "reduce_scatter");
    if (in.count != out.count * spec_.ranks.size() || in.dtype != out.dtype)
      throw CollectiveError("reduce_scatter: the input must hold group-size x output elements of the same type", false);
    launch("ncclReduceScatter", timeout, [&] {
      return ncclReduceScatter(in.data, out.data, out.count, nccl_type(in.dtype),
                               op == ReduceOp::Sum ? ncclSum : ncclMax, comm_, stream_);
    });
  }
  void all_gather(Buffer in, Buffer out, std::optional<Timeout> timeout) override {
    need_device(in, "all_gather");
    need_device(out, "all_gather");
    if (out.count != in.count * spec_.ranks.size() || in.dtype != out.dtype)
      throw CollectiveError("all_gather: the output must hold group-size x input elements of the same type", false);
    launch("ncclAllGather", timeout,
           [&] { return ncclAllGather(in.data, out.data, in.count, nccl_type(in.dtype), comm_, stream_); });
  }
  void broadcast(Buffer buf, int root, std::optional<Timeout> timeout) override {
    need_device(buf, "broadcast");
    launch("ncclBroadcast", timeout,
           [&] { return ncclBroadcast(buf.data, buf.data, buf.count, nccl_type(buf.dtype), root, comm_, stream_); });
  }
  // NCCL has no gather or scatter: the root's own block copied on the stream, then one NCCL group of point-to-point
  // calls (rooted()).
  void gather(Buffer in, Buffer out, int root, std::optional<Timeout> timeout) override {
    rooted("gather (ncclSend/ncclRecv)", in, out, root, /*to_root=*/true, timeout);
  }
  void scatter(Buffer in, Buffer out, int root, std::optional<Timeout> timeout) override {
    rooted("scatter (ncclSend/ncclRecv)", out, in, root, /*to_root=*/false, timeout);
  }
  void barrier(std::optional<Timeout> timeout) override {
    launch("barrier", timeout, [&] { return ncclAllReduce(scratch_, scratch_, 1, ncclFloat32, ncclSum, comm_, stream_); });
  }

  void set_timeout(Timeout t) override { spec_.timeout = t; }
  void abandon() override { abort(); }

 private:
  static void need_device(const Buffer& b, const char* op) {
    if (b.device != Device::Cuda)
      throw CollectiveError(std::string(op) + ": the nccl communicator needs device (CUDA) buffers", false);
  }
  static bool ok(ncclResult_t r) { return r == ncclSuccess || r == ncclInProgress; }
  // Gather (to_root: every member's `mine` into block i of root's `whole`) or scatter (block i of root's `whole`
  // into member i's `mine`): the root's own block by a copy on the stream, the others by ncclSend/ncclRecv pairs
  // in one NCCL group. `whole` is used on the root only.
  void rooted(const char* what, Buffer mine, Buffer whole, int root, bool to_root, std::optional<Timeout> timeout) {
    need_device(mine, what);
    const bool at_root = spec_.index == root;
    const size_t n = spec_.ranks.size(), bytes = mine.bytes();
    if (at_root) {
      need_device(whole, what);
      if (whole.count != mine.count * n || whole.dtype != mine.dtype)
        throw CollectiveError(std::string(what) + ": the root's buffer must hold group-size x " +
                                  std::to_string(mine.count) + " elements of the same type",
                              false);
    }
    const ncclDataType_t type = nccl_type(mine.dtype);
    auto block = [&](size_t i) { return static_cast<char*>(whole.data) + i * bytes; };
    auto p2p = [&](void* buf, int peer) {
      return to_root == at_root ? ncclRecv(buf, mine.count, type, peer, comm_, stream_)
                                : ncclSend(buf, mine.count, type, peer, comm_, stream_);
    };
    launch(what, timeout, [&]() -> ncclResult_t {
      if (at_root) {
        char* own = block(static_cast<size_t>(root));
        check_cuda(cudaMemcpyAsync(to_root ? own : mine.data, to_root ? mine.data : own, bytes,
                                   cudaMemcpyDeviceToDevice, stream_),
                   what);
      }
      if (ncclResult_t s = ncclGroupStart(); s != ncclSuccess) return s;
      ncclResult_t r = at_root ? ncclSuccess : p2p(mine.data, root);
      for (size_t i = 0; at_root && i < n && ok(r); ++i)
        if (static_cast<int>(i) != root) r = p2p(block(i), static_cast<int>(i));
      const ncclResult_t end = ncclGroupEnd();  // closed even after a failed call
      return ok(r) ? end : r;
    });
  }

  template <class F>
  void launch(const char* what, std::optional<Timeout> timeout, F&& f) {
    if (aborted_) throw CollectiveError(std::string(what) + ": the communicator was aborted after an earlier failure", false);
    check_cuda(cudaSetDevice(device_), "cudaSetDevice");
    // The private stream is non-blocking: it does not wait for the legacy default stream, where the kernels and
    // copies that fill the buffer run (a cudaMemcpy from pageable host memory may even return before its DMA has
    // landed). It waits for everything issued there so far.
    check_cuda(cudaEventRecord(ready_, cudaStreamLegacy), what);
    check_cuda(cudaStreamWaitEvent(stream_, ready_, 0), what);
    ncclResult_t r = f();
    if (!ok(r)) {
      const std::string why = nccl_error(r, comm_);
      abort();  // a call that failed may leave the communicator half way through: no later collective on it
      throw CollectiveError(std::string(what) + ": " + why, false);
    }
    wait_comm(what, timeout ? *timeout : spec_.timeout, /*stream=*/true);
  }

  // Polls until the communicator and (optionally) the stream are done; aborts the communicator on an
  // asynchronous error or when `timeout` passes.
  void wait_comm(const char* what, Timeout timeout, bool stream) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      ncclResult_t state = ncclSuccess;
      const ncclResult_t asked = ncclCommGetAsyncError(comm_, &state);
      if (asked != ncclSuccess) state = asked;  // the query itself failed: as an error, never as "done"
      if (state != ncclSuccess && state != ncclInProgress) {
        const std::string why = nccl_error(state, comm_);
        abort();
        throw CollectiveError(std::string(what) + ": " + why, false);
      }
      if (state == ncclSuccess) {
        if (!stream) return;
        cudaError_t q = cudaStreamQuery(stream_);
        if (q == cudaSuccess) return;
        if (q != cudaErrorNotReady) check_cuda(q, what);
      }
      if (spec_.poll && std::chrono::steady_clock::now() > next_poll_) {
        next_poll_ = std::chrono::steady_clock::now() + std::chrono::milliseconds(250);
        try {
          spec_.poll();
        } catch (...) {
          abort();
          throw;
        }
      }
      if (std::chrono::steady_clock::now() > deadline) {
        abort();
        throw CollectiveError(std::string(what) + ": timed out after " + seconds_text(timeout),
                              true);
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  void abort() {
    if (!aborted_ && comm_) ncclCommAbort(comm_);
    aborted_ = true;
    comm_ = nullptr;
  }

  CommSpec spec_;
  int device_ = 0;
  ncclComm_t comm_ = nullptr;
  CudaOwned<cudaStream_t, cudaStreamDestroy> stream_;
  CudaOwned<cudaEvent_t, cudaEventDestroy> ready_;
  CudaOwned<void*, cudaFree> scratch_;
  bool aborted_ = false;
  std::chrono::steady_clock::time_point next_poll_{};
};

}  // namespace

std::shared_ptr<Communicator> make_nccl_communicator(const CommSpec& spec) {
  return std::make_shared<NcclCommunicator>(spec);
}

void* device_alloc(size_t bytes, int local_rank) {
  if (cudaSetDevice(device_for(local_rank)) != cudaSuccess) throw DistError("cudaSetDevice failed");
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, bytes);
  if (e != cudaSuccess) {
    ignore_cuda(e);  // reported here, not again by the next kernel's launch check
    throw DistError("cudaMalloc of " + std::to_string(bytes) + " bytes failed: " + cudaGetErrorString(e));
  }
  return p;
}
void device_free(void* p) { ignore_cuda(cudaFree(p)); }
void copy_to_device(void* dst, const void* src, size_t bytes) {
  if (cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice) != cudaSuccess) throw DistError("cudaMemcpy to the device failed");
}
void copy_to_host(void* dst, const void* src, size_t bytes) {
  if (cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost) != cudaSuccess) throw DistError("cudaMemcpy to the host failed");
}

#else  // !MR_HAVE_CUDA

std::string nccl_unavailable(int) {
#ifdef MR_NCCL_NOT_FOUND
  return "megatron-run was built with CUDA but without NCCL (nccl.h / libnccl were not found when it was configured)";
#else
  return "megatron-run was built without CUDA";
#endif
}

int gpu_count() { return 0; }

std::shared_ptr<Communicator> make_nccl_communicator(const CommSpec&) {
  throw DistError("the nccl backend is not available: megatron-run was built without CUDA");
}
void* device_alloc(size_t, int) { throw DistError("no device memory: megatron-run was built without CUDA"); }
void device_free(void*) {}
void copy_to_device(void*, const void*, size_t) { throw DistError("built without CUDA"); }
void copy_to_host(void*, const void*, size_t) { throw DistError("built without CUDA"); }

#endif

}  // namespace mr::distributed
