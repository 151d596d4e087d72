// check's CI layouts (config/check_report.h): GitHub Actions workflow commands and the JUnit XML report, their
// escapes, and `megatron-run check --format github|junit` over the corpus (the XML read back by python3's parser).
#include <catch2/catch.hpp>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "binary.h"
#include "config/check_report.h"
#include "config/value.h"
#include "corpus.h"
#include "scratch.h"

namespace {

mr::Diagnostic diag(mr::Diagnostic::Level level, std::string rule, std::string message, std::string where = {}) {
  return mr::Diagnostic{level, std::move(rule), std::move(message), {}, std::move(where), "validate_args"};
}
const auto kError = mr::Diagnostic::Level::Error;
const auto kWarning = mr::Diagnostic::Level::Warning;

// A python3 program that parses the XML file argv[1] (xml.etree: a document that is not well-formed XML fails),
// checks the JUnit shape and that the counts are those of the testcases, and prints
// "tests=N failures=F errors=E" and one "NAME EXIT-KIND" line per testcase (pass|failure|error).
const char* kReadJunit = R"PY(
import sys
import xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
assert root.tag == "testsuites", root.tag
suites = root.findall("testsuite")
assert len(suites) == 1 and suites[0].get("name") == "megatron-run check", suites
suite = suites[0]
cases = suite.findall("testcase")
failures = sum(1 for c in cases if c.find("failure") is not None)
errors = sum(1 for c in cases if c.find("error") is not None)
for node in (root, suite):
    assert int(node.get("tests")) == len(cases), (node.get("tests"), len(cases))
    assert int(node.get("failures")) == failures, (node.get("failures"), failures)
    assert int(node.get("errors")) == errors, (node.get("errors"), errors)
for c in cases:
    assert c.get("classname") and c.get("name"), c.attrib
    for f in c.findall("failure") + c.findall("error"):
        assert f.get("type") and f.get("message") is not None and f.text, f.attrib
print("tests=%d failures=%d errors=%d" % (len(cases), failures, errors))
for c in cases:
    kind = "failure" if c.find("failure") is not None else "error" if c.find("error") is not None else "pass"
    print(c.get("name") + "\t" + kind)
    for f in c.findall("failure") + c.findall("error"):
        print("  message\t" + f.get("message").replace("\n", "\\n"))
        print("  type\t" + f.get("type"))
    out = c.find("system-out")
    if out is not None:
        print("  out\t" + out.text.replace("\n", "\\n"))
)PY";

// Runs kReadJunit on `xml` (the document's text); its output, with the exit status.
mrtest::Proc read_junit(const std::string& xml, const std::string& name) {
  const std::string script = mrtest::write_file("read_junit.py", kReadJunit, "check-report");
  const std::string doc = mrtest::write_file(name, xml, "check-report");
  return mrtest::run_shell("python3 '" + script + "' '" + doc + "' 2>&1");
}

std::string junit_of(const std::vector<std::tuple<std::string, int, std::vector<mr::Diagnostic>>>& files,
                     bool with_warnings = true) {
  mr::JunitReport report;
  for (const auto& [file, exit, diags] : files) report.add(file, exit, diags, with_warnings);
  std::ostringstream os;
  report.finish(os);
  return os.str();
}

}  // namespace

TEST_CASE("GitHub's escapes: % CR LF in the message; also : and , in a property", "[check-report]") {
  CHECK(mr::github_escape_data("100% done\r\nnext: a,b") == "100%25 done%0D%0Anext: a,b");
  CHECK(mr::github_escape_property("100% done\r\nnext: a,b") == "100%25 done%0D%0Anext%3A a%2Cb");
  // % first: an escape already in the text is not taken for one.
  CHECK(mr::github_escape_data("%0A") == "%250A");
  CHECK(mr::github_escape_property("%2C,") == "%252C%2C");
  CHECK(mr::github_escape_data("") == "");
}

TEST_CASE("a diagnostic's place: path:line and path:line:col, else none", "[check-report]") {
  auto p = mr::parse_place("dir/a.yaml:12");
  CHECK(p.file == "dir/a.yaml");
  CHECK(p.line == 12);
  CHECK_FALSE(p.col);
  p = mr::parse_place("a,b:c.yaml:3:7");
  CHECK(p.file == "a,b:c.yaml");
  CHECK(p.line == 3);
  CHECK(p.col == 7);
  CHECK(mr::parse_place("").file.empty());
  CHECK(mr::parse_place("a.yaml").file.empty());
  CHECK(mr::parse_place(":12").file.empty());
  CHECK(mr::parse_place("a.yaml:x1").file.empty());
  // The checked file's own name is taken whole, though it ends in ":N" itself.
  p = mr::parse_place("run:3:7", "run:3");
  CHECK(p.file == "run:3");
  CHECK(p.line == 7);
  CHECK_FALSE(p.col);
  p = mr::parse_place("run:3:7:2", "run:3");
  CHECK(p.file == "run:3");
  CHECK(p.line == 7);
  CHECK(p.col == 2);
  p = mr::parse_place("other.yaml:4", "run:3");  // another file's place: as without a known name
  CHECK(p.file == "other.yaml");
  CHECK(p.line == 4);
  p = mr::parse_place("run:3:x", "run:3");  // the known name then no number: the generic reading
  CHECK(p.file.empty());
  // The place is the known file itself (a refusal of the whole file, "not a regular file"): no line in it.
  p = mr::parse_place("run:3", "run:3");
  CHECK(p.file.empty());
  CHECK_FALSE(p.line);
  const mr::Diagnostic whole = diag(kError, "input.not-regular-file", "the config file is not a regular file", "run:3");
  CHECK(mr::github_command("run:3", whole) ==
        "::error file=run%3A3,title=input.not-regular-file::the config file is not a regular file\n");
}

