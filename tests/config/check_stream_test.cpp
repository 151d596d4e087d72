// The megatron-run executable on bad files and very long command lines: `check` fails only the bad file and
// streams its results (text and one JSON document), 100k words are split in linear time, exit codes 0/1/2.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "binary.h"
#include "config/value.h"
#include "scratch.h"

namespace fs = std::filesystem;
extern char** environ;

namespace {
fs::path scratch() { return mrtest::scratch_dir("check-stream"); }
std::string write(const std::string& name, const std::string& text) {
  return mrtest::write_file(name, text, "check-stream");
}

struct Result {
  int exit = -1;
  std::string out, err;
};

// Runs megatron-run with `args` (no shell: argv may be long), stdin from /dev/null, capturing stdout and stderr.
Result run(const std::vector<std::string>& args) {
  std::string o = (scratch() / "stdout").string(), e = (scratch() / "stderr").string();
  std::vector<std::string> argv = {MR_BINARY};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> a;
  for (auto& s : argv) a.push_back(s.data());
  a.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, o.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 2, e.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid;
  REQUIRE(posix_spawn(&pid, a[0], &fa, nullptr, a.data(), environ) == 0);
  posix_spawn_file_actions_destroy(&fa);
  int status = 0;
  waitpid(pid, &status, 0);
  Result r;
  r.exit = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  auto slurp = [](const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  r.out = slurp(o);
  r.err = slurp(e);
  return r;
}
bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }
const std::string kDefault = std::string(MR_SOURCE_DIR) + "/configs/default.yaml";
// A folder with no YAML file in it (`check` refuses it: input.no-config-files).
std::string no_yaml_dir() {
  const fs::path d = scratch() / "no-yaml";
  fs::create_directories(d);
  std::ofstream(d / "notes.txt") << "--num-layers: [\n";
  return d.string();
}
}  // namespace

TEST_CASE("check: a directory without YAML files, FIFO, device or malformed file fails only that file", "[check-stream]") {
  fs::path fifo = scratch() / "pipe.yaml";
  fs::remove(fifo);
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  std::string rec = write("rec.yaml", "--data-path: &a [*a]\n");
  std::string dup = write("dup.yaml", "--num-layers: 2\n--num-layers: 3\n");
  const std::string dir = no_yaml_dir();
  auto r = run({"check", dir, fifo.string(), "/dev/zero", "/proc/self/mem", rec, dup, kDefault});
  CHECK(r.exit == 2);  // the worst file's: unreadable or malformed
  CHECK(has(r.out, dir + ": error[input.no-config-files]: no *.yaml or *.yml file in this directory or below it"));
  CHECK(has(r.out, fifo.string() + ": error[input.not-regular-file]"));
  CHECK(has(r.out, "/dev/zero: error[input.not-regular-file]"));
  CHECK(has(r.out, "/proc/self/mem: error[input.unreadable]"));
  CHECK(has(r.out, rec + ":1: error[input.yaml-recursive-alias]"));
  CHECK(has(r.out, dup + ":2: error[input.yaml-duplicate-key]"));
  CHECK(has(r.err, "6 file(s) checked, 5 invalid, 1 folder(s) with no *.yaml or *.yml file\n"));
  CHECK(!has(r.out + r.err, "internal error"));
}

TEST_CASE("check --format json streams one valid JSON document with the refusals' ids", "[check-stream]") {
  std::string rec = write("rec2.yaml", "a: &a {b: *a}\n");
  std::string warn = write("warn.yaml", "MODEL_ARGS:\n  --num-layers: 2\n  --num-layers: 2\n");
  auto r = run({"check", "--format", "json", no_yaml_dir(), rec, kDefault, warn});
  CHECK(r.exit == 2);
  mr::Value v = mr::Value::parse_json(r.out);
  REQUIRE(v.as_list().size() == 4);
  auto field = [](const mr::Value& o, const std::string& k) -> const mr::Value& {
    for (const auto& [key, x] : o.as_object())
      if (key == k) return x;
    throw std::runtime_error("no field " + k);
  };
  const auto& first = v.as_list()[0];
  CHECK(field(first, "exit").as_int() == 2);
  CHECK(field(field(first, "errors").as_list()[0], "rule").as_str() == "input.no-config-files");
  CHECK(field(field(v.as_list()[1], "errors").as_list()[0], "rule").as_str() == "input.yaml-recursive-alias");
  CHECK(field(field(v.as_list()[1], "errors").as_list()[0], "where").as_str() == rec + ":1");
  CHECK(field(v.as_list()[2], "ok").as_bool());
  // A warning of the CI layout keeps its id and place.
  bool dup_warning = false;
  for (const auto& d : field(v.as_list()[3], "errors").as_list())
    dup_warning = dup_warning || (field(d, "rule").as_str() == "input.yaml-duplicate-key" &&
                                  field(d, "where").as_str() == warn + ":3" && field(d, "level").as_str() == "warning");
  CHECK(dup_warning);
}

