// The ranks' agreed tracker reads (run/tracker_agreement.h).
#include "run/tracker_agreement.h"

#include <cstdint>
#include <cstdlib>
#include <filesystem>

#include "run/checkpoint_format.h"
#include "run/host_collectives.h"

namespace mr::run {

namespace {

// A tracker as one number, ordered as the all-reduce takes the highest: none -1, 'release' 0, iteration N N + 1
// (a tracker holds at most 18 digits: no overflow).
int64_t key_of(const std::optional<TrackerValue>& t) {
  if (!t) return -1;
  return t->release ? 0 : t->iteration + 1;
}

std::optional<TrackerValue> value_of_key(int64_t k) {
  if (k < 0) return std::nullopt;
  if (k == 0) return TrackerValue{0, true};
  return TrackerValue{k - 1, false};
}

std::string words_of(const std::optional<TrackerValue>& t) {
  if (!t) return "no tracker";
  return t->release ? "'release' (iteration 0)" : "iteration " + std::to_string(t->iteration);
}

// MR_TEST_TRACKER=R:DIR=OTHER: the directory this rank reads `dir`'s tracker in.
std::string read_in(const std::string& dir, int rank) {
  const char* t = std::getenv("MR_TEST_TRACKER");
  if (!t) return dir;
  const std::string v(t);
  const size_t colon = v.find(':'), eq = v.find('=', colon == std::string::npos ? 0 : colon);
  if (colon == std::string::npos || eq == std::string::npos || v.substr(0, colon) != std::to_string(rank)) return dir;
  return v.substr(colon + 1, eq - colon - 1) == dir ? v.substr(eq + 1) : dir;
}

}  // namespace

AgreedTrackers::AgreedTrackers(distributed::Group& world, int rank, const std::vector<Read>& reads,
                               std::ostream& log, const std::string& prefix) {
  for (const Read& r : reads) {
    if (find(r.dir)) continue;
    Entry e;
    e.dir = r.dir;
    e.words = r.words;
    const std::string in = read_in(r.dir, rank);
    std::error_code ec;
    e.exists = std::filesystem::is_regular_file(tracker_path(in), ec);
    try {
      e.own = read_tracker(tracker_path(in));
    } catch (...) {
      e.error = std::current_exception();
    }
    entries_.push_back(std::move(e));
  }
  if (entries_.empty()) return;
  // One all-reduce for them all: each tracker's key and whether a tracker file is there.
  std::vector<int64_t> v;
  for (const Entry& e : entries_) {
    v.push_back(e.error ? -1 : key_of(e.own));
    v.push_back(e.exists ? 1 : 0);
  }
  host_all_reduce(world, distributed::Buffer::cpu(v.data(), v.size()), distributed::ReduceOp::Max);
  for (size_t i = 0; i < entries_.size(); ++i) {
    Entry& e = entries_[i];
    e.agreed = value_of_key(v[2 * i]);
    e.exists = v[2 * i + 1] != 0;
    if (e.error || key_of(e.own) == v[2 * i]) continue;
    // Megatron's read_metadata: "WARNING: on rank {} found iteration {} in the metadata while max iteration across
    // the ranks is {}, replacing it with max iteration." (on every rank that read another).
    log << prefix << "WARNING: on rank " << rank << " found "
        << (e.own ? words_of(e.own) + " in " + e.words + "'s tracker" : "no tracker in " + e.words) << " while max iteration across the ranks is "
        << (e.agreed->release ? std::string("'release' (0)") : std::to_string(e.agreed->iteration))
        << ", replacing it with max iteration (Megatron's read_metadata)" << std::endl;
  }
}

const AgreedTrackers::Entry* AgreedTrackers::find(const std::string& dir) const {
  for (const Entry& e : entries_)
    if (e.dir == dir) return &e;
  return nullptr;
}

bool AgreedTrackers::exists(const std::string& dir) const {
  const Entry* e = find(dir);
  return e ? e->exists : TrackerSource::exists(dir);
}

std::optional<TrackerValue> AgreedTrackers::read(const std::string& dir, std::string* note) const {
  const Entry* e = find(dir);
  if (!e) return TrackerSource::read(dir, note);
  if (e->error) std::rethrow_exception(e->error);
  if (note)
    *note = key_of(e->own) == key_of(e->agreed)
                ? std::string()
                : " (the highest iteration the ranks read there, as Megatron's read_metadata takes it; this rank "
                  "read " + words_of(e->own) + ")";
  return e->agreed;
}

}  // namespace mr::run