TEST_CASE("github: one workflow command per diagnostic, place and rule id as properties", "[check-report]") {
  // No place: the file alone, no line or col.
  CHECK(mr::github_command("a.yaml", diag(kError, "input.unreadable", "cannot read config file")) ==
        "::error file=a.yaml,title=input.unreadable::cannot read config file\n");
  // A warning; the place's line.
  CHECK(mr::github_command("a.yaml", diag(kWarning, "parse.deprecated-flag", "old flag", "a.yaml:4")) ==
        "::warning file=a.yaml,line=4,title=parse.deprecated-flag::old flag\n");
  // A column when the place has one; the place names another file (a --config file given to every FILE): the
  // message names the checked file.
  CHECK(mr::github_command("a.yaml", diag(kError, "usage", "bad", "base.yaml:2:5")) ==
        "::error file=base.yaml,line=2,col=5,title=usage::bad (checking a.yaml)\n");
  // A message with %, :, ',' and a newline; a path with a comma and a colon; a rule id with a colon. The message
  // keeps : and , (data), the properties do not; the place is not repeated in the message.
  CHECK(mr::github_command("x,y:z.yaml", diag(kError, "r:1,2", "x,y:z.yaml:3: 50% of a, b: c\nnext line",
                                             "x,y:z.yaml:3")) ==
        "::error file=x%2Cy%3Az.yaml,line=3,title=r%3A1%2C2::50%25 of a, b: c%0Anext line\n");
  // No control character reaches a workflow command raw: a carriage return or line feed is GitHub's %0D or %0A,
  // in the message and in a property alike (it wrote a newline in a file's name as \x0a); another one goes
  // through printable() (\x1b); a tab stays in the message, \x09 in a property.
  CHECK(mr::github_command("a\rb.yaml", diag(kError, "usage", "a\rb\x1b[31m\tc")) ==
        "::error file=a%0Db.yaml,title=usage::a%0Db\\x1b[31m\tc\n");
  CHECK(mr::github_command("a\nb\t.yaml", diag(kError, "usage", "bad")) ==
        "::error file=a%0Ab\\x09.yaml,title=usage::bad\n");
  CHECK(mr::github_command("a\nb%,:.yaml", diag(kError, "usage", "bad\nnext", "base.yaml:2")) ==
        "::error file=base.yaml,line=2,title=usage::bad (checking a%0Ab%25,:.yaml)%0Anext\n");
  // A place that is not path:line stays in the message.
  CHECK(mr::github_command("a.yaml", diag(kError, "usage", "bad", "argv[3]")) ==
        "::error file=a.yaml,title=usage::argv[3]: bad\n");
}

TEST_CASE("xml_escape: markup characters, and no character XML 1.0 forbids", "[check-report]") {
  CHECK(mr::xml_escape("a<b>&\"c'", false) == "a&lt;b&gt;&amp;&quot;c&apos;");
  CHECK(mr::xml_escape("line\n\tnext", false) == "line\n\tnext");
  CHECK(mr::xml_escape("line\n\tnext", true) == "line&#10;&#9;next");
  // C0 controls (NUL, ESC, CR, form feed), DEL, a C1 control, invalid UTF-8, U+FFFE/U+FFFF: as text.
  CHECK(mr::xml_escape(std::string("a\0b\x1b\r\x0c\x7f", 7), true) == "a\\x00b\\x1b\\x0d\\x0c\\x7f");
  CHECK(mr::xml_escape("\xc2\x85|\xff|\xef\xbf\xbe|\xef\xbf\xbf", false) == "\\u0085|\\xff|\\ufffe|\\uffff");
  CHECK(mr::xml_escape("é ✓ 𝄞", true) == "é ✓ 𝄞");  // other UTF-8 unchanged
}

