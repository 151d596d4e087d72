// The launchers of a multi-node job (node_group.h): joining, watching, finishing.
//
// Keys in the launchers' store. A static job (--rdzv-backend static: node ranks and the workers' master given):
//   rdzv/joined    launchers registered (hello) under their node rank; the job starts when it reaches nnodes
//   fail           "CODE MESSAGE": the first failure that ends the job (a node's worker with no restart left, a
//                  node gone or silent, a join timeout, a node that could not restart); "CODE:SIG MESSAGE" when a
//                  launcher was stopped by signal SIG (CODE = 128 + SIG): the others pass SIG on to their workers
//   fail/A         "CODE MESSAGE": the first worker failure of attempt A while restarts are left: every node
//                  stops its workers and starts attempt A + 1
//   attempt/A/stopped  nodes whose workers of attempt A have stopped (the barrier before attempt A + 1)
//   rdzv/max_restarts, rdzv/nproc_per_node, rdzv/nnodes  the first node's --max-restarts, --nproc-per-node and
//                  --nnodes (MIN:MAX when elastic), which every node must have
//   done/A         nodes whose workers of attempt A all exited 0 (no node can restart from attempt A then)
// A c10d job (elastic(): --nnodes MIN:MAX, or a fixed N as N:N) has fail and the rdzv/ settings too, and instead of
// the others, for round R:
//   elastic        set: the store records a lost launcher (lost/N, the counter lost) instead of failing the job
//   launchers      the launchers so far; each registers (hello) under its number, the same in every round
//   rdzv/R/arrived   launchers that came to round R (the first `closed` take part, in this order; the rest are spares)
//   rdzv/R/closed    the node count round R closed at (the first launcher to decide wins)
//   rdzv/R/arrival/K the launcher number of the K-th to arrive (node rank K when K < closed)
//   rdzv/R/joined    nodes of round R registered; rdzv/R/master: "ADDR PORT" for the workers, set by node 0
//   rdzv/R/next      "C CODE MESSAGE": what ends round R and starts R + 1 (C 1: a failure, counted as a restart;
//                    2: a node that left on purpose, counted too; 0: spares to take in); rdzv/R/done: nodes whose
//                    workers of round R all exited 0
//   host/N         launcher N's host name (static: N is the node rank), for the store's words about a lost launcher
//   net/reached_at the store host's address as another host reached it (set by the store on the first connection
//                  from another host); a round's node 0 on the store's host publishes it as MASTER_ADDR
//   lost/N, lost   elastic: set by the store for launcher N once lost ("on HOST (ADDR) is gone ..."), and the count
//                  of lost launchers (node_store.h)
#include "launch/node_group.h"

#include "launch/endpoint.h"
#include "launch/free_port.h"
#include "launch/line_prefix.h"
#include "launch/local_address.h"
#include "util/text.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <algorithm>
#include <iostream>
#include <thread>

