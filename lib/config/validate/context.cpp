#include "config/validate/context.h"

#include "config/schema.h"

namespace mr {

std::string Context::flag(std::string_view dest) {
  auto args = Schema::megatron().find_dest(dest);
  if (!args.empty() && !args.front()->flags.empty()) return args.front()->flags.front();
  std::string f = "--" + std::string(dest);
  for (char& c : f)
    if (c == '_') c = '-';
  return f;
}

Diagnostic Context::make(const Rule& rule, const std::string& message,
                         std::initializer_list<std::string_view> dests) const {
  Diagnostic d;
  d.level = rule.level == Rule::Level::Error ? Diagnostic::Level::Error : Diagnostic::Level::Warning;
  d.rule = rule.id;
  d.message = message;
  for (std::string_view dest : dests) {
    d.flags.push_back(flag(dest));
    if (d.where.empty() && args_.has(dest)) {
      const Provenance& p = args_.provenance(dest);
      if (p.kind == Provenance::Kind::Config) d.where = p.where;
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

}  // namespace mr
