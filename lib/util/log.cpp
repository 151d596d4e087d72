#include "util/log.h"

#include "util/rule_id.h"
#include "util/text.h"

#include <boost/log/core.hpp>
#include <boost/log/trivial.hpp>
#include <boost/log/expressions.hpp>
#include <boost/log/sinks/sync_frontend.hpp>
#include <boost/log/sinks/text_ostream_backend.hpp>
#include <boost/log/utility/setup/common_attributes.hpp>
#include <boost/shared_ptr.hpp>
#include <atomic>
#include <iostream>
#include <mutex>

namespace mr::log {

namespace {
std::atomic<int> g_rank{-1};
std::atomic<int> g_level{static_cast<int>(Level::warning)};
std::once_flag g_once;

boost::log::trivial::severity_level to_boost(Level l) {
  using boost::log::trivial::severity_level;
  switch (l) {
    case Level::trace: return severity_level::trace;
    case Level::debug: return severity_level::debug;
    case Level::info: return severity_level::info;
    case Level::warning: return severity_level::warning;
    case Level::error: return severity_level::error;
    case Level::fatal: return severity_level::fatal;
  }
  return severity_level::info;
}
}  // namespace

std::optional<Level> parse_level(const std::string& name) {
  if (name == "trace") return Level::trace;
  if (name == "debug") return Level::debug;
  if (name == "info") return Level::info;
  if (name == "warning" || name == "warn") return Level::warning;
  if (name == "error") return Level::error;
  if (name == "fatal") return Level::fatal;
  return std::nullopt;
}

void set_rank(int rank) { g_rank = rank; }

bool enabled(Level level) { return static_cast<int>(level) >= g_level.load(); }

void emit(Level level, const std::string& message) {
  init(static_cast<Level>(g_level.load()), g_rank.load());  // installs the sink on first use
  // Records are text for people: control characters and bytes that are not UTF-8 are escaped (util/text.h).
  BOOST_LOG_SEV(boost::log::trivial::logger::get(), to_boost(level)) << printable(message);
}

void init(Level level, int rank) {
  namespace logging = boost::log;
  g_rank = rank;
  g_level = static_cast<int>(level);
  std::call_once(g_once, [] {
    using backend_t = logging::sinks::text_ostream_backend;
    auto backend = boost::make_shared<backend_t>();
    backend->add_stream(boost::shared_ptr<std::ostream>(&std::clog, [](std::ostream*) {}));
    backend->auto_flush(true);
    auto sink = boost::make_shared<logging::sinks::synchronous_sink<backend_t>>(backend);
    sink->set_formatter([](const logging::record_view& rec, logging::formatting_ostream& os) {
      int r = g_rank.load();
      if (r >= 0) os << "[rank " << r << "] ";
      // "error: text", and for a message that carries its rule id ("[id] text") "error[id]: text", as
      // megatron-run prints its diagnostics (util/rule_id.h).
      const auto message = rec[logging::expressions::smessage];
      const std::string_view text = message ? std::string_view(*message) : std::string_view();
      if (auto sev = rec[logging::trivial::severity])
        os << rule_heading(logging::trivial::to_string(*sev), text);
      else
        os << text;
    });
    logging::core::get()->remove_all_sinks();
    logging::core::get()->add_sink(sink);
  });
  logging::core::get()->set_filter(logging::trivial::severity >= to_boost(level));
}

}  // namespace mr::log