TEST_CASE("check over many files: results stream in order, one line per file", "[check-stream]") {
  // 1000 bad files and 1000 folders without YAML files, each its own (check reports a file met again once).
  std::vector<std::string> args = {"check", "--quiet"};
  const fs::path many = scratch() / "many";
  fs::remove_all(many);
  for (int i = 0; i < 2000; ++i) {
    const fs::path p = many / ((i % 2 ? "bad" : "dir") + std::to_string(i) + (i % 2 ? ".yaml" : ""));
    if (i % 2) {
      fs::create_directories(many);
      std::ofstream(p) << "--num-layers: [\n";
    } else {
      fs::create_directories(p);
    }
    args.push_back(p.string());
  }
  auto r = run(args);
  CHECK(r.exit == 2);
  CHECK(has(r.err, "1000 file(s) checked, 1000 invalid, 1000 folder(s) with no *.yaml or *.yml file\n"));
  size_t lines = 0;
  for (char c : r.out) lines += c == '\n';
  CHECK(lines == 2000);
}

TEST_CASE("100k command-line words: split in linear time, positions kept, our options found", "[check-stream]") {
  std::vector<std::string> args = {"--dry-run", "--parse-only", "--format", "json", "--data-path"};
  for (int i = 0; i < 100000; ++i) args.push_back("w" + std::to_string(i));
  args.push_back("--config");
  args.push_back(kDefault);
  args.push_back("--explain");
  args.push_back("--data-path");
  auto r = run(args);
  REQUIRE(r.exit == 0);
  CHECK(has(r.out, "{\"data_path\": {\"value\": [\"w0\", \"w1\", "));  // --explain with --format json
  CHECK(has(r.out, "\"source\": \"command line argv[5]\"}"));
  // 100k unknown flags: a bounded message, in linear time.
  std::vector<std::string> unknown = {"--dry-run"};
  for (int i = 0; i < 100000; ++i) unknown.push_back("--q" + std::to_string(i));  // short: argv has a 2 MiB limit
  auto u = run(unknown);
  CHECK(u.exit == 2);
  CHECK(has(u.err, "unrecognized arguments: --q0 --q1 --q2"));
  CHECK(has(u.err, "(99900 more)"));
  CHECK(u.err.size() < 20000);
  // Boost still sees our options in any position, and refuses a missing value.
  auto m = run({"--dry-run", "--num-layers", "2", "--config"});
  CHECK(m.exit == 2);
  auto s = run({"schema", "--format", "json", "--bogus"});
  CHECK(s.exit == 2);
  CHECK(has(s.err, "--bogus"));
}

TEST_CASE("the executable on bad inputs: exit 2 naming file:line, never 3", "[check-stream]") {
  auto a = run({"--dry-run", "--config", write("l.yaml", "a: &a [1,1,1,1,1,1,1,1,1,1]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
                                                         "c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]\n"
                                                         "e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d]\n"
                                                         "--data-path: [*e,*e,*e,*e,*e,*e,*e,*e,*e,*e,*e]\n")});
  CHECK(a.exit == 2);
  CHECK(has(a.err, "l.yaml:6: error[input.yaml-expansion-limit]: the YAML document grows to more than 1000000 nodes"));
  auto t = run({"--dry-run", "--config", kDefault, "--target-env", scratch().string()});
  CHECK(t.exit == 2);
  CHECK(has(t.err, "the target environment file is not a regular file (it is a directory)"));
  auto y = run({"--dry-run", "--yaml-cfg", "/dev/zero"});
  CHECK(y.exit == 2);
  CHECK(has(y.err, "/dev/zero: error[input.not-regular-file]: the --yaml-cfg file is not a regular file"));
  auto p = run({"--dry-run", "--config", "/proc/self/mem"});
  CHECK(p.exit == 2);
}

