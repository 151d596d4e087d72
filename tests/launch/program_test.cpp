// launch/program.h: torchrun's program forms and the program's command line.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "launch/program.h"

using mr::launch::Program;

namespace {
const std::vector<std::string> kOwn = {"--config", "--nproc-per-node", "--nnodes", "--format"};

mr::launch::ProgramSplit split(const std::vector<std::string>& w) {
  return mr::launch::split_program(w, mr::Schema::megatron(), kOwn, {"--dry-run", "--no-python"});
}
mr::launch::EnvLookup env_of(std::map<std::string, std::string> m) {
  return [m](const std::string& k) -> std::optional<std::string> {
    auto it = m.find(k);
    if (it == m.end()) return std::nullopt;
    return it->second;
  };
}
}  // namespace

TEST_CASE("split_program: the positional script, after our options and Megatron's flags", "[launch][program]") {
  auto s = split({"--nproc-per-node", "8", "--config", "job.yaml", "--num-layers", "2", "pretrain_gpt.py", "--x", "1"});
  CHECK(s.form == Program::Form::Script);
  CHECK(s.start == 6);
  CHECK(s.end_of_options == 6);
  // A switch takes no value: the next word is the script.
  auto t = split({"--mock-data", "train.py"});
  CHECK(t.form == Program::Form::Script);
  CHECK(t.start == 1);
  // --flag=value carries its value; negative numbers are values.
  auto u = split({"--seed=3", "--init-method-std", "-0.5", "train.py"});
  CHECK(u.start == 3);
}

TEST_CASE("split_program: nargs '+' flags take every following value word, as argparse does", "[launch][program]") {
  auto s = split({"--data-path", "a", "b", "train.py"});
  CHECK(s.form == Program::Form::Worker);  // train.py is the third data path
  CHECK(s.start == 4);
  auto t = split({"--data-path", "a", "b", "--", "python", "train.py"});
  CHECK(t.form == Program::Form::Command);
  CHECK(t.start == 4);
  CHECK(t.end_of_options == 3);
}

TEST_CASE("split_program: -- CMD, -m MODULE, and no program", "[launch][program]") {
  auto c = split({"--config", "x.yaml", "--", "python", "train.py"});
  CHECK(c.form == Program::Form::Command);
  CHECK(c.start == 3);
  auto m = split({"-m", "megatron.training", "--foo"});
  CHECK(m.form == Program::Form::Module);
  CHECK(m.start == 1);
  // An unknown option stops the search: the parser names it (and its value is not taken for a program).
  auto unknown = split({"--num-layer", "3"});
  CHECK(unknown.form == Program::Form::Worker);
  auto own = split({"--dry-run", "--no-python", "./run.sh"});
  CHECK(own.form == Program::Form::Script);
  CHECK(own.start == 2);
  auto n = split({"--config", "x.yaml", "--num-layers", "4"});
  CHECK(n.form == Program::Form::Worker);
  CHECK(n.start == 4);
}

TEST_CASE("split_program: -m/--module is a switch, as torchrun's store_true: options may follow, the first positional "
          "word is the module", "[launch][program]") {
  // megatron-run -m --config F json.tool: json.tool is the module, --config F megatron-run's (not the module).
  auto m = split({"-m", "--config", "x.yaml", "json.tool", "--indent", "2"});
  CHECK(m.form == Program::Form::Module);
  CHECK(m.start == 3);
  CHECK(m.end_of_options == 3);  // -m and --config x.yaml are megatron-run's words
  auto late = split({"--nproc-per-node", "2", "--module", "--num-layers", "4", "pkg.train"});
  CHECK(late.form == Program::Form::Module);
  CHECK(late.start == 5);
  // After "--" the module (argparse's "--" ends the options; -m still asks for python -m).
  auto dashes = split({"-m", "--dry-run", "--", "pkg.train", "--x"});
  CHECK(dashes.form == Program::Form::Module);
  CHECK(dashes.start == 3);
  CHECK(dashes.end_of_options == 2);
  // No module: Module with no words (the caller refuses "expected a module name"); an unknown option first: its
  // error comes first, as without -m.
  auto none = split({"--config", "x.yaml", "-m"});
  CHECK(none.form == Program::Form::Module);
  CHECK(none.start == 3);
  auto unknown = split({"-m", "--num-layer", "3", "pkg.train"});
  CHECK(unknown.form == Program::Form::Worker);
  CHECK(unknown.stopped_at_unknown);
}

