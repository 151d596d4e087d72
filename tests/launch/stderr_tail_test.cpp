// launch/stderr_tail.h: which lines are torch's glog-formatted log lines at info or warning level, and the tail
// the failure summary shows when they fill a rank's stderr. The summary on a real program: supervision_test.cpp.
#include <catch2/catch.hpp>

#include <sstream>
#include <string>

#include "launch/stderr_tail.h"

using namespace mr::launch;

TEST_CASE("torch's info and warning log lines are told from the others", "[launch][stderr-tail]") {
  // glog's own form: level, MMDD, time, thread id, file:line.
  CHECK(is_torch_log_noise("W1205 12:00:00.123456  1234 ProcessGroupNCCL.cpp:1150] Warning: something"));
  CHECK(is_torch_log_noise("I1205 12:00:00.123456 1234 socket.cpp:12] connected"));
  // c10's logger (torch without glog): bracketed, no thread id; and after torch's "[rankN]:".
  CHECK(is_torch_log_noise("[W1205 12:00:00.123 ProcessGroupGloo.cpp:721] Warning: something else"));
  CHECK(is_torch_log_noise("[I1205 12:00:00.629817284 TCPStore.cpp:275] [c10d - debug] The server has started"));
  CHECK(is_torch_log_noise("[rank1]:[W1205 12:00:00.123456 ProcessGroupNCCL.cpp:4561] [PG ID 0 PG GUID 0 Rank 1] note"));
  CHECK(is_torch_log_noise("[W1205 12:00:00 file.cpp:1] no fraction"));
  // Errors and fatal lines stay: they may be the cause.
  CHECK_FALSE(is_torch_log_noise("E1205 12:00:00.123456  1234 ProcessGroupNCCL.cpp:616] Watchdog caught collective operation timeout"));
  CHECK_FALSE(is_torch_log_noise("[F1205 12:00:00.123 TCPStore.cpp:400] Check failed: x"));
  CHECK_FALSE(is_torch_log_noise("[rank0]:[E1205 12:00:00.123 ProcessGroupGloo.cpp:144] Rank 0 failed"));
  // Not glog's format: kept.
  for (const char* line : {"RuntimeError: boom", "Warning: not a glog line", "W1205", "[W1205 12:00:00.123] no place",
                           "W1205 12:00:00.123456 file.cpp:12] no thread id", "[W1205 12:00:00.123 1234 f.cpp:1] thread id",
                           "[rankx]:[W1205 12:00:00.123 f.cpp:1] x", "X1205 12:00:00.123456 1 f.cpp:1] x",
                           "W12a5 12:00:00.123456 1 f.cpp:1] x", "[W1205 12:00:00.123 f.cpp:] x",
                           "[W1205 12:00:00.123 f.cpp:12 ] trailing blank", "", "["})
    CHECK_FALSE(is_torch_log_noise(line));
}

// A rank of a Megatron job failing at startup, as its stderr looks: torch's c10d warnings, a Python traceback,
// then more warnings from the other threads as the process goes down (written for this test).
const char* const kCaptured =
    "[W1205 12:00:00.101 socket.cpp:697] [c10d] The client socket has failed to connect to [localhost]:29500\n"
    "[W1205 12:00:00.102 socket.cpp:697] [c10d] The client socket has failed to connect to [localhost]:29500\n"
    "Traceback (most recent call last):\n"
    "  File \"pretrain_gpt.py\", line 250, in <module>\n"
    "    pretrain(train_valid_test_datasets_provider, model_provider, ModelType.encoder_or_decoder, forward_step)\n"
    "  File \"megatron/training/training.py\", line 300, in pretrain\n"
    "    initialize_megatron(extra_args_provider=extra_args_provider)\n"
    "[W1205 12:00:01.004 ProcessGroupGloo.cpp:721] Warning: the default device is a loopback one.\n"
    "  File \"megatron/training/initialize.py\", line 80, in initialize_megatron\n"
    "    _initialize_distributed(get_embedding_ranks, get_position_embedding_ranks)\n"
    "W1205 12:00:01.010000  4242 torch/distributed/elastic/multiprocessing/api.py:900] Sending process 4243 closing signal SIGTERM\n"
    "RuntimeError: CUDA error: no CUDA-capable device is detected\n"
    "[rank0]:[W1205 12:00:01.020 ProcessGroupNCCL.cpp:1250] Warning: WARNING: process group has NOT been destroyed\n"
    "[I1205 12:00:01.021 TCPStoreLibUvBackend.cpp:115] [c10d - debug] Read callback failed. code:-4095 name:EOF\n"
    "[W1205 12:00:01.022 CudaIPCTypes.cpp:16] Producer process has been terminated before all shared CUDA tensors released\n"
    "E1205 12:00:01.030000  4242 torch/distributed/elastic/multiprocessing/api.py:874] failed (exitcode: 1)\n"
    "[W1205 12:00:01.031 TCPStore.cpp:125] [c10d] recvValue failed on SocketImpl(fd=3): Connection reset by peer\n"
    "[W1205 12:00:01.032 TCPStore.cpp:125] [c10d] recvValue failed on SocketImpl(fd=3): Connection reset by peer\n"
    "[W1205 12:00:01.040 TCPStore.cpp:106] [c10d] sendBytes failed on SocketImpl(fd=3): Broken pipe\n"
    "[rank0]:[W1205 12:00:01.041 ProcessGroupGloo.cpp:110] Warning: the store has gone away\n"
    "W1205 12:00:01.050000  4242 torch/distributed/elastic/agent/server/api.py:700] [default] Worker group FAILED\n"
    "I1205 12:00:01.051000  4242 torch/distributed/elastic/agent/server/api.py:710] Local worker group finished\n";

