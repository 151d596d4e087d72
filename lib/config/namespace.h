// The resolved argument namespace: dest -> value, each value with its provenance (abseil-style).
#pragma once

#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "config/value.h"

namespace mr {

// Where a value came from.
struct Provenance {
  enum class Kind { Default, Config, Cli, Env, Derived };
  Kind kind = Kind::Default;
  std::string where;  // "file.yaml:12", "argv[3]", "WORLD_SIZE", or the rule/section that derived it
  // Derived from a deprecated flag the user wrote, which validation translated and erased ("--recompute-activations").
  std::string alias;
  // Where the user gave the value validation then rewrote (Config or Cli; Default when the user gave none): a
  // derived value keeps it, so the run still knows the flag was the user's (run/run_scope.h). describe() shows the
  // derivation only.
  Kind given = Kind::Default;
  // When set, describe() says this instead (an Env value no environment gave: "command line --world-size",
  // "--nnodes 1 x --nproc-per-node 2", "default: WORLD_SIZE not set").
  std::string source;

  // The user set this dest: in a config file or on the command line, whatever validation did to the value since.
  bool by_user() const {
    return kind == Kind::Config || kind == Kind::Cli || given == Kind::Config || given == Kind::Cli;
  }
  std::string describe() const;
};

class Namespace {
 public:
  bool has(std::string_view dest) const { return slots_.find(dest) != slots_.end(); }
  // The value of a dest; throws std::out_of_range naming it when absent.
  const Value& get(std::string_view dest) const;
  const Value& operator[](std::string_view dest) const { return get(dest); }
  const Provenance& provenance(std::string_view dest) const;

  // A Derived `p` over a value the user gave keeps that origin in p.given.
  void set(std::string_view dest, Value v, Provenance p);
  // Appends a dest greater than every dest present (cheap bulk construction from sorted input).
  void append_sorted(std::string_view dest, Value v, Provenance p);
  // Derived values (set by validation) keep a note of what derived them.
  void derive(std::string_view dest, Value v, std::string_view why = {}) {
    set(dest, std::move(v), {Provenance::Kind::Derived, std::string(why)});
  }
  void erase(std::string_view dest);

  // Entries sorted by dest (byte order).
  struct Entry {
    const std::string& dest;
    const Value& value;
    const Provenance& prov;
  };
  std::vector<Entry> entries() const;
  size_t size() const { return slots_.size(); }

 private:
  struct Slot {
    Value value;
    Provenance prov;
  };
  std::map<std::string, Slot, std::less<>> slots_;
};

}  // namespace mr
