// The log-line prefix template (line_prefix.h): Python's string.Template syntax, as torchrun uses it.
#include "launch/line_prefix.h"

#include <unistd.h>

#include <cctype>

namespace mr::launch {

namespace {

bool ident_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Walks the template: `literal(text)` for plain text, `macro(name, as_written)` for each $name or ${name}.
template <class Literal, class Macro>
void scan(const std::string& t, Literal literal, Macro macro) {
  size_t i = 0;
  while (i < t.size()) {
    if (t[i] != '$' || i + 1 == t.size()) {
      literal(std::string(1, t[i++]));
      continue;
    }
    const char next = t[i + 1];
    if (next == '$') {  // $$: one dollar sign
      literal("$");
      i += 2;
    } else if (next == '{') {
      size_t j = i + 2;
      while (j < t.size() && ident_char(t[j])) ++j;
      if (j < t.size() && t[j] == '}' && j > i + 2 && ident_start(t[i + 2])) {
        macro(t.substr(i + 2, j - i - 2), t.substr(i, j + 1 - i));
        i = j + 1;
      } else {  // not a macro: kept as written (safe_substitute)
        literal("$");
        ++i;
      }
    } else if (ident_start(next)) {
      size_t j = i + 1;
      while (j < t.size() && ident_char(t[j])) ++j;
      macro(t.substr(i + 1, j - i - 1), t.substr(i, j - i));
      i = j;
    } else {
      literal("$");
      ++i;
    }
  }
}

const char* const kMacros[] = {"role_name", "rank", "local_rank", "hostname"};

bool known(const std::string& name) {
  for (const char* m : kMacros)
    if (name == m) return true;
  return false;
}

}  // namespace

std::string expand_line_prefix(const std::string& tmpl, const PrefixFields& f) {
  std::string out;
  scan(
      tmpl, [&](const std::string& s) { out += s; },
      [&](const std::string& name, const std::string& written) {
        if (name == "role_name") out += f.role_name;
        else if (name == "rank") out += std::to_string(f.rank);
        else if (name == "local_rank") out += std::to_string(f.local_rank);
        else if (name == "hostname") out += f.hostname;
        else out += written;
      });
  return out;
}

std::vector<std::string> unknown_prefix_macros(const std::string& tmpl) {
  std::vector<std::string> out;
  scan(
      tmpl, [](const std::string&) {},
      [&](const std::string& name, const std::string& written) {
        if (!known(name)) out.push_back(written);
      });
  return out;
}

std::string local_hostname() {
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  return host;
}

}  // namespace mr::launch
