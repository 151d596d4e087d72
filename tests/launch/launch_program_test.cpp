// megatron-run starting a user's program (launch/program.h, launch/torchrun_env.h) as torchrun would: the
// environment each rank gets, the command line it gets (equal to --format argv), validation before anything
// starts, a failing rank's exit code, and a real torch.distributed program (Debian's python3-torch, gloo).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <regex>
#include <string>

#include "../config/binary.h"
#include "../config/scratch.h"
#include "launch_test_util.h"
#include "launch/free_port.h"
#include "sockets.h"
#include "config/value.h"

namespace fs = std::filesystem;

namespace {

using mrtest::Proc;  // `out` holds stdout and stderr together here

Proc sh(const std::string& cmd) { return mrtest::run_shell(cmd + " 2>&1"); }

const std::string kBin = std::string("'") + MR_BINARY + "'";
const std::string kConfig = std::string(MR_SOURCE_DIR) + "/configs/default.yaml";
const std::string kProbe = std::string(MR_SOURCE_DIR) + "/tests/launch/programs/probe.py";
// Debian's python3 (with python3-torch), not whatever python3 is first on PATH.
const std::string kPython = "PYTHON_EXEC=/usr/bin/python3 ";

// The probe's JSON lines, by rank ("[rank R] " prefixes stripped).
std::map<int, mr::Value> probe_lines(const std::string& out) {
  std::map<int, mr::Value> by_rank;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    size_t brace = line.find('{');
    if (brace == std::string::npos) continue;
    mr::Value v = mr::Value::parse_json(line.substr(brace));
    for (const auto& [k, e] : v.as_object())
      if (k == "env")
        for (const auto& [name, val] : e.as_object())
          if (name == "RANK") by_rank[std::stoi(val.as_str())] = v;
  }
  return by_rank;
}

const mr::Value& field(const mr::Value& obj, const std::string& key) {
  for (const auto& [k, v] : obj.as_object())
    if (k == key) return v;
  static const mr::Value none;
  return none;
}

std::string env_of(const mr::Value& line, const std::string& name) {
  const mr::Value& v = field(field(line, "env"), name);
  return v.is_str() ? v.as_str() : "<unset>";
}

