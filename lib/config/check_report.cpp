#include "config/check_report.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "util/text.h"

namespace mr {

namespace {

// The number that ends `s` after its last ':' ("a.yaml:12" -> 12), with `s` cut before that ':'.
std::optional<long long> take_number(std::string_view& s) {
  const size_t colon = s.rfind(':');
  if (colon == std::string_view::npos || colon + 1 == s.size() || s.size() - colon - 1 > 12) return std::nullopt;
  long long n = 0;
  for (size_t i = colon + 1; i < s.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(s[i]))) return std::nullopt;
    n = n * 10 + (s[i] - '0');
  }
  s = s.substr(0, colon);
  return n;
}

const char* level_word(const Diagnostic& d) { return d.level == Diagnostic::Level::Error ? "error" : "warning"; }

// Milliseconds as seconds with three decimals, "1.234".
std::string milliseconds_text(long long ms) {
  if (ms < 0) ms = 0;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%lld.%03lld", ms / 1000, ms % 1000);
  return buf;
}

}  // namespace

DiagnosticPlace parse_place(std::string_view where, std::string_view known) {
  DiagnosticPlace p;
  if (!known.empty() && where == known) return p;  // the file itself (a refusal of the whole file): no line
  if (!known.empty() && where.size() > known.size() + 1 && where.substr(0, known.size()) == known &&
      where[known.size()] == ':') {
    // "KNOWN:line" or "KNOWN:line:col": the numbers after the known name, nothing else.
    DiagnosticPlace q = parse_place(std::string("f:").append(where.substr(known.size() + 1)));
    if (q.file == "f") {
      q.file = std::string(known);
      return q;
    }
  }
  std::string_view rest = where;
  auto last = take_number(rest);
  if (!last || rest.empty()) return p;
  std::string_view before = rest;
  if (auto line = take_number(before); line && !before.empty()) {  // path:line:col
    p.line = line;
    p.col = last;
    rest = before;
  } else {
    p.line = last;
  }
  p.file = std::string(rest);
  return p;
}

DiagnosticPlace diagnostic_place(const std::string& file, const Diagnostic& d, const std::vector<std::string>& bases) {
  DiagnosticPlace p;
  if (d.where.empty() || d.where == file) {
    p.file = file;
    return p;
  }
  for (const std::string& b : bases)
    if (d.where == b) {
      p.file = b;
      return p;
    }
  // The longest known name the place starts with (a base "b" and a base "b:7" both given: "b:7:9" is in "b:7").
  DiagnosticPlace best;
  size_t best_size = 0;
  auto try_known = [&](const std::string& k) {
    if (k.empty() || k.size() <= best_size) return;
    DiagnosticPlace q = parse_place(d.where, k);
    if (q.file == k && q.line) {
      best = std::move(q);
      best_size = k.size();
    }
  };
  try_known(file);
  for (const std::string& b : bases) try_known(b);
  return best_size ? best : parse_place(d.where);
}

namespace {

// `message` with " (checking FILE)" at the end of its first line when the diagnostic's place is not `file` itself,
// the message's text escaped by `text` and the file's name by `name` (the layout's escapes).
template <class Text, class Name>
std::string with_checked_file(const std::string& file, const DiagnosticPlace& place, const std::string& message,
                              Text text, Name name) {
  if (place.file == file) return text(message);
  const size_t eol = std::min(message.find('\n'), message.size());
  return text(message.substr(0, eol)) + " (checking " + name(file) + ")" + text(message.substr(eol));
}

}  // namespace

std::string check_text_line(const std::string& file, const Diagnostic& d, const std::vector<std::string>& bases) {
  const std::string where = d.where.empty() ? file : d.where;
  return printable(where, false) + ": " + level_word(d) + "[" + printable(d.rule, false) + "]: " +
         with_checked_file(file, diagnostic_place(file, d, bases), without_where(d.message, d.where),
                           [](std::string_view m) { return printable(m); },
                           [](std::string_view f) { return printable(f, false); }) +
         "\n";
}

// ---- GitHub Actions -----------------------------------------------------------------------------------------

