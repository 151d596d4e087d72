// launch/failure_report.h: reading an error file in PyTorch's @record format (and in others), the wording of
// a worker's end. The summary itself is tested on real programs in supervision_test.cpp.
#include <catch2/catch.hpp>

#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "config/value.h"
#include "launch/failure_report.h"

namespace fs = std::filesystem;
using namespace mr::launch;

TEST_CASE("an error file in PyTorch's @record format, and others", "[launch][failure-report]") {
  const fs::path f = fs::temp_directory_path() / ("mr-error-file-" + std::to_string(getpid()) + ".json");
  auto with = [&](const std::string& text) {
    std::ofstream(f) << text;
    return read_error_file(f.string());
  };
  auto e = with(R"({"message": {"message": "RuntimeError: boom", "extraInfo": {"py_callstack": "Traceback...\n  x", "timestamp": "1700000000"}}})");
  REQUIRE(e);
  CHECK(e->message == "RuntimeError: boom");
  CHECK(e->traceback == "Traceback...\n  x");
  CHECK(e->timestamp == "1700000000");
  e = with(R"({"message": "plain words"})");
  REQUIRE(e);
  CHECK(e->message == "plain words");
  e = with("not json at all");
  REQUIRE(e);
  CHECK(e->raw == "not json at all");
  fs::remove(f);
  CHECK_FALSE(read_error_file(f.string()));
  CHECK_FALSE(read_error_file(""));
  CHECK(signal_name(15) == "SIGTERM");
  CHECK(describe_status(9) == "was killed by signal 9 (SIGKILL)");  // a wait status: killed by signal 9
}

namespace {
const mr::Value& at(const mr::Value& v, const std::string& key) {
  for (const auto& [k, e] : v.as_object())
    if (k == key) return e;
  FAIL("no key " << key << " in " << v.json());
  static const mr::Value none;
  return none;
}
}  // namespace

TEST_CASE("the launcher's own error file: the root cause's, with its exit code, or a record of its end",
          "[launch][failure-report]") {
  const fs::path f = fs::temp_directory_path() / ("mr-root-error-" + std::to_string(getpid()) + ".json");
  WorkerFailure root;
  root.rank = 3;
  root.local_rank = 1;
  root.pid = 4242;
  root.status = 7 << 8;  // exited with code 7
  root.error_file = f.string();
  root.when = std::chrono::system_clock::time_point(std::chrono::seconds(1700000000));
  // torchrun's dump_error_file: the worker's @record file as it is, message.errorCode the exit code.
  std::ofstream(f) << R"({"message": {"message": "RuntimeError: boom",
      "extraInfo": {"py_callstack": "Traceback", "timestamp": "1"}}, "other": 1})";
  mr::Value v = mr::Value::parse_json(launcher_error_record(root));
  CHECK(at(at(v, "message"), "message").as_str() == "RuntimeError: boom");
  CHECK(at(at(at(v, "message"), "extraInfo"), "py_callstack").as_str() == "Traceback");
  CHECK(at(at(v, "message"), "errorCode").as_int() == 7);
  CHECK(at(v, "other").as_int() == 1);
  // Killed by a signal: minus the signal (torchrun's exitcode), replacing a code the worker wrote.
  std::ofstream(f) << R"({"message": {"message": "m", "extraInfo": {"timestamp": "1"}, "errorCode": 1}})";
  root.status = 9;  // killed by SIGKILL
  v = mr::Value::parse_json(launcher_error_record(root));
  CHECK(at(at(v, "message"), "errorCode").as_int() == -9);
  CHECK(v.as_object().size() == 1);
  // A message that is a string: copied as it is.
  std::ofstream(f) << R"({"message": "plain"})";
  CHECK(mr::Value::parse_json(launcher_error_record(root)).json() ==
        mr::Value::parse_json(R"({"message": "plain"})").json());
  // No error file (or not JSON): a record in the same format, with the worker's end and its stderr's last lines.
  fs::remove(f);
  root.status = 7 << 8;
  root.stderr_tail = {"Traceback (most recent call last):", "ValueError: x"};
  for (int pass = 0; pass < 2; ++pass) {
    v = mr::Value::parse_json(launcher_error_record(root));
    const std::string message = at(at(v, "message"), "message").as_str();
    CHECK(message.rfind("worker rank 3 (local rank 1), pid 4242 on ", 0) == 0);
    CHECK(message.find(" exited with code 7") != std::string::npos);
    CHECK(at(at(at(v, "message"), "extraInfo"), "py_callstack").as_str() ==
          "Traceback (most recent call last):\nValueError: x\n");
    CHECK(at(at(at(v, "message"), "extraInfo"), "timestamp").as_str() == "1700000000");
    CHECK(at(at(v, "message"), "errorCode").as_int() == 7);
    std::ofstream(f) << "not json";
  }
  // Written to the launcher's file, replacing what was there; a path that cannot be written says why.
  const fs::path out = f.string() + ".out";
  std::ofstream(out) << "old content, longer than nothing";
  CHECK(write_launcher_error_file(out.string(), root).empty());
  std::ifstream in(out);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(text == launcher_error_record(root));
  CHECK_FALSE(write_launcher_error_file((f.parent_path() / "no-such-dir" / "x.json").string(), root).empty());
  fs::remove(f);
  fs::remove(out);
}