bool has_text(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("a script on 2 ranks: torchrun's environment and the resolved Megatron flags", "[launch][program][process]") {
  Proc r = sh(kPython + kBin + " --nproc-per-node 2 --config " + kConfig + " --num-layers 4 " + kProbe + " --own x");
  INFO(r.out);
  REQUIRE(r.exit == 0);
  auto lines = probe_lines(r.out);
  REQUIRE(lines.size() == 2);
  Proc argv = sh(kBin + " --dry-run --format argv0 --config " + kConfig + " --num-layers 4 | tr '\\0' '\\n'");
  std::vector<std::string> want = {"--own", "x"};
  std::istringstream in(argv.out);
  for (std::string w; std::getline(in, w);) want.push_back(w);
  for (int rank : {0, 1}) {
    const mr::Value& l = lines[rank];
    CHECK(env_of(l, "LOCAL_RANK") == std::to_string(rank));
    CHECK(env_of(l, "ROLE_RANK") == std::to_string(rank));
    CHECK(env_of(l, "GROUP_RANK") == "0");
    CHECK(env_of(l, "ROLE_NAME") == "default");
    CHECK(env_of(l, "WORLD_SIZE") == "2");
    CHECK(env_of(l, "LOCAL_WORLD_SIZE") == "2");
    CHECK(env_of(l, "GROUP_WORLD_SIZE") == "1");
    CHECK(env_of(l, "ROLE_WORLD_SIZE") == "2");
    CHECK(env_of(l, "MASTER_ADDR") == "127.0.0.1");
    CHECK(env_of(l, "MASTER_PORT") == env_of(lines[0], "MASTER_PORT"));
    CHECK(env_of(l, "TORCHELASTIC_RESTART_COUNT") == "0");
    CHECK(env_of(l, "TORCHELASTIC_MAX_RESTARTS") == "0");
    CHECK(env_of(l, "TORCHELASTIC_RUN_ID") == "none");
    CHECK(env_of(l, "TORCHELASTIC_USE_AGENT_STORE") == "False");
    CHECK(env_of(l, "TORCH_NCCL_ASYNC_ERROR_HANDLING") == "1");
    std::vector<std::string> got;
    for (const mr::Value& w : field(l, "argv").as_list()) got.push_back(w.as_str());
    CHECK(got == want);
  }
}

TEST_CASE("a config error stops the launch before any rank starts", "[launch][program][process]") {
  const std::string mark = (fs::temp_directory_path() / ("mr-probe-mark-" + std::to_string(getpid()))).string();
  Proc r = sh(kPython + "PROBE_MARK=" + mark + " " + kBin + " --nproc-per-node 2 --config " + kConfig +
              " --tensor-model-parallel-size 4 " + kProbe);
  CHECK(r.exit == 1);
  CHECK(r.out.find("error[parallel.world-size-divisible]") != std::string::npos);
  CHECK_FALSE(fs::exists(mark + ".0"));
  CHECK_FALSE(fs::exists(mark + ".1"));
}

TEST_CASE("--yaml-cfg: a program launch gets the file; megatron-run's own training run refuses it",
          "[launch][program][process][yaml-cfg]") {
  const std::string yaml = std::string(MR_SOURCE_DIR) + "/configs/examples/yaml-cfg-gpt.yaml";
  Proc r = sh(kPython + kBin + " --nproc-per-node 1 --yaml-cfg " + yaml + " " + kProbe);
  INFO(r.out);
  REQUIRE(r.exit == 0);
  auto lines = probe_lines(r.out);
  REQUIRE(lines.size() == 1);
  bool has_file = false;
  const auto& argv = field(lines[0], "argv").as_list();
  for (size_t i = 0; i + 1 < argv.size(); ++i)
    has_file = has_file || (argv[i].as_str() == "--yaml-cfg" && argv[i + 1].as_str() == yaml);
  CHECK(has_file);
  CHECK(r.out.find("init.training-run") == std::string::npos);
  // No program: megatron-run's own run, refused before any worker starts (exit 1, the rule's id).
  Proc own = sh(kBin + " --nproc-per-node 1 --yaml-cfg " + yaml);
  INFO(own.out);
  CHECK(own.exit == 1);
  CHECK(own.out.find("error[init.training-run]: --yaml-cfg: megatron-run's own training run does not take a "
                     "--yaml-cfg file") != std::string::npos);
  CHECK(own.out.find("`megatron-run --dry-run --yaml-cfg FILE`") != std::string::npos);
  CHECK(own.out.find("distribute-saved-activations") == std::string::npos);
  CHECK(own.out.find("bring-up passed") == std::string::npos);
}

TEST_CASE("a rank that fails: the launcher exits with its code", "[launch][program][process]") {
  Proc r = sh(kPython + "PROBE_EXIT_RANK=1 PROBE_EXIT_CODE=9 " + kBin + " --nproc-per-node 2 --config " + kConfig +
              " " + kProbe);
  CHECK(r.exit == 9);
}

TEST_CASE("-- CMD, --no-python and --no-append-args", "[launch][program][process]") {
  Proc a = sh(kBin + " --config " + kConfig + " --no-append-args -- /bin/echo only-mine");
  CHECK(a.exit == 0);
  CHECK(a.out == "only-mine\n");
  Proc b = sh(kBin + " --config " + kConfig + " --no-python /bin/echo mine");
  CHECK(b.exit == 0);
  CHECK(b.out.rfind("mine --num-layers 2 ", 0) == 0);
  Proc c = sh(kBin + " --config " + kConfig + " -- no-such-program-xyz");
  CHECK(c.exit == 2);
  CHECK(c.out.find("cannot find the program 'no-such-program-xyz' on PATH") != std::string::npos);
  // A directory passes access(X_OK) but cannot run: refused before any worker starts (not exit 127 after).
  Proc dir = sh(kBin + " --config " + kConfig + " --nproc-per-node 1 --no-append-args -- /tmp");
  CHECK(dir.exit == 2);
  CHECK(dir.out.find("the program /tmp is a directory, not an executable file") != std::string::npos);
  // A mistyped Megatron flag before the program: its error (with a suggestion) comes first, not a complaint
  // about --no-python's program, whose start the mistake hides.
  Proc d = sh(kBin + " --config " + kConfig + " --num-layer 2 --no-python /bin/echo mine");
  CHECK(d.exit == 2);
  CHECK(d.out.find("unrecognized arguments: --num-layer 2") != std::string::npos);
  CHECK(d.out.find("--num-layer: did you mean --num-layers") != std::string::npos);
  CHECK(d.out.find("needs a program") == std::string::npos);
}

TEST_CASE("the MASTER_PORT the launcher picked stays held while the workers run: a store binds it, nobody else",
          "[launch][program][process][port]") {
  const std::string prog = std::string(" --no-append-args -- /usr/bin/python3 ") + MR_SOURCE_DIR +
                           "/tests/launch/programs/held_port.py";
  // Picked by the launcher: another job's draw (a bind without SO_REUSEADDR) is refused; rank 0's store listens.
  Proc picked = sh(kBin + " --config " + kConfig + " --nproc-per-node 1" + prog);
  INFO(picked.out);
  CHECK(picked.exit == 0);
  CHECK(has_text(picked.out, "MASTER_PORT plain: refused, store: listens"));
  // Given (--master-port): the user's choice, not held.
  const int port = mrtest::free_port();
  REQUIRE(port > 0);
  Proc given = sh(kBin + " --config " + kConfig + " --nproc-per-node 1 --master-port " + std::to_string(port) + prog);
  INFO(given.out);
  CHECK(given.exit == 0);
  CHECK(has_text(given.out, "MASTER_PORT plain: bound, store: listens"));
}

TEST_CASE("a real torch.distributed program (gloo all-reduce) across 2 ranks", "[launch][program][process][torch]") {
  Proc has_torch = sh("/usr/bin/python3 -c 'import torch.distributed'");
  INFO("python3-torch is required (scripts/setup.sh installs it): " << has_torch.out);
  REQUIRE(has_torch.exit == 0);
  Proc r = sh(kPython + kBin + " --nproc-per-node 2 --config " + kConfig + " --no-append-args " + MR_SOURCE_DIR +
              "/tests/launch/programs/allreduce.py");
  INFO(r.out);
  CHECK(r.exit == 0);
  CHECK(r.out.find("allreduce rank 0 of 2: 3") != std::string::npos);
  CHECK(r.out.find("allreduce rank 1 of 2: 3") != std::string::npos);
}

TEST_CASE("torchrun's options: both spellings, PET_* defaults, and a clear refusal for what is not done",
          "[launch][program][process][torchrun-options]") {
  const std::string run = kPython + kBin + " --config " + kConfig + " ";
  // --nproc_per_node, --rdzv-id, --rdzv-endpoint (static): the ranks' environment says so.
  Proc a = sh(run + "--nproc_per_node 2 --rdzv_id job42 --rdzv-endpoint 127.0.0.1:29871 " + kProbe);
  REQUIRE(a.exit == 0);
  auto lines = probe_lines(a.out);
  REQUIRE(lines.size() == 2);
  CHECK(env_of(lines[1], "TORCHELASTIC_RUN_ID") == "job42");
  CHECK(env_of(lines[1], "MASTER_PORT") == "29871");
  // An option given again overrides the earlier one whatever its spelling, as torchrun's argparse does (a wrapper
  // appending `--nproc-per-node 1` to defaults that say `--nproc_per_node 2`).
  CHECK(probe_lines(sh(run + "--nproc_per_node 2 --nproc-per-node 1 " + kProbe).out).size() == 1);
  CHECK(probe_lines(sh(run + "--nproc-per-node 1 --nproc_per_node=2 " + kProbe).out).size() == 2);
  CHECK(probe_lines(sh(run + "--nproc-per-node 2 --nproc-per-node 1 " + kProbe).out).size() == 1);
  Proc twice = sh(run + "--rdzv_id first --rdzv-id second --nproc-per-node 1 " + kProbe);
  REQUIRE(probe_lines(twice.out).size() == 1);
  CHECK(env_of(probe_lines(twice.out)[0], "TORCHELASTIC_RUN_ID") == "second");
  // PET_NPROC_PER_NODE is the default of --nproc-per-node, as in torchrun; the option wins over it.
  CHECK(probe_lines(sh("PET_NPROC_PER_NODE=2 " + run + kProbe).out).size() == 2);
  CHECK(probe_lines(sh("PET_NPROC_PER_NODE=3 " + run + "--nproc-per-node 1 " + kProbe).out).size() == 1);
  // Inside a torchrun worker (RANK, LOCAL_RANK, TORCHELASTIC_RUN_ID), the PET_* it inherited (Kubeflow sets them for
  // the pod) are torchrun's: the program runs in place, once, in the enclosing job (review 29b).
  Proc inner = sh("RANK=1 LOCAL_RANK=1 WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29999 "
                  "TORCHELASTIC_RUN_ID=outer PET_NPROC_PER_NODE=2 PET_NNODES=2 " + run + kProbe);
  INFO(inner.out);
  REQUIRE(probe_lines(inner.out).size() == 1);  // exec'd in place: its line has no "[rank N]" prefix
  CHECK(inner.out.find("{\"env\": {\"RANK\": \"1\", \"LOCAL_RANK\": \"1\"") != std::string::npos);
  CHECK(inner.out.find("\"TORCHELASTIC_RUN_ID\": \"outer\"") != std::string::npos);
  // --standalone: a fresh run id; --nproc-per-node cpu: one rank per processor.
  Proc s = sh(run + "--standalone --nproc-per-node 1 " + kProbe);
  REQUIRE(s.exit == 0);
  CHECK(env_of(probe_lines(s.out)[0], "TORCHELASTIC_RUN_ID") != "none");
  // ... a UUID, as torchrun's str(uuid.uuid4()) (review launch37 #7): 8-4-4-4-12 hex digits, version 4.
  const std::string uuid = env_of(probe_lines(s.out)[0], "TORCHELASTIC_RUN_ID");
  INFO("run id " << uuid);
  CHECK(std::regex_match(uuid, std::regex("[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")));
  // ... its own master: a master or rendezvous endpoint given with it is named as not used.
  Proc sm = sh(run + "--standalone --nproc-per-node 1 --master-port 5 --rdzv-endpoint 10.1.1.1:77 " + kProbe);
  REQUIRE(sm.exit == 0);
  CHECK(env_of(probe_lines(sm.out)[0], "MASTER_ADDR") == "127.0.0.1");
  CHECK(env_of(probe_lines(sm.out)[0], "MASTER_PORT") != "5");
  CHECK(sm.out.find("warning: --standalone: --master-port 5 not used (a standalone job's master is 127.0.0.1 at a "
                    "free port)") != std::string::npos);
  CHECK(sm.out.find("warning: --standalone: --rdzv-endpoint 10.1.1.1:77 not used") != std::string::npos);
  // torchrun's "stacked single-node" form, c10d at port 0 with one node: a free port, as --standalone (finding 1 of
  // review firsthour36); with more nodes refused, saying why (the others cannot find a random port).
  Proc z = sh(run + "--nnodes 1 --nproc-per-node 1 --rdzv-backend c10d --rdzv-endpoint localhost:0 " + kProbe);
  INFO(z.out);
  REQUIRE(z.exit == 0);
  REQUIRE(probe_lines(z.out).size() == 1);
  CHECK(env_of(probe_lines(z.out)[0], "MASTER_ADDR") == "127.0.0.1");
  CHECK(env_of(probe_lines(z.out)[0], "MASTER_PORT") != "0");
  CHECK(env_of(probe_lines(z.out)[0], "TORCHELASTIC_RUN_ID") != "none");
  CHECK(z.out.find("not used") == std::string::npos);
  Proc z2 = sh(run + "--nnodes 2 --nproc-per-node 1 --rdzv-backend c10d --rdzv-endpoint localhost:0 " + kProbe);
  INFO(z2.out);
  CHECK(z2.exit == 2);
  CHECK(z2.out.find("needs a port of 1 to 65535 in a job of several nodes (--nnodes 2): the other nodes' launchers "
                    "cannot find a port chosen at random") != std::string::npos);
  CHECK(z2.out.find("--nnodes 1 takes port 0, as --standalone does") != std::string::npos);
  CHECK(sh(run + "--nproc-per-node cpu " + kProbe).exit == 0);
  // A module the script cannot import: the summary names the Python that ran it and PYTHON_EXEC (review
  // firsthour36 #5: PATH's python3 is not torchrun's own interpreter).
  const std::string faults = std::string(MR_SOURCE_DIR) + "/tests/launch/programs/faults.py";
  Proc imp = sh("env -u PYTHON_EXEC PATH=/usr/bin:/bin FAULT=import FAULT_RANK=0 " + kBin + " --config " + kConfig +
                " --nproc-per-node 2 " + faults);  // two ranks: the launcher reads their stderr (one: the console's)
  INFO(imp.out);
  CHECK(imp.exit == 1);
  CHECK(imp.out.find("hint: a module could not be imported; the program ran under /usr/bin/python3 (the first "
                     "python3 on PATH): install the module there, or set PYTHON_EXEC") != std::string::npos);
  Proc imp2 = sh("FAULT=import FAULT_RANK=0 " + kPython + kBin + " --config " + kConfig + " --nproc-per-node 2 " +
                 faults);
  CHECK(imp2.out.find("the program ran under /usr/bin/python3 (PYTHON_EXEC)") != std::string::npos);
  // torchrun's --role: the workers' ROLE_NAME (both spellings of the others too: --run_path, --no_python).
  Proc role = sh(run + "--nproc-per-node 1 --role trainer " + kProbe);
  REQUIRE(role.exit == 0);
  CHECK(env_of(probe_lines(role.out)[0], "ROLE_NAME") == "trainer");
  CHECK(env_of(probe_lines(a.out)[0], "ROLE_NAME") == "default");
  // --start-method and --run-path change nothing here: accepted and named in a warning.
  Proc named = sh(run + "--nproc-per-node 1 --start_method forkserver --run_path " + kProbe);
  REQUIRE(named.exit == 0);
  CHECK(probe_lines(named.out).size() == 1);
  CHECK(named.out.find("warning: --start-method forkserver: not used") != std::string::npos);
  CHECK(named.out.find("warning: --run-path: not used") != std::string::npos);
  // --monitor-interval: accepted, and named once in a warning (the launch applies its options twice).
  Proc monitor = sh(run + "--nproc-per-node 1 --monitor-interval 5 " + kProbe);
  REQUIRE(monitor.exit == 0);
  const std::string said = "warning: --monitor-interval 5: not used (megatron-run reacts to a worker's exit at once";
  const size_t first = monitor.out.find(said);
  CHECK(first != std::string::npos);
  CHECK(monitor.out.find(said, first + 1) == std::string::npos);
  // torchrun's switches from PET_<NAME> (an integer, non-zero: on): PET_NO_PYTHON runs the first word as a command,
  // PET_MODULE as a module (here: the standard library's `platform`, which prints a line), PET_RUN_PATH is named.
  Proc np = sh("PET_NO_PYTHON=1 " + kBin + " --config " + kConfig + " --no-append-args /bin/echo as-command");
  CHECK(np.exit == 0);
  CHECK(np.out == "as-command\n");
  Proc off = sh("PET_NO_PYTHON=0 PYTHON_EXEC=/bin/echo " + kBin + " --config " + kConfig + " --no-append-args " + kProbe);
  CHECK(off.out == "-u " + kProbe + "\n");  // not on: the script runs under PYTHON_EXEC
  Proc mod = sh("PET_MODULE=1 PYTHON_EXEC=/bin/echo " + kBin + " --config " + kConfig + " --no-append-args platform");
  CHECK(mod.out == "-u -m platform\n");
  // -m is a switch, as torchrun's: options after it are megatron-run's, the first positional word is the module.
  Proc m = sh("PYTHON_EXEC=/bin/echo " + kBin + " -m --config " + kConfig + " --nproc-per-node 1 platform --own");
  INFO(m.out);
  CHECK(m.exit == 0);
  CHECK(m.out.find("-u -m platform --own --num-layers 2 ") != std::string::npos);
  Proc rp = sh("PET_RUN_PATH=1 " + kBin + " --config " + kConfig + " --no-append-args -- /bin/true");
  CHECK(rp.out.find("PET_RUN_PATH is set (the default of --run-path): not used") != std::string::npos);
  Proc bad = sh("PET_NO_PYTHON=yes " + kBin + " --config " + kConfig + " --no-append-args /bin/echo x");
  CHECK(bad.exit == 2);
  CHECK(bad.out.find("PET_NO_PYTHON='yes' (the default of --no-python) is not an integer") != std::string::npos);
  // Every PET_ integer is read as Python's int() reads it: blanks around and a sign are fine, a trailing word is not.
  Proc blanks = sh("PET_NO_PYTHON=' +1 ' " + kBin + " --config " + kConfig + " --no-append-args /bin/echo as-command");
  CHECK(blanks.out == "as-command\n");
  Proc port = sh("PET_MASTER_PORT=29500x " + run + "--nproc-per-node 1 " + kProbe);
  CHECK(port.exit == 2);
  CHECK(port.out.find("PET_MASTER_PORT='29500x' (the default of --master-port) is not an integer") != std::string::npos);
  // The built-in worker is megatron-run again inside the job: the PET_ defaults were its spawner's and are not read
  // again there (PET_NPROC_PER_NODE, as Kubeflow exports it, started a job inside every worker: a fork bomb).
  for (const std::string& given : {std::string(), std::string("--nproc-per-node 2 --nnodes 1 ")}) {
    Proc own = sh("PET_NPROC_PER_NODE=" + std::string(given.empty() ? "2" : "3 PET_NNODES=2") +
                  " timeout -s KILL 120 " + kBin + " --config " + kConfig + " " + given +
                  "--train-iters 2 --lr-warmup-iters 0");
    INFO(own.out);
    CHECK(own.exit == 0);
    CHECK(own.out.find("nested") == std::string::npos);
    CHECK(own.out.find("[rank 1] megatron-run: training run finished: 2 iterations") != std::string::npos);
    CHECK(own.out.find("[rank 2]") == std::string::npos);
  }
  // torchrun's --print-completion SHELL: megatron-run's own script for that shell (as `schema --format
  // SHELL-completion`), printed at once whatever else is given; nothing starts. torchrun reads no PET_ default
  // for it, and neither does megatron-run.
  for (const char* shell : {"bash", "zsh", "fish"}) {
    Proc c = mrtest::run_shell(run + "--nproc-per-node 2 --print-completion " + shell + " " + kProbe);
    Proc schema = mrtest::run_shell(kBin + " schema --format " + shell + "-completion");
    INFO(shell << ": " << c.out);
    CHECK(c.exit == 0);
    CHECK(c.out == schema.out);
    CHECK(has_text(c.out, std::string(shell) + " completion for megatron-run"));
    CHECK_FALSE(has_text(c.out, "{\"env\""));
  }
  // As torchrun's (shtab's action): it acts where it stands; nothing after it is read, the first one wins.
  Proc after = mrtest::run_shell(kBin + " --print-completion=zsh --max-restarts x --print-completion bash");
  CHECK(after.exit == 0);
  CHECK(has_text(after.out, "zsh completion for megatron-run"));
  Proc help = mrtest::run_shell(kBin + " --help --print-completion bash");
  CHECK(help.exit == 0);
  CHECK_FALSE(has_text(help.out, "completion for megatron-run"));
  Proc tcsh = sh(kBin + " --print_completion tcsh");
  CHECK(tcsh.exit == 2);
  CHECK(has_text(tcsh.out, "argument --print-completion/--print_completion: megatron-run has no tcsh completion script"));
  Proc pet = sh("PET_PRINT_COMPLETION=bash " + run + "--nproc-per-node 1 " + kProbe);
  REQUIRE(pet.exit == 0);
  CHECK(has_text(pet.out, "{\"env\""));
  CHECK_FALSE(has_text(pet.out, "completion"));
  // torchrun's default event handler is accepted (it records nothing), in either spelling.
  Proc ev = sh(run + "--nproc-per-node 1 --event-log-handler null --event_log_handler null " + kProbe);
  CHECK(ev.exit == 0);
  // Not done yet, or a bad value: refused (exit 2) with the option named, before anything starts; every option of
  // torchrun 2.x is known with its arity, so the word after it is not taken for the program.
  // (--max-restarts, --log-dir, -r, -t, --local-ranks-filter, --term-timeout: supervision_test.cpp.)
  for (std::string opt : {"--rdzv-backend etcd", "--nproc-per-node lots", "--start-method thread", "--role ''",
                          "--local-addr '[::1'", "--numa-binding nodes", "--signals-to-handle SIGFOO",
                          "--signals_to_handle ''", "--logs-specs x", "--event-log-handler x",
                          "--print-completion ksh", "--shutdown-timeout 3 --term-timeout 4"}) {
    Proc r = sh(run + opt + " " + kProbe);
    INFO(opt << ": " << r.out);
    CHECK(r.exit == 2);
    CHECK(r.out.find("argument --") != std::string::npos);
    CHECK(r.out.find("{\"env\"") == std::string::npos);
  }
  // Megatron's own --local-rank: a dry run takes it; the workers megatron-run starts each get their own LOCAL_RANK.
  CHECK(sh(kBin + " --dry-run --config " + kConfig + " --local-rank 0 >/dev/null").exit == 0);
  Proc lr = sh(run + "--nproc-per-node 2 --local-rank 0 " + kProbe);
  INFO(lr.out);
  CHECK(lr.exit == 2);
  CHECK(lr.out.find("error[launch.local-rank-given]: argument --local-rank (command line argv[") != std::string::npos);
  CHECK(lr.out.find("{\"env\"") == std::string::npos);
}

TEST_CASE("megatron-run's own options after the program are the program's, and said (launch.own-option-after-program)",
          "[launch][program][process]") {
  // A trailing --dry-run: the program's own argument, so the job really starts; the warning says so.
  Proc dry = sh(kBin + " --nproc-per-node 2 --config " + kConfig + " --no-python /bin/echo mine --dry-run");
  INFO(dry.out);
  CHECK(dry.exit == 0);
  CHECK(dry.out.find("warning[launch.own-option-after-program]: --dry-run after the program /bin/echo is the "
                     "program's own argument, passed to it: this is no dry run, the program starts on every rank; "
                     "megatron-run's options go before the program (megatron-run --dry-run ... /bin/echo ...)") !=
        std::string::npos);
  CHECK(dry.out.find("[rank 1] mine --dry-run --num-layers 2 ") != std::string::npos);  // it started, the word passed
  // --config and --nnodes after the program: passed on, not read (so the config before it is the one validated).
  Proc cfg = sh(kBin + " --config " + kConfig + " --no-python /bin/echo --config x.yaml --nnodes=1");
  INFO(cfg.out);
  CHECK(cfg.exit == 0);
  CHECK(cfg.out.find("warning[launch.own-option-after-program]: --config, --nnodes are megatron-run's options, given "
                     "after the program /bin/echo: passed to it as its own arguments and not read by megatron-run "
                     "(every word after the program is the program's, as with torchrun); megatron-run's options go "
                     "before the program") != std::string::npos);
  CHECK(cfg.out.find("program-own-argument") == std::string::npos);  // not named again as a near Megatron flag
  CHECK(cfg.out.find("\n--config x.yaml --nnodes=1 --num-layers 2 ") != std::string::npos);
  // A Megatron flag there is launch.flags-after-program's; --help, a program's own, and a "--"'s words are not said.
  Proc none = sh(kBin + " --config " + kConfig + " --no-python /bin/echo --help --num-layers 2 -- --config x");
  INFO(none.out);
  CHECK(none.exit == 0);
  CHECK(none.out.find("own-option-after-program") == std::string::npos);
}

TEST_CASE("Megatron flags after the program are validated as the program gets them", "[launch][program][process]") {
  // Megatron-LM's example scripts put every flag after pretrain_gpt.py (torchrun's form): they reach the program as
  // given and are validated too (review 29a): here TP 4 in a world of 1 is refused before anything starts.
  Proc tp = sh(kBin + " --config " + kConfig + " --no-python /bin/echo --num-layers=8 mine --tensor-model-parallel-size 4");
  INFO(tp.out);
  CHECK(tp.exit == 1);
  CHECK(tp.out.find("error[parallel.world-size-divisible]: world size (1) is not a multiple of the total model size 4 "
                    "= --tensor-model-parallel-size (4)") != std::string::npos);
  // A flag given both after the program and in a config file: the appended one wins in the program's argparse,
  // and is the one validated; a word that is no Megatron flag (`mine`, --own-flag) is the program's, unvalidated.
  Proc r = sh(kBin + " --config " + kConfig + " --no-python /bin/echo --num-layers=8 mine --own-flag x");
  INFO(r.out);
  CHECK(r.exit == 0);
  CHECK(r.out.find("warning[launch.flags-after-program]: --num-layers is given after the program /bin/echo and "
                   "before it (or in a config file): megatron-run appends the value before it after the program's "
                   "own arguments, where it wins in argparse, and validated that one") != std::string::npos);
  CHECK(r.out.find("--num-layers=8 mine --own-flag x --num-layers 2 ") != std::string::npos);
  CHECK(r.out.find("program-own-argument") == std::string::npos);
  // Nothing appended (--no-append-args): the program's own words are what it gets and what is validated; the
  // given arguments it never gets are named (review 29c); a near miss of a Megatron flag is named.
  const std::string shape = " --num-layers 8 --hidden-size 64 --num-attention-heads 4 --seq-length 8 "
                            "--max-position-embeddings 8 --micro-batch-size 1";
  Proc n = sh(kBin + " --config " + kConfig + " --no-append-args -- /bin/echo" + shape + " --hiden-size 64");
  INFO(n.out);
  CHECK(n.exit == 0);
  CHECK(n.out.find("flags-after-program") == std::string::npos);
  CHECK(n.out.find("warning[launch.not-appended]: --num-layers, ") != std::string::npos);
  CHECK(n.out.find("but --no-append-args passes only the program's own arguments, which are the ones validated") !=
        std::string::npos);
  Proc tp4 = sh(kBin + " --config " + kConfig + " --no-append-args -- /bin/echo" + shape +
                " --tensor-model-parallel-size 4");
  CHECK(tp4.exit == 1);  // the program's TP 4 in a world of 1, though the config says 1
  // A program with no Megatron flag of its own (it reads its config another way): the given arguments are validated.
  CHECK(sh(kBin + " --config " + kConfig + " --no-append-args -- /bin/echo --own-config x.yaml").exit == 0);
  CHECK(n.out.find("warning[launch.program-own-argument]: --hiden-size (did you mean --hidden-size?): no Megatron "
                   "flag, after the program /bin/echo: passed to it as its own argument, not validated") !=
        std::string::npos);
  // Only after the program (no config, no flag before it): validated, passed verbatim, nothing appended.
  Proc only = sh(kBin + " --no-python /bin/echo --num-layers 2 --hidden-size 64 --num-attention-heads 4 "
                        "--seq-length 8 --max-position-embeddings 8 --micro-batch-size 1 --context-parallel-size 1");
  INFO(only.out);
  CHECK(only.exit == 0);
  CHECK(only.out.find("\n--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 8 "
                      "--max-position-embeddings 8 --micro-batch-size 1 --context-parallel-size 1\n") != std::string::npos);
  // A config value equal to the default (`fp16: false`) is no appended word: the program's own --fp16 stands, and
  // is validated (review 29c: it was validated as false while the program ran with --fp16 --bf16).
  const std::string dir = mrtest::scratch_dir("program-default").string();
  { std::ofstream(dir + "/fp16.yaml") << "fp16: false\n"; }
  Proc def = sh(kBin + " --config " + kConfig + " --config " + dir + "/fp16.yaml --no-python /bin/echo --fp16 --bf16");
  INFO(def.out);
  CHECK(def.exit == 1);
  CHECK(def.out.find("warning[launch.flags-after-program]: --fp16 is given after the program /bin/echo and set to "
                     "the default before it (or in a config file), which no appended flag can say: the program's own "
                     "value stands, and is the one validated") != std::string::npos);
  CHECK(def.out.find("error[precision.fp16-bf16-exclusive]") != std::string::npos);
  std::filesystem::remove_all(dir);
  // A '--' among the program's arguments: the appended flags come after it (positional to an argparse program).
  Proc dashes = sh(kBin + " --config " + kConfig + " --no-python /bin/echo -- --x");
  INFO(dashes.out);
  CHECK(dashes.exit == 0);
  CHECK(dashes.out.find("warning[launch.appended-after-dashes]: the program /bin/echo's arguments hold '--'") !=
        std::string::npos);
  Proc missing = sh(kBin + " --no-python /bin/echo --hidden-size 64 --micro-batch-size 1");
  CHECK(missing.exit == 1);
  CHECK(missing.out.find("error[model-shape.num-layers-missing]") != std::string::npos);
}

// The flags appended are the ones given, as --format argv prints them, not the validated namespace: validation
// re-derives some (the CP size from CP x GTP, a one-element list it unwraps), and the launch dropped those
// (review 29a: CP 2 reached the program as CP 1, --moe-aux-loss-coeff as 0).
TEST_CASE("the flags appended to a program are the ones given, derived ones included", "[launch][program][process]") {
  const std::string b = " --num-layers 2 --hidden-size 64 --num-attention-heads 4 --micro-batch-size 1 --seq-length 8 "
                        "--max-position-embeddings 8 ";
  Proc r = sh(kBin + " --nproc-per-node 2 " + b + "--context-parallel-size 2 --no-python /bin/echo");
  INFO(r.out);
  CHECK(r.exit == 0);
  CHECK(r.out.find("[rank 0] --context-parallel-size 2 --num-layers 2") != std::string::npos);
  Proc argv = sh(kBin + " --format argv" + b + "--context-parallel-size 2 --no-python /bin/echo");
  CHECK(argv.out.find("/bin/echo --context-parallel-size 2 --num-layers 2") != std::string::npos);
  Proc moe = sh(kBin + b + "--num-experts 4 --moe-aux-loss-coeff 0.5 --moe-router-load-balancing-type seq_aux_loss "
                "--no-python /bin/echo");
  INFO(moe.out);
  CHECK(moe.exit == 0);
  CHECK(moe.out.find("--moe-aux-loss-coeff 0.5") != std::string::npos);
  CHECK(moe.out.find("--moe-router-load-balancing-type seq_aux_loss") != std::string::npos);
}

// --use-checkpoint-args with the user's program: a checkpoint megatron-run cannot read (a Megatron checkpoint) gives
// the program its model arguments, so what validation refuses of the values given is said and the program starts
// (Megatron-LM's run_inference_server.sh gives only --load); no checkpoint there: the values given, refused as
// Megatron would (review 29a).
TEST_CASE("--use-checkpoint-args for a program: an unreadable checkpoint's refusals are warnings", "[launch][program][process]") {
  const std::string dir = mrtest::scratch_dir("ckpt-args-program").string();
  std::filesystem::create_directories(dir + "/ck/iter_0000100/mp_rank_00");
  { std::ofstream(dir + "/ck/latest_checkpointed_iteration.txt") << "100"; }
  { std::ofstream(dir + "/ck/iter_0000100/mp_rank_00/model_optim_rng.pt") << "torch"; }
  const std::string rest = " --use-checkpoint-args --micro-batch-size 1 --tokenizer-type NullTokenizer --vocab-size 100";
  Proc r = sh(kBin + " --no-python /bin/echo --load " + dir + "/ck" + rest);
  INFO(r.out);
  CHECK(r.exit == 0);
  CHECK(r.out.find("warning[checkpoint.use-checkpoint-args]: --use-checkpoint-args: megatron-run cannot read the "
                   "checkpoint's arguments (" + dir + "/ck/iter_0000100 holds a Megatron torch (mp_rank_*/) checkpoint, "
                   "not megatron-run's (no rank_00000.json)); /bin/echo replaces the model's shape with the checkpoint's before its own validation") !=
        std::string::npos);
  CHECK(r.out.find("warning[model-shape.num-layers-missing]") != std::string::npos);
  CHECK(r.out.find("\n--load " + dir + "/ck --use-checkpoint-args") != std::string::npos);  // it ran
  // No checkpoint there: Megatron keeps the values given and refuses them; so does megatron-run.
  Proc none = sh(kBin + " --no-python /bin/echo --load " + dir + "/none" + rest);
  INFO(none.out);
  CHECK(none.exit == 1);
  CHECK(none.out.find("error[model-shape.num-layers-missing]") != std::string::npos);
  // A dry run validates the values given.
  CHECK(sh(kBin + " --dry-run --load " + dir + "/ck" + rest).exit == 1);
  // Only the model's shape is the checkpoint's to give: another refusal stands (review 29c).
  Proc tp = sh(kBin + " --no-python /bin/echo --load " + dir + "/ck" + rest + " --tensor-model-parallel-size 3");
  INFO(tp.out);
  CHECK(tp.exit == 1);
  CHECK(tp.out.find("error[") != std::string::npos);
  CHECK(tp.out.find("cannot read the checkpoint's arguments") == std::string::npos);
  // A megatron-run checkpoint there, damaged (its rank 0 metadata cut short): an error, as for megatron-run's own
  // run, not a checkpoint left to the program (it was, before 2026-12-06).
  std::filesystem::create_directories(dir + "/ours/iter_0000007");
  { std::ofstream(dir + "/ours/latest_checkpointed_iteration.txt") << "7"; }
  { std::ofstream(dir + "/ours/iter_0000007/rank_00000.json") << "{\"format\": "; }
  Proc bad = sh(kBin + " --no-python /bin/echo --load " + dir + "/ours" + rest);
  INFO(bad.out);
  CHECK(bad.exit == 1);
  CHECK(bad.out.find("error[checkpoint.corrupt]") != std::string::npos);
  CHECK(bad.out.find(dir + "/ours/iter_0000007/rank_00000.json") != std::string::npos);
  CHECK(bad.out.find("cannot read the checkpoint's arguments") == std::string::npos);
  CHECK(bad.out.find("\n--load ") == std::string::npos);  // the program did not start
  // Rank 0's metadata missing, another rank's there: megatron-run's checkpoint, damaged, not a Megatron one.
  std::filesystem::remove(dir + "/ours/iter_0000007/rank_00000.json");
  { std::ofstream(dir + "/ours/iter_0000007/rank_00001.json") << "{\"format\": 1}"; }
  Proc no0 = sh(kBin + " --no-python /bin/echo --load " + dir + "/ours" + rest);
  INFO(no0.out);
  CHECK(no0.exit == 1);
  CHECK(no0.out.find("error[checkpoint.corrupt]: " + dir + "/ours/iter_0000007/rank_00000.json: cannot open") !=
        std::string::npos);
  CHECK(no0.out.find("cannot read the checkpoint's arguments") == std::string::npos);
  std::filesystem::remove_all(dir);
}

// A word read as the program that is not there: a dry run says so (often a value the shell split), a launch refuses
// it with the same words; the program's own options put before it get the program named (review 29a).
TEST_CASE("a split value read as the program, and a program's options before it, are named", "[launch][program][process]") {
  const std::string b = " --num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 8 "
                        "--max-position-embeddings 8 --micro-batch-size 1 ";
  Proc dry = sh(kBin + " --dry-run --world-size 8" + b + "--step-batch-size-schedule 0:16 2.4B:320 "
                "--tensor-model-parallel-size 3");
  INFO(dry.out);
  CHECK(dry.exit == 1);  // the flags after the word are validated too
  CHECK(dry.out.find("warning[launch.program-missing]: the script 2.4B:320 does not exist") != std::string::npos);
  CHECK(dry.out.find("--step-batch-size-schedule takes one value ('0:16'), so '2.4B:320' after it was read as the "
                     "PROGRAM (a value with blanks in it is split into words unless it is quoted: "
                     "--step-batch-size-schedule '0:16 2.4B:320 ...')") != std::string::npos);
  CHECK(dry.out.find("error[parallel.world-size-divisible]") != std::string::npos);
  Proc launch = sh(kBin + b + "--step-batch-size-schedule=0:16 2.4B:320");
  INFO(launch.out);
  CHECK(launch.exit == 2);
  // The same condition has the dry run's id at launch, where it is an error (review design34 #2).
  CHECK(launch.out.find("error[launch.program-missing]: the script 2.4B:320 does not exist") != std::string::npos);
  CHECK(launch.out.find("--step-batch-size-schedule takes one value ('0:16')") != std::string::npos);
  // A misspelled script after a one-value flag is not taken for a split value (review 29c).
  Proc typo = sh(kBin + b + "pretrain_gtp.py --lr 1e-4");
  INFO(typo.out);
  CHECK(typo.exit == 2);
  CHECK(typo.out.find("error[launch.program-missing]: the script pretrain_gtp.py does not exist") != std::string::npos);
  CHECK(typo.out.find("takes one value") == std::string::npos);
  const std::string dir = mrtest::scratch_dir("program-options").string();
  { std::ofstream(dir + "/train.py") << "print(1)\n"; }
  // After '--' the program is the word that follows it.
  Proc dd = sh("cd " + dir + " && " + kBin + b + "--foo x -- python3 train.py");
  INFO(dd.out);
  CHECK(dd.exit == 2);
  CHECK(dd.out.find("\n  python3: the program? --foo before it") != std::string::npos);
  Proc before = sh("cd " + dir + " && " + kBin + b + "--language-model-type mistral_7b --use-te train.py");
  INFO(before.out);
  CHECK(before.exit == 2);
  CHECK(before.out.find("unrecognized arguments: --language-model-type mistral_7b --use-te train.py\n  train.py: the "
                        "program? --language-model-type before it is an option neither megatron-run nor Megatron "
                        "knows, which ends the search for the program: a program's own options go after it "
                        "(train.py --language-model-type ...)") != std::string::npos);
  std::filesystem::remove_all(dir);
}

// Run in place of the training program by torchrun (TORCHELASTIC_ERROR_FILE set), a refusal is written there as
// Python's @record writes an exception, so torchrun's summary names it as the root cause (review 29b).
TEST_CASE("a refusal in place of a torchrun worker's program is written to its TORCHELASTIC_ERROR_FILE", "[launch][program][process]") {
  const std::string dir = mrtest::scratch_dir("refusal-record").string();
  const std::string file = dir + "/error.json";
  std::filesystem::remove(file);
  const std::string job = "RANK=0 LOCAL_RANK=0 WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29999 "
                          "TORCHELASTIC_RUN_ID=outer TORCHELASTIC_ERROR_FILE=" + file + " ";
  Proc r = sh(job + kBin + " --config " + kConfig + " --tensor-model-parallel-size 3 --no-python /bin/true");
  INFO(r.out);
  CHECK(r.exit == 1);
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  INFO(text.str());
  const mr::Value v = mr::Value::parse_json(text.str());
  const mr::Value& m = v.as_object().front().second;
  REQUIRE(m.is_object());
  CHECK(m.as_object().at(0).second.as_str().rfind("megatron-run: error[parallel.world-size-divisible]: world size (2)", 0) == 0);
  CHECK(text.str().find("\"timestamp\": \"") != std::string::npos);
  // A usage error too (exit 2); success writes nothing.
  Proc u = sh(job + kBin + " --config " + kConfig + " --num-layerz 3 --no-python /bin/true");
  CHECK(u.exit == 2);
  std::ifstream in2(file);
  std::stringstream text2;
  text2 << in2.rdbuf();
  CHECK(text2.str().find("unrecognized arguments: --num-layerz 3") != std::string::npos);
  // A refusal under a heading (an elastic job's "valid for no node count ...; at 2 nodes:"): the message has the
  // heading and the rule's line (review 29c).
  Proc el = sh("TORCHELASTIC_ERROR_FILE=" + file + " " + kBin + " --nnodes 1:2 --nproc-per-node 1 --rdzv-backend c10d "
               "--rdzv-endpoint 127.0.0.1:" + std::to_string(mrtest::store_port()) + " --config " + kConfig +
               " --tensor-model-parallel-size 3 --no-python /bin/true");
  INFO(el.out);
  CHECK(el.exit == 1);
  std::ifstream in3(file);
  std::stringstream text3;
  text3 << in3.rdbuf();
  CHECK(text3.str().find("\"message\": \"megatron-run: error: the config is valid for no node count from 1 to 2 "
                         "(--nnodes 1:2); at 2 nodes: megatron-run: error[parallel.world-size-divisible]") !=
        std::string::npos);
  std::filesystem::remove(file);
  CHECK(sh(job + kBin + " --config " + kConfig + " --no-python /bin/true").exit == 0);
  CHECK_FALSE(std::filesystem::exists(file));
  std::filesystem::remove_all(dir);
}

TEST_CASE("RANK and WORLD_SIZE left in the shell do not stop --nproc-per-node", "[launch][program][process]") {
  // An incomplete enclosing job (no MASTER_ADDR/MASTER_PORT): with --nproc-per-node megatron-run is the launcher and
  // its workers get their own environment (torchrun overwrites these too); without it, the refusal stays.
  const std::string stale = "env -u MASTER_ADDR -u MASTER_PORT RANK=3 WORLD_SIZE=8 ";
  Proc r = sh(stale + kPython + kBin + " --nproc-per-node 2 --config " + kConfig + " " + kProbe);
  INFO(r.out);
  CHECK(r.exit == 0);
  CHECK(r.out.find("RANK and WORLD_SIZE are set but MASTER_ADDR/MASTER_PORT are not") != std::string::npos);
  const auto lines = probe_lines(r.out);
  REQUIRE(lines.size() == 2);
  CHECK(env_of(lines.at(0), "WORLD_SIZE") == "2");
  // Without it the shell's RANK and WORLD_SIZE say a job encloses this one (validated for 8 ranks here): refused.
  Proc n = sh(stale + kPython + kBin + " --config " + kConfig + " " + kProbe);
  CHECK((n.exit == 1 || n.exit == 2));
  CHECK(probe_lines(n.out).empty());
}

TEST_CASE("a privileged --master-port this user may not bind: own worker refused before it starts, a program warned",
          "[launch][program][process][master-port]") {
  // Root may bind any port: without CAP_NET_BIND_SERVICE in its bounding set (setpriv) it may not, as any user.
  auto has = [](const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; };
  const std::string drop = geteuid() == 0 ? "setpriv --bounding-set -net_bind_service " : "";
  const int start = mr::launch::unprivileged_port_start();
  Proc own = sh(drop + kBin + " --config " + kConfig + " --nproc-per-node 2 --master-port 1 --bring-up-only");
  INFO(own.out);
  if (start <= 1) {  // this kernel lets everyone bind port 1: nothing to refuse
    CHECK_FALSE(has(own.out, "master-port-privileged"));
    return;
  }
  CHECK(own.exit == 1);
  CHECK(has(own.out, "error[launch.master-port-privileged]: argument --master-port 1: this user may not bind ports below " +
                         std::to_string(start) + " (net.ipv4.ip_unprivileged_port_start"));
  CHECK_FALSE(has(own.out, "[rank "));
  Proc prog = sh(drop + kBin + " --config " + kConfig + " --nproc-per-node 1 --master-port 1 --no-append-args --no-python /bin/echo ran");
  INFO(prog.out);
  CHECK(prog.exit == 0);
  CHECK(has(prog.out, "warning[launch.master-port-privileged]: --master-port 1: this user may not bind ports below"));
  CHECK(has(prog.out, "ran"));
}

TEST_CASE("TMPDIR missing or unwritable: the run directory falls back as torchrun's does",
          "[launch][program][process][tmpdir]") {
  auto has = [](const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; };
  Proc r = sh("TMPDIR=/nonexistent/dir " + kBin + " --config " + kConfig + " --nproc-per-node 2 --no-append-args --no-python /bin/echo ran");
  INFO(r.out);
  CHECK(r.exit == 0);
  CHECK(has(r.out, "ran"));
}

TEST_CASE("--master-port held by another program on one node: own worker refused before it starts, a program warned",
          "[launch][program][process][master-port]") {
  int port = 0;
  const int fd = mrtest::loopback_listener(port);
  REQUIRE(fd >= 0);
  const std::string p = std::to_string(port);
  // megatron-run's own worker: rank 0 hosts its store there for sure. No worker starts (no rank's output).
  Proc own = sh(kBin + " --config " + kConfig + " --nproc-per-node 2 --master-port " + p + " --bring-up-only");
  CHECK(own.exit == 1);
  CHECK(own.out.find("error: argument --master-port " + p + ": the port is in use on this machine") != std::string::npos);
  CHECK(own.out.find("[rank ") == std::string::npos);
  // The user's program may not use MASTER_PORT: it runs, after a warning.
  Proc prog = sh(kBin + " --config " + kConfig + " --nproc-per-node 1 --master-port " + p +
                 " --no-append-args --no-python /bin/echo ran");
  CHECK(prog.exit == 0);
  CHECK(prog.out.find("warning: --master-port " + p + ": the port is in use on this machine") != std::string::npos);
  CHECK(prog.out.find("ran\n") != std::string::npos);
  close(fd);
  // Free again: no word about it.
  Proc free = sh(kBin + " --config " + kConfig + " --nproc-per-node 1 --master-port " + p +
                 " --no-append-args --no-python /bin/echo ran");
  CHECK(free.exit == 0);
  CHECK(free.out.find("ran\n") != std::string::npos);
  CHECK(free.out.find("in use") == std::string::npos);
}

TEST_CASE("MASTER_ADDR and MASTER_PORT in the launcher's environment: not read, named in a notice",
          "[launch][program][process][master-port]") {
  // torchrun reads neither (its defaults are PET_MASTER_ADDR / PET_MASTER_PORT); the workers get the job's own.
  const std::string echo = " --no-append-args --no-python -- /bin/sh -c 'echo port=$MASTER_PORT addr=$MASTER_ADDR'";
  Proc r = sh("env -u SLURM_PROCID MASTER_PORT=1 MASTER_ADDR=10.9.9.9 " + kBin + " --config " + kConfig +
              " --nproc-per-node 1" + echo);
  INFO(r.out);
  CHECK(r.exit == 0);
  CHECK(r.out.find("warning: MASTER_PORT=1 is set in the launcher's environment: not read (torchrun reads "
                   "PET_MASTER_PORT instead); the workers get this job's own MASTER_PORT (a free port unless "
                   "--master-port is given)") != std::string::npos);
  CHECK(r.out.find("warning: MASTER_ADDR=10.9.9.9 is set in the launcher's environment: not read (torchrun reads "
                   "PET_MASTER_ADDR instead); the workers get this job's own MASTER_ADDR (127.0.0.1 unless "
                   "--master-addr is given)") != std::string::npos);
  CHECK(r.out.find("port=1 ") == std::string::npos);
  CHECK(r.out.find("addr=127.0.0.1") != std::string::npos);
  // The option given: it sets the workers' value, no notice.
  const int port = mrtest::free_port();
  Proc given = sh("env -u SLURM_PROCID -u MASTER_ADDR MASTER_PORT=1 " + kBin + " --config " + kConfig +
                  " --nproc-per-node 1 --master-port " + std::to_string(port) + echo);
  CHECK(given.exit == 0);
  CHECK(given.out.find("port=" + std::to_string(port) + " ") != std::string::npos);
  CHECK(given.out.find("MASTER_PORT=1 is set") == std::string::npos);
  // Unset: no notice either.
  Proc none = sh("env -u SLURM_PROCID -u MASTER_ADDR -u MASTER_PORT " + kBin + " --config " + kConfig +
                 " --nproc-per-node 1" + echo);
  CHECK(none.exit == 0);
  CHECK(none.out.find("in the launcher's environment") == std::string::npos);
}

TEST_CASE("--distributed-backend nccl for a program: a warning on a machine without any GPU, never a refusal",
          "[launch][program][process][nccl-check]") {
  // torch's nccl is NCCL on NVIDIA GPUs and RCCL on ROCm: megatron-run starts the program either way.
  auto run_on = [](const std::string& root, const std::string& backend) {
    return mrtest::run_shell("env -u CUDA_VISIBLE_DEVICES MR_DEVICE_ROOT='" + root + "' " + kBin + " --config " +
                             kConfig + " --distributed-backend " + backend + " --no-append-args -- /bin/echo ran 2>&1");
  };
  const std::string warning = "megatron-run: warning[launch.nccl-without-gpu]: --distributed-backend nccl: ";
  const mrtest::Proc bare = run_on(mrtest::fake_root("bare", {"dev/null"}, "launch-program"), "nccl");
  INFO(bare.out);
  CHECK(bare.exit == 0);
  CHECK(bare.out.find(warning + "this machine shows no GPU (no /dev/nvidia<N> device, no GPU in /proc/driver/nvidia/gpus, "
                                "no ROCm /dev/kfd); torch's nccl backend (NCCL, or RCCL on ROCm) needs a GPU for each "
                                "rank") != std::string::npos);
  CHECK(bare.out.find("ran\n") != std::string::npos);
  CHECK(bare.out.find("nccl-unavailable") == std::string::npos);
  for (const std::string& root : {mrtest::fake_root("rocm", {"dev/kfd"}, "launch-program"),
                                  mrtest::fake_root("nvidia", {"dev/nvidia0", "dev/nvidiactl"}, "launch-program")}) {
    const mrtest::Proc gpu = run_on(root, "nccl");
    INFO(gpu.out);
    CHECK(gpu.exit == 0);
    CHECK(gpu.out.find("launch.nccl-without-gpu") == std::string::npos);
    CHECK(gpu.out.find("ran\n") != std::string::npos);
  }
  const mrtest::Proc gloo = run_on(mrtest::fake_root("bare", {"dev/null"}, "launch-program"), "gloo");
  CHECK(gloo.exit == 0);
  CHECK(gloo.out.find("launch.nccl-without-gpu") == std::string::npos);
}

TEST_CASE("torchrun's worker variables beyond the agent's: TORCHELASTIC_SIGNALS_TO_HANDLE; the agent's inputs named",
          "[launch][program][process][torchrun-env]") {
  const std::string run = kPython + kBin + " --config " + kConfig + " --nproc-per-node 2 ";
  // The launcher's --signals-to-handle list, by name, as torchrun's launcher exports it (its default without).
  Proc d = sh(run + kProbe);
  INFO(d.out);
  REQUIRE(probe_lines(d.out).size() == 2);
  CHECK(env_of(probe_lines(d.out)[1], "TORCHELASTIC_SIGNALS_TO_HANDLE") == "SIGTERM,SIGINT,SIGHUP,SIGQUIT");
  Proc s = sh(run + "--signals-to-handle term,USR1 " + kProbe);
  INFO(s.out);
  REQUIRE(probe_lines(s.out).size() == 2);
  CHECK(env_of(probe_lines(s.out)[0], "TORCHELASTIC_SIGNALS_TO_HANDLE") == "SIGTERM,SIGUSR1");
  // torchrun's file-timer watchdog (and its other agent inputs): not implemented, named, not passed on.
  Proc t = sh("TORCHELASTIC_ENABLE_FILE_TIMER=1 TORCHELASTIC_TIMER_FILE=/tmp/x " + run + kProbe);
  INFO(t.out);
  REQUIRE(t.exit == 0);
  CHECK(has_text(t.out, "warning: TORCHELASTIC_ENABLE_FILE_TIMER=1, TORCHELASTIC_TIMER_FILE=/tmp/x in megatron-run's "
                        "environment: not used"));
  REQUIRE(probe_lines(t.out).size() == 2);
  CHECK(env_of(probe_lines(t.out)[0], "TORCHELASTIC_ENABLE_FILE_TIMER") == "<unset>");
  CHECK(env_of(probe_lines(t.out)[0], "TORCHELASTIC_TIMER_FILE") == "<unset>");
  Proc h = sh("TORCHELASTIC_HEALTH_CHECK_PORT=8000 " + run + kProbe);
  CHECK(has_text(h.out, "warning: TORCHELASTIC_HEALTH_CHECK_PORT=8000 in megatron-run's environment: not used"));
  // Inside an enclosing torchrun job (its workers inherit them from their launcher): not the user's, not named.
  Proc in_job = sh("TORCHELASTIC_RUN_ID=outer TORCHELASTIC_ENABLE_FILE_TIMER=1 " + run + kProbe);
  INFO(in_job.out);
  REQUIRE(in_job.exit == 0);
  CHECK_FALSE(has_text(in_job.out, "TORCHELASTIC_ENABLE_FILE_TIMER=1"));
  CHECK(env_of(probe_lines(in_job.out)[0], "TORCHELASTIC_RUN_ID") == "none");
}

TEST_CASE("--log-dir /dev/null: torchrun's no log files; --monitor-interval above 0, named as not used",
          "[launch][program][process][torchrun-options]") {
  const std::string run = kPython + kBin + " --config " + kConfig + " --nproc-per-node 2 ";
  // Every stream of every rank on the console (-t/-r change nothing), TORCHELASTIC_ERROR_FILE empty, no directory.
  Proc n = sh("TMPDIR=/nonexistent-mr-dir " + run + "--log-dir /dev/null -t 3 -r 1 " + kProbe);
  INFO(n.out);
  REQUIRE(n.exit == 0);
  auto lines = probe_lines(n.out);
  REQUIRE(lines.size() == 2);
  CHECK(env_of(lines[0], "TORCHELASTIC_ERROR_FILE").empty());
  CHECK(env_of(lines[1], "TORCHELASTIC_ERROR_FILE").empty());
  CHECK_FALSE(has_text(n.out, "log directory"));
  // torchrun fails on 0 or less (its WorkerSpec asserts it): refused, exit 2, naming the option; nothing starts.
  for (const char* bad : {"0", "-1", "-0.5"}) {
    Proc b = sh(run + "--monitor-interval " + bad + " " + kProbe);
    INFO(bad << ": " << b.out);
    CHECK(b.exit == 2);
    CHECK(has_text(b.out, "argument --monitor-interval/--monitor_interval: must be a finite number of seconds above 0"));
    CHECK(probe_lines(b.out).empty());
  }
  Proc ok = sh(run + "--monitor_interval 0.5 " + kProbe);
  INFO(ok.out);
  CHECK(ok.exit == 0);
  CHECK(has_text(ok.out, "warning: --monitor-interval 0.5: not used (megatron-run reacts to a worker's exit at once"));
}

TEST_CASE("PET_MONITOR_INTERVAL is --monitor-interval's default (checked, named as not used); PET_STANDALONE is "
          "an integer switch, as torchrun's check_env reads it", "[launch][program][process][torchrun-options]") {
  const std::string run = kPython + kBin + " --config " + kConfig + " --nproc-per-node 1 ";
  // torchrun reads PET_MONITOR_INTERVAL (float) and fails on 0 or less: refused, naming the variable.
  for (const char* bad : {"0", "-1", " -0.5 "}) {
    Proc b = sh("PET_MONITOR_INTERVAL='" + std::string(bad) + "' " + run + kProbe);
    INFO(bad << ": " << b.out);
    CHECK(b.exit == 2);
    CHECK(has_text(b.out, "argument --monitor-interval/--monitor_interval: must be a finite number of seconds above 0"));
    CHECK(has_text(b.out, "(--monitor-interval was not given: the value is PET_MONITOR_INTERVAL='" + std::string(bad) +
                              "', its default from the environment)"));
    CHECK(probe_lines(b.out).empty());
  }
  Proc word = sh("PET_MONITOR_INTERVAL=soon " + run + kProbe);
  CHECK(word.exit == 2);
  CHECK(has_text(word.out, "PET_MONITOR_INTERVAL='soon' (the default of --monitor-interval) is not a number"));
  Proc ok = sh("PET_MONITOR_INTERVAL=1_0.5 " + run + kProbe);  // Python's float() takes 1_0.5
  INFO(ok.out);
  CHECK(ok.exit == 0);
  CHECK(has_text(ok.out, "warning: PET_MONITOR_INTERVAL='1_0.5' (the default of --monitor-interval): not used"));
  // The option wins over it.
  Proc given = sh("PET_MONITOR_INTERVAL=0 " + run + "--monitor-interval 2 " + kProbe);
  CHECK(given.exit == 0);
  CHECK(has_text(given.out, "warning: --monitor-interval 2: not used"));
  // PET_STANDALONE: bool(int(value)), as torchrun's check_env: 2 is on (a fresh run id), 0 off, `true` refused.
  Proc two = sh("PET_STANDALONE=2 " + run + kProbe);
  REQUIRE(two.exit == 0);
  REQUIRE(probe_lines(two.out).size() == 1);
  CHECK(env_of(probe_lines(two.out)[0], "TORCHELASTIC_RUN_ID") != "none");
  Proc off = sh("PET_STANDALONE=' 0 ' " + run + kProbe);
  REQUIRE(off.exit == 0);
  REQUIRE(probe_lines(off.out).size() == 1);
  CHECK(env_of(probe_lines(off.out)[0], "TORCHELASTIC_RUN_ID") == "none");
  for (const char* bad : {"true", "x"}) {
    Proc b = sh("PET_STANDALONE=" + std::string(bad) + " " + run + kProbe);
    INFO(b.out);
    CHECK(b.exit == 2);
    CHECK(has_text(b.out, "PET_STANDALONE='" + std::string(bad) + "' (the default of --standalone) is not an integer"));
  }
}

namespace {

// A Megatron CI config (functional-test layout) whose ENV_VARS the ranks must get (review ops37, finding 0).
std::string env_vars_config(const std::string& name, const std::string& env_vars) {
  return mrtest::launcher::env_vars_config(name, env_vars, "launch-program");
}

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("a config's ENV_VARS reach every rank, the values validation used", "[launch][program][process][env-vars]") {
  const std::string cfg = env_vars_config("env-vars.yaml",
                                          "  CUDA_DEVICE_MAX_CONNECTIONS: 1\n  MY_OPS_VAR: hello world\n"
                                          "  MY_OPS_BOOL: true\n  MY_OPS_FLOAT: 0.00001\n  MY_OPS_COLON: :4096:8\n");
  const std::string unset = "env -u CUDA_DEVICE_MAX_CONNECTIONS -u MY_OPS_VAR -u MY_OPS_BOOL -u MY_OPS_FLOAT ";
  const std::string launch = kBin + " --target-gpu-arch sm_90 --nproc-per-node 2 --config '" + cfg +
                             "' --no-append-args --no-python /usr/bin/env";
  Proc r = sh(unset + launch);
  INFO(r.out);
  REQUIRE(r.exit == 0);
  for (const char* line : {"CUDA_DEVICE_MAX_CONNECTIONS=1\n", "MY_OPS_VAR=hello world\n", "MY_OPS_BOOL=true\n",
                                  "MY_OPS_FLOAT=0.00001\n", "MY_OPS_COLON=:4096:8\n"}) {
    INFO(line);
    CHECK(count_of(r.out, std::string("[rank 0] ") + line) == 1);
    CHECK(count_of(r.out, std::string("[rank 1] ") + line) == 1);
  }
  CHECK(count_of(r.out, "megatron-run: every rank gets the config's ENV_VARS: CUDA_DEVICE_MAX_CONNECTIONS=1 ") == 1);
  CHECK_FALSE(has_text(r.out, "launch.env-vars-override"));

  // The launcher's environment holds other values: the config's win on every rank, as Megatron's CI exports them,
  // and the conflict is named once, at the ENV_VARS line.
  Proc c = sh(unset + "CUDA_DEVICE_MAX_CONNECTIONS=8 MY_OPS_VAR=bye " + launch);
  INFO(c.out);
  REQUIRE(c.exit == 0);
  CHECK(count_of(c.out, "CUDA_DEVICE_MAX_CONNECTIONS=1\n") == 2);
  CHECK(count_of(c.out, "CUDA_DEVICE_MAX_CONNECTIONS=8\n") == 0);
  CHECK(count_of(c.out, "MY_OPS_VAR=hello world\n") == 2);
  CHECK(count_of(c.out, cfg + ":2: warning[launch.env-vars-override]: ENV_VARS sets CUDA_DEVICE_MAX_CONNECTIONS=1, "
                              "and megatron-run's environment has CUDA_DEVICE_MAX_CONNECTIONS=8") == 1);
  CHECK(count_of(c.out, "warning[launch.env-vars-override]: ENV_VARS sets MY_OPS_VAR='hello world'") == 1);

  // Validation reads what the ranks get: the config's 8, not the launcher's 1, is refused (TP 2 on sm_90).
  const std::string eight = env_vars_config("env-vars-8.yaml", "  CUDA_DEVICE_MAX_CONNECTIONS: 8\n");
  Proc v = sh("CUDA_DEVICE_MAX_CONNECTIONS=1 " + kBin + " --target-gpu-arch sm_90 --nproc-per-node 2 --config '" +
              eight + "' --no-append-args --no-python /usr/bin/env");
  INFO(v.out);
  CHECK(v.exit == 1);
  CHECK(has_text(v.out, "error[cuda-connections.max-connections-one]"));
  CHECK_FALSE(has_text(v.out, "[rank 0]"));

  // A variable the launch sets for each rank itself: the launch's value, for validation too, and said.
  const std::string ws = env_vars_config("env-vars-ws.yaml", "  CUDA_DEVICE_MAX_CONNECTIONS: 1\n  WORLD_SIZE: 8\n");
  Proc w = sh(unset + kBin + " --target-gpu-arch sm_90 --nproc-per-node 2 --config '" + ws +
              "' --no-append-args --no-python /usr/bin/env");
  INFO(w.out);
  CHECK(w.exit == 0);
  CHECK(count_of(w.out, "] WORLD_SIZE=2\n") == 2);
  CHECK(count_of(w.out, "WORLD_SIZE=8\n") == 0);
  CHECK(count_of(w.out, ws + ":3: warning[launch.env-vars-override]: ENV_VARS sets WORLD_SIZE, which the launch sets "
                             "for each rank itself") == 1);

  // A dry run says what a launch would give.
  Proc d = sh(kBin + " --dry-run --world-size 2 --config '" + cfg + "'");
  INFO(d.out);
  CHECK(d.exit == 0);
  CHECK(has_text(d.out, "megatron-run: a launch gives every rank the config's ENV_VARS: CUDA_DEVICE_MAX_CONNECTIONS=1 "
                        "MY_OPS_BOOL=true MY_OPS_COLON=:4096:8 MY_OPS_FLOAT=0.00001 MY_OPS_VAR='hello world'"));
}

// Review diff37 #2, #3, #5, #7: a key no variable can have is refused; megatron-run's own MR_* settings are not
// exported (a config cannot change how the launcher behaves); names with API are redacted as Megatron's CI does;
// the warnings come in the file's line order.
TEST_CASE("ENV_VARS: bad keys refused, MR_* not exported, API redacted, warnings by line", "[launch][program][env-vars]") {
  for (const char* bad : {"  \"\": 1\n", "  \"A=B\": 1\n", "  \"A\\0B\": 1\n"}) {
    const std::string cfg = env_vars_config("env-vars-bad.yaml", bad);
    Proc r = sh(kBin + " --dry-run --world-size 2 --config '" + cfg + "'");
    INFO(bad << r.out);
    CHECK(r.exit == 2);
    CHECK(has_text(r.out, cfg + ":2: error[input.env-var-name]: ENV_VARS key "));
    CHECK(r.out.find('\0') == std::string::npos);
  }
  const std::string cfg = env_vars_config("env-vars-order.yaml",
                                          "  CUDA_DEVICE_MAX_CONNECTIONS: 1\n  ZZ_OPS: 1\n  MR_DIST_TIMEOUT_S: 5\n"
                                          "  AA_OPS: 2\n  INTERNAL_API_URL: http://x\n");
  Proc d = sh("ZZ_OPS=9 AA_OPS=8 " + kBin + " --dry-run --world-size 2 --config '" + cfg + "'");
  INFO(d.out);
  CHECK(d.exit == 0);
  const size_t zz = d.out.find(cfg + ":3: warning[launch.env-vars-override]: ENV_VARS sets ZZ_OPS=1");
  const size_t mr = d.out.find(cfg + ":4: warning[launch.env-vars-override]: ENV_VARS sets MR_DIST_TIMEOUT_S, one of "
                                     "megatron-run's own settings");
  const size_t aa = d.out.find(cfg + ":5: warning[launch.env-vars-override]: ENV_VARS sets AA_OPS=2");
  CHECK(zz != std::string::npos);
  CHECK(mr != std::string::npos);
  CHECK(aa != std::string::npos);
  CHECK((zz < mr && mr < aa));
  CHECK(has_text(d.out, "INTERNAL_API_URL=<redacted>"));
  CHECK_FALSE(has_text(d.out, "http://x"));
  // A launch: MR_DIST_TIMEOUT_S does not reach the ranks (nor the launcher); the others do.
  Proc r = sh("env -u MR_DIST_TIMEOUT_S " + kBin + " --nproc-per-node 2 --config '" + cfg +
              "' --no-append-args --no-python /usr/bin/env");
  INFO(r.out);
  CHECK(r.exit == 0);
  CHECK(count_of(r.out, "] AA_OPS=2\n") == 2);
  CHECK(count_of(r.out, "MR_DIST_TIMEOUT_S=") == 0);
}
