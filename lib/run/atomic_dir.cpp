// Durable, atomic file-system steps (run/atomic_dir.h).
#include "run/atomic_dir.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "run/checkpoint_format.h"

namespace mr::run {

namespace {
[[noreturn]] void fail(const std::string& path, const std::string& what, int err) {
  throw CheckpointError(kCkptSaveFailed, path + ": " + what + ": " + std::strerror(err));
}

// Removes `path` and everything under it; "" when that worked (or there was nothing), else "PATH: cannot remove:
// reason". MR_CKPT_FAIL_REMOVE=NAME (tests): the removal of a path whose last component is NAME fails, as a
// directory of another user's files would (a test running as root cannot make one that root cannot remove).
std::string try_remove_tree(const std::string& path) {
  if (const char* name = std::getenv("MR_CKPT_FAIL_REMOVE");
      name && *name && std::filesystem::path(path).filename() == name) {
    std::error_code ec;
    if (std::filesystem::exists(std::filesystem::symlink_status(path, ec)))
      return path + ": cannot remove: simulated (MR_CKPT_FAIL_REMOVE)";
  }
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
  return ec ? path + ": cannot remove: " + ec.message() : std::string();
}

// replace_dir's words for the previous `to`, moved out of the way to `at` (`how`: "swapped out to", "moved to") and
// then not removed (`why`, try_remove_tree's reason): "" when `why` is.
std::string previous_left(const std::string& to, const char* how, const std::string& at, const std::string& why) {
  if (why.empty()) return "";
  return "the previous " + to + ", " + how + " " + at + ", could not be removed (" + why + "); it is left there";
}
}  // namespace

std::string parent_dir(const std::string& path) {
  const std::string p = std::filesystem::path(path).parent_path().string();
  return p.empty() ? "." : p;
}

void fsync_path(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(path, "cannot open for fsync", errno);
  if (::fsync(fd) != 0) {
    const int e = errno;
    ::close(fd);
    fail(path, "fsync failed", e);
  }
  ::close(fd);
}

void write_file_atomic(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail(tmp, "cannot create", errno);
  // Whatever fails below, the temporary file does not stay behind.
  struct Cleanup {
    const std::string& tmp;
    bool done = false;
    ~Cleanup() {
      if (!done) ::unlink(tmp.c_str());
    }
  } cleanup{tmp};
  size_t done = 0;
  while (done < text.size()) {
    ssize_t w = ::write(fd, text.data() + done, text.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) {
      const int e = errno;
      ::close(fd);
      fail(tmp, "write failed", e);
    }
    done += static_cast<size_t>(w);
  }
  if (::fsync(fd) != 0) {
    const int e = errno;
    ::close(fd);
    fail(tmp, "fsync failed", e);
  }
  if (::close(fd) != 0) fail(tmp, "close failed", errno);
  if (::rename(tmp.c_str(), path.c_str()) != 0) fail(path, "rename failed", errno);
  cleanup.done = true;
  fsync_path(parent_dir(path));
}

std::string replace_dir(const std::string& from, const std::string& to, bool& in_place) {
  in_place = false;
  std::error_code ec;
  if (std::filesystem::exists(to, ec)) {
    // Swap the two in one step, so that `to` always names a complete checkpoint; then drop the old one. Once
    // swapped the new one is in place: an old copy that cannot be removed is left, and said, not a failure.
    if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_EXCHANGE) == 0) {
      in_place = true;
      fsync_path(parent_dir(to));
      const std::string why = try_remove_tree(from);
      fsync_path(parent_dir(to));
      return previous_left(to, "swapped out to", from, why);
    }
    // A file system without RENAME_EXCHANGE: move the old one aside first.
    const std::string old = to + ".old";
    const std::string stale = clear_stale_dir(old);  // a leftover of an earlier save: moved aside if need be
    if (::rename(to.c_str(), old.c_str()) != 0) fail(to, "rename failed", errno);
    if (::rename(from.c_str(), to.c_str()) != 0) {
      const int e = errno;
      if (::rename(old.c_str(), to.c_str()) != 0)  // put the previous one back; failing that, say where it is
        fail(to, "rename failed (and the previous one could not be put back from " + old + ")", e);
      fail(to, "rename failed", e);
    }
    in_place = true;
    fsync_path(parent_dir(to));
    const std::string why = try_remove_tree(old);
    fsync_path(parent_dir(to));
    const std::string left = previous_left(to, "moved to", old, why);
    return stale.empty() ? left : left.empty() ? stale : stale + "; " + left;
  }
  if (::rename(from.c_str(), to.c_str()) != 0) fail(to, "rename failed", errno);
  in_place = true;
  fsync_path(parent_dir(to));
  return "";
}

void remove_tree(const std::string& path) {
  if (std::string why = try_remove_tree(path); !why.empty()) throw CheckpointError(kCkptSaveFailed, why);
}

std::string clear_stale_dir(const std::string& path) {
  const std::string why = try_remove_tree(path);
  if (why.empty()) return "";
  // Left by an earlier save whose clean-up failed (files of another user, busy .nfs files): moved out of the way,
  // so that it does not block every later save of this iteration.
  std::error_code ec;
  int err = 0;
  for (int i = 1; i <= 1000; ++i) {
    const std::string aside = path + ".stale-" + std::to_string(i);
    if (std::filesystem::exists(std::filesystem::symlink_status(aside, ec))) continue;
    if (::rename(path.c_str(), aside.c_str()) == 0) {
      fsync_path(parent_dir(path));
      return "a stale " + path + " from an earlier save could not be removed (" + why + "); moved aside to " + aside +
             ": remove it by hand";
    }
    err = errno;
    break;
  }
  throw CheckpointError(kCkptSaveFailed, path + ": a stale directory from an earlier save could not be removed (" +
                                             why + ") nor moved aside (" +
                                             (err ? std::strerror(err) : "no free name") + "); remove it by hand");
}

std::string probe_writable(const std::string& path, const std::string& probe_name) {
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec) return "cannot create the directory: " + ec.message();
  if (!std::filesystem::is_directory(path, ec)) return "not a directory";
  const std::string probe = path + "/" + probe_name;
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return std::string("cannot create a file in it: ") + std::strerror(errno);
  std::string reason;
  const char byte = 0;
  if (::write(fd, &byte, 1) != 1) reason = std::string("cannot write a file in it: ") + std::strerror(errno);
  else if (::fsync(fd) != 0) reason = std::string("fsync failed: ") + std::strerror(errno);
  ::close(fd);
  ::unlink(probe.c_str());
  return reason;
}

DirLock::DirLock(const std::string& dir, const std::string& name, std::string& busy, std::string& unlockable) {
  const std::string path = dir + "/" + name;
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);  // another user's lock file: flock needs no write
  if (fd_ < 0) {
    unlockable = path + ": cannot open: " + std::strerror(errno);
    return;
  }
  int rc;
  while ((rc = ::flock(fd_, LOCK_EX | LOCK_NB)) != 0 && errno == EINTR) {
  }
  if (rc == 0) return;
  const int e = errno;
  ::close(fd_);
  fd_ = -1;
  if (e == EWOULDBLOCK) busy = "another process holds " + path;
  else unlockable = path + ": cannot lock: " + std::strerror(e);
}

DirLock::~DirLock() {
  if (fd_ >= 0) ::close(fd_);  // the lock goes with the descriptor
}

}  // namespace mr::run