TEST_CASE("a thread that could not be created (libgomp, OpenBLAS, std::thread) names the thread limit",
          "[launch][failure-report]") {
  WorkerFailure f;
  f.status = 1 << 8;  // libgomp's gomp_fatal exits 1
  f.stderr_seen = true;
  f.stderr_tail = {"loading", "libgomp: Thread creation failed: Resource temporarily unavailable"};
  CHECK(thread_limit_hint(f, uint64_t{64}) ==
        "a thread could not be created (\"libgomp: Thread creation failed: Resource temporarily unavailable\"): the "
        "process or user thread limit (ulimit -u 64, a cgroup's pids.max) or the memory ran out; raise the limit, or "
        "start fewer threads (OMP_NUM_THREADS, fewer workers)");
  CHECK_THAT(thread_limit_hint(f, std::nullopt), Catch::Contains("(ulimit -u unlimited, a cgroup's pids.max)"));
  f.stderr_tail = {"OpenBLAS blas_thread_init: pthread_create failed for thread 1 of 2: Resource temporarily unavailable"};
  CHECK_THAT(thread_limit_hint(f, uint64_t{64}), Catch::StartsWith("a thread could not be created (\"OpenBLAS"));
  f.stderr_tail = {"terminate called after throwing an instance of 'std::system_error'",
                   "  what():  Resource temporarily unavailable"};
  CHECK_THAT(thread_limit_hint(f, uint64_t{64}), Catch::Contains("(\"  what():  Resource temporarily unavailable\")"));
  // A long line is cut; other ends (another EAGAIN, a start failure) get no hint.
  f.stderr_tail = {"libgomp: Thread creation failed: " + std::string(200, 'x')};
  CHECK_THAT(thread_limit_hint(f, uint64_t{64}), Catch::Contains("xxx...\")"));
  f.stderr_tail = {"read: Resource temporarily unavailable", "ValueError: bad"};
  CHECK(thread_limit_hint(f, uint64_t{64}).empty());
  f.stderr_tail = {"libgomp: Thread creation failed: Resource temporarily unavailable"};
  f.start_failure = "fork: Resource temporarily unavailable";
  CHECK(thread_limit_hint(f, uint64_t{64}).empty());
}

TEST_CASE("a module that could not be imported names the Python that ran and PYTHON_EXEC", "[launch][failure-report]") {
  WorkerFailure f;
  f.status = 1 << 8;
  f.stderr_seen = true;
  f.stderr_tail = {"Traceback (most recent call last):", "ModuleNotFoundError: No module named 'torch'"};
  CHECK(missing_module_hint(f, "/root/.pyenv/shims/python3 (the first python3 on PATH)") ==
        "a module could not be imported; the program ran under /root/.pyenv/shims/python3 (the first python3 on PATH): "
        "install the module there, or set PYTHON_EXEC to a Python that has it (torchrun would run the script under its "
        "own interpreter)");
  f.stderr_tail = {"ImportError: cannot import name 'x' from 'y'"};
  CHECK_FALSE(missing_module_hint(f, "/usr/bin/python3 (PYTHON_EXEC)").empty());
  // Not a Python program, or another failure: nothing.
  CHECK(missing_module_hint(f, "").empty());
  f.stderr_tail = {"ValueError: bad"};
  CHECK(missing_module_hint(f, "/usr/bin/python3 (PYTHON_EXEC)").empty());
  // In the summary, after the stderr tail.
  f.stderr_tail = {"ModuleNotFoundError: No module named 'torch'"};
  std::ostringstream os;
  print_failure_summary(os, {f}, 0, 0, "", {}, "/usr/bin/python3 (the first python3 on PATH)");
  CHECK_THAT(os.str(), Catch::Contains("      ModuleNotFoundError: No module named 'torch'\n    hint: a module could not "
                                       "be imported; the program ran under /usr/bin/python3 (the first python3 on PATH)"));
}

