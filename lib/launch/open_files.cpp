// The descriptors a launch needs (launch/open_files.h).
#include "launch/open_files.h"

#include <dirent.h>
#include <fcntl.h>

#include <algorithm>
#include <cstdlib>

#include "util/rule_id.h"

namespace mr::launch {

const Rule kOpenFileLimitRule{
    "launch.open-file-limit", Rule::Level::Error,
    "The open-file limit (RLIMIT_NOFILE; the hard limit, which the launcher raises its soft one to) is below what the "
    "launcher needs for its workers' pipes and log files, or below what megatron-run's own worker needs for the "
    "job's world size: refused (exit 1) before any worker starts.",
    __FILE__, __LINE__, kStageLaunch};
const Rule kWorkerOpenFileLimitRule{
    "dist.open-file-limit", Rule::Level::Error,
    "A rank of megatron-run's worker whose open-file limit is too low for its world size (its store, Gloo's "
    "connections to each peer), or that could not open a descriptor later (errno EMFILE/ENFILE from the store or "
    "Gloo): said as the limit, not as an unreachable peer.",
    __FILE__, __LINE__, kStageRun};

namespace {

// Measured with `ulimit -n` (docs/robustness.md), each count with 4 descriptors open below the limit beforehand:
// a launcher starts N prefixed workers (no log files) under 13 + 4N and not under 12 + 4N, one unprefixed worker
// under 8; each log file a worker writes adds one.
constexpr uint64_t kLauncherFixed = 5;      // the guardian's socket pair, the signal pipe, the held MASTER_PORT
constexpr uint64_t kLauncherPiped = 1;      // the output forwarding's own
constexpr uint64_t kLauncherPerWorker = 4;  // the output and error pipes' read ends, the start pipe, transient ends
// megatron-run's own worker (gloo, LibTorch 1.13), started with 5 open below the limit (its standard streams, its
// input, one inherited): 20 descriptors run one rank, 26 or 27 each of two (by run), 37 each of four. Beyond what
// it starts with, a little under those (a check that refused a limit the job runs under would be worse than the
// failure it prevents):
constexpr uint64_t kWorkerFixed = 9;
constexpr uint64_t kWorkerPerRank = 5;

}  // namespace

int open_descriptors(std::optional<uint64_t> below) {
  const uint64_t bound = std::min<uint64_t>(below.value_or(65536), 65536);
  if (DIR* d = opendir("/proc/self/fd")) {
    const int own = dirfd(d);
    int n = 0;
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] == '.') continue;
      const long fd = std::strtol(e->d_name, nullptr, 10);
      if (fd != own && fd >= 0 && static_cast<uint64_t>(fd) < bound) ++n;
    }
    closedir(d);
    return n;
  }
  int n = 0;
  for (uint64_t fd = 0; fd < bound; ++fd)
    if (fcntl(static_cast<int>(fd), F_GETFD) != -1) ++n;
  return n;
}

uint64_t launcher_files_needed(uint64_t open_now, int nproc, bool piped, int log_files) {
  const uint64_t workers = static_cast<uint64_t>(std::max(0, nproc));
  return open_now + kLauncherFixed +
         (piped ? kLauncherPiped + kLauncherPerWorker * workers + static_cast<uint64_t>(std::max(0, log_files)) : 0);
}

uint64_t worker_files_needed(uint64_t open_at_start, int world_size) {
  return open_at_start + kWorkerFixed + kWorkerPerRank * static_cast<uint64_t>(std::max(1, world_size));
}

std::optional<std::string> open_file_refusal(std::optional<uint64_t> limit, int nproc, uint64_t launcher,
                                             uint64_t worker) {
  if (!limit || (*limit >= launcher && *limit >= worker)) return std::nullopt;
  const uint64_t need = std::max(launcher, worker);
  std::string text = "the open-file limit (RLIMIT_NOFILE, ulimit -n " + std::to_string(*limit) + ") is too low for " +
                     std::to_string(nproc) + (nproc == 1 ? " worker" : " workers") + ": megatron-run's launcher needs " +
                     std::to_string(launcher) + " descriptors";
  if (worker > 0) text += " and its worker at least " + std::to_string(worker) + " each";
  text += "; raise the limit (ulimit -n " + std::to_string(std::max<uint64_t>(need * 2, 1024)) + ", or the hard limit " +
          "in /etc/security/limits.conf) or start fewer workers";
  return with_rule_id(kOpenFileLimitRule.id, text);
}

}  // namespace mr::launch
