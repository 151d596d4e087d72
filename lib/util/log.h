// Logging: `MR_LOG(info) << "text";` through Boost.Log (one severity filter, a rank prefix, stderr sink).
//
// Boost.Log stays inside log.cpp: this header is light, so every other file compiles without Boost's headers.
#pragma once

#include <optional>
#include <sstream>
#include <string>

namespace mr::log {

// Levels accepted by --log-level.
enum class Level { trace, debug, info, warning, error, fatal };

// Parses "trace|debug|info|warning|error|fatal" (also "warn"); nullopt for anything else.
std::optional<Level> parse_level(const std::string& name);

// Installs the stderr sink (once) and sets the filter. `rank` < 0 means no rank prefix.
void init(Level level = Level::warning, int rank = -1);
void set_rank(int rank);

// Whether a record of this level would be written (the filter).
bool enabled(Level level);
// Writes one record.
void emit(Level level, const std::string& message);

// One log record, written when the statement ends.
class Line {
 public:
  explicit Line(Level level) : level_(level) {}
  Line(const Line&) = delete;
  Line& operator=(const Line&) = delete;
  ~Line() { emit(level_, os_.str()); }
  template <class T>
  Line& operator<<(const T& v) {
    os_ << v;
    return *this;
  }

 private:
  Level level_;
  std::ostringstream os_;
};

}  // namespace mr::log

// MR_LOG(warning) << "..."; the message is not even formatted when the level is filtered out. (A for-loop
// rather than if/else, so that `if (x) MR_LOG(info) << y; else ...` means what it says.)
#define MR_LOG(sev)                                                                                  \
  for (bool mr_log_once_ = ::mr::log::enabled(::mr::log::Level::sev); mr_log_once_; mr_log_once_ = false) \
  ::mr::log::Line(::mr::log::Level::sev)
