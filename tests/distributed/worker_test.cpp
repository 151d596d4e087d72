// The worker (lib/distributed/worker.cpp) under a tight address-space limit (`ulimit -v`, RLIMIT_AS): across the
// band where its start-up, the store, Gloo or the training buffers run out, every job ends with exit 0 or 1,
// never a signal or a hang, and a failure names the limit. The band is found relative to what this build's
// worker needs just to load its libraries (it varies with the build, the libraries and the machine).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <new>
#include <regex>
#include <system_error>
#include <thread>

#include <elf.h>
#include <link.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "proc.h"
#include "launch/free_port.h"
#include "util/resources.h"

namespace {

// `argv` under `ulimit -v kib`, waited for `limit` at most.
mrtest::Proc run_limited(long kib, const std::vector<std::string>& argv, const mrtest::TempDir& dir,
                         const std::string& tag, std::chrono::seconds limit,
                         const std::map<std::string, std::string>& env = {}) {
  std::vector<std::string> a = {"/bin/sh", "-c", "ulimit -v " + std::to_string(kib) + " && exec \"$0\" \"$@\""};
  a.insert(a.end(), argv.begin(), argv.end());
  std::vector<mrtest::Proc> p = {mrtest::start(a, env, dir, tag)};
  mrtest::wait_all(p, limit);
  return p[0];
}

// The smallest limit (KiB, to 16 MiB) at which the worker loads its libraries and gets to main (its usage
// error, exit 2), with one BLAS thread as megatron-run gives it under a limit.
long load_minimum(const mrtest::TempDir& dir) {
  const std::string worker = std::string(MR_BIN_DIR) + "/megatron-run-worker";
  long lo = 256L << 10, hi = 64L << 20;
  auto loads = [&](long kib) {
    return run_limited(kib, {worker}, dir, "load", std::chrono::seconds(20), {{"OPENBLAS_NUM_THREADS", "1"}})
               .exit_code() == 2;
  };
  if (!loads(hi)) return -1;
  while (hi - lo > (16L << 10)) {
    const long mid = (lo + hi) / 2;
    (loads(mid) ? hi : lo) = mid;
  }
  return hi;
}

// The same, found once for all the test cases.
long cached_load_minimum() {
  static const long kib = [] {
    mrtest::TempDir dir;
    return load_minimum(dir);
  }();
  return kib;
}

// The default job's arguments (megatron-run's).
std::vector<std::string> default_job() {
  return {mrtest::megatron_run(), "--config", std::string(MR_SOURCE_DIR) + "/configs/default.yaml", "--train-iters",
          "2", "--lr-warmup-iters", "1", "--distributed-backend", "gloo"};
}

// The dynamic loader this test binary was started with (its PT_INTERP), "" if none.
std::string own_loader() {
  std::string found;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        for (int i = 0; i < info->dlpi_phnum; ++i)
          if (info->dlpi_phdr[i].p_type == PT_INTERP)
            *static_cast<std::string*>(data) = reinterpret_cast<const char*>(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
        return 1;  // the first object is the program itself
      },
      &found);
  return found;
}

