// The supervision loop of spawn_workers (spawn_detail.h): one poll over the signal pipe and every worker's
// output pipes, then the reaping; stops the other workers after the first failure or a terminating signal.
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <streambuf>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "config/print.h"
#include "config/rule.h"
#include "launch/process_group.h"
#include "launch/spawn_detail.h"
#include "util/rule_id.h"
#include "util/std_fds.h"
#include "util/text.h"

namespace mr::launch::detail {

const Rule kLogWriteFailedRule{
    "launch.log-write-failed", Rule::Level::Warning,
    "A write to a file of the workers' output (a rank's log file of --log-dir with --redirects or --tee, a filtered "
    "file of --duplicate-stdout-filters / --duplicate-stderr-filters) failed (a full disk, the file-size limit of "
    "`ulimit -f`, an I/O error): said once per file with the system's reason; nothing more is written to that file "
    "and the job goes on (a tee'd stream's lines still go to the console); the failure summary names the file.",
    __FILE__, __LINE__, kStageLaunch};

namespace {

// The system's reason for a failed write to a log file: strerror, and for EFBIG the file-size limit (`ulimit -f`)
// that made it.
std::string log_write_failure(int e) {
  std::string why = std::strerror(e);
  rlimit fsize{};
  if (e == EFBIG && getrlimit(RLIMIT_FSIZE, &fsize) == 0 && fsize.rlim_cur != RLIM_INFINITY)
    why += " (past the file-size limit, `ulimit -f`: " + std::to_string(fsize.rlim_cur) + " bytes)";
  return why;
}

// Writes `text` to a log file (LogFile). Its first failed write is said once (launch.log-write-failed), and nothing
// more is written to it; the job goes on. `shown`: the lines also go to the console (said so).
void write_log(LogFile& f, std::string_view text, bool shown) {
  if (!f.writable() || (f.error = write_all(f.fd, text)) == 0) return;
  kLogWriteFailedRule.record_hit();
  print_warning(std::cerr, with_rule_id(kLogWriteFailedRule.id,
                                        "cannot write the log file " + f.path + ": " + log_write_failure(f.error) +
                                            "; nothing more is written to it, " +
                                            (shown ? "its further output goes to the console only"
                                                   : "its further output is lost (it is not shown on the console)") +
                                            "; the job goes on"));
}

using Clock = std::chrono::steady_clock;

// One of the launcher's console streams (stdout, stderr) as the workers' relayed lines reach it: queued here and
// written only when poll() says the stream can take more, so that a reader that does not read (a stuck pipe
// consumer, a terminal paused with Ctrl-S) never blocks the supervision loop: the signal pipe, the grace period and
// the reaping go on whatever state the output is in. The descriptor stays blocking (O_NONBLOCK would change it for
// every process sharing it); a write after POLLOUT of at most PIPE_BUF bytes does not block on a pipe. A regular
// file never waits on a reader: written at once, as before.
struct Outbox {
  int fd = -1;
  bool regular = false;  // a regular file or block device: written at once
  std::string data;      // not yet written: data[off..]
  size_t off = 0;
  bool console_only = false;  // some of it comes from a stream without a log file (its loss fails the launch)
  size_t left() const { return data.size() - off; }
  void clear() {
    data.clear();
    off = 0;
    console_only = false;
  }
};

// Past this much unwritten output the workers' pipes for that stream are not read: they wait for the reader, as
// they would writing to it themselves, while the launcher stays responsive.
constexpr size_t kOutboxCap = size_t{1} << 20;

// The launcher's stdout and stderr for the relayed lines. A write to stdout that failed (a full device, a closed
// pipe) is not tried again. A stream that also goes to its log file (--tee) loses its console copy only (said once);
// any other stream's line lost is the launcher's failure (`failed`): supervise says it and stops the workers. A
// failed write to stderr drops what was queued for it, as write_all always did.
struct ConsoleOut {
  Outbox out, err;
  // For each of stdout and stderr, the worker stream whose partial line (a progress bar redrawn with \r) is there
  // now, the cursor after it; nullptr when it is at a line start. Other text written to the same place first ends
  // that line (end_bar).
  Stream* out_bar = nullptr;
  Stream* err_bar = nullptr;
  // stdout and stderr are one place (the same terminal, file or pipe): a bar on either is ended by text on either.
  bool one_place = false;
  int error = 0;           // errno of the first failed write to stdout (0: none)
  bool failed = false;     // a line that went nowhere else was lost
  bool copy_lost_said = false;
  ConsoleOut() {
    struct stat st[2] {};
    bool known[2] = {false, false};
    for (Outbox* b : {&out, &err}) {
      b->fd = b == &out ? 1 : 2;
      const int i = b == &out ? 0 : 1;
      known[i] = fstat(b->fd, &st[i]) == 0;
      b->regular = known[i] && (S_ISREG(st[i].st_mode) || S_ISBLK(st[i].st_mode));
    }
    one_place = known[0] && known[1] && st[0].st_dev == st[1].st_dev && st[0].st_ino == st[1].st_ino;
  }
  Stream*& bar_of(const Outbox& b) { return &b == &out ? out_bar : err_bar; }
};

// A failed write to stdout: what was queued is lost (said once for copies, else the launch's failure).
void stdout_lost(ConsoleOut& c, bool console_only) {
  if (c.error == 0) c.error = errno;
  if (console_only) {
    c.failed = true;
  } else if (!c.copy_lost_said) {
    c.copy_lost_said = true;
    std::cerr << "megatron-run: notice: cannot write the output: " << util::stdout_write_failure(c.error)
              << "; the workers' stdout goes on into their log files only (--log-dir, --tee), where those can be "
                 "written; the job goes on\n";
  }
}

// Writes what the stream can take now: all of it to a regular file; else PIPE_BUF at a time while poll() says it
// is writable (`ready`: the caller's poll said so for the first write). EAGAIN (another process made the shared
// descriptor non-blocking) leaves the rest for the next POLLOUT.
void flush(ConsoleOut& c, Outbox& b, bool ready) {
  while (b.left() > 0) {
    if (!b.regular && !ready) {
      pollfd p{b.fd, POLLOUT, 0};
      if (poll(&p, 1, 0) <= 0 || !(p.revents & (POLLOUT | POLLERR | POLLHUP))) return;
    }
    ready = false;
    const size_t len = b.regular ? b.left() : std::min<size_t>(b.left(), PIPE_BUF);
    const ssize_t n = write(b.fd, b.data.data() + b.off, len);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n <= 0) {
      if (n == 0) errno = EIO;
      if (b.fd == 1) stdout_lost(c, b.console_only);
      b.clear();
      return;
    }
    b.off += static_cast<size_t>(n);
  }
  b.clear();
}

// Ends the line of the progress bar on the console (if any) with a newline in its own stream, so that the next
// text (another rank's line, the launcher's message) starts on a line of its own instead of overwriting the bar
// from its first column and leaving the bar's tail after it. `except`: the stream about to write (its own bar
// goes on).
// `to`: where the text goes; a bar in the other stream is ended too when both are one place (the same terminal).
void end_bar(ConsoleOut& c, const Outbox& to, const Stream* except = nullptr) {
  for (Outbox* b : {&c.out, &c.err}) {
    Stream*& bar = c.bar_of(*b);
    if (!bar || bar == except || (b != &to && !c.one_place)) continue;
    bar->bar_broken = true;
    bar = nullptr;
    if (b == &c.out && c.error != 0) continue;  // stdout failed before: nothing more goes there
    if (b->left() == 0) b->clear();
    b->data += "\n";
    flush(c, *b, b->regular);
  }
}

// stderr once its reader took nothing for a whole grace period: from then on each of the launcher's messages goes
// only as far as stderr takes it at once (poll with no wait, PIPE_BUF at a time) and the rest is dropped, so that
// what it says after the workers (the failure summary, a restart) never holds it in a write (a SIGTERM then would
// be caught and the write resumed: the launcher would never end). Never destroyed: std::cerr may be written, and
// is flushed, until the process ends.
class StalledStderr : public std::streambuf {
 public:
  static StalledStderr& get() {
    static StalledStderr* s = new StalledStderr;
    return *s;
  }

