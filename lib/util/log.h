// Logging through Boost.Log: one global severity filter, an optional rank prefix, stderr sink.
#pragma once

#include <boost/log/trivial.hpp>
#include <optional>
#include <string>

namespace mr::log {

// Levels accepted by --log-level.
enum class Level { trace, debug, info, warning, error, fatal };

// Parses "trace|debug|info|warning|error|fatal" (also "warn"); nullopt for anything else.
std::optional<Level> parse_level(const std::string& name);

// Installs the stderr sink (once) and sets the filter. `rank` < 0 means no rank prefix.
void init(Level level = Level::warning, int rank = -1);
void set_rank(int rank);

}  // namespace mr::log

#define MR_LOG(sev) BOOST_LOG_TRIVIAL(sev)