TEST_CASE("junit classname from the path", "[check-report]") {
  CHECK(mr::junit_classname("configs/examples/gpt.yaml") == "configs.examples.gpt");
  CHECK(mr::junit_classname("./a.yaml") == "a");
  CHECK(mr::junit_classname("/abs/dir.v2/b") == "abs.dir.v2.b");
  CHECK(mr::junit_classname(".hidden") == "hidden");  // no empty package
  CHECK(mr::junit_classname("") == "megatron-run check");
  // ".." and "." folders, and empty ones, are dropped: no classname starting with dots (lint36 #5).
  CHECK(mr::junit_classname("../e/valid.yaml") == "e.valid");
  CHECK(mr::junit_classname("../../a/./b//c.yaml") == "a.b.c");
  CHECK(mr::junit_classname(".//x.yaml") == "x");
  CHECK(mr::junit_classname("..") == "megatron-run check");
  CHECK(mr::junit_classname("d/.hidden") == "d.hidden");
  CHECK(mr::junit_classname(".github/ci..v2/a.yaml") == "github.ci.v2.a");
}

TEST_CASE("junit: the testcases' times add up to the suite's", "[check-report]") {
  // 1000 files of 0.7 ms: each rounded on its own made 1000 x 0.001 = 1 s against a suite of 0.7 s (lint36 #4).
  mr::JunitReport report;
  for (int i = 0; i < 1000; ++i) report.add("f" + std::to_string(i) + ".yaml", 0, {}, true, 0.0007);
  std::ostringstream os;
  report.finish(os);
  const std::string xml = os.str();
  long long sum_ms = 0;
  for (size_t at = xml.find("<testcase "); at != std::string::npos; at = xml.find("<testcase ", at + 1)) {
    const size_t t = xml.find("time=\"", at) + 6;
    const std::string v = xml.substr(t, xml.find('"', t) - t);
    sum_ms += std::stoll(v.substr(0, v.find('.'))) * 1000 + std::stoll(v.substr(v.find('.') + 1));
  }
  CHECK(sum_ms == 700);
  CHECK(xml.find("<testsuite name=\"megatron-run check\" tests=\"1000\" failures=\"0\" errors=\"0\" skipped=\"0\" "
                 "time=\"0.700\">") != std::string::npos);
}

TEST_CASE("junit: a testcase per file, failures and errors counted per testcase, the text escaped",
          "[check-report]") {
  const std::string nasty = "50% <b> & \"q\" 'a', b: c\nnext\x01\x1b\r|\xff|\xef\xbf\xbf";
  const std::string xml = junit_of({
      {"ok.yaml", 0, {}},
      {"warned.yaml", 0, {diag(kWarning, "w.one", "careful: <this>", "warned.yaml:2")}},
      {"two,rules.yaml", 1, {diag(kError, "r.one", nasty, "two,rules.yaml:3"), diag(kError, "r.two", "second")}},
      {"missing.yaml", 2, {diag(kError, "input.unreadable", "cannot read config file")}},
      {"bug.yaml", 3, {diag(kError, "internal", "internal error: x")}},
  });
  auto r = read_junit(xml, "unit.xml");
  INFO(xml << "\n" << r.out);
  REQUIRE(r.exit == 0);
  CHECK(r.out.rfind("tests=5 failures=1 errors=2\n", 0) == 0);
  CHECK(r.out.find("ok.yaml\tpass\n") != std::string::npos);
  CHECK(r.out.find("warned.yaml\tpass\n  out\twarned.yaml:2: warning[w.one]: careful: <this>\\n\n") !=
        std::string::npos);
  CHECK(r.out.find("two,rules.yaml\tfailure\n  message\t50% <b> & \"q\" 'a', b: c\\nnext\\x01\\x1b\\x0d|\\xff|"
                   "\\uffff\n  type\tr.one\n  message\tsecond\n  type\tr.two\n") != std::string::npos);
  CHECK(r.out.find("missing.yaml\terror\n  message\tcannot read config file\n  type\tinput.unreadable\n") !=
        std::string::npos);
  CHECK(r.out.find("bug.yaml\terror\n") != std::string::npos);
  // The element's text is the line check prints, place first.
  CHECK(xml.find(">two,rules.yaml:3: error[r.one]: 50% &lt;b&gt;") != std::string::npos);
  // Without warnings (--quiet): no system-out.
  CHECK(junit_of({{"warned.yaml", 0, {diag(kWarning, "w.one", "careful")}}}, false).find("system-out") ==
        std::string::npos);
  // No file at all is still a document.
  auto empty = read_junit(junit_of({}), "empty.xml");
  CHECK(empty.exit == 0);
  CHECK(empty.out == "tests=0 failures=0 errors=0\n");
}

