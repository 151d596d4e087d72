// The rendezvous store: LibTorch's c10d::TCPStore (the store torchrun uses), behind a torch-free interface.
// Rank 0 hosts it, or torchrun's agent does (TORCHELASTIC_USE_AGENT_STORE=True: every worker is a client and
// the keys live under /worker/attempt_<restart count>/).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "distributed/collectives.h"
#include "launch/launch_env.h"

namespace mr::distributed {

class Store {
 public:
  struct Options {
    std::string host = "127.0.0.1";
    int port = launch::kTorchrunMasterPort;
    bool is_server = false;
    std::chrono::milliseconds timeout{std::chrono::minutes(10)};  // connecting, and blocking operations
    std::string prefix;  // a c10d::PrefixStore prefix ("" for none), e.g. "/worker/attempt_0"
    // What picks `port`, named in the advice when the port is taken: the launcher's option or the variable.
    std::string port_setting = "--master-port or MASTER_PORT";
    // How `port` was derived when no setting gave it (SLURM's job id: "20000 + ..., since MASTER_PORT is unset"),
    // named beside the port when it is taken; "" when a setting gave it.
    std::string port_from;
    // What gave `host`, named when it does not resolve ("MASTER_ADDR", "SLURM_JOB_NODELIST (its first host)").
    std::string host_setting = "MASTER_ADDR";
  };

  // Connects (or hosts and connects). Throws DistError with a clear message: port in use, master unreachable. A host
  // name that does not resolve is waited for first (within `timeout`; a cluster's DNS may publish it late), with a
  // notice every launch::wait_notice_period() naming the resolver's words, and the error at the timeout says so.
  static std::shared_ptr<Store> connect(const Options& opts);
  virtual ~Store() = default;

  virtual void set(const std::string& key, const std::string& value) = 0;
  virtual std::string get(const std::string& key) = 0;  // blocks up to the store's timeout
  virtual int64_t add(const std::string& key, int64_t delta) = 0;
  virtual bool check(const std::vector<std::string>& keys) = 0;
  std::optional<std::string> try_get(const std::string& key) {
    if (!check({key})) return std::nullopt;
    return get(key);
  }
  // A view of the same store with `prefix` prepended to every key (c10d::PrefixStore).
  virtual std::shared_ptr<Store> with_prefix(const std::string& prefix) = 0;
  // The c10d store (a c10::intrusive_ptr<c10d::Store>*), for backends built on LibTorch.
  virtual void* native() = 0;
  const Options& options() const { return opts_; }

 protected:
  Options opts_;
};

// A key another rank sets (the NCCL unique id a group's root publishes), waited for at most `timeout` (the
// collective timeout, --distributed-timeout-minutes or MR_DIST_TIMEOUT_S) rather than the store's own, with
// `poll` (may be empty) called between tries so that a gone peer or another rank's abort ends the wait early
// (its CollectiveError goes on as it is). Past the bound: a CollectiveError naming `what`, the key and
// the bound. lib/distributed/store_wait.cpp.
std::string get_within(Store& store, const std::string& key, Timeout timeout, const std::function<void()>& poll,
                       const std::string& what);

// Backends (lib/distributed/torch_backend.cpp, lib/distributed/nccl.cpp).
struct CommSpec {
  std::shared_ptr<Store> store;  // already prefixed for this group
  std::vector<int> ranks;        // global ranks, sorted
  int index = 0;                 // this rank's position in `ranks`
  Timeout timeout{std::chrono::minutes(10)};
  std::string name;              // for messages: "tp [0, 1]"
  std::string master_addr;       // picks Gloo's network device (launch::gloo_device: loopback for a loopback master,
                                 // else the address of the interface that reaches it)
  bool other_nodes = false;      // the job has ranks on other nodes (WORLD_SIZE > LOCAL_WORLD_SIZE)
  int local_rank = 0;            // picks the GPU
  // Called now and then while a device collective is in flight (NCCL): throws CollectiveError when a member is
  // gone or another rank has aborted the job, so that a dead peer cannot hang us until the timeout.
  std::function<void()> poll;
};
std::shared_ptr<Communicator> make_gloo_communicator(const CommSpec& spec);
std::shared_ptr<Communicator> make_nccl_communicator(const CommSpec& spec);  // throws without CUDA
std::shared_ptr<Communicator> make_local_communicator(Device device);        // a group of one rank
std::string libtorch_version();  // the LibTorch this was built with, e.g. "1.13.0"
int gpu_count();  // 0 when built without CUDA or without a usable GPU
bool built_with_cuda();
// What keeps the nccl backend from running `local_ranks` ranks on this machine, in words naming the missing
// piece (a build without CUDA or NCCL, no CUDA driver, no visible GPU, fewer GPUs than local ranks, an NCCL
// runtime that does not answer); empty when nothing does. Quick: no communicator is created, nothing can hang.
std::string nccl_unavailable(int local_ranks);
// Device memory for NCCL buffers (tests, the self-check); throw DistError without CUDA.
void* device_alloc(size_t bytes, int local_rank);
void device_free(void* p);
void copy_to_device(void* dst, const void* src, size_t bytes);
void copy_to_host(void* dst, const void* src, size_t bytes);

}  // namespace mr::distributed