TEST_CASE("exit code 127: the loader under an address-space limit, a shell's missing command, or a start failure",
          "[launch][failure-report]") {
  WorkerFailure f;
  f.status = 127 << 8;  // a wait status: exited with code 127
  f.stderr_seen = true;
  const std::optional<uint64_t> limit = uint64_t{2000000} * 1024;
  // The loader could not map a library: within the limit, named; without one, the memory.
  f.stderr_tail = {"./w: error while loading shared libraries: libx.so: failed to map segment from shared object"};
  CHECK(exit_127_hint(f, limit) ==
        "the dynamic loader could not map the program's libraries within this node's address-space limit (RLIMIT_AS, "
        "ulimit -v 2000000) (exit code 127 is the loader's): raise the limit (ulimit -v)");
  CHECK_THAT(exit_127_hint(f, std::nullopt), Catch::StartsWith("the dynamic loader could not map") &&
                                                 !Catch::Contains("ulimit"));
  // Another loader failure (a missing library) is not the limit's.
  f.stderr_tail = {"./w: error while loading shared libraries: libx.so: cannot open shared object file"};
  CHECK_THAT(exit_127_hint(f, limit), Catch::StartsWith("the dynamic loader could not load") && !Catch::Contains("ulimit"));
  // A shell's missing command (dash's and bash's words), with or without a limit.
  for (const char* line : {"sh: 1: nosuch: not found", "bash: line 1: nosuch: command not found"}) {
    f.stderr_tail = {line};
    CHECK(exit_127_hint(f, limit) == "exit code 127: a shell in the program could not find a command (its stderr says which)");
    CHECK(exit_127_hint(f, std::nullopt) == exit_127_hint(f, limit));
  }
  // Its stderr did not say (or went to the console): both readings; the limit named when there is one.
  f.stderr_tail.clear();
  f.stderr_seen = false;
  CHECK_THAT(exit_127_hint(f, limit), Catch::StartsWith("exit code 127 under this node's address-space limit (RLIMIT_AS, "
                                                        "ulimit -v 2000000): the dynamic loader exits 127") &&
                                          Catch::Contains("raise the limit (ulimit -v)") &&
                                          Catch::Contains("a shell exits 127 for a command it cannot find"));
  CHECK_THAT(exit_127_hint(f, std::nullopt), Catch::StartsWith("exit code 127: a shell's code for a command it cannot find") &&
                                                 !Catch::Contains("ulimit"));
  // megatron-run could not start it (the 127 is the launcher's), another code, a signal: no hint.
  f.start_failure = "cannot start ./x: Permission denied";
  CHECK(exit_127_hint(f, limit).empty());
  f.start_failure.clear();
  f.status = 1 << 8;
  CHECK(exit_127_hint(f, limit).empty());
  f.status = 9;
  CHECK(exit_127_hint(f, limit).empty());
}