namespace {

// GitHub's escapes: % CR LF everywhere, and : , in a property's value (`file=...,title=...`).
std::string github_escape(std::string_view s, bool property) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '%': out += "%25"; break;
      case '\r': out += "%0D"; break;
      case '\n': out += "%0A"; break;
      case ':': out += property ? "%3A" : ":"; break;
      case ',': out += property ? "%2C" : ","; break;
      default: out += c;
    }
  }
  return out;
}

// `s` in a workflow command (a property's value with `property`): a line feed or carriage return as GitHub's
// %0A or %0D, the rest printable() (a tab kept where `keep_tabs`, else \x09), then GitHub's escapes.
std::string github_text(std::string_view s, bool property, bool keep_tabs) {
  std::string out;
  for (size_t at = 0;;) {
    const size_t end = std::min(s.find_first_of("\r\n", at), s.size());
    // printable() keeps a tab (and a newline: none here) with keep_newlines.
    out += github_escape(printable(s.substr(at, end - at), keep_tabs), property);
    if (end == s.size()) return out;
    out += s[end] == '\r' ? "%0D" : "%0A";
    at = end + 1;
  }
}

}  // namespace

std::string github_escape_data(std::string_view s) { return github_escape(s, false); }
std::string github_escape_property(std::string_view s) { return github_escape(s, true); }

std::string github_command(const std::string& file, const Diagnostic& d, const std::vector<std::string>& bases) {
  const DiagnosticPlace place = diagnostic_place(file, d, bases);
  std::string message = without_where(d.message, d.where);
  // A place that is not "path:line" (none in check today) stays in the message rather than being lost.
  if (place.file.empty()) message = d.where + ": " + message;
  std::string out = std::string("::") + level_word(d) + " file=" +
                    github_text(place.file.empty() ? file : place.file, /*property=*/true, /*keep_tabs=*/false);
  if (place.line) out += ",line=" + std::to_string(*place.line);
  if (place.col) out += ",col=" + std::to_string(*place.col);
  out += ",title=" + github_text(d.rule, /*property=*/true, /*keep_tabs=*/false);
  out += "::" +
         with_checked_file(file, place.file.empty() ? DiagnosticPlace{file, {}, {}} : place, message,
                           [](std::string_view m) { return github_text(m, /*property=*/false, /*keep_tabs=*/true); },
                           [](std::string_view f) { return github_text(f, /*property=*/false, /*keep_tabs=*/false); }) +
         "\n";
  return out;
}

// ---- JUnit XML ----------------------------------------------------------------------------------------------

std::string junit_classname(std::string_view path) {
  // The folders, without the empty, "." and ".." ones (Jenkins splits the classname at its last '.' into package
  // and class: "../e/valid.yaml" gave the package "...e"), then the file's name without its extension.
  std::vector<std::string_view> parts;
  for (size_t at = 0; at <= path.size();) {
    const size_t slash = std::min(path.find('/', at), path.size());
    const std::string_view part = path.substr(at, slash - at);
    if (!part.empty() && part != "." && part != "..") parts.push_back(part);
    at = slash + 1;
  }
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    std::string_view part = parts[i];
    if (i + 1 == parts.size()) {
      const size_t dot = part.rfind('.');
      if (dot != std::string_view::npos && dot > 0) part = part.substr(0, dot);  // ".hidden" keeps its name
    }
    out += (i ? "." : "") + std::string(part);
  }
  // No empty package or class name: runs of dots become one, none at either end ("d/.hidden" is "d.hidden",
  // ".github/a.yaml" "github.a").
  std::string tidy;
  for (char c : out)
    if (c != '.' || (!tidy.empty() && tidy.back() != '.')) tidy += c;
  while (!tidy.empty() && tidy.back() == '.') tidy.pop_back();
  return tidy.empty() ? std::string("megatron-run check") : tidy;
}

namespace {

// An unnamed spool file in $TMPDIR (std::tmpfile() always takes /tmp), else std::tmpfile()'s.
std::FILE* spool_file() {
  const char* dir = std::getenv("TMPDIR");
  if (dir && *dir) {
    std::string path = std::string(dir) + "/megatron-run-junit.XXXXXX";
    const int fd = ::mkstemp(path.data());
    if (fd >= 0) {
      ::unlink(path.c_str());
      if (std::FILE* f = ::fdopen(fd, "w+")) return f;
      ::close(fd);
    }
  }
  return std::tmpfile();
}

}  // namespace

JunitReport::JunitReport() : spool_(spool_file()) {}

