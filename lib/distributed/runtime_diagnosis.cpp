// The diagnosis of a failed collective (distributed/runtime.h): which members failed, finished, went silent or
// are gone, read from the store and the heartbeats, and the verdict published for the other ranks (fail).
#include "distributed/runtime.h"

#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "distributed/runtime_internal.h"
#include "util/text.h"

namespace mr::distributed {

using namespace detail;  // the runtime's shared helpers

namespace {

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

}  // namespace

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

}  // namespace mr::distributed
