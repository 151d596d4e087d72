#include "util/shell.h"

namespace mr {

namespace {
bool plain_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '@' ||
         c == '%' || c == '+' || c == '=' || c == ':' || c == ',' || c == '.' || c == '/' || c == '-';
}
}  // namespace

std::string shell_quote(std::string_view word) {
  bool plain = !word.empty() && word.front() != '=';  // zsh expands a leading '=' (=cmd)
  for (char c : word) plain = plain && plain_char(c);
  if (plain) return std::string(word);
  std::string out = "'";
  for (char c : word) {
    if (c == '\'') out += "'\\''";  // close the quote, an escaped quote, reopen
    else out += c;
  }
  out += '\'';
  return out;
}

std::string shell_join(const std::vector<std::string>& words) {
  std::string out;
  for (size_t i = 0; i < words.size(); ++i) {
    if (i) out += ' ';
    out += shell_quote(words[i]);
  }
  return out;
}

}  // namespace mr
