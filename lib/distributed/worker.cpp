#include "distributed/worker.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <iostream>
#include <new>
#include <sstream>
#include <system_error>
#include <thread>

#include <fcntl.h>
#include <malloc.h>
#include <sys/auxv.h>
#include <unistd.h>

#include "distributed/runtime.h"
#include "launch/failure_report.h"
#include "launch/nccl_check.h"
#include "launch/open_files.h"
#include "launch/worker_input.h"
#include "util/exit_signal.h"
#include "util/log.h"
#include "util/decimal.h"
#include "util/resources.h"
#include "util/rule_id.h"
#include "util/std_fds.h"

extern char** environ;

namespace mr::distributed {

using namespace mr::launch;  // the worker input and the launch contract

namespace {

using Clock = std::chrono::steady_clock;

std::optional<double> env_seconds(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  char* end = nullptr;
  double s = std::strtod(v, &end);
  if (end == v || *end || !(s > 0)) throw std::runtime_error(std::string(name) + "='" + v + "' is not a positive number of seconds");
  return s;
}

std::string ranks_str(const std::vector<int>& r) {
  std::string s = "[";
  for (size_t i = 0; i < r.size(); ++i) s += (i ? ", " : "") + std::to_string(r[i]);
  return s + "]";
}

// A float buffer on the host or the device, filled and read back from the host.
class Floats {
 public:
  Floats(size_t n, Device d, int local_rank) : host_(n), device_(d) {
    if (d == Device::Cuda) dev_ = device_alloc(n * sizeof(float), local_rank);
  }
  ~Floats() {
    if (dev_) device_free(dev_);
  }
  Floats(const Floats&) = delete;
  Floats& operator=(const Floats&) = delete;
  std::vector<float>& host() { return host_; }
  void upload() {
    if (dev_) copy_to_device(dev_, host_.data(), host_.size() * sizeof(float));
  }
  void download() {
    if (dev_) copy_to_host(host_.data(), dev_, host_.size() * sizeof(float));
  }
  Buffer buffer() { return Buffer{dev_ ? dev_ : host_.data(), host_.size(), DType::F32, device_}; }

 private:
  std::vector<float> host_;
  Device device_;
  void* dev_ = nullptr;
};

struct Check {
  std::string group;
  std::vector<int> ranks;
  double sum = 0;
};

class SelfCheck {
 public:
  SelfCheck(Runtime& rt, size_t n) : rt_(rt), n_(n) {
    device_ = rt.backend() == arg::DistributedBackend::nccl ? Device::Cuda : Device::Cpu;
  }

  // An all-reduce (sum) of rank+1 in every group this rank belongs to.
  std::vector<Check> all_reduce_each_group() {
    std::vector<Check> out;
    for (const std::string& kind : rt_.group_kinds()) {
      Group& g = rt_.group(kind);
      Floats f(n_, device_, rt_.options().launch.local_rank);
      std::fill(f.host().begin(), f.host().end(), static_cast<float>(rt_.rank() + 1));
      f.upload();
      g.all_reduce(f.buffer(), ReduceOp::Sum);
      f.download();
      double expect = 0;
      for (int r : g.ranks()) expect += r + 1;
      expect_all(f.host(), [&](size_t) { return expect; }, "all_reduce(sum) on " + g.describe());
      out.push_back({kind, g.ranks(), f.host().front()});
    }
    return out;
  }

  // The rest of the API on the world group (and every group's barrier).
  void other_collectives() {
    Group& w = rt_.group("world");
    const int size = w.size(), me = w.rank();
    const int local = rt_.options().launch.local_rank;
    {
      Floats f(n_, device_, local);
      for (size_t i = 0; i < n_; ++i) f.host()[i] = static_cast<float>((me * 7 + static_cast<int>(i)) % 13);
      f.upload();
      w.all_reduce(f.buffer(), ReduceOp::Max);
      f.download();
      expect_all(f.host(), [&](size_t i) {
        int best = 0;
        for (int r = 0; r < size; ++r) best = std::max(best, (r * 7 + static_cast<int>(i)) % 13);
        return static_cast<double>(best);
      }, "all_reduce(max) on " + w.describe());
    }
    {
      Floats in(n_ * static_cast<size_t>(size), device_, local), out(n_, device_, local);
      for (size_t i = 0; i < in.host().size(); ++i)
        in.host()[i] = static_cast<float>((me + 1) * static_cast<int>(i / n_ + 1));
      in.upload();
      w.reduce_scatter(in.buffer(), out.buffer(), ReduceOp::Sum);
      out.download();
      double tri = static_cast<double>(size) * (size + 1) / 2;
      expect_all(out.host(), [&](size_t) { return tri * (me + 1); }, "reduce_scatter(sum) on " + w.describe());
    }
    {
      Floats in(n_, device_, local), out(n_ * static_cast<size_t>(size), device_, local);
      std::fill(in.host().begin(), in.host().end(), static_cast<float>(me));
      in.upload();
      w.all_gather(in.buffer(), out.buffer());
      out.download();
      expect_all(out.host(), [&](size_t i) { return static_cast<double>(i / n_); }, "all_gather on " + w.describe());
    }
    {
      Floats f(n_, device_, local);
      const int root = size - 1;
      std::fill(f.host().begin(), f.host().end(), static_cast<float>(me == root ? 42 + root : -1));
      f.upload();
      w.broadcast(f.buffer(), root);
      f.download();
      expect_all(f.host(), [&](size_t) { return 42.0 + root; }, "broadcast on " + w.describe());
    }
    {  // gather to the last rank, then scatter from it: block r goes to rank r and comes back plus 100
      const int root = size - 1;
      Floats in(n_, device_, local), all(n_ * static_cast<size_t>(size), device_, local), back(n_, device_, local);
      for (size_t i = 0; i < n_; ++i) in.host()[i] = static_cast<float>(me * 1000 + static_cast<int>(i % 97));
      in.upload();
      w.gather(in.buffer(), all.buffer(), root);
      if (me == root) {
        all.download();
        expect_all(all.host(), [&](size_t i) { return static_cast<double>((i / n_) * 1000 + (i % n_) % 97); },
                   "gather on " + w.describe());
        for (float& x : all.host()) x += 100.0f;
        all.upload();
      }
      w.scatter(all.buffer(), back.buffer(), root);
      back.download();
      expect_all(back.host(), [&](size_t i) { return static_cast<double>(me * 1000 + static_cast<int>(i % 97) + 100); },
                 "scatter on " + w.describe());
    }
    for (const std::string& kind : rt_.group_kinds()) rt_.group(kind).barrier();
  }