TEST_CASE("check flushes each file's result: a reader of the pipe sees the first file's before the run ends",
          "[check-stream]") {
  // Review ci33: under a pipe (a CI runner's log) stdout was fully buffered, so nothing showed until exit, and a
  // job killed at its timeout lost every result. Here the first file's result is read from the pipe, then the
  // run is killed: without a flush per file the read only returns once the whole run has written (at exit), and
  // then the last file's result is in the pipe too.
  write("bad.yaml", "--num-layers: [\n");
  write("last-bad.yaml", "--hidden-size: [\n");
  std::ifstream in(kDefault);
  write("g", std::string(std::istreambuf_iterator<char>(in), {}));
  const std::vector<std::pair<std::string, std::string>> formats = {
      {"text", "\n"}, {"github", "\n"}, {"json", "\"resolved\": null}"}};
  for (const auto& [format, end_of_first] : formats) {
    INFO("--format " << format);
    std::vector<std::string> argv = {MR_BINARY, "check", "--format", format, "bad.yaml"};
    for (int i = 0; i < 40000; ++i) argv.push_back("g");  // several seconds of checks
    argv.push_back("last-bad.yaml");
    std::vector<char*> a;
    for (auto& s : argv) a.push_back(s.data());
    a.push_back(nullptr);
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addchdir_np(&fa, scratch().c_str());
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addclose(&fa, fds[0]);
    pid_t pid;
    REQUIRE(posix_spawn(&pid, a[0], &fa, nullptr, a.data(), environ) == 0);
    posix_spawn_file_actions_destroy(&fa);
    ::close(fds[1]);
    std::string got;
    char buf[4096];
    while (got.find(end_of_first) == std::string::npos) {
      const ssize_t n = ::read(fds[0], buf, sizeof buf);
      if (n <= 0) break;
      got.append(buf, static_cast<size_t>(n));
    }
    ::kill(pid, SIGKILL);
    for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) got.append(buf, static_cast<size_t>(n));
    ::close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    INFO(got.substr(0, 2000));
    CHECK(has(got, "bad.yaml"));
    CHECK(has(got, "input.yaml-syntax"));
    CHECK_FALSE(has(got, "last-bad.yaml"));  // killed long before the last file
    CHECK((WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL));
  }
}

TEST_CASE("check -- FILE...: \"--\" ends the options, so a FILE may start with '-'", "[check-stream]") {
  write("-x.yaml", "--num-layers: [\n");
  std::ifstream in(kDefault);
  write("--quiet", std::string(std::istreambuf_iterator<char>(in), {}));
  fs::remove(scratch() / "--");
  const std::string dir = scratch().string();
  auto r = run({"check", "--", kDefault});
  CHECK(r.exit == 0);
  CHECK(r.err == "1 file(s) checked, 0 invalid\n");
  // Relative names, as find -exec ... {} + gives them: after "--" a word that looks like an option is a file
  // ("--quiet" too, and a second "--": a file named "--", missing here); before it, an unknown option.
  mrtest::Proc p = mrtest::run_shell("cd '" + dir + "' && '" + MR_BINARY + "' check --format github -- -x.yaml --quiet -- 2>&1");
  CHECK(p.exit == 2);
  CHECK(has(p.out, "::error file=-x.yaml,line=1,title=input.yaml-syntax"));
  CHECK(has(p.out, "::error file=--,title=input.unreadable"));
  CHECK(has(p.out, "3 file(s) checked, 2 invalid\n"));
  p = mrtest::run_shell("cd '" + dir + "' && '" + MR_BINARY + "' check -x.yaml 2>&1");
  CHECK(p.exit == 2);
  CHECK(has(p.out, "unrecognized arguments: -x.yaml"));
  // The options before "--" still apply; "--" with no FILE after it is no FILE.
  r = run({"check", "--quiet", "--", kDefault});
  CHECK(r.exit == 0);
  CHECK(r.err.empty());
  r = run({"check", "--"});
  CHECK(r.exit == 2);
  CHECK(has(r.err, "the following arguments are required: FILE"));
}

