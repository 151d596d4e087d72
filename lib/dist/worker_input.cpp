#include "dist/worker_input.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>

#include "config/print.h"
#include "config/schema.h"

namespace mr::dist {

std::string WorkerInput::encode() const {
  std::string out = "{\"version\": 1, \"backend_explicit\": ";
  out += backend_explicit ? "true" : "false";
  out += ", \"log_level\": " + json_quote(log_level) + ", \"train\": " + (train ? "true" : "false") + ", \"argv\": [";
  for (size_t i = 0; i < argv.size(); ++i) out += (i ? ", " : "") + json_quote(argv[i]);
  out += "], \"namespace\": " + namespace_json(ns) + "}";
  return out;
}

WorkerInput WorkerInput::decode(const std::string& json) {
  Value v;
  try {
    v = Value::parse_json(json);
  } catch (const std::exception& e) {
    throw std::runtime_error(std::string("the worker input is not valid JSON: ") + e.what());
  }
  if (!v.is_object()) throw std::runtime_error("the worker input is not a JSON object");
  WorkerInput in;
  bool have_ns = false;
  for (const auto& [key, val] : v.as_object()) {
    if (key == "version") {
      if (!val.is_int() || val.as_int() != 1) throw std::runtime_error("unsupported worker input version " + val.json());
    } else if (key == "backend_explicit") {
      in.backend_explicit = val.truthy();
    } else if (key == "train") {
      in.train = val.truthy();
    } else if (key == "log_level" && val.is_str()) {
      in.log_level = val.as_str();
    } else if (key == "argv" && val.is_list()) {
      for (const Value& a : val.as_list()) in.argv.push_back(a.is_str() ? a.as_str() : a.json());
    } else if (key == "namespace" && val.is_object()) {
      have_ns = true;
      for (const auto& [dest, x] : val.as_object()) in.ns.set(dest, x, Provenance{Provenance::Kind::Default, "megatron-run"});
    }
  }
  if (!have_ns) throw std::runtime_error("the worker input has no resolved namespace");
  return in;
}

int memfd_with(const std::string& text) {
  int fd = memfd_create("megatron-run-args", 0);  // no MFD_CLOEXEC: the worker inherits it across exec
  if (fd < 0) throw std::runtime_error(std::string("memfd_create: ") + std::strerror(errno));
  size_t off = 0;
  while (off < text.size()) {
    ssize_t n = write(fd, text.data() + off, text.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      close(fd);
      throw std::runtime_error(std::string("writing the worker input: ") + std::strerror(errno));
    }
    off += static_cast<size_t>(n);
  }
  lseek(fd, 0, SEEK_SET);
  return fd;
}

std::string read_fd(int fd) {
  std::string out;
  char buf[65536];
  lseek(fd, 0, SEEK_SET);
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error(std::string("reading fd ") + std::to_string(fd) + ": " + std::strerror(errno));
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot read " + path);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string config_fingerprint(const Namespace& ns) {
  std::string out = "{";
  bool first = true;
  for (const auto& e : ns.entries()) {
    if (e.dest == "rank" || e.dest == "local_rank") continue;
    out += (first ? "" : ", ") + json_quote(e.dest) + ": " + e.value.json();
    first = false;
  }
  return out + "}";
}

uint64_t fingerprint_hash(const std::string& fp) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : fp) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

std::vector<std::string> fingerprint_diff(const std::string& a, const std::string& b) {
  auto to_map = [](const std::string& text) {
    std::map<std::string, std::string> m;
    Value v = Value::parse_json(text);
    if (v.is_object())
      for (const auto& [k, x] : v.as_object()) m[k] = x.json();
    return m;
  };
  std::map<std::string, std::string> ma = to_map(a), mb = to_map(b);
  std::vector<std::string> out;
  for (const auto& [k, v] : ma) {
    auto it = mb.find(k);
    if (it == mb.end() || it->second != v) out.push_back(k);
  }
  for (const auto& [k, v] : mb)
    if (!ma.count(k)) out.push_back(k);
  return out;
}

std::string flag_for_dest(const std::string& dest) {
  for (const Arg* a : Schema::megatron().find_dest(dest)) {
    std::string flags = a->spec->flags;
    return flags.substr(0, flags.find('|'));
  }
  return dest;
}

}  // namespace mr::dist
