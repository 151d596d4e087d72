// `megatron-run check FILE...`: validate many configs in one process, for CI.
#include <iostream>

#include "cli.h"
#include "config/print.h"
#include "config/validate.h"
#include "util/text.h"

namespace mr::app {

namespace {
struct FileResult {
  std::string file;
  int exit = 0;
  std::vector<Diagnostic> diags;
  std::optional<Namespace> resolved;
};

}  // namespace

int cmd_check(const std::vector<std::string>& args) {
  po::options_description desc("check");
  CommonOptions common;
  common.add_to(desc);
  bool quiet = false;
  desc.add_options()("quiet", po::bool_switch(&quiet), "only errors")(
      "files", po::value<std::vector<std::string>>()->composing(), "files");
  SplitArgs split = split_args(args, 2, desc, /*allow_unregistered=*/true);
  std::vector<std::string> files;
  for (const Token& t : split.rest) {
    if (!t.text.empty() && t.text[0] == '-' && t.text.size() > 1)
      throw UsageError("check: unknown option " + t.text + " (see `megatron-run help`)", {t.text});
    files.push_back(t.text);
  }
  if (files.empty()) throw UsageError("check: no config files given");
  Invocation base = common.invocation();

  std::vector<FileResult> results;
  results.reserve(files.size());
  for (const std::string& f : files) {
    FileResult r;
    r.file = f;
    Invocation inv = base;
    inv.config_files.push_back(f);
    try {
      Outcome o = resolve(Schema::megatron(), inv);
      r.exit = o.exit_code();
      if (o.ok()) r.resolved = std::move(o.parsed.ns);
      r.diags = std::move(o.diagnostics);
      for (const auto& w : o.parsed.warnings) r.diags.push_back(Diagnostic{Diagnostic::Level::Warning, "parse.deprecated-flag", w, {}, {}, kStageParse});
    } catch (const UsageError& e) {
      r.exit = 2;
      r.diags.push_back(Diagnostic{Diagnostic::Level::Error, "usage", e.what(), e.flags, e.where, kStageParse});
    }
    results.push_back(std::move(r));
  }

  int worst = 0;
  for (const auto& r : results) worst = std::max(worst, r.exit ? 1 : 0);
  if (common.format == "json") {
    std::cout << "[";
    for (size_t i = 0; i < results.size(); ++i) {
      const auto& r = results[i];
      std::cout << (i ? ",\n " : "\n ") << "{\"file\": " << json_quote(r.file) << ", \"ok\": " << (r.exit ? "false" : "true")
                << ", \"exit\": " << r.exit << ", \"errors\": [";
      bool first = true;
      for (const auto& d : r.diags) {
        std::cout << (first ? "" : ", ") << diagnostic_json(d);
        first = false;
      }
      std::cout << "], \"resolved\": " << (r.resolved ? namespace_json(*r.resolved) : std::string("null")) << "}";
    }
    std::cout << "\n]\n";
  } else {
    for (const auto& r : results) {
      for (const auto& d : r.diags) {
        if (quiet && d.level == Diagnostic::Level::Warning) continue;
        std::string where = d.where.empty() ? r.file : d.where;
        // Usage messages from files already start with file:line.
        std::string msg = d.message;
        if (!d.where.empty() && msg.rfind(d.where + ": ", 0) == 0) msg = msg.substr(d.where.size() + 2);
        std::cout << printable(where, false) + ": " + (d.level == Diagnostic::Level::Error ? "error" : "warning") +
                         "[" + printable(d.rule, false) + "]: " + printable(msg) + "\n";
      }
    }
    size_t bad = 0;
    for (const auto& r : results) bad += r.exit ? 1 : 0;
    std::cerr << results.size() << " file(s) checked, " << bad << " invalid\n";
  }
  return worst;
}

}  // namespace mr::app
