// The watchdog and the heartbeats (distributed/runtime.h): each rank's heartbeat, the watchdog thread that checks
// the ranks it watches and stops the process on a verdict, the monitor of the store's round trips, the verdict's
// hand-over to the other ranks (linger_for_verdict, count_silent), and the heartbeat check of a GPU collective's
// members (check_peers).
#include "distributed/runtime.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "distributed/runtime_internal.h"
#include "util/log.h"
#include "util/text.h"

namespace mr::distributed {

using namespace detail;  // the runtime's shared helpers

namespace {

int64_t now_ns() { return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count(); }

// "pid 123 on host-a", from a rank's rendezvous value.
std::string whereabouts(const std::string& rdzv) {
  std::string pid = rdzv_field(rdzv, "pid"), host = rdzv_field(rdzv, "host");
  if (pid.empty()) return "";
  return "pid " + pid + (host.empty() ? "" : " on " + host);
}

}  // namespace

std::vector<int> Runtime::watched_ranks() const {
  std::vector<int> out;
  const int n = std::min(2, world_size() - 1);
  for (int i = 1; i <= n; ++i) out.push_back((rank() + i) % world_size());
  return out;
}

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

}  // namespace mr::distributed
