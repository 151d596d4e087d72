// The LibTorch part of the distributed layer: c10d::TCPStore / PrefixStore for the rendezvous and
// c10d::ProcessGroupGloo for host-memory collectives. The only translation unit of lib/distributed that includes
// LibTorch headers. Builds against Debian's LibTorch 1.13 and PyTorch 2.x.
#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/version.h>

#include <netdb.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <condition_variable>
#include <cstdlib>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include "distributed/store.h"
#include "launch/endpoint.h"
#include "launch/launch_env.h"
#include "launch/open_files.h"
#include "launch/local_address.h"
#include "util/log.h"
#include "util/resources.h"
#include "util/rule_id.h"
#include "util/text.h"

namespace mr::distributed {

namespace {

std::string first_line(const std::string& s) {
  std::string line = s.substr(0, s.find('\n'));
  // c10 messages end with " (errno: 98 - Address already in use)." etc.: keep them, drop the source location.
  size_t at = line.find("Exception raised from");
  return at == std::string::npos ? line : line.substr(0, at);
}

std::string message(const std::exception& e) {
  if (auto* c = dynamic_cast<const c10::Error*>(&e)) return first_line(c->what_without_backtrace());
  return first_line(e.what());
}

bool contains(const std::string& s, const char* what) { return s.find(what) != std::string::npos; }

// Called in a handler: an exception that means the process ran out of memory, address space or threads
// (util/resources.h) goes on as it is, to be said as such, not as a store or collective failure.
// A message that says a descriptor could not be opened (errno 24 or 23, from c10d's sockets or Gloo's; or one
// naming no errno while this process has next to no descriptor left, as Gloo's "Cannot resolve 127.0.0.1") is
// said as the open-file limit, not as the unreachable store or peer it would otherwise read as.
void rethrow_if_resource(const std::exception& e) {
  if (!util::resource_failure(e).empty()) throw;
  if (const std::string files = util::open_file_failure(message(e), /*nearly_exhausted=*/true); !files.empty())
    throw DistError(with_rule_id(launch::kWorkerOpenFileLimitRule.id, files));
}

std::vector<uint8_t> bytes(const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); }

class TorchStore final : public Store {
 public:
  TorchStore(c10::intrusive_ptr<c10d::Store> s, const Options& o) : s_(std::move(s)) { opts_ = o; }

  void set(const std::string& key, const std::string& value) override { wrap([&] { s_->set(key, bytes(value)); }); }
  std::string get(const std::string& key) override {
    std::string out;
    wrap([&] {
      std::vector<uint8_t> v = s_->get(key);
      out.assign(v.begin(), v.end());
    });
    return out;
  }
  int64_t add(const std::string& key, int64_t delta) override {
    int64_t r = 0;
    wrap([&] { r = s_->add(key, delta); });
    return r;
  }
  bool check(const std::vector<std::string>& keys) override {
    bool r = false;
    wrap([&] { r = s_->check(keys); });
    return r;
  }
  std::shared_ptr<Store> with_prefix(const std::string& prefix) override {
    Options o = opts_;
    o.prefix = opts_.prefix.empty() ? prefix : opts_.prefix + "/" + prefix;
    return std::make_shared<TorchStore>(c10::make_intrusive<c10d::PrefixStore>(prefix, s_), o);
  }
  void* native() override { return &s_; }