TEST_CASE("glog lines with the year (LibTorch 2.x), and Gloo's host-name warning kept", "[launch][stderr-tail]") {
  // The glog that LibTorch 2.x links writes YYYYMMDD: the same lines, with and without "[rankN]:".
  CHECK(is_torch_log_noise("W20261205 23:59:52.458763  4735 ProcessGroupNCCL.cpp:1150] Warning: something"));
  CHECK(is_torch_log_noise("I20261205 23:59:52.458763 4735 socket.cpp:12] connected"));
  CHECK(is_torch_log_noise("[rank1]:W20261205 23:59:52.458763 4735 socket.cpp:12] connected"));
  CHECK(is_torch_log_noise("[W20261205 23:59:52.458 TCPStore.cpp:125] [c10d] recvValue failed"));
  CHECK_FALSE(is_torch_log_noise("E20261205 23:59:52.458763  4735 ProcessGroupNCCL.cpp:616] Watchdog timeout"));
  // Neither four nor eight digits: not glog's date.
  for (const char* line : {"W120 12:00:00.1 1 f.cpp:1] x", "W120512 12:00:00.1 1 f.cpp:1] x",
                           "W202612050 12:00:00.1 1 f.cpp:1] x"})
    CHECK_FALSE(is_torch_log_noise(line));
  // Gloo's warning that the host name does not resolve explains a loopback-bound Gloo: it stays in the tail, in
  // either date form.
  const std::string gloo =
      "W20261205 23:59:52.458763  4735 ProcessGroupGloo.cpp:694] Warning: Unable to resolve hostname to a (local) "
      "address. Using the loopback address as fallback. Manually set the network interface to bind to with "
      "GLOO_SOCKET_IFNAME. (function operator())";
  CHECK_FALSE(is_torch_log_noise(gloo));
  CHECK_FALSE(is_torch_log_noise("[W1205 12:00:00.123 ProcessGroupGloo.cpp:721] Warning: Unable to resolve hostname"));
  StderrTail tail(3);
  tail.add(gloo);
  tail.add("W20261205 23:59:52.5 4735 socket.cpp:1] noise");
  tail.add("RuntimeError: connect [127.0.0.1]:33181: Connection refused");
  CHECK(tail.lines() == std::vector<std::string>{gloo, "RuntimeError: connect [127.0.0.1]:33181: Connection refused"});
  CHECK(tail.left_out() == 1);
}

TEST_CASE("a rank's stderr full of torch's log lines: the tail keeps the error, and counts what it left out",
          "[launch][stderr-tail]") {
  std::vector<std::string> raw;
  std::istringstream in(kCaptured);
  for (std::string line; std::getline(in, line);) raw.push_back(line);
  REQUIRE(raw.size() == 22);
  // The last ten lines as they came hold no RuntimeError: the noise pushed it out.
  bool error_in_raw_tail = false;
  for (size_t i = raw.size() - 10; i < raw.size(); ++i) error_in_raw_tail |= raw[i].rfind("RuntimeError", 0) == 0;
  CHECK_FALSE(error_in_raw_tail);

  StderrTail tail(10);
  for (const std::string& line : raw) tail.add(line);
  const std::vector<std::string> kept = tail.lines();
  // The nine lines that are not noise: the whole traceback, the error, and the elastic agent's error line.
  REQUIRE(kept.size() == 9);
  CHECK(kept.front() == "Traceback (most recent call last):");
  CHECK(kept[7] == "RuntimeError: CUDA error: no CUDA-capable device is detected");
  CHECK(kept.back() == "E1205 12:00:01.030000  4242 torch/distributed/elastic/multiprocessing/api.py:874] failed (exitcode: 1)");
  for (const std::string& l : kept) CHECK_FALSE(is_torch_log_noise(l));
  // Left out among and after the shown lines: ProcessGroupGloo's warning and the agent's W line inside the
  // traceback, three after the RuntimeError, six after the E line. The two before the traceback came before the
  // oldest line shown: not counted.
  CHECK(tail.left_out() == 11);
}

TEST_CASE("the tail's window, and a stream of nothing but torch's log lines", "[launch][stderr-tail]") {
  StderrTail tail(2);
  tail.add("W1205 12:00:00.1 1 a.cpp:1] before");  // before the window: not counted
  tail.add("one");
  tail.add("W1205 12:00:00.1 1 a.cpp:1] between");
  tail.add("two");
  tail.add("three");
  tail.add("[W1205 12:00:00.1 a.cpp:2] after");
  tail.add("[I1205 12:00:00.1 a.cpp:3] after");
  CHECK(tail.lines() == std::vector<std::string>{"two", "three"});
  CHECK(tail.left_out() == 2);  // "between" came before the oldest line shown ("two"): not counted
  // Only noise: shown as it is (the summary must not call the stream empty), nothing left out.
  StderrTail quiet(2);
  for (const char* l : {"[W1205 12:00:00.1 a.cpp:1] x", "[W1205 12:00:00.1 a.cpp:1] y", "[I1205 12:00:00.1 a.cpp:1] z"})
    quiet.add(l);
  CHECK(quiet.lines() == std::vector<std::string>{"[W1205 12:00:00.1 a.cpp:1] y", "[I1205 12:00:00.1 a.cpp:1] z"});
  CHECK(quiet.left_out() == 0);
  CHECK(StderrTail(2).lines().empty());
}
