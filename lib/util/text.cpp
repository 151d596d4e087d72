#include "util/text.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>

namespace mr {

size_t utf8_char(std::string_view s, size_t i, uint32_t& cp) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  size_t n;
  uint32_t min;
  if (c < 0x80) {
    cp = c;
    return 1;
  } else if ((c & 0xE0) == 0xC0) {
    n = 2, cp = c & 0x1F, min = 0x80;
  } else if ((c & 0xF0) == 0xE0) {
    n = 3, cp = c & 0x0F, min = 0x800;
  } else if ((c & 0xF8) == 0xF0) {
    n = 4, cp = c & 0x07, min = 0x10000;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((b(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b(i + k) & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;  // overlong, too big, surrogate
  return n;
}

bool escaped_code_point(uint32_t cp) {
  return (cp >= 0x80 && cp <= 0x9F) || cp == 0x200E || cp == 0x200F || cp == 0x2028 || cp == 0x2029 ||
         (cp >= 0x202A && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069);
}

namespace {

template <class Out>
void scan(std::string_view s, bool keep_newlines, Out&& out) {
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    uint32_t cp = 0;
    const size_t n = utf8_char(s, i, cp);
    if (n == 0) {
      out.escape_byte(c);
      ++i;
    } else if (n == 1) {
      if ((c < 0x20 && !(keep_newlines && (c == '\n' || c == '\t'))) || c == 0x7f) out.escape_byte(c);
      else out.keep(s.substr(i, 1));
      ++i;
    } else {
      if (escaped_code_point(cp)) out.escape_code_point(cp);
      else out.keep(s.substr(i, n));
      i += n;
    }
  }
}

}  // namespace

std::string printable(std::string_view s, bool keep_newlines) {
  struct Out {
    std::string text;
    void keep(std::string_view t) { text.append(t); }
    void escape_byte(unsigned char c) {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02x", c);
      text += b;
    }
    void escape_code_point(uint32_t cp) {
      char b[12];
      std::snprintf(b, sizeof b, "\\u%04x", static_cast<unsigned>(cp));
      text += b;
    }
  } out;
  out.text.reserve(s.size());
  scan(s, keep_newlines, out);
  return std::move(out.text);
}

bool is_printable(std::string_view s, bool keep_newlines) {
  struct Out {
    bool ok = true;
    void keep(std::string_view) {}
    void escape_byte(unsigned char) { ok = false; }
    void escape_code_point(uint32_t) { ok = false; }
  } out;
  scan(s, keep_newlines, out);
  return out.ok;
}

std::string abbreviate(std::string_view s, size_t max) {
  if (s.size() <= max) return std::string(s);
  size_t cut = max;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;  // not inside a character
  return std::string(s.substr(0, cut)) + "... (" + std::to_string(s.size()) + " bytes)";
}

std::string echo_word(std::string_view s, size_t max) { return printable(abbreviate(s, max), false); }

std::string abbreviate_inside(std::string_view s, size_t max, size_t tail) {
  if (s.size() <= max) return std::string(s);
  tail = std::min(tail, max);
  size_t head = max - tail;
  while (head > 0 && (static_cast<unsigned char>(s[head]) & 0xC0) == 0x80) --head;  // not inside a character
  size_t from = s.size() - tail;
  while (from < s.size() && (static_cast<unsigned char>(s[from]) & 0xC0) == 0x80) ++from;
  return std::string(s.substr(0, head)) + " ... [" + std::to_string(from - head) + " bytes cut] ... " +
         std::string(s.substr(from));
}

std::string seconds_text(std::chrono::milliseconds duration) {
  const int64_t ms = duration.count();
  const bool negative = ms < 0;
  const uint64_t m = negative ? 0 - static_cast<uint64_t>(ms) : static_cast<uint64_t>(ms);
  std::string frac = m % 1000 ? std::to_string(1000 + m % 1000).substr(1) : "";  // "700" of 0.7 s
  while (!frac.empty() && frac.back() == '0') frac.pop_back();
  return (negative ? "-" : "") + std::to_string(m / 1000) + (frac.empty() ? "" : "." + frac) + " s";
}

std::string format_number(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", x);
  return b;
}

std::string join(const std::vector<std::string>& parts, std::string_view sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) out += sep;  // a separator between words, none before the first
    out += parts[i];
  }
  return out;
}

std::vector<std::string> split(std::string_view s, char sep) {
  std::vector<std::string> out;
  for (size_t start = 0;;) {
    const size_t at = s.find(sep, start);
    out.emplace_back(s.substr(start, at == std::string_view::npos ? std::string_view::npos : at - start));
    if (at == std::string_view::npos) return out;
    start = at + 1;  // the piece after the separator, empty when it ends the text
  }
}

std::string trim(std::string_view s) {
  constexpr const char* kSpace = " \t\r\n\v\f";  // Python's str.strip() for ASCII (torchrun strips its options so)
  const size_t b = s.find_first_not_of(kSpace), e = s.find_last_not_of(kSpace);
  return b == std::string_view::npos ? std::string() : std::string(s.substr(b, e - b + 1));
}

size_t edit_distance(std::string_view a, std::string_view b, size_t limit) {
  if ((a.size() > b.size() ? a.size() - b.size() : b.size() - a.size()) > limit) return limit + 1;
  size_t prev[128], cur[128];
  if (b.size() >= 128) return limit + 1;
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    size_t row_min = cur[0];
    for (size_t j = 1; j <= b.size(); ++j) {
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      row_min = std::min(row_min, cur[j]);
    }
    if (row_min > limit) return limit + 1;
    std::copy(cur, cur + b.size() + 1, prev);
  }
  return prev[b.size()];
}

std::vector<std::string> closest_words(std::string_view word, const std::vector<std::string>& known, size_t limit) {
  std::vector<std::pair<size_t, std::string>> scored;
  for (const std::string& k : known)
    if (const size_t d = edit_distance(word, k, limit); d > 0 && d <= limit) scored.emplace_back(d, k);
  std::stable_sort(scored.begin(), scored.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  std::vector<std::string> out;
  for (auto& [d, k] : scored) out.push_back(std::move(k));
  return out;
}

std::string xml_escape(std::string_view raw, bool attribute) {
  const std::string s = printable(raw);  // no C0 (but \t, \n) or C1 control, no invalid UTF-8 from here on
  std::string out;
  out.reserve(s.size() + s.size() / 8);
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      uint32_t cp = 0;
      size_t n = utf8_char(s, i, cp);
      if (n == 0) {  // cannot happen after printable(); kept out of the document all the same
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\x%02x", c);
        out += buf;
        ++i;
      } else if (cp == 0xFFFE || cp == 0xFFFF) {
        out += cp == 0xFFFE ? "\\ufffe" : "\\uffff";
        i += n;
      } else {
        out.append(s, i, n);
        i += n;
      }
      continue;
    }
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      case '\t': out += attribute ? "&#9;" : "\t"; break;
      case '\n': out += attribute ? "&#10;" : "\n"; break;
      default:
        if (c < 0x20 || c == 0x7f) {  // cannot happen after printable(), as above
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\x%02x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
    ++i;
  }
  return out;
}

}  // namespace mr
