// The bounded reader of the files megatron-run is given (util/bounded_file.h).
#include "util/bounded_file.h"
#include "util/near_path.h"
#include "util/text.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

namespace mr {
namespace {

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

FileRefusal unreadable(int err) { return {FileRefusal::Kind::Unreadable, err}; }
FileRefusal not_regular(mode_t m) { return {FileRefusal::Kind::NotRegular, 0, m}; }
FileRefusal too_large(std::string size) { return {FileRefusal::Kind::TooLarge, 0, 0, std::move(size)}; }

// " (a symbolic link to TARGET, which does not exist)" when `path` is a dangling link, else "": a file that a folder's
// listing showed (`check DIR`) is then not said to be missing without a word why (review user40 #6). A chain of links
// is followed to the link whose target is missing (" (a symbolic link to B, which leads to C, which does not exist)"),
// at most kHops links; each target is escaped as a path is (a newline in it stays inside the one message line).
std::string dangling_link_note(const std::string& path) {
  constexpr int kHops = 8;
  std::string note, at = path;
  for (int hop = 0; hop < kHops; ++hop) {
    struct stat st {};
    if (::lstat(at.c_str(), &st) != 0) return note.empty() ? note : note + ", which does not exist)";
    if (!S_ISLNK(st.st_mode)) return {};  // the chain ends at something: not a dangling link after all
    std::string target(4096, '\0');
    const ssize_t n = ::readlink(at.c_str(), target.data(), target.size());
    if (n < 0) return {};
    target.resize(static_cast<size_t>(n));
    note += (hop == 0 ? " (a symbolic link to " : ", which leads to ") + printable(target, false);
    // A relative target is relative to the folder of the link that names it.
    const std::size_t slash = at.rfind('/');
    at = (!target.empty() && target.front() == '/') || slash == std::string::npos ? target : at.substr(0, slash + 1) + target;
  }
  return note + ", ...)";
}

}  // namespace

const char* file_kind(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISFIFO(m)) return "a named pipe";
  if (S_ISSOCK(m)) return "a socket";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  return "not a plain file";
}

std::string describe_bytes(std::size_t n) {
  if (n >= (std::size_t{1} << 20) && n % (std::size_t{1} << 20) == 0) return std::to_string(n >> 20) + " MiB";
  if (n >= (std::size_t{1} << 10) && n % (std::size_t{1} << 10) == 0) return std::to_string(n >> 10) + " KiB";
  return std::to_string(n) + " bytes";
}

void check_bounded_file(const std::string& path, std::size_t max_bytes) {
  if (path.empty()) throw FileRefusal{FileRefusal::Kind::EmptyPath};
  if (path.find('\0') != std::string::npos) throw unreadable(EINVAL);
  // stat first: a named pipe, socket or device is refused without being opened (opening a FIFO blocks until a
  // writer appears; a socket cannot be opened at all; a device may do something when opened).
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw unreadable(errno);
  if (!S_ISREG(st.st_mode)) throw not_regular(st.st_mode);
  if (static_cast<unsigned long long>(st.st_size) > max_bytes) throw too_large(std::to_string(st.st_size) + " bytes");
}

std::string read_bounded_file(const std::string& path, std::size_t max_bytes) {
  check_bounded_file(path, max_bytes);
  struct stat st {};
  Fd f;
  do {
    f.fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  } while (f.fd < 0 && errno == EINTR);
  if (f.fd < 0) throw unreadable(errno);
  // The file may have been replaced between stat and open: what was opened is what counts.
  if (::fstat(f.fd, &st) != 0) throw unreadable(errno);
  if (!S_ISREG(st.st_mode)) throw not_regular(st.st_mode);
  if (static_cast<unsigned long long>(st.st_size) > max_bytes) throw too_large(std::to_string(st.st_size) + " bytes");

  // Read up to max_bytes + 1: a file whose size stat does not tell (/proc files say 0) or that grows while it is
  // read still stops at the bound.
  std::string out;
  out.resize(std::min<std::size_t>(static_cast<std::size_t>(st.st_size), max_bytes) + 1);
  std::size_t have = 0;
  for (;;) {
    if (have == out.size()) {
      if (out.size() > max_bytes) throw too_large("more than " + describe_bytes(max_bytes));
      out.resize(std::min(max_bytes + 1, std::max<std::size_t>(out.size() * 2, 4096)));
    }
    ssize_t n = ::read(f.fd, out.data() + have, out.size() - have);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw unreadable(errno);
    }
    if (n == 0) break;
    have += static_cast<std::size_t>(n);
  }
  if (have > max_bytes) throw too_large("more than " + describe_bytes(max_bytes));
  out.resize(have);
  return out;
}

std::string file_refusal_text(const FileRefusal& r, const std::string& path, const std::string& what,
                              std::size_t max_bytes, const std::string& program) {
  switch (r.kind) {
    case FileRefusal::Kind::EmptyPath: return what + ": the path is empty";
    case FileRefusal::Kind::Unreadable: {
      // A missing file is most often a typo: the existing file it most likely meant (util/near_path.h).
      // A dangling link: its name is right and its target is missing; said instead of a near name.
      const std::string link = r.err == ENOENT ? dangling_link_note(path) : std::string();
      if (!link.empty()) return path + ": cannot read " + what + ": " + std::strerror(r.err) + link;
      const std::string meant = r.err == ENOENT || r.err == ENOTDIR ? near_path(path) : std::string();
      return path + ": cannot read " + what + ": " + std::strerror(r.err) +
             (meant.empty() ? std::string() : " (did you mean " + meant + "?)");
    }
    case FileRefusal::Kind::NotRegular:
      return path + ": the " + what + " is not a regular file (it is " + std::string(file_kind(r.mode)) +
             "); " + program + " reads only regular files";
    case FileRefusal::Kind::TooLarge:
      return path + ": the " + what + " is " + r.size + ", more than the limit of " + describe_bytes(max_bytes) +
             " for an input file (limits::kMaxInputFileBytes)";
  }
  return path + ": cannot read " + what;
}

}  // namespace mr