 private:
  template <class F>
  void wrap(F&& f) {
    try {
      f();
    } catch (const std::exception& e) {
      rethrow_if_resource(e);
      throw DistError("rendezvous store " + opts_.host + ":" + std::to_string(opts_.port) + ": " + message(e));
    }
  }
  c10::intrusive_ptr<c10d::Store> s_;
};

at::ScalarType scalar_type(DType t) {
  switch (t) {
    case DType::F32: return at::kFloat;
    case DType::F64: return at::kDouble;
    case DType::F16: return at::kHalf;
    case DType::BF16: return at::kBFloat16;
    case DType::I32: return at::kInt;
    case DType::I64: return at::kLong;
    case DType::U8: return at::kByte;
  }
  return at::kFloat;
}

at::Tensor host_tensor(const Buffer& b, const char* op) {
  if (b.device != Device::Cpu)
    throw CollectiveError(std::string(op) + ": the gloo communicator needs host (CPU) buffers", false);
  return at::from_blob(b.data, {static_cast<int64_t>(b.count)}, at::TensorOptions().dtype(scalar_type(b.dtype)));
}

c10d::ReduceOp reduce_op(ReduceOp op) { return op == ReduceOp::Sum ? c10d::ReduceOp::SUM : c10d::ReduceOp::MAX; }

// The Gloo device of this worker (launch::gloo_device): GLOO_SOCKET_IFNAME's interface, loopback for a loopback
// master, else the address of the interface that reaches MASTER_ADDR (not torch's default, this host's name, which
// resolves to loopback on hosts with Debian's "127.0.1.1 NAME" line). Decided once per process and master address
// (the route cannot change within a process; every communicator would otherwise resolve the name again), under a
// lock, and said once when it looks unreachable.
std::shared_ptr<::gloo::transport::Device> gloo_device_for(const CommSpec& spec) {
  static std::mutex mu;
  static std::map<std::pair<std::string, bool>, launch::GlooDevice> decided;
  launch::GlooDevice d;
  {
    std::lock_guard<std::mutex> lock(mu);
    const auto key = std::make_pair(spec.master_addr, spec.other_nodes);
    auto it = decided.find(key);
    if (it == decided.end()) {
      const char* ifname = std::getenv("GLOO_SOCKET_IFNAME");
      const std::string iface = ifname ? ifname : "";
      std::optional<std::string> toward;
      if (iface.empty() && !launch::is_loopback_address(spec.master_addr))
        toward = launch::local_address_toward(spec.master_addr);
      it = decided.emplace(key, launch::gloo_device(iface, spec.master_addr, toward, spec.other_nodes)).first;
      if (!it->second.warning.empty()) MR_LOG(warning) << it->second.warning;  // once: the first decision only
    }
    d = it->second;
  }
  switch (d.kind) {
    case launch::GlooDevice::Kind::Interface: return c10d::ProcessGroupGloo::createDeviceForInterface(d.value);
    case launch::GlooDevice::Kind::Address: return c10d::ProcessGroupGloo::createDeviceForHostname(d.value);
    case launch::GlooDevice::Kind::Default: break;
  }
  return c10d::ProcessGroupGloo::createDefaultDevice();
}

class GlooCommunicator final : public Communicator {
 public:
  explicit GlooCommunicator(const CommSpec& spec) : spec_(spec), created_timeout_(spec.timeout) {
    auto opts = c10d::ProcessGroupGloo::Options::create(spec.timeout);
    // One worker thread, not LibTorch's two: every collective here is waited for before the next starts, so a
    // second thread never has work; and the process group's constructor starts its threads one after another
    // into a vector, so when the second cannot be created (ulimit -u, pids.max) the first is destroyed joinable
    // and the process ends in std::terminate instead of the thread-limit error the worker says.
    opts->threads = 1;
    try {
      opts->devices.push_back(gloo_device_for(spec));
      auto* store = static_cast<c10::intrusive_ptr<c10d::Store>*>(spec.store->native());
      pg_ = c10::make_intrusive<c10d::ProcessGroupGloo>(*store, spec.index, static_cast<int>(spec.ranks.size()), opts);
    } catch (const std::exception& e) {
      rethrow_if_resource(e);
      throw CollectiveError("creating the gloo communicator: " + message(e), contains(message(e), "imed out"));
    }
  }

  const char* backend() const override { return "gloo"; }
  Device device() const override { return Device::Cpu; }

  void all_reduce(Buffer buf, ReduceOp op, std::optional<Timeout> timeout) override {
    std::vector<at::Tensor> t{host_tensor(buf, "all_reduce")};
    c10d::AllreduceOptions o;
    o.reduceOp = reduce_op(op);
    o.timeout = limit(timeout);
    finish([&] { return pg_->allreduce(t, o); }, o.timeout);
  }