TEST_CASE("check --format github: a command per problem, escaped; the summary plain text", "[check-report][cli]") {
  // A path with a comma and a colon; a message with %, :, ',' and a newline (the second mistake's line).
  const std::string bad = mrtest::write_file("p,q:r.yaml", "\"a%b,c:d\": 1\nnum_layers: 2\nnum_layers: 3\n",
                                             "check-report");
  const std::string missing = (mrtest::scratch_dir("check-report") / "missing.yaml").string();
  auto esc = [](const std::string& s) { return mr::github_escape_property(s); };
  auto r = mrtest::megatron_run("check --format github '" + bad + "' '" + missing + "' '" + MR_SOURCE_DIR +
                                "/configs/default.yaml'");
  CHECK(r.exit == 2);
  CHECK(r.out == "::error file=" + esc(bad) + ",line=1,title=parse.unknown-argument::unknown argument 'a%25b,c:d'%0A  also " + bad +
                     ":3: duplicate key 'num_layers' (also at " + bad + ":2); a config file sets each argument once\n"
                     "::error file=" + esc(missing) +
                     ",title=input.unreadable::cannot read config file: No such file or directory\n");
  CHECK(r.err == "3 file(s) checked, 2 invalid\n");
  // A rule's failure (exit 1) and a warning, with their lines.
  const std::string corpus =
      std::string(MR_DATA_DIR) + "/corpus/functional-tests/bert__bert_mcore_tp2_pp2.yaml";
  r = mrtest::megatron_run("check --format github --env-placeholder /p --world-size 3 '" + corpus + "'");
  CHECK(r.exit == 1);
  CHECK(r.out.find("::error file=" + esc(corpus) + ",line=") != std::string::npos);
  CHECK(r.out.find(",title=parallel.world-size-divisible::world size (3) is not a multiple") != std::string::npos);
  r = mrtest::megatron_run("check --format github --env-placeholder /p --world-size 8 '" + corpus + "'");
  CHECK(r.exit == 0);
  CHECK(r.out.rfind("::warning file=" + esc(corpus), 0) == 0);
  // --quiet: no warnings, no summary when every file is valid.
  r = mrtest::megatron_run("check --quiet --format github --env-placeholder /p --world-size 8 '" + corpus + "'");
  CHECK(r.exit == 0);
  CHECK(r.out.empty());
  CHECK(r.err.empty());
}

TEST_CASE("check --format github: a newline in a file's name is GitHub's %0A in file= and in the message",
          "[check-report][cli]") {
  const std::string dir = mrtest::scratch_dir("check-report").string();
  const std::string base = mrtest::write_file("nl-base.yaml", "--num-layers: [\n", "check-report");
  mrtest::write_file("nl\nname.yaml", "--num-layers: [\n", "check-report");
  auto r = mrtest::megatron_run("check --format github \"$(printf '" + dir + "/nl\\nname.yaml')\"");
  CHECK(r.exit == 2);
  CHECK(r.out.rfind("::error file=" + mr::github_escape_property(dir) + "/nl%0Aname.yaml,line=1,", 0) == 0);
  CHECK(r.out.find("\\x0a") == std::string::npos);
  // In the message: a problem placed in a --config BASE names the checked file, escaped the same way.
  mrtest::write_file("nl\nok.yaml", "--num-layers: 2\n", "check-report");
  r = mrtest::megatron_run("check --format github --config '" + base + "' \"$(printf '" + dir + "/nl\\nok.yaml')\"");
  CHECK(r.exit == 2);
  CHECK(r.out.find("(checking " + mr::github_escape_data(dir) + "/nl%0Aok.yaml)") != std::string::npos);
  CHECK(r.out.find("\\x0a") == std::string::npos);
}

TEST_CASE("check --format junit over the corpus: valid XML, counts and kinds as check's own exit codes",
          "[check-report][cli]") {
  // An unreadable file and one that cannot be parsed are in the report too, as errors.
  std::string args = "check --format junit --world-size 8 --env-placeholder /placeholder";
  const std::string missing = (mrtest::scratch_dir("check-report") / "no,such:file.yaml").string();
  const std::string broken = mrtest::write_file("broken.yaml", "num_layers: [\n<&>: \x01\n", "check-report");
  args += " '" + missing + "' '" + broken + "'";
  for (const auto& f : mrtest::corpus_files()) args += " '" + f.string() + "'";
  auto junit = mrtest::megatron_run(args);
  auto json = mrtest::megatron_run_stdout(
      "check --format json" + args.substr(std::string("check --format junit").size()));
  // The exit codes stay as they are: 2 when a file could not be read or parsed.
  CHECK(junit.exit == 2);
  CHECK(json.exit == 2);
  auto r = read_junit(junit.out, "corpus.xml");
  INFO(r.out.substr(0, 2000));
  REQUIRE(r.exit == 0);
  // Each file's kind is its exit code in check --format json: 0 pass, 1 failure, 2 error.
  size_t tests = 0, failures = 0, errors = 0;
  std::string expected_kinds;
  const mr::Value list = mr::Value::parse_json(json.out);
  for (const mr::Value& v : list.as_list()) {
    std::string file;
    long long exit = -1;
    for (const auto& [k, x] : v.as_object()) {
      if (k == "file") file = x.as_str();
      if (k == "exit") exit = x.as_int();
    }
    ++tests;
    failures += exit == 1;
    errors += exit >= 2;
    expected_kinds += file + "\t" + (exit == 0 ? "pass" : exit == 1 ? "failure" : "error") + "\n";
  }
  CHECK(tests == mrtest::corpus_files().size() + 2);
  CHECK(errors >= 2);
  CHECK(r.out.rfind("tests=" + std::to_string(tests) + " failures=" + std::to_string(failures) +
                        " errors=" + std::to_string(errors) + "\n",
                    0) == 0);
  std::string kinds;
  std::istringstream lines(r.out);
  std::string line;
  std::getline(lines, line);
  while (std::getline(lines, line))
    if (line.rfind("  ", 0) != 0) kinds += line + "\n";
  CHECK(kinds == expected_kinds);
  CHECK(r.out.find(missing + "\terror\n  message\tcannot read config file: No such file or directory\n  type\t"
                             "input.unreadable\n") != std::string::npos);
  CHECK(junit.err == std::to_string(tests) + " file(s) checked, " + std::to_string(failures + errors) +
                         " invalid\n");
}

