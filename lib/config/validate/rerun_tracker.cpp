// --result-rejected-tracker-filename (seed arguments.py 1638-1643): the iterations the rerun state machine
// recorded as reproducibly rejected are appended to --iterations-to-skip
// (megatron/core/rerun_state_machine.py RerunStateMachine.get_skipped_iterations_from_tracker_file).
#include <cctype>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "config/parse/read_file.h"
#include "config/validate/section_functions.h"

namespace mr::section {

MR_WARNING(kTrackerUnreadable, "rerun.tracker-file-unreadable",
           "The --result-rejected-tracker-filename file could not be read or parsed; no (more) iterations are "
           "skipped from it.");

namespace {

// Python's int(str) for the decimal strings a tracker line holds: surrounding whitespace, an optional sign,
// digits with single underscores between them.
std::optional<long long> py_int(const std::string& text) {
  size_t b = 0, e = text.size();
  while (b < e && std::isspace(static_cast<unsigned char>(text[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(text[e - 1]))) --e;
  if (b == e) return std::nullopt;
  bool neg = false;
  if (text[b] == '+' || text[b] == '-') neg = text[b++] == '-';
  if (b == e) return std::nullopt;
  long long v = 0;
  bool prev_digit = false;
  for (size_t i = b; i < e; ++i) {
    char c = text[i];
    if (c == '_') {
      if (!prev_digit || i + 1 == e) return std::nullopt;
      prev_digit = false;
      continue;
    }
    if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
    if (v > (static_cast<long long>(9e18) - (c - '0')) / 10) return std::nullopt;
    v = v * 10 + (c - '0');
    prev_digit = true;
  }
  return neg ? -v : v;
}

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

struct TrackerResult {
  std::vector<long long> skip;
  std::string error;  // why reading stopped early, if it did
};

// An iteration is skipped when a rank saw a reproducible (or rerun-disabled) failure at it twice; it is not
// skipped when, within one job, several ranks failed at it.
TrackerResult skipped_iterations(const std::string& path) {
  TrackerResult out;
  std::set<long long> potential, ignore;
  std::set<std::pair<long long, long long>> seen;                               // (rank, iteration)
  std::map<std::string, std::map<long long, std::set<long long>>> seen_by_job;  // job -> iteration -> ranks
  std::string text;
  try {
    // Bounded, and never blocking: a named pipe or device is refused (config/parse/read_file.h).
    text = read_input_file(path, "--result-rejected-tracker-filename file", {"--result-rejected-tracker-filename"});
  } catch (const UsageError& e) {
    out.error = e.what();
  }
  if (out.error.empty()) {
    // Text mode with universal newlines: \r\n and \r end lines too.
    std::string line;
    std::vector<std::string> lines;
    for (size_t i = 0; i < text.size(); ++i) {
      char c = text[i];
      if (c == '\r' || c == '\n') {
        lines.push_back(line);
        line.clear();
        if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
      } else {
        line += c;
      }
    }
    if (!line.empty()) lines.push_back(line);
    static const std::regex re(
        "ts=.+ node=.+ device=.+ jobID=(.+) rank=(.+) iteration=(.+) status=(.+) result=.+ message=.+");
    for (size_t n = 0; n < lines.size(); ++n) {
      const std::string& l = lines[n];
      if (l.find("ts=") == std::string::npos) continue;  // cannot match (and spares the regex most lines)
      // std::regex recurses once per character: a long line would overflow the stack.
      if (l.size() > limits::kMaxTrackerLineBytes) {
        out.error = "line " + std::to_string(n + 1) + " is longer than " + std::to_string(limits::kMaxTrackerLineBytes) +
                    " bytes (the limit, limits::kMaxTrackerLineBytes)";
        break;
      }
      std::smatch m;
      if (!std::regex_search(l, m, re)) continue;
      std::string job = m[1].str();
      auto rank = py_int(m[2].str());
      if (!rank) {
        out.error = "invalid rank " + Value(m[2].str()).py_repr();
        break;
      }
      auto iteration = py_int(m[3].str());
      if (!iteration) {
        out.error = "invalid iteration " + Value(m[3].str()).py_repr();
        break;
      }
      std::string status = m[4].str();
      size_t dot = status.rfind('.');
      if (dot != std::string::npos) status = status.substr(dot + 1);
      status = upper(status);
      if (status != "RERUN_DISABLED" && status != "FIRST_RERUN_REPRODUCIBLE" && status != "SECOND_RERUN_REPRODUCIBLE")
        continue;
      if (seen.count({*rank, *iteration})) potential.insert(*iteration);
      seen.insert({*rank, *iteration});
      auto& ranks = seen_by_job[job][*iteration];
      ranks.insert(*rank);
      if (ranks.size() > 1) ignore.insert(*iteration);
    }
  }
  for (long long it : potential)
    if (!ignore.count(it)) out.skip.push_back(it);
  return out;
}

}  // namespace

void rerun_tracker(Context& ctx) {
  if (ctx.is_none("result_rejected_tracker_filename")) return;
  const std::string& path = ctx.s("result_rejected_tracker_filename");
  TrackerResult r = skipped_iterations(path);
  if (!r.error.empty())
    ctx.warn(kTrackerUnreadable,
             "could not read the iterations to skip from --result-rejected-tracker-filename: " + r.error,
             {"result_rejected_tracker_filename"});
  if (r.skip.empty()) return;
  List skip = ctx["iterations_to_skip"].is_list() ? ctx["iterations_to_skip"].as_list() : List{};
  for (long long it : r.skip) skip.push_back(Value(it));
  ctx.set("iterations_to_skip", Value(std::move(skip)), "iterations read from --result-rejected-tracker-filename");
}

}  // namespace mr::section
