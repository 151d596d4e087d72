#include "distributed/runtime.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <future>
#include <thread>
#include <set>

#include "config/schema.h"
#include "distributed/runtime_internal.h"
#include "launch/worker_input.h"
#include "util/log.h"
#include "util/text.h"

namespace mr::distributed {

using namespace mr::launch;  // the worker input and the launch contract

namespace detail {

std::string measured_seconds(std::chrono::milliseconds ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", static_cast<double>(ms.count()) / 1000.0);
  return buf;
}

std::string list_words(const std::vector<int>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size(); ++i)
    s += (i == 0 ? "" : i + 1 == ranks.size() ? " and " : ", ") + std::to_string(ranks[i]);
  return s;
}

// One field of the value a rank published at the rendezvous ("<hash> world_size=4 host=h pid=1 boot=b").
std::string rdzv_field(const std::string& rdzv, const char* name) {
  size_t at = rdzv.find(std::string(" ") + name + "=");
  if (at == std::string::npos) return "";
  at += std::strlen(name) + 2;
  return rdzv.substr(at, rdzv.find(' ', at) - at);
}

// This machine's boot id and this process's pid namespace: with the host name they tell whether another rank's
// pid is one this process can see (two containers can share a host name and a boot id, not a pid namespace).
std::string this_boot_id() {
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::string id;
  f >> id;
  return id;
}
std::string this_pid_namespace() {
  char buf[64] = {0};
  const ssize_t n = readlink("/proc/self/ns/pid", buf, sizeof buf - 1);
  if (n <= 0) return "";
  std::string ns(buf, static_cast<size_t>(n));  // "pid:[4026531836]"
  const size_t a = ns.find('['), b = ns.find(']');
  return a == std::string::npos || b == std::string::npos ? "" : ns.substr(a + 1, b - a - 1);
}

}  // namespace detail

using namespace detail;  // the runtime's shared helpers (runtime_internal.h)