TEST_CASE("check --format: the choices come from one list, a refusal names them (exit 2)", "[check-report][cli]") {
  auto r = mrtest::megatron_run("check --format sarif x.yaml");
  CHECK(r.exit == 2);
  CHECK(r.err.find("argument --format: invalid choice: 'sarif' (choose from 'text', 'json', 'github', 'junit')") !=
        std::string::npos);
  CHECK(r.out.empty());
  const std::string help = mrtest::megatron_run("check --help").out;
  CHECK(help.find("usage: megatron-run check [--format text|json|github|junit]") != std::string::npos);
  CHECK(mrtest::megatron_run("help").out.find("megatron-run check [--format text|json|github|junit]") !=
        std::string::npos);
  const std::string bash = mrtest::megatron_run("schema --format bash-completion").out;
  CHECK(bash.find("text json github junit") != std::string::npos);
}

// The spool file failing part way (a full disk; here the file-size limit, RLIMIT_FSIZE, in a child process): every
// testcase is still in the document, once, and the document is whole (what was spooled before the failure and what
// was still in stdio's buffer are neither lost nor cut).
TEST_CASE("junit: a spool file that fails part way loses no testcase", "[check-report]") {
  int pipefd[2];
  REQUIRE(pipe(pipefd) == 0);
  const int kFiles = 400;  // about 400 KB of testcases against a 96 KiB file
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    close(pipefd[0]);
    std::signal(SIGXFSZ, SIG_IGN);  // a write past the limit fails with EFBIG instead
    const rlimit small{96 * 1024, 96 * 1024};
    setrlimit(RLIMIT_FSIZE, &small);
    mr::JunitReport report;
    for (int i = 0; i < kFiles; ++i)
      report.add("configs/f" + std::to_string(i) + ".yaml", 1,
                 {diag(kError, "r.one", std::string(900, 'm') + " #" + std::to_string(i))}, true);
    std::ostringstream os;
    report.finish(os);
    const std::string doc = os.str();
    for (size_t at = 0; at < doc.size();) {
      const ssize_t n = write(pipefd[1], doc.data() + at, doc.size() - at);
      if (n <= 0) _exit(3);
      at += static_cast<size_t>(n);
    }
    _exit(0);
  }
  close(pipefd[1]);
  std::string xml;
  char buf[65536];
  for (ssize_t n; (n = read(pipefd[0], buf, sizeof buf)) > 0;) xml.append(buf, static_cast<size_t>(n));
  close(pipefd[0]);
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  auto r = read_junit(xml, "spool-failed.xml");
  INFO(r.out.substr(0, 2000));
  REQUIRE(r.exit == 0);
  CHECK(r.out.rfind("tests=400 failures=400 errors=0\n", 0) == 0);
  for (int i = 0; i < kFiles; ++i) {
    const std::string tag = " #" + std::to_string(i) + "\"";  // its message attribute
    CHECK(xml.find(tag) != std::string::npos);
    if (xml.find(tag) == std::string::npos) break;
  }
}

TEST_CASE("junit: the report spools in $TMPDIR, an unnamed file", "[check-report]") {
  namespace fs = std::filesystem;
  char tmpl[] = "/tmp/mr-junit-spool-XXXXXX";
  const fs::path dir = ::mkdtemp(tmpl);
  const char* before = std::getenv("TMPDIR");
  const std::string saved = before ? before : "";
  ::setenv("TMPDIR", dir.c_str(), 1);
  bool in_dir = false;
  {
    mr::JunitReport report;
    for (const auto& e : fs::directory_iterator("/proc/self/fd")) {
      std::error_code ec;
      const std::string target = fs::read_symlink(e.path(), ec).string();
      if (!ec && target.rfind((dir / "megatron-run-junit.").string(), 0) == 0) in_dir = target.find("(deleted)") != std::string::npos;
    }
    std::ostringstream os;
    report.add("a.yaml", 0, {}, true);
    report.finish(os);
    CHECK_THAT(os.str(), Catch::Contains("tests=\"1\""));
  }
  if (before) ::setenv("TMPDIR", saved.c_str(), 1);
  else ::unsetenv("TMPDIR");
  CHECK(in_dir);
  CHECK(fs::is_empty(dir));  // unlinked at once: nothing is left behind
  fs::remove(dir);
}

