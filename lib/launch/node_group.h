// The launchers of a multi-node job: the rendezvous (static, or c10d-style with node ranks handed out by the
// store), the master address the workers get, and the watch that stops every node when one fails. Built on the
// launchers' store (node_store.h). Torch-free.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "launch/free_port.h"
#include "launch/launch_env.h"
#include "launch/node_store.h"
#include "launch/spawn.h"

namespace mr::launch {

// The rendezvous failed (a node did not arrive in time, the store cannot be reached, a second node with the
// same rank, ...): the message says what; every node's launcher exits 1.
struct RendezvousError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct RendezvousOptions {
  std::string backend = "static";  // "static": --node-rank given; "c10d": node ranks in the order of arrival
  int nnodes = 2;                  // the most nodes (an elastic job's MAX)
  // c10d (an elastic job, min_nnodes < nnodes, or a fixed count, N:N; 0 means nnodes), in rounds as torchrun's
  // c10d rendezvous: a round closes at
  // `nnodes` arrivals, or once at least min_nnodes have arrived and none new for `last_call` (torchrun's
  // last_call_timeout), at the largest count in valid_nnodes (the counts the config is valid for; empty: any) not
  // above the arrivals; those arrived first take part, in the order of arrival. A launcher arriving later waits
  // (a spare). The running nodes start a new round, restarting their workers, when spares could enlarge the job
  // (not counted as a restart) or a node's launcher is lost (counted, like a worker failure); nnodes() is the
  // count of the current round.
  int min_nnodes = 0;
  std::vector<int> valid_nnodes;
  std::chrono::milliseconds last_call{std::chrono::seconds(30)};
  int node_rank = 0;               // static only
  std::string run_id = "none";     // every node must give the same (--rdzv-id)
  // The launchers' store: static: node 0 hosts it (--master-addr, --launcher-port); c10d: the --rdzv-endpoint,
  // hosted by the first launcher on that host to bind it.
  std::string store_host = "127.0.0.1";
  int store_port = 29401;
  // The workers' MASTER_ADDR/MASTER_PORT. Static: as given. c10d: node 0's address as the store sees it and a
  // port free there, unless master_port is given (then that port).
  std::string master_addr = "127.0.0.1";
  int master_port = 0;
  std::chrono::milliseconds join_timeout{std::chrono::seconds(600)};     // torchrun's c10d join_timeout
  // How the user gave the join timeout, for the messages that name it: "--join-timeout" or "--rdzv-conf join_timeout".
  std::string join_timeout_flag = "--join-timeout";
  // While a launcher waits (for the store, for the other nodes), a line this often says for what and how long the
  // join timeout leaves: MR_WAIT_NOTICE_S, 30 s by default (launch_env.h, wait_notice_period).
  std::chrono::milliseconds wait_notice = wait_notice_period();
  // c10d: whether this launcher hosts the store (--rdzv-conf is_host=...); unset: when the endpoint is a local
  // address. A launcher that should host it but finds the port taken joins as a client, as torchrun's does.
  std::optional<bool> is_host;
  std::chrono::milliseconds heartbeat_timeout{std::chrono::seconds(30)};  // a silent launcher fails the job
  std::string heartbeat_source = "--heartbeat-timeout";  // where it came from, named when a launcher is dropped
  // --max-restarts: every node must give the same (checked when joining); a failure on any node with restarts
  // left restarts every node's workers together.
  int max_restarts = 0;
  // Every node must give the same --nproc-per-node (global ranks are node rank x nproc + local rank) and --nnodes
  // (checked when joining; torchrun's differing worker counts per node are not supported). 0: not checked.
  int nproc_per_node = 0;
  // torchrun's --local-addr: c10d's node 0 gives it to the workers as MASTER_ADDR instead of the address the store
  // sees it at. Empty: that address.
  std::string local_addr;
};

class NodeGroup : public JobWatch {
 public:
  // Joins the job: hosts the store when it is ours to host, registers this node, waits for every node (at most
  // join_timeout). Throws RendezvousError; a node that gives up tells the others, which then fail with the same
  // message ("only 1 of 2 nodes joined ...").
  explicit NodeGroup(const RendezvousOptions& o);