namespace {

std::string ranks_str(const std::vector<int>& r) {
  std::string s = "[";
  for (size_t i = 0; i < r.size(); ++i) s += (i ? ", " : "") + std::to_string(r[i]);
  return s + "]";
}

// The peer closed or reset the connection (as opposed to refusing it or not answering): what a TCPStore server
// of another protocol generation does to our client (PyTorch 2.x servers drop 1.13 clients, which send no
// validation handshake; 1.13 servers drop 2.x clients, whose handshake they do not understand).
bool connection_dropped(const std::string& m) {
  for (const char* s : {"reset by peer", "Broken pipe", "closed by peer", "Connection closed", "ECONNRESET", "EPIPE",
                        "errno: 104", "errno: 32"})
    if (m.find(s) != std::string::npos) return true;
  return false;
}

// How long the probe of torchrun's agent store may take: a store of our protocol answers within milliseconds,
// one of another protocol generation never answers right.
constexpr std::chrono::seconds kProbeBound{5};

// The probe of torchrun's agent store: on a connection of its own, a check of a key nobody wrote (must answer
// "absent"), a set, and a check of that key (must answer "present"). A store of our protocol answers at once.
// A PyTorch 2.x server answers a LibTorch 1.13 client's first check with 8 bytes of an unrelated reply (read as
// "present"), stalls forever on its set (taken for a malformed handshake) or closes the connection, whatever the
// rank, so every rank reaches the same verdict. Returns "" when the store answered right, else why not. Bounded
// by kProbeBound: a stalled request is abandoned on a detached thread (the client cannot be interrupted).
std::string probe_store(Store::Options so, int rank) {
  so.timeout = std::min<Timeout>(so.timeout, kProbeBound);
  auto result = std::make_shared<std::promise<std::string>>();
  std::future<std::string> answer = result->get_future();
  std::thread([so, rank, result] {
    std::string why;
    try {
      std::shared_ptr<Store> probe = Store::connect(so);
      const std::string key = "mr/probe/" + std::to_string(rank) + "/" + std::to_string(::getpid());
      if (probe->check({key + "/never-written"}))
        why = "it reported a key nobody wrote as present";
      else {
        probe->set(key, "1");
        if (!probe->check({key})) why = "it reported a key just written as absent";
      }
    } catch (const std::exception& e) {
      why = e.what();
      if (why.empty()) why = "the probe failed";
    }
    result->set_value(why);
  }).detach();
  if (answer.wait_for(so.timeout) != std::future_status::ready)
    return "it did not answer a probe within " + seconds_text(so.timeout);
  return answer.get();
}

// When rank 0 runs on this machine, in this pid namespace, but was started by another process than this rank
// (two launchers, a launcher and a shell, or one wrapper per rank): the words that say both readings, one job
// given different arguments or two jobs that met in one store (MASTER_PORT the same), else "". Rank 0's
// rendezvous value is waited for a moment (it follows its config).
std::string other_job_hint(Store& store, const LaunchInfo& L, const std::string& host) {
  std::optional<std::string> zero;
  for (int i = 0; i < 40 && !(zero = store.try_get("rdzv/0")); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  if (!zero || rdzv_field(*zero, "host") != host || rdzv_field(*zero, "boot") != this_boot_id() ||
      rdzv_field(*zero, "pidns") != this_pid_namespace())
    return "";
  const std::string parent = rdzv_field(*zero, "ppid"), mine = std::to_string(getppid());
  if (parent.empty() || parent == mine) return "";
  return " (rank 0, pid " + rdzv_field(*zero, "pid") + ", was started by pid " + parent + ", this rank by pid " +
         mine + ": meant as one job, they were given different arguments; if they are two jobs, both use the store "
         "at " + L.master_addr + ":" + std::to_string(L.master_port) + " and need a MASTER_PORT each)";
}

}  // namespace

int fallback_store_port(int master_port) {
  if (master_port >= 65535)
    throw DistError("cannot fall back to a store hosted by rank 0: it would use MASTER_PORT + 1, but MASTER_PORT is " +
                    std::to_string(master_port));
  return master_port + 1;
}

std::shared_ptr<Store> Runtime::connect_agent_store(const Store::Options& so) {
  const LaunchInfo& L = opts_.launch;
  const std::string where = L.master_addr + ":" + std::to_string(L.master_port);
  std::string why;
  std::shared_ptr<Store> store;
  try {
    // Connecting is bounded by the job's timeout as before (an unreachable agent is an error, not a fallback).
    store = Store::connect(so);
  } catch (const DistError& e) {
    why = e.what();
    if (!connection_dropped(why)) throw;
  }
  if (store) {
    why = probe_store(so, L.rank);
    if (why.empty()) return store;
  }
  const int port = fallback_store_port(L.master_port);
  std::string line = "torchrun's agent store at " + where + " is unusable (" + why +
                     "): its PyTorch probably speaks another TCPStore protocol than the LibTorch " + libtorch_version() +
                     " megatron-run-worker was built with; falling back to a store hosted by rank 0 on " +
                     L.master_addr + ":" + std::to_string(port) + " (MASTER_PORT + 1)";
  if (L.rank == 0)
    MR_LOG(warning) << line;
  else
    MR_LOG(info) << line;
  return nullptr;
}

// ---- Group ------------------------------------------------------------------------------------------------

std::string Group::describe() const { return kind_ + " " + ranks_str(ranks_); }

Communicator& Group::pick(const char* op, Device d) {
  Communicator* c = communicator(d);
  if (!c)
    throw DistError(std::string(op) + " on " + describe() + ": no communicator for " +
                    (d == Device::Cpu ? "host buffers (with the nccl backend only the data-parallel groups have Gloo "
                                        "communicators; pass device buffers)"
                                      : "device buffers (the gloo backend is in use; pass host buffers or choose "
                                        "--distributed-backend nccl)"));
  return *c;
}

template <class F>
void Group::run(const char* op, Device d, F&& f) {
  Communicator& c = pick(op, d);
  try {
    f(c);
  } catch (const CollectiveError& e) {
    throw rt_->diagnose(*this, op, e);
  }
}

void Group::all_reduce(Buffer buf, ReduceOp op, std::optional<Timeout> timeout) {
  run("all_reduce", buf.device, [&](Communicator& c) { c.all_reduce(buf, op, timeout); });
}
void Group::reduce_scatter(Buffer in, Buffer out, ReduceOp op, std::optional<Timeout> timeout) {
  run("reduce_scatter", in.device, [&](Communicator& c) { c.reduce_scatter(in, out, op, timeout); });
}
void Group::all_gather(Buffer in, Buffer out, std::optional<Timeout> timeout) {
  run("all_gather", in.device, [&](Communicator& c) { c.all_gather(in, out, timeout); });
}
void Group::check_root(const char* op, int root) const {
  if (root < 0 || root >= size())
    throw DistError(std::string(op) + " on " + describe() + ": root " + std::to_string(root) +
                    " is not an index in the group");
}
void Group::broadcast(Buffer buf, int root, std::optional<Timeout> timeout) {
  check_root("broadcast", root);
  run("broadcast", buf.device, [&](Communicator& c) { c.broadcast(buf, root, timeout); });
}
void Group::gather(Buffer in, Buffer out, int root, std::optional<Timeout> timeout) {
  check_root("gather", root);
  run("gather", in.device, [&](Communicator& c) { c.gather(in, out, root, timeout); });
}
void Group::scatter(Buffer in, Buffer out, int root, std::optional<Timeout> timeout) {
  check_root("scatter", root);
  run("scatter", out.device, [&](Communicator& c) { c.scatter(in, out, root, timeout); });
}
void Group::barrier(std::optional<Timeout> timeout) {
  Device d = cpu_ ? Device::Cpu : Device::Cuda;
  run("barrier", d, [&](Communicator& c) { c.barrier(timeout); });
}

// ---- Runtime ----------------------------------------------------------------------------------------------

Runtime::Runtime(RuntimeOptions opts) : opts_(std::move(opts)) {
  opts_.layout.world_size = opts_.launch.world_size;
  collective_timeout_ = opts_.timeout;
  if (opts_.heartbeat.count() < 1 || opts_.heartbeat_timeout < opts_.heartbeat * 2)
    throw DistError("the heartbeat timeout (" + seconds_text(opts_.heartbeat_timeout) +
                    ") must be at least twice the heartbeat period (" + seconds_text(opts_.heartbeat) + ")");
  try {
    layout_ = Layout::build(opts_.layout);
  } catch (const LayoutError& e) {
    throw DistError(std::string("process-group layout: ") + e.what());
  }
  if (!opts_.backend) throw DistError("no distributed backend given (RuntimeOptions::backend: gloo or nccl)");

  const LaunchInfo& L = opts_.launch;
  Store::Options so;
  so.host = L.master_addr;
  so.port = L.master_port;
  so.is_server = !L.agent_store && L.rank == 0;
  so.timeout = opts_.timeout;
  so.port_setting = launch::master_port_setting(L);
  so.port_from = L.master_port_from;
  so.host_setting = launch::master_addr_setting(L);
  if (L.agent_store) so.prefix = "/worker/attempt_" + L.restart_count;
  if (L.agent_store) {
    store_ = connect_agent_store(so);  // nullptr: the agent's store cannot be used, fall back to our own
    if (!store_) {
      // From here on the job runs as under our own spawner: rank 0 hosts the store, on MASTER_PORT + 1.
      opts_.launch.agent_store = false;
      opts_.launch.master_port = so.port = fallback_store_port(L.master_port);
      so.is_server = L.rank == 0;
      try {
        store_ = Store::connect(so);
      } catch (const DistError& e) {
        throw DistError(std::string("the fallback store (MASTER_PORT + 1, hosted by rank 0): ") + e.what());
      }
    }
  } else {
    store_ = Store::connect(so);
  }
  so.is_server = false;
  hb_store_ = Store::connect(so);
  store_ = store_->with_prefix("mr");
  hb_store_ = hb_store_->with_prefix("mr");

  try {
    try {
      rendezvous();
    } catch (const DistError& e) {
      std::string m = e.what();
      if (L.agent_store && (m.find("reset by peer") != std::string::npos || m.find("Broken pipe") != std::string::npos))
        throw DistError("torchrun's agent store at " + L.master_addr + ":" + std::to_string(L.master_port) +
                        " dropped our connection (" + m + "). Its PyTorch probably speaks a newer TCPStore protocol "
                        "than the LibTorch " + libtorch_version() + " megatron-run-worker was built with: build "
                        "megatron-run against the PyTorch that provides torchrun (-DTorch_DIR=...), see "
                        "docs/distributed.md");
      throw;
    }
    start_watchdog();
    create_groups();
  } catch (...) {
    stop_watchdog();
    throw;
  }
}

Runtime::~Runtime() {
  stop_watchdog();
  groups_.clear();
  // Not finished: this rank is leaving on an error (an exception unwinding through here, finish() never reached)
  // while its peers may sit in their next collective. Its communicators must not wait for them (an NCCL finalize
  // needs every peer): abandoned, so the rank's own failure is said and the process ends at once.
  if (!finished_ && !aborting_)
    for (auto& [key, c] : comms_)
      if (c) c->abandon();
  if (aborting_) {
    // A collective was abandoned (timed out, or a peer is gone): its backend thread may still be blocked in it,
    // and tearing the communicator down would wait for that thread (Gloo joins its workers), possibly until the
    // backend's own timeout. The process is about to exit with the verdict; leave the communicators to it.
    auto* leaked = new std::vector<std::shared_ptr<Communicator>>();
    for (auto& [key, c] : comms_) leaked->push_back(std::move(c));
  }
  comms_.clear();
}

std::string Runtime::store_owner() const { return opts_.launch.agent_store ? "torchrun's agent" : "rank 0"; }

template <class Pred, class OnTimeout>
void Runtime::wait_until(Pred pred, Clock::time_point deadline, OnTimeout on_timeout) {
  auto pause = std::chrono::milliseconds(20);
  for (;;) {
    if (auto a = store_->try_get(kAbort)) {
      linger_for_verdict(*store_);
      throw DistError("stopping: " + *a);
    }
    if (pred()) return;
    if (Clock::now() > deadline) throw fail(on_timeout());  // published: the others stop with the same message
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(200));
  }
}