 private:
  template <class F>
  void expect_all(const std::vector<float>& v, F&& want, const std::string& what) {
    for (size_t i = 0; i < v.size(); ++i)
      if (static_cast<double>(v[i]) != want(i)) {
        std::ostringstream os;
        os << "self-check: " << what << " gave " << v[i] << " at element " << i << ", expected " << want(i);
        throw rt_.fail(os.str());
      }
  }

  Runtime& rt_;
  size_t n_;
  Device device_ = Device::Cpu;
};

std::string seconds_str(std::chrono::milliseconds ms) {
  std::ostringstream os;
  os << static_cast<double>(ms.count()) / 1000.0 << " s";
  return os.str();
}

// MR_DIST_STALL="RANK:SECONDS" (tests): that rank's main thread sleeps after the bring-up, before the last
// barrier, while its heartbeat goes on: a rank that is alive but stuck, which only a collective timeout catches.
void stall_for_tests(int rank) {
  const char* v = std::getenv("MR_DIST_STALL");
  if (!v || !*v) return;
  int r = -1;
  double s = 0;
  if (std::sscanf(v, "%d:%lf", &r, &s) != 2) throw DistError(std::string("MR_DIST_STALL='") + v + "' is not RANK:SECONDS");
  if (r == rank && s > 0) std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int64_t>(s * 1000)));
}

// Set once main() runs: a failure before it is one of the libraries' start-up (their static constructors).
volatile bool g_in_main = false;

// The RANK the worker's own error lines start with ("[rank R] "), as util/log does: null when megatron-run spawned
// the worker (it prefixes the worker's lines itself) or RANK is not set. Allocates nothing. From .preinit_array it
// reads the environment worker_preinit has pointed `environ` at.
const char* own_line_rank() {
  const char* spawned = std::getenv("MR_SPAWNED");
  const char* rank = std::getenv("RANK");
  return (!spawned || std::strcmp(spawned, "1") != 0) && rank && *rank ? rank : nullptr;
}

// "[rank R] error: <message>\n" on stderr without allocating (memory may be what ran out).
void say_error_raw(const char* message) {
  char line[1024];
  const char* rank = own_line_rank();
  int n = 0;
  if (rank)
    n = std::snprintf(line, sizeof line, "[rank %.16s] error: %s\n", rank, message);
  else
    n = std::snprintf(line, sizeof line, "error: %s\n", message);
  if (n <= 0) return;
  size_t len = std::min(static_cast<size_t>(n), sizeof line - 1);
  if (len == sizeof line - 1) line[len - 1] = '\n';
  std::fflush(stdout);
  for (size_t off = 0; off < len;) {
    ssize_t w = ::write(2, line + off, len - off);
    if (w <= 0) break;
    off += static_cast<size_t>(w);
  }
}

// A resource failure (util/resources.h) said without allocating; false when `e` is not one.
bool say_resource_failure(const std::exception& e) {
  char msg[768];
  if (util::resource_failure(e, msg, sizeof msg) == 0) return false;
  say_error_raw(msg);
  return true;
}

int usage(const std::string& msg) {
  std::cerr << "megatron-run-worker: error: " << msg
            << "\nusage: megatron-run-worker --input-fd N | --input FILE   (started by megatron-run inside a job)\n";
  return 2;
}

