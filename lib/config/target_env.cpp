#include "config/target_env.h"

#include <cctype>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <tuple>
#include <optional>
#include <string_view>
#include <vector>

#include "config/converters.h"
#include "config/diagnostic.h"
#include "config/value.h"
#include "util/gpu_devices.h"
#include "util/text.h"

extern char** environ;

namespace mr {

TargetEnv TargetEnv::from_process() {
  TargetEnv t;
  for (char** e = environ; e && *e; ++e) {
    std::string kv = *e;
    auto eq = kv.find('=');
    if (eq != std::string::npos) t.vars[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return t;
}

bool TargetEnv::te_stores_param_remainders() const { return compare_versions(te_version, "2.1.0") >= 0; }

std::optional<std::string> TargetEnv::var(const std::string& name) const {
  auto it = vars.find(name);
  if (it == vars.end()) return std::nullopt;
  return it->second;
}

std::string TargetEnv::source_of(const std::string& name) const {
  if (auto s = var_source.find(name); s != var_source.end()) return s->second;
  if (!vars.count(name)) return "default: " + name + " not set";
  auto w = var_where.find(name);
  return "environment " + name + (w == var_where.end() ? std::string() : " (" + w->second + ")");
}

long long TargetEnv::int_var(const std::string& name, long long fallback) const {
  auto v = var(name);
  if (!v) return fallback;
  try {
    return parse_py_int(*v);
  } catch (const ConvError&) {
    auto w = var_where.find(name);
    if (w != var_where.end())
      throw UsageError(w->second + ": environment variable " + name + "=" + Value(abbreviate(*v)).py_repr() +
                           " (set here) is not an integer",
                       {}, w->second, "input.env-not-integer");
    throw UsageError("environment variable " + name + "=" + Value(abbreviate(*v)).py_repr() + " is not an integer", {},
                     name, "input.env-not-integer");
  }
}

namespace {
// A run of decimal digits as a number, or nullopt when it does not fit.
std::optional<long> small_number(std::string_view digits) {
  long v = 0;
  auto r = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (r.ec != std::errc() || r.ptr != digits.data() + digits.size()) return std::nullopt;
  return v;
}
// The architecture of a well-known data-centre GPU named instead of its sm_XY ("h100"; case, an "nvidia" prefix and
// separators aside), for the refusal to say; "" for any other word. A name is never taken as its architecture: the
// target is written as the compiler and `nvidia-smi --query-gpu=compute_cap` name it.
std::string arch_of_gpu_name(std::string_view word) {
  std::string w;
  for (char c : word)
    if (std::isalnum(static_cast<unsigned char>(c))) w += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (w.rfind("nvidia", 0) == 0) w.erase(0, 6);
  static const std::pair<const char*, const char*> kGpus[] = {
      {"v100", "sm_70"},  {"t4", "sm_75"},    {"a100", "sm_80"},  {"a800", "sm_80"},  {"a30", "sm_80"},
      {"a10", "sm_86"},   {"a10g", "sm_86"},  {"a40", "sm_86"},   {"l4", "sm_89"},    {"l40", "sm_89"},
      {"l40s", "sm_89"},  {"h100", "sm_90"},  {"h800", "sm_90"},  {"h200", "sm_90"},  {"h20", "sm_90"},
      {"gh200", "sm_90"}, {"b100", "sm_100"}, {"b200", "sm_100"}, {"gb200", "sm_100"}, {"b300", "sm_103"},
      {"gb300", "sm_103"}};
  for (const auto& [name, arch] : kGpus)
    if (w == name) return arch;
  return {};
}

std::pair<int, int> parse_arch(const std::string& arch) {
  // sm_XY, sm_XYZ (a 1-3 digit major and a one-digit minor), optionally without the "sm_"/"sm" prefix, with a dot
  // between major and minor (9.0) or a one-letter feature suffix (sm_90a, sm_100f). Anything else (other
  // characters, more digits than an architecture has) is a usage error.
  std::string_view s = arch;
  if (s.rfind("sm_", 0) == 0) s.remove_prefix(3);
  else if (s.rfind("sm", 0) == 0) s.remove_prefix(2);
  if (!s.empty() && std::islower(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  std::string digits;
  bool ok = !s.empty();
  size_t dots = 0;
  for (size_t i = 0; i < s.size() && ok; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (std::isdigit(c)) digits += static_cast<char>(c);
    else if (c == '.' && i + 2 == s.size() && ++dots == 1) continue;  // "9.0": the dot before the minor digit
    else ok = false;
  }
  if (!ok || digits.size() < 2 || digits.size() > 4) {
    const std::string named = arch_of_gpu_name(arch);
    throw UsageError("bad GPU architecture " + Value(abbreviate(arch, 40)).py_repr() +
                     (named.empty() ? "" : ": that is a GPU's name; its architecture is " + named) +
                     " (expected e.g. sm_90 or sm_100: a major version of 1 to 3 digits and a one-digit minor)");
  }
  int major = std::stoi(digits.substr(0, digits.size() - 1));
  int minor = digits.back() - '0';
  return {major, minor};
}
// A version's order as Python's packaging gives it (PEP 440): the epoch, the release (trailing zeros do not count),
// then the pre-release, post-release and dev parts. A dev release comes before its pre-releases, which come
// before the release, which comes before its post-releases. The local label (+cu12) does not count here.
struct VersionKey {
  long epoch = 0;
  std::vector<long> release;
  long pre_phase = 0, pre = 0;  // phase: -2 a dev release without pre/post, -1 a/alpha, 0 b/beta, 1 rc/c/pre, 2 none
  long post = -1;               // -1: none
  long dev = -1;                // -1: none (after every dev release)
};

// packaging's VERSION_PATTERN (case-insensitive, blanks around allowed), matched by hand: compiling it as a
// std::regex cost a third of a whole dry run's instructions (torch_min("1.11.0a0") runs in every one). The pattern,
// part by part:
//   v? (N!)? N(.N)* ([-_.]?(a|b|c|rc|alpha|beta|pre|preview)[-_.]?N?)? (-N|[-_.]?(post|rev|r)[-_.]?N?)?
//   ([-_.]?dev[-_.]?N?)? (+[a-z0-9]+([-_.][a-z0-9]+)*)?
// Each optional part's choices are tried in the order the regex tries them, backtracking on a failure of the rest,
// so the same texts match with the same parts (tests/config/overflow_test.cpp compares the two on many texts).
struct VersionParts {
  std::string_view epoch, release, pre_kind, pre_n, post_n, dev_n;
  bool has_pre = false, has_post = false, has_dev = false;
};

class Pep440Matcher {
 public:
  explicit Pep440Matcher(std::string_view s) : s_(s) {}
  std::optional<VersionParts> match() {
    size_t i = 0, end = s_.size();
    auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'; };
    while (i < end && blank(s_[i])) ++i;
    while (end > i && blank(s_[end - 1])) --end;
    s_ = s_.substr(i, end - i);
    size_t at = 0;
    if (at < s_.size() && lower(s_[at]) == 'v') ++at;
    VersionParts v;
    const size_t e = digits(at);
    if (e > at && e < s_.size() && s_[e] == '!') {
      v.epoch = s_.substr(at, e - at);
      at = e + 1;
    }
    size_t r = digits(at);
    if (r == at) return std::nullopt;
    while (r + 1 < s_.size() && s_[r] == '.' && digit(s_[r + 1])) r = digits(r + 1);
    v.release = s_.substr(at, r - at);
    if (!pre(r, v)) return std::nullopt;
    return v;
  }

 private:
  static char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }
  static bool digit(char c) { return c >= '0' && c <= '9'; }
  static bool sep(char c) { return c == '-' || c == '_' || c == '.'; }
  size_t digits(size_t i) const {
    while (i < s_.size() && digit(s_[i])) ++i;
    return i;
  }
  bool word_at(size_t i, std::string_view w) const {
    if (i + w.size() > s_.size()) return false;
    for (size_t k = 0; k < w.size(); ++k)
      if (lower(s_[i + k]) != w[k]) return false;
    return true;
  }
  // [-_.]? KEYWORD [-_.]? N?, its choices in the regex's order; `then` matches the rest from the position after it.
  template <class Then>
  bool keyword_part(size_t i, std::initializer_list<std::string_view> words, const Then& then) const {
    for (size_t a = (i < s_.size() && sep(s_[i])) ? i + 1 : i;; a = i) {  // the separator taken, then not
      for (std::string_view w : words) {
        if (!word_at(a, w)) continue;
        const size_t k = a + w.size();
        for (size_t b = (k < s_.size() && sep(s_[k])) ? k + 1 : k;; b = k) {
          const size_t n = digits(b);
          if (then(n, w, s_.substr(b, n - b))) return true;
          if (b == k) break;
        }
      }
      if (a == i) return false;
    }
  }
  bool pre(size_t i, VersionParts& v) const {
    const bool taken = keyword_part(i, {"a", "b", "c", "rc", "alpha", "beta", "pre", "preview"},
                                    [&](size_t n, std::string_view w, std::string_view num) {
                                      VersionParts t = v;
                                      t.has_pre = true, t.pre_kind = w, t.pre_n = num;
                                      if (!post(n, t)) return false;
                                      v = t;
                                      return true;
                                    });
    return taken || post(i, v);
  }
  bool post(size_t i, VersionParts& v) const {
    if (i + 1 < s_.size() && s_[i] == '-' && digit(s_[i + 1])) {  // -N
      const size_t n = digits(i + 1);
      VersionParts t = v;
      t.has_post = true, t.post_n = s_.substr(i + 1, n - i - 1);
      if (dev(n, t)) return v = t, true;
    }
    const bool taken = keyword_part(i, {"post", "rev", "r"}, [&](size_t n, std::string_view, std::string_view num) {
      VersionParts t = v;
      t.has_post = true, t.post_n = num;
      if (!dev(n, t)) return false;
      v = t;
      return true;
    });
    return taken || dev(i, v);
  }
  bool dev(size_t i, VersionParts& v) const {
    const bool taken = keyword_part(i, {"dev"}, [&](size_t n, std::string_view, std::string_view num) {
      if (!local(n)) return false;
      v.has_dev = true, v.dev_n = num;
      return true;
    });
    return taken || local(i);
  }
  // (+[a-z0-9]+([-_.][a-z0-9]+)*)? and the end.
  bool local(size_t i) const {
    if (i == s_.size()) return true;
    if (s_[i] != '+') return false;
    auto alnum = [](char c) { return digit(c) || (lower(c) >= 'a' && lower(c) <= 'z'); };
    size_t k = i + 1;
    for (;;) {
      const size_t from = k;
      while (k < s_.size() && alnum(s_[k])) ++k;
      if (k == from) return false;
      if (k == s_.size()) return true;
      if (!sep(s_[k])) return false;
      ++k;
    }
  }
  std::string_view s_;
};

VersionKey version_key(const std::string& v) {
  const std::optional<VersionParts> m = v.size() > 200 ? std::nullopt : Pep440Matcher(v).match();
  if (!m)
    throw UsageError("version " + Value(abbreviate(v, 40)).py_repr() +
                     " is not a version as Python's packaging reads it (e.g. 2.9.0, v2.9.0, 2.9.0rc1)");
  auto number = [&](std::string_view digits) {
    auto x = small_number(digits);
    if (!x) throw UsageError("version " + Value(abbreviate(v, 40)).py_repr() + ": the part " + std::string(digits) + " is too large");
    return *x;
  };
  VersionKey k;
  if (!m->epoch.empty()) k.epoch = number(m->epoch);
  for (std::string_view rest = m->release;;) {
    const size_t dot = rest.find('.');
    k.release.push_back(number(rest.substr(0, dot)));
    if (dot == std::string_view::npos) break;
    rest.remove_prefix(dot + 1);
  }
  while (!k.release.empty() && k.release.back() == 0) k.release.pop_back();
  if (m->has_pre) {
    const char kind = m->pre_kind[0];  // lower case: the matcher's own words
    k.pre_phase = kind == 'a' ? -1 : kind == 'b' ? 0 : 1;
    k.pre = m->pre_n.empty() ? 0 : number(m->pre_n);
  } else {
    k.pre_phase = (!m->has_post && m->has_dev) ? -2 : 2;
  }
  if (m->has_post) k.post = m->post_n.empty() ? 0 : number(m->post_n);
  if (m->has_dev) k.dev = m->dev_n.empty() ? 0 : number(m->dev_n);
  return k;
}
}  // namespace

int TargetEnv::arch_major() const { return no_gpu() ? 0 : parse_arch(gpu_arch).first; }
int TargetEnv::arch_minor() const { return no_gpu() ? 0 : parse_arch(gpu_arch).second; }

std::optional<std::string> machine_gpu_arch() {
  const util::GpuDevices gpus = util::machine_gpu_devices();
  if (gpus.hidden() || !gpus.nvidia_driver) return "none";
  // nvidia-smi's compute capability of the first visible GPU ("9.0"); anything else: unknown.
  FILE* p = popen("nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null", "r");
  if (!p) return std::nullopt;
  char line[64] = {0};
  const bool got = std::fgets(line, sizeof line, p) != nullptr;
  const int rc = pclose(p);
  if (!got || rc != 0) return std::nullopt;
  int major = 0, minor = 0;
  if (std::sscanf(line, "%d.%d", &major, &minor) != 2 || major <= 0 || major > 99 || minor < 0 || minor > 9)
    return std::nullopt;
  return "sm_" + std::to_string(major) + std::to_string(minor);
}

namespace {
// "", "none", "None": the package is not installed (Megatron's version check is then False).
bool not_installed(const std::string& v) { return v.empty() || v == "none" || v == "None"; }
}  // namespace

void check_version(const std::string& v) {
  if (!not_installed(v)) (void)version_key(v);
}

int compare_versions(const std::string& a, const std::string& b) {
  if (not_installed(a) || not_installed(b)) return not_installed(a) == not_installed(b) ? 0 : not_installed(a) ? -1 : 1;
  const VersionKey x = version_key(a), y = version_key(b);
  auto dev = [](long d) { return d < 0 ? std::numeric_limits<long>::max() : d; };  // no dev part: after all
  const auto kx = std::tie(x.epoch, x.release, x.pre_phase, x.pre, x.post);
  const auto ky = std::tie(y.epoch, y.release, y.pre_phase, y.pre, y.post);
  if (kx != ky) return kx < ky ? -1 : 1;
  if (dev(x.dev) != dev(y.dev)) return dev(x.dev) < dev(y.dev) ? -1 : 1;
  return 0;
}

}  // namespace mr