namespace {
// A fresh folder `name` in the scratch folder holding `files` (path below it, content; a path's folders made).
std::string tree(const std::string& name, const std::vector<std::pair<std::string, std::string>>& files) {
  const fs::path root = scratch() / name;
  fs::remove_all(root);
  fs::create_directories(root);
  for (const auto& [path, text] : files) {
    fs::create_directories((root / path).parent_path());
    std::ofstream(root / path, std::ios::binary) << text;
  }
  return root.string();
}
std::string slurp_file(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}
}  // namespace

TEST_CASE("check DIR: the YAML files below it, in path order, each reported as if named", "[check-stream]") {
  const std::string valid = slurp_file(kDefault);
  const std::string root = tree("tree", {{"b.yaml", valid},
                                         {"a.yml", "--num-layers: [\n"},
                                         {"sub/c.yaml", "--num-layers: 2\n--num-layers: 3\n"},
                                         {"sub/notes.txt", "--num-layers: [\n"},     // not a YAML name
                                         {"sub/deeper/d.yaml", valid},
                                         {".hidden/h.yaml", "--num-layers: [\n"},  // a hidden folder: left out
                                         {".h.yaml", "--num-layers: [\n"},         // a hidden file: left out
                                         {"x.yaml.bak", "--num-layers: [\n"}});
  // A link to a folder is never walked into (this one loops back to the root, and its target has YAML files); a
  // link with a YAML name is checked as the file it names.
  fs::create_directory_symlink("..", root + "/sub/loop");
  fs::create_directory_symlink(root + "/sub", root + "/sub-link");
  fs::create_symlink("sub/c.yaml", root + "/link.yaml");

  // json: one entry per file, its path DIR/..., sorted by path (a trailing '/' on DIR is not doubled).
  auto j = run({"check", "--format", "json", root + "/"});
  CHECK(j.exit == 2);  // the worst file's
  mr::Value v = mr::Value::parse_json(j.out);
  std::vector<std::string> files;
  for (const auto& entry : v.as_list())
    for (const auto& [key, x] : entry.as_object())
      if (key == "file") files.push_back(x.as_str());
  CHECK(files == std::vector<std::string>{root + "/a.yml", root + "/b.yaml", root + "/link.yaml", root + "/sub/c.yaml",
                                          root + "/sub/deeper/d.yaml"});

  // text: the same files, the same lines as when named one by one; the summary counts the files.
  auto t = run({"check", root});
  auto named = run({"check", root + "/a.yml", root + "/b.yaml", root + "/link.yaml", root + "/sub/c.yaml",
                    root + "/sub/deeper/d.yaml"});
  CHECK(t.exit == 2);
  CHECK(t.out == named.out);
  CHECK(t.err == named.err);
  CHECK(has(t.out, root + "/a.yml:1: error[input.yaml-syntax]"));
  CHECK(has(t.out, root + "/sub/c.yaml:2: error[input.yaml-duplicate-key]"));
  CHECK(has(t.err, "5 file(s) checked, 3 invalid"));
  CHECK_FALSE(has(t.out, "hidden"));
  CHECK_FALSE(has(t.out, ".h.yaml"));
  CHECK_FALSE(has(t.out, "loop"));
  CHECK_FALSE(has(t.out, "sub-link"));
  CHECK_FALSE(has(t.out, "notes.txt"));

  // A relative DIR keeps its spelling; files and directories mix on one command line, in their order; a link
  // named on the command line is followed; junit names each file by its path.
  mrtest::Proc p = mrtest::run_shell("cd '" + scratch().string() + "' && '" + MR_BINARY +
                                     "' check --format junit tree/sub '" + kDefault + "' tree/sub-link 2>&1");
  CHECK(p.exit == 2);
  const size_t c = p.out.find("name=\"tree/sub/c.yaml\""), d = p.out.find("name=\"tree/sub/deeper/d.yaml\""),
               def = p.out.find("name=\"" + kDefault + "\""), l = p.out.find("name=\"tree/sub-link/c.yaml\"");
  CHECK(c != std::string::npos);
  CHECK(c < d);
  CHECK(d < def);
  CHECK(def < l);
  CHECK(l != std::string::npos);
  CHECK(has(p.out, "5 file(s) checked, 2 invalid"));
}

