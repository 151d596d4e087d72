// The default command: resolve the arguments and, with --dry-run, print them.
#include <iostream>

#include "cli.h"
#include "launch.h"
#include "config/print.h"
#include "config/validate/resolve.h"
#include "config/parse/yaml_cfg.h"
#include "util/log.h"
#include "util/text.h"

namespace mr::app {

int cmd_run(const std::vector<std::string>& args) {
  po::options_description desc("megatron-run");
  CommonOptions common;
  common.add_to(desc);
  LaunchOptions launch_opts;  // --nproc-per-node, --nnodes, ... (launch.cpp)
  launch_opts.add_to(desc);
  bool dry_run = false, help = false, version = false, parse_only = false, provenance = false;
  std::vector<std::string> explain;
  desc.add_options()("dry-run", po::bool_switch(&dry_run), "resolve and print, do not run")
      ("parse-only", po::bool_switch(&parse_only), "stop after parsing (no validation)")
      ("provenance", po::bool_switch(&provenance), "JSON output: each value with its source")
      ("explain", po::value(&explain)->composing(), "show provenance")
      ("help", po::bool_switch(&help), "help")
      ("version", po::bool_switch(&version), "version");
  SplitArgs split = split_args(args, 1, desc, /*allow_unregistered=*/true);
  if (help) {
    print_usage(std::cout);
    std::cout << "\n";
    print_help(std::cout, Schema::megatron(), "megatron-run");
    return 0;
  }
  if (version) {
    std::cout << "megatron-run " << MR_VERSION << "\n";
    return 0;
  }
  Invocation inv = common.invocation(/*extra_formats=*/{"argv"});
  launch_opts.apply(inv);  // validate for the world size the job will have
  inv.cli = split.rest;
  if (common.format == "argv") {
    // The Megatron command line the configs and flags stand for, one word per line.
    for (const Token& t : parse_invocation(Schema::megatron(), inv).argv) std::cout << t.text << "\n";
    return 0;
  }
  Outcome out;
  if (parse_only) {
    out.parsed = parse_invocation(Schema::megatron(), inv);
    // --yaml-cfg's command-line combination checks belong to parsing.
    if (out.parsed.yaml_cfg) out.diagnostics = out.parsed.yaml_cfg->errors;
  } else {
    out = resolve(Schema::megatron(), inv);
  }
  for (const auto& w : out.parsed.warnings) MR_LOG(warning) << w;
  for (const auto& d : out.diagnostics)
    if (d.level == Diagnostic::Level::Warning) MR_LOG(warning) << diagnostic_text(d);
  if (!out.ok()) {
    for (const auto& d : out.diagnostics)
      if (d.level == Diagnostic::Level::Error) print_diagnostic(std::cerr, d);
    // --format json: stdout is one JSON document in every case; here the diagnostics, each with its stage.
    if (common.format == "json") std::cout << failure_json(1, out.diagnostics) << "\n";
    return 1;
  }
  const Namespace& ns = out.parsed.ns;
  for (const std::string& e : explain) {
    std::string dest = e;
    if (dest.rfind("--", 0) == 0) {
      const Arg* a = Schema::megatron().find_flag(dest);
      if (!a) throw UsageError("argument --explain: unknown flag " + e, {"--explain"});
      dest = a->dest();
    }
    for (char& c : dest)
      if (c == '-') c = '_';
    if (!ns.has(dest)) throw UsageError("argument --explain: no resolved argument '" + dest + "'", {"--explain"});
    std::cout << dest << " = " << printable(ns[dest].py_str(), false) << "    ("
              << printable(ns.provenance(dest).describe(), false) << ")\n";
  }
  if (!explain.empty()) return 0;
  if (!dry_run) return launch(out, args);
  if (common.format == "json")
    std::cout << namespace_json(ns, provenance) << "\n";
  else if (out.parsed.yaml_cfg)
    print_yaml_table(std::cout, ns);  // sections print as namespace(...), as Megatron's table shows them
  else
    print_megatron_table(std::cout, ns);
  return 0;
}

}  // namespace mr::app
