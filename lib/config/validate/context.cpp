#include "config/validate/context.h"

#include <cstdint>

#include "config/checked.h"
#include "config/schema.h"
#include "config/validate/sanity.h"

namespace mr {

std::string Context::flag(std::string_view dest) { return Schema::megatron().flag_for_dest(dest); }

Diagnostic Context::make(const Rule& rule, const std::string& message,
                         std::initializer_list<std::string_view> dests) const {
  Diagnostic d;
  d.level = rule.level == Rule::Level::Error ? Diagnostic::Level::Error : Diagnostic::Level::Warning;
  d.rule = rule.id;
  d.message = message;
  d.stage = rule.stage;
  // The place is that of the value set last among the flags involved (the one the user most likely just changed):
  // a later config file's over an earlier one's, the first flag named within one file; and when the command line
  // set one of them over a file's, "command line" (not the untouched line of the base file). Only command-line
  // values: no place, as before.
  size_t placed_rank = 0;  // 0: none; 1 + a file's index in config_order_; SIZE_MAX: the command line
  bool from_file = false;
  for (std::string_view dest : dests) {
    d.flags.push_back(flag(dest));
    if (!args_.has(dest)) continue;
    const Provenance& p = args_.provenance(dest);
    size_t rank = 0;
    if (p.kind == Provenance::Kind::Config) {
      from_file = true;
      rank = 1;  // "path:line" (or "path:line:col") of the i-th file applied
      for (size_t i = 0; i < config_order_.size(); ++i) {
        const std::string& f = config_order_[i];
        if (p.where.size() > f.size() && p.where.compare(0, f.size(), f) == 0 && p.where[f.size()] == ':') rank = i + 1;
      }
    } else if (p.kind == Provenance::Kind::Cli || (p.kind == Provenance::Kind::Derived && p.given == Provenance::Kind::Cli)) {
      rank = SIZE_MAX;
    }
    if (rank > placed_rank) {
      placed_rank = rank;
      d.where = rank == SIZE_MAX ? std::string("command line") : p.where;
    }
    // A value --use-checkpoint-args (or --use-mp-args-from-checkpoint-args) took from a checkpoint: no flag the
    // user wrote gave it, so the message names the file it came from (once per file).
    static constexpr std::string_view kFromCheckpoint = "--use-checkpoint-args: ";
    if (p.kind == Provenance::Kind::Derived && p.where.rfind(kFromCheckpoint, 0) == 0) {
      const std::string set_by = " (set by " + p.where + ")";
      if (d.message.find(set_by) == std::string::npos) d.message += set_by;
    }
  }
  if (placed_rank == SIZE_MAX && !from_file) d.where.clear();
  return d;
}

void Context::require(bool ok, const Rule& rule, const std::string& message,
                      std::initializer_list<std::string_view> dests) {
  if (!ok) fail(rule, message, dests);
}

void Context::fail(const Rule& rule, const std::string& message, std::initializer_list<std::string_view> dests) {
  rule.record_hit();
  fail_counted(rule, message, dests);
}

void Context::warn(const Rule& rule, const std::string& message, std::initializer_list<std::string_view> dests) {
  rule.record_hit();
  warn_counted(rule, message, dests);
}

void Context::fail_counted(const Rule& rule, const std::string& message,
                           std::initializer_list<std::string_view> dests) {
  throw RuleFailure(make(rule, message, dests));
}

void Context::warn_counted(const Rule& rule, const std::string& message,
                           std::initializer_list<std::string_view> dests) {
  diags_.push_back(make(rule, message, dests));
}

int64_t Context::mul(int64_t a, int64_t b, const std::string& what, std::initializer_list<std::string_view> dests) {
  if (auto r = checked_mul(a, b)) return *r;
  overflow(what + " = " + std::to_string(a) + " x " + std::to_string(b), dests);
}

int64_t Context::add(int64_t a, int64_t b, const std::string& what, std::initializer_list<std::string_view> dests) {
  if (auto r = checked_add(a, b)) return *r;
  overflow(what + " = " + std::to_string(a) + " + " + std::to_string(b), dests);
}

void Context::overflow(const std::string& what, std::initializer_list<std::string_view> dests) {
  fail(sanity::integer_overflow_rule(),
       what + " does not fit in a 64-bit integer: Megatron's Python would go on with the huge number, but no job "
              "can have it",
       dests);
}

}  // namespace mr