TEST_CASE("check DIR: a link with a YAML name to a folder is left out; a dangling one fails", "[check-stream]") {
  // Links to folders are left out whatever their name (docs/config-files.md); one named d.yaml was checked and
  // failed as input.not-regular-file (review diff39 #6). A dangling link is still a file that cannot be read.
  const std::string root = tree("yaml-links", {{"ok.yaml", slurp_file(kDefault)}, {"t/a/x.yaml", "--num-layers: [\n"}});
  fs::create_directory_symlink(root + "/t/a", root + "/d.yaml");
  fs::create_directory_symlink("t", root + "/e.yml");
  auto r = run({"check", root});
  INFO(r.out << r.err);
  CHECK_FALSE(has(r.out, "d.yaml"));
  CHECK_FALSE(has(r.out, "e.yml"));
  CHECK_FALSE(has(r.out, "not-regular-file"));
  CHECK(has(r.out, root + "/t/a/x.yaml:1: error[input.yaml-syntax]"));  // the folder itself is walked into
  CHECK(has(r.err, "2 file(s) checked, 1 invalid"));
  fs::create_symlink("missing.yaml", root + "/dangling.yaml");
  auto dangling = run({"check", root});
  INFO(dangling.out << dangling.err);
  CHECK(has(dangling.out, root + "/dangling.yaml"));
  CHECK(has(dangling.out, "input.unreadable"));
  CHECK(has(dangling.err, "3 file(s) checked, 2 invalid"));
  // The walk listed it, so it is not just "missing": the link and its target are named (review user40 #6).
  CHECK(has(dangling.out, root + "/dangling.yaml: error[input.unreadable]: cannot read config file: No such file or "
                          "directory (a symbolic link to missing.yaml, which does not exist)\n"));
  // A chain of links is followed to the missing target, and a target's odd characters are escaped as a path's are:
  // the message stays one line (review diff40 #5, #6).
  fs::remove(root + "/dangling.yaml");
  fs::create_symlink("missing.yaml", root + "/t/bad.yaml");
  fs::create_symlink("t/bad.yaml", root + "/chain.yaml");
  fs::create_symlink("no\nwhere", root + "/nl.yaml");
  auto chain = run({"check", root});
  INFO(chain.out << chain.err);
  CHECK(has(chain.out, root + "/chain.yaml: error[input.unreadable]: cannot read config file: No such file or "
                       "directory (a symbolic link to t/bad.yaml, which leads to missing.yaml, which does not exist)\n"));
  CHECK(has(chain.out, "(a symbolic link to no\\x0awhere, which does not exist)\n"));
  CHECK_FALSE(has(chain.out, "no\nwhere"));
  // A file that is missing (no link) says no such thing.
  auto missing = run({"check", root + "/none.yaml"});
  CHECK(missing.exit == 2);
  CHECK(has(missing.out, "No such file or directory"));
  CHECK_FALSE(has(missing.out, "symbolic link"));
}

TEST_CASE("check's own options take unambiguous prefixes as the run command's do; a word naming a file that starts "
          "with '-' is pointed to --",
          "[check-stream]") {
  // Before, `check --world 4 FILE` was "unrecognized arguments: --world" (review user40 #5).
  auto world = run({"check", "--world", "3", kDefault});
  INFO(world.out << world.err);
  CHECK(world.exit == 1);  // default.yaml is not valid for 3 ranks: the size was read
  CHECK(has(world.out, "batch-parallel size (3)"));
  auto eq = run({"check", "--world=1", "--form=github", "--qu", kDefault});
  INFO(eq.out << eq.err);
  CHECK(eq.exit == 0);
  CHECK(eq.err.empty());  // --quiet: no summary when every file is valid
  auto json = run({"check", "--form", "json", kDefault});
  CHECK(json.exit == 0);
  CHECK(has(json.out, "\"ok\": true"));
  // A word after an option that takes a value is that value, not spelled as an option (argparse, and Boost here,
  // refuse one that starts with '-' as the option's missing value).
  auto value = run({"check", "--config", "--tar", kDefault});
  CHECK(value.exit == 2);
  CHECK(has(value.err, "argument --config: expected one argument"));
  CHECK_FALSE(has(value.err, "ambiguous"));
  // Ambiguous among check's options (--target-gpu-arch, --target-te-version, ...): refused naming them; no Megatron
  // flag counts here (`check` takes none).
  auto ambiguous = run({"check", "--target", "x", kDefault});
  CHECK(ambiguous.exit == 2);
  CHECK(has(ambiguous.err, "ambiguous option: --target could match --target-"));
  // A file named -dash.yaml: refused as an unknown word, with the way to check it; `--` checks it.
  const fs::path dir = scratch() / "dash";
  fs::create_directories(dir);
  fs::copy_file(kDefault, dir / "-dash.yaml", fs::copy_options::overwrite_existing);
  const fs::path was = fs::current_path();
  fs::current_path(dir);
  auto dash = run({"check", "-dash.yaml"});
  auto unknown = run({"check", "-nofile.yaml"});
  auto after = run({"check", "--", "-dash.yaml"});
  fs::current_path(was);
  INFO(dash.err);
  CHECK(dash.exit == 2);
  CHECK(has(dash.err, "unrecognized arguments: -dash.yaml (to check a file whose name starts with '-', put it after "
                      "--: `megatron-run check -- FILE`"));
  CHECK(unknown.exit == 2);
  CHECK_FALSE(has(unknown.err, "put it after --"));
  CHECK(after.exit == 0);
}