// megatron-run's worker's record of a failure that follows another rank's (extraInfo.follows_rank), and which
// failure the summary names as the root cause (review user39 #4).
TEST_CASE("a follower's error file names the rank it followed; find_root_cause takes that rank",
          "[launch][failure-report]") {
  const fs::path dir = fs::temp_directory_path() / ("mr-follower-" + std::to_string(getpid()));
  fs::create_directories(dir);
  // The exception's text carries its rule id ("[id] text"); the file has it as the worker's log line shows it, so
  // that the summary's "(...)" after the error file reads as the log does.
  const std::string text = "[checkpoint.corrupt] --load ck: loading failed on rank 0: bad\nmore";
  std::ofstream(dir / "1.json") << follower_error_record(text, 0, 1700000000);
  auto e = read_error_file((dir / "1.json").string());
  REQUIRE(e);
  CHECK(e->message == "error[checkpoint.corrupt]: --load ck: loading failed on rank 0: bad");
  CHECK(e->traceback == "error[checkpoint.corrupt]: --load ck: loading failed on rank 0: bad\nmore");
  CHECK(e->timestamp == "1700000000");
  REQUIRE(e->follows_rank);
  CHECK(*e->follows_rank == 0);
  std::ofstream(dir / "2.json") << follower_error_record("another rank's buffers do not fit", -1, 1);
  CHECK(read_error_file((dir / "2.json").string())->message == "error: another rank's buffers do not fit");
  std::ofstream(dir / "plain.json") << R"({"message": {"message": "RuntimeError: boom", "extraInfo": {}}})";
  CHECK_FALSE(read_error_file((dir / "plain.json").string())->follows_rank);

  auto failure = [&](int rank, const std::string& file) {
    WorkerFailure f;
    f.rank = rank;
    f.status = 1 << 8;
    f.error_file = file.empty() ? "" : (dir / file).string();
    return f;
  };
  // The first to exit names rank 0, which exited after it: rank 0 is the root cause.
  RootCause c = find_root_cause({failure(1, "1.json"), failure(0, "")});
  CHECK(c.index == 1);
  CHECK_FALSE(c.elsewhere_rank);
  // The rank it names is not among this node's failures: another node's.
  c = find_root_cause({failure(3, "1.json"), failure(2, "")});
  CHECK(c.index == 0);
  REQUIRE(c.elsewhere_rank);
  CHECK(*c.elsewhere_rank == 0);
  // Not known which rank: the first failure that follows none.
  c = find_root_cause({failure(1, "2.json"), failure(2, "2.json"), failure(3, "plain.json")});
  CHECK(c.index == 2);
  // No field (a user's program): the first failure, as before.
  c = find_root_cause({failure(1, "plain.json"), failure(0, "")});
  CHECK(c.index == 0);

  std::ostringstream os;
  print_failure_summary(os, {failure(1, "1.json"), failure(0, "")}, 0, 0);
  INFO(os.str());
  CHECK(os.str().find("  root cause (first failure): rank 0 (local rank 0)") != std::string::npos);
  CHECK(os.str().find("    it failed first; rank 1 (pid -1), which exited first, failed because of it") !=
        std::string::npos);
  CHECK(os.str().find("loading failed on rank 0: bad), then exited with code 1") != std::string::npos);
  fs::remove_all(dir);
}

// The rank a follower's error file names: another node's only when it is outside this node's ranks and inside the
// world (review diff39 #4).
TEST_CASE("find_root_cause: a named rank of this node that did not fail, or outside the world, is no other node's",
          "[launch][failure-report]") {
  const fs::path dir = fs::temp_directory_path() / ("mr-follower-range-" + std::to_string(getpid()));
  fs::create_directories(dir);
  for (int k : {0, 3, 7}) std::ofstream(dir / (std::to_string(k) + ".json")) << follower_error_record("x", k, 1);
  // Rank 1 of a node with ranks 0 and 1 (local world 2), in a world of `world`.
  auto failure = [&](int rank, int follows, int world) {
    WorkerFailure f;
    f.rank = rank;
    f.local_rank = rank % 2;
    f.local_world_size = 2;
    f.world_size = world;
    f.status = 1 << 8;
    if (follows >= 0) f.error_file = (dir / (std::to_string(follows) + ".json")).string();
    return f;
  };
  // Rank 0 is this node's and did not fail: the first failure is the root cause, on this node.
  RootCause c = find_root_cause({failure(1, 0, 2)});
  CHECK(c.index == 0);
  CHECK_FALSE(c.elsewhere_rank);
  std::ostringstream os;
  print_failure_summary(os, {failure(1, 0, 2)}, 0, 0);
  INFO(os.str());
  CHECK(os.str().find("on another node") == std::string::npos);
  CHECK(os.str().find("  root cause (first failure): rank 1 (local rank 1)") != std::string::npos);
  // Rank 7 in a world of 2: no rank at all.
  c = find_root_cause({failure(1, 7, 2)});
  CHECK(c.index == 0);
  CHECK_FALSE(c.elsewhere_rank);
  // Rank 3 in a world of 4, this node having 0 and 1: another node's, as before.
  c = find_root_cause({failure(1, 3, 4)});
  REQUIRE(c.elsewhere_rank);
  CHECK(*c.elsewhere_rank == 3);
  std::ostringstream elsewhere;
  print_failure_summary(elsewhere, {failure(1, 3, 4)}, 0, 0);
  INFO(elsewhere.str());
  CHECK(elsewhere.str().find("  root cause (first failure, on another node): rank 3, which the error file of this "
                             "node's first failure (rank 1) names as the rank it failed because of") != std::string::npos);
  CHECK(elsewhere.str().find("  this node's first failure: rank 1 (local rank 1)") != std::string::npos);
  // Nothing known of the node (a WorkerFailure without its sizes): as before, another node's.
  WorkerFailure bare = failure(1, 0, 2);
  bare.local_world_size = bare.world_size = 0;
  c = find_root_cause({bare});
  REQUIRE(c.elsewhere_rank);
  CHECK(*c.elsewhere_rank == 0);
  fs::remove_all(dir);
}