// An error that follows another rank's failure (collectives.h: FollowsRank): its record, with that rank, goes to
// TORCHELASTIC_ERROR_FILE, where the launcher reads which rank is the root cause. Nothing for any other error.
void record_follower(const std::exception& e) {
  const auto* f = dynamic_cast<const FollowsRank*>(&e);
  const char* path = std::getenv("TORCHELASTIC_ERROR_FILE");
  if (!f || !path || !*path) return;
  // A FollowerError follows some rank even when it does not know which (-1); an error type that only may follow
  // one (a CheckpointError: the failed rank's own error is one too) follows none until it names the rank.
  if (f->root_rank < 0 && !dynamic_cast<const FollowerError*>(&e)) return;
  const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::system_clock::now().time_since_epoch()).count();
  const std::string why =
      launch::write_error_record(path, launch::follower_error_record(e.what(), f->root_rank, now));
  if (!why.empty()) MR_LOG(warning) << "cannot write the error file " << path << " (TORCHELASTIC_ERROR_FILE): " << why;
}

// A stop every rank agreed on (collectives.h: RootCauseError, FollowerError): says it, then waits `wait` before the
// rank exits 1.
int say_then_wait(const std::exception& e, std::chrono::milliseconds wait) {
  record_follower(e);
  MR_LOG(error) << e.what();
  std::cout.flush();
  std::cerr.flush();
  std::this_thread::sleep_for(wait);
  return 1;
}

}  // namespace

// Under an address-space limit some libraries' start-up code does not check an allocation and crashes
// (libcublasLt's static constructors, with SIGSEGV): until main() runs, such a crash is said as one line with the
// address space in use beside the limit (a crash for another cause under a generous limit then reads as such).
// The line's text around the signal's name and the size in use is made in worker_preinit; the handler only copies,
// reads /proc/self/statm and writes (async-signal-safe calls).
static char g_crash_head[64];    // "[rank R] error: a library crashed ("
static char g_crash_tail[512];   // " MiB of this rank's address-space limit of ... (ulimit -v)\n"
static size_t g_crash_head_len = 0, g_crash_tail_len = 0;
static unsigned long long g_page_size = 4096;
static bool g_startup_handler = false;
// worker_preinit set OPENBLAS_NUM_THREADS=1 (said once logging is up), marked by this variable across its exec.
static constexpr const char* kSetBlasThreads = "MR_WORKER_SET_BLAS_THREADS";
static bool g_one_blas_thread = false;

// Appends `n` bytes of `s` to `out` (of `cap` bytes) at `at`, as far as they fit; the new length.
static size_t put(char* out, size_t at, size_t cap, const char* s, size_t n) {
  for (size_t i = 0; i < n && at < cap; ++i) out[at++] = s[i];
  return at;
}

static void on_startup_crash(int sig) {
  char line[800];
  size_t at = put(line, 0, sizeof line, g_crash_head, g_crash_head_len);
  const char* name = sig == SIGBUS ? "SIGBUS" : "SIGSEGV";
  at = put(line, at, sizeof line, name, std::strlen(name));
  static const char mid[] = ") while the worker's libraries started, with ";
  at = put(line, at, sizeof line, mid, sizeof mid - 1);
  // The address space in use: /proc/self/statm's first field, in pages.
  unsigned long long pages = 0;
  bool known = false;
  const int fd = ::open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    char b[64];
    const ssize_t n = ::read(fd, b, sizeof b);
    ::close(fd);
    for (ssize_t i = 0; i < n && b[i] >= '0' && b[i] <= '9'; ++i, known = true) pages = pages * 10 + (b[i] - '0');
  }
  if (known) {
    char digits[20];
    const size_t nd = util::decimal_digits(pages * g_page_size >> 20, digits);
    at = put(line, at, sizeof line, digits, nd);
  } else {
    at = put(line, at, sizeof line, "?", 1);
  }
  at = put(line, at, sizeof line, g_crash_tail, g_crash_tail_len);
  for (size_t off = 0; off < at;) {
    const ssize_t w = ::write(2, line + off, at - off);
    if (w <= 0) break;
    off += static_cast<size_t>(w);
  }
  ::_exit(1);
}