TEST_CASE("check DIR with no YAML file is an error naming it, never a silent pass", "[check-stream]") {
  // Only a hidden YAML file, and a link to a folder of YAML files (not followed): nothing to check.
  const std::string root = tree("empty-tree", {{".ci.yaml", "a: 1\n"}, {"README", "x\n"}, {"deep/er/x.txt", ""}});
  fs::create_directory_symlink(scratch() / "tree", root + "/link");
  for (const std::string format : {"text", "json", "github", "junit"}) {
    auto r = run({"check", "--format", format, root});
    CHECK(r.exit == 2);
    CHECK(has(r.out, "input.no-config-files"));
    CHECK(has(r.out, root));
  }
  auto r = run({"check", root, kDefault});
  CHECK(r.exit == 2);
  CHECK_FALSE(has(r.out, "]: " + root + ": no *.yaml"));  // the place once, not again in the message
  CHECK(has(r.out, root + ": error[input.no-config-files]: no *.yaml or *.yml file in this directory or below it"));
  CHECK(r.err == "1 file(s) checked, 0 invalid, 1 folder(s) with no *.yaml or *.yml file\n");  // a folder, no file
  // --yaml-cfg takes a directory the same way.
  auto y = run({"check", "--yaml-cfg", root});
  CHECK(y.exit == 2);
  CHECK(has(y.out, "input.no-config-files"));
}

TEST_CASE("check DIR: a folder that cannot be listed is an error naming it; the other files are checked",
          "[check-stream]") {
  // The tree where the unprivileged user can reach it: under /tmp (sticky, open to all), in a folder of its own
  // with mode 0755 (the scratch folder's ancestors may be closed to other users, e.g. a mkdtemp's 0700).
  const fs::path base = fs::path("/tmp") / ("mr-check-locked-" + std::to_string(::getpid()));
  fs::remove_all(base);
  fs::create_directories(base);
  fs::permissions(base, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                            fs::perms::others_read | fs::perms::others_exec);
  const std::string root = (base / "locked-tree").string();
  for (const auto& [path, text] : std::vector<std::pair<std::string, std::string>>{
           {"a.yaml", slurp_file(kDefault)}, {"locked/x.yaml", "a: 1\n"}, {"z.yaml", slurp_file(kDefault)}}) {
    fs::create_directories((fs::path(root) / path).parent_path());
    std::ofstream(fs::path(root) / path, std::ios::binary) << text;
  }
  fs::permissions(root + "/locked", fs::perms::none);
  // The binary too, copied there: the build folder may be closed to other users as well (CI's fresh clone lives
  // in a mkdtemp folder: exec failed with EACCES).
  const std::string binary = (base / "megatron-run").string();
  fs::copy_file(MR_BINARY, binary, fs::copy_options::overwrite_existing);
  fs::permissions(binary, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                              fs::perms::others_read | fs::perms::others_exec);
  // Root reads any folder: the check runs as nobody then (fork, setuid, exec), where it can.
  const std::string o = (scratch() / "locked.out").string();
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    int fd = ::open(o.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || ::dup2(fd, 1) < 0 || ::dup2(fd, 2) < 0) ::_exit(120);
    if (::geteuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0)) ::_exit(121);
    ::execl(binary.c_str(), binary.c_str(), "check", root.c_str(), static_cast<char*>(nullptr));
    ::_exit(122);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  fs::permissions(root + "/locked", fs::perms::owner_all);
  const std::string out = slurp_file(o);
  fs::remove_all(base);
  INFO(out);
  REQUIRE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 121) {
    WARN("cannot drop root's privileges here: the unlistable folder is not tested");
    return;
  }
  CHECK(WEXITSTATUS(status) == 2);
  CHECK(has(out, root + "/locked: error[input.unreadable]: cannot list the directory: Permission denied"));
  // a.yaml and z.yaml valid, in their place around it; the folder is not counted as a file
  CHECK(has(out, "2 file(s) checked, 0 invalid, 1 folder(s) that cannot be listed\n"));
  CHECK(out.find(root + "/locked:") < out.find("2 file(s)"));
}