  // This node will not join (its config failed validation, its workers cannot be started, ...): tells the other
  // nodes, so that they fail at once with `why` (and `code`) instead of waiting for the join timeout. The store's
  // host keeps the store up until every other node has joined and been told, or the join timeout has passed;
  // another node waits for the store at most the join timeout. A c10d endpoint's port held by a socket that does
  // not listen is hosted once let go, as when joining. Never throws: a node it cannot tell fails on its own at its
  // join timeout.
  static void refuse_to_join(const RendezvousOptions& o, int code, const std::string& why);

  // Whether this launcher tries to host the launchers' store: node 0 (static); with c10d, o.is_host, or else
  // whether the endpoint's host is this machine.
  static bool hosts(const RendezvousOptions& o);
  ~NodeGroup() override;

  int node_rank() const { return node_rank_; }
  int nnodes() const { return o_.nnodes; }
  // Elastic: this launcher waited as a spare until the job ended well without it (it exits 0).
  bool ended_without_this_node() const override { return ended_without_us_; }
  // The restarts the job used up before this node's first attempt (an elastic job's launcher taken in later).
  int restarts_used() const { return elastic() ? restarts_ : attempt_; }
  const std::string& master_addr() const { return master_addr_; }
  int master_port() const { return master_port_; }
  bool hosts_store() const { return server_ != nullptr; }

  std::optional<PeerFailure> poll() override;
  std::optional<PeerFailure> local_failure(int code, const std::string& what) override;
  // As JobWatch's, except in an elastic job (--nnodes MIN:MAX) with a restart left, when the other nodes of the round
  // still make a count the config is valid for and this launcher does not host the store: then this node leaves
  // (torchrun's signalled agent ends only itself). Nothing is passed on; when its workers end non-zero, finish()
  // ends the round for the others, counted as a restart, and they go on without it. Workers that all handle the
  // stop (exit 0) finish as usual (Megatron's --exit-signal-handler stops every rank together).
  void local_stop(int sig, const std::string& what) override;
  std::optional<Placement> next_attempt() override;

  // After this node's workers ended with `code`: tells the store this node is done; the store's host then waits
  // until every other node is done or gone (the heartbeat bounds it). Returns the exit code for the launcher:
  // `code`, or when it is 0 and another node failed meanwhile, that node's code (said on stderr).
  int finish(int code);

