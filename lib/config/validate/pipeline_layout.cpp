// --pipeline-model-parallel-layout parsing: a port of PipelineParallelLayerLayout.parse_str_to_list (the
// regular-expression unrolling is reproduced by hand, match for match).
#include "config/validate/pipeline_layout.h"

#include <cstdint>
#include <string_view>

namespace mr {
namespace {

MR_RULE(kInvalidLayerChar, "pipeline-layout.invalid-layer-character",
        "--pipeline-model-parallel-layout may only use E, L, t, m, '|', ',', '(...)*n' and 'x*n'.");
// Python would try to build the string and run out of memory; we refuse beyond this many characters.
constexpr size_t kMaxChars = size_t(1) << 26;
MR_RULE(kLayoutTooLarge, "pipeline-layout.too-large",
        "--pipeline-model-parallel-layout expands to more layers than can be held.");

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

std::vector<std::string> parse_stages(Context& ctx, const std::string& layout) {
  bool too_large = false;
  const std::string text = expand(layout, &too_large);
  if (too_large)
    ctx.fail(kLayoutTooLarge,
             "--pipeline-model-parallel-layout '" + layout + "' unrolls to more than " + std::to_string(kMaxChars) +
                 " layers",
             {"pipeline_model_parallel_layout"});
  std::vector<std::string> stages(1);
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '|') {
      stages.emplace_back();
      continue;
    }
    if (c != 'E' && c != 'L' && c != 't' && c != 'm')
      ctx.fail(kInvalidLayerChar,
               "--pipeline-model-parallel-layout '" + layout + "': '" + utf8_char_at(text, i) +
                   "' is not a layer character (E embedding, L loss, t decoder layer, m MTP layer; stages are "
                   "separated by '|', '(...)*n' and 'x*n' repeat)",
               {"pipeline_model_parallel_layout"});
    stages.back() += c;
  }
  return stages;
}

}  // namespace pipeline_layout
}  // namespace mr
