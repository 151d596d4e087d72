// megatron-run's refusals in torchrun's error-file format (error_record.h).
#include "error_record.h"

#include <chrono>
#include <cstdlib>
#include <iostream>

#include "config/value.h"
#include "launch/failure_report.h"

namespace mr::app {

namespace {
constexpr size_t kMaxBlockBytes = 16 * 1024;
}  // namespace

ErrorCapture::ErrorCapture(std::ostream& os) : os_(os), inner_(os.rdbuf(this)) {}

ErrorCapture::~ErrorCapture() {
  os_.flush();
  os_.rdbuf(inner_);
}

void ErrorCapture::take(char c) {
  if (state_ == State::Done) return;
  if (c != '\n') {
    if (line_.size() < kMaxBlockBytes) line_ += c;
    return;
  }
  const bool error_line = line_.rfind("megatron-run: error", 0) == 0;
  const bool indented = line_.rfind("  ", 0) == 0;
  if (state_ == State::Before && error_line) {
    state_ = State::In;
  } else if (state_ == State::In && !indented && !(header_ && error_line)) {
    state_ = State::Done;
  }
  // A line ending in ':' heads the error lines after it ("the config is valid for no node count ...; at 2 nodes:").
  header_ = state_ == State::In && !line_.empty() && line_.back() == ':';
  if (state_ == State::In && block_.size() + line_.size() < kMaxBlockBytes) block_ += line_ + "\n";
  line_.clear();
}

int ErrorCapture::overflow(int c) {
  if (c == traits_type::eof()) return traits_type::not_eof(c);
  take(static_cast<char>(c));
  return inner_->sputc(static_cast<char>(c));
}

std::streamsize ErrorCapture::xsputn(const char* s, std::streamsize n) {
  for (std::streamsize i = 0; i < n; ++i) take(s[i]);
  return inner_->sputn(s, n);
}

int ErrorCapture::sync() { return inner_->pubsync(); }

std::string error_record_json(const std::string& text, long long timestamp) {
  std::string first = text.substr(0, text.find('\n'));
  if (!first.empty() && first.back() == ':' && first.size() + 1 < text.size()) {  // a heading: with its first line
    const std::string rest = text.substr(first.size() + 1);
    first += " " + rest.substr(0, rest.find('\n'));
  }
  Object extra = {{"py_callstack", text}, {"timestamp", std::to_string(timestamp)}};
  Object message = {{"message", first}, {"extraInfo", Value::object(extra)}};
  return Value::object({{"message", Value::object(message)}}).json();
}

void write_refusal_record(int code, const std::string& text) {
  const char* path = std::getenv("TORCHELASTIC_ERROR_FILE");
  if (code == 0 || text.empty() || !path || !*path || launch::error_record_written()) return;
  const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::system_clock::now().time_since_epoch()).count();
  const std::string why = launch::write_error_record(path, error_record_json(text, now));
  if (!why.empty())
    std::cerr << "megatron-run: cannot write the error file " << path << " (TORCHELASTIC_ERROR_FILE): " << why << "\n";
}

}  // namespace mr::app