void Runtime::rendezvous() {
  const LaunchInfo& L = opts_.launch;
  const int world = L.world_size;
  const auto deadline = Clock::now() + opts_.timeout;
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  if (L.rank == 0) store_->set("config", opts_.fingerprint);
  char hash[32];
  std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(fingerprint_hash(opts_.fingerprint)));
  store_->set("rdzv/" + std::to_string(L.rank), std::string(hash) + " world_size=" + std::to_string(world) +
                                                    " host=" + host + " pid=" + std::to_string(getpid()) +
                                                    " ppid=" + std::to_string(getppid()) + " boot=" + this_boot_id() +
                                                    " pidns=" + this_pid_namespace());
  int64_t arrived = store_->add("arrived", 1);
  MR_LOG(debug) << "rendezvous: " << L.describe() << ", " << arrived << " rank(s) arrived";

  // Everyone runs rank 0's config (which includes the world size)?
  std::string reference;
  wait_until([&] { return store_->check({"config"}); }, deadline, [&] {
    return "rank 0 never published its config within " + seconds_text(opts_.timeout) + " (is rank 0 running?)";
  });
  reference = store_->get("config");
  if (reference != opts_.fingerprint) {
    std::vector<std::string> diff = fingerprint_diff(opts_.fingerprint, reference);
    Value mine = Value::parse_json(opts_.fingerprint), theirs = Value::parse_json(reference);
    auto lookup = [](const Value& obj, const std::string& k) -> std::string {
      for (const auto& [key, v] : obj.as_object())
        if (key == k) return v.json();
      return "(absent)";
    };
    std::string msg;
    const std::string world_size(dest_of(ArgId::world_size));
    if (std::find(diff.begin(), diff.end(), world_size) != diff.end())
      msg = "rank " + std::to_string(L.rank) + " was started with world size " + lookup(mine, world_size) +
            " but rank 0 with " + lookup(theirs, world_size) + " (WORLD_SIZE differs between ranks)";
    else
      msg = "rank " + std::to_string(L.rank) + " resolved a different config than rank 0";
    msg += "; differing arguments:" +
           fingerprint_differences(L.rank, opts_.fingerprint, reference, opts_.derived_args);
    throw fail(msg + other_job_hint(*store_, L, host));
  }

  // Everyone arrived?
  int64_t count = 0;
  wait_until(
      [&] {
        count = store_->add("arrived", 0);
        if (count > world)
          throw fail(std::to_string(count) + " ranks joined a job of world size " + std::to_string(world) +
                     ": ranks disagree on WORLD_SIZE, or two jobs share MASTER_ADDR:MASTER_PORT");
        return count == world;
      },
      deadline, [&] {
        std::vector<int> missing;
        for (int r = 0; r < world; ++r)
          if (!store_->check({"rdzv/" + std::to_string(r)})) missing.push_back(r);
        return std::string(missing.size() == 1 ? "rank " : "ranks ") + list_words(missing) + " never arrived (" +
               std::to_string(count) + " of " + std::to_string(world) + " joined within " + seconds_text(opts_.timeout) +
               ")";
      });
}