 private:
  std::optional<PeerFailure> read_failure();
  // Every node must give the same --max-restarts, --nproc-per-node and --nnodes (the first one's are recorded).
  void check_same_settings();
  // ... and the same `flag` (its value `value`, recorded under rdzv/<key>): a failure of the job otherwise.
  void check_agree(const std::string& key, const std::string& flag, const std::string& value);
  // In rounds (round_key): every c10d job, as torchrun's c10d rendezvous. A fixed --nnodes N is the range N:N: a
  // lost node's launcher ends the round, and with a restart left the others wait (--join-timeout) for a launcher
  // to take its place, as a relaunched node's does under torchrun.
  bool elastic() const { return o_.backend == "c10d" || (o_.min_nnodes > 0 && o_.min_nnodes < max_nnodes_); }
  std::string nnodes_text() const;  // "--nnodes" as given: "N", or "MIN:MAX"
  // A fixed count's join timeout: "only J of N nodes joined run 'ID' (launchers' store A:P) within ...".
  std::string too_few_joined(int64_t joined) const;
  // Elastic: the key `name` of the current round ("rdzv/<round>/<name>").
  std::string round_key(const std::string& name) const;
  // Elastic: the largest node count the config is valid for, from min_nnodes up to `arrived` (0: none).
  int usable(int64_t arrived) const;
  // Elastic: waits until the current round closes (deciding it when the time comes) and returns its node count.
  int close_elastic(std::chrono::steady_clock::time_point deadline);
  // Elastic: joins rounds from the current one until this launcher takes part in one (true: node_rank_, o_.nnodes
  // and the master set) or the job ends while it waits as a spare (false; ended_without_this_node()).
  bool join_rounds();
  // Elastic, a round's node 0: the workers' MASTER_ADDR it publishes (local_address.h: published_master). A
  // --local-addr that is not this machine's, or no address other hosts can use, fails the job through the store.
  std::string node0_master_addr();
  // Elastic: records the event that ends the current round (the first recorded wins) and returns it.
  // `kind`: Left, a node that left on purpose (local_stop), and Lost, a node whose launcher is gone, are counted but
  // not worded as a failure of the job's workers.
  enum class RoundEnd { Failure, Left, Lost };
  PeerFailure end_round(bool counted, int code, const std::string& why, RoundEnd kind = RoundEnd::Failure);
  // Elastic: "node K's launcher is gone ..." for a node of the current round whose launcher the store lost.
  std::optional<std::string> lost_member();
  // A node's launcher the store lost (`what`: "node K's launcher on HOST (ADDR) is gone ...") ends the job: the
  // failure as every node says it, wherever it learns of it (the rendezvous, the workers' run, a restart), with
  // what it means for --max-restarts: static, "(no restart, although --max-restarts N was given: ...)" while a
  // restart is left (the static rendezvous cannot replace a launcher); elastic, "(no restart left, ...)" (with one
  // left the round ends instead: end_round).
  std::string lost_launcher_failure(const std::string& what) const;
  // "; a client at ADDR spoke another protocol ..." when the store turned one away (kForeignClientKey), else "".
  std::string foreign_client_note() const;
  // Elastic: the launcher numbers of the current round's `closed` nodes, ascending: node K is the K-th. The nodes
  // keep their ranks from round to round while the same launchers take part, instead of being renumbered by who
  // arrived first after a failure (torchrun keeps them too, sorting its participants by a fixed node descriptor,
  // host name first; here the order is the launchers' first contact with the store, and a relaunched one comes last).
  // `wait_until`: wait for numbers not written yet (a launcher writes its own right after it arrives) until then,
  // failing the round at it; without it, the numbers written so far.
  std::vector<int> round_members(int closed, std::optional<std::chrono::steady_clock::time_point> wait_until);
  // Elastic: of the launchers that arrived at the current round after its nodes (arrivals nnodes .. arrived - 1),
  // how many are alive (the store has not lost them). A spare that died does not start a new round.
  int64_t live_spares(int64_t arrived);
  int restarts_before(int round);  // elastic: the counted round ends before `round`
  static PeerFailure parse_round_end(const std::string& v);
  void linger(std::chrono::milliseconds at_most);  // the host: until every node is done or gone
  RendezvousOptions o_;
  std::unique_ptr<NodeStoreServer> server_;
  std::unique_ptr<NodeStoreClient> client_;
  int node_rank_ = 0;
  std::string master_addr_;
  int master_port_ = 0;
  HeldPort held_master_port_;  // node 0 of a round, no --master-port: the port it picked, held (launch/free_port.h)
  bool failed_ = false;  // this node has published a failure, or seen one
  int attempt_ = 0;      // the workers' attempt (TORCHELASTIC_RESTART_COUNT), the same on every node
  // Elastic.
  int max_nnodes_ = 0;    // the most nodes, --nnodes MAX (o_.nnodes: the current round's count when elastic)
  int launcher_id_ = -1;  // this launcher's number in the store (its hello), the same in every round
  int round_ = 0;
  int restarts_ = 0;      // restarts used up
  int64_t lost_checked_ = 0;  // lost_member(): the store's "lost" counter and the round when last looked at
  int lost_round_ = -1;
  std::optional<std::string> lost_what_;
  // ... that node had said it leaves (local_stop's "leaving/<id>" record): a leave with its code, not a loss.
  bool lost_left_ = false;
  int lost_code_ = 1;
  std::string seen_as_;   // the address the store sees this launcher at (a round's node 0 publishes it: node0_master_addr)
  bool ended_without_us_ = false;
  std::string leaving_;  // elastic: this node's launcher was stopped and leaves the job (local_stop): why
};

}  // namespace mr::launch
