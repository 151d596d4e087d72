// `megatron-run check FILE|DIR...`: validate many configs in one process, for CI (a DIR: its *.yaml and *.yml files).
#include <sys/stat.h>

#include <cctype>
#include <algorithm>
#include <chrono>
#include <iostream>
#include <optional>
#include <string_view>
#include <unordered_set>

#include "cli.h"
#include "config/check_report.h"
#include "config/input_rules.h"
#include "config/rule.h"
#include "config/parse/argparse.h"
#include "config/parse/config_dir.h"
#include "config/parse/config_file.h"
#include "config/parse/read_file.h"
#include "launch.h"
#include "launch/option_spelling.h"
#include "config/print.h"
#include "config/validate/resolve.h"
#include "util/text.h"

namespace mr::app {

namespace {
struct FileResult {
  std::string file;
  int exit = 0;
  std::vector<Diagnostic> diags;
  std::optional<Namespace> resolved;
};

// A path as `check` compares it with the paths met before: without "." parts and repeated slashes
// ("./t/a//ok.yaml" and "t/a/ok.yaml" are one file; ".." and links are left as they are).
std::string path_key(const std::string& path) {
  std::string key = !path.empty() && path[0] == '/' ? "/" : "";
  for (size_t at = 0; at <= path.size();) {
    const size_t slash = std::min(path.find('/', at), path.size());
    const std::string_view part = std::string_view(path).substr(at, slash - at);
    if (!part.empty() && part != ".") key.append(key.empty() || key.back() == '/' ? "" : "/").append(part);
    at = slash + 1;
  }
  return key;
}

// check's own option words before the first "--" as the run command reads its own (read_run_words, argparse's
// allow_abbrev): an unambiguous prefix written out in full (`--world 4` is --world-size 4, `--form=github`), an
// ambiguous one refused naming the candidates. Megatron's flags are no options of check's, so no Megatron flag
// makes a prefix ambiguous here. nullopt when no word changes (`args` may hold tens of thousands of file names).
// `lenient`: an ambiguous prefix stays as written (read_check_words, cli.h).
std::optional<std::vector<std::string>> spelled_words(const std::vector<std::string>& args,
                                                      const po::options_description& desc, bool lenient) {
  static const Schema no_flags(nullptr, nullptr);
  launch::OptionSpelling spelling;
  spelling.lenient = lenient;
  std::vector<std::string> value_options;
  for (const auto& od : desc.options()) {
    if (od->long_name() == "files") continue;
    const std::string name = "--" + od->long_name();
    spelling.long_options.push_back(name);
    if (od->semantic()->max_tokens() > 0)
      value_options.push_back(name);
    else
      spelling.switches.push_back({name});
  }
  std::optional<std::vector<std::string>> out;
  for (size_t i = 0; i < args.size() && args[i] != "--"; ++i) {
    if (!argparse_reads_as_option(args[i])) continue;
    std::string w = spelling.spell(args[i], no_flags);
    const size_t at = i;
    // A value option without '=': the next word is its value, not an option (`--config -x.yaml`).
    if (std::find(value_options.begin(), value_options.end(), w) != value_options.end()) ++i;
    if (w == args[at]) continue;
    if (!out) out = args;
    (*out)[at] = std::move(w);
  }
  return out;
}

// check's options as it parses them, with its FILE arguments.
void add_check_options(po::options_description& desc, CheckOptions& opts) {
  opts.add_to(desc);
  desc.add_options()("files", po::value<std::vector<std::string>>()->composing(), "files");
}

}  // namespace

std::optional<std::vector<std::string>> read_check_words(const std::vector<std::string>& args, bool lenient) {
  po::options_description desc("check");
  CheckOptions opts;
  add_check_options(desc, opts);
  return spelled_words(args, desc, lenient);
}

void CheckOptions::add_to(po::options_description& desc) {
  common.add_to(desc, kFormats);
  desc.add_options()("quiet", po::bool_switch(&quiet), "only errors (no warnings in text, github and junit; no summary when every file is valid)")
      ("yaml-cfg", po::bool_switch(&yaml_cfg), "every FILE is a Megatron --yaml-cfg file (as --dry-run --yaml-cfg FILE)");
}

int cmd_check(const std::vector<std::string>& args) {
  po::options_description desc("check");
  CheckOptions opts;
  add_check_options(desc, opts);
  CommonOptions& common = opts.common;
  bool& quiet = opts.quiet;
  const std::optional<std::vector<std::string>> spelled = spelled_words(args, desc, /*lenient=*/false);
  SplitArgs split = split_args(spelled ? *spelled : args, 2, desc, /*allow_unregistered=*/true);
  std::vector<std::string> files, stray;
  files.reserve(split.rest.size());
  // The first "--" ends the options (POSIX guideline 10; argparse too): every word after it is a FILE, one that
  // starts with '-' included (`find ... -exec megatron-run check -- {} +`, `xargs -0 megatron-run check --`).
  // split_args leaves that "--" and the words after it in `rest`; a "--" before it was never ours.
  bool after_dashes = false;
  for (Token& t : split.rest) {
    if (!after_dashes && t.text == "--") {
      after_dashes = true;
      continue;
    }
    // Before "--", a word argparse reads as an option is none of check's (a negative number is a file).
    (!after_dashes && argparse_reads_as_option(t.text) ? stray : files).push_back(std::move(t.text));
  }
  if (!stray.empty()) {
    // A word that names an existing file (`check -dash.yaml`): a file to check, which "--" lets through.
    const bool names_file = std::any_of(stray.begin(), stray.end(), [](const std::string& w) {
      struct stat st {};
      return ::lstat(w.c_str(), &st) == 0;
    });
    throw unrecognized_words(stray, names_file ? " (to check a file whose name starts with '-', put it after --: "
                                                 "`megatron-run check -- FILE`; see `megatron-run help check`)"
                                               : " (see `megatron-run help check`)");
  }
  std::vector<Token>().swap(split.rest);  // memory stays independent of the number of files, but for their names
  if (files.empty()) throw UsageError("the following arguments are required: FILE");  // argparse's words
  Invocation base = common.invocation(CommonOptions::extra_formats(CheckOptions::kFormats));
  // A --config BASE that cannot be read (missing, a directory, too large) is a mistake of the invocation, not of
  // each FILE: refused once, before any report, as any usage error (exit 2).
  for (const std::string& b : base.config_files) check_config_file(b);
  // A --world-size other than the enclosing job's: each file is checked for it, with a warning naming both sizes,
  // once on stderr (--quiet hides it, as every warning) or, with --format json, github or junit, among each file's
  // diagnostics, since every file was checked for it.
  const std::optional<Diagnostic> world_size_warning = world_size_not_job(base);

  // Each file's result is printed as soon as it is known and then dropped, so memory does not grow with the
  // number of files; with --format json the entries are written one by one inside one array (stdout is still
  // exactly one JSON document); with --format junit the testcases are spooled to a temporary file and the
  // document, whose counts come first, is written at the end (config/check_report.h). Text, github and json
  // flush stdout after each file: a pipe (a CI runner's log) is fully buffered, and a job killed at its timeout
  // must still show the results known by then.
  const bool json = common.format == "json", github = common.format == "github", junit = common.format == "junit";
  std::optional<JunitReport> report;
  if (junit) report.emplace();
  // The summary counts files: a folder reported in a file's place (one with no YAML file, one that cannot be
  // listed) is counted as a folder.
  size_t checked = 0, bad = 0, entries = 0, empty_folders = 0, unlisted_folders = 0;
  int worst = 0;
  bool internal = false;
  // Text: once on stderr. The machine formats carry it among each file's diagnostics, where a CI reads them (a
  // GitHub annotation, a JUnit testcase's output; review diff41 #2: github and junit showed it on stderr only).
  const bool world_size_per_file = json || github || junit;
  if (world_size_warning && !world_size_per_file && !quiet) print_warning_diagnostic(*world_size_warning);
  if (json) std::cout << "[";
  // One file's check and report. `walk_error`: a failure of a directory's walk reported in a file's place (a
  // folder that cannot be listed, a directory without YAML files; config/parse/config_dir.h).
  auto check_one = [&](const std::string& f, const std::optional<UsageError>& walk_error) {
    const auto started = std::chrono::steady_clock::now();
    FileResult r;
    r.file = f;
    Invocation inv = base;
    if (opts.yaml_cfg)  // the path `--dry-run --yaml-cfg F` takes: argparse's namespace, then the file replaces it
      for (const char* w : {"--yaml-cfg", f.c_str()})
        inv.cli.push_back(Token{w, Provenance{Provenance::Kind::Cli, "check --yaml-cfg"}});
    else
      inv.config_files.push_back(f);
    try {
      if (walk_error) throw *walk_error;
      if (opts.yaml_cfg)
        check_input_file(f, "--yaml-cfg file", {"--yaml-cfg"});
      else
        check_config_file(f);  // a missing or non-regular file fails before its namespace is built
      Outcome o = resolve(Schema::megatron(), inv);
      if (o.ok())
        if (auto d = init_check(o)) o.diagnostics.push_back(*d);  // the init stage (launch.h)
      if (o.ok())  // a warning: what Megatron's save would fail on at its first save (launch.h)
        if (auto d = save_settings_check(o, /*trains=*/false)) o.diagnostics.push_back(*d);
      r.exit = o.exit_code();
      if (o.ok()) r.resolved = std::move(o.parsed.ns);
      r.diags = std::move(o.diagnostics);
      for (const auto& w : o.parsed.warnings) r.diags.push_back(parse_warning(w, f));
      if (world_size_warning && world_size_per_file) r.diags.push_back(*world_size_warning);
    } catch (const UsageError& e) {
      // An unreadable, malformed or refused file fails that file only.
      r.exit = 2;
      // The place is the diagnostic's own (where), not repeated in its message, in every layout.
      r.diags.push_back(usage_diagnostic(e));
    } catch (const std::exception& e) {
      // A bug of ours on one file: reported for that file (exit 3 for the run), the other files still checked
      // and the JSON document still complete.
      r.exit = 3;
      r.diags.push_back(
          Diagnostic{Diagnostic::Level::Error, kInternalRule.id, std::string("internal error: ") + e.what(), {}, {},
                     kInternalRule.stage});
    }
    internal = internal || r.exit == 3;
    worst = std::max(worst, r.exit);  // 2 (a file unreadable or malformed) over 1 (a rule failed)
    if (!walk_error) {
      ++checked;
      bad += r.exit ? 1 : 0;
    } else {
      ++(walk_error->id == kInputNoConfigFilesRule.id ? empty_folders : unlisted_folders);
    }
    if (json) {
      std::cout << (entries ? ",\n " : "\n ") << "{\"file\": " << json_quote(r.file) << ", \"ok\": " << (r.exit ? "false" : "true")
                << ", \"exit\": " << r.exit << ", \"errors\": [";
      bool first = true;
      for (const auto& d : r.diags) {
        std::cout << (first ? "" : ", ") << diagnostic_json(d);  // with the diagnostic's stage (config/print.h)
        first = false;
      }
      std::cout << "], \"resolved\": " << (r.resolved ? namespace_json(*r.resolved) : std::string("null")) << "}";
    } else if (junit) {
      report->add(r.file, r.exit, r.diags, !quiet,
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
    } else {
      for (const auto& d : r.diags) {
        if (quiet && d.level == Diagnostic::Level::Warning) continue;
        // Escaped (util/text.h): a file name or message with control characters prints as text; github: one
        // workflow command, GitHub's escapes on top.
        // A place in a --config BASE names the checked file too ("(checking FILE)").
        std::cout << (github ? github_command(r.file, d, base.config_files) : check_text_line(r.file, d, base.config_files));
      }
    }
    if (!junit) std::cout.flush();  // synced with stdio: fflush(stdout) too
    ++entries;
  };
  // Each file once, where it is first met: a file named and also found in a folder named (`check t/a
  // t/a/ok.yaml`), in two folders named, or named twice is checked and counted once. Memory: one key per path met.
  std::unordered_set<std::string> seen;
  auto first_time = [&](const std::string& path) { return seen.insert(path_key(path)).second; };
  for (const std::string& f : files) {
    if (!is_directory(f)) {
      if (first_time(f)) check_one(f, std::nullopt);
      continue;
    }
    // A directory: its YAML files, each as if named here (config/parse/config_dir.h), listed when it is reached
    // (memory holds one directory's paths at a time, beside the words and the keys above).
    for (const ConfigDirEntry& e : list_config_dir(f))
      if (first_time(e.path)) check_one(e.path, e.error);
  }
  if (json) {
    // No summary: the document holds each file's `ok`, and stderr stays empty for a caller that merges it in
    // (`2>&1 | jq`).
    std::cout << "\n]\n";
  } else {
    if (junit) report->finish(std::cout);
    // The summary is plain text on stderr (never a workflow command nor part of the XML); --quiet: nothing at all
    // when every file is valid.
    if (!quiet || bad > 0 || empty_folders > 0 || unlisted_folders > 0) {
      std::cerr << checked << " file(s) checked, " << bad << " invalid";
      if (empty_folders) std::cerr << ", " << empty_folders << " folder(s) with no *.yaml or *.yml file";
      if (unlisted_folders) std::cerr << ", " << unlisted_folders << " folder(s) that cannot be listed";
      std::cerr << "\n";
    }
  }
  return internal ? 3 : worst;
}

}  // namespace mr::app