TEST_CASE("docs/config-files.md's check samples read as the output: github's line=, json's keys", "[check-report][cli]") {
  std::ifstream in(std::string(MR_SOURCE_DIR) + "/docs/config-files.md");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string doc = ss.str();
  // The github sample's first line, up to the "..." it cuts the message at, is the start of the command's output.
  const size_t at = doc.find("::error file=configs/default.yaml,");
  REQUIRE(at != std::string::npos);
  const std::string sample = doc.substr(at, doc.find("...", at) - at);
  const std::string root = std::string("cd '") + MR_SOURCE_DIR + "' && '" + MR_BINARY + "' ";
  mrtest::Proc gh = mrtest::run_shell(root + "check --format github --world-size 3 configs/default.yaml 2>/dev/null");
  CHECK(gh.exit == 1);
  CHECK(gh.out.rfind(sample, 0) == 0);
  CHECK(sample.find(",line=9,") != std::string::npos);
  // The json layout: each file's keys, in the order the page names them.
  mrtest::Proc js = mrtest::run_shell(root + "check --format json --world-size 3 configs/default.yaml 2>/dev/null");
  CHECK(js.exit == 1);
  const mr::Value v = mr::Value::parse_json(js.out);
  std::string keys;
  for (const auto& [k, _] : v.as_list()[0].as_object()) keys += "`" + k + "`, ";
  CHECK(keys == "`file`, `ok`, `exit`, `errors`, `resolved`, ");
  CHECK(doc.find("an object per file: `file`, `ok`, `exit`, `errors` —") != std::string::npos);
  for (const auto& [k, _] : v.as_list()[0].as_object()[3].second.as_list()[0].as_object()) {
    INFO("diagnostic key " << k);
    CHECK(doc.find("`" + k + "`") != std::string::npos);
  }
}

TEST_CASE("check --config BASE: an overlay file is checked on top of its base, as its header and the docs say",
          "[check-report][cli]") {
  const std::string root = std::string("cd '") + MR_SOURCE_DIR + "' && '" + MR_BINARY + "' ";
  // Alone, configs/examples/heterogeneous.yaml lacks what its base gives (the hidden size, the batch sizes).
  mrtest::Proc alone = mrtest::run_shell(root + "check configs/examples/heterogeneous.yaml 2>&1");
  CHECK(alone.exit == 1);
  CHECK_THAT(alone.out, Catch::Contains("error[heterogeneous.args-match-config]"));
  // On its base it is valid; the base is read again for each FILE (two files, both valid, one summary; a file named
  // twice is checked once).
  mrtest::Proc based = mrtest::run_shell(root + "check --config configs/default.yaml configs/examples/heterogeneous.yaml "
                                                "configs/default.yaml 2>&1");
  CHECK(based.exit == 0);
  CHECK_THAT(based.out, Catch::Contains("2 file(s) checked, 0 invalid"));
  // The base's values lose to each FILE's, as with --config BASE --config FILE: 4 layers, not default.yaml's 2.
  mrtest::Proc js = mrtest::run_shell(root + "check --format json --config configs/default.yaml "
                                             "configs/examples/heterogeneous.yaml 2>/dev/null");
  REQUIRE(js.exit == 0);
  const mr::Value v = mr::Value::parse_json(js.out);
  int layers = 0;
  for (const auto& [k, x] : v.as_list()[0].as_object())
    if (k == "resolved")
      for (const auto& [name, val] : x.as_object())
        if (name == "num_layers") layers = static_cast<int>(val.as_int());
  CHECK(layers == 4);
  // The command shown in the example's header is that one.
  std::ifstream in(std::string(MR_SOURCE_DIR) + "/configs/examples/heterogeneous.yaml");
  std::stringstream ss;
  ss << in.rdbuf();
  CHECK_THAT(ss.str(), Catch::Contains("megatron-run check --config configs/default.yaml configs/examples/heterogeneous.yaml"));
}