 protected:
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    size_t off = 0;
    const size_t len = static_cast<size_t>(n);
    while (off < len) {
      pollfd p{2, POLLOUT, 0};
      if (poll(&p, 1, 0) <= 0 || !(p.revents & POLLOUT)) break;
      const ssize_t w = write(2, s + off, std::min<size_t>(len - off, PIPE_BUF));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) break;
      off += static_cast<size_t>(w);
    }
    return n;  // what stderr did not take is dropped
  }
  int_type overflow(int_type ch) override {
    if (traits_type::eq_int_type(ch, traits_type::eof())) return traits_type::not_eof(ch);
    const char c = traits_type::to_char_type(ch);
    xsputn(&c, 1);
    return ch;
  }
};

// The launcher's own messages (std::cerr) while it supervises the workers: queued in the stderr Outbox behind the
// relayed lines and written as stderr can take them, so that a stderr whose reader does not read never blocks the
// loop (a "received signal 15" line would otherwise hold the signal it reports), and the messages keep their order
// with the workers' lines. std::cerr is unit-buffered: each `<<` ends in sync(), which writes what it can now.
// Only the supervising thread writes std::cerr (the store's thread never does).
class LauncherMessages : public std::streambuf {
 public:
  explicit LauncherMessages(ConsoleOut& c) : c_(c), before_(std::cerr.rdbuf(this)) {}
  // What is still queued when supervise returns (its last lines, written after the loop): waited for as before,
  // unless the loop gave up on a reader that took nothing by the end of the grace period (`reader_stalled`): then
  // only what stderr takes now, and so for every message after (StalledStderr).
  ~LauncherMessages() override {
    std::cerr.rdbuf(reader_stalled ? &StalledStderr::get() : before_);
    flush(c_, c_.err, c_.err.regular);
    if (c_.err.left() > 0 && !reader_stalled) write_all(c_.err.fd, std::string_view(c_.err.data).substr(c_.err.off));
    c_.err.clear();
  }
  bool reader_stalled = false;
  LauncherMessages(const LauncherMessages&) = delete;
  LauncherMessages& operator=(const LauncherMessages&) = delete;

 protected:
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    end_bar(c_, c_.err);
    if (c_.err.left() == 0) c_.err.clear();
    c_.err.data.append(s, static_cast<size_t>(n));
    return n;
  }
  int_type overflow(int_type ch) override {
    if (traits_type::eq_int_type(ch, traits_type::eof())) return traits_type::not_eof(ch);
    const char c = traits_type::to_char_type(ch);
    xsputn(&c, 1);
    return ch;
  }
  int sync() override {
    flush(c_, c_.err, c_.err.regular);
    return 0;
  }

 private:
  ConsoleOut& c_;
  std::streambuf* before_;
};

// A worker's lines for the launcher's stdout or stderr, from stream `s` (which has a log file when s.file.fd >= 0;
// one whose write failed keeps nothing more, and the console's loss is still no failure: the job goes on).
void to_console(ConsoleOut& c, Stream& s, std::string&& out) {
  Outbox& b = s.is_err ? c.err : c.out;
  end_bar(c, b, &s);
  if (!s.is_err && c.error != 0) {  // stdout failed before: not tried again
    errno = c.error;
    stdout_lost(c, s.file.fd < 0);  // fatal only where no log file was asked for (a full log disk: docs/launch.md)
    return;
  }
  c.bar_of(b) = out.back() == '\n' ? nullptr : &s;  // a bar's line left open there
  if (b.left() == 0) b.clear();
  b.data += out;
  if (!s.is_err && s.file.fd < 0) b.console_only = true;
  // At once when the stream can take it now (poll with no wait): the lines keep their order with the launcher's
  // own messages, which it writes directly; only a stream that cannot take them waits in the queue.
  flush(c, b, b.regular);
}

