#include "util/rule_id.h"

namespace mr {

std::string with_rule_id(std::string_view id, std::string_view text) {
  std::string out;
  out.reserve(id.size() + text.size() + 3);
  out.append("[").append(id).append("] ").append(text);
  return out;
}

namespace {
// A rule id's spelling: "stage.name", lower-case letters, digits, '.', '-' and '_' (every id `rules` lists).
bool looks_like_rule_id(std::string_view id) {
  if (id.empty() || id.find('.') == std::string_view::npos || id.front() == '.' || id.back() == '.') return false;
  for (const char c : id)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '_')) return false;
  return true;
}
}  // namespace

std::optional<std::pair<std::string, std::string>> split_rule_id(std::string_view message) {
  if (message.size() <= 2 || message[0] != '[') return std::nullopt;
  const size_t close = message.find("] ");
  if (close == std::string_view::npos || !looks_like_rule_id(message.substr(1, close - 1))) return std::nullopt;
  return std::pair{std::string(message.substr(1, close - 1)), std::string(message.substr(close + 2))};
}

std::string without_rule_id(std::string_view message) {
  if (auto id = split_rule_id(message)) return std::move(id->second);
  return std::string(message);
}

std::string rule_heading(std::string_view level, std::string_view message) {
  if (const auto id = split_rule_id(message)) return rule_heading(level, id->first, id->second);
  return rule_heading(level, "", message);
}

std::string rule_heading(std::string_view level, std::string_view id, std::string_view text) {
  std::string out;
  out.reserve(level.size() + id.size() + text.size() + 4);
  out.append(level);
  if (!id.empty()) out.append("[").append(id).append("]");
  return out.append(": ").append(text);
}

}  // namespace mr