TEST_CASE("check: a config key's newline is escaped in every message, so no key starts a line (a workflow command)",
          "[check-report][cli]") {
  // Review ci33: a YAML key "foo\n::error ..." was echoed raw by the unknown-argument and duplicate-key messages,
  // and GitHub Actions runs a log line that starts with "::" as a workflow command.
  const std::string tag = "check-report";
  const std::vector<std::string> files = {
      mrtest::write_file("inj-unknown.yaml", "\"foo\\n::error file=README.md,line=1::injected\": 1\n", tag),
      mrtest::write_file("inj-dup.yaml", "\"a\\n::warning::dup\": 1\n\"a\\n::warning::dup\": 2\n", tag),
      mrtest::write_file("inj-nested.yaml", "--data-args-path: {\"b\\n::warning::n\": 1, \"b\\n::warning::n\": 2}\n", tag),
      mrtest::write_file("inj-ci.yaml", "MODEL_ARGS:\n  \"--a\\n::warning::ma\": 1\n", tag),
      mrtest::write_file("inj-ci-env.yaml",
                         "ENV_VARS:\n  \"X\\n::warning::ev\": 1\n  \"X\\n::warning::ev\": 2\nMODEL_ARGS:\n"
                         "  --num-layers: 2\n",
                         tag),
      mrtest::write_file("inj-env.yaml", "--data-path: \"${A\\n::warning::env}\"\n", tag)};
  std::string args;
  for (const std::string& f : files) args += " '" + f + "'";
  const std::string te_unknown = mrtest::write_file("te-unknown.yaml", "\"gpu\\n::warning::te\": 1\n", tag);
  const std::string te_dup = mrtest::write_file("te-dup.yaml", "env:\n  \"Q\\n::warning::t\": 1\n  \"Q\\n::warning::t\": 2\n", tag);
  for (const char* format : {"text", "github"}) {
    INFO("--format " << format);
    std::vector<mrtest::Proc> runs = {mrtest::megatron_run_merged(std::string("check --format ") + format + args),
                                      mrtest::megatron_run_merged(std::string("check --format ") + format +
                                                                  " --target-env '" + te_unknown + "'" + args),
                                      mrtest::megatron_run_merged(std::string("check --format ") + format +
                                                                  " --target-env '" + te_dup + "'" + args)};
    for (const mrtest::Proc& r : runs) {
      INFO(r.out);
      CHECK(r.exit == 2);
      CHECK(mrtest::printable_output(r.out));
      CHECK(r.out.find("\\x0a::") != std::string::npos);  // the key, escaped inside its line
      std::istringstream lines(r.out);
      for (std::string line; std::getline(lines, line);) {
        INFO(line);
        if (std::string(format) == "github" && line.rfind("::", 0) == 0)
          CHECK((line.rfind("::error file=", 0) == 0 || line.rfind("::warning file=", 0) == 0));
        else
          CHECK(line.find("::") != 0);
      }
    }
    CHECK(runs[0].out.find("unknown argument 'foo\\x0a::error file=README.md,line=1::injected'") != std::string::npos);
    CHECK(runs[0].out.find("duplicate key 'a\\x0a::warning::dup' (also at ") != std::string::npos);
    CHECK(runs[0].out.find("duplicate key 'b\\x0a::warning::n' (also at ") != std::string::npos);
    CHECK(runs[0].out.find("duplicate key 'X\\x0a::warning::ev' (also at ") != std::string::npos);
    // Not a variable name (it holds a newline): refused as such, the name escaped.
    CHECK(runs[0].out.find("${A\\x0a::warning::env} in ") != std::string::npos);
    CHECK(runs[1].out.find("unknown key 'gpu\\x0a::warning::te' in the target environment file") != std::string::npos);
    CHECK(runs[2].out.find("duplicate key 'Q\\x0a::warning::t' (also at ") != std::string::npos);
  }
}

TEST_CASE("check: a NUL byte in a message does not cut it (usage errors keep their whole text, NUL as \\x00)",
          "[check-report][cli]") {
  const mr::UsageError e(std::string("a.yaml:1: unknown argument 'k") + '\0' + "z' (did you mean --x?)", {}, "a.yaml:1");
  CHECK(std::string(e.what()) == "a.yaml:1: unknown argument 'k\\x00z' (did you mean --x?)");
  const std::string ctl =
      mrtest::write_file("ctl.yaml", "\"k\\e[31m\\0\\uFFFE]]>&<\\\"%,:\\r\": 1\n", "check-report");
  for (const char* format : {"text", "github", "json", "junit"}) {
    INFO("--format " << format);
    mrtest::Proc r = mrtest::megatron_run_stdout(std::string("check --format ") + format + " '" + ctl + "'");
    CHECK(r.exit == 2);
    CHECK(r.out.find(std::string(format) == "json" ? "\\\\x00" : "\\x00") != std::string::npos);
    CHECK(r.out.find(std::string(format) == "json" ? "\\\\x0d'" : std::string(format) == "junit" ? "\\x0d&apos;" : "\\x0d'") !=
          std::string::npos);  // the end kept
  }
}