// The longest prefix of s[0, n) that does not end inside a UTF-8 character (its last bytes a lead byte without all
// of its continuation bytes yet): a bar is shown up to there, so that no character is split by other text.
size_t complete_utf8(const std::string& s, size_t n) {
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const unsigned char b = static_cast<unsigned char>(s[n - back]);
    if ((b & 0xC0) == 0x80) continue;  // a continuation byte: look further back for its lead
    const size_t len = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC0 ? 2 : 1;
    return len > back ? n - back : n;  // incomplete: stop before its lead
  }
  return n;
}

// Appends `text` to the stream's partial line and handles every complete line: kept in the stream's tail (stderr)
// and written to the console (the worker's prefix before each) when the stream is shown, and to the filtered file
// (prefixed too) when it contains one of the duplicate filters. `flush_all` also handles the rest (the stream has
// ended), with a newline. The log file gets the bytes as they come.
//
// A line with a carriage return inside (a progress bar redrawn in place: tqdm's "\r 40%|####  |") is shown as it
// comes, from its first \r on, each redraw with the prefix: "[rank 0]  40%|####  |\r[rank 0]  41%|####  |", so the
// bar is live. The cursor then stays after the bar: other text ends its line first (end_bar). A \r that is the
// last byte read waits for the next one (\r\n is a line end, written as the worker wrote it). The tail keeps what
// a terminal shows of such a line (its last redraw); the filtered file gets whole lines.
void emit(ConsoleOut& c, const Worker& w, Stream& s, const std::string& text, bool flush_all) {
  if (!text.empty()) write_log(s.file, text, s.console && (s.is_err || c.error == 0));
  if (!s.console && !s.is_err) return;  // nothing to show, nothing to keep
  s.pending += text;
  std::string out;
  // `part` of a line as the console shows it: every \r followed by the prefix; the prefix first when `part`
  // starts the line (a \r there, tqdm's first write, needs no return: the line is empty).
  auto render = [&](std::string_view part, bool line_start) {
    if (line_start || s.bar_broken) {
      s.bar_broken = false;
      out += w.prefix;
      if (!part.empty() && part.front() == '\r') part.remove_prefix(1);
    }
    for (size_t cr; (cr = part.find('\r')) != std::string_view::npos; part.remove_prefix(cr + 1))
      out.append(part.substr(0, cr)).append("\r").append(w.prefix);
    out += part;
  };
  auto line = [&](const std::string& l) {  // without its newline
    std::string_view shown_as = l;  // what a terminal shows of it: after its last \r (a \r\n's \r aside)
    if (!shown_as.empty() && shown_as.back() == '\r') shown_as.remove_suffix(1);
    if (size_t cr = shown_as.rfind('\r'); cr != std::string_view::npos) shown_as.remove_prefix(cr + 1);
    if (s.is_err) s.tail.add(std::string(shown_as));
    if (!s.console) return;
    if (s.filtered && s.filtered->writable())
      for (const std::string& needle : *s.filters)
        if (l.find(needle) != std::string::npos) {
          write_log(*s.filtered, w.prefix + l + "\n", true);  // one write per line: whole lines, ranks interleaved
          break;
        }
    const size_t from = std::min(s.shown, l.size());
    const bool crlf = !l.empty() && l.back() == '\r' && l.size() > from;
    const std::string_view rest = std::string_view(l).substr(from, l.size() - from - (crlf ? 1 : 0));
    if (from == 0 && l.find('\r') >= l.size() - (crlf ? 1 : 0)) {
      out += w.prefix + l + "\n";  // a plain line (a \r\n line too): whole, as it was written
    } else if (!(rest.empty() && s.bar_broken)) {  // (a broken bar's line is ended already)
      render(rest, from == 0);
      out += crlf ? "\r\n" : "\n";
    }
    s.shown = 0;
    s.bar_broken = false;
  };
  size_t start = 0;
  for (;;) {
    size_t nl = s.pending.find('\n', start);
    if (nl == std::string::npos) break;
    line(s.pending.substr(start, nl - start));
    start = nl + 1;
  }
  s.pending.erase(0, start);
  if (flush_all && !s.pending.empty()) {
    line(s.pending);
    s.pending.clear();
  }
  // A partial line is held up to kMaxPartialLine bytes: beyond, what is held goes out as a line of its own (cut
  // before a UTF-8 continuation byte, so no character is split) and the rest of the line follows on the next. A
  // worker writing without end and no newline (a binary dump, a progress bar drawn with \r only) cannot grow the
  // launcher's memory.
  while (s.pending.size() > kMaxPartialLine) {
    size_t cut = kMaxPartialLine;
    for (int back = 0; back < 3 && (static_cast<unsigned char>(s.pending[cut]) & 0xC0) == 0x80; ++back) --cut;
    const size_t shown = s.shown;  // the bar may already have shown a few bytes past the cut
    line(s.pending.substr(0, cut));
    s.pending.erase(0, cut);
    s.shown = shown > cut ? shown - cut : 0;
    s.bar_broken = s.shown > 0;  // its next bytes start a line of their own: with the prefix
  }
  // A partial line with a \r (not its last byte) is a bar: shown up to what was read (a last \r waits).
  if (s.console && !s.pending.empty()) {
    const size_t upto = complete_utf8(s.pending, s.pending.size() - (s.pending.back() == '\r' ? 1 : 0));
    const bool bar = s.shown > 0 || s.pending.find('\r') < upto;
    if (bar && upto > s.shown) {
      render(std::string_view(s.pending).substr(s.shown, upto - s.shown), s.shown == 0);
      s.shown = upto;
    }
  }
  if (!out.empty()) to_console(c, s, std::move(out));
}

