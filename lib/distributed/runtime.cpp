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
#include "launch/worker_input.h"
#include "util/log.h"
#include "util/text.h"

namespace mr::distributed {

using namespace mr::launch;  // the worker input and the launch contract

namespace {

using Clock = std::chrono::steady_clock;

std::string ranks_str(const std::vector<int>& r) {
  std::string s = "[";
  for (size_t i = 0; i < r.size(); ++i) s += (i ? ", " : "") + std::to_string(r[i]);
  return s + "]";
}

// A duration measured here (how long a peer was silent), to a tenth of a second; bounds print by seconds_text.
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

const char* kAbort = "mr/abort";

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

// One field of the value a rank published at the rendezvous ("<hash> world_size=4 host=h pid=1 boot=b").
std::string rdzv_field(const std::string& rdzv, const char* name) {
  size_t at = rdzv.find(std::string(" ") + name + "=");
  if (at == std::string::npos) return "";
  at += std::strlen(name) + 2;
  return rdzv.substr(at, rdzv.find(' ', at) - at);
}

// "pid 123 on host-a", from a rank's rendezvous value.
std::string whereabouts(const std::string& rdzv) {
  std::string pid = rdzv_field(rdzv, "pid"), host = rdzv_field(rdzv, "host");
  if (pid.empty()) return "";
  return "pid " + pid + (host.empty() ? "" : " on " + host);
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

// True only when the rank certainly has no process any more: it ran on this machine, in this pid namespace (same
// host name, boot id and namespace) and its pid is gone or a zombie. A rank elsewhere, or one merely silent, is not known to be gone.
bool process_gone(const std::string& rdzv) {
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  const std::string boot = rdzv_field(rdzv, "boot"), pid = rdzv_field(rdzv, "pid"), ns = rdzv_field(rdzv, "pidns");
  if (pid.empty() || boot.empty() || boot != this_boot_id() || rdzv_field(rdzv, "host") != host) return false;
  if (ns.empty() || ns != this_pid_namespace()) return false;
  std::ifstream stat("/proc/" + pid + "/stat");
  if (!stat) return true;
  std::string line;
  std::getline(stat, line);
  // "pid (comm) S ...": the state follows the last ')' (comm may hold spaces and parentheses)
  size_t close = line.rfind(')');
  if (close == std::string::npos || close + 2 >= line.size()) return false;
  const char state = line[close + 2];
  return state == 'Z' || state == 'X';
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
    if (std::find(diff.begin(), diff.end(), "world_size") != diff.end())
      msg = "rank " + std::to_string(L.rank) + " was started with world size " + lookup(mine, "world_size") +
            " but rank 0 with " + lookup(theirs, "world_size") + " (WORLD_SIZE differs between ranks)";
    else
      msg = "rank " + std::to_string(L.rank) + " resolved a different config than rank 0";
    msg += "; differing arguments:";
    size_t shown = 0;
    for (const std::string& d : diff) {
      if (shown++ == 12) {
        msg += " ... (" + std::to_string(diff.size()) + " in all)";
        break;
      }
      msg += " " + Schema::megatron().flag_for_dest(d) + " (" + lookup(mine, d) + " here, " + lookup(theirs, d) + " on rank 0)";
      if (shown < diff.size() && shown < 12) msg += ",";
    }
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

std::vector<int> Runtime::watched_ranks() const {
  std::vector<int> out;
  const int n = std::min(2, world_size() - 1);
  for (int i = 1; i <= n; ++i) out.push_back((rank() + i) % world_size());
  return out;
}

namespace {

int64_t now_ns() { return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count(); }

}  // namespace

// The watchdog (its own store connection): every period it writes this rank's heartbeat, stops the process when
// another rank published a verdict, and checks the heartbeats of the ranks it watches (watched_ranks(): each
// rank is watched by the two before it, so a silent rank is caught while any of them runs). A heartbeat that has
// not changed for heartbeat_timeout means the rank is stopped (SIGSTOP, a debugger), hung in the kernel or cut
// off: the watchdog publishes a verdict naming it and exits 1, and the others stop with that verdict. The heartbeat
// comes from this thread, so a main thread busy computing or blocked in a collective still sends it; a stopped
// process sends nothing. A second thread (the monitor) exits the process when the watchdog's store round trips
// have not completed for heartbeat_timeout: a store whose host is stopped keeps its connections open and never
// answers, which would otherwise hang the watchdog itself.
void Runtime::start_watchdog() {
  store_ok_ns_ = now_ns();
  watchdog_ = std::thread([this] {
    int64_t seq = 0;
    const std::string key = "hb/" + std::to_string(rank());
    const std::vector<int> watched = watched_ranks();
    std::map<int, Seen> seen;  // per watched rank: its last heartbeat, and since when it has not changed
    const auto started = Clock::now();
    while (!stop_) {
      std::string verdict;
      int silent_rank = -1;
      try {
        hb_store_->set(key, std::to_string(++seq));
        if (hb_store_->check({kAbort}) && !aborting_) {
          std::string why = hb_store_->get(kAbort);
          if (!aborting_ && !stop_) {
            MR_LOG(error) << "stopping: " << why;
            std::fflush(nullptr);
            linger_for_verdict(*hb_store_);
            std::_Exit(1);
          }
        }
        for (int r : watched) {
          if (aborting_ || stop_) break;
          std::string beat = hb_store_->try_get("hb/" + std::to_string(r)).value_or("");
          const auto now = Clock::now();
          auto it = seen.find(r);
          if (beat == "done") {
            seen.erase(r);
          } else if (it == seen.end() || it->second.beat != beat) {
            // A rank that has not written its first heartbeat yet counts from when this watchdog started.
            seen[r] = Seen{beat, beat.empty() && it == seen.end() ? started : now};
          } else if (now - it->second.since > opts_.heartbeat_timeout) {
            auto silent = std::chrono::duration_cast<std::chrono::milliseconds>(now - it->second.since);
            std::string who = whereabouts(hb_store_->try_get("rdzv/" + std::to_string(r)).value_or(""));
            verdict = "rank " + std::to_string(r) + (who.empty() ? "" : " (" + who + ")") +
                      (beat.empty() ? " never sent a heartbeat" : " stopped sending heartbeats") + ": none for " +
                      measured_seconds(silent) + " (the bound is " + seconds_text(opts_.heartbeat_timeout) +
                      ", " + opts_.heartbeat_source + "); it is stopped (SIGSTOP, a debugger), hung, or its host is unreachable";
            silent_rank = r;
            break;
          }
        }
        store_ok_ns_ = now_ns();
        if (!verdict.empty() && !aborting_ && !stop_) {
          aborting_ = true;
          const std::string mine = "rank " + std::to_string(rank()) + ": " + verdict;
          if (!hb_store_->check({kAbort})) hb_store_->set(kAbort, mine);
          // The silent rank will never count itself as having seen the verdict: count it here, so the store's
          // host need not wait for it.
          count_silent(*hb_store_, silent_rank);
          MR_LOG(error) << verdict;
          std::fflush(nullptr);
          linger_for_verdict(*hb_store_);
          std::_Exit(1);
        }
      } catch (const std::exception& e) {
        if (!verdict.empty()) {
          MR_LOG(error) << verdict;
          std::fflush(nullptr);
          std::_Exit(1);
        }
        if (!aborting_ && !stop_) {
          MR_LOG(error) << "lost the rendezvous store at " << opts_.launch.master_addr << ":" << opts_.launch.master_port
                        << (opts_.launch.agent_store ? " (torchrun's agent hosts it)"
                                                     : "; rank 0, which hosts it, has probably died")
                        << " (" << e.what() << ")";
          std::fflush(nullptr);
          std::_Exit(1);
        }
      }
      auto until = Clock::now() + opts_.heartbeat;
      while (!stop_ && Clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  monitor_ = std::thread([this] {
    const auto step = std::min<std::chrono::milliseconds>(opts_.heartbeat / 4, std::chrono::milliseconds(100));
    while (!stop_) {
      std::this_thread::sleep_for(std::max(step, std::chrono::milliseconds(5)));
      const auto quiet = std::chrono::nanoseconds(now_ns() - store_ok_ns_.load());
      if (stop_ || quiet <= opts_.heartbeat_timeout + opts_.heartbeat) continue;
      MR_LOG(error) << "the rendezvous store at " << opts_.launch.master_addr << ":" << opts_.launch.master_port
                    << " has not answered for " << measured_seconds(std::chrono::duration_cast<std::chrono::milliseconds>(quiet))
                    << " (the bound is " << seconds_text(opts_.heartbeat_timeout) << ", " << opts_.heartbeat_source << "): "
                    << store_owner() << ", which hosts it, is stopped (SIGSTOP, a debugger) or hung, or its host is "
                                        "unreachable";
      std::fflush(nullptr);
      std::_Exit(1);
    }
  });
}

void Runtime::stop_watchdog() {
  stop_ = true;
  if (watchdog_.joinable()) watchdog_.join();
  if (monitor_.joinable()) monitor_.join();
}

void Runtime::count_silent(Store& s, int r) {
  // Rank 0 is never counted: as the store's host it waits for the others only (linger_for_verdict). Once per
  // rank: several ranks may find the same one silent, and counting it twice let the host leave early.
  if (r > 0 && s.add("abort-silent/" + std::to_string(r), 1) == 1) s.add("abort-seen", 1);
}

// Every rank that learns of a verdict counts itself into `abort-seen`; the store's host (rank 0 of a job without
// torchrun's agent) stays until all the others have (bounded: a stopped rank never does), so that they read the verdict rather than find the store gone. Without it a rank whose
// collective fails because rank 0 has just exited reports a vanished store instead of the cause.
void Runtime::linger_for_verdict(Store& s) {
  try {
    const bool host = !opts_.launch.agent_store && rank() == 0 && world_size() > 1;
    if (!host) s.add("abort-seen", 1);
    if (!host) return;
    // Every live rank's watchdog reads the verdict within a period; a loaded machine can starve it for longer,
    // and a rank that then finds the store gone cannot name the cause. Half the heartbeat timeout is the bound:
    // the silent ranks are counted for them (count_silent), so it is only reached when a rank is stalled.
    const auto deadline =
        Clock::now() + std::max<Timeout>(opts_.heartbeat * 2 + std::chrono::seconds(1), opts_.heartbeat_timeout / 2);
    while (Clock::now() < deadline && s.add("abort-seen", 0) < world_size() - 1)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
  } catch (const std::exception&) {
    // The store is gone: nobody can read the verdict any more.
  }
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

void Runtime::check_peers(const RankList& ranks) {
  auto now = Clock::now();
  if (now - last_peer_check_ < opts_.heartbeat) return;
  last_peer_check_ = now;
  try {
    if (auto a = store_->try_get(kAbort)) throw CollectiveError("stopped by another rank (" + *a + ")", false);
    for (int r : ranks) {
      if (r == rank()) continue;
      std::string beat = store_->try_get("hb/" + std::to_string(r)).value_or("");
      if (beat == "done") continue;  // finished: its communicators are gone, the backend reports it
      auto it = seen_.find(r);
      if (it == seen_.end() || it->second.beat != beat) {
        seen_[r] = Seen{beat, now};
      } else if (now - it->second.since > opts_.heartbeat_timeout) {
        throw CollectiveError("rank " + std::to_string(r) + " stopped sending heartbeats (none for " +
                                  measured_seconds(std::chrono::duration_cast<std::chrono::milliseconds>(now - it->second.since)) +
                                  ")", false);
      }
    }
  } catch (const DistError& e) {
    throw CollectiveError(std::string("the rendezvous store is unreachable: ") + e.what(), false);
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

DistError Runtime::fail(const std::string& message) {
  aborting_ = true;
  std::string verdict = "rank " + std::to_string(rank()) + ": " + message;
  try {
    store_->set("failed/" + std::to_string(rank()), message);
    if (!store_->check({kAbort})) store_->set(kAbort, verdict);
  } catch (const std::exception&) {
    // The store is gone too; the others find out on their own.
  }
  linger_for_verdict(*store_);
  return DistError(message);
}

DistError Runtime::diagnose(const Group& g, const char* op, const CollectiveError& e) {
  aborting_ = true;
  std::string head = std::string(op) + " " + g.describe() + " failed";
  std::string cause = e.timed_out ? "timed out; the collective timeout is " + seconds_text(collective_timeout_) : e.what();
  std::vector<int> peers;
  for (int r : g.ranks())
    if (r != rank()) peers.push_back(r);
  std::string verdict;
  try {
    if (auto a = store_->try_get(kAbort)) {
      verdict = "stopping: " + *a;
      linger_for_verdict(*store_);
      return DistError(head + " (" + cause + "); " + verdict);
    }
    auto beats = [&] {
      std::map<int, std::string> m;
      for (int r : peers) m[r] = store_->try_get("hb/" + std::to_string(r)).value_or("");
      return m;
    };
    auto t0 = Clock::now();
    std::map<int, std::string> before = beats();
    std::vector<int> failed, silent, finished;
    std::string first_failure;  // the first failed member's own message
    auto window = opts_.heartbeat * 5 / 2;
    while (Clock::now() - t0 < window) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      if (store_->check({kAbort})) break;
    }
    // Another rank reached a verdict first (the window was cut short, so silence here proves nothing).
    if (auto a = store_->try_get(kAbort)) {
      linger_for_verdict(*store_);
      return DistError(head + " (" + cause + "); stopping: " + *a);
    }
    std::map<int, std::string> after = beats();
    std::vector<int> gone;  // silent, and their processes have exited (known for ranks on this machine only)
    for (int r : peers) {
      if (auto f = store_->try_get("failed/" + std::to_string(r))) {
        failed.push_back(r);
        if (first_failure.empty()) first_failure = "rank " + std::to_string(r) + " failed: " + *f;
      } else if (after[r] == "done") {
        finished.push_back(r);
      } else if (after[r].empty() || after[r] == before[r]) {
        (process_gone(store_->try_get("rdzv/" + std::to_string(r)).value_or("")) ? gone : silent).push_back(r);
      }
    }
    // A rank whose process is gone never counts itself as having seen the verdict (linger_for_verdict): count it
    // here. A rank that is only silent may be starved by a loaded machine and still read the verdict, so the
    // store's host waits for it (bounded).
    for (int r : gone) count_silent(*store_, r);
    const std::string quiet = measured_seconds(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0));
    if (!gone.empty())
      verdict = (gone.size() == 1 ? "rank " : "ranks ") + list_words(gone) + (gone.size() == 1 ? " is" : " are") +
                " gone (" + (gone.size() == 1 ? "its process has" : "their processes have") + " exited)";
    if (!silent.empty())
      verdict += (verdict.empty() ? "" : "; ") + std::string(silent.size() == 1 ? "rank " : "ranks ") +
                 list_words(silent) + (silent.size() == 1 ? " is" : " are") + " gone or stalled (no heartbeat in the last " +
                 quiet + ")";
    if (!failed.empty()) {
      if (verdict.empty())
        verdict = first_failure;
      else
        verdict += "; " + std::string(failed.size() == 1 ? "rank " : "ranks ") + list_words(failed) + " stopped too";
    }
    if (verdict.empty() && !finished.empty())
      verdict = std::string(finished.size() == 1 ? "rank " : "ranks ") + list_words(finished) +
                (finished.size() == 1 ? " has" : " have") +
                " already finished the job: the ranks issue different collectives";
    if (verdict.empty())
      verdict = e.timed_out ? "every member is alive: a rank is stuck before this collective, or the ranks issue "
                              "collectives in different orders"
                            : "every member still has a heartbeat";
  } catch (const std::exception&) {
    // Not a verdict on rank 0: under a launcher that is stopping the job (another node's failure, a restart, a
    // node leaving), rank 0 is being stopped too; the peer address in the cause names the connection that broke.
    verdict = "the rendezvous store is unreachable as well; " + store_owner() +
              (opts_.launch.agent_store ? " hosts it"
                                        : ", which hosts it, has stopped (it died, or its launcher is stopping it), or "
                                          "this host is cut off from it");
  }
  return fail(head + ": " + verdict + " [" + cause + "]");
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