TEST_CASE("check --config BASE: a problem in BASE names the checked FILE; a BASE that cannot be read is refused once",
          "[check-report][cli]") {
  const std::string tag = "check-base";
  const std::string dir = mrtest::scratch_dir(tag).string();
  std::ifstream in(std::string(MR_SOURCE_DIR) + "/configs/default.yaml");
  std::stringstream ss;
  ss << in.rdbuf();
  std::string bad_text = ss.str();
  const size_t gbs = bad_text.find("--global-batch-size: 8\n");
  REQUIRE(gbs != std::string::npos);
  bad_text.replace(gbs, 23, "--global-batch-size: 7\n");
  const std::string bad = mrtest::write_file("bad.yaml", bad_text, tag);
  mrtest::write_file("b:7", bad_text, tag);
  mrtest::write_file("o1.yaml", "--train-iters: 30\n", tag);
  mrtest::write_file("o2.yaml", "--train-iters: 40\n", tag);
  const std::string cd = "cd '" + dir + "' && '" + MR_BINARY + "' ";
  // Text: the line starts with the base's place, and says which FILE was being checked.
  mrtest::Proc r = mrtest::run_shell(cd + "check --config bad.yaml o1.yaml o2.yaml 2>/dev/null");
  CHECK(r.exit == 1);
  CHECK(r.out.rfind("bad.yaml:", 0) == 0);
  CHECK(r.out.find("(checking o1.yaml)\nbad.yaml:") != std::string::npos);
  CHECK(r.out.find("(checking o2.yaml)\n") != std::string::npos);
  // github: the annotation stays on the base's line; the message names the FILE.
  r = mrtest::run_shell(cd + "check --format github --config bad.yaml o1.yaml o2.yaml 2>/dev/null");
  CHECK(r.exit == 1);
  CHECK(r.out.rfind("::error file=bad.yaml,line=", 0) == 0);
  CHECK(r.out.find("(checking o1.yaml)\n::error file=bad.yaml,line=") != std::string::npos);
  CHECK(r.out.find("(checking o2.yaml)\n") != std::string::npos);
  // A base named like a place ("b:7") is taken whole.
  r = mrtest::run_shell(cd + "check --format github --config 'b:7' o1.yaml 2>/dev/null");
  CHECK(r.out.rfind("::error file=b%3A7,line=", 0) == 0);
  // A problem in FILE itself says nothing more.
  r = mrtest::run_shell(cd + "check bad.yaml 2>/dev/null");
  CHECK(r.out.find("(checking") == std::string::npos);
  // A missing base: one usage error, no report, exit 2.
  r = mrtest::run_shell(cd + "check --config nope.yaml o1.yaml o2.yaml 2>&1");
  CHECK(r.exit == 2);
  CHECK(r.out == "megatron-run: nope.yaml: error[input.unreadable]: cannot read config file: No such file or directory\n");
  // The place read with the bases known (config/check_report.h).
  const mr::Diagnostic in_base = diag(kError, "r", "m", "b:7:9");
  const mr::DiagnosticPlace p = mr::diagnostic_place("o1.yaml", in_base, {"b:7"});
  CHECK(p.file == "b:7");
  CHECK(p.line == 9);
  CHECK(mr::check_text_line("o1.yaml", in_base, {"b:7"}) == "b:7:9: error[r]: m (checking o1.yaml)\n");
  CHECK(mr::check_text_line("o1.yaml", diag(kError, "r", "m\n  also x", "o1.yaml:2")) ==
        "o1.yaml:2: error[r]: m\n  also x\n");
  CHECK(mr::check_text_line("o1.yaml", diag(kError, "r", "m\n  also x", "b.yaml:2")) ==
        "b.yaml:2: error[r]: m (checking o1.yaml)\n  also x\n");
  CHECK(mr::diagnostic_place("o1.yaml", diag(kError, "r", "m", "b:7"), {"b:7"}).file == "b:7");
  CHECK(mr::diagnostic_place("o1.yaml", diag(kError, "r", "m"), {"b:7"}).file == "o1.yaml");
}

TEST_CASE("check --format json: every diagnostic has `where` (null without a place); no summary; --quiet keeps the "
          "warnings, as the docs say",
          "[check-report][cli]") {
  const std::string root = std::string("cd '") + MR_SOURCE_DIR + "' && '" + MR_BINARY + "' ";
  const std::string err = (mrtest::scratch_dir("check-report") / "json.err").string();
  // No --micro-batch-size (a rule without a place) and a deprecated flag (a warning).
  const std::string warn = mrtest::write_file("warn.yaml", "--use-mcore-models: true\n", "check-report");
  mrtest::Proc r = mrtest::run_shell(root + "check --format json --quiet '" + warn + "' 2>'" + err + "'");
  CHECK(r.exit == 1);
  const mr::Value v = mr::Value::parse_json(r.out);
  size_t warnings = 0, without_place = 0;
  for (const auto& [k, x] : v.as_list()[0].as_object())
    if (k == "errors")
      for (const mr::Value& d : x.as_list()) {
        bool has_where = false;
        for (const auto& [dk, dv] : d.as_object())
          if (dk == "where") {
            has_where = true;
            without_place += dv.is_none() ? 1 : 0;
          } else if (dk == "level") {
            warnings += dv.as_str() == "warning" ? 1 : 0;
          }
        CHECK(has_where);
      }
  CHECK(warnings > 0);       // --quiet leaves the JSON whole
  CHECK(without_place > 0);  // the world-size rule has no line
  std::ifstream e(err);
  std::stringstream es;
  es << e.rdbuf();
  CHECK(es.str().empty());  // the document is the summary: stderr stays empty for `2>&1 | jq`
}