// Flushes a stream's partial line and closes it (and its log file).
void end_stream(ConsoleOut& c, Worker& w, Stream& s) {
  emit(c, w, s, "", true);
  close(s.fd);
  s.fd = -1;
  if (s.file.fd >= 0) close(s.file.fd);
  s.file.fd = -1;
}

// Reads what is ready on one worker stream; at its end (or on an error) flushes the rest and closes it.
void relay(ConsoleOut& c, Worker& w, Stream& s) {
  char buf[65536];
  ssize_t r = read(s.fd, buf, sizeof buf);
  if (r > 0) {
    emit(c, w, s, std::string(buf, static_cast<size_t>(r)), false);
  } else if (r == 0 || (errno != EINTR && errno != EAGAIN)) {
    end_stream(c, w, s);
  }
}

// Whether `fd` has data (or its end) to read now.
bool poll_readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, 0) > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR));
}

// How long the streams stay open once every worker has exited and what they left in their process groups has
// ended: what they wrote is in the pipes already; a process that left its worker's group (setsid, a daemon) may
// hold a pipe open for ever, and torchrun, which watches the workers and not their output, does not wait either.
constexpr std::chrono::milliseconds kStreamLinger{500};

// How often /proc is scanned for what the exited workers left in their process groups, while something is left
// (a scan reads every process's stat file): at once after a worker's exit, then at most this often.
constexpr std::chrono::milliseconds kLeftoverScan{100};

// The log files a write to failed (launch.log-write-failed), for the failure summary: the workers' own, then the
// filtered files.
void note_incomplete_logs(Workers& workers, AttemptResult& result) {
  std::vector<const LogFile*> files;
  for (Worker& w : workers.all())
    for (const Stream* s : {&w.out, &w.err}) files.push_back(&s->file);
  files.push_back(&workers.filtered_out());
  files.push_back(&workers.filtered_err());
  for (const LogFile* f : files)
    if (f->error != 0) result.incomplete_logs.push_back(f->path + ": " + log_write_failure(f->error));
}

// One attempt's supervision: the state the loop keeps between passes, and one method for each thing a pass does.
// supervise() below runs it; the order of the steps in run() is the order they must happen in a pass.
class Supervisor {
 public:
  Supervisor(Workers& workers, const SpawnOptions& o, int signal_fd)
      : workers_(workers),
        o_(o),
        signal_fd_(signal_fd),
        grace_(static_cast<long>(o.grace_seconds * 1000)),
        messages_(console_) {}

  AttemptResult run();

 private:
  // One pass's poll set: the signal pipe, the streams to read (each with its owner), the workers' pidfds and the
  // console streams with output queued.
  struct PollSet {
    std::vector<pollfd> fds;
    std::vector<std::pair<Worker*, Stream*>> owners;  // of fds[0, streams_end)
    bool streams_open = false;                        // some worker stream is still open
    size_t streams_end = 0;
    size_t outboxes_at = 0;
    std::vector<Outbox*> outboxes;                    // of fds[outboxes_at, ...)
  };

  void collect_streams(PollSet& p);
  void collect_waits(PollSet& p);
  void stop_rest(int sig);
  void scan_leftovers();
  // Nothing left in the groups, as far as the launcher waits: none found, or SIGKILL sent (a process in the kernel
  // may linger, and is not waited for).
  bool nothing_left() const { return killed_ || (left_known_ && left_.empty()); }
  void drop_unwritten_output();
  AttemptResult poll_failed(int e);
  void take_signals();
  void check_output_failure();
  void reap();
  void say_long_finished();
  void watch_peers();
  void stop_leftovers();
  void close_streams_when_done();
  void say_pipe_holders(const std::vector<std::pair<ino_t, int>>& pipes);
  void kill_at_grace_end();
  AttemptResult finish();
  void decide_code();

  Workers& workers_;
  const SpawnOptions& o_;
  const int signal_fd_;
  AttemptResult result_;
  // One grace period for every process group, however the stop came (a failure, a signal to the launcher, another
  // node, what the exited workers left): the first SIGTERM to the groups sets it, SIGKILL ends it, once.
  const std::chrono::milliseconds grace_;
  std::optional<Clock::time_point> kill_at_;  // SIGKILL every group not yet reaped at this time
  bool killed_ = false;                       // it has been sent: nothing is waited for after it
  bool killed_some_ = false;                  // ... to a worker or to what the workers left (not to nothing)
  bool stopping_ = false;                     // the workers have been told to stop
  std::vector<Worker*> failed_;               // in the order seen
  bool peer_stop_passed_ = false;             // another node's stop signal was passed on to running workers
  Clock::time_point next_watch_ = Clock::now();  // the other nodes (o.watch): asked every 200 ms
  std::optional<Clock::time_point> streams_end_at_;  // every worker has exited: the streams close then
  // What the exited workers left in their groups (Workers::leftovers), from the last scan of /proc: scanned again
  // after a worker's exit (`left_known_` false) and then every kLeftoverScan at most, not on every pass.
  std::string left_;
  bool left_known_ = false;
  Clock::time_point next_scan_ = Clock::now();
  bool leftovers_named_ = false;  // the notice naming them was written
  // Workers that exited 0 while others run (in rank order), and when the first did: said once after
  // o.finished_notice_seconds, while no stop is under way.
  std::vector<int> finished_;
  std::optional<Clock::time_point> first_finished_;
  bool finished_said_ = false;
  ConsoleOut console_;                 // the launcher's stdout and stderr for the relayed lines
  LauncherMessages messages_;          // and for its own (std::cerr) until supervise returns
  bool output_failed_ = false;         // a relayed line was lost (said, the workers stopped)
  bool output_failed_first_ = false;   // ... before any worker failed, a signal or another node's stop
  // The signals passed on, when and from whom each last was (kSameSignal); said "again" when one comes later.
  SignalRepeats passed_;
  // When the first stop signal reached the launcher (not another node's stop passed on): a stop signal after it
  // (not the same one folded into it, Repeat) ends the grace period at once, `cut_short_`.
  std::optional<Clock::time_point> stop_signal_at_;
  bool cut_short_ = false;
};