void worker_preinit(char** argv, char** envp) {
  // libc sets environ only in its own initialisation, after .preinit_array: until then getenv finds nothing and
  // setenv starts an empty environment. The process's environment is `envp`, which libc will take as well.
  if (!environ && envp) environ = envp;
  // OpenBLAS (the pthread build LibTorch and the optimizers link) starts its thread pool in its constructor, one
  // thread a processor, and each thread maps a 128 MiB buffer at once, retrying forever when the limit refuses
  // it. It takes the count from OPENBLAS_NUM_THREADS, then GOTO_NUM_THREADS, then OMP_NUM_THREADS (the first
  // positive one). Under a limit the worker runs with one BLAS thread unless the user named a BLAS count, as
  // megatron-run's spawner does for its workers (launch/spawn_env.cpp): a worker started by torchrun or srun
  // gets it too. OMP_NUM_THREADS is not taken for a BLAS choice: it sizes the worker's OpenMP kernels.
  // A setenv here does not reach the libraries: libc's own initialisation, which runs after .preinit_array and
  // before the other libraries' constructors, points environ at the environment the process started with.
  // So the worker starts itself again (same pid, arguments and descriptors) with the variable set; until here no
  // library has started, so that costs the loading only. If the exec fails the worker goes on without it.
  // Started through the dynamic loader ("ld.so megatron-run-worker ...": the kernel loaded no interpreter, AT_BASE
  // is 0), /proc/self/exe is the loader, which would take the worker's arguments as its own: no re-exec then.
  if (const char* mark = std::getenv(kSetBlasThreads); mark && std::strcmp(mark, "1") == 0) {
    g_one_blas_thread = std::getenv("OPENBLAS_NUM_THREADS") != nullptr;
  } else if (argv && argv[0] && getauxval(AT_BASE) != 0 && util::address_space_limit() &&
             !std::getenv("OPENBLAS_NUM_THREADS") && !std::getenv("GOTO_NUM_THREADS")) {
    if (setenv("OPENBLAS_NUM_THREADS", "1", 1) == 0 && setenv(kSetBlasThreads, "1", 1) == 0) {
      ::execv("/proc/self/exe", argv);
      // No /proc (a chroot, a sandbox): the path the worker was started by (relative to the unchanged directory).
      if (const char* self = reinterpret_cast<const char*>(getauxval(AT_EXECFN)); self && *self) ::execv(self, argv);
    }
    unsetenv(kSetBlasThreads);
    unsetenv("OPENBLAS_NUM_THREADS");
  }
  std::set_terminate(worker_terminate);
  // --exit-signal-handler (megatron-run's own processes pass it on, util/exit_signal.h): latched from the worker's
  // first instruction on, before the libraries load; a signal its launching process already latched is kept.
  util::install_exit_signal_from_env();
  if (const std::optional<uint64_t> as = util::address_space_limit()) {
    const char* rank = own_line_rank();
    const bool prefix = rank != nullptr;
    int n = std::snprintf(g_crash_head, sizeof g_crash_head, "%s%.16s%serror: a library crashed (",
                          prefix ? "[rank " : "", prefix ? rank : "", prefix ? "] " : "");
    g_crash_head_len = n > 0 ? std::min(static_cast<size_t>(n), sizeof g_crash_head - 1) : 0;
    n = std::snprintf(g_crash_tail, sizeof g_crash_tail,
                      " MiB of this rank's address-space limit of %llu MiB in use (RLIMIT_AS, ulimit -v %llu); if the "
                      "two are close, the likely cause is an allocation the library did not check, failing under "
                      "the limit: raise it (ulimit -v)\n",
                      static_cast<unsigned long long>(*as >> 20), static_cast<unsigned long long>(*as / 1024));
    g_crash_tail_len = n > 0 ? std::min(static_cast<size_t>(n), sizeof g_crash_tail - 1) : 0;
    if (const long page = ::sysconf(_SC_PAGESIZE); page > 0) g_page_size = static_cast<unsigned long long>(page);
    struct sigaction sa{};
    sa.sa_handler = on_startup_crash;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESETHAND;
    sigaction(SIGSEGV, &sa, nullptr);
    sigaction(SIGBUS, &sa, nullptr);
    g_startup_handler = true;
  }
  // Under an address-space limit every glibc malloc arena a thread creates reserves 64 MiB of it (more on a
  // machine with many processors: up to 8 arenas a processor); the worker's threads (OpenMP, Gloo, the store)
  // allocate little, so they share two.
  if (util::address_space_limit()) mallopt(M_ARENA_MAX, 2);
}

void worker_terminate() {
  char msg[768];
  bool said = false;
  try {
    if (std::exception_ptr p = std::current_exception()) std::rethrow_exception(p);
    say_error_raw("the worker called std::terminate without an exception (a bug: please report it)");
    said = true;
  } catch (const std::exception& e) {
    if (util::resource_failure(e, msg, sizeof msg) > 0) {
      if (!g_in_main) {
        char line[1024];
        std::snprintf(line, sizeof line, "%s (while the worker's libraries started, before it ran)", msg);
        say_error_raw(line);
      } else {
        say_error_raw(msg);
      }
    } else if (const std::string files = util::open_file_failure(e.what()); !files.empty()) {
      // A library's thread (the store's server accepting a connection) ran out of descriptors.
      say_error_raw(files.c_str());
    } else {
      std::snprintf(msg, sizeof msg, "the worker ended on an uncaught exception: %s", e.what());
      say_error_raw(msg);
    }
    said = true;
  } catch (...) {
    if (!said) say_error_raw("the worker ended on an uncaught exception of an unknown type");
  }
  ::_exit(1);
}