// Review of diff39's fixes: a file named and also found through its folder was checked and counted twice; an empty
// folder was counted as a file in the summary; `check a//` printed a//ok.yaml.
TEST_CASE("check: a file met again is checked once, where first met; a folder is not counted as a file; a DIR's "
          "trailing slashes are not doubled", "[check-stream]") {
  const std::string valid = slurp_file(kDefault);
  const std::string root = tree("once", {{"t/a/ok.yaml", valid}, {"t/a/bad.yaml", "--num-layers: [\n"}});
  auto t = run({"check", root + "/t/a", root + "/t/a/ok.yaml"});
  INFO(t.out << t.err);
  CHECK(t.exit == 2);
  CHECK(t.err == "2 file(s) checked, 1 invalid\n");
  // Named first, then found below two spellings of its folder and named again: once, by its first spelling; the
  // folder's other file by the folder as written, without the slashes it ends with.
  auto j = run({"check", "--format", "json", root + "/t/./a/ok.yaml", root + "/t/a//", root + "/t/a/ok.yaml",
                root + "/t/a"});
  CHECK(j.exit == 2);
  std::vector<std::string> files;
  const mr::Value listed = mr::Value::parse_json(j.out);
  for (const auto& entry : listed.as_list())
    for (const auto& [key, x] : entry.as_object())
      if (key == "file") files.push_back(x.as_str());
  CHECK(files == std::vector<std::string>{root + "/t/./a/ok.yaml", root + "/t/a/bad.yaml"});
  auto slashes = run({"check", root + "/t/a///"});
  CHECK(has(slashes.out, root + "/t/a/bad.yaml:1: error[input.yaml-syntax]"));
  CHECK_FALSE(has(slashes.out, "//"));
  // An empty folder is input.no-config-files, counted as a folder; --quiet keeps the summary then.
  const std::string empty = tree("once-empty", {});
  auto e = run({"check", "--quiet", empty, empty + "/"});
  CHECK(e.exit == 2);
  CHECK(e.err == "0 file(s) checked, 0 invalid, 1 folder(s) with no *.yaml or *.yml file\n");
  size_t lines = 0;
  for (char c : e.out) lines += c == '\n';
  CHECK(lines == 1);
}

TEST_CASE("check DIR: *.YAML and *.YML in any case are YAML files; help check says FILE|DIR", "[check-stream]") {
  const std::string valid = slurp_file(kDefault);
  const std::string root = tree("upper", {{"A.YAML", valid}, {"b.Yml", "--num-layers: [\n"}, {"c.YAML.txt", "x\n"},
                                          {"d.yaml", valid}});
  auto j = run({"check", "--format", "json", root});
  CHECK(j.exit == 2);
  std::vector<std::string> files;
  const mr::Value listed = mr::Value::parse_json(j.out);
  for (const auto& entry : listed.as_list())
    for (const auto& [key, x] : entry.as_object())
      if (key == "file") files.push_back(x.as_str());
  CHECK(files == std::vector<std::string>{root + "/A.YAML", root + "/b.Yml", root + "/d.yaml"});
  auto help = run({"help", "check"});
  CHECK(help.exit == 0);
  CHECK(has(help.out, "[--] FILE|DIR...\n"));
  CHECK_FALSE(has(help.out, "FILE...\n"));
}
