// What the runtime's files share (runtime.cpp: the groups, the rendezvous and the config agreement;
// runtime_watchdog.cpp: the watchdog and the heartbeats; runtime_diagnosis.cpp: a failed collective's diagnosis):
// the store key of the verdict, how a measured duration and a list of ranks print, and what a rank published at
// the rendezvous. Internal to lib/distributed.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace mr::distributed::detail {

using Clock = std::chrono::steady_clock;

// The store key of the job's verdict: the first rank that knows why the job fails writes it; every rank that
// reads it stops with it.
inline constexpr const char* kAbort = "mr/abort";

// A duration measured here (how long a peer was silent), to a tenth of a second; bounds print by seconds_text.
std::string measured_seconds(std::chrono::milliseconds ms);

// "1", "1 and 2", "1, 2 and 3".
std::string list_words(const std::vector<int>& ranks);

// One field of the value a rank published at the rendezvous ("<hash> world_size=4 host=h pid=1 boot=b").
std::string rdzv_field(const std::string& rdzv, const char* name);

// This machine's boot id and this process's pid namespace: with the host name they tell whether another rank's
// pid is one this process can see (two containers can share a host name and a boot id, not a pid namespace).
std::string this_boot_id();
std::string this_pid_namespace();

}  // namespace mr::distributed::detail
