#include "config/rule.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

namespace mr {

namespace {
std::vector<const Rule*>& registry() {
  static std::vector<const Rule*> r;
  return r;
}

// At exit: appends "<id> <count>\n" for every rule that fired to $MR_RULE_HITS_FILE, in one write() on a
// descriptor opened with O_APPEND, so processes exiting at the same time (a test and the megatron-run
// processes it spawns) do not interleave their lines.
void write_rule_hits() {
  const char* path = std::getenv("MR_RULE_HITS_FILE");
  if (!path || !*path) return;
  std::string out;
  for (const Rule* r : registry())
    if (uint64_t n = r->hit_count()) out += std::string(r->id) + " " + std::to_string(n) + "\n";
  if (out.empty()) return;
  int fd = ::open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return;
  const char* p = out.data();
  size_t left = out.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    p += n;
    left -= static_cast<size_t>(n);
  }
  ::close(fd);
}

// Registers write_rule_hits with atexit once, at the first hit (after static initialisation, so it runs
// before the registry and the rules are torn down), and only when MR_RULE_HITS_FILE is set.
bool register_hits_writer() {
  const char* path = std::getenv("MR_RULE_HITS_FILE");
  if (path && *path) std::atexit(&write_rule_hits);
  return true;
}
}  // namespace

Rule::Rule(const char* id_, Level level_, const char* description_, const char* file_, int line_,
           const char* stage_)
    : id(id_), level(level_), description(description_), file(file_), line(line_), stage(stage_) {
  registry().push_back(this);
}

void Rule::record_hit() const noexcept {
  static const bool registered = register_hits_writer();
  (void)registered;
  hits_.fetch_add(1, std::memory_order_relaxed);
}

void link_input_rules();  // config/input_rules.cpp

std::string without_nul(std::string msg) {
  if (msg.find('\0') == std::string::npos) return msg;
  std::string out;
  out.reserve(msg.size() + 16);
  for (char c : msg) {
    if (c == '\0')
      out += "\\x00";
    else
      out += c;
  }
  return out;
}

void record_rule_hit(const char* id) noexcept {
  if (!id || !*id) return;
  for (const Rule* r : registry())
    if (std::strcmp(r->id, id) == 0) return r->record_hit();
}

namespace {
const Rule internal_rule{
    "internal", Rule::Level::Error,
    "A bug of megatron-run, reported rather than escaping: an exception no layer turned into a refusal (check: "
    "that file's result, exit 3 for the run), or a validated value its typed view cannot hold. Please report it "
    "with the command line.",
    __FILE__, __LINE__, kStageInternal};
}  // namespace
const Rule& kInternalRule = internal_rule;

namespace {
// The id of a usage error that has none of its own (UsageError::rule(), config/diagnostic.h): listed so that
// `megatron-run rules usage` and docs/validation.md say what it means.
const Rule usage_rule{
    "usage", Rule::Level::Error,
    "A usage error with no id of its own (exit 2; argparse's `megatron-run: error: TEXT`, the option or file:line "
    "named in TEXT): mostly the values of megatron-run's own options (the launcher's, --target-*, a missing FILE or "
    "value, an unknown command; an unknown own option is parse.unknown-argument) and a --yaml-cfg or --target-env "
    "file's values. Megatron's flags and config files are refused "
    "with ids of their own (parse.unknown-argument, parse.invalid-value, parse.missing-value, parse.unset-env, "
    "input.*).",
    __FILE__, __LINE__, kStageParse};
}  // namespace

const char* usage_stage(std::string_view rule) {
  link_input_rules();
  for (const Rule* r : registry())
    if (rule == r->id) return r->stage;
  return rule.rfind("input.", 0) == 0 ? kStageInput : kStageParse;
}

std::vector<const Rule*> all_rules() {
  link_input_rules();
  std::vector<const Rule*> out = registry();
  std::sort(out.begin(), out.end(), [](const Rule* a, const Rule* b) { return std::strcmp(a->id, b->id) < 0; });
  return out;
}

}  // namespace mr
