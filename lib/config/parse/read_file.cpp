#include "config/parse/read_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace mr {

namespace {

const char* kind_of(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISFIFO(m)) return "a named pipe";
  if (S_ISSOCK(m)) return "a socket";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  return "not a plain file";
}

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

std::string describe_bytes(std::size_t n) {
  if (n >= (std::size_t{1} << 20) && n % (std::size_t{1} << 20) == 0) return std::to_string(n >> 20) + " MiB";
  if (n >= (std::size_t{1} << 10) && n % (std::size_t{1} << 10) == 0) return std::to_string(n >> 10) + " KiB";
  return std::to_string(n) + " bytes";
}

namespace {

// The refusals of read_input_file, for `path`.
struct Refusals {
  const std::string& path;
  const std::string& what;
  const std::vector<std::string>& flags;
  std::size_t max_bytes;
  UsageError fail(const std::string& why, const char* id) const { return UsageError(path + ": " + why, flags, path, id); }
  UsageError unreadable(int err) const { return fail("cannot read " + what + ": " + std::strerror(err), "input.unreadable"); }
  UsageError not_regular(mode_t m) const {
    return fail("the " + what + " is not a regular file (it is " + std::string(kind_of(m)) +
                    "); megatron-run reads only regular files",
                "input.not-regular-file");
  }
  UsageError too_large(const std::string& size) const {
    return fail("the " + what + " is " + size + ", more than the limit of " + describe_bytes(max_bytes) +
                    " for an input file (limits::kMaxInputFileBytes)",
                "input.file-too-large");
  }
  // What stat tells, before anything is opened.
  void check_path() const {
    if (path.empty()) throw UsageError(what + ": the path is empty", flags, {}, "input.unreadable");
    if (path.find('\0') != std::string::npos) throw unreadable(EINVAL);
    // stat first: a named pipe, socket or device is refused without being opened (opening a FIFO blocks until a
    // writer appears; a socket cannot be opened at all; a device may do something when opened).
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) throw unreadable(errno);
    if (!S_ISREG(st.st_mode)) throw not_regular(st.st_mode);
    if (static_cast<unsigned long long>(st.st_size) > max_bytes) throw too_large(std::to_string(st.st_size) + " bytes");
  }
};

}  // namespace

void check_input_file(const std::string& path, const std::string& what, const std::vector<std::string>& flags,
                      std::size_t max_bytes) {
  Refusals{path, what, flags, max_bytes}.check_path();
}

std::string read_input_file(const std::string& path, const std::string& what, const std::vector<std::string>& flags,
                            std::size_t max_bytes) {
  const Refusals r{path, what, flags, max_bytes};
  r.check_path();
  auto unreadable = [&](int err) { return r.unreadable(err); };
  auto not_regular = [&](mode_t m) { return r.not_regular(m); };
  auto too_large = [&](const std::string& size) { return r.too_large(size); };
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

}  // namespace mr