// The rank a follower names was killed by the launcher's stop (slower to exit than the follower): the root cause,
// with the stop's note, not "it failed first" (review diff39 #5); one that exited with its own code after the
// stop began keeps "it failed first" (supervision_test.cpp's follower case).
TEST_CASE("a root cause a follower names that the launcher's stop killed keeps the stop's note",
          "[launch][failure-report]") {
  const fs::path dir = fs::temp_directory_path() / ("mr-follower-stop-" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "0.json") << follower_error_record("x", 0, 1);
  auto failure = [&](int rank, bool follows) {
    WorkerFailure f;
    f.rank = f.local_rank = rank;
    f.local_world_size = f.world_size = 2;
    f.status = 1 << 8;
    if (follows) f.error_file = (dir / "0.json").string();
    return f;
  };
  WorkerFailure killed = failure(0, false);
  killed.status = SIGTERM;
  killed.after_stop = true;
  std::ostringstream stop;
  print_failure_summary(stop, {failure(1, true), killed}, 0, 0);
  INFO(stop.str());
  CHECK(stop.str().find("  root cause (first failure): rank 0 (local rank 0)") != std::string::npos);
  CHECK(stop.str().find("was killed by signal 15 (SIGTERM) (after the launcher stopped the workers) at") !=
        std::string::npos);
  CHECK(stop.str().find("it failed first") == std::string::npos);
  CHECK(stop.str().find("    rank 1 (pid -1), which exited first, names it in its error file as the rank it failed "
                        "because of (below)") != std::string::npos);
  // One that exited with a code of its own after the stop began (it ignored the SIGTERM) failed on its own: no note.
  WorkerFailure own = killed;
  own.status = 3 << 8;
  std::ostringstream exited;
  print_failure_summary(exited, {failure(1, true), own}, 0, 0);
  INFO(exited.str());
  CHECK(exited.str().find("exited with code 3 at ") != std::string::npos);
  CHECK(exited.str().find("    it failed first; rank 1 (pid -1), which exited first, failed because of it") !=
        std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("workers all killed by a signal the launcher passed on: no root cause among them",
          "[launch][failure-report]") {
  std::vector<WorkerFailure> fs_(2);
  for (int i = 0; i < 2; ++i) {
    fs_[i].rank = i;
    fs_[i].status = SIGUSR1;  // killed by SIGUSR1
    fs_[i].by_passed_signal = true;
  }
  std::ostringstream os;
  print_failure_summary(os, fs_, 0, 0);
  INFO(os.str());
  CHECK(os.str().find("the workers were killed by signal 10 (SIGUSR1), which the launcher received and passed on") !=
        std::string::npos);
  CHECK(os.str().find("root cause") == std::string::npos);
  // One of them died of something else: that one is the root cause, as before.
  fs_[1].by_passed_signal = false;
  fs_[1].status = 3 << 8;
  std::ostringstream two;
  print_failure_summary(two, fs_, 0, 0);
  CHECK(two.str().find("root cause (first failure): rank 0") != std::string::npos);
}
