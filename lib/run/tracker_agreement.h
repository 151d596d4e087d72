// The trackers (latest_checkpointed_iteration.txt) a worker's load reads, agreed on by every rank
// (docs/checkpoints.md): Megatron's read_metadata reads the tracker on every rank and all-reduces the iteration with
// MAX, printing on a rank that read another "WARNING: on rank R found iteration I in the metadata while max
// iteration across the ranks is M, replacing it with max iteration." Each rank's read apart would let the ranks
// resume at different iterations (a tracker written between two ranks' reads, a directory each node sees its own
// copy of). Internal to lib/run.
#pragma once

#include <exception>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "distributed/runtime.h"
#include "run/checkpoint_args.h"

namespace mr::run {

class AgreedTrackers : public TrackerSource {
 public:
  // A tracker to read: its directory and how a message names the directory ("--load DIR").
  struct Read {
    std::string dir, words;
  };

  // Every rank of `world` reads each of `reads` (in the same order on every rank; a directory named twice is read
  // once) and takes part in one all-reduce (MAX) of them, whatever it read: release counts as iteration 0 (Megatron's
  // read_metadata) and below any iteration, no tracker below release. The agreed value of a tracker is the highest
  // any rank read; a rank that read another says so on `log` (Megatron's warning), and loads the agreed one. A rank
  // whose read failed (a tracker that is no iteration or 'release') takes part as one without a tracker, and its
  // error is thrown where the load asks for that tracker (read), to reach every rank through the load's verdict.
  // Nothing here throws before the all-reduce.
  // MR_TEST_TRACKER=R:DIR=OTHER (tests): rank R reads OTHER's tracker in place of DIR's, as a rank on a node whose
  // DIR holds another tracker would.
  AgreedTrackers(distributed::Group& world, int rank, const std::vector<Read>& reads, std::ostream& log,
                 const std::string& prefix);

  // Whether any rank found a tracker file in `dir` (a directory not among the reads: this rank's own look).
  bool exists(const std::string& dir) const override;
  // The agreed value; this rank's own read error, if it had one. `note`: " (the highest iteration the ranks read
  // there; this rank read ...)" where this rank read another, else "".
  std::optional<TrackerValue> read(const std::string& dir, std::string* note = nullptr) const override;

 private:
  struct Entry {
    std::string dir, words;
    std::optional<TrackerValue> own, agreed;
    bool exists = false;
    std::exception_ptr error;  // this rank's read failed
  };
  const Entry* find(const std::string& dir) const;
  std::vector<Entry> entries_;
};

}  // namespace mr::run
