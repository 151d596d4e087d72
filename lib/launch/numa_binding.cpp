// NUMA binding of the workers (launch/numa_binding.h), torch/numa/binding.py's strategies over sysfs.
#include "launch/numa_binding.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "launch/cpu_affinity.h"
#include "util/text.h"

namespace mr::launch {

namespace {

constexpr int kMaxCpu = 1 << 16;  // a CPU index beyond this is not a CPU list sysfs writes

std::string read_small(const std::string& path, const std::string& what) {
  std::ifstream in(path);
  if (!in) throw NumaError("cannot read " + path + " (" + what + ")");
  std::string s;
  std::getline(in, s, '\0');
  if (s.size() > 65536) throw NumaError(path + " is not a sysfs value (" + what + ")");
  return s;
}

int read_int(const std::string& path, const std::string& what) {
  const std::string s = trim(read_small(path, what));
  try {
    size_t used = 0;
    const long v = std::stol(s, &used);
    if (used != s.size()) throw std::invalid_argument(s);
    return static_cast<int>(v);
  } catch (const std::exception&) {
    throw NumaError(path + " holds '" + s + "', not a number (" + what + ")");
  }
}

std::string sys(const NumaMachine& m, const std::string& rel) {
  return (std::filesystem::path(m.sysfs_root) / rel).string();
}

// _get_numa_node_index_for_device_index: the GPU's PCI device's numa_node, -1 (one node) read as 0.
int numa_node_of_device(const NumaMachine& m, int device_index) {
  if (device_index < 0 || device_index >= static_cast<int>(m.gpu_pci.size()))
    throw NumaError("there is no GPU " + std::to_string(device_index) + " for local rank " +
                    std::to_string(device_index) + " (" + std::to_string(m.gpu_pci.size()) + " GPU(s) visible)");
  const std::string pci = m.gpu_pci[static_cast<size_t>(device_index)];
  return std::max(read_int(sys(m, "sys/bus/pci/devices/" + pci + "/numa_node"), "GPU " + std::to_string(device_index) +
                                                                                    "'s NUMA node"),
                  0);
}

// _get_allowed_logical_cpu_indices_for_numa_node: the node's CPUs this launcher may use.
std::set<int> allowed_cpus_of_node(const NumaMachine& m, int node) {
  const std::set<int> all =
      parse_cpu_list(read_small(sys(m, "sys/devices/system/node/node" + std::to_string(node) + "/cpulist"),
                                "the CPUs of NUMA node " + std::to_string(node)));
  std::set<int> out;
  std::set_intersection(all.begin(), all.end(), m.allowed.begin(), m.allowed.end(), std::inserter(out, out.end()));
  return out;
}

std::string cpu_dir(const NumaMachine& m, int cpu) { return sys(m, "sys/devices/system/cpu/cpu" + std::to_string(cpu)); }

// The GPUs on `node`, in index order.
std::vector<int> devices_on_node(const NumaMachine& m, int node) {
  std::vector<int> out;
  for (int d = 0; d < static_cast<int>(m.gpu_pci.size()); ++d)
    if (numa_node_of_device(m, d) == node) out.push_back(d);
  return out;
}

// The CPUs sharing the largest-level data or unified cache with `cpu` (its cache/index*/ entries).
std::set<int> same_last_level_cache(const NumaMachine& m, int cpu) {
  const std::filesystem::path dir = cpu_dir(m, cpu) + "/cache";
  std::error_code ec;
  int best = -1;
  std::set<int> out;
  // The entries in name order (os.listdir's order is the file system's; the largest level wins either way, the
  // first of equal levels here).
  std::vector<std::filesystem::path> entries;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    entries.push_back(it->path());
  if (ec) throw NumaError("cannot list " + dir.string() + " (CPU " + std::to_string(cpu) + "'s caches)");
  std::sort(entries.begin(), entries.end());
  for (const auto& p : entries) {
    const std::string name = p.filename().string();
    if (name.rfind("index", 0) != 0 || name.size() == 5 ||
        !std::all_of(name.begin() + 5, name.end(), [](char c) { return c >= '0' && c <= '9'; }))
      continue;
    const std::string type = trim(read_small((p / "type").string(), "a cache's type"));
    if (type != "Unified" && type != "Data") continue;
    const int level = read_int((p / "level").string(), "a cache's level");
    if (level <= best) continue;
    best = level;
    out = parse_cpu_list(read_small((p / "shared_cpu_list").string(), "the CPUs sharing a cache"));
  }
  // torch's min() of an empty set fails there too: no domain to group by.
  if (out.empty()) throw NumaError("no data or unified cache is listed for CPU " + std::to_string(cpu) + " in " + dir.string());
  return out;
}

// Groups `cpus` by key(cpu) (the smallest CPU of a core or a cache domain), in key order.
template <class Key>
std::map<int, std::set<int>> group_by(const std::set<int>& cpus, Key key) {
  std::map<int, std::set<int>> out;
  for (int c : cpus) out[key(c)].insert(c);
  return out;
}

}  // namespace

std::optional<NumaMode> numa_mode_from_string(std::string_view s) {
  if (s == "node") return NumaMode::Node;
  if (s == "socket") return NumaMode::Socket;
  if (s == "exclusive") return NumaMode::Exclusive;
  if (s == "core-complex") return NumaMode::CoreComplex;
  return std::nullopt;
}

std::string_view to_string(NumaMode m) {
  switch (m) {
    case NumaMode::Node: return "node";
    case NumaMode::Socket: return "socket";
    case NumaMode::Exclusive: return "exclusive";
    case NumaMode::CoreComplex: return "core-complex";
  }
  return "node";
}

std::set<int> parse_cpu_list(std::string_view text) {
  std::set<int> out;
  const std::string s = trim(std::string(text));
  if (s.empty()) return out;
  auto number = [&](const std::string& w) {
    if (w.empty() || w.size() > 6 || !std::all_of(w.begin(), w.end(), [](char c) { return c >= '0' && c <= '9'; }))
      throw NumaError("'" + s + "' is not a CPU list");
    const int v = std::stoi(w);
    if (v >= kMaxCpu) throw NumaError("'" + s + "' is not a CPU list");
    return v;
  };
  std::stringstream in(s);
  std::string part;
  while (std::getline(in, part, ',')) {
    part = trim(part);
    const size_t dash = part.find('-');
    const int lo = number(part.substr(0, dash));
    const int hi = dash == std::string::npos ? lo : number(part.substr(dash + 1));
    if (hi < lo) throw NumaError("'" + s + "' is not a CPU list");
    for (int c = lo; c <= hi; ++c) out.insert(c);
  }
  return out;
}

std::string cpu_list(const std::set<int>& cpus) {
  std::string out;
  for (auto it = cpus.begin(); it != cpus.end();) {
    const int lo = *it;
    int hi = lo;
    for (++it; it != cpus.end() && *it == hi + 1; ++it) hi = *it;
    if (!out.empty()) out += ',';
    out += lo == hi ? std::to_string(lo) : std::to_string(lo) + "-" + std::to_string(hi);
  }
  return out;
}

std::set<int> numa_cpus_for_device(const NumaMachine& m, int device_index, NumaMode mode) {
  const int node = numa_node_of_device(m, device_index);
  std::set<int> out;
  switch (mode) {
    case NumaMode::Node:
      out = allowed_cpus_of_node(m, node);
      break;
    case NumaMode::Socket: {
      // The socket of the node's first allowed CPU, then every node whose first allowed CPU is on that socket
      // (_get_numa_node_indices_for_socket_index).
      const std::set<int> mine = allowed_cpus_of_node(m, node);
      if (mine.empty()) throw NumaError("NUMA node " + std::to_string(node) + " has no CPU this launcher may use");
      auto socket_of = [&](int cpu) {
        return read_int(cpu_dir(m, cpu) + "/topology/physical_package_id", "CPU " + std::to_string(cpu) + "'s socket");
      };
      const int socket = socket_of(*mine.begin());
      // Every node the system may have (node/possible); one without an allowed CPU is left out (torch fails there).
      for (int other : parse_cpu_list(read_small(sys(m, "sys/devices/system/node/possible"), "the NUMA nodes"))) {
        std::error_code missing;
        if (!std::filesystem::exists(sys(m, "sys/devices/system/node/node" + std::to_string(other) + "/cpulist"),
                                     missing))
          continue;  // possible, not present
        const std::set<int> cpus = allowed_cpus_of_node(m, other);
        if (!cpus.empty() && socket_of(*cpus.begin()) == socket) out.insert(cpus.begin(), cpus.end());
      }
      break;
    }
    case NumaMode::Exclusive: {
      const std::vector<int> devs = devices_on_node(m, node);
      const int rel = static_cast<int>(std::find(devs.begin(), devs.end(), device_index) - devs.begin());
      // Physical cores, each keyed by its smallest hyperthread sibling, in key order.
      const auto cores = group_by(allowed_cpus_of_node(m, node), [&](int cpu) {
        const std::set<int> siblings = parse_cpu_list(read_small(cpu_dir(m, cpu) + "/topology/thread_siblings_list",
                                                                 "CPU " + std::to_string(cpu) + "'s hyperthreads"));
        if (siblings.empty()) throw NumaError("no thread siblings are listed for CPU " + std::to_string(cpu));
        return *siblings.begin();
      });
      const int n = static_cast<int>(devs.size()), per = static_cast<int>(cores.size()) / n,
                extra = static_cast<int>(cores.size()) % n;
      if (per < 1)
        throw NumaError("there are only " + std::to_string(cores.size()) + " physical cores on NUMA node " +
                        std::to_string(node) + ", but " + std::to_string(n) + " GPUs on it");
      const int start = rel * per + std::min(rel, extra), end = start + per + (rel < extra ? 1 : 0);
      int k = 0;
      for (const auto& [key, cpus] : cores) {
        if (k >= start && k < end) out.insert(cpus.begin(), cpus.end());
        ++k;
      }
      break;
    }
    case NumaMode::CoreComplex: {
      const std::vector<int> devs = devices_on_node(m, node);
      const int rel = static_cast<int>(std::find(devs.begin(), devs.end(), device_index) - devs.begin());
      const auto caches = group_by(allowed_cpus_of_node(m, node),
                                   [&](int cpu) { return *same_last_level_cache(m, cpu).begin(); });
      if (caches.empty()) throw NumaError("NUMA node " + std::to_string(node) + " has no CPU this launcher may use");
      // The domains with the most usable CPUs first, then by their smallest CPU.
      std::vector<std::pair<int, std::set<int>>> order(caches.begin(), caches.end());
      std::stable_sort(order.begin(), order.end(),
                       [](const auto& a, const auto& b) { return a.second.size() > b.second.size(); });
      out = order[static_cast<size_t>(rel) % order.size()].second;
      break;
    }
  }
  if (out.empty())
    throw NumaError("no CPU to bind GPU " + std::to_string(device_index) + "'s worker to on NUMA node " +
                    std::to_string(node) + " (none of its CPUs is in this launcher's affinity)");
  return out;
}

NumaMachine this_machine() {
  NumaMachine m;
  if (const char* root = std::getenv("MR_NUMA_SYSFS_ROOT"); root && *root) m.sysfs_root = root;
  m.allowed = current_affinity();  // every CPU, past glibc's 1024 too
  if (const char* list = std::getenv("MR_NUMA_GPU_PCI_ADDRESSES"); list && *list) {
    std::stringstream in(list);
    std::string a;
    while (std::getline(in, a, ',')) m.gpu_pci.push_back(trim(a));
    return m;
  }
  // The CUDA driver API, opened here so that the launcher needs no CUDA to build or run without this option.
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) throw NumaError("the CUDA driver (libcuda.so.1) cannot be loaded, so the GPUs' PCI addresses are unknown");
  using Init = int (*)(unsigned);
  using Count = int (*)(int*);
  using Get = int (*)(int*, int);
  using Attr = int (*)(int*, int, int);
  auto init = reinterpret_cast<Init>(dlsym(lib, "cuInit"));
  auto count = reinterpret_cast<Count>(dlsym(lib, "cuDeviceGetCount"));
  auto get = reinterpret_cast<Get>(dlsym(lib, "cuDeviceGet"));
  auto attr = reinterpret_cast<Attr>(dlsym(lib, "cuDeviceGetAttribute"));
  int n = 0;
  if (!init || !count || !get || !attr) throw NumaError("libcuda.so.1 lacks the device queries");
  if (const int e = init(0); e != 0) throw NumaError("cuInit failed (CUDA error " + std::to_string(e) + "): no usable GPU");
  if (count(&n) != 0 || n <= 0) throw NumaError("the CUDA driver sees no GPU");
  // CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID (50), _PCI_BUS_ID (33), _PCI_DEVICE_ID (34): torch's pci_domain_id,
  // pci_bus_id and pci_device_id, formatted as it does ("%04x:%02x:%02x.0").
  for (int i = 0; i < n; ++i) {
    int dev = 0, domain = 0, bus = 0, device = 0;
    if (get(&dev, i) != 0 || attr(&domain, 50, dev) != 0 || attr(&bus, 33, dev) != 0 || attr(&device, 34, dev) != 0)
      throw NumaError("the CUDA driver cannot give GPU " + std::to_string(i) + "'s PCI address");
    char buf[32];
    std::snprintf(buf, sizeof buf, "%04x:%02x:%02x.0", domain, bus, device);
    m.gpu_pci.push_back(buf);
  }
  return m;  // (the library stays loaded: unloading the driver library after cuInit is not supported)
}

}  // namespace mr::launch