// The exit handlers that run after main returns (libraries' static destructors, OpenBLAS's and Gloo's thread
// pools) get kExitHandlersBound; should one wait for ever on a thread that will not finish, the rank would stay
// alive with its verdict said until the launcher's stop (a NaN stop under load once sat 150 s so), and its job with
// it. A detached thread ends the process with `code` once the bound has passed, and says so; a normal exit ends the
// process long before it wakes. MR_WORKER_EXIT_HANDLERS_S sets the bound (seconds, 0 for none; for tests), and
// MR_TEST_HANG_AT_EXIT=1 registers an exit handler that never returns (the test of this bound).
constexpr std::chrono::seconds kExitHandlersBound{20};

static void bound_exit_handlers(int code) {
  std::chrono::milliseconds bound = kExitHandlersBound;
  if (const char* s = std::getenv("MR_WORKER_EXIT_HANDLERS_S"); s && *s) {
    char* end = nullptr;
    const double v = std::strtod(s, &end);
    if (end && *end == '\0' && v == 0) return;  // 0: no bound (a 0 s bound would race every normal exit)
    if (end && *end == '\0' && v > 0 && v < 86400) bound = std::chrono::milliseconds(static_cast<long long>(v * 1000));
  }
  // The line is made now (the thread only writes it): "[rank R] warning: ..." as the worker's other raw lines.
  static char line[512];
  static size_t len = 0;
  const char* rank = own_line_rank();
  const int n = std::snprintf(
      line, sizeof line,
      "%s%s%swarning: the worker's exit handlers (its libraries' clean-up) were still running %.3g s after it "
      "ended; the process ends now with exit code %d (MR_WORKER_EXIT_HANDLERS_S sets the bound)\n",
      rank ? "[rank " : "", rank ? rank : "", rank ? "] " : "", static_cast<double>(bound.count()) / 1000, code);
  len = n > 0 ? std::min(static_cast<size_t>(n), sizeof line - 1) : 0;
  try {
    std::thread([bound, code] {
      std::this_thread::sleep_for(bound);
      for (size_t off = 0; off < len;) {
        const ssize_t w = ::write(2, line + off, len - off);
        if (w <= 0) break;
        off += static_cast<size_t>(w);
      }
      ::_exit(code);
    }).detach();
  } catch (const std::system_error&) {
    // No thread to be had (a process limit): the exit goes on unbounded, as it did before the bound.
  }
  if (const char* h = std::getenv("MR_TEST_HANG_AT_EXIT"); h && std::string(h) == "1")
    std::atexit([] {
      for (;;) ::pause();
    });
}

int worker_exit(int code) {
  std::cout.flush();
  std::cerr.flush();
  // The training log that could not be written (stdout on a full device, a closed pipe, closed): a run whose log
  // is lost does not end with 0 (the launcher relays a spawned rank's lines and says the same for them).
  errno = 0;
  const bool flushed = std::fflush(stdout) == 0;
  const int flush_errno = flushed ? 0 : errno;
  if (!flushed || std::cout.fail() || std::ferror(stdout)) {
    const std::string line = "cannot write the output: " + util::stdout_write_failure(flush_errno);
    say_error_raw(line.c_str());
    if (code == 0) code = 1;
  }
  std::fflush(nullptr);
  // Under an address-space limit the process ends here, whatever the code: a library's exit handler can wait
  // forever on a thread that will not finish (OpenBLAS joins its thread pool, whose threads retry forever for a
  // buffer the limit refuses). Without one it ends as before: an error's _exit made a rank that failed only because
  // another rank's check failed leave so fast that the launcher stopped the rank with the root cause before it said
  // it (train_test's nan-check case).
  if (util::address_space_limit()) ::_exit(code);
  bound_exit_handlers(code);
  return code;
}

namespace {

// One rank's worker: the state its steps share (the input, the job's launch facts, the runtime's options, the
// self-check's results), each step a method; run() is the sequence. A step that may end the worker before the
// bring-up returns its exit code.
class WorkerMain {
 public:
  WorkerMain(int argc, char** argv, const WorkerJob& job) : argc_(argc), argv_(argv), job_(job) {}

  int run();

 private:
  // main() has run: the start-up crash handler off, SIGPIPE and SIGXFSZ ignored, the open-file limit raised.
  void set_up_process();
  // The worker input's text from --input-fd N or --input FILE: a usage error's exit code, else none.
  std::optional<int> read_arguments();
  // The input decoded and the job's launch facts (torchrun's or srun's environment): a usage error's exit code.
  std::optional<int> read_job();
  // Logging (the rank prefix when the worker prefixes its own lines) and the one-BLAS-thread notice.
  void start_logging();
  // --exit-signal-handler's latch, before anything else of the job; else one from the environment undone.
  void latch_exit_signal();
  // The bring-up's failures and the job's said as this rank's exit code (1; a rank that follows another lingers).
  template <class F>
  int exit_code_of(F&& bring_up_and_run);
  // Whether the arguments were validated for this job's world size.
  void check_world_size();
  // Whether the open-file limit leaves the descriptors this world size needs (rule worker.open-file-limit).
  void check_open_file_limit();
  // The launch facts and the process-group layout of the arguments in the runtime's options.
  void plan_layout();
  // The backend: as given, else nccl where it can run and gloo elsewhere (rule dist.nccl-unavailable).
  void choose_backend();
  // The time limits (rule dist.time-limits), the flags they ignore (said by rank 0) and the timeouts logged.
  void read_timeouts();
  // The rest of the runtime's options: the config fingerprint, the derived arguments, the Gloo groups.
  void finish_options();
  // MR_DIST_REPORT's PREFIX<rank>.ready: the groups are built, with this rank's pid (tests).
  void mark_ready(Runtime& rt);
  // The self-check (repeated for MR_DIST_SELFCHECK_SECONDS) and its line.
  void self_check(Runtime& rt);
  // MR_DIST_REPORT's PREFIX<rank>.json: the groups, the all-reduce results.
  void write_report(Runtime& rt);
  // Initialisation over: the after-init timeout, MR_DIST_STALL, the last barrier and rank 0's bring-up line.
  void end_bring_up(Runtime& rt);
  // The job (none: 0), then the runtime finished: the job's exit code.
  int run_job(Runtime& rt);

