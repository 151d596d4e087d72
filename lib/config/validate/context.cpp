#include "config/validate/context.h"

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
  for (std::string_view dest : dests) {
    d.flags.push_back(flag(dest));
    if (!args_.has(dest)) continue;
    const Provenance& p = args_.provenance(dest);
    if (d.where.empty() && p.kind == Provenance::Kind::Config) d.where = p.where;
    // A value --use-checkpoint-args (or --use-mp-args-from-checkpoint-args) took from a checkpoint: no flag the
    // user wrote gave it, so the message names the file it came from (once per file).
    static constexpr std::string_view kFromCheckpoint = "--use-checkpoint-args: ";
    if (p.kind == Provenance::Kind::Derived && p.where.rfind(kFromCheckpoint, 0) == 0) {
      const std::string set_by = " (set by " + p.where + ")";
      if (d.message.find(set_by) == std::string::npos) d.message += set_by;
    }
  }
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
