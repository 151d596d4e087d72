// ParamKey and fnmatch: see param_key.h. Seed: ../shared/spec/optimizer_config.py.
#include "config/param_key.h"

#include <functional>

namespace mr {

// ---------------------------------------------------------------------------------------------------------
// fnmatch
// ---------------------------------------------------------------------------------------------------------

namespace {

// UTF-8 to code points; a byte that does not start a valid sequence stands for itself.
std::u32string decode_utf8(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    int len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    bool ok = len > 0 && i + len <= s.size();
    char32_t cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
    for (int k = 1; ok && k < len; ++k) {
      unsigned char cc = static_cast<unsigned char>(s[i + k]);
      if ((cc >> 6) != 0x2) ok = false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    if (!ok) {
      out.push_back(c);
      ++i;
    } else {
      out.push_back(cp);
      i += len;
    }
  }
  return out;
}

// One element of a translated glob: every element but Star matches exactly one character.
struct GlobToken {
  enum class Kind { Star, Any, Literal, Set, Never } kind;
  char32_t ch = 0;                                    // Literal
  bool negate = false;                                // Set
  std::vector<std::pair<char32_t, char32_t>> ranges;  // Set: inclusive ranges (single characters as c..c)

  bool match(char32_t c) const {
    switch (kind) {
      case Kind::Any: return true;
      case Kind::Literal: return c == ch;
      case Kind::Never: return false;
      case Kind::Set: {
        bool in = false;
        for (auto [lo, hi] : ranges)
          if (lo <= c && c <= hi) in = true;
        return in != negate;
      }
      case Kind::Star: break;
    }
    return false;
  }
};

// Python's fnmatch.translate, as tokens instead of a regular expression. A bracket expression is split
// into chunks at its range hyphens exactly as Python does (a hyphen right after '[' or '[!', or right after
// a range, is literal; a trailing one is literal; a reversed range is dropped with both its ends), so the
// set that results is the one Python's regular expression would accept.
std::vector<GlobToken> translate_glob(const std::u32string& p) {
  std::vector<GlobToken> out;
  size_t i = 0, n = p.size();
  while (i < n) {
    char32_t c = p[i++];
    if (c == U'*') {
      if (out.empty() || out.back().kind != GlobToken::Kind::Star) out.push_back({GlobToken::Kind::Star});
    } else if (c == U'?') {
      out.push_back({GlobToken::Kind::Any});
    } else if (c == U'[') {
      size_t j = i;
      if (j < n && p[j] == U'!') ++j;
      if (j < n && p[j] == U']') ++j;
      while (j < n && p[j] != U']') ++j;
      if (j >= n) {
        out.push_back({GlobToken::Kind::Literal, U'['});
        continue;
      }
      std::u32string stuff = p.substr(i, j - i);
      std::vector<std::u32string> chunks;
      if (stuff.find(U'-') == std::u32string::npos) {
        chunks.push_back(stuff);
      } else {
        size_t start = i;
        size_t k = p[i] == U'!' ? i + 2 : i + 1;
        while (true) {
          size_t hy = std::u32string::npos;
          for (size_t q = k; q < j; ++q)
            if (p[q] == U'-') {
              hy = q;
              break;
            }
          if (hy == std::u32string::npos) break;
          chunks.push_back(p.substr(start, hy - start));
          start = hy + 1;
          k = hy + 3;
        }
        std::u32string last = p.substr(start, j - start);
        if (!last.empty()) chunks.push_back(last);
        else chunks.back() += U'-';
        for (size_t m = chunks.size() - 1; m > 0; --m) {
          if (chunks[m - 1].back() > chunks[m].front()) {
            chunks[m - 1] = chunks[m - 1].substr(0, chunks[m - 1].size() - 1) + chunks[m].substr(1);
            chunks.erase(chunks.begin() + static_cast<std::ptrdiff_t>(m));
          }
        }
      }
      i = j + 1;
      if (chunks.size() == 1 && chunks[0].empty()) {
        out.push_back({GlobToken::Kind::Never});  // empty set: matches nothing
        continue;
      }
      if (chunks.size() == 1 && chunks[0] == U"!") {
        out.push_back({GlobToken::Kind::Any});  // negated empty set: any character
        continue;
      }
      GlobToken t{GlobToken::Kind::Set};
      if (chunks[0].front() == U'!') {
        t.negate = true;
        chunks[0].erase(0, 1);
      }
      // Consecutive chunks are joined by a range from the last character of one to the first of the next;
      // every other character is literal. (A chunk between two ranges always has two or more characters.)
      for (size_t m = 0; m < chunks.size(); ++m) {
        const std::u32string& ch = chunks[m];
        for (size_t q = 0; q < ch.size(); ++q) {
          bool range_end = m > 0 && q == 0;
          bool range_start = m + 1 < chunks.size() && q + 1 == ch.size();
          if (range_start) t.ranges.push_back({ch[q], chunks[m + 1].front()});
          else if (!range_end) t.ranges.push_back({ch[q], ch[q]});
        }
      }
      out.push_back(std::move(t));
    } else {
      out.push_back({GlobToken::Kind::Literal, c});
    }
  }
  return out;
}

}  // namespace

bool fnmatch(std::string_view name, std::string_view pattern) {
  const std::u32string s = decode_utf8(name);
  const std::vector<GlobToken> t = translate_glob(decode_utf8(pattern));
  // Single-character tokens and stars: greedy matching with backtracking to the last star is exact.
  size_t si = 0, ti = 0, star_t = std::string::npos, star_s = 0;
  while (si < s.size()) {
    if (ti < t.size() && t[ti].kind == GlobToken::Kind::Star) {
      star_t = ti++;
      star_s = si;
    } else if (ti < t.size() && t[ti].match(s[si])) {
      ++ti;
      ++si;
    } else if (star_t != std::string::npos) {
      ti = star_t + 1;
      si = ++star_s;
    } else {
      return false;
    }
  }
  while (ti < t.size() && t[ti].kind == GlobToken::Kind::Star) ++ti;
  return ti == t.size();
}

// ---------------------------------------------------------------------------------------------------------
// ParamKey (seed 69-140)
// ---------------------------------------------------------------------------------------------------------

bool ParamView::attr(std::string_view name) const {
  auto it = attrs.find(name);
  return it != attrs.end() && it->second.truthy();
}

bool ParamKey::matches(const ParamView& param, std::string_view param_name) const {
  for (const std::string& glob : name.items())
    if (fnmatch(param_name, glob)) return true;
  for (const std::string& a : attr.items())
    if (param.attr(a)) return true;
  for (const ParamPredicate& p : predicate.items())
    if (p(param)) return true;
  for (const ParamWithNamePredicate& p : with_name_predicate.items())
    if (p(param, param_name)) return true;
  return false;
}

size_t ParamKey::hash() const {
  size_t h = 0;
  auto mix = [&h](size_t v) { h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2); };
  auto strs = [&](const OneOrMany<std::string>& o) {
    mix(o.single());
    mix(o.items().size());
    for (const auto& s : o.items()) mix(std::hash<std::string>{}(s));
  };
  strs(name);
  strs(attr);
  mix(predicate.single());
  mix(predicate.items().size());
  for (const auto& p : predicate.items()) mix(std::hash<std::string>{}(p.name));
  mix(with_name_predicate.single());
  mix(with_name_predicate.items().size());
  for (const auto& p : with_name_predicate.items()) mix(std::hash<std::string>{}(p.name));
  return h;
}

}  // namespace mr
