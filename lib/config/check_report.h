// The CI layouts of `megatron-run check` (apps/megatron-run/cmd_check.cpp): GitHub Actions workflow commands
// (--format github) and a JUnit XML report (--format junit). Both take each file's result as `check` knows it: the
// file, its exit code (0 valid, 1 a rule failed, 2 unreadable or malformed, 3 a bug of ours) and its diagnostics.
#pragma once

#include <cstdio>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "config/diagnostic.h"

namespace mr {

// A diagnostic's place, "path:line" or "path:line:col" (Diagnostic::where), taken apart; `file` is empty when
// `where` does not end in a line number. `known`: the checked file's own name, taken whole when `where` starts
// with it and a ':' (a name that itself ends in ":N", "run:3", is not cut there); `where` that is `known` itself
// has no place.
struct DiagnosticPlace {
  std::string file;
  std::optional<long long> line, col;
};
DiagnosticPlace parse_place(std::string_view where, std::string_view known = {});

// The place of a diagnostic of the checked `file` (`check --config BASE... FILE`): `where` taken apart with each
// of `file` and `bases` known whole (a base named "b:7" is not cut there); `where` that is one of them names that
// file with no line; no `where` is `file` itself. `file` empty in the result: a place that is no "path:line".
DiagnosticPlace diagnostic_place(const std::string& file, const Diagnostic& d,
                                 const std::vector<std::string>& bases = {});

// The line `check --format text` prints for a diagnostic of `file`: "PLACE: error[RULE]: MESSAGE\n" (PLACE the
// diagnostic's own, else the file), escaped by printable(); a message's own newlines are kept. A PLACE in another
// file (a --config BASE of `bases`) adds " (checking FILE)" to the message's first line, so that each result
// names the file it belongs to.
std::string check_text_line(const std::string& file, const Diagnostic& d, const std::vector<std::string>& bases = {});

// ---- GitHub Actions ---------------------------------------------------------------------------------------
// GitHub's escapes for a workflow command: in its message (the data after "::") % -> %25, CR -> %0D, LF -> %0A;
// in a property value (file=, title=) also : -> %3A and , -> %2C.
std::string github_escape_data(std::string_view s);
std::string github_escape_property(std::string_view s);

// One workflow command for a diagnostic of `file`:
//   ::error file=PATH,line=N,col=C,title=RULE::MESSAGE   (::warning for a warning)
// PATH and the line (and column) are the diagnostic's place when it has one, else `file` alone; the title is the
// rule id. A line feed or carriage return, in the message or in a path, is GitHub's %0A or %0D (GitHub shows it as
// one); every other control character goes through printable() (util/text.h), so the command carries none raw (an
// escape reads \x1b; a tab is kept in the message, \x09 in a path or property); then GitHub's escapes. A place in
// another file (a --config BASE of `bases`) keeps PATH that file and adds " (checking FILE)" to the message's
// first line. Ends with "\n".
std::string github_command(const std::string& file, const Diagnostic& d, const std::vector<std::string>& bases = {});

// ---- JUnit XML --------------------------------------------------------------------------------------------
// Text and attribute values are escaped by xml_escape (util/text.h).

// The classname of a file's <testcase>: its path without the extension, the folders joined with '.'
// ("configs/examples/gpt.yaml" -> "configs.examples.gpt"; empty, "." and ".." folders dropped:
// "../e/valid.yaml" -> "e.valid").
std::string junit_classname(std::string_view path);

// A JUnit report: one <testsuite name="megatron-run check"> (inside <testsuites>), one <testcase> per file.
// A file whose rules failed (exit 1) has a <failure message=MESSAGE type=RULE-ID> per error, the element's text the
// whole line as `check` prints it; a file that could not be read or parsed (exit 2) or hit a bug (exit 3) has an
// <error ...> per error instead. Warnings are the testcase's <system-out>, one line each. The counts (tests,
// failures, errors) are of testcases, as JUnit counts them: a file with three failed rules is one failure.
// The testcases are spooled to a temporary file (memory does not grow with the number of files) and the document
// is written by finish(), when the counts are known.
class JunitReport {
 public:
  JunitReport();
  ~JunitReport();
  JunitReport(const JunitReport&) = delete;
  JunitReport& operator=(const JunitReport&) = delete;

  // One file's result; `with_warnings` false leaves its warnings out (--quiet); `seconds` its time.
  void add(const std::string& file, int exit, const std::vector<Diagnostic>& diags, bool with_warnings,
           double seconds = 0);
  // Writes the whole document.
  void finish(std::ostream& os);

  size_t tests() const { return tests_; }
  size_t failures() const { return failures_; }
  size_t errors() const { return errors_; }

 private:
  void spool(const std::string& text);
  std::FILE* spool_ = nullptr;  // the testcases so far; null when no temporary file could be made
  size_t spooled_ = 0;          // the bytes of whole testcases written to spool_ and flushed
  std::string memory_;          // ... then they are kept here
  size_t tests_ = 0, failures_ = 0, errors_ = 0;
  double seconds_ = 0;          // the testcases' times summed
  long long reported_ms_ = 0;   // ... rounded to milliseconds: the suite's time, and the testcases' times' sum
};

}  // namespace mr
