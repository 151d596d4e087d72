// Waiting for a key with the collective timeout as the bound (store.h's get_within): a TCPStore `get` blocks for
// the store's own timeout, which is the rendezvous' and not the one a user set for collectives.
#include <algorithm>
#include <chrono>
#include <string>
#include <thread>

#include "distributed/store.h"
#include "util/text.h"

namespace mr::distributed {

std::string get_within(Store& store, const std::string& key, Timeout timeout, const std::function<void()>& poll,
                       const std::string& what) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + timeout;
  // Short sleeps first (the root usually publishes within moments of the others), then at most 100 ms apart.
  std::chrono::milliseconds pause{2};
  for (;;) {
    if (store.check({key})) return store.get(key);
    if (poll) poll();
    const auto now = Clock::now();
    if (now >= deadline)
      throw CollectiveError(what + ": key '" + key + "' not in the rendezvous store after " + seconds_text(timeout) +
                                " (the collective timeout: --distributed-timeout-minutes or MR_DIST_TIMEOUT_S); the "
                                "rank that publishes it did not get this far",
                            /*timeout=*/false);  // not "timed out": Runtime::diagnose keeps this text as the cause
    std::this_thread::sleep_for(std::min<Clock::duration>(pause, deadline - now));
    pause = std::min(pause * 2, std::chrono::milliseconds(100));
  }
}

}  // namespace mr::distributed