AttemptResult Supervisor::run() {
  for (;;) {
    PollSet p;
    collect_streams(p);
    if (!workers_.any_running() && !killed_) scan_leftovers();
    if (!workers_.any_running() && !p.streams_open && nothing_left()) {
      if (console_.out.left() == 0 && console_.err.left() == 0) break;
      // Output the reader has not taken: waited for as long as the job would run (a slow reader gets it all), but
      // after a stop only to the end of its grace period; then dropped.
      if (kill_at_ && Clock::now() >= *kill_at_) {
        drop_unwritten_output();
        break;
      }
    }
    collect_waits(p);
    const int n = poll(p.fds.data(), p.fds.size(), 100);
    if (n < 0 && errno != EINTR) return poll_failed(errno);
    if (n > 0) {
      if (p.fds[0].revents & POLLIN) take_signals();
      for (size_t i = 1; i < p.streams_end; ++i) {
        if (!(p.fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        auto [w, s] = p.owners[i];
        relay(console_, *w, *s);
      }
      for (size_t i = 0; i < p.outboxes.size(); ++i)
        if (p.fds[p.outboxes_at + i].revents & (POLLOUT | POLLERR | POLLHUP)) flush(console_, *p.outboxes[i], true);
    }
    check_output_failure();
    reap();
    say_long_finished();
    watch_peers();
    stop_leftovers();
    close_streams_when_done();
    kill_at_grace_end();
  }
  return finish();
}

// The signal pipe, then every open worker stream whose console reader is not behind.
void Supervisor::collect_streams(PollSet& p) {
  p.fds.push_back({signal_fd_, POLLIN, 0});
  p.owners.emplace_back(nullptr, nullptr);
  for (Worker& w : workers_.all())
    for (Stream* s : {&w.out, &w.err})
      if (s->fd >= 0) {
        p.streams_open = true;
        // Its console stream's reader is behind (kOutboxCap): not read until it catches up.
        if (s->console && (s->is_err ? console_.err : console_.out).left() >= kOutboxCap) continue;
        p.fds.push_back({s->fd, POLLIN, 0});
        p.owners.emplace_back(&w, s);
      }
  p.streams_end = p.fds.size();
}

// A worker's exit wakes the poll (its pidfd), output or not; the console streams with output queued are written
// when they can take it (Outbox).
void Supervisor::collect_waits(PollSet& p) {
  for (Worker& w : workers_.all())
    if (w.running && w.pidfd >= 0) p.fds.push_back({w.pidfd, POLLIN, 0});
  p.outboxes_at = p.fds.size();
  for (Outbox* b : {&console_.out, &console_.err})
    if (b->left() > 0 && !b->regular) {
      p.fds.push_back({b->fd, POLLOUT, 0});
      p.outboxes.push_back(b);
    }
}

void Supervisor::stop_rest(int sig) {
  workers_.terminate_all(sig);
  stopping_ = true;
  if (!kill_at_) kill_at_ = Clock::now() + grace_;
}

void Supervisor::scan_leftovers() {
  ++result_.leftover_passes;
  if (!left_known_ || Clock::now() >= next_scan_) {
    left_ = workers_.leftovers();
    ++result_.leftover_scans;
    left_known_ = true;
    next_scan_ = Clock::now() + kLeftoverScan;
  }
}

// The grace period is over and the console's reader still has not taken the workers' output: dropped, said on
// stderr if it can take it now.
void Supervisor::drop_unwritten_output() {
  char grace_text[32];
  std::snprintf(grace_text, sizeof grace_text, "%g", o_.grace_seconds);
  std::string said;
  for (Outbox* b : {&console_.out, &console_.err})
    if (b->left() > 0)
      said += "megatron-run: warning: " + std::to_string(b->left()) + " bytes of the workers' output for " +
              (b->fd == 1 ? "stdout" : "stderr") + " were not written: its reader took nothing more by the "
              "end of the grace period (--term-timeout " + grace_text + " s); dropped\n";
  const bool err_stalled = console_.err.left() > 0;
  console_.out.clear();
  console_.err.clear();
  if (err_stalled) {  // a write now, if stderr can take it; never a wait
    console_.err.data = said;
    flush(console_, console_.err, false);
    console_.err.clear();
  } else {
    std::cerr << said;
  }
  output_failed_ = true;  // a job whose output was lost never exits 0
  messages_.reader_stalled = err_stalled;
}

AttemptResult Supervisor::poll_failed(int e) {
  std::cerr << "megatron-run: poll: " << std::strerror(e) << "; killing the workers\n";
  workers_.kill_and_reap();
  result_.code = result_.failures.empty() ? 1 : exit_code(result_.failures.front().status);
  note_incomplete_logs(workers_, result_);
  return result_;
}

// Signals received by the launcher: passed on to every worker.
void Supervisor::take_signals() {
  SignalRecord rec;
  while (read(signal_fd_, &rec, sizeof rec) == static_cast<ssize_t>(sizeof rec)) {
    const int b = rec.sig;
    // A batch system signals every node's launcher (srun: each task); the same signal already passed on from
    // another node's stop is not sent a second time (a Python worker would get two interrupts).
    const bool passed_already = peer_stop_passed_ && result_.peer && result_.peer->stop_signal == b;
    const Clock::time_point now = Clock::now();
    const bool before = passed_.seen(b);
    const bool stops = stops_workers(b, o_.handled_signals);
    // The same signal again within kSameSignal of the last: the same delivery (`timeout`'s two), not passed on
    // again; said unless the same process sent both with kill() (review user40 #3: a silent drop left a user's
    // second Ctrl-C unheard for all of --term-timeout).
    const Repeat repeat = passed_.check(rec, now);
    if (repeat != Repeat::no) {
      if (repeat == Repeat::said) {
        char secs[32];
        std::snprintf(secs, sizeof secs, "%g", static_cast<double>(kSameSignal.count()) / 1000);
        const bool can_cut = stops && stop_signal_at_ && !killed_ && !cut_short_;
        std::cerr << "megatron-run: received signal " << b << " (" << signal_name(b) << ") again within " << secs
                  << " s: taken as the same delivery; "
                  << (can_cut ? "send it again to kill the workers now" : "not passed on again") << "\n";
      }
      continue;
    }
    // A stop signal after the launcher's own stop began, the same one again or another one (SIGTERM after SIGINT,
    // however soon: review user40 #4): the user wants out now (a second Ctrl-C); the grace period ends at once:
    // SIGKILL, not a second forward (review user39 #7), and the exit code stays the first signal's.
    if (stop_signal_at_ && stops) {
      std::cerr << "megatron-run: received signal " << b << " (" << signal_name(b) << ")"
                << (before ? " again" : " after the stop began");
      if (killed_ || cut_short_)
        std::cerr << ": the workers have been killed already (SIGKILL)\n";
      else
        std::cerr << ": killing the workers now (SIGKILL; a second stop signal ends the grace period of "
                  << "--term-timeout)\n";
      passed_.passed(rec, now);
      if (!killed_) kill_at_ = now;
      cut_short_ = true;
      continue;
    }
    // The signal that begins the stop says how long the workers get before SIGKILL (review firsthour36 #6: a user
    // pressing Ctrl-C again and again for 30 s).
    std::string wait;
    if (!passed_already && !kill_at_ && stops_workers(b, o_.handled_signals)) {
      char secs[32];
      std::snprintf(secs, sizeof secs, "%g", o_.grace_seconds);
      wait = std::string("; they get ") + secs + " s to stop (--term-timeout), then are killed";
    }
    std::cerr << "megatron-run: received signal " << b << " (" << signal_name(b) << ")"
              << (before ? " again" : "") << "; "
              << (passed_already ? "the workers have it already (passed on from another node's stop)"
                                 : "forwarding it to the workers")
              << wait << "\n";
    passed_.passed(rec, now);
    if (!passed_already) workers_.kill_all(b);
    if (stops_workers(b, o_.handled_signals)) {
      // The other nodes learn why this node's workers stop (not as their failure), and stop theirs. Also after a
      // local failure with restarts left: a stopped launcher ends the job, no node restarts.
      if (o_.watch && !result_.peer && result_.signal_received == 0)
        o_.watch->local_stop(b, "node " + std::to_string(o_.node_rank) + "'s launcher received signal " +
                                    std::to_string(b) + " (" + signal_name(b) + ")");
      result_.signal_received = b;
      if (!stop_signal_at_ && !passed_already) stop_signal_at_ = now;
      workers_.kill_all(SIGCONT);
      stopping_ = true;
      if (!kill_at_) kill_at_ = Clock::now() + grace_;
    }
  }
}

// A relayed line could not be written to stdout (a full device, a closed pipe): the launcher's failure, as a
// worker's is. Said once; the workers are stopped (SIGTERM, the grace period, SIGKILL) and the launch exits 1.
void Supervisor::check_output_failure() {
  if (!console_.failed || output_failed_) return;
  output_failed_ = true;
  output_failed_first_ = result_.failures.empty() && result_.signal_received == 0 && !result_.peer;
  const bool stop = workers_.any_running() && !stopping_;
  std::cerr << "megatron-run: error: cannot write the output: " << util::stdout_write_failure(console_.error)
            << (stop ? "; stopping the workers" : "") << "\n";
  if (stop) stop_rest(SIGTERM);
  // The other nodes stop theirs as for a stop of this launcher: the job ends, no node restarts.
  if (o_.watch && output_failed_first_)
    o_.watch->local_stop(SIGTERM, "node " + std::to_string(o_.node_rank) + "'s launcher cannot write the output: " +
                                      util::stdout_write_failure(console_.error));
}

// Reap; the first failure stops the others.
void Supervisor::reap() {
  for (Worker& w : workers_.all()) {
    if (!workers_.exited(w)) continue;  // held, not reaped: what it left in its group can still be stopped
    left_known_ = false;                // a new state: what is left is looked at again at once
    const int status = w.status;
    if (w.code == 0) {
      finished_.push_back(w.rank);
      if (!first_finished_) first_finished_ = Clock::now();
      continue;
    }
    WorkerFailure f;
    f.rank = w.rank;
    f.local_rank = w.local_rank;
    f.local_world_size = o_.nproc_per_node;
    f.world_size = o_.nnodes * o_.nproc_per_node;
    f.pid = w.pid;
    f.status = status;
    f.when = std::chrono::system_clock::now();
    // Killed by a signal the launcher passed on: before a stop, any; after it, one that does not stop the workers
    // (SIGUSR1: the stop's own SIGTERM did not kill it), and then not a worker "after the stop" (review user39 #5).
    f.by_passed_signal = WIFSIGNALED(status) && WTERMSIG(status) < NSIG && passed_.seen(WTERMSIG(status)) &&
                         (!stopping_ || !stops_workers(WTERMSIG(status), o_.handled_signals));
    f.after_stop = stopping_ && !f.by_passed_signal;
    f.stderr_seen = w.err_piped;
    f.stderr_filtered = !w.err.console && w.err.file.path.empty();
    f.error_file = w.error_file;
    f.start_failure = w.start_failure;
    result_.failures.push_back(f);
    failed_.push_back(&w);
    // The first failure after a stop (a signal to the launcher, another node's failure or stop, output that could
    // not be written) is one of many the stop made, not a root cause: every worker of the node is named together
    // at the end instead.
    if (result_.failures.size() == 1 && !f.after_stop) {
      result_.failed_first = result_.signal_received == 0 && !output_failed_first_;
      const bool others = workers_.any_running();
      const std::string how =
          w.start_failure.empty() ? describe_status(status) : "could not be started (" + w.start_failure + ")";
      std::cerr << "megatron-run: worker rank " << w.rank << " (pid " << w.pid << ") " << how
                << (others ? "; stopping the other workers" : "") << "\n";
      if (others) stop_rest(SIGTERM);
      if (o_.watch && !result_.peer && result_.signal_received == 0)
        result_.first_elsewhere =
            o_.watch->local_failure(w.code, "worker rank " + std::to_string(w.rank) + " (pid " +
                                                std::to_string(w.pid) + ") on node " + std::to_string(o_.node_rank) +
                                                " " + how);
      if (result_.first_elsewhere)
        std::cerr << "megatron-run: another node failed first, the job's root cause: "
                  << result_.first_elsewhere->message << "\n";
    }
  }
}

// Some workers finished long ago and the others still run: a job whose ranks wait for a finished one (a
// collective, a barrier) hangs here, so say it once; a long tail of real work is only named.
void Supervisor::say_long_finished() {
  if (finished_said_ || !first_finished_ || stopping_ || o_.finished_notice_seconds <= 0 || !workers_.any_running() ||
      Clock::now() - *first_finished_ < std::chrono::milliseconds(static_cast<long>(o_.finished_notice_seconds * 1000)))
    return;
  finished_said_ = true;
  std::sort(finished_.begin(), finished_.end());
  std::string ranks, running;
  for (int r : finished_) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
  int still = 0;
  for (Worker& w : workers_.all())
    if (w.running) running += (still++ ? ", " : "") + std::to_string(w.rank);
  std::cerr << "megatron-run: worker rank" << (finished_.size() == 1 ? " " : "s ") << ranks
            << " exited with code 0 more than " << o_.finished_notice_seconds << " s ago, and " << still << " of "
            << workers_.all().size() << " workers still run (rank" << (still == 1 ? " " : "s ") << running
            << "); if they wait for a rank that finished (a collective, a barrier), the job hangs\n";
}

// The other nodes: this node's heartbeat, and their first failure stops this node's workers.
void Supervisor::watch_peers() {
  if (!o_.watch || Clock::now() < next_watch_) return;
  next_watch_ = Clock::now() + std::chrono::milliseconds(200);
  std::optional<PeerFailure> pf = o_.watch->poll();
  if (!pf || result_.peer || !result_.failures.empty() || result_.signal_received != 0) return;
  result_.peer = pf;
  // Another launcher's stop: its signal for this node's workers too (they may handle it, as that node's do).
  const int sig = pf->stop_signal ? pf->stop_signal : SIGTERM;
  std::cerr << "megatron-run: " << pf->message;
  if (workers_.any_running())
    std::cerr << (pf->stop_signal ? "; passing signal " + std::to_string(sig) + " (" + signal_name(sig) +
                                        ") on to this node's workers"
                                  : std::string("; stopping this node's workers"));
  std::cerr << "\n";
  peer_stop_passed_ = pf->stop_signal && workers_.any_running();
  if (workers_.any_running() && !stopping_) stop_rest(sig);
}

// Every worker has exited. What they left in their process groups (a wrapper's child, a background job) is stopped
// as the workers were: SIGTERM and SIGCONT, then SIGKILL at the end of the grace period. After a stop they had their
// SIGTERM with the workers, and their grace period runs already: not a second one.
void Supervisor::stop_leftovers() {
  if (workers_.any_running() || killed_ || !left_known_ || left_.empty() || leftovers_named_) return;
  leftovers_named_ = true;
  std::cerr << "megatron-run: every worker has exited, but processes they started are still running in their "
               "process groups ("
            << left_ << (kill_at_ ? "); killed at the end of the grace period unless they end\n" : "); stopping them\n");
  if (!kill_at_) {
    workers_.terminate_all(SIGTERM);
    kill_at_ = Clock::now() + grace_;
  }
}

// Every worker has exited (and what they left in their groups): the streams close after what is in their pipes, at
// once on a stop signal.
void Supervisor::close_streams_when_done() {
  if (workers_.any_running() || !nothing_left()) return;
  if (!streams_end_at_) streams_end_at_ = Clock::now() + kStreamLinger;
  if (Clock::now() < *streams_end_at_ && !result_.signal_received) return;
  bool held = false;
  std::vector<std::pair<ino_t, int>> pipes;  // the held pipes' inodes, with their ranks
  for (Worker& w : workers_.all())
    for (Stream* s : {&w.out, &w.err})
      if (s->fd >= 0) {
        // What is already there (bounded: the leftover process may write without end).
        for (int k = 0; k < 64 && s->fd >= 0 && poll_readable(s->fd); ++k) relay(console_, w, *s);
        if (s->fd < 0) continue;
        struct stat st {};
        if (fstat(s->fd, &st) == 0) pipes.emplace_back(st.st_ino, w.rank);
        end_stream(console_, w, *s), held = true;
      }
  if (!held) return;
  std::cerr << "megatron-run: every worker has exited, but a process one of them started still holds its output "
               "open; its further output is not shown\n";
  say_pipe_holders(pipes);
}

// Who holds the pipes (their write ends: /proc/<pid>/fd, once, bounded), each process named once with the ranks
// whose output it holds. Nothing more is said when none is found (another user's process, a scan cut short).
void Supervisor::say_pipe_holders(const std::vector<std::pair<ino_t, int>>& pipes) {
  std::vector<ino_t> inodes;
  for (const auto& p : pipes) inodes.push_back(p.first);
  std::vector<std::pair<PipeHolder, std::vector<int>>> by_pid;  // a holder, with the ranks whose output it holds
  for (const PipeHolder& h : pipe_holders(inodes)) {
    if (!h.writes) continue;  // a read end (this launcher's own are left out already): no output of a rank
    if (by_pid.empty() || by_pid.back().first.pid != h.pid) by_pid.push_back({h, {}});
    std::vector<int>& ranks = by_pid.back().second;
    for (const auto& p : pipes)
      if (p.first == h.inode && std::find(ranks.begin(), ranks.end(), p.second) == ranks.end()) ranks.push_back(p.second);
  }
  constexpr size_t kNamed = 8;
  for (size_t k = 0; k < by_pid.size() && k < kNamed; ++k) {
    std::vector<int>& ranks = by_pid[k].second;
    std::sort(ranks.begin(), ranks.end());
    std::string whose;
    for (size_t i = 0; i < ranks.size(); ++i) whose += (i ? ", " : "") + std::to_string(ranks[i]);
    whose = ranks.size() == 1 ? "rank " + whose + "'s output" : "the output of ranks " + whose;
    const PipeHolder& h = by_pid[k].first;
    std::cerr << "megatron-run: pid " << h.pid << (h.name.empty() ? "" : " (" + printable(h.name, false) + ")")
              << " still holds " << whose << " open; it is not stopped (it left the worker's process group)\n";
  }
  if (by_pid.size() > kNamed)
    std::cerr << "megatron-run: and " << by_pid.size() - kNamed << " more processes hold the workers' output open\n";
}

// The grace period is over: SIGKILL every group not yet reaped, the workers still running and what the exited ones
// left (once; the launcher waits for nothing of theirs after it).
void Supervisor::kill_at_grace_end() {
  if (!kill_at_ || killed_ || Clock::now() < *kill_at_) return;
  if (workers_.any_running()) {
    if (!cut_short_)  // else said when the second stop signal came
      std::cerr << "megatron-run: workers still running " << o_.grace_seconds
                << " s after the stop signal (--term-timeout); killing them\n";
  } else {
    left_ = workers_.leftovers();  // as it is now: the last scan may be up to kLeftoverScan old
    ++result_.leftover_scans;
    if (!left_.empty() && !cut_short_)
      std::cerr << "megatron-run: processes the workers started still running " << o_.grace_seconds
                << " s after the stop signal (--term-timeout): " << left_ << "; killing them\n";
  }
  killed_some_ = workers_.any_running() || !left_.empty();
  workers_.kill_all(SIGKILL);
  killed_ = true;
  left_.clear();
}

// Every stream has ended: the workers after a stop named together, the failures' stderr tails, the exit code.
AttemptResult Supervisor::finish() {
  if (!result_.failures.empty() && result_.failures.front().after_stop) {
    std::string ends;
    for (Worker& w : workers_.all())
      ends += (ends.empty() ? "rank " : ", rank ") + std::to_string(w.rank) + " (pid " + std::to_string(w.pid) + ") " +
              (w.start_failure.empty() ? describe_status(w.status) : "could not be started (" + w.start_failure + ")");
    std::cerr << "megatron-run: this node's workers after the stop: " << ends << "\n";
  }
  for (size_t i = 0; i < failed_.size(); ++i) {
    result_.failures[i].stderr_tail = failed_[i]->err.tail.lines();
    result_.failures[i].stderr_left_out = failed_[i]->err.tail.left_out();
  }
  // A lost line that came at the end (the streams' last flush) is said too; it fails the launch only when nothing
  // else did.
  if (console_.failed && !output_failed_) {
    output_failed_ = true;
    output_failed_first_ = result_.failures.empty() && result_.signal_received == 0 && !result_.peer;
    std::cerr << "megatron-run: error: cannot write the output: " << util::stdout_write_failure(console_.error) << "\n";
  }
  decide_code();
  note_incomplete_logs(workers_, result_);
  return result_;
}

// The attempt's exit code: what came first decides it.
void Supervisor::decide_code() {
  AttemptResult& r = result_;
  if (output_failed_first_) {
    r.code = 1;  // the workers' codes are the stop's (SIGTERM), not a cause
  } else if (r.peer && r.peer->stop_signal && r.failures.empty() && !killed_some_ && !output_failed_) {
    // Another node's launcher was stopped, and every worker here exited 0 after its signal: handled, as below.
    const int s = r.peer->stop_signal;
    if (peer_stop_passed_)
      std::cerr << "megatron-run: every worker exited with code 0 after signal " << s << " (" << signal_name(s)
                << ") from another node's stop: they handled the stop; exit 0\n";
    else
      std::cerr << "megatron-run: every worker had exited with code 0 before another node's stop reached them; exit 0\n";
    r.code = 0;
  } else if (r.peer) {
    r.code = r.peer->code;
  } else if (r.failed_first && r.first_elsewhere) {
    r.code = r.first_elsewhere->code;
  } else if (r.failed_first) {
    r.code = exit_code(r.failures.front().status);
  } else if (r.signal_received && r.failures.empty() && !killed_some_ && !output_failed_) {
    // Every worker exited 0 after the stop signal the launcher forwarded (none killed, nothing left to kill): they
    // handled it, as a training program with --exit-signal-handler does (it saves and exits 0), so the job ended
    // well, and a wrapper that checks the code can tell that from a stop that killed them (128 + the signal).
    const int s = r.signal_received;
    std::cerr << "megatron-run: every worker exited with code 0 after the forwarded signal " << s << " ("
              << signal_name(s) << "): they handled the stop; exit 0\n";
    r.code = 0;
  } else if (r.signal_received) {
    r.code = 128 + r.signal_received;
  } else {
    r.code = r.failures.empty() ? 0 : exit_code(r.failures.front().status);
  }
  // Output lost after another cause: that cause's code, but never 0 (a job whose log is gone did not end well).
  if (output_failed_ && r.code == 0) r.code = 1;
}

}  // namespace

AttemptResult supervise(Workers& workers, const SpawnOptions& o, int signal_fd) {
  return Supervisor(workers, o, signal_fd).run();
}

}  // namespace mr::launch::detail