  void reduce_scatter(Buffer in, Buffer out, ReduceOp op, std::optional<Timeout> timeout) override {
    const int64_t n = static_cast<int64_t>(spec_.ranks.size());
    if (in.count != out.count * static_cast<size_t>(n) || in.dtype != out.dtype)
      throw CollectiveError("reduce_scatter: the input must hold group-size x output elements of the same type", false);
    // Gloo has no reduce-scatter: an all-to-all moves block j of every rank to rank j (the traffic of a
    // reduce-scatter), then the blocks are reduced here in rank order.
    at::Tensor src = host_tensor(in, "reduce_scatter");
    at::Tensor dst = host_tensor(out, "reduce_scatter");
    at::Tensor gathered = at::empty_like(src);
    std::vector<int64_t> splits;  // empty: equal blocks
    std::vector<int64_t> splits2;
    c10d::AllToAllOptions o;
    o.timeout = limit(timeout);
    finish([&] { return pg_->alltoall_base(gathered, src, splits, splits2, o); }, o.timeout);
    at::Tensor blocks = gathered.view({n, static_cast<int64_t>(out.count)});
    if (op == ReduceOp::Sum)
      dst.copy_(blocks.sum(0, /*keepdim=*/false, dst.scalar_type()));
    else
      dst.copy_(at::amax(blocks, {0}));
  }

  void all_gather(Buffer in, Buffer out, std::optional<Timeout> timeout) override {
    std::vector<at::Tensor> inputs{host_tensor(in, "all_gather")};
    std::vector<std::vector<at::Tensor>> outputs{blocks(out, in, "all_gather")};
    c10d::AllgatherOptions o;
    o.timeout = limit(timeout);
    finish([&] { return pg_->allgather(outputs, inputs, o); }, o.timeout);
  }

  void broadcast(Buffer buf, int root, std::optional<Timeout> timeout) override {
    std::vector<at::Tensor> t{host_tensor(buf, "broadcast")};
    c10d::BroadcastOptions o;
    o.rootRank = root;
    o.rootTensor = 0;
    o.timeout = limit(timeout);
    finish([&] { return pg_->broadcast(t, o); }, o.timeout);
  }

  void gather(Buffer in, Buffer out, int root, std::optional<Timeout> timeout) override {
    std::vector<at::Tensor> inputs{host_tensor(in, "gather")};
    std::vector<std::vector<at::Tensor>> outputs;  // empty off the root, as Gloo requires
    if (spec_.index == root) outputs.push_back(blocks(out, in, "gather"));
    c10d::GatherOptions o;
    o.rootRank = root;
    o.timeout = limit(timeout);
    finish([&] { return pg_->gather(outputs, inputs, o); }, o.timeout);
  }

  void scatter(Buffer in, Buffer out, int root, std::optional<Timeout> timeout) override {
    std::vector<at::Tensor> outputs{host_tensor(out, "scatter")};
    std::vector<std::vector<at::Tensor>> inputs;  // empty off the root
    if (spec_.index == root) inputs.push_back(blocks(in, out, "scatter"));
    c10d::ScatterOptions o;
    o.rootRank = root;
    o.timeout = limit(timeout);
    finish([&] { return pg_->scatter(outputs, inputs, o); }, o.timeout);
  }

  void barrier(std::optional<Timeout> timeout) override {
    c10d::BarrierOptions o;
    o.timeout = limit(timeout);
    finish([&] { return pg_->barrier(o); }, o.timeout);
  }

  void set_timeout(Timeout t) override { spec_.timeout = t; }

 private:
  Timeout limit(std::optional<Timeout> t) const { return t ? *t : spec_.timeout; }

  // The group-size blocks of `whole`, each of `one`'s size (all-gather's and gather's output, scatter's input).
  std::vector<at::Tensor> blocks(const Buffer& whole, const Buffer& one, const char* op) const {
    const size_t n = spec_.ranks.size();
    if (whole.count != one.count * n || whole.dtype != one.dtype)
      throw CollectiveError(std::string(op) + ": the gathered buffer must hold group-size x " + std::to_string(one.count) +
                                " elements of the same type",
                            false);
    at::Tensor all = host_tensor(whole, op);
    std::vector<at::Tensor> out;
    for (size_t i = 0; i < n; ++i)
      out.push_back(all.narrow(0, static_cast<int64_t>(i * one.count), static_cast<int64_t>(one.count)));
    return out;
  }