JunitReport::~JunitReport() {
  if (spool_) std::fclose(spool_);
}

namespace {

// Up to `size` bytes of `f` from its start, read by position (the stream's own buffer and position are left alone:
// after a failed write they may hold bytes that never reached the file); each chunk is given to `take`.
template <class Take>
size_t read_spooled(std::FILE* f, size_t size, Take take) {
  char buf[65536];
  size_t at = 0;
  while (at < size) {
    const ssize_t n = ::pread(fileno(f), buf, std::min(sizeof buf, size - at), static_cast<off_t>(at));
    if (n <= 0) break;
    take(buf, static_cast<size_t>(n));
    at += static_cast<size_t>(n);
  }
  return at;
}

}  // namespace

void JunitReport::spool(const std::string& text) {
  // Each testcase is flushed to the file at once, so that the file always ends with a whole testcase and
  // `spooled_` counts the bytes known to be there.
  if (spool_ && std::fwrite(text.data(), 1, text.size(), spool_) == text.size() && std::fflush(spool_) == 0) {
    spooled_ += text.size();
    return;
  }
  if (spool_) {  // the temporary file failed (a full disk): what it holds moves to memory, and the rest follows
    std::string held;
    const size_t got = read_spooled(spool_, spooled_, [&](const char* b, size_t n) { held.append(b, n); });
    if (got < spooled_) {  // it cannot be read back whole either: cut back to the last whole testcase
      const size_t end = held.rfind("    </testcase>\n");
      held.resize(end == std::string::npos ? 0 : end + 16);
    }
    std::fclose(spool_);  // its buffer may still hold part of `text`: dropped with it
    spool_ = nullptr;
    memory_ = std::move(held);
  }
  memory_ += text;
}

void JunitReport::add(const std::string& file, int exit, const std::vector<Diagnostic>& diags, bool with_warnings,
                      double seconds) {
  ++tests_;
  const bool failed = exit == 1, errored = exit >= 2;
  failures_ += failed ? 1 : 0;
  errors_ += errored ? 1 : 0;
  // The testcases' times add up to the suite's: each is the step of the running total rounded to milliseconds
  // (each rounded on its own, 5010 files of about a millisecond summed to 16% more than the suite's time).
  seconds_ += seconds < 0 ? 0 : seconds;
  const long long total_ms = std::llround(seconds_ * 1000);
  const long long case_ms = total_ms - reported_ms_;
  reported_ms_ = total_ms;
  std::string t = "    <testcase name=\"" + xml_escape(file, true) + "\" classname=\"" +
                  xml_escape(junit_classname(file), true) + "\" file=\"" + xml_escape(file, true) + "\" time=\"" +
                  milliseconds_text(case_ms) + "\">\n";
  std::string out;
  for (const Diagnostic& d : diags) {
    if (d.level == Diagnostic::Level::Warning) {
      if (with_warnings) out += xml_escape(check_text_line(file, d), false);
      continue;
    }
    // An error diagnostic of a valid file cannot be; were it one, it is still reported, as a failure.
    const char* element = errored ? "error" : "failure";
    t += std::string("      <") + element + " message=\"" + xml_escape(without_where(d.message, d.where), true) +
         "\" type=\"" + xml_escape(d.rule, true) + "\">" + xml_escape(check_text_line(file, d), false) + "</" +
         element + ">\n";
  }
  if (!out.empty()) t += "      <system-out>" + out + "</system-out>\n";
  t += "    </testcase>\n";
  spool(t);
}

void JunitReport::finish(std::ostream& os) {
  const std::string counts = " tests=\"" + std::to_string(tests_) + "\" failures=\"" + std::to_string(failures_) +
                             "\" errors=\"" + std::to_string(errors_) + "\"";
  os << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
     << "<testsuites name=\"megatron-run check\"" << counts << " time=\"" << milliseconds_text(reported_ms_) << "\">\n"
     << "  <testsuite name=\"megatron-run check\"" << counts << " skipped=\"0\" time=\"" << milliseconds_text(reported_ms_)
     << "\">\n";
  if (spool_)
    read_spooled(spool_, spooled_, [&](const char* b, size_t n) { os.write(b, static_cast<std::streamsize>(n)); });
  os << memory_ << "  </testsuite>\n</testsuites>\n";
}

}  // namespace mr