size_t count(const std::string& s, const std::string& part) {
  size_t n = 0;
  for (size_t at = s.find(part); at != std::string::npos; at = s.find(part, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("resource failures are named; other exceptions are not", "[worker][ulimit]") {
  CHECK_THAT(mr::util::resource_failure(std::bad_alloc()), Catch::Contains("an allocation failed"));
  CHECK_THAT(mr::util::resource_failure(std::system_error(EAGAIN, std::generic_category(), "thread")),
             Catch::Contains("a thread could not be created"));
  CHECK(mr::util::resource_failure(std::system_error(ECONNREFUSED, std::generic_category(), "x")).empty());
  CHECK(mr::util::resource_failure(std::runtime_error("x")).empty());
}

TEST_CASE("system failures name the limit behind them", "[worker][ulimit][open-files]") {
  CHECK_THAT(mr::util::system_failure("pipe", EMFILE),
             Catch::StartsWith("pipe: Too many open files: this process's open-file limit (RLIMIT_NOFILE, ulimit -n "));
  CHECK_THAT(mr::util::system_failure("fork", EAGAIN),
             Catch::StartsWith("fork: Resource temporarily unavailable: the process or user thread limit (ulimit -u "));
  CHECK(mr::util::system_failure("pipe", EBADF) == "pipe: Bad file descriptor");
  // The spawner's raw words get the same line; a message that names a limit already, or another errno, stays.
  CHECK(mr::util::with_limit_hint("fork: Resource temporarily unavailable") == mr::util::system_failure("fork", EAGAIN));
  CHECK(mr::util::with_limit_hint("socketpair: Too many open files") == mr::util::system_failure("socketpair", EMFILE));
  CHECK(mr::util::with_limit_hint("pipe: Bad file descriptor") == "pipe: Bad file descriptor");
  // c10d's and Gloo's words for EMFILE are said as the open-file limit; others are not.
  CHECK_THAT(mr::util::open_file_failure("The server socket on ?UNKNOWN? has failed to accept a connection (errno: 24 "
                                         "- Too many open files)."),
             Catch::StartsWith("out of file descriptors: this rank's open-file limit (RLIMIT_NOFILE, ulimit -n "));
  CHECK_THAT(mr::util::open_file_failure("accept: Too many open files"), Catch::Contains("ulimit -n"));
  CHECK_THAT(mr::util::open_file_failure("socket: Too many open files in system"), Catch::Contains("fs.file-max"));
  CHECK(mr::util::open_file_failure("Connection refused (errno: 111)").empty());
  // A message without an errno, while (and only while) the descriptors are all but gone.
  CHECK_FALSE(mr::util::open_files_nearly_exhausted());
  CHECK(mr::util::open_file_failure("Cannot resolve 127.0.0.1 to a (local) address", true).empty());
  // Under a soft limit a little above what is open now (put back after), this process fills it.
  rlimit before{};
  REQUIRE(getrlimit(RLIMIT_NOFILE, &before) == 0);
  int highest = 0;
  for (int fd = 0; fd < 4096; ++fd)
    if (fcntl(fd, F_GETFD) != -1) highest = fd;
  rlimit tight = before;
  tight.rlim_cur = static_cast<rlim_t>(highest + 20);
  REQUIRE(setrlimit(RLIMIT_NOFILE, &tight) == 0);
  std::vector<int> held;
  while (!mr::util::open_files_nearly_exhausted()) {
    const int fd = fcntl(2, F_DUPFD_CLOEXEC, 0);
    if (fd < 0) break;
    held.push_back(fd);
  }
  const bool exhausted = mr::util::open_files_nearly_exhausted();
  const std::string line = mr::util::open_file_failure("Cannot resolve 127.0.0.1 to a (local) address", true);
  for (int fd : held) close(fd);
  setrlimit(RLIMIT_NOFILE, &before);
  CHECK(exhausted);
  CHECK_THAT(line, Catch::StartsWith("out of file descriptors: this rank's open-file limit"));
  CHECK_THAT(line, Catch::EndsWith("(Cannot resolve 127.0.0.1 to a (local) address)"));
}

TEST_CASE("the worker under an open-file limit too low for its job: one line naming it, exit 1",
          "[worker][ulimit][open-files]") {
  mrtest::TempDir dir;
  // Started as torchrun starts a rank (megatron-run hands over to the worker): no launcher checked the limit.
  const int port = mrtest::store_port();
  const std::map<std::string, std::string> env = {{"RANK", "0"},          {"WORLD_SIZE", "1"},
                                                  {"LOCAL_RANK", "0"},    {"LOCAL_WORLD_SIZE", "1"},
                                                  {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", std::to_string(port)}};
  std::vector<std::string> a = {"/bin/sh", "-c", "ulimit -n 16 && exec \"$0\" \"$@\""};
  const std::vector<std::string> job = default_job();
  a.insert(a.end(), job.begin(), job.end());
  std::vector<mrtest::Proc> p = {mrtest::start(a, env, dir, "nofile")};
  mrtest::wait_all(p, std::chrono::seconds(60));
  const std::string out = p[0].out() + p[0].err();
  INFO(out);
  REQUIRE_FALSE(p[0].timed_out);
  CHECK(p[0].exit_code() == 1);
  CHECK_THAT(out, Catch::Contains("error[dist.open-file-limit]: this rank's open-file limit (RLIMIT_NOFILE, ulimit -n 16) "
                                  "is too low for 1 rank"));
  CHECK_THAT(out, !Catch::Contains("rendezvous store"));
  // A soft limit that low under a higher hard one is raised: the job runs.
  a[2] = "ulimit -Sn 16 && exec \"$0\" \"$@\"";
  std::vector<mrtest::Proc> q = {mrtest::start(a, env, dir, "nofile-soft")};
  mrtest::wait_all(q, std::chrono::seconds(60));
  INFO(q[0].out() + q[0].err());
  CHECK(q[0].exit_code() == 0);
}

TEST_CASE("the default job under ulimit -v: exit 0 or 1 with the limit named, never a signal or a hang",
          "[worker][ulimit]") {
  mrtest::TempDir dir;
  const long base = cached_load_minimum();
  INFO("the worker loads from ulimit -v " << base);
  REQUIRE(base > 0);
  const std::vector<std::string> job = default_job();
  const std::map<std::string, std::string> env = {{"MR_DIST_TIMEOUT_S", "20"}};
  static const std::regex named(R"(error(\[[a-z.-]+\])?: .*ulimit -v \d+)");
  for (long extra_mib : {-32L, 0L, 32L, 64L, 96L, 128L, 192L, 256L, 1024L}) {
    const long kib = base + extra_mib * 1024;
    mrtest::Proc p = run_limited(kib, job, dir, "job", std::chrono::seconds(25), env);
    const std::string out = p.out() + p.err();
    INFO("ulimit -v " << kib << " (load minimum + " << extra_mib << " MiB): exit " << p.exit_code() << "\n" << out);
    REQUIRE_FALSE(p.timed_out);
    CHECK((p.exit_code() == 0 || p.exit_code() == 1));
    // A failure names the limit; only the dynamic loader's own failure (before any of the worker's code runs)
    // says something else, and says it is a mapping that failed.
    if (p.exit_code() == 1)
      CHECK((std::regex_search(out, named) || out.find("error while loading shared libraries") != std::string::npos));
    if (extra_mib == 1024) CHECK(p.exit_code() == 0);  // a gigabyte above the load minimum is plenty
  }
}

// A library failing in its constructor (after .preinit_array, before main()): one line with the worker's own rank
// prefix (RANK set, not spawned by megatron-run: under torchrun or srun) and exit 1. The crash line is made in
// .preinit_array, where getenv sees no environment yet: it must read the process's envp.
TEST_CASE("a library that fails before the worker's main: one line with the rank, exit 1", "[worker][ulimit]") {
  mrtest::TempDir dir;
  const std::string worker = std::string(MR_BIN_DIR) + "/megatron-run-worker";
  const long kib = 64L << 20;  // a limit (the crash handler is set only under one), far above what the worker needs
  // Preloaded into the worker only (env sets it), not into the shell that sets the limit.
  const std::vector<std::string> preloaded = {"/usr/bin/env", std::string("LD_PRELOAD=") + MR_FAIL_AT_LOAD_LIB, worker};
  for (const char* how : {"segv", "bad_alloc"}) {
    mrtest::Proc p = run_limited(kib, preloaded, dir, how, std::chrono::seconds(30),
                                 {{"MR_TEST_FAIL_AT_LOAD", how}, {"RANK", "3"}});
    const std::string err = p.err();
    INFO(how << ": exit " << p.exit_code() << "\n" << err);
    REQUIRE_FALSE(p.timed_out);
    CHECK(p.exit_code() == 1);
    if (std::string(how) == "segv")
      CHECK(std::regex_search(err, std::regex(R"(^\[rank 3\] error: a library crashed \(SIGSEGV\) while the worker's )"
                                              R"(libraries started, with \d+ MiB of this rank's address-space limit of )"
                                              R"(65536 MiB in use \(RLIMIT_AS, ulimit -v 67108864\))")));
    else
      CHECK(err.rfind("[rank 3] error: out of address space: an allocation failed", 0) == 0);
    CHECK(std::count(err.begin(), err.end(), '\n') == 1);
  }
  // Spawned by megatron-run (MR_SPAWNED=1), which prefixes the worker's lines itself: no prefix of its own.
  mrtest::Proc p = run_limited(kib, preloaded, dir, "spawned", std::chrono::seconds(30),
                               {{"MR_TEST_FAIL_AT_LOAD", "segv"}, {"RANK", "3"}, {"MR_SPAWNED", "1"}});
  INFO(p.err());
  CHECK(p.exit_code() == 1);
  CHECK(p.err().rfind("error: a library crashed (SIGSEGV) while the worker's libraries started, with ", 0) == 0);
}

TEST_CASE("far below the load minimum the launcher names the limit behind the loader's exit code 127",
          "[worker][ulimit]") {
  mrtest::TempDir dir;
  const long base = cached_load_minimum();
  REQUIRE(base > 0);
  const long kib = base - 512 * 1024;  // the worker's libraries do not fit; megatron-run (no LibTorch) runs
  mrtest::Proc p = run_limited(kib, default_job(), dir, "loader", std::chrono::seconds(25));
  const std::string out = p.out() + p.err();
  INFO("ulimit -v " << kib << ": exit " << p.exit_code() << "\n" << out);
  REQUIRE_FALSE(p.timed_out);
  CHECK(p.exit_code() == 127);
  CHECK_THAT(out, Catch::Contains("error while loading shared libraries"));
  CHECK_THAT(out, Catch::Contains("    hint: exit code 127 under this node's address-space limit (RLIMIT_AS, ulimit -v " +
                                  std::to_string(kib) + "): the dynamic loader exits 127"));
  CHECK_THAT(out, Catch::Contains("raise the limit (ulimit -v)"));
}

TEST_CASE("under ulimit -v a worker megatron-run's spawner did not start gives OpenBLAS one thread itself, says so "
          "once, and leaves the user's choice", "[worker][ulimit]") {
  mrtest::TempDir dir;
  const long base = cached_load_minimum();
  REQUIRE(base > 0);
  const long kib = base + 1024 * 1024;
  const std::string said = "OPENBLAS_NUM_THREADS=1 for the workers on this node: an address-space limit is set "
                           "(ulimit -v " + std::to_string(kib) + ")";
  // Under the limit, with no BLAS count from the test's own environment unless `keep_blas`.
  auto limited = [&](const std::vector<std::string>& argv, bool keep_blas = false) {
    std::vector<std::string> a = {"/bin/sh", "-c",
                                  std::string(keep_blas ? "" : "unset OPENBLAS_NUM_THREADS GOTO_NUM_THREADS; ") +
                                      "ulimit -v " + std::to_string(kib) + " && exec \"$0\" \"$@\""};
    a.insert(a.end(), argv.begin(), argv.end());
    return a;
  };
  // Rank 0 of a one-rank job as torchrun starts it: megatron-run hands over to the worker, which (no BLAS count
  // set) starts itself again, same pid, with OPENBLAS_NUM_THREADS=1, before any library's constructor ran: the
  // environment the process was last started with, which OpenBLAS's constructor reads, has it. Rank 0 stays up a
  // second after the bring-up.
  std::map<std::string, std::string> env = mrtest::rank_env(0, 1, mrtest::store_port());
  env["MR_DIST_TIMEOUT_S"] = "20";
  env["MR_DIST_STALL"] = "0:1";
  std::vector<mrtest::Proc> p = {mrtest::start(limited(default_job()), env, dir, "torchrun")};
  const bool one_thread = mrtest::wait_for(
      [&] {
        return mrtest::env_of(p[0].pid, "OPENBLAS_NUM_THREADS") == "1" &&
               mrtest::env_of(p[0].pid, "MR_WORKER_SET_BLAS_THREADS") == "1";
      },
      std::chrono::milliseconds(15000));
  mrtest::wait_all(p, std::chrono::seconds(25));
  std::string out = p[0].out() + p[0].err();
  INFO("under another launcher, ulimit -v " << kib << ": exit " << p[0].exit_code() << "\n" << out);
  CHECK(one_thread);
  CHECK(p[0].exit_code() == 0);
  CHECK(count(out, said) == 1);
  CHECK_THAT(out, Catch::Contains("[rank 0] warning: notice: " + said));

  // The user's count stays, and nothing is said.
  env["MASTER_PORT"] = std::to_string(mrtest::store_port());
  env["OPENBLAS_NUM_THREADS"] = "2";
  p = {mrtest::start(limited(default_job(), true), env, dir, "user")};
  mrtest::wait_all(p, std::chrono::seconds(25));
  out = p[0].out() + p[0].err();
  INFO("OPENBLAS_NUM_THREADS=2: exit " << p[0].exit_code() << "\n" << out);
  CHECK(p[0].exit_code() == 0);
  CHECK(count(out, "OPENBLAS_NUM_THREADS") == 0);

  // Under megatron-run's spawner the launcher sets it and says so; the worker says nothing more.
  std::vector<std::string> spawned = default_job();
  spawned.insert(spawned.begin() + 1, {"--nproc-per-node", "1"});
  p = {mrtest::start(limited(spawned), {{"MR_DIST_TIMEOUT_S", "20"}}, dir, "spawned")};
  mrtest::wait_all(p, std::chrono::seconds(25));
  out = p[0].out() + p[0].err();
  INFO("megatron-run --nproc-per-node 1: exit " << p[0].exit_code() << "\n" << out);
  CHECK(p[0].exit_code() == 0);
  CHECK(count(out, said) == 1);
  CHECK_THAT(out, Catch::Contains("megatron-run: " + said));
}

// A job over several nodes as torchrun starts it (two nodes of two ranks, simulated on this machine: LOCAL_RANK and
// LOCAL_WORLD_SIZE as torchrun sets them on each node): the limit is a node's. Node 0, rank 0's, has none; node 1
// has one, so its ranks start themselves again with one BLAS thread, and its local rank 0 (rank 2) says so once,
// with its rank. Before, only rank 0 could say it, and nothing told the user.
TEST_CASE("under ulimit -v on a node other than rank 0's, that node's local rank 0 says OPENBLAS_NUM_THREADS=1 once",
          "[worker][ulimit]") {
  mrtest::TempDir dir;
  const long base = cached_load_minimum();
  REQUIRE(base > 0);
  const long kib = base + 2048 * 1024;
  const std::string said = "OPENBLAS_NUM_THREADS=1 for the workers on this node: an address-space limit is set "
                           "(ulimit -v " + std::to_string(kib) + ")";
  std::vector<std::string> job = {mrtest::megatron_run()};
  for (const std::string& a : mrtest::bring_up_args({})) job.push_back(a);
  const int port = mrtest::store_port();
  std::vector<mrtest::Proc> p;
  for (int r = 0; r < 4; ++r) {
    const bool limited = r >= 2;
    std::vector<std::string> argv = {
        "/bin/sh", "-c",
        std::string("unset OPENBLAS_NUM_THREADS GOTO_NUM_THREADS; ") +
            (limited ? "ulimit -v " + std::to_string(kib) + " && " : "") + "exec \"$0\" \"$@\""};
    argv.insert(argv.end(), job.begin(), job.end());
    const std::map<std::string, std::string> env = mrtest::rank_env(
        r, 4, port,
        {{"LOCAL_RANK", std::to_string(r % 2)}, {"LOCAL_WORLD_SIZE", "2"}, {"GROUP_RANK", std::to_string(r / 2)},
         {"MR_DIST_TIMEOUT_S", "30"}, {"MR_DIST_STALL", "3:2"}});
    p.push_back(mrtest::start(argv, env, dir, "rank" + std::to_string(r), r));
  }
  // Seen while rank 3 stays up (2 s after the bring-up): node 1's ranks run with one BLAS thread, node 0's do not.
  std::string node0_blas = "?";
  const bool node1_one_thread = mrtest::wait_for(
      [&] {
        node0_blas = mrtest::env_of(p[1].pid, "OPENBLAS_NUM_THREADS");
        return mrtest::env_of(p[3].pid, "OPENBLAS_NUM_THREADS") == "1" &&
               mrtest::env_of(p[3].pid, "MR_WORKER_SET_BLAS_THREADS") == "1";
      },
      std::chrono::milliseconds(30000));
  mrtest::wait_all(p, std::chrono::seconds(60));
  const std::string out = mrtest::all_output(p);
  INFO(out);
  for (const mrtest::Proc& q : p) CHECK(q.exit_code() == 0);
  CHECK(node1_one_thread);
  CHECK(node0_blas.empty());
  CHECK(count(out, "OPENBLAS_NUM_THREADS=1") == 1);
  CHECK_THAT(out, Catch::Contains("[rank 2] warning: notice: " + said));
}

// Started through the dynamic loader ("ld.so megatron-run-worker ...", as some module systems and wrappers run
// programs), /proc/self/exe is the loader, not the worker: starting it again with the worker's arguments would run
// the loader on them. Under a limit the worker then goes on without the re-exec, as when the exec fails.
TEST_CASE("under ulimit -v a worker started through the dynamic loader does not exec the loader on its arguments",
          "[worker][ulimit]") {
  mrtest::TempDir dir;
  const std::string loader = own_loader();
  REQUIRE_FALSE(loader.empty());
  const std::string worker = std::string(MR_BIN_DIR) + "/megatron-run-worker";
  const std::string missing = (dir.path / "no-such-input").string();
  std::vector<std::string> a = {"/bin/sh", "-c",
                                "unset OPENBLAS_NUM_THREADS GOTO_NUM_THREADS; ulimit -v 67108864 && exec \"$0\" \"$@\"",
                                loader, worker, "--input", missing};
  std::vector<mrtest::Proc> p = {mrtest::start(a, {}, dir, "ldso")};
  mrtest::wait_all(p, std::chrono::seconds(30));
  const std::string err = p[0].err();
  INFO("exit " << p[0].exit_code() << "\n" << err);
  REQUIRE_FALSE(p[0].timed_out);
  CHECK(p[0].exit_code() == 2);  // the worker's own usage error, not the loader's
  CHECK_THAT(err, Catch::Contains("usage: megatron-run-worker --input-fd N | --input FILE"));
  CHECK_THAT(err, !Catch::Contains("unrecognized option"));
}

// Where /proc is not mounted (a chroot or a sandbox without it), /proc/self/exe cannot be run: the worker starts
// itself again by the path it was started with (AT_EXECFN) instead of going on with a BLAS thread a processor.
// Seen from outside while it waits for its input (a FIFO nobody writes to).
TEST_CASE("under ulimit -v without /proc the worker still starts itself again with OPENBLAS_NUM_THREADS=1",
          "[worker][ulimit]") {
  mrtest::TempDir dir;
  if (std::system("/usr/bin/unshare -m true >/dev/null 2>&1") != 0) {
    WARN("skipped: unshare -m is not permitted here (it hides /proc in a private mount namespace)");
    return;
  }
  const std::string worker = std::string(MR_BIN_DIR) + "/megatron-run-worker";
  const std::string fifo = (dir.path / "input").string();
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  std::vector<std::string> a = {
      "/usr/bin/unshare", "-m", "/bin/sh", "-c",
      "mount -t tmpfs none /proc && unset OPENBLAS_NUM_THREADS GOTO_NUM_THREADS && ulimit -v 67108864 && "
      "exec 5<>\"$1\" && exec \"$0\" --input-fd 5",
      worker, fifo};
  std::vector<mrtest::Proc> p = {mrtest::start(a, {}, dir, "noproc")};
  // Its environment once started again (before the fix it stayed without either, and this waited in vain).
  std::string blas, mark;
  const bool restarted = mrtest::wait_for(
      [&] {
        blas = mrtest::env_of(p[0].pid, "OPENBLAS_NUM_THREADS");
        mark = mrtest::env_of(p[0].pid, "MR_WORKER_SET_BLAS_THREADS");
        return blas == "1" && mark == "1";
      },
      std::chrono::milliseconds(15000));
  ::kill(-p[0].pid, SIGKILL);
  mrtest::wait_all(p, std::chrono::seconds(10));
  INFO("stderr: " << p[0].err());
  CHECK(restarted);
  CHECK(blas == "1");
  CHECK(mark == "1");
}

// An exit handler that never returns (a library's clean-up waiting on a thread that will not finish: a NaN stop under
// load once kept both ranks alive 150 s after their verdicts) no longer keeps the worker alive: it ends with its own
// exit code once MR_WORKER_EXIT_HANDLERS_S has passed, and says so.
TEST_CASE("an exit handler that never returns: the worker ends with its code after the bound, and says so",
          "[worker][exit-handlers]") {
  mrtest::TempDir dir;
  const std::map<std::string, std::string> env = {{"MR_TEST_HANG_AT_EXIT", "1"}, {"MR_WORKER_EXIT_HANDLERS_S", "1"}};
  const std::vector<std::string> ok = default_job();
  std::vector<std::string> nan = ok;
  nan.insert(nan.end(), {"--nproc-per-node", "2"});
  std::map<std::string, std::string> nan_env = env;
  nan_env["MR_RUN_NONFINITE_AT"] = "1";
  std::vector<mrtest::Proc> p = {mrtest::start(ok, env, dir, "ok"), mrtest::start(nan, nan_env, dir, "nan")};
  mrtest::wait_all(p, std::chrono::seconds(90));
  for (mrtest::Proc& q : p) {
    INFO(q.out() << q.err());
    REQUIRE_FALSE(q.timed_out);
    CHECK(count(q.out() + q.err(), "warning: the worker's exit handlers (its libraries' clean-up) were still running 1 s "
                                   "after it ended; the process ends now with exit code ") >= 1);
  }
  CHECK(p[0].exit_code() == 0);
  CHECK(count(p[0].out() + p[0].err(), "the process ends now with exit code 0 ") == 1);
  CHECK(p[1].exit_code() == 1);  // the nan-check's verdict, as without the hang
  CHECK(count(p[1].out() + p[1].err(), "run.nan-check") >= 1);
}

// MR_WORKER_EXIT_HANDLERS_S=0 is no bound: a 0 s bound raced every normal exit, saying the warning for a run whose
// exit handlers were fine (review diff40 #8).
TEST_CASE("MR_WORKER_EXIT_HANDLERS_S=0 puts no bound on the exit handlers", "[worker][exit-handlers]") {
  mrtest::TempDir dir;
  std::vector<mrtest::Proc> ps = {mrtest::start(default_job(), {{"MR_WORKER_EXIT_HANDLERS_S", "0"}}, dir, "zero")};
  mrtest::wait_all(ps, std::chrono::seconds(90));
  INFO(ps[0].out() << ps[0].err());
  REQUIRE_FALSE(ps[0].timed_out);
  CHECK(ps[0].exit_code() == 0);
  CHECK(count(ps[0].out() + ps[0].err(), "exit handlers") == 0);
}
