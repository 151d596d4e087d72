// Sizes of memory written by people (byte_size.h).
#include "util/byte_size.h"

#include <cstdio>

#include <cctype>
#include <cmath>
#include <string>

namespace mr {

std::optional<double> parse_byte_size(std::string_view s) {
  size_t i = 0;
  while (i < s.size() && s[i] == ' ') ++i;
  const size_t start = i;
  bool digits = false, dot = false;
  while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || (s[i] == '.' && !dot))) {
    if (s[i] == '.') dot = true;
    else digits = true;
    ++i;
  }
  if (!digits) return std::nullopt;
  const double v = std::stod(std::string(s.substr(start, i - start)));
  while (i < s.size() && s[i] == ' ') ++i;
  std::string unit;
  for (; i < s.size(); ++i) unit += static_cast<char>(std::tolower(static_cast<unsigned char>(s[i])));
  while (!unit.empty() && unit.back() == ' ') unit.pop_back();
  double scale = 0;
  if (unit.empty() || unit == "b") scale = 1;
  else if (unit == "kib") scale = 1024.0;
  else if (unit == "mib") scale = 1024.0 * 1024;
  else if (unit == "gib") scale = 1024.0 * 1024 * 1024;
  else if (unit == "tib") scale = 1024.0 * 1024 * 1024 * 1024;
  else if (unit == "kb") scale = 1e3;
  else if (unit == "mb") scale = 1e6;
  else if (unit == "gb") scale = 1e9;
  else if (unit == "tb") scale = 1e12;
  else return std::nullopt;
  const double bytes = v * scale;
  if (!std::isfinite(bytes) || bytes > std::ldexp(1.0, 60)) return std::nullopt;
  return bytes;
}

std::string format_gib(double bytes, bool unit) {
  char b[48];
  std::snprintf(b, sizeof b, unit ? "%.2f GiB" : "%.2f", bytes / kGiB);
  return b;
}

std::string format_mib(double bytes) {
  char b[48];
  std::snprintf(b, sizeof b, "%.1f MiB", bytes / kMiB);
  return b;
}

}  // namespace mr