TEST_CASE("program_argv: interpreter, the program's words, then the Megatron words", "[launch][program]") {
  Program script{Program::Form::Script, {"train.py", "--own"}};
  CHECK(mr::launch::program_argv(script, {"--num-layers", "2"}, env_of({})) ==
        std::vector<std::string>{"python3", "-u", "train.py", "--own", "--num-layers", "2"});
  CHECK(mr::launch::program_argv(script, {}, env_of({{"PYTHON_EXEC", "/opt/py/bin/python"}})).front() ==
        "/opt/py/bin/python");
  Program no_python = script;
  no_python.no_python = true;
  CHECK(mr::launch::program_argv(no_python, {"--a"}, env_of({})) == std::vector<std::string>{"train.py", "--own", "--a"});
  Program module{Program::Form::Module, {"pkg.train"}};
  CHECK(mr::launch::program_argv(module, {"--a"}, env_of({})) ==
        std::vector<std::string>{"python3", "-u", "-m", "pkg.train", "--a"});
  Program cmd{Program::Form::Command, {"./run.sh", "x"}};
  cmd.append_args = false;
  CHECK(mr::launch::program_argv(cmd, {"--a"}, env_of({})) == std::vector<std::string>{"./run.sh", "x"});
}

TEST_CASE("check_script: a Python script must be there before any worker starts", "[launch][program]") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("mr-check-script-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "pkgdir");
  fs::create_directories(dir / "empty");
  { std::ofstream(dir / "train.py") << "print(1)\n"; }
  { std::ofstream(dir / "pkgdir" / "__main__.py") << "print(1)\n"; }
  auto script = [&](const std::string& word) { return Program{Program::Form::Script, {word}}; };
  CHECK_NOTHROW(mr::launch::check_script(script((dir / "train.py").string())));
  CHECK_NOTHROW(mr::launch::check_script(script((dir / "pkgdir").string())));  // python runs its __main__.py
  CHECK_NOTHROW(mr::launch::check_script(script("-")));                      // standard input
  CHECK_THROWS_WITH(mr::launch::check_script(script((dir / "missing.py").string())),
                    Catch::Contains("missing.py does not exist; Python would fail on every rank"));
  CHECK_THROWS_WITH(mr::launch::check_script(script("missing.py")),
                    Catch::Contains("does not exist (relative to the working directory)"));
  CHECK_THROWS_WITH(mr::launch::check_script(script((dir / "empty").string())),
                    Catch::Contains("is a directory without a __main__.py"));
  // A typo of an existing script or program is named (util/near_path.h); nothing near, nothing named.
  CHECK_THROWS_WITH(mr::launch::check_script(script((dir / "trian.py").string())),
                    Catch::EndsWith("; Python would fail on every rank (did you mean " + (dir / "train.py").string() +
                                    "?)"));
  CHECK_THROWS_WITH(mr::launch::check_script(script((dir / "missing.py").string())),
                    Catch::EndsWith("; Python would fail on every rank"));
  { std::ofstream(dir / "run.sh") << "#!/bin/sh\n"; }
  fs::permissions(dir / "run.sh", fs::perms::owner_all);
  CHECK_THROWS_WITH(mr::launch::resolve_command((dir / "rnu.sh").string(), env_of({})),
                    Catch::EndsWith("rnu.sh is not an executable file (did you mean " + (dir / "run.sh").string() + "?)"));
  // Not a script megatron-run runs with Python: nothing to check here (resolve_command checks a command).
  Program no_python = script("missing.py");
  no_python.no_python = true;
  CHECK_NOTHROW(mr::launch::check_script(no_python));
  CHECK_NOTHROW(mr::launch::check_script(Program{Program::Form::Module, {"no.such.module"}}));
  // An empty module name (-m ''): refused before any Python starts (review hostile37 #9).
  CHECK_THROWS_WITH(mr::launch::check_program(Program{Program::Form::Module, {""}}, env_of({})),
                    "the module name (-m) is empty; Python would fail on every rank");
  fs::remove_all(dir);
}

