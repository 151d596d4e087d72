#include "config/target_env.h"

#include <cctype>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <sstream>
#include <string_view>
#include <vector>

#include "config/converters.h"
#include "config/diagnostic.h"
#include "config/value.h"
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

long long TargetEnv::int_var(const std::string& name, long long fallback) const {
  auto v = var(name);
  if (!v) return fallback;
  try {
    return parse_py_int(*v);
  } catch (const ConvError&) {
    auto w = var_where.find(name);
    if (w != var_where.end())
      throw UsageError(w->second + ": environment variable " + name + "=" + Value(*v).py_repr() +
                           " (set here) is not an integer",
                       {}, w->second);
    throw UsageError("environment variable " + name + "=" + Value(*v).py_repr() + " is not an integer", {}, name);
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
  if (!ok || digits.size() < 2 || digits.size() > 4)
    throw UsageError("bad GPU architecture " + Value(abbreviate(arch, 40)).py_repr() +
                     " (expected e.g. sm_90 or sm_100: a major version of 1 to 3 digits and a one-digit minor)");
  int major = std::stoi(digits.substr(0, digits.size() - 1));
  int minor = digits.back() - '0';
  return {major, minor};
}
std::vector<long> version_parts(const std::string& v) {
  std::vector<long> out;
  std::stringstream ss(v);
  std::string part;
  while (std::getline(ss, part, '.')) {
    size_t n = 0;
    while (n < part.size() && std::isdigit(static_cast<unsigned char>(part[n]))) ++n;
    if (n == 0) break;
    auto x = small_number(std::string_view(part).substr(0, n));
    if (!x) throw UsageError("version " + Value(v).py_repr() + ": the part " + part.substr(0, n) + " is too large");
    out.push_back(*x);
    if (n != part.size()) break;
  }
  return out;
}
}  // namespace

int TargetEnv::arch_major() const { return no_gpu() ? 0 : parse_arch(gpu_arch).first; }
int TargetEnv::arch_minor() const { return no_gpu() ? 0 : parse_arch(gpu_arch).second; }

std::optional<std::string> machine_gpu_arch() {
  if (const char* v = std::getenv("CUDA_VISIBLE_DEVICES")) {
    const std::string s = v;
    if (s.empty() || s == "-1" || s == "NoDevFiles") return "none";
  }
  std::error_code ec;
  const bool driver = std::filesystem::exists("/proc/driver/nvidia/gpus", ec) || std::filesystem::exists("/dev/nvidiactl", ec);
  if (!driver) return "none";
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

int compare_versions(const std::string& a, const std::string& b) {
  auto pa = version_parts(a), pb = version_parts(b);
  size_t n = std::max(pa.size(), pb.size());
  for (size_t i = 0; i < n; ++i) {
    long x = i < pa.size() ? pa[i] : 0, y = i < pb.size() ? pb[i] : 0;
    if (x != y) return x < y ? -1 : 1;
  }
  return 0;
}

}  // namespace mr