void Runtime::set_timeout(Timeout t) {
  collective_timeout_ = t;
  for (auto& [key, c] : comms_) c->set_timeout(t);
}

std::shared_ptr<Communicator> Runtime::communicator_for(const RankList& ranks, Device device) {
  auto key = std::make_pair(ranks, static_cast<int>(device));
  if (auto it = comms_.find(key); it != comms_.end()) return it->second;
  std::shared_ptr<Communicator> c;
  if (ranks.size() == 1 && device == Device::Cpu) {
    c = make_local_communicator(device);
  } else {
    CommSpec spec;
    std::string id;
    for (size_t i = 0; i < ranks.size(); ++i) id += (i ? "," : "") + std::to_string(ranks[i]);
    spec.store = store_->with_prefix(std::string(device == Device::Cpu ? "gloo/" : "nccl/") + id);
    spec.ranks = ranks;
    spec.index = static_cast<int>(std::find(ranks.begin(), ranks.end(), rank()) - ranks.begin());
    spec.timeout = collective_timeout_;
    spec.name = ranks_str(ranks);
    spec.master_addr = opts_.launch.master_addr;
    spec.other_nodes = opts_.launch.world_size > opts_.launch.local_world_size;
    spec.local_rank = opts_.launch.local_rank;
    if (device == Device::Cuda) spec.poll = [this, ranks] { check_peers(ranks); };
    c = device == Device::Cpu ? make_gloo_communicator(spec) : make_nccl_communicator(spec);
  }
  comms_[key] = c;
  return c;
}

