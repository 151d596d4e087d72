// torchrun's @record for megatron-run's own refusals: a program that torchrun (or megatron-run's spawner) runs gets
// TORCHELASTIC_ERROR_FILE, and Python's @record writes the exception that ended it there, so the launcher's failure
// summary shows it as the root cause. megatron-run run in place of such a program (validating a config, then
// exec'ing the training program) that refuses the config writes its error lines there the same way.
#pragma once

#include <ostream>
#include <streambuf>
#include <string>

namespace mr::app {

// While it lives, keeps a copy of the first error block `os` (std::cerr) prints: the first line starting with
// "megatron-run: error" and the indented lines right after it ("  also ...", hints), and the error lines after a
// line ending in ':' (a heading), at most 16 KiB. What is printed passes through unchanged.
class ErrorCapture : private std::streambuf {
 public:
  explicit ErrorCapture(std::ostream& os);
  ~ErrorCapture() override;
  ErrorCapture(const ErrorCapture&) = delete;
  ErrorCapture& operator=(const ErrorCapture&) = delete;
  const std::string& text() const { return block_; }

 private:
  int overflow(int c) override;
  std::streamsize xsputn(const char* s, std::streamsize n) override;
  int sync() override;
  void take(char c);
  std::ostream& os_;
  std::streambuf* inner_;
  std::string line_, block_;
  enum class State { Before, In, Done } state_ = State::Before;
  bool header_ = false;  // the block's last line ends in ':': the next error line belongs to it
};

// torch's ErrorHandler.record_exception format, {"message": {"message": TEXT, "extraInfo": {"py_callstack": TEXT,
// "timestamp": "SECONDS"}}}, for the error `text` (its first line as the message, with the next one when the first
// is a heading ending in ':'; all of it as the call stack).
std::string error_record_json(const std::string& text, long long timestamp);

// When `code` is not 0, `text` is not empty, TORCHELASTIC_ERROR_FILE is set and not empty, and nothing wrote that
// file in this process yet (the spawner writes the root cause of a failed job there: launch/failure_report.h):
// writes error_record_json(text, now) to it. A file that cannot be written is said on stderr.
void write_refusal_record(int code, const std::string& text);

}  // namespace mr::app
