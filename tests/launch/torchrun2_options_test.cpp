// torchrun 2.x's launcher options on real workers (tests/launch/programs/probe.py, faults.py under Debian's
// /usr/bin/python3): --log-line-prefix-template, --duplicate-stdout-filters, --virtual-local-rank, --local-addr
// (one node; c10d in multi_node_test.cpp), --signals-to-handle and --logs-specs. Every command runs under `timeout`.
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>

#include "launch/line_prefix.h"
#include "launch_test_util.h"

namespace fs = std::filesystem;
using namespace mrtest::launcher;
using mrtest::Proc;

namespace {

struct TempDir : ScratchDir {
  TempDir() : ScratchDir("mr-torchrun2") {}
};

// probe.py on `nproc` workers: `env` (ENV=... or -u NAME, each followed by a space), megatron-run with `options`
// (each followed by a space), then the program.
Proc probe(int nproc, const std::string& options, const std::string& env = "") {
  return sh(env + kRun + "--nproc-per-node " + std::to_string(nproc) + " " + options + kProbe);
}

}  // namespace

TEST_CASE("--log-line-prefix-template: the console prefix with torchrun's macros", "[launch][torchrun2][process]") {
  const std::string host = mr::launch::local_hostname();
  Proc r = probe(2, "--role trainer --log-line-prefix-template '${hostname}:${rank}/$local_rank ${role_name}| ' ");
  INFO(r.out);
  REQUIRE(r.exit == 0);
  CHECK(has(r.out, host + ":0/0 trainer| {\"env\""));
  CHECK(has(r.out, host + ":1/1 trainer| {\"env\""));
  CHECK_FALSE(has(r.out, "[rank 0]"));
  // torchrun's environment variable, when the option is not given; one worker is prefixed too (asked for).
  Proc e = probe(1, "", "TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE='<$rank> ' ");
  INFO(e.out);
  REQUIRE(e.exit == 0);
  CHECK(has(e.out, "<0> {\"env\""));
  // An unknown macro stays as written, and is named.
  Proc u = probe(1, "--log_line_prefix_template '${rnak}: ' ");
  INFO(u.out);
  REQUIRE(u.exit == 0);
  CHECK(has(u.out, "${rnak}: {\"env\""));
  CHECK(has(u.out, "warning: --log-line-prefix-template: ${rnak} is not one of ${role_name}, ${rank}, ${local_rank}, "
                   "${hostname}"));
}

TEST_CASE("--duplicate-stdout-filters: matching lines of tee'd streams in <attempt>/filtered_stdout.log",
          "[launch][torchrun2][process]") {
  TempDir t;
  Proc r = probe(2, "--rdzv-id dup1 --log-dir " + t.path.string() +
                        " --tee 3 --duplicate-stdout-filters 'nothing,\"RANK\": \"1\"' ");
  INFO(r.out);
  REQUIRE(r.exit == 0);
  fs::path attempt;
  for (const auto& e : fs::directory_iterator(t.path))
    if (e.path().filename().string().rfind("dup1_", 0) == 0) attempt = e.path() / "attempt_0";
  const std::string filtered = slurp(attempt / "filtered_stdout.log");
  CHECK(has(filtered, "[rank 1] {\"env\""));  // rank 1's line, prefixed as on the console
  CHECK_FALSE(has(filtered, "[rank 0]"));
  CHECK_FALSE(fs::exists(attempt / "filtered_stderr.log"));  // not asked for
  // Nothing tee'd: said, since nothing can be duplicated.
  Proc n = probe(1, "--duplicate-stderr-filters x ");
  INFO(n.out);
  REQUIRE(n.exit == 0);
  CHECK(has(n.out, "warning: --duplicate-stderr-filters: duplicates lines of tee'd streams only, and no stderr is "
                   "tee'd"));
}

