#include "config/namespace.h"

namespace mr {

std::string Provenance::describe() const {
  if (!source.empty()) return source;
  switch (kind) {
    case Kind::Default: return "default";
    case Kind::Config: return "config " + where;
    case Kind::Cli: return "command line " + where;
    case Kind::Env: return "environment " + where;
    case Kind::Derived: return where.empty() ? std::string("derived") : "derived by " + where;
  }
  return "?";
}

const Value& Namespace::get(std::string_view dest) const {
  auto it = slots_.find(dest);
  if (it == slots_.end()) throw std::out_of_range("no argument named '" + std::string(dest) + "'");
  return it->second.value;
}

const Provenance& Namespace::provenance(std::string_view dest) const {
  auto it = slots_.find(dest);
  if (it == slots_.end()) throw std::out_of_range("no argument named '" + std::string(dest) + "'");
  return it->second.prov;
}

void Namespace::set(std::string_view dest, Value v, Provenance p) {
  auto it = slots_.find(dest);
  if (it == slots_.end()) {
    slots_.emplace(std::string(dest), Slot{std::move(v), std::move(p)});
  } else {
    const Provenance& was = it->second.prov;
    if (p.kind == Provenance::Kind::Derived && p.given == Provenance::Kind::Default && was.by_user())
      p.given = was.kind == Provenance::Kind::Derived ? was.given : was.kind;
    it->second.value = std::move(v);
    it->second.prov = std::move(p);
  }
}

void Namespace::append_sorted(std::string_view dest, Value v, Provenance p) {
  slots_.emplace_hint(slots_.end(), std::string(dest), Slot{std::move(v), std::move(p)});
}

void Namespace::erase(std::string_view dest) {
  auto it = slots_.find(dest);
  if (it != slots_.end()) slots_.erase(it);
}

std::vector<Namespace::Entry> Namespace::entries() const {
  std::vector<Entry> out;
  out.reserve(slots_.size());
  for (const auto& [k, s] : slots_) out.push_back(Entry{k, s.value, s.prov});
  return out;
}

}  // namespace mr