  const int argc_;
  char** const argv_;
  const WorkerJob& job_;
  uint64_t open_at_start_ = 0;  // the descriptors open before any connection
  std::string text_;            // the worker input, as read
  WorkerInput in_;
  std::optional<LaunchInfo> launch_;
  std::string out_prefix_;      // "[rank R] " when the worker prefixes its own lines, else ""
  RuntimeOptions opts_;
  arg::DistributedBackend backend_{};  // as choose_backend resolved it
  JobTimeouts limits_;
  const char* report_ = nullptr;  // MR_DIST_REPORT
  std::vector<Check> results_;
  int rounds_ = 0;
};

int WorkerMain::run() {
  set_up_process();
  if (std::optional<int> code = read_arguments()) return *code;
  if (std::optional<int> code = read_job()) return *code;
  start_logging();
  latch_exit_signal();
  return exit_code_of([&] {
    check_world_size();
    check_open_file_limit();
    plan_layout();
    choose_backend();
    read_timeouts();
    finish_options();
    Runtime rt(opts_);
    mark_ready(rt);
    self_check(rt);
    write_report(rt);
    end_bring_up(rt);
    return run_job(rt);
  });
}

void WorkerMain::set_up_process() {
  g_in_main = true;
  unsetenv(kSetBlasThreads);  // ours, not for what the worker starts (OPENBLAS_NUM_THREADS=1 stays)
  if (g_startup_handler) {  // from here on a crash is a crash (a handler a library set meanwhile stays)
    for (int sig : {SIGSEGV, SIGBUS}) {
      struct sigaction now{};
      if (sigaction(sig, nullptr, &now) == 0 && now.sa_handler == on_startup_crash) std::signal(sig, SIG_DFL);
    }
  }
  std::signal(SIGPIPE, SIG_IGN);  // a vanished peer must surface as an error, not kill us silently
  // A file past the file-size limit (ulimit -f) fails its write with EFBIG, which the checkpoint's writer names
  // with the file (checkpoint.save-failed), instead of SIGXFSZ killing the rank with nothing named. CPython, so
  // Megatron, ignores SIGXFSZ at start-up too.
  std::signal(SIGXFSZ, SIG_IGN);
  // Its store, Gloo's connections and its libraries take a few descriptors per peer: the soft open-file limit
  // goes up to the hard one (a limit still too low is said below, before any connection).
  util::raise_open_file_limit();
  open_at_start_ = static_cast<uint64_t>(launch::open_descriptors(util::open_file_limit()));
}

std::optional<int> WorkerMain::read_arguments() {
  try {
    std::vector<std::string> args(argv_ + 1, argv_ + argc_);
    if (args.size() != 2) return usage("expected --input-fd N or --input FILE");
    if (args[0] == "--input-fd") text_ = read_fd(parse_input_fd(args[1]));
    else if (args[0] == "--input") text_ = read_file(args[1]);
    else return usage("unknown option " + args[0]);
  } catch (const std::exception& e) {
    return usage(e.what());
  }
  return std::nullopt;
}

std::optional<int> WorkerMain::read_job() {
  try {
    in_ = WorkerInput::decode(text_);
    launch_ = launch_info();
  } catch (const std::exception& e) {
    return usage(e.what());
  }
  if (!launch_) return usage("not inside a job: RANK/WORLD_SIZE (torchrun) or SLURM_PROCID/SLURM_NTASKS of an srun step are not set");
  return std::nullopt;
}

void WorkerMain::start_logging() {
  const bool prefix_myself = !launch_->spawned_by_megatron_run;
  log::init(log::parse_level(in_.log_level).value_or(log::Level::warning), prefix_myself ? launch_->rank : -1);
  out_prefix_ = prefix_myself ? "[rank " + std::to_string(launch_->rank) + "] " : "";
  // Said once a node, by its local rank 0 (with its rank prefix): the limit is the node's (its launcher's, which
  // every worker there inherits), so a node without one (rank 0's, say) says nothing and another node's first
  // worker still tells the user that its ranks run OpenBLAS single-threaded. megatron-run's own spawner sets the
  // variable (and says so, once a node) itself, so a worker it started never gets here: one line a node either way.
  if (g_one_blas_thread && launch_->local_rank == 0)
    if (const std::optional<uint64_t> as = util::address_space_limit())
      MR_LOG(warning) << "notice: OPENBLAS_NUM_THREADS=1 for the workers on this node: an address-space limit is "
                         "set (ulimit -v "
                      << *as / 1024
                      << ") and every OpenBLAS thread maps 128 MiB of it (set OPENBLAS_NUM_THREADS to choose)";
}

void WorkerMain::latch_exit_signal() {
  // --exit-signal-handler: the latch goes in before anything else of the job (Megatron installs its handler at
  // argument parsing, before distributed init and the model build): a signal during the bring-up is recorded, and
  // the training run saves and exits 0 after its first iteration, as Megatron's.
  if (in_.train && in_.args.exit_signal_handler)
    util::install_exit_signal(static_cast<int>(in_.args.exit_signal));
  else if (util::exit_signal_installed())  // from the environment, for a job that did not ask for it
    util::restore_exit_signal();
}

template <class F>
int WorkerMain::exit_code_of(F&& bring_up_and_run) {
  try {
    return bring_up_and_run();
  } catch (const DistError& e) {
    MR_LOG(error) << e.what();
    return 1;
  } catch (const RootCauseError& e) {
    return say_then_wait(e, kRootCauseGrace);
  } catch (const FollowerError& e) {
    // The launcher stops this rank as soon as the root-cause rank has ended; torchrun does the same.
    return say_then_wait(e, kFollowerLinger);
  } catch (const LayoutError& e) {
    MR_LOG(error) << "process-group layout: " << e.what();
    return 1;
  } catch (const std::bad_alloc& e) {
    say_resource_failure(e);
    return 1;
  } catch (const std::system_error& e) {
    if (!say_resource_failure(e)) MR_LOG(error) << e.what();
    return 1;
  } catch (const std::exception& e) {
    record_follower(e);  // an error that follows another rank's (a checkpoint load's verdict)
    MR_LOG(error) << e.what();
    return 1;
  }
}

void WorkerMain::check_world_size() {
  if (in_.args.world_size != launch_->world_size)
    throw DistError("the arguments were validated for world size " + std::to_string(in_.args.world_size) +
                    " but this job has " + std::to_string(launch_->world_size) + " ranks");
}

void WorkerMain::check_open_file_limit() {
  if (const std::optional<uint64_t> nofile = util::open_file_limit()) {
    const uint64_t need = launch::worker_files_needed(open_at_start_, launch_->world_size);
    if (*nofile < need)
      throw DistError(with_rule_id(
          launch::kWorkerOpenFileLimitRule.id,
          "this rank's open-file limit (RLIMIT_NOFILE, ulimit -n " + std::to_string(*nofile) + ") is too low for " +
              std::to_string(launch_->world_size) + " rank" + (launch_->world_size == 1 ? "" : "s") +
              ": megatron-run's worker needs " + std::to_string(need) + " descriptors (its store, Gloo's " +
              "connections to each peer, its libraries'); raise the limit (ulimit -n)"));
  }
}

void WorkerMain::plan_layout() {
  opts_.launch = *launch_;
  opts_.layout = LayoutSpec::from_args(in_.args, launch_->world_size);
}

void WorkerMain::choose_backend() {
  backend_ = in_.args.distributed_backend;
  // The backend: as given, else nccl where it can run and gloo elsewhere (rule dist.nccl-unavailable:
  // nccl asked for where it cannot run is refused before any communicator exists, so nothing can hang).
  // Ranks that share this machine's visible GPUs: the node's workers, or one under a virtual local rank
  // (megatron-run --virtual-local-rank shows each worker its own GPU only and says so).
  const char* virt = std::getenv("MR_VIRTUAL_LOCAL_RANK");
  const int sharing = virt && std::string(virt) == "1" ? 1 : std::max(1, launch_->local_world_size);
  const std::string missing = nccl_unavailable(sharing);
  if (!in_.backend_explicit) {
    if (!missing.empty()) {
      if (launch_->rank == 0)
        MR_LOG(warning) << "the nccl backend cannot run here (" << missing
                        << "): using the gloo backend (--distributed-backend chooses)";
      backend_ = arg::DistributedBackend::gloo;
    } else {
      backend_ = arg::DistributedBackend::nccl;
    }
  } else if (backend_ == arg::DistributedBackend::nccl && !missing.empty()) {
    throw DistError(with_rule_id(launch::kNcclUnavailableRule.id, "--distributed-backend nccl cannot run here: " + missing +
                                                              "; use --distributed-backend gloo (the CPU path)"));
  }
  opts_.backend = backend_;
}

void WorkerMain::read_timeouts() {
  try {
    limits_ = job_timeouts(in_);
  } catch (const std::runtime_error& e) {
    throw DistError(e.what());
  }
  opts_.timeout = limits_.startup;
  opts_.heartbeat = limits_.heartbeat;
  opts_.heartbeat_timeout = limits_.heartbeat_timeout;
  opts_.heartbeat_source = limits_.heartbeat_source;
  if (launch_->rank == 0 && !limits_.ignored.empty()) {
    std::string line = "notice: megatron-run's runtime does not act on ";
    line += limits_.ignored.size() == 1 ? "this flag; it is ignored:" : "these flags; they are ignored:";
    for (size_t i = 0; i < limits_.ignored.size(); ++i) line += (i ? "; " : " ") + limits_.ignored[i];
    MR_LOG(warning) << line;
  }
  MR_LOG(info) << "timeouts: collectives " << seconds_str(limits_.startup)
               << (limits_.after_init ? ", " + seconds_str(*limits_.after_init) + " after the bring-up" : std::string())
               << "; heartbeat every " << seconds_str(limits_.heartbeat) << ", a rank silent for "
               << seconds_str(limits_.heartbeat_timeout) << " fails the job";
}

void WorkerMain::finish_options() {
  opts_.fingerprint = config_fingerprint(in_.ns);
  opts_.derived_args = in_.derived;  // the launcher's (the namespace travels without its provenance)
  opts_.gloo_groups = in_.args.use_gloo_process_groups;
  MR_LOG(info) << launch_->describe() << ", backend " << arg::to_string(backend_);
}

void WorkerMain::mark_ready(Runtime& rt) {
  report_ = std::getenv("MR_DIST_REPORT");
  // "groups built, pid N": the rank's own pid, so that a fault check kills exactly this rank
  // (scripts/gpu-check-distributed.sh), not whatever worker a name search finds.
  if (report_ && *report_)
    std::ofstream(std::string(report_) + std::to_string(rt.rank()) + ".ready") << "groups built, pid " << getpid() << "\n";
}

void WorkerMain::self_check(Runtime& rt) {
  std::optional<double> loop = env_seconds("MR_DIST_SELFCHECK_SECONDS");
  SelfCheck check(rt, 1024);
  auto t0 = Clock::now();
  do {
    results_ = check.all_reduce_each_group();
    check.other_collectives();
    ++rounds_;
  } while (loop && std::chrono::duration<double>(Clock::now() - t0).count() < *loop);

  std::ostringstream line;
  line << out_prefix_ << "self-check passed (" << arg::to_string(backend_) << ", " << rounds_ << " round" << (rounds_ == 1 ? "" : "s")
       << "): all-reduce of rank+1 in " << results_.size() << " groups:";
  for (const Check& c : results_) line << " " << c.group << " " << ranks_str(c.ranks) << "=" << c.sum << ";";
  std::cout << line.str() << std::endl;
}

void WorkerMain::write_report(Runtime& rt) {
  if (!report_ || !*report_) return;
  std::ofstream f(std::string(report_) + std::to_string(rt.rank()) + ".json");
  f << "{\"rank\": " << rt.rank() << ", \"world_size\": " << rt.world_size() << ", \"backend\": \"" << arg::to_string(backend_)
    << "\", \"rounds\": " << rounds_ << ", \"communicators\": " << rt.communicator_count() << ", \"groups\": {";
  for (size_t i = 0; i < results_.size(); ++i)
    f << (i ? ", " : "") << "\"" << results_[i].group << "\": " << ranks_str(results_[i].ranks);
  f << "}, \"sums\": {";
  for (size_t i = 0; i < results_.size(); ++i) f << (i ? ", " : "") << "\"" << results_[i].group << "\": " << results_[i].sum;
  f << "}}\n";
}

void WorkerMain::end_bring_up(Runtime& rt) {
  // Initialisation is over: Megatron's --distributed-timeout-seconds-after-init replaces the start-up timeout
  // of every process group from here on (Megatron applies it after the first iteration; the bring-up's
  // self-check above plays that part here).
  if (limits_.after_init) {
    rt.set_timeout(*limits_.after_init);
    MR_LOG(info) << "collective timeout now " << seconds_str(*limits_.after_init)
                 << " (--distributed-timeout-seconds-after-init)";
  }
  stall_for_tests(rt.rank());
  rt.group("world").barrier();
  if (rt.rank() == 0) {
    const Layout& L = rt.layout();
    std::cout << out_prefix_ << "megatron-run: distributed bring-up passed on " << rt.world_size() << " rank"
              << (rt.world_size() == 1 ? "" : "s") << " (" << arg::to_string(backend_) << "; TP=" << L.spec.tp << " PP=" << L.spec.pp
              << " CP=" << L.spec.cp << " DP=" << L.dp << " EP=" << L.spec.ep << ")" << std::endl;
  }
}

int WorkerMain::run_job(Runtime& rt) {
  const int code = job_ ? job_(rt, in_, out_prefix_) : 0;
  rt.finish();
  return code;
}

}  // namespace

int worker_main(int argc, char** argv, const WorkerJob& job) { return WorkerMain(argc, argv, job).run(); }

}  // namespace mr::distributed