TEST_CASE("--virtual-local-rank: LOCAL_RANK=0 and each worker's own GPU only", "[launch][torchrun2][process]") {
  Proc r = probe(2, "--virtual-local-rank ", "CUDA_VISIBLE_DEVICES=5,7 ");
  INFO(r.out);
  REQUIRE(r.exit == 0);
  CHECK(has(r.out, "[rank 0] {\"env\": {\"RANK\": \"0\", \"LOCAL_RANK\": \"0\""));
  CHECK(has(r.out, "[rank 1] {\"env\": {\"RANK\": \"1\", \"LOCAL_RANK\": \"0\""));
  CHECK(has(r.out, "\"CUDA_VISIBLE_DEVICES\": \"5\""));
  CHECK(has(r.out, "\"CUDA_VISIBLE_DEVICES\": \"7\""));
  CHECK(has(r.out, "\"MR_VIRTUAL_LOCAL_RANK\": \"1\""));
  // No CUDA_VISIBLE_DEVICES: the local rank is the device; PET_VIRTUAL_LOCAL_RANK=1 is torchrun's default for it.
  Proc p = probe(2, "", "-u CUDA_VISIBLE_DEVICES PET_VIRTUAL_LOCAL_RANK=1 ");
  INFO(p.out);
  REQUIRE(p.exit == 0);
  CHECK(has(p.out, "\"CUDA_VISIBLE_DEVICES\": \"1\""));
  // Fewer GPUs listed than workers: refused before anything starts, naming the option.
  Proc f = probe(2, "--virtual_local_rank ", "CUDA_VISIBLE_DEVICES=3 ");
  INFO(f.out);
  CHECK(f.exit == 2);
  CHECK(has(f.out, "argument --virtual-local-rank/--virtual_local_rank: local rank 1 has no GPU of its own in CUDA_VISIBLE_DEVICES=3 "
                   "(1 listed)"));
  CHECK_FALSE(has(f.out, "{\"env\""));
}

TEST_CASE("--local-addr on one node: the workers' MASTER_ADDR; with --master-addr it is named as not used",
          "[launch][torchrun2][process]") {
  Proc r = probe(1, "--local-addr localhost ");
  INFO(r.out);
  REQUIRE(r.exit == 0);
  CHECK(has(r.out, "\"MASTER_ADDR\": \"localhost\""));
  Proc m = probe(1, "--master-addr 127.0.0.1 --local-addr localhost ");
  INFO(m.out);
  REQUIRE(m.exit == 0);
  CHECK(has(m.out, "\"MASTER_ADDR\": \"127.0.0.1\""));
  CHECK(has(m.out, "warning: --local-addr localhost: not used (the static rendezvous' master is --master-addr "
                   "127.0.0.1)"));
}

TEST_CASE("--master-addr on one node must be this machine: refused at once, not after the collective timeout",
          "[launch][torchrun2][process]") {
  for (const char* addr : {"name.invalid", "''", "192.0.2.1"}) {
    Proc r = probe(1, std::string("--master-addr ") + addr + " ");  // exited at once: no hang
    INFO(r.out);
    CHECK(r.exit == 2);
    CHECK(has(r.out, "error[input.address-not-this-machine]: argument --master-addr/--master_addr: "));
    CHECK(has(r.out, "a one-node job's master (rank 0's store) is this machine"));
  }
}

TEST_CASE("--local-addr on one node is its master: one that is not this machine is refused at once, like --master-addr",
          "[launch][torchrun2][process]") {
  for (const char* addr : {"name.invalid", "192.0.2.1"}) {
    Proc r = probe(1, std::string("--local-addr ") + addr + " ");  // exited at once: no hang
    INFO(r.out);
    CHECK(r.exit == 2);
    CHECK(has(r.out, "error[input.address-not-this-machine]: argument --local-addr/--local_addr: '" + std::string(addr) + "' "));
    CHECK(has(r.out, "leave --local-addr out, or give one of its addresses"));
    CHECK_FALSE(has(r.out, "\"MASTER_ADDR\""));  // no worker started
  }
  // Under c10d every launcher checks its own --local-addr when it starts (any of them may become a round's node 0):
  // refused before it joins, without a launcher's store to meet at (nothing listens at the endpoint).
  Proc c10d = sh(kRun + "--nnodes 1:2 --rdzv-backend c10d --rdzv-endpoint 127.0.0.1:9 --join-timeout 60 "
                 "--nproc-per-node 1 --local-addr 192.0.2.1 " + kProbe);
  INFO(c10d.out);
  CHECK(c10d.exit == 2);
  CHECK(has(c10d.out, "error[input.address-not-this-machine]: argument --local-addr/--local_addr: '192.0.2.1' is not an address "
                      "of this machine; under c10d the launcher that becomes a round's node 0"));
  CHECK_FALSE(has(c10d.out, "launchers' store"));  // it did not try to join
  // One of this machine's addresses is taken (localhost: the case above this one).
  Proc ok = probe(1, "--local-addr 127.0.0.1 ");
  INFO(ok.out);
  CHECK(ok.exit == 0);
  CHECK(has(ok.out, "\"MASTER_ADDR\": \"127.0.0.1\""));
}

