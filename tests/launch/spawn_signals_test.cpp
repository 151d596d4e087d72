// WaitingSignalNotice (lib/launch/spawn_signals.cpp), in a child process of its own: what a stop signal writes
// while the launchers wait for each other, and how the launcher ends.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include "launch/spawn.h"
#include "launch/spawn_detail.h"
#include "launch_test_util.h"

namespace {

size_t count_of(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + what.size())) ++n;
  return n;
}

}  // namespace

// A second stop signal that comes while the first one's handler writes (its record is long and stderr is a pipe
// nobody reads yet: the write blocks) must not run its own handler inside the first: one notice, one record, and
// the launcher ends by the first signal.
TEST_CASE("a second stop signal during the first one's record writes nothing more", "[launch][signals]") {
  int pipefd[2];
  REQUIRE(pipe(pipefd) == 0);
  const std::string big(256 * 1024, 'x');  // several times a pipe's buffer
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    dup2(pipefd[1], 2);
    close(pipefd[0]);
    close(pipefd[1]);
    mr::launch::WaitingRecord record{[&big](int sig) { return std::make_pair("{\"sig\": " + std::to_string(sig) + ", \"pad\": \"" + big + "\", \"t\": ", std::string("}")); },
                                     std::chrono::steady_clock::now()};
    mr::launch::WaitingSignalNotice waiting(record);
    for (;;) pause();
  }
  close(pipefd[1]);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the child waits in pause()
  kill(pid, SIGTERM);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // its handler is blocked in write()
  kill(pid, SIGINT);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  std::string err;
  char buf[65536];
  for (ssize_t n; (n = read(pipefd[0], buf, sizeof buf)) > 0;) err.append(buf, static_cast<size_t>(n));
  close(pipefd[0]);
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  INFO("stderr: " << err.size() << " bytes; " << err.substr(0, 200));
  CHECK(count_of(err, "while waiting for the other nodes; exiting") == 1);
  CHECK(count_of(err, "{\"sig\": ") == 1);
  CHECK(err.rfind("megatron-run: received signal 15 (SIGTERM)", 0) == 0);
  CHECK(err.size() > big.size());
  CHECK(err.back() == '\n');
  REQUIRE(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGTERM);
}

// nohup's SIGHUP (ignored when the launcher starts) stays ignored while the workers run, as while the launchers
// wait (review 28c F9); named in --signals-to-handle it is caught and passed on.
TEST_CASE("a signal the launcher was started ignoring stays ignored unless --signals-to-handle names it",
          "[launch][signals][process]") {
  mrtest::launcher::ScratchDir dir("mr-nohup");
  auto hup = [&](const std::string& extra) {
    return mrtest::run_shell("cd '" + dir.path.string() + "' && rm -f ready.*; (exec nohup env " +
                             mrtest::launcher::kRun + "--nproc-per-node 2 " + extra + " --no-append-args -- sh -c "
                             "'touch ready.$RANK; sleep 1; echo done-$RANK' > out.txt 2>&1) & pid=$!; "
                             "for i in $(seq 600); do [ -e ready.0 ] && [ -e ready.1 ] && break; sleep 0.05; done; "
                             "kill -HUP $pid; wait $pid; echo exit=$?; cat out.txt");
  };
  const mrtest::Proc kept = hup("");
  INFO(kept.out);
  CHECK(count_of(kept.out, "exit=0") == 1);
  CHECK(count_of(kept.out, "[rank 0] done-0") == 1);
  CHECK(count_of(kept.out, "[rank 1] done-1") == 1);
  CHECK(count_of(kept.out, "received signal 1") == 0);
  const mrtest::Proc named = hup("--signals-to-handle SIGHUP,SIGTERM");
  INFO(named.out);
  CHECK(count_of(named.out, "received signal 1 (SIGHUP); forwarding it to the workers") == 1);
  CHECK(count_of(named.out, "exit=129") == 1);
}

// The launcher's repeat window (review user40 #3, #4): only the same signal within kSameSignal (100 ms) of its last
// pass is folded into it; silently only when one process sent both with kill() (coreutils' `timeout`: the child,
// then its process group), said otherwise (a terminal's Ctrl-C has no sender pid). Another signal is never a
// repeat, however soon. Times are given, so nothing here races.
TEST_CASE("a repeated signal is folded only within 100 ms, only the same number, silently only from one sender",
          "[launch][signals][signal]") {
  using mr::launch::detail::Repeat;
  using mr::launch::detail::SignalRecord;
  using mr::launch::detail::SignalRepeats;
  using namespace std::chrono_literals;
  CHECK(mr::launch::detail::kSameSignal == 100ms);
  SignalRepeats r;
  const auto t0 = SignalRepeats::Clock::now();
  const SignalRecord int_timeout{SIGINT, 4242}, int_tty{SIGINT, 0}, int_other{SIGINT, 4243}, term{SIGTERM, 4242};
  CHECK(r.check(int_timeout, t0) == Repeat::no);  // nothing passed yet
  CHECK_FALSE(r.seen(SIGINT));
  r.passed(int_timeout, t0);
  CHECK(r.seen(SIGINT));
  CHECK(r.check(int_timeout, t0) == Repeat::quiet);           // timeout's second delivery, in the same pass
  CHECK(r.check(int_timeout, t0 + 99ms) == Repeat::quiet);
  CHECK(r.check(int_other, t0 + 1ms) == Repeat::said);        // another process
  CHECK(r.check(int_tty, t0 + 1ms) == Repeat::said);          // a Ctrl-C (the kernel's)
  CHECK(r.check(int_timeout, t0 + 100ms) == Repeat::no);      // a second stop signal
  CHECK(r.check(int_tty, t0 + 300ms) == Repeat::no);          // a human's double Ctrl-C
  CHECK(r.check(term, t0 + 1ms) == Repeat::no);               // SIGTERM after SIGINT: another signal
  // A Ctrl-C passed on: a second one within the window is said, never quiet (no sender to match).
  SignalRepeats tty;
  tty.passed(int_tty, t0);
  CHECK(tty.check(int_tty, t0 + 50ms) == Repeat::said);
  CHECK(tty.check(int_tty, t0 + 150ms) == Repeat::no);
}
