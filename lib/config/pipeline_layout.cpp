// --pipeline-model-parallel-layout parsing: a port of PipelineParallelLayerLayout.parse_str_to_list (the
// regular-expression unrolling is reproduced by hand, match for match), and where it puts each rank's layers. The
// rules that refuse a layout are in config/validate/virtual_pipeline.cpp (validate_args) and
// config/validate/init_pipeline_layout.cpp (TransformerConfig).
#include "config/pipeline_layout.h"

#include <algorithm>
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

RankStages rank_stages(const std::vector<std::string>& stages, int64_t pp, int64_t pp_rank) {
  RankStages out;
  if (pp < 1 || pp_rank < 0 || pp_rank >= pp) return out;
  const int64_t n = static_cast<int64_t>(stages.size());
  int64_t before = 0;  // decoder layers in the stages before s
  for (int64_t s = 0; s < n; ++s) {
    const std::string& st = stages[static_cast<size_t>(s)];
    int64_t t = 0, m = 0;
    for (char c : st) {
      t += c == 't';
      m += c == 'm';
    }
    if (s % pp == pp_rank) {
      for (int64_t i = 0; i < t; ++i) out.decoder_layers.push_back(before + i);
      out.mtp_layers += m;
      if (m > 0) out.mtp_chunks.push_back(s / pp);
    }
    before += t;
  }
  return out;
}

Check check_layers(const std::vector<std::string>& stages, int64_t pp, int64_t num_layers, int64_t mtp_num_layers) {
  using P = Check::Problem;
  std::string flat;
  for (const std::string& st : stages) flat += st;
  auto count = [](const std::string& text, char c) {
    int64_t k = 0;
    for (char x : text) k += x == c;
    return k;
  };
  const std::string n = std::to_string(count(flat, 't')), mtp = std::to_string(mtp_num_layers);
  if (flat.empty() || flat.front() != 'E') return {P::Ends, "its first layer must be the embedding (E)"};
  if (flat.back() != 'L') return {P::Ends, "its last layer must be the loss (L)"};
  if (count(flat, 'E') != 1) return {P::Ends, "the embedding (E) must appear exactly once"};
  if (count(flat, 'L') != 1) return {P::Ends, "the loss (L) must appear exactly once"};
  if (count(flat, 't') != num_layers)
    return {P::DecoderCount, "it has " + n + " decoder layers (t), --num-layers is " + std::to_string(num_layers)};
  const int64_t m = count(flat, 'm');
  if (m != std::max<int64_t>(mtp_num_layers, 0))
    return {P::MtpCount, "it has " + std::to_string(m) + " MTP layers (m), --mtp-num-layers is " +
                             (mtp_num_layers < 0 ? std::string("unset") : mtp)};
  const size_t first_m = flat.find('m');
  if (first_m != std::string::npos && flat.find('t', first_m) != std::string::npos)
    return {P::MtpPlacement, "decoder layers (t) must come before the MTP layers (m)"};
  if (pp < 1) return {};
  const int64_t chunks = static_cast<int64_t>(stages.size()) / pp;
  for (int64_t s = 0; s < static_cast<int64_t>(stages.size()); ++s) {
    const int64_t k = count(stages[static_cast<size_t>(s)], 'm');
    if (k == 0) continue;
    const std::string where = "pipeline rank " + std::to_string(s % pp) + ", virtual chunk " + std::to_string(s / pp);
    if (s / pp != chunks - 1)
      return {P::MtpPlacement, "the MTP layers must be in the last virtual chunk of their pipeline rank (" + where + ")"};
    if (k != mtp_num_layers)
      return {P::MtpPlacement, "all " + mtp + " MTP layers must be in one stage (" + where + " has " +
                                   std::to_string(k) + ")"};
  }
  return {};
}

}  // namespace pipeline_layout
}  // namespace mr