namespace mr::launch {

namespace {

using Clock = std::chrono::steady_clock;

// Whole seconds until `t` (0 once past), for the words said while waiting.
long long seconds_left(Clock::time_point t) {
  return std::max<long long>(0, std::chrono::duration_cast<std::chrono::seconds>(t - Clock::now()).count());
}

// Whether a waiting notice is worth writing: at least a second of the join timeout is left. With a join timeout of
// a few seconds the first word came at the timeout's instant, "ends the wait in 0 s", just before the failure
// itself (review launch37 #6).
bool worth_a_word(Clock::time_point deadline) { return deadline - Clock::now() >= std::chrono::seconds(1); }

// The first word of a wait for the other nodes comes after a few seconds (at most o.wait_notice), the later ones
// every o.wait_notice: a node that was not started, or was given another port, shows at once, not after 30 s.
Clock::time_point first_word(const RendezvousOptions& o) {
  return Clock::now() + std::min<std::chrono::milliseconds>(o.wait_notice, std::chrono::seconds(5));
}

// "CODE MESSAGE" -> the failure.
PeerFailure parse_failure(const std::string& v) {
  PeerFailure f;
  const size_t sp = v.find(' ');
  try {
    f.code = std::stoi(v.substr(0, sp));
  } catch (const std::exception&) {
    f.code = 1;
  }
  if (f.code == 0) f.code = 1;
  // "CODE:SIG": a launcher stopped by signal SIG.
  if (const size_t colon = v.find(':'); colon < sp) {
    try {
      f.stop_signal = std::stoi(v.substr(colon + 1, sp - colon - 1));
    } catch (const std::exception&) {
      f.stop_signal = 0;
    }
    if (f.stop_signal <= 0 || f.stop_signal >= 65) f.stop_signal = 0;
  }
  f.message = sp == std::string::npos ? v : v.substr(sp + 1);
  return f;
}

// Another node's end of the job, read after this node's workers all exited 0: a failure fails this node too
// (said, its code returned); a stop came after this node's work was done (said, 0 returned).
int after_finishing(const PeerFailure& f) {
  if (f.stop_signal) {
    std::cerr << "megatron-run: the job stopped on another node after this node's workers had finished: " << f.message
              << "; this node's exit code stays 0\n";
    return 0;
  }
  std::cerr << "megatron-run: the job failed on another node: " << f.message << "\n";
  return f.code;
}

// The store lost while the job runs: what the error says of its host. A closed connection: its launcher is gone
// (its host answers). No answer: the host is gone, or this host is cut off from it; nothing here tells which.
std::string store_lost(const StoreError& e) {
  return std::string(e.what()) + (e.trouble == StoreTrouble::silent
                                      ? ": the store's host is gone, or cut off from this host"
                                      : ": the launcher that hosts it is gone");
}

// What poll() says of the job's end recorded on another node: a stop or a failure.
std::string ended_elsewhere(const PeerFailure& f) {
  return (f.stop_signal ? "the job is stopping: " : "the job failed on another node: ") + f.message;
}

// The launchers' store, hosted here when this node is its host (NodeGroup::hosts: static node 0; c10d, a launcher
// on the endpoint's host). Null when this node is not, or (c10d) when the port is taken (`taken` set: usually
// another launcher bound it first); StoreError when it cannot be hosted.
std::unique_ptr<NodeStoreServer> host_store(const RendezvousOptions& o, bool& taken) {
  taken = false;
  if (!NodeGroup::hosts(o)) return nullptr;
  try {
    return std::make_unique<NodeStoreServer>(o.store_port, o.run_id, o.heartbeat_timeout, o.heartbeat_source);
  } catch (const StoreError& e) {
    if (o.backend == "static" || !e.in_use) throw;
    taken = true;
    return nullptr;
  }
}

// Connects to the launchers' store (`server`: hosted here by host_store, or null). When the port was taken
// (`taken`), the launcher that took it is normally reached at once. If nothing accepts connections there, a socket
// that does not listen holds the port (another program's, or a connection's local port): tries to host again every
// second until `deadline`, as such a holder usually lets go soon. Throws StoreError when the store cannot be reached
// (`taken` then says whether the port was still held that way), RendezvousError when hosting it again fails.
// While it cannot connect, a line every o.wait_notice says what it tries and how long the join timeout leaves.
std::unique_ptr<NodeStoreClient> connect_hosting_once_free(const RendezvousOptions& o, Clock::time_point deadline,
                                                           std::unique_ptr<NodeStoreServer>& server, bool& taken) {
  auto next_word = first_word(o);
  for (;;) {
    // While the port is taken, a second of trying to connect at a time; else until the next word.
    const auto stop = taken ? Clock::now() + std::chrono::seconds(1) : next_word;
    try {
      return std::make_unique<NodeStoreClient>(o.store_host, o.store_port, deadline, o.heartbeat_timeout, stop);
    } catch (const StoreError& e) {
      if (Clock::now() >= deadline) throw;
      if (Clock::now() >= next_word && worth_a_word(deadline)) {
        next_word = Clock::now() + o.wait_notice;
        std::cerr << "megatron-run: still trying to reach the launchers' store at "
                  << join_host_port(o.store_host, o.store_port) << " ("
                  << (e.cause.empty() ? std::string(e.what()) : e.cause) << "); " << o.join_timeout_flag << " ("
                  << seconds_text(o.join_timeout) << ") gives up in " << seconds_left(deadline) << " s\n";
      }
      if (!taken) continue;
      try {
        server = host_store(o, taken);
      } catch (const StoreError& e) {
        throw RendezvousError(e.what());
      }
    }
  }
}

}  // namespace

NodeGroup::NodeGroup(const RendezvousOptions& o) : o_(o), max_nnodes_(o.nnodes) {
  if (o_.backend == "c10d" && o_.min_nnodes <= 0) o_.min_nnodes = o_.nnodes;  // a fixed count: N:N
  const bool is_static = o.backend == "static";
  const auto deadline = Clock::now() + o.join_timeout;
  const std::string store = join_host_port(o.store_host, o.store_port);
  // Static: node 0 hosts the store. c10d: a launcher on the endpoint's host that can bind its port.
  bool taken = false;  // c10d: this launcher would host, but the port was in use
  try {
    server_ = host_store(o, taken);
  } catch (const StoreError& e) {
    throw RendezvousError(std::string(e.what()) +
                          (is_static ? " (node 0 hosts the launchers' store there: --launcher-port)" : ""));
  }
  try {
    try {
      client_ = connect_hosting_once_free(o, deadline, server_, taken);
    } catch (const StoreError& e) {
      // The cause the error points at: a name, the network, or (refused) no launcher hosting the store there.
      // Not "did not start": a node relaunched after the job failed finds node 0's launcher ended (review
      // launch37 #5).
      std::string why = is_static ? "node 0's launcher, which hosts it, is not running (not started, or already "
                                    "ended: a job that failed or finished)"
                                  : "no launcher on the --rdzv-endpoint's host hosts it";
      const std::string flag = is_static ? "--master-addr" : "--rdzv-endpoint";
      if (e.trouble == StoreTrouble::unresolved)
        why = "the name " + o.store_host + " does not resolve on this host (" + flag + ")";
      else if (e.trouble == StoreTrouble::unreachable)
        why = "nothing answered at that address: a wrong address (" + flag + "), a firewall, or the network between "
              "the hosts";
      else if (e.trouble == StoreTrouble::refused)
        why = "that host refused the connection: " + why;
      if (taken)
        why = "its port " + std::to_string(o.store_port) + " is in use on this host, but not by a launchers' store "
              "(nothing accepts connections there): another program holds it; choose another port in --rdzv-endpoint";
      throw RendezvousError(std::string(e.what()) + " within the join timeout (" + seconds_text(o.join_timeout) +
                            ", " + o.join_timeout_flag + "): " + why);
    }
    if (elastic()) {
      // Rounds (round_key): a launcher number for the store's liveness, then the rounds until one takes it in.
      client_->set_first("elastic", "1");  // the store records a lost launcher instead of failing the job
      launcher_id_ = static_cast<int>(client_->add("launchers", 1) - 1);
      seen_as_ = client_->hello(launcher_id_, o.run_id);
      client_->set("host/" + std::to_string(launcher_id_), local_hostname());  // named if the store loses us
      check_same_settings();
      join_rounds();  // false: the job ended while this launcher waited as a spare (ended_without_this_node())
      return;
    }
    // Static (every c10d job is in rounds, above): the node ranks and the workers' master are given.
    node_rank_ = o.node_rank;
    client_->hello(node_rank_, o.run_id);
    client_->set("host/" + std::to_string(node_rank_), local_hostname());  // named if the store loses us
    client_->add("rdzv/joined", 1);
    master_addr_ = o.master_addr;
    master_port_ = o.master_port;
    check_same_settings();
    auto next_word = first_word(o);  // a word every o.wait_notice while waiting
    for (;;) {
      if (auto f = read_failure()) throw RendezvousError(f->message);
      const int64_t joined = client_->add("rdzv/joined", 0);
      if (Clock::now() >= next_word && joined < o_.nnodes && worth_a_word(deadline)) {
        next_word = Clock::now() + o.wait_notice;
        // Who is missing: the node ranks that have not registered (each sets host/<rank> when it joins).
        std::string missing;
        int nmissing = 0;
        for (int r = 0; r < o_.nnodes && nmissing <= 8; ++r)
          if (!client_->get("host/" + std::to_string(r))) {
            if (++nmissing <= 8) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
            else missing += ", ...";
          }
        std::cerr << "megatron-run: waiting for the other nodes: " << joined << " of " << o_.nnodes
                  << " have joined run '" << o.run_id << "' (launchers' store " << store << ")"
                  << (missing.empty() ? std::string() : "; missing: node rank " + missing)
                  << "; " << o_.join_timeout_flag << " ends the wait in " << seconds_left(deadline) << " s. Each other node "
                  << "needs --nnodes " << o_.nnodes << ", its own --node-rank (0 to " << o_.nnodes - 1
                  << "), and the same --master-addr and --master-port as this one\n";
      }
      if (joined >= o_.nnodes) break;
      if (Clock::now() >= deadline) {
        const std::string msg = too_few_joined(joined);
        failed_ = true;
        throw RendezvousError(parse_failure(client_->set_first("fail", "1 " + msg)).message);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  } catch (const StoreError& e) {
    client_.reset();
    if (server_) linger(std::chrono::seconds(5));
    throw RendezvousError(e.what());
  } catch (...) {
    client_.reset();
    if (server_) linger(std::chrono::seconds(5));
    throw;
  }
}

void NodeGroup::check_same_settings() {
  check_agree("max_restarts", "--max-restarts", std::to_string(o_.max_restarts));
  if (o_.nproc_per_node > 0) check_agree("nproc_per_node", "--nproc-per-node", std::to_string(o_.nproc_per_node));
  check_agree("nnodes", "--nnodes",
              elastic() ? nnodes_text() : std::to_string(o_.nnodes));
}

void NodeGroup::check_agree(const std::string& key, const std::string& flag, const std::string& value) {
  const std::string first = client_->set_first("rdzv/" + key, value);
  if (first != value) {
    failed_ = true;
    const std::string who = elastic() ? "launcher " + std::to_string(launcher_id_) : "node " + std::to_string(node_rank_);
    throw RendezvousError(parse_failure(client_->set_first(
        "fail", "1 the nodes disagree on " + flag + " (" + first + " on one, " + value + " on " + who +
                    "); every node needs the same")).message);
  }
}

std::string NodeGroup::foreign_client_note() const {
  try {
    if (std::optional<std::string> who = client_->get(kForeignClientKey))
      return "; a client at " + *who + " spoke another protocol to the launchers' store and was turned away (a "
             "torchrun agent? every node of a megatron-run job runs megatron-run)";
  } catch (const StoreError&) {
    // The store is gone as well: the count says enough.
  }
  return "";
}

std::string NodeGroup::too_few_joined(int64_t joined) const {
  return "only " + std::to_string(joined) + " of " + std::to_string(max_nnodes_) + " nodes joined run '" + o_.run_id +
         "' (launchers' store " + join_host_port(o_.store_host, o_.store_port) + ") within the join timeout (" +
         seconds_text(o_.join_timeout) + ", " + o_.join_timeout_flag + ")" + foreign_client_note();
}

std::string NodeGroup::nnodes_text() const {
  return o_.min_nnodes > 0 && o_.min_nnodes < max_nnodes_ ? std::to_string(o_.min_nnodes) + ":" + std::to_string(max_nnodes_)
                                                          : std::to_string(max_nnodes_);
}

std::string NodeGroup::round_key(const std::string& name) const {
  return "rdzv/" + std::to_string(round_) + "/" + name;
}

int NodeGroup::usable(int64_t arrived) const {
  for (int k = static_cast<int>(std::min<int64_t>(arrived, max_nnodes_)); k >= o_.min_nnodes; --k)
    if (o_.valid_nnodes.empty() || std::find(o_.valid_nnodes.begin(), o_.valid_nnodes.end(), k) != o_.valid_nnodes.end())
      return k;
  return 0;
}

int NodeGroup::close_elastic(Clock::time_point deadline) {
  const std::string range = nnodes_text();
  int64_t seen = -1;
  Clock::time_point changed = Clock::now();
  // Every launcher says how the rendezvous closed, the one that closed it and the ones that read the count.
  auto said = [&](int closed) {
    std::cerr << "megatron-run: the " << (o_.min_nnodes < max_nnodes_ ? "elastic " : "") << "rendezvous of run '"
              << o_.run_id << "' (--nnodes " << range
              << ") closed with " << closed << " node(s)"
              << (round_ > 0 ? " in round " + std::to_string(round_) : std::string()) << "\n";
    return closed;
  };
  auto next_word = first_word(o_);  // a word every o_.wait_notice while waiting
  for (;;) {
    if (auto f = read_failure()) throw RendezvousError(f->message);
    if (std::optional<std::string> c = client_->get(round_key("closed"))) return said(std::stoi(*c));
    const int64_t arrived = client_->add(round_key("arrived"), 0);
    const auto now = Clock::now();
    if (now >= next_word && worth_a_word(deadline)) {
      next_word = now + o_.wait_notice;
      // A fixed count (N:N) waits for all of them; an elastic range for MIN, then the last call.
      const int64_t more = (o_.min_nnodes == max_nnodes_ ? max_nnodes_ : o_.min_nnodes) - arrived;
      std::cerr << "megatron-run: waiting for the rendezvous of run '" << o_.run_id << "' (--nnodes " << range
                << ") to close: " << arrived << " node(s) arrived"
                << (more > 0 ? ", " + std::to_string(more) + " more needed" : std::string()) << " (launchers' store "
                << join_host_port(o_.store_host, o_.store_port) << "); " << o_.join_timeout_flag << " ends the wait in "
                << seconds_left(deadline) << " s"
                << (more > 0 ? ". Each other node needs the same --rdzv-endpoint, --rdzv-id and --nnodes" : "")
                << "\n";
    }
    if (arrived != seen) seen = arrived, changed = now;  // the last call runs from the latest arrival seen here
    const int k = usable(arrived);
    if (k > 0 && (arrived >= max_nnodes_ || now - changed >= o_.last_call || now >= deadline)) {
      return said(std::stoi(client_->set_first(round_key("closed"), std::to_string(k))));
    }
    if (now >= deadline) {
      failed_ = true;
      const std::string msg =
          o_.min_nnodes == max_nnodes_  // a fixed count
              ? too_few_joined(arrived)
              : "only " + std::to_string(arrived) + " node(s) of --nnodes " + range + " arrived at run '" + o_.run_id +
                    "'" + (arrived >= o_.min_nnodes ? " (a count the config is not valid for)" : "") +
                    " within the join timeout (" + seconds_text(o_.join_timeout) + ", " + o_.join_timeout_flag + ")" +
                    foreign_client_note();
      throw RendezvousError(parse_failure(client_->set_first("fail", "1 " + msg)).message);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

std::string NodeGroup::node0_master_addr() {
  // --local-addr was checked to be this machine's when the launcher started (every launcher checks its own).
  std::string why;
  const std::string addr = published_master(o_.local_addr, seen_as_, client_->get(kReachedAtKey), &why);
  if (addr.empty()) {
    failed_ = true;
    throw RendezvousError(parse_failure(client_->set_first("fail", "1 " + why)).message);
  }
  return addr;
}

bool NodeGroup::join_rounds() {
  for (;;) {
    const auto deadline = Clock::now() + o_.join_timeout;
    // Said before arriving, so that a launcher lost between its arrival and its number (below) is known to have
    // been in this round (round_members).
    client_->set("entering/" + std::to_string(launcher_id_), std::to_string(round_));
    const int arrival = static_cast<int>(client_->add(round_key("arrived"), 1) - 1);
    // Test hook (tests/launch/multi_node_test.cpp): die between arriving and saying who it is, as a launcher killed
    // there would.
    if (const char* die = std::getenv("MR_TEST_RDZV_DIE_AFTER_ARRIVAL"); die && std::string(die) == "1") _exit(137);
    client_->set(round_key("arrival/" + std::to_string(arrival)), std::to_string(launcher_id_));
    const int closed = close_elastic(deadline);
    // The round may have closed at `deadline` itself (at least MIN there when the join timeout came): joining it
    // gets a bound of its own, or every node would fail at once with "only K of the N nodes joined".
    const auto join_deadline = Clock::now() + o_.join_timeout;
    if (arrival < closed) {  // taking part: node K of the round's launchers by their numbers
      const std::vector<int> members = round_members(closed, join_deadline);
      node_rank_ = static_cast<int>(std::find(members.begin(), members.end(), launcher_id_) - members.begin());
      o_.nnodes = closed;
      restarts_ = restarts_before(round_);  // the job's, also for a launcher taken in now
      // Test hook (tests/launch/multi_node_test.cpp): die in the round that closed with it, before joining it, as a
      // launcher killed there would.
      if (const char* die = std::getenv("MR_TEST_RDZV_DIE_BEFORE_JOINING"); die && std::string(die) == "1") _exit(137);
      client_->add(round_key("joined"), 1);
      if (node_rank_ == 0) {
        master_addr_ = node0_master_addr();  // fails the round at once when no usable address is known
        try {
          if (!o_.master_port) held_master_port_ = hold_free_port();  // held until the next round's pick
          master_port_ = o_.master_port ? o_.master_port : held_master_port_.port();
        } catch (const std::runtime_error& e) {
          throw StoreError(e.what());  // fails the job through the store, as a lost store would
        }
        client_->set(round_key("master"), master_addr_ + " " + std::to_string(master_port_));
      }
      bool again = false;  // the round ended before it started (a node's launcher lost): the next one, as a restart
      for (;;) {
        if (auto f = read_failure()) throw RendezvousError(f->message);
        // A node of the round whose launcher is gone will never join: the round ends now, not at the timeout. With
        // a restart left, as once the workers run (poll): the next round, counted as a restart (torchrun's agents
        // would restart once the workers failed for want of that node); without, the job fails, said as poll says
        // it (lost_launcher_failure).
        std::optional<PeerFailure> end;
        const std::optional<std::string> next = client_->get(round_key("next"));  // another node ended it first
        if (next) {
          end = parse_round_end(*next);
        } else if (std::optional<std::string> what = lost_member()) {
          const std::string why = lost_left_ ? *what : *what + " before round " + std::to_string(round_) + " started";
          if (restarts_ >= o_.max_restarts) {
            failed_ = true;
            throw RendezvousError(
                parse_failure(client_->set_first("fail", "1 " + lost_launcher_failure(why))).message);
          }
          end = end_round(true, lost_left_ ? lost_code_ : 1, why, lost_left_ ? RoundEnd::Left : RoundEnd::Lost);
        }
        if (end) {
          if (end->counted && restarts_ >= o_.max_restarts) {  // (only another node's end: this one's had one left)
            failed_ = true;
            const PeerFailure f =
                parse_failure(client_->set_first("fail", next && next->size() > 2 ? next->substr(2) : "1 ?"));
            throw RendezvousError("the job failed on another node: " + f.message + " (no restart left, --max-restarts)");
          }
          std::cerr << "megatron-run: " << end->message << "; "
                    << (end->counted ? "restart " + std::to_string(restarts_ + 1) + " of " +
                                           std::to_string(o_.max_restarts) + " (--max-restarts): "
                                     : std::string())
                    << "the rendezvous starts again (round " << round_ + 1 << ")\n";
          again = true;
          break;
        }
        const int64_t joined = client_->add(round_key("joined"), 0);
        std::optional<std::string> master = client_->get(round_key("master"));
        if (joined >= closed && master) {
          const size_t sp = master->find(' ');
          master_addr_ = master->substr(0, sp);
          master_port_ = std::stoi(master->substr(sp + 1));
          return true;
        }
        if (Clock::now() >= join_deadline) {
          failed_ = true;
          const std::string msg = "only " + std::to_string(joined) + " of the " + std::to_string(closed) +
                                  " nodes of round " + std::to_string(round_) + " of run '" + o_.run_id +
                                  "' joined within the join timeout (" + seconds_text(o_.join_timeout) + ", " + o_.join_timeout_flag + ")";
          throw RendezvousError(parse_failure(client_->set_first("fail", "1 " + msg)).message);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      if (again) {
        ++round_;
        continue;
      }
    }
    // A spare: the round runs without this launcher, which joins the next one (its arrival may start it). A round
    // that ended already (a lost launcher before it started) is not said to run (review diff41 #6).
    if (!client_->get(round_key("next")))
      std::cerr << "megatron-run: round " << round_ << " of run '" << o_.run_id << "' runs with " << closed
                << " node(s) without this launcher; it waits as a spare for the next round\n";
    for (;;) {
      if (auto f = read_failure()) throw RendezvousError(f->message);
      if (client_->get(round_key("next"))) break;
      // A node of the round lost after another finished: nobody can restart the round, so the job fails (the
      // running nodes handle a loss themselves while none has finished).
      if (client_->add(round_key("done"), 0) > 0)
        if (std::optional<std::string> what = lost_member()) {
          failed_ = true;
          throw RendezvousError(parse_failure(client_->set_first("fail", "1 " + *what)).message);
        }
      if (client_->add(round_key("done"), 0) >= closed) {
        ended_without_us_ = true;
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    ++round_;
  }
}

std::optional<std::string> NodeGroup::lost_member() {
  const int64_t lost = client_->add("lost", 0);
  if (lost == 0) return std::nullopt;
  if (lost != lost_checked_ || round_ != lost_round_) {  // look again only when something changed
    lost_checked_ = lost;
    lost_round_ = round_;
    lost_what_.reset();
    lost_left_ = false;
    const int64_t closed = std::stoll(client_->get(round_key("closed")).value_or("0"));
    const std::vector<int> members = round_members(static_cast<int>(closed), std::nullopt);
    for (size_t k = 0; k < members.size() && !lost_what_; ++k) {
      const std::string id = std::to_string(members[k]);
      std::optional<std::string> why = members[k] != launcher_id_ ? client_->get("lost/" + id) : std::nullopt;
      if (!why) continue;
      lost_what_ = "node " + std::to_string(k) + "'s launcher " + *why;
      // It had said it leaves (local_stop), and went before its leave was recorded (a second signal, kill -9
      // after the stop): its leave, as it would have recorded it.
      if (std::optional<std::string> leave = client_->get("leaving/" + id)) {
        const PeerFailure f = parse_failure(*leave);
        lost_what_ = f.message;
        lost_left_ = true;
        lost_code_ = f.code;
      }
    }
  }
  return lost_what_;
}

std::vector<int> NodeGroup::round_members(int closed, std::optional<Clock::time_point> wait_until) {
  std::vector<int> ids;
  // A launcher the store lost that had entered this round but is none of its numbers: it died after it arrived,
  // before it said who it is, and will never join.
  auto lost_entrant = [&]() -> bool {
    if (client_->add("lost", 0) == 0) return false;
    std::vector<std::string> numbered;  // the numbers this round's arrivals (its spares too) have written so far
    const int64_t arrived = client_->add(round_key("arrived"), 0);
    for (int64_t j = 0; j < arrived; ++j)
      if (std::optional<std::string> n = client_->get(round_key("arrival/" + std::to_string(j)))) numbered.push_back(*n);
    const int64_t launchers = client_->add("launchers", 0);
    for (int64_t l = 0; l < launchers; ++l) {
      const std::string id = std::to_string(l);
      if (std::find(numbered.begin(), numbered.end(), id) != numbered.end()) continue;
      if (client_->get("entering/" + id) == std::to_string(round_) && client_->get("lost/" + id)) return true;
    }
    return false;
  };
  for (int k = 0; k < closed; ++k) {
    std::optional<std::string> id = client_->get(round_key("arrival/" + std::to_string(k)));
    int polls = 0;
    while (!id && wait_until) {  // it arrived, and writes its number next (within milliseconds)
      if (auto f = read_failure()) throw RendezvousError(f->message);
      const bool lost_meanwhile = ++polls % 10 == 0 && lost_entrant();
      if (lost_meanwhile || Clock::now() >= *wait_until) {
        failed_ = true;
        const std::string msg = "node arrival " + std::to_string(k) + " of round " + std::to_string(round_) +
                                " of run '" + o_.run_id + "' never said which launcher it is, " +
                                (lost_meanwhile ? "and the launchers' store lost a launcher meanwhile (it died after "
                                                  "it arrived)"
                                                : "within the join timeout (" + seconds_text(o_.join_timeout) +
                                                      ", " + o_.join_timeout_flag + ")");
        throw RendezvousError(parse_failure(client_->set_first("fail", "1 " + msg)).message);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      id = client_->get(round_key("arrival/" + std::to_string(k)));
    }
    if (id) ids.push_back(std::stoi(*id));
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

int64_t NodeGroup::live_spares(int64_t arrived) {
  int64_t live = 0;
  for (int64_t k = o_.nnodes; k < arrived; ++k) {
    std::optional<std::string> id = client_->get(round_key("arrival/" + std::to_string(k)));
    // Its number not written yet: it arrived a moment ago, alive.
    if (!id || !client_->get("lost/" + *id)) ++live;
  }
  return live;
}

int NodeGroup::restarts_before(int round) {
  int used = 0;
  for (int r = 0; r < round; ++r)
    if (std::optional<std::string> v = client_->get("rdzv/" + std::to_string(r) + "/next"))
      used += parse_round_end(*v).counted;
  return used;
}

PeerFailure NodeGroup::parse_round_end(const std::string& v) {
  // "C CODE MESSAGE": C is 1 when the restart is counted (a failure), 2 for a node that left on purpose and 3 for a
  // node whose launcher is gone (counted too; review diff41 #6: a lost launcher was "the job failed on another
  // node"), 0 for spares taken in.
  PeerFailure f = parse_failure(v.size() > 2 ? v.substr(2) : "1 ?");
  f.counted = v.rfind("0 ", 0) != 0;
  f.restart = true;
  if (!f.counted) f.code = 0;
  if (v.rfind("2 ", 0) == 0)
    f.message = "the job's nodes change: " + f.message + " (counted as a restart)";
  else if (v.rfind("3 ", 0) == 0)
    f.message = "the job lost a node: " + f.message;
  else
    f.message = (f.counted ? "the job failed on another node: " : "the job's nodes change: ") + f.message;
  return f;
}

PeerFailure NodeGroup::end_round(bool counted, int code, const std::string& why, RoundEnd kind) {
  const char* c = kind == RoundEnd::Left ? "2 " : kind == RoundEnd::Lost ? "3 " : counted ? "1 " : "0 ";
  return parse_round_end(client_->set_first(round_key("next"), std::string(c) +
                                                                 std::to_string(code) + " " + why));
}

bool NodeGroup::hosts(const RendezvousOptions& o) {
  if (o.backend == "static") return o.node_rank == 0;
  return o.is_host ? *o.is_host : names_this_machine(o.store_host);
}

void NodeGroup::refuse_to_join(const RendezvousOptions& o, int code, const std::string& why) {
  const auto deadline = Clock::now() + o.join_timeout;
  std::unique_ptr<NodeStoreServer> server;
  bool taken = false;
  try {
    server = host_store(o, taken);
  } catch (const StoreError&) {
    // It cannot be hosted: then the others time out on their own.
  }
  try {
    // As when joining: a port held by a socket that does not listen is hosted once it is let go.
    std::unique_ptr<NodeStoreClient> connected = connect_hosting_once_free(o, deadline, server, taken);
    NodeStoreClient& client = *connected;
    client.set_first("fail", std::to_string(code == 0 ? 1 : code) + " " + why);
    // Another node that refuses too never registers: it says so, so that the host need not wait for it until the
    // join timeout (every node of a job usually has the same config, and the same refusal).
    if (!server) client.add("refused", 1);
    // The host: every other node registers, reads "fail" and leaves (present() drops back to 0), or refused.
    if (server)
      while (Clock::now() < deadline &&
             (server->registered() + static_cast<int>(client.add("refused", 0)) < o.nnodes - 1 || server->present() > 0))
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
  } catch (const std::runtime_error&) {
    // The store cannot be reached (or hosted) within the join timeout: nobody is waiting there.
  }
}

NodeGroup::~NodeGroup() {
  client_.reset();
  if (server_) linger(std::chrono::seconds(5));
}

std::optional<PeerFailure> NodeGroup::read_failure() {
  std::optional<std::string> v = client_->get("fail");
  if (!v) return std::nullopt;
  PeerFailure f = parse_failure(*v);
  // Static: the store's own failure for a launcher it lost ("node N's launcher ...", and launcher-lost N), read
  // while the launchers meet, while the workers run or while they restart: the same words of --max-restarts
  // everywhere (review launch37 #5: said once the workers ran, not when the launcher died during the rendezvous).
  if (!elastic())
    if (std::optional<std::string> n = client_->get("launcher-lost"))
      if (f.message.rfind("node " + *n + "'s launcher ", 0) == 0) f.message = lost_launcher_failure(f.message);
  return f;
}

std::string NodeGroup::lost_launcher_failure(const std::string& what) const {
  if (elastic()) return what + " (no restart left, --max-restarts)";
  if (attempt_ >= o_.max_restarts) return what;
  return what + " (no restart, although --max-restarts " + std::to_string(o_.max_restarts) +
         " was given: the static rendezvous cannot replace a lost launcher; use --rdzv-backend c10d)";
}

std::optional<PeerFailure> NodeGroup::poll() {
  if (!client_) return std::nullopt;
  if (elastic()) {
    try {
      if (std::optional<PeerFailure> f = read_failure()) {
        failed_ = true;
        f->message = ended_elsewhere(*f);
        return f;
      }
      if (std::optional<std::string> v = client_->get(round_key("next"))) {
        PeerFailure e = parse_round_end(*v);
        if (!e.counted || restarts_ < o_.max_restarts) return e;
        // A failure with no restart left (a node taken in later may have recorded it): the job ends everywhere.
        failed_ = true;
        PeerFailure f = parse_failure(client_->set_first("fail", v->size() > 2 ? v->substr(2) : "1 ?"));
        f.message = "the job failed on another node: " + f.message + " (no restart left, --max-restarts)";
        return f;
      }
      if (std::optional<std::string> what = lost_member()) {  // a node of this round whose launcher is gone
        if (restarts_ < o_.max_restarts && client_->add(round_key("done"), 0) == 0)
          return lost_left_ ? end_round(true, lost_code_, *what, RoundEnd::Left)
                            : end_round(true, 1, *what, RoundEnd::Lost);
        failed_ = true;
        PeerFailure f = parse_failure(client_->set_first("fail", "1 " + lost_launcher_failure(*what)));
        f.message = "the job lost a node: " + f.message;
        return f;
      }
      // Spares that would make the job larger (at a count the config is valid for): a new round with them, not
      // counted as a restart, as long as no node's workers have finished.
      const int64_t arrived = client_->add(round_key("arrived"), 0);
      if (arrived > o_.nnodes && usable(arrived) > o_.nnodes) {
        const int64_t live = live_spares(arrived);
        if (usable(o_.nnodes + live) > o_.nnodes && client_->add(round_key("done"), 0) == 0)
          return end_round(false, 0, std::to_string(live) + " more node(s) arrived; the workers restart "
                                         "to take them in (round " + std::to_string(round_ + 1) + ")");
      }
      return std::nullopt;
    } catch (const StoreError& e) {
      failed_ = true;
      return PeerFailure{1, store_lost(e)};
    }
  }
  try {
    std::optional<PeerFailure> f = read_failure();
    if (f) {
      failed_ = true;
    } else if (attempt_ < o_.max_restarts) {  // a failure this attempt may restart from
      if (std::optional<std::string> v = client_->get("fail/" + std::to_string(attempt_))) {
        f = parse_failure(*v);
        f->restart = true;
      }
    }
    if (f) f->message = ended_elsewhere(*f);
    return f;
  } catch (const StoreError& e) {
    failed_ = true;
    // Node 0's launcher (the store's host) lost: the same --max-restarts note as for any lost launcher (review
    // diff41 #7); a store that does not answer may be a cut-off network instead, and says so without it.
    return PeerFailure{1, e.trouble == StoreTrouble::silent ? store_lost(e) : lost_launcher_failure(store_lost(e))};
  }
}

std::optional<PeerFailure> NodeGroup::local_failure(int code, const std::string& what) {
  const bool restartable = (elastic() ? restarts_ : attempt_) < o_.max_restarts;
  failed_ = failed_ || !restartable;
  if (!client_) return std::nullopt;
  const std::string mine = std::to_string(code) + " " + what;
  try {
    if (restartable) {
      if (elastic()) end_round(true, code, what);
      else client_->set_first("fail/" + std::to_string(attempt_), mine);
      return std::nullopt;
    }
    const std::string first = client_->set_first("fail", mine);
    if (first != mine) return parse_failure(first);
  } catch (const StoreError&) {
    // The store is gone: the other nodes see that themselves.
  }
  return std::nullopt;
}

void NodeGroup::local_stop(int sig, const std::string& what) {
  // An elastic job (--nnodes MIN:MAX) with a restart left whose other nodes still make a count it can run at: this
  // node leaves, as a signalled torchrun agent ends only itself. Its stop is not passed on; once its workers have
  // ended (finish()), a new round starts without it. The store's host cannot leave: the job needs its store.
  if (client_ && !failed_ && elastic() && o_.min_nnodes < max_nnodes_ && restarts_ < o_.max_restarts && !server_ &&
      usable(o_.nnodes - 1) > 0) {
    leaving_ = what + " on " + local_hostname() + " and left the job";
    // Recorded now, not only once its workers have stopped (finish()): should this launcher be gone before that
    // (a second stop signal; SIGKILL after the stop), the others still read a leave, not a lost node.
    try {
      client_->set("leaving/" + std::to_string(launcher_id_), std::to_string(128 + sig) + " " + leaving_);
    } catch (const StoreError&) {
      // The store is gone: the other nodes see that themselves.
    }
    std::cerr << "megatron-run: this node leaves the elastic job (--nnodes " << nnodes_text()
              << ", a restart left): the stop is not passed on; the other " << o_.nnodes - 1
              << " node(s) go on without it once its workers have stopped\n";
    return;
  }
  failed_ = true;
  if (!client_) return;
  try {
    client_->set_first("fail", std::to_string(128 + sig) + ":" + std::to_string(sig) + " " + what);
  } catch (const StoreError&) {
    // The store is gone: the other nodes see that themselves.
  }
}

std::optional<Placement> NodeGroup::next_attempt() {
  if (!client_) return std::nullopt;
  const std::string key = "attempt/" + std::to_string(attempt_) + "/stopped";
  const auto deadline = Clock::now() + o_.join_timeout;
  auto cannot = [&](const std::string& why) -> std::optional<Placement> {
    failed_ = true;
    std::cerr << "megatron-run: the job cannot restart: " << why << "\n";
    return std::nullopt;
  };
  // Ends the job for every node (the first failure recorded wins) and says why.
  auto give_up = [&](const std::string& why) { return cannot(parse_failure(client_->set_first("fail", "1 " + why)).message); };
  // A node's workers finished in the failing attempt: the failure this attempt would restart from (recorded as
  // "CODE WHAT") ends the job, with its code and its words on every node.
  auto finished_elsewhere = [&](const std::optional<std::string>& recorded) {
    const PeerFailure f = parse_failure(recorded && !recorded->empty() ? *recorded : "1 a worker failed");
    return cannot(parse_failure(client_->set_first("fail", std::to_string(f.code == 0 ? 1 : f.code) + " " + f.message +
                                                               "; no restart: a node's workers had finished "
                                                               "(every node's workers restart together)"))
                      .message);
  };
  if (elastic()) {
    try {
      std::optional<std::string> v = client_->get(round_key("next"));
      if (!v) return cannot("no restart was recorded for round " + std::to_string(round_));
      if (std::optional<PeerFailure> f = read_failure()) return cannot(f->message);
      if (client_->add(round_key("done"), 0) > 0) {
        if (!parse_round_end(*v).counted)  // a round to take in more nodes, not a failure: no root cause to name
          return give_up("a node's workers finished while the job restarted to take in more nodes; the job cannot "
                         "restart its workers on every node");
        return finished_elsewhere(v->size() > 2 ? std::optional<std::string>(v->substr(2)) : std::nullopt);
      }
      ++round_;  // join_rounds counts the restarts used up from the store
      if (!join_rounds()) {
        std::cerr << "megatron-run: the job ended while this node waited as a spare\n";
        return std::nullopt;
      }
      return Placement{node_rank_, o_.nnodes, master_addr_, master_port_, restarts_};
    } catch (const StoreError& e) {
      return cannot(e.what());
    } catch (const RendezvousError& e) {
      return cannot(e.what());
    }
  }
  try {
    client_->add(key, 1);
    for (;;) {
      if (std::optional<PeerFailure> f = read_failure()) return cannot(f->message);
      const int64_t stopped = client_->add(key, 0);
      if (stopped >= o_.nnodes) break;
      if (client_->add("done/" + std::to_string(attempt_), 0) > 0)
        return finished_elsewhere(client_->get("fail/" + std::to_string(attempt_)));
      if (Clock::now() >= deadline)
        return give_up("only " + std::to_string(stopped) + " of " + std::to_string(o_.nnodes) +
                       " nodes stopped their workers for restart " + std::to_string(attempt_ + 1) +
                       " within the join timeout (" + seconds_text(o_.join_timeout) + ", " + o_.join_timeout_flag + ")");
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  } catch (const StoreError& e) {
    return cannot(e.what());
  }
  ++attempt_;
  return Placement{node_rank_, o_.nnodes, master_addr_, master_port_, attempt_};
}

int NodeGroup::finish(int code) {
  if (!client_) return code;
  if (!leaving_.empty() && code != 0) {  // left an elastic job (local_stop): the others go on without this node
    try {
      end_round(true, code, leaving_, RoundEnd::Left);  // unless the round has ended already (their workers failed first)
      client_->bye();
    } catch (const StoreError&) {
      // The store is gone: the other nodes see that themselves.
    }
    client_.reset();
    return code;
  }
  try {
    if (code == 0 && !ended_without_us_ && !failed_)
      client_->add(elastic() ? round_key("done") : "done/" + std::to_string(attempt_), 1);
    // An elastic job's node lost after this one finished: the job failed (nobody restarts the round now).
    auto lost_since = [&] {
      if (!elastic() || failed_ || ended_without_us_) return;
      if (std::optional<std::string> what = lost_member()) {
        failed_ = true;
        const PeerFailure f = parse_failure(client_->set_first("fail", "1 " + *what));
        std::cerr << "megatron-run: the job failed on another node: " << f.message << "\n";
        if (code == 0) code = f.code;
      }
    };
    lost_since();
    // The store's host stays until every other node is done or gone (the heartbeat bounds a silent one).
    bool said = false;
    while (server_ && server_->present() > 1) {
      if (!said) {
        std::cerr << "megatron-run: node " << node_rank_ << " is done; waiting for the other nodes (it hosts the "
                  << "launchers' store)\n";
        said = true;
      }
      lost_since();
      std::optional<PeerFailure> f = read_failure();
      if (f && code == 0 && !failed_) {
        failed_ = true;
        code = after_finishing(*f);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    lost_since();
    if (code == 0 && !failed_)
      if (std::optional<PeerFailure> f = read_failure()) code = after_finishing(*f);
    client_->bye();
  } catch (const StoreError&) {
    // The store's host is gone after this node's workers ended: nothing more to say to it.
  }
  client_.reset();
  return code;
}

void NodeGroup::linger(std::chrono::milliseconds at_most) {
  const auto until = Clock::now() + at_most;
  while (server_->present() > 0 && Clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(20));
}

}  // namespace mr::launch