TEST_CASE("--signals-to-handle: a listed signal is passed on and stops the workers; an unlisted one is not caught",
          "[launch][torchrun2][process]") {
  TempDir t;
  // Once both workers listen, SIGUSR1 to the launcher; its exit code after.
  auto run = [&](const std::string& flags) { return signal_launcher(t.path, "FAULT=usr1", flags, "USR1"); };
  // The workers handled it (each exited 0): the job ended well, exit 0 with a line that says so (128 + SIGUSR1
  // only when they did not all exit 0: tests/launch/supervision_test.cpp).
  check_handled_stop(run("--signals-to-handle SIGTERM,SIGUSR1").out, 10, "SIGUSR1");
  // Not listed: the launcher is not catching it and dies of it; its workers die with it (no line from them).
  Proc n = run("--signals-to-handle SIGTERM");
  INFO(n.out);
  CHECK_FALSE(has(n.out, "received signal 10"));
  CHECK_FALSE(has(n.out, "got SIGUSR1"));
  CHECK(has(n.out, "exit=138"));
  // Not given: SIGUSR1 is passed on only; a worker that dies of it is the root cause, named as killed by the
  // signal the launcher passed on (review 29b), and the others are stopped.
  Proc d = signal_launcher(t.path, "FAULT=usr1-default", "", "USR1");
  INFO(d.out);
  CHECK(has(d.out, "exit=138"));
  CHECK(has(d.out, "root cause (first failure): rank 1 (local rank 1), pid "));
  CHECK(has(d.out, "was killed by signal 10 (SIGUSR1) (a signal the launcher received and passed on)"));
}

TEST_CASE("--logs-specs: torch's own `default` is the --log-dir layout; another name is refused",
          "[launch][torchrun2][process]") {
  // torchrun's --logs-specs NAME loads the entry point NAME of the Python group torchrun.logs_specs; torch registers
  // only `default` (DefaultLogsSpecs), what torchrun uses without the option. In either spelling it writes the same
  // per-rank logs.
  for (const std::string opt : {"--logs-specs default", "--logs_specs default"}) {
    TempDir t;
    Proc r = sh(kRun + "--nproc-per-node 2 " + opt + " --rdzv-id ls --tee 1 --log-dir " + t.path.string() +
                " --no-append-args --no-python sh -c 'echo logged-$LOCAL_RANK'");
    INFO(opt << ": " << r.out);
    REQUIRE(r.exit == 0);
    CHECK(has(r.out, "[rank 1] logged-1"));
    fs::path run;
    for (const auto& e : fs::directory_iterator(t.path)) run = e.path();
    CHECK(has(slurp(run / "attempt_0" / "1" / "stdout.log"), "logged-1"));
    CHECK(!has(r.out, "warning"));
  }
  // Any other name: refused before anything starts (exit 2), naming the option and the one name there is.
  for (const std::string opt : {"--logs-specs mine", "--logs_specs mine"}) {
    Proc r = sh(kRun + "--nproc-per-node 1 " + opt + " --no-append-args --no-python echo started");
    INFO(opt << ": " << r.out);
    CHECK(r.exit == 2);
    CHECK(has(r.out, "argument --logs-specs/--logs_specs: 'mine' is not a LogsSpecs megatron-run has"));
    CHECK(has(r.out, "only torch's own, 'default'"));
    CHECK(!has(r.out, "started"));
  }
  // torchrun reads no PET_LOGS_SPECS: `default` changes nothing and is not mentioned; another name is named as not
  // read, and the launch goes on, as under torchrun.
  Proc quiet = sh("PET_LOGS_SPECS=default " + kRun + "--nproc-per-node 1 --no-append-args --no-python echo started");
  INFO(quiet.out);
  CHECK(quiet.exit == 0);
  CHECK(quiet.out == "started\n");
  Proc named = sh("PET_LOGS_SPECS=mine " + kRun + "--nproc-per-node 1 --no-append-args --no-python echo started");
  INFO(named.out);
  CHECK(named.exit == 0);
  CHECK(has(named.out, "warning: PET_LOGS_SPECS='mine' is set: not read (torchrun's --logs-specs takes no PET_ default"));
  CHECK(has(named.out, "started"));
}