void Runtime::create_groups() {
  const bool nccl = *opts_.backend == arg::DistributedBackend::nccl;
  // Megatron creates Gloo groups for the data-parallel kinds only (use_gloo_process_groups).
  static const std::set<std::string> gloo_kinds = {"dp", "dp-cp", "intra-dp-cp", "expert-dp", "intra-expert-dp", "world"};
  std::vector<std::pair<std::string, RankList>> mine;
  RankList all(static_cast<size_t>(world_size()));
  for (int r = 0; r < world_size(); ++r) all[static_cast<size_t>(r)] = r;
  mine.emplace_back("world", all);
  for (const GroupSet& s : layout_.sets)
    if (const RankList* g = s.find(rank())) mine.emplace_back(s.name, *g);
  for (auto& [kind, ranks] : mine) {
    auto g = std::make_unique<Group>();
    g->rt_ = this;
    g->kind_ = kind;
    g->ranks_ = ranks;
    g->index_ = static_cast<int>(std::find(ranks.begin(), ranks.end(), rank()) - ranks.begin());
    try {
      if (nccl) {
        g->gpu_ = communicator_for(ranks, Device::Cuda);
        if (opts_.gloo_groups && gloo_kinds.count(kind)) g->cpu_ = communicator_for(ranks, Device::Cpu);
      } else {
        g->cpu_ = communicator_for(ranks, Device::Cpu);
      }
    } catch (const CollectiveError& e) {
      throw diagnose(*g, "creating the communicator of", e);
    }
    MR_LOG(debug) << "group " << g->describe() << ": " << (g->gpu_ ? "nccl" : "") << (g->gpu_ && g->cpu_ ? "+" : "")
                  << (g->cpu_ ? g->cpu_->backend() : "");
    groups_.push_back(std::move(g));
  }
}

Group* Runtime::find_group(const std::string& kind) {
  for (auto& g : groups_)
    if (g->kind() == kind) return g.get();
  return nullptr;
}

Group& Runtime::group(const std::string& kind) {
  if (Group* g = find_group(kind)) return *g;
  throw DistError("rank " + std::to_string(rank()) + " belongs to no '" + kind + "' group");
}

std::vector<std::string> Runtime::group_kinds() const {
  std::vector<std::string> out;
  for (const auto& g : groups_) out.push_back(g->kind());
  return out;
}

void Runtime::finish() {
  if (finished_) return;
  finished_ = true;
  stop_watchdog();
  try {
    // The watchdogs watching this rank stop watching it (its heartbeat stops now).
    store_->set("hb/" + std::to_string(rank()), "done");
  } catch (const std::exception& e) {
    MR_LOG(warning) << "finishing: " << e.what();
  }
  groups_.clear();
  comms_.clear();
  try {
    store_->add("done", 1);
    if (!opts_.launch.agent_store && rank() == 0) {
      // Keep hosting the store until the others are through with it.
      auto deadline = Clock::now() + std::min<Timeout>(opts_.timeout, std::chrono::seconds(60));
      while (store_->add("done", 0) < world_size() && Clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  } catch (const std::exception& e) {
    MR_LOG(warning) << "finishing: " << e.what();
  }
}

}  // namespace mr::distributed