  template <class F>
  void finish(F&& start, Timeout timeout) {
    try {
      auto work = start();
      // Gloo enforces the timeout the process group was created with itself; the wait bound is then a second line
      // of defence, a little later so that Gloo's own message comes first. A shorter per-call timeout
      // (--distributed-timeout-seconds-after-init, or a call's own) is not enforced by the Gloo of LibTorch 1.x
      // (it ignores the options' timeout), so the wait enforces it.
      const Timeout bound = timeout < created_timeout_ ? timeout : timeout + std::chrono::seconds(5);
      if (!work->wait(bound))
        throw CollectiveError("timed out after " + seconds_text(timeout), true);
    } catch (const CollectiveError&) {
      throw;
    } catch (const std::exception& e) {
      rethrow_if_resource(e);
      std::string m = message(e);
      throw CollectiveError(m, contains(m, "imed out") || contains(m, "imeout"));
    }
  }

  CommSpec spec_;
  Timeout created_timeout_;  // the process group's own (Gloo's context) timeout
  c10::intrusive_ptr<c10d::ProcessGroupGloo> pg_;
};

}  // namespace

namespace {

// When a wait of Store::connect says "still ...": every launch::wait_notice_period() (30 s; MR_WAIT_NOTICE_S sets it,
// for the tests) from the wait's start, until its deadline. The one schedule of both waits: the name's
// (wait_until_resolved) and the store's (WaitNotice).
class NoticeSchedule {
 public:
  using clock = std::chrono::steady_clock;
  NoticeSchedule(clock::time_point start, clock::time_point until)
      : every_(launch::wait_notice_period()), next_(start + every_), until_(until) {}
  // When the next notice is due.
  clock::time_point next() const { return next_; }
  // Whether a notice is due at `now`; if so, the next one is a period later (a period from `now` when this one came
  // more than a period late: no burst of notices after a long step of the wait).
  bool due(clock::time_point now) {
    if (now < next_) return false;
    next_ += every_;
    if (next_ < now) next_ = now + every_;
    return true;
  }
  // The whole seconds left to the deadline at `now` (negative once it passed), as the notices say it.
  long long seconds_left(clock::time_point now) const {
    return std::chrono::duration_cast<std::chrono::seconds>(until_ - now).count();
  }

