// The distributed runtime of one rank: rendezvous through the c10d TCPStore, a config check across ranks,
// a heartbeat and abort watchdog, and one communicator per process group this rank belongs to (Megatron's
// layout, lib/parallel/layout.h). Torch-free interface.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "config/args.h"
#include "distributed/collectives.h"
#include "launch/launch_env.h"
#include "parallel/layout.h"
#include "distributed/store.h"

namespace mr::distributed {

// The layout and the launch contract, as the runtime uses them.
using launch::LaunchInfo;
using parallel::GroupSet;
using parallel::Layout;
using parallel::LayoutError;
using parallel::LayoutSpec;
using parallel::RankList;

struct RuntimeOptions {
  LaunchInfo launch;
  LayoutSpec layout;                  // world_size is taken from `launch`
  // --distributed-backend as the worker resolved it (its own fallback to gloo where nccl cannot run); no default
  // of its own: a Runtime refuses options without it.
  std::optional<arg::DistributedBackend> backend;
  Timeout timeout{std::chrono::minutes(10)};  // rendezvous, communicator creation, collectives
  std::chrono::milliseconds heartbeat{1000};  // heartbeat and abort-check period
  // A peer whose heartbeat has not changed for this long, or a store that has not answered for this long, fails
  // the job (the watchdog publishes a verdict naming the silent rank and exits). At least 2 x heartbeat.
  std::chrono::milliseconds heartbeat_timeout{30000};
  std::string heartbeat_source = "--heartbeat-timeout";  // where heartbeat_timeout came from, for the messages
  std::string fingerprint = "{}";     // config_fingerprint() of the resolved arguments
  // The arguments validation derived and the user did not set, with how (named as such when ranks differ).
  std::map<std::string, std::string> derived_args;
  bool gloo_groups = true;            // with nccl: Gloo communicators for the DP groups, as Megatron creates
};

// The port of the store rank 0 hosts when torchrun's agent store cannot be used: MASTER_PORT + 1, derived the
// same way on every rank. Throws DistError for MASTER_PORT 65535.
int fallback_store_port(int master_port);

class Runtime {
 public:
  // Connects to the store, checks that every rank runs the same config, starts the watchdog and creates the
  // communicators. Throws DistError (the message names what is wrong: the missing rank, the differing flags).
  explicit Runtime(RuntimeOptions opts);
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  int rank() const { return opts_.launch.rank; }
  int world_size() const { return opts_.launch.world_size; }
  arg::DistributedBackend backend() const { return *opts_.backend; }
  const Layout& layout() const { return layout_; }
  const RuntimeOptions& options() const { return opts_; }

  // The group of a kind ("tp", "dp-cp", ..., or "world") this rank belongs to; nullptr if none.
  Group* find_group(const std::string& kind);
  Group& group(const std::string& kind);  // throws DistError if this rank has none of that kind
  std::vector<std::string> group_kinds() const;  // the kinds this rank belongs to, in creation order
  size_t communicator_count() const { return comms_.size(); }

  // Orderly end: every rank reports it is done; the store's host waits for them before the store goes away.
  void finish();

  // The default timeout of every collective from now on (--distributed-timeout-seconds-after-init, applied once
  // the bring-up has passed). Main thread, between collectives.
  void set_timeout(Timeout t);
  Timeout collective_timeout() const { return collective_timeout_; }
  // The ranks this rank's watchdog watches (the next two in rank order, wrapping; fewer in a smaller job).
  std::vector<int> watched_ranks() const;

  // After a collective failed: which member is gone? Publishes the verdict so the other ranks stop too,
  // and returns the error to throw.
  DistError diagnose(const Group& g, const char* op, const CollectiveError& e);
  // Publishes a failure of this rank (the others exit with it) and returns the error to throw.
  DistError fail(const std::string& message);

 private:
  void rendezvous();
  void create_groups();
  void start_watchdog();
  void stop_watchdog();
  std::shared_ptr<Communicator> communicator_for(const RankList& ranks, Device device);
  template <class Pred, class OnTimeout>
  void wait_until(Pred pred, std::chrono::steady_clock::time_point deadline, OnTimeout on_timeout);
  std::string store_owner() const;  // "rank 0" or "torchrun's agent"
  // Connects to torchrun's agent store and probes it (see probe_store in runtime.cpp, bounded by 5 s);
  // nullptr when it cannot be used (another TCPStore protocol), after logging the fallback.
  std::shared_ptr<Store> connect_agent_store(const Store::Options& so);
  // After a verdict: counts this rank as having seen it; the store's host instead waits (bounded) until every
  // other rank has, before it exits and its store disappears.
  void linger_for_verdict(Store& s);
  void check_peers(const RankList& ranks);  // CommSpec::poll: throws CollectiveError for a silent member
  // Counts a silent rank into abort-seen once, whoever finds it (it never counts itself).
  void count_silent(Store& s, int r);

  RuntimeOptions opts_;
  Layout layout_;
  std::shared_ptr<Store> store_;     // main thread
  std::shared_ptr<Store> hb_store_;  // watchdog thread (its own connection)
  std::vector<std::unique_ptr<Group>> groups_;
  std::map<std::pair<RankList, int>, std::shared_ptr<Communicator>> comms_;
  std::thread watchdog_;
  std::thread monitor_;  // watches the watchdog: exits when the store has not answered for heartbeat_timeout
  // steady_clock nanoseconds of the watchdog's last completed round trip to the store
  std::atomic<int64_t> store_ok_ns_{0};
  Timeout collective_timeout_{};
  std::atomic<bool> stop_{false};
  std::atomic<bool> aborting_{false};  // this rank is publishing its own verdict
  bool finished_ = false;
  struct Seen {
    std::string beat;
    std::chrono::steady_clock::time_point since;
  };
  std::map<int, Seen> seen_;
  std::chrono::steady_clock::time_point last_peer_check_{};
};

}  // namespace mr::distributed
