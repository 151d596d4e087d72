// --pipeline-model-parallel-layout parsing: a port of PipelineParallelLayerLayout.parse_str_to_list (the
// regular-expression unrolling is reproduced by hand, match for match). The rules that refuse a layout are in
// config/validate/virtual_pipeline.cpp.
#include "config/pipeline_layout.h"

#include <cstdint>
#include <string_view>

namespace mr {
namespace {

using pipeline_layout::kMaxChars;

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Appends `n` copies of `unit` (n given as decimal digits, Python int()); false when too large.
bool repeat(std::string& out, std::string_view unit, std::string_view digits) {
  size_t start = 0;
  while (start + 1 < digits.size() && digits[start] == '0') ++start;
  digits.remove_prefix(start);
  if (unit.empty()) return true;
  if (digits.size() > 12) return false;  // at least 10^12 copies
  const uint64_t n = std::stoull(std::string(digits));
  if (n > kMaxChars / unit.size() || out.size() + n * unit.size() > kMaxChars) return false;
  for (uint64_t i = 0; i < n; ++i) out.append(unit);
  return true;
}

// Length of the run of ASCII digits at s[i...].
size_t digits_at(const std::string& s, size_t i) {
  size_t j = i;
  while (j < s.size() && is_digit(s[j])) ++j;
  return j - i;
}

// The whole UTF-8 character starting at s[i], for messages.
std::string utf8_char_at(const std::string& s, size_t i) {
  const unsigned char c = static_cast<unsigned char>(s[i]);
  const size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 1;
  return s.substr(i, n);
}

}  // namespace

namespace pipeline_layout {

std::string expand(const std::string& layout, bool* too_large) {
  if (too_large) *too_large = false;
  std::string s;
  for (char c : layout)
    if (c != ',') s += c;  // commas are cosmetic

  // Pass 1, r'\(([^)]+)\)\*(\d+)': '(' + a non-empty run without ')' + ')' + '*' + digits.
  std::string pass1;
  for (size_t i = 0; i < s.size();) {
    if (s[i] == '(') {
      const size_t close = s.find(')', i + 1);
      if (close != std::string::npos && close > i + 1 && close + 1 < s.size() && s[close + 1] == '*') {
        const size_t nd = digits_at(s, close + 2);
        if (nd > 0) {
          if (!repeat(pass1, std::string_view(s).substr(i + 1, close - i - 1),
                      std::string_view(s).substr(close + 2, nd))) {
            if (too_large) *too_large = true;
            return {};
          }
          i = close + 2 + nd;
          continue;
        }
      }
    }
    pass1 += s[i++];
  }

  // Pass 2, r'(.)\*(\d+)': any character but a newline + '*' + digits.
  std::string pass2;
  for (size_t i = 0; i < pass1.size();) {
    if (pass1[i] != '\n' && i + 1 < pass1.size() && pass1[i + 1] == '*') {
      const size_t nd = digits_at(pass1, i + 2);
      if (nd > 0) {
        if (!repeat(pass2, std::string_view(pass1).substr(i, 1), std::string_view(pass1).substr(i + 2, nd))) {
          if (too_large) *too_large = true;
          return {};
        }
        i += 2 + nd;
        continue;
      }
    }
    pass2 += pass1[i++];
  }
  return pass2;
}

Layout parse(const std::string& layout) {
  Layout out;
  const std::string text = expand(layout, &out.too_large);
  if (out.too_large) return out;
  out.stages.emplace_back();
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '|') {
      out.stages.emplace_back();
      continue;
    }
    if (c != 'E' && c != 'L' && c != 't' && c != 'm') {
      out.bad_char = utf8_char_at(text, i);
      return out;
    }
    out.stages.back() += c;
  }
  return out;
}

}  // namespace pipeline_layout
}  // namespace mr