 private:
  std::chrono::milliseconds every_;
  clock::time_point next_, until_;
};

// While a rank waits to reach the store (TCPStore's constructor retries for the whole timeout, 10 min by default),
// a line on each NoticeSchedule notice says what it tries and how long is left: a MASTER_ADDR that leads nowhere is
// otherwise silent until the timeout.
class WaitNotice {
 public:
  // `timeout`: the distributed timeout, as named; `left`: what is left of it (the wait for the name took the rest).
  WaitNotice(const std::string& where, std::chrono::milliseconds timeout, std::chrono::milliseconds left) {
    const auto now = NoticeSchedule::clock::now();
    thread_ = std::thread([this, where, timeout, schedule = NoticeSchedule(now, now + left)]() mutable {
      std::unique_lock<std::mutex> lock(mu_);
      while (!cv_.wait_until(lock, schedule.next(), [this] { return done_; })) {
        const auto now = NoticeSchedule::clock::now();
        if (!schedule.due(now)) continue;
        const long long left = schedule.seconds_left(now);
        if (left <= 0) break;
        MR_LOG(warning) << "still trying to reach the rendezvous store at " << where << " (MASTER_ADDR:MASTER_PORT); "
                        << "the distributed timeout (" << seconds_text(timeout) << ") gives up in " << left << " s";
      }
    });
  }
  ~WaitNotice() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

// Waits until `opts.host` resolves, retrying every second within opts.timeout (a cluster's DNS may publish rank 0's
// name after the workers start; EAI_AGAIN, a server that does not answer now, is waited out the same way), and says
// every launch::wait_notice_period() that the name does not resolve, in the resolver's words: c10d's TCPStore would
// retry it too, but with a glog line a second and a final error that blames rank 0. Returns the time left; throws
// DistError at the timeout, naming the name, the resolver's words and the setting that gave it.
std::chrono::milliseconds wait_until_resolved(const Store::Options& opts) {
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  const auto until = start + opts.timeout;
  NoticeSchedule notices(start, until);
  auto left = [&] { return std::chrono::duration_cast<std::chrono::milliseconds>(until - clock::now()); };
  for (bool first = true;; first = false) {
    int code = 0;
    (void)launch::resolve(opts.host, opts.port, nullptr, &code);
    if (code == 0) return first ? opts.timeout : left();  // at once (the usual case): the whole timeout
    const std::string words = code == EAI_SYSTEM ? std::strerror(errno) : gai_strerror(code);
    const std::string what = opts.host + " does not resolve on this host (" + words + "; the name is " +
                             opts.host_setting + ")";
    if (left().count() <= 0)
      throw DistError("cannot reach the rendezvous store at " + launch::join_host_port(opts.host, opts.port) +
                      " within " + seconds_text(opts.timeout) + ": " + what + "; check the name (a typo, a node "
                      "list, a search domain missing from this host's or container's /etc/resolv.conf)");
    if (const auto now = clock::now(); notices.due(now))
      MR_LOG(warning) << "still waiting for the rendezvous store's host: " << what << "; the distributed timeout ("
                      << seconds_text(opts.timeout) << ") gives up in "
                      << std::max<long long>(0, notices.seconds_left(now)) << " s";
    std::this_thread::sleep_for(std::min<std::chrono::milliseconds>(
        {std::chrono::milliseconds(1000), std::max(left(), std::chrono::milliseconds(0)),
         std::chrono::duration_cast<std::chrono::milliseconds>(notices.next() - clock::now()) +
             std::chrono::milliseconds(1)}));
  }
}

}  // namespace

std::shared_ptr<Store> Store::connect(const Options& opts) {
  c10d::TCPStoreOptions o;
  o.port = static_cast<std::uint16_t>(opts.port);
  o.isServer = opts.is_server;
  o.waitWorkers = false;
  o.timeout = opts.timeout;
  c10::intrusive_ptr<c10d::Store> store;
  // The name first (rank 0's store connects to it too): the time it took comes off the connection's timeout.
  const std::chrono::milliseconds left = wait_until_resolved(opts);
  o.timeout = std::max(left, std::chrono::milliseconds(1000));
  try {
    std::optional<WaitNotice> notice;
    if (!opts.is_server) notice.emplace(opts.host + ":" + std::to_string(opts.port), opts.timeout, o.timeout);
    store = c10::make_intrusive<c10d::TCPStore>(opts.host, o);
    store->setTimeout(opts.timeout);  // the blocking operations' own, whatever the wait for the name took
  } catch (const std::exception& e) {
    rethrow_if_resource(e);
    std::string m = message(e);
    std::string where = opts.host + ":" + std::to_string(opts.port);
    if (opts.is_server && (contains(m, "in use") || contains(m, "errno: 98") || contains(m, "EADDRINUSE")))
      throw DistError("cannot host the rendezvous store on port " + std::to_string(opts.port) +
                      (opts.port_from.empty() ? std::string() : " (" + opts.port_from + ")") +
                      ": the port is already in use (another job or a leftover worker holds it); " +
                      (opts.port_from.empty() ? "pick a free one with " + opts.port_setting
                                              : "set " + opts.port_setting + " to a free one"));
    // "cannot reach" (and its advice) only for what a connection failure says; resource failures went on above.
    const bool unreachable = contains(m, "connect") || contains(m, "imed out") || contains(m, "imeout") ||
                             contains(m, "refused") || contains(m, "resolve") || contains(m, "host") ||
                             contains(m, "nreachable") || contains(m, "etwork") || contains(m, "reset");
    if (!opts.is_server && !unreachable) throw DistError("cannot join the rendezvous store at " + where + ": " + m);
    if (!opts.is_server)
      throw DistError("cannot reach the rendezvous store at " + where + " within " + seconds_text(opts.timeout) +
                      ": check that rank 0 (or torchrun's agent) is running and that MASTER_ADDR/MASTER_PORT point "
                      "at it (" + m + ")");
    throw DistError("cannot start the rendezvous store on " + where + ": " + m);
  }
  std::shared_ptr<Store> out = std::make_shared<TorchStore>(store, opts);
  if (!opts.prefix.empty()) {
    out = std::make_shared<TorchStore>(c10::make_intrusive<c10d::PrefixStore>(opts.prefix, store), opts);
  }
  return out;
}

std::string libtorch_version() { return TORCH_VERSION; }

std::shared_ptr<Communicator> make_gloo_communicator(const CommSpec& spec) {
  return std::make_shared<GlooCommunicator>(spec);
}

}  // namespace mr::distributed
