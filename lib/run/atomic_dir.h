// Durable, atomic file-system steps of a checkpoint save (docs/checkpoints.md): fsync of files and directories,
// a file replaced atomically (write a temporary, fsync, rename, fsync the directory), a directory put in place
// of another in one step, and the writability probe made before training starts. Torch-free. Every failure is a
// CheckpointError (checkpoint.save-failed) naming the path and the system's reason.
#pragma once

#include <string>

namespace mr::run {

// fsync of an existing file or directory.
void fsync_path(const std::string& path);
// Writes `text` to `path` atomically: `path`.tmp, fsync, rename over `path`, fsync of the directory. On a failure
// before the rename `path` is unchanged and `path`.tmp is removed.
void write_file_atomic(const std::string& path, const std::string& text);
// Puts the directory `from` at `to` in one rename (exchanging it with an existing `to`, which is then removed),
// then fsyncs the parent directory. `in_place` says whether the new directory is at `to` (set before any step
// after the rename that can fail). A failure before that changes nothing. Once it is in place, an old copy that
// cannot be removed is no failure: the returned text names the leftover ("" when none).
std::string replace_dir(const std::string& from, const std::string& to, bool& in_place);
// Removes `path` and everything under it; nothing when it does not exist.
void remove_tree(const std::string& path);
// Clears `path` (a stale iter_N.tmp) before a save makes it again: removes it, or, when it cannot be removed,
// renames it to `path`.stale-K (the first free K) and returns a warning naming it ("" when removed). Throws when
// neither works, naming both reasons.
std::string clear_stale_dir(const std::string& path);
// Creates `path` (and its parents) if needed and writes, fsyncs and removes a probe file in it; returns "" when
// that works, else the reason.
std::string probe_writable(const std::string& path, const std::string& probe_name);
// Holds an exclusive lock (flock) on `dir`/`name` (made if needed) until destroyed: one writer of a checkpoint
// directory at a time. `busy` says who holds it when another process does; `unlockable` says why no lock could be
// taken at all (a file system without flock, a lock file of another user): then nothing is held.
class DirLock {
 public:
  DirLock(const std::string& dir, const std::string& name, std::string& busy, std::string& unlockable);
  ~DirLock();
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;

 private:
  int fd_ = -1;
};
// The parent directory of `path` ("." for a bare name).
std::string parent_dir(const std::string& path);

}  // namespace mr::run