// `--data-path data/a train.py`: argparse gives the script to the flag (nargs '+'), no program is left, and
// megatron-run would start its own worker; swallowed_program names the word when it looks like a program, and
// leaves alone the values that are data (a prefix, a directory, weights).
TEST_CASE("swallowed_program: a script taken as the last value of a flag with nargs '+'", "[launch][program]") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("mr-swallowed-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "data");
  { std::ofstream(dir / "train.py") << "print(1)\n"; }
  { std::ofstream(dir / "run.sh") << "#!/bin/sh\necho hi\n"; }
  { std::ofstream(dir / "data" / "a.bin"); }
  { std::ofstream(dir / "data" / "a.idx"); }
  { std::ofstream(dir / "plain"); }
  fs::permissions(dir / "run.sh", fs::perms::owner_all);
  fs::permissions(dir / "plain", fs::perms::owner_all);  // executable, but neither #! nor ELF: data
  const std::string d = dir.string();
  auto found = [](const mr::launch::ProgramSplit& s) -> std::string {
    auto w = mr::launch::swallowed_program(s);
    return w ? s.words[w->first] + " " + s.words[w->second] : "";
  };
  CHECK(found(split({"--nproc-per-node", "2", "--data-path", d + "/data/a", d + "/train.py"})) ==
        "--data-path " + d + "/train.py");
  CHECK(found(split({"--train-data-path", d + "/data/a", d + "/run.sh", "--num-layers", "2"})) ==
        "--train-data-path " + d + "/run.sh");
  // Data: a prefix whose .bin/.idx are the files, a directory, weights, a missing word, an executable data file.
  CHECK(found(split({"--data-path", d + "/data/a"})).empty());
  CHECK(found(split({"--data-path", "0.5", d + "/data/a", "0.5", d + "/data"})).empty());
  CHECK(found(split({"--data-path", d + "/data/a", d + "/missing.py"})).empty());
  CHECK(found(split({"--data-path", d + "/plain"})).empty());
  // A program was named (after -- or another option), or an unknown option stopped the scan: nothing to say.
  CHECK(found(split({"--data-path", d + "/data/a", "--", d + "/train.py"})).empty());
  CHECK(found(split({"--data-path", d + "/data/a", "--num-layers", "2", d + "/train.py"})).empty());
  CHECK(found(split({"--data-path", d + "/train.py", "--bogus"})).empty());
  fs::remove_all(dir);
}

// torchrun's "--" only ends the options: `torchrun -- train.py` runs python -u train.py. A .py word after "--" that
// is an existing file and no executable found as a command is a script here too; anything else stays a command.
TEST_CASE("script_after_dashes: an existing .py file after -- runs under Python, a command stays a command",
          "[launch][program]") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("mr-dashes-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "bin");
  { std::ofstream(dir / "train.py") << "print(1)\n"; }
  { std::ofstream(dir / "bin" / "tool.py") << "#!/usr/bin/env python3\nprint(1)\n"; }
  fs::permissions(dir / "bin" / "tool.py", fs::perms::owner_all);
  const auto path_env = env_of({{"PATH", (dir / "bin").string()}});
  CHECK(mr::launch::script_after_dashes((dir / "train.py").string(), path_env));
  CHECK_FALSE(mr::launch::script_after_dashes((dir / "missing.py").string(), path_env));
  CHECK_FALSE(mr::launch::script_after_dashes((dir / "bin" / "tool.py").string(), path_env));  // executable path
  CHECK_FALSE(mr::launch::script_after_dashes("python3", env_of({})));
  CHECK_FALSE(mr::launch::script_after_dashes((dir / "bin").string(), path_env));
  // A .py word that is not there, after --: the refusal says why it was looked for as a command.
  Program cmd{Program::Form::Command, {(dir / "missing.py").string()}};
  CHECK_THROWS_WITH(mr::launch::check_program(cmd, path_env),
                    Catch::Contains("after --, a .py word runs under Python, as torchrun's -- SCRIPT does, only when "
                                    "it is an existing file; this one is not, so it was looked for as a command"));
  fs::remove_all(dir);
}

// docs/robustness.md: a word a refusal echoes is escaped as one line and cut to 200 bytes.
TEST_CASE("program refusals echo the program's name escaped and cut", "[launch][program]") {
  CHECK_THROWS_WITH(mr::launch::resolve_command("a\nb", env_of({{"PATH", "/nonexistent"}})),
                    "cannot find the program 'a\\x0ab' on PATH");
  CHECK_THROWS_WITH(mr::launch::resolve_command("./a\nb", env_of({})),
                    "the program ./a\\x0ab is not an executable file");
  CHECK_THROWS_WITH(mr::launch::check_script(Program{Program::Form::Script, {"a\nb.py"}}),
                    Catch::StartsWith("the script a\\x0ab.py does not exist"));
  const std::string long_name(5000, 'x');
  try {
    mr::launch::check_script(Program{Program::Form::Script, {long_name + ".py"}});
    FAIL("no refusal");
  } catch (const mr::launch::LaunchError& e) {
    const std::string m = e.what();
    CHECK(m.size() < 400);
    CHECK(m.find("... (5003 bytes) does not exist") != std::string::npos);
  }
}
