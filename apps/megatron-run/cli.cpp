#include "cli.h"

#include <algorithm>
#include <cctype>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <string_view>

#include "commands.h"
#include "config/converters.h"
#include "config/limits.h"
#include "config/parse/argparse.h"
#include "config/print.h"
#include "launch/option_spelling.h"
#include "util/log.h"
#include "util/text.h"

namespace mr::app {

Diagnostic parse_warning(const std::string& w, const std::string& file) {
  Diagnostic d{Diagnostic::Level::Warning, kDeprecatedFlagRule.id, w, {}, {}, kStageParse};
  if (auto id = split_rule_id(w)) d.rule = std::move(id->first), d.message = std::move(id->second);
  // "FILE:12: ...": the place, as errors show it (`check` passes FILE; otherwise any path without blanks).
  size_t i = 0;
  if (!file.empty()) {
    if (d.message.rfind(file + ":", 0) == 0) i = file.size() + 1;
  } else if (const size_t colon = d.message.find(':'); colon != std::string::npos && colon > 0 &&
                                                        d.message.find(' ') > colon) {
    i = colon + 1;
  }
  if (i > 0) {
    size_t j = i;
    while (j < d.message.size() && std::isdigit(static_cast<unsigned char>(d.message[j]))) ++j;
    if (j > i && d.message.compare(j, 2, ": ") == 0) d.where = d.message.substr(0, j);
  }
  d.message = without_where(d.message, d.where);
  return d;
}

void print_warning_diagnostic(const Diagnostic& d) {
  if (log::enabled(log::Level::warning)) print_diagnostic(std::cerr, d);
}

void log_warnings(const Outcome& out) {
  for (const auto& w : out.parsed.warnings) print_warning_diagnostic(parse_warning(w));
  for (const auto& d : out.diagnostics)
    if (d.level == Diagnostic::Level::Warning) print_warning_diagnostic(d);
}

int report_failure(const CommonOptions& common, const std::vector<Diagnostic>& diagnostics) {
  for (const auto& d : diagnostics)
    if (d.level == Diagnostic::Level::Error) print_diagnostic(std::cerr, d);
  if (common.format == "json") std::cout << failure_json(1, diagnostics) << "\n";
  return 1;
}

int report_failure(const CommonOptions& common, const Diagnostic& diagnostic) {
  return report_failure(common, std::vector<Diagnostic>{diagnostic});
}

namespace {

// Whether the command line asks for JSON on stdout (the --format that wins is json: --format json, --format=json)
// for a command whose JSON is a result document: then a usage error is reported on stdout as one JSON document
// too. The words are read as the command's parser reads them (`words`): the run command's by read_run_words
// (torchrun's prefixes, `--fo json`, up to its program, whose own words are never ours), check's by read_check_words
// (its own options' prefixes, before "--"), another command's as its parser does (exact names, before any "--").
// The last --format given wins, as in every parser of ours (`--format json --format text` asks for text).
bool wants_json(const std::vector<std::string>& args, CommandWords whose) {
  const std::vector<std::string>* words = &args;
  std::vector<std::string> read;
  size_t end = args.size();
  if (whose == CommandWords::Run) {
    launch::ProgramSplit ps = read_run_words(args, /*lenient=*/true);
    read = std::move(ps.words);
    words = &read;
    end = std::min(ps.end_of_options, read.size());
  } else if (whose == CommandWords::Check) {
    if (std::optional<std::vector<std::string>> spelled = read_check_words(args, /*lenient=*/true)) {
      read = std::move(*spelled);
      words = &read;
    }
  } else if (const Command* c = args.empty() ? nullptr : find_command(args.front()); c && !c->json_result) {
    return false;  // a command whose JSON is no result document (schema; `json_result` in commands.h)
  }
  bool json = false;
  for (size_t i = 0; i < end; ++i) {
    const std::string& w = (*words)[i];
    if (w == "--") break;
    if (w.rfind("--format=", 0) == 0) {
      json = w == "--format=json";
    } else if (w == "--format" && i + 1 < end) {
      json = (*words)[i + 1] == "json";
      ++i;  // its value, whatever it is
    }
  }
  return json;
}

}  // namespace

int report_usage_error(const std::vector<std::string>& args, const UsageError& e, CommandWords words) {
  print_usage_error(std::cerr, e);
  // The place is the diagnostic's `where`, not repeated in its message.
  if (wants_json(args, words)) std::cout << failure_json(2, {usage_diagnostic(e)}) << "\n";
  return 2;
}

void print_command_usage(std::ostream& os, const std::string& cmd) {
  const Command* command = find_command(cmd);
  if (command && !command->usage.empty())
    os << command->usage;
  else
    print_usage(os);
}

void print_usage(std::ostream& os) {
  os << "megatron-run — parse, validate and launch Megatron-LM training jobs\n\n"
        "usage:\n";
  for (const Command& c : commands()) os << c.synopsis;
  os << "\n"
        "config options:\n"
        "  --config FILE                YAML/JSON arguments (repeatable; later files and then the command line win)\n"
        "  --allow-unset-env            keep ${VAR} literal when VAR is unset instead of failing\n"
        "  --env-placeholder DIR        replace an unset ${VAR} by DIR/VAR\n"
        "  --format text|json           output format of the resolved arguments; --format argv|argv0, --explain\n"
        "                               and --parse-only imply --dry-run; --format json without it validates as\n"
        "                               the launch would and prints JSON, starting nothing\n"
        "  --explain FLAG               print where a resolved value came from (repeatable)\n"
        "  --provenance                 with --format json: every value as {\"value\": v, \"source\": \"...\"}\n"
        "  --parse-only                 stop after parsing: print the arguments before validation\n"
        "  --format argv                print the Megatron command line the configs and flags stand for\n"
        "                               (one shell-quoted line; argv0: NUL-separated words, for xargs -0)\n"
        "  --log-level LEVEL            trace, debug, info, warning (default), error, fatal\n\n"
        "target environment (what validation assumes about the cluster):\n"
        "  --target-gpu-arch sm_XY      default sm_90 (a launch: this machine's GPU; none without one)\n"
        "  --target-te-version V        Transformer Engine version, default 2.20.2\n"
        "  --target-torch-version V     default 2.15.0\n"
        "  --target-flashinfer-version V  default 0.6.4\n"
        "  --target-env FILE.yaml       a YAML file: gpu_arch, te_version, torch_version, flashinfer_version,\n"
        "                               env: {NAME: value} (docs/config-files.md)\n"
        "  --world-size N               world size to check (overrides WORLD_SIZE, which a launch reads only\n"
        "                               with RANK, inside a job: docs/launch.md)\n\n"
        "launching (without --dry-run; torchrun's options, also spelled with _, defaults from PET_<NAME>;\n"
        "docs/launch.md):\n"
        "  --nproc-per-node N|cpu|gpu|auto  start N local workers (torchrun's environment, rank-prefixed output)\n"
        "  --nnodes M --node-rank R     a job of M nodes, this one R (static rendezvous)\n"
        "  --nnodes MIN:MAX             c10d: an elastic job, in rounds (later nodes join, lost ones are left out)\n"
        "  --master-addr A --master-port P  the workers' MASTER_ADDR/MASTER_PORT (node 0; default 127.0.0.1 and, on\n"
        "                               one node, a free port, with several nodes 29500)\n"
        "  --launcher-port P            static, several nodes: the launchers' store on node 0 (default master port+1)\n"
        "  --rdzv-backend static|c10d   c10d: node ranks in the order the launchers arrive at --rdzv-endpoint\n"
        "  --rdzv-endpoint HOST[:PORT]  c10d: the launchers' store (default port 29400); static: the master\n"
        "  --rdzv-id ID                 the job's run id (TORCHELASTIC_RUN_ID), the same on every node\n"
        "  --join-timeout S             seconds for every node to arrive (default 600), else every node fails\n"
        "  --rdzv-conf K=V,...          torchrun's: join_timeout, is_host (c10d), last_call_timeout (elastic);\n"
        "                               other keys named, not used\n"
        "  --local-addr ADDR            the workers' MASTER_ADDR where the rendezvous picks it (c10d node 0)\n"
        "  --standalone                 one node, 127.0.0.1, a free port, a fresh run id\n"
        "  --max-restarts N             restart the worker group after a failure, N times (all nodes together)\n"
        "  --log-dir DIR                per-rank logs: DIR/<run id>_<unique>/attempt_<n>/<local rank>/\n"
        "  -r, --redirects 0-3|R:0-3,.. streams to the log files only (1 stdout, 2 stderr, 3 both)\n"
        "  -t, --tee 0-3|R:0-3,...      streams to the log files and the console\n"
        "  --local-ranks-filter R,...   local ranks whose output reaches the console\n"
        "  --log-line-prefix-template T console prefix with ${role_name} ${rank} ${local_rank} ${hostname}\n"
        "  --duplicate-stdout-filters A,B  tee'd lines containing A or B also to <attempt>/filtered_stdout.log\n"
        "                               (--duplicate-stderr-filters: filtered_stderr.log)\n"
        "  --virtual-local-rank         each worker: LOCAL_RANK=0 and only its own GPU in CUDA_VISIBLE_DEVICES\n"
        "  --signals-to-handle SIG,...  the signals that stop the workers (passed on to them)\n"
        "  --numa-binding MODE          each worker on CPUs near its GPU: node, socket, exclusive, core-complex\n"
        "  --logs-specs default         torchrun's LogsSpecs: only torch's own, the --log-dir layout\n"
        "  --event-log-handler H        null (torchrun's default: no record), dynamic_rendezvous, console (the\n"
        "                               launcher's torchelastic record, one JSON line on stderr at the end)\n"
        "  --term-timeout S             SIGTERM -> SIGKILL grace when stopping the workers (default 30;\n"
        "                               torchrun's --shutdown-timeout)\n"
        "  --role NAME                  the workers' ROLE_NAME (default: default)\n"
        "  --print-completion SHELL     bash, zsh or fish: megatron-run's completion script, printed; exit 0\n"
        "  --start-method M, --run-path accepted, not used (every worker is a fresh process: fork and exec)\n"
        "  --monitor-interval S         accepted, not used (megatron-run reacts to an exit at once)\n"
        "  --no-python, -m MODULE, --no-append-args, --no-file-checks  the program's form (above)\n"
        "  --bring-up-only              stop after the process groups and their self-check (no training run; only\n"
        "                               megatron-run's own worker: refused with a PROGRAM, named in a dry run)\n"
        "  --heartbeat-timeout S        a rank, a node's launcher or a store silent for S seconds fails the job\n"
        "                               (default 30)\n"
        "  Under torchrun (torchrun --no-python ... megatron-run ...) or SLURM (one task per rank), megatron-run\n"
        "  joins the job; under srun --ntasks-per-node=1 with --nproc-per-node, each task is one node's launcher.\n";
}

std::string picture_title(const CommonOptions& common, const std::string& what) {
  std::string names;
  for (const std::string& c : common.configs) {
    const size_t slash = c.find_last_of('/');
    names += (names.empty() ? "" : " + ") + (slash == std::string::npos ? c : c.substr(slash + 1));
  }
  return (names.empty() ? std::string("megatron-run") : names) + ": " + what;
}

namespace {
constexpr const char* kLogLevels = "trace|debug|info|warning|error|fatal";  // log::parse_level's (and "warn")
}  // namespace

UsageError invalid_choice(const std::string& flag, const std::string& value, std::string_view choices) {
  std::string listed;
  for (size_t b = 0; b <= choices.size();) {
    size_t e = std::min(choices.find('|', b), choices.size());
    listed += (listed.empty() ? "'" : ", '") + std::string(choices.substr(b, e - b)) + "'";
    b = e + 1;
  }
  return UsageError("argument " + option_name(flag) + ": invalid choice: '" + abbreviate(value) + "' (choose from " + listed + ")", {flag});
}

void CommonOptions::add_to(po::options_description& desc, const char* formats) {
  // --format's and --log-level's choices are checked for every occurrence (argparse's `choices`), an overridden
  // one too (split_args); invocation() checks the value that wins again.
  const std::vector<std::string> extra = extra_formats(formats);
  auto set_format = [this, extra](const std::string& v) {
    format = v;
    format_choice(v, extra);
  };
  auto set_level = [this](const std::string& v) {
    log_level = v;
    if (!log::parse_level(v)) throw invalid_choice("--log-level", v, kLogLevels);
  };
  // The target options refuse an empty value: most likely a CI variable that is not set (--target-te-version
  // "$TE"), which would otherwise validate for a target with nothing installed, or none given, without a word.
  auto empty_refused = [](const char* flag, const char* expected) {
    return UsageError(std::string("argument ") + flag + ": expected " + expected +
                          ", got '' (an unset or empty variable in the command line?)",
                      {flag}, "", kInvalidValueRule.id);
  };
  auto set_target = [empty_refused](std::string& to, const char* flag, const char* expected) {
    return [&to, flag, expected, empty_refused](const std::string& v) {
      if (v.empty()) throw empty_refused(flag, expected);
      to = v;
    };
  };
  auto set_version = [empty_refused](std::optional<std::string>& to, const char* flag) {
    return [&to, flag, empty_refused](const std::string& v) {
      if (v.empty()) throw empty_refused(flag, "a version (e.g. 2.9.0) or none");
      to = v;
    };
  };
  desc.add_options()
      ("config", po::value(&configs)->composing(), "config file")
      ("format", po::value<std::string>()->notifier(set_format), formats)
      ("allow-unset-env", po::bool_switch(&allow_unset_env), "keep unset ${VAR}")
      ("env-placeholder", po::value<std::string>()->notifier([this](const std::string& v) { env_placeholder = v; }),
       "unset ${VAR} -> DIR/VAR")
      ("log-level", po::value<std::string>()->notifier(set_level), (std::string(kLogLevels) + ": log level").c_str())
      ("target-env", po::value<std::string>()->notifier(set_target(target_env_file, "--target-env", "a YAML file")),
       "target environment file")
      ("target-gpu-arch", po::value<std::string>()->notifier(set_target(gpu_arch, "--target-gpu-arch", "sm_XY or none")),
       "sm_XY")
      ("target-te-version", po::value<std::string>()->notifier(set_version(te_version, "--target-te-version")), "version")
      ("target-torch-version", po::value<std::string>()->notifier(set_version(torch_version, "--target-torch-version")),
       "version")
      ("target-flashinfer-version",
       po::value<std::string>()->notifier(set_version(flashinfer_version, "--target-flashinfer-version")), "version")
      ("world-size", po::value<std::string>()->notifier([this](const std::string& v) { world_size = v; }), "world size");
}

std::vector<std::string> CommonOptions::extra_formats(std::string_view formats) {
  std::vector<std::string> extra;
  for (size_t at = 0;;) {
    const size_t bar = formats.find('|', at);
    const std::string f(formats.substr(at, bar == std::string_view::npos ? std::string_view::npos : bar - at));
    if (f != "text" && f != "json") extra.push_back(f);
    if (bar == std::string_view::npos) break;
    at = bar + 1;
  }
  return extra;
}

void CommonOptions::format_choice(const std::string& format, const std::vector<std::string>& extra_formats) {
  bool extra = std::find(extra_formats.begin(), extra_formats.end(), format) != extra_formats.end();
  if (format != "text" && format != "json" && !extra) {
    std::string allowed = "text|json";
    for (const std::string& f : extra_formats) allowed += "|" + f;
    throw invalid_choice("--format", format, allowed);
  }
}

Invocation CommonOptions::invocation(const std::vector<std::string>& extra_formats) const {
  format_choice(format, extra_formats);
  auto lvl = log::parse_level(log_level);
  if (!lvl) throw invalid_choice("--log-level", log_level, kLogLevels);
  log::init(*lvl);
  Invocation inv;
  inv.config_files = configs;
  inv.config.allow_unset_env = allow_unset_env;
  if (env_placeholder) {
    // An empty DIR is most likely a CI variable that is not set (--env-placeholder "$PH"): refused, not taken as
    // the option left out (which would report each ${VAR} as unset, the option not named).
    if (env_placeholder->empty())
      throw UsageError("argument --env-placeholder: expected a directory, got '' (an unset or empty variable in the "
                       "command line?)",
                       {"--env-placeholder"}, "", kInvalidValueRule.id);
    std::string dir = *env_placeholder;
    inv.config.env = [dir](const std::string& name) -> std::optional<std::string> {
      if (const char* v = std::getenv(name.c_str())) return std::string(v);
      return dir + "/" + name;
    };
  }
  if (!target_env_file.empty()) inv.env.load_file(target_env_file);
  if (!gpu_arch.empty()) {
    inv.env.gpu_arch = gpu_arch;
    try {
      inv.env.arch_major();  // validates the spelling
    } catch (const UsageError& e) {
      throw UsageError(std::string("argument --target-gpu-arch: ") + e.what(), {"--target-gpu-arch"});
    }
  }
  // Versions are checked when given, not when a rule first compares them (a rule may never do).
  auto version = [](const char* flag, const std::string& v) {
    try {
      check_version(v);
    } catch (const UsageError& e) {
      throw UsageError(std::string("argument ") + flag + ": " + e.what(), {flag});
    }
    return v;
  };
  if (te_version) inv.env.te_version = version("--target-te-version", *te_version);
  if (torch_version) inv.env.torch_version = version("--target-torch-version", *torch_version);
  if (flashinfer_version) inv.env.flashinfer_version = version("--target-flashinfer-version", *flashinfer_version);
  if (world_size) {
    // Python's int(): blanks around it, a sign, underscores between digits; a number past 64 bits is out of range.
    long long n = 0;
    try {
      n = parse_py_int(*world_size);
    } catch (const ConvError& e) {
      throw UsageError(std::string("argument --world-size: ") + e.what(), {"--world-size"}, "", "input.world-size");
    }
    if (n < 1) throw UsageError("argument --world-size: must be at least 1", {"--world-size"}, "", "input.world-size");
    inv.world_size = n;
  }
  return inv;
}

UsageError unrecognized_word(const std::string& word) { return unrecognized_words({word}); }

UsageError unrecognized_words(const std::vector<std::string>& words, const std::string& note) {
  // Bounded (config/limits.h), as the Megatron parser's list: 100k stray words make a message of a few lines.
  std::string msg = "unrecognized arguments:";
  std::vector<std::string> flags;
  for (size_t k = 0; k < words.size() && k < limits::kMaxListedArguments; ++k) {
    msg += " " + echo_word(words[k]);
    if (words[k].size() > 1 && words[k][0] == '-') flags.push_back(words[k]);
  }
  if (words.size() > limits::kMaxListedArguments)
    msg += " ... (" + std::to_string(words.size() - limits::kMaxListedArguments) + " more)";
  return UsageError(msg + note, std::move(flags), {}, kUnknownArgumentRule.id);
}

std::string own_option_hint(const UsageError& e, const std::string& cmd) {
  if (std::string_view(e.what()).find("unrecognized arguments:") == std::string_view::npos) return {};
  const CompletionSpec spec = completion_spec();
  const CompletionCommand* command = cmd.empty() ? &spec.run : nullptr;
  for (const CompletionCommand& c : spec.commands)
    if (!command && c.name == cmd) command = &c;
  if (!command) return {};
  std::vector<std::string> names;
  for (const CompletionOption& o : command->options) names.push_back(o.flag);
  std::string hint;
  for (const std::string& f : e.flags)
    if (f.rfind("--", 0) == 0)
      if (auto near = closest_words(f.substr(0, f.find('=')), names, 2); !near.empty())
        hint += "\n  " + echo_word(f) + ": did you mean " + near.front() + " (megatron-run's own option)?";
  return hint;
}

UsageError with_own_option_hint(const UsageError& e, const std::string& cmd) {
  const std::string hint = own_option_hint(e, cmd);
  if (hint.empty()) return e;
  return UsageError(e.what() + hint, e.flags, e.where, e.id);
}

std::vector<std::string> option_strings(const std::string& flag, const po::options_description* desc) {
  if (!desc || flag.rfind("--", 0) != 0) return {flag};
  auto has = [desc](const std::string& n) { return desc->find_nothrow(n, false, false, false) != nullptr; };
  if (!has(flag.substr(2))) return {flag};
  for (const auto* table : {&kTorchrunShortOptions, &kShortSwitches})  // -h is --help for every command (main.cpp)
    for (const auto& [short_name, long_name] : *table)
      if (long_name == flag) return {short_name, flag};
  std::string dashed = flag.substr(2), underscored = dashed;
  std::replace(dashed.begin(), dashed.end(), '_', '-');
  std::replace(underscored.begin(), underscored.end(), '-', '_');
  if (dashed != underscored && has(dashed) && has(underscored)) return {"--" + dashed, "--" + underscored};
  return {flag};
}

namespace {

// An option as argparse names it in a refusal: every option string of its action joined with '/'
// ("-r/--redirects", "--nproc-per-node/--nproc_per_node").
std::string argparse_name(const std::string& flag, const po::options_description* desc) {
  std::string name;
  for (const std::string& s : option_strings(flag, desc)) name += (name.empty() ? "" : "/") + s;
  return name;
}

}  // namespace

const po::options_description& command_options(std::string_view cmd) {
  // Each command's description, built once from its row of the command table (the options it parses with).
  static std::map<std::string, std::unique_ptr<po::options_description>, std::less<>> descs;
  auto it = descs.find(cmd);
  if (it == descs.end()) {
    auto desc = std::make_unique<po::options_description>(std::string(cmd));
    if (const Command* c = find_command(cmd); c && c->add_options) c->add_options(*desc);
    it = descs.emplace(std::string(cmd), std::move(desc)).first;
  }
  return *it->second;
}

std::string option_name(const std::string& flag, std::string_view cmd) {
  return argparse_name(flag, &command_options(cmd));
}

void validate(boost::any& v, const std::vector<std::string>& words, PyFloat*, int) {
  po::validators::check_first_occurrence(v);
  const std::string& word = po::validators::get_single_string(words);
  try {
    v = PyFloat{parse_py_float(word)};
  } catch (const ConvError&) {
    throw po::invalid_option_value(word);  // own_option_error: "invalid float value: 'word'"
  }
}

UsageError own_option_error(const po::error& e, const std::vector<std::string>& words,
                            const po::options_description* desc) {
  if (const auto* u = dynamic_cast<const po::unknown_option*>(&e)) return unrecognized_word(u->get_option_name());
  const auto* named = dynamic_cast<const po::error_with_option_name*>(&e);
  const std::string flag = named ? named->get_option_name() : std::string();
  if (flag.empty()) return UsageError(e.what());
  auto refusal = [&](const std::string& why) {
    return UsageError("argument " + argparse_name(flag, desc) + ": " + why, {flag});
  };
  // The value of `--flag=value` (Boost keeps it only inside its own message).
  auto adjacent_value = [&]() -> std::string {
    for (const std::string& w : words)
      if (w.size() > flag.size() && w.compare(0, flag.size(), flag) == 0 && w[flag.size()] == '=')
        return w.substr(flag.size() + 1);
    return {};
  };
  // The type argparse names when a value does not convert ("int ", "float "; "" for a string or unknown option).
  auto type_name = [&]() -> std::string {
    const po::option_description* od =
        desc && flag.rfind("--", 0) == 0 ? desc->find_nothrow(flag.substr(2), false, false, false) : nullptr;
    const po::value_semantic* s = od ? od->semantic().get() : nullptr;
    if (dynamic_cast<const po::typed_value<int>*>(s) || dynamic_cast<const po::typed_value<long long>*>(s))
      return "int ";
    if (dynamic_cast<const po::typed_value<double>*>(s) || dynamic_cast<const po::typed_value<PyFloat>*>(s))
      return "float ";
    return "";
  };
  if (const auto* s = dynamic_cast<const po::invalid_command_line_syntax*>(&e)) {
    switch (s->kind()) {
      case po::invalid_syntax::missing_parameter: return refusal("expected one argument");
      case po::invalid_syntax::empty_adjacent_parameter: {
        // `--world-size=`: argparse takes '' as the value, which a number's conversion refuses. (split_own_options
        // hands Boost `--name` and '' instead, so this is for a parser that does not.)
        const std::string type = type_name();
        return refusal(type.empty() ? "expected one argument" : "invalid " + type + "value: ''");
      }
      case po::invalid_syntax::extra_parameter:
        return launch::ignored_explicit_argument(argparse_name(flag, desc), adjacent_value(), flag);
      default: break;
    }
  }
  if (dynamic_cast<const po::invalid_option_value*>(&e)) {
    // Boost: "the argument ('abc') for option '--world-size' is invalid"; argparse: "invalid int value: 'abc'"
    // (the type's name: int, float; an option of another type: "invalid value").
    const std::string w = e.what();
    const size_t a = w.find("('"), b = w.rfind("')");
    return refusal("invalid " + type_name() + "value: '" +
                   abbreviate(a != std::string::npos && b != std::string::npos && b > a ? w.substr(a + 2, b - a - 2) : "") +
                   "'");
  }
  if (const auto* v = dynamic_cast<const po::validation_error*>(&e)) {
    switch (v->kind()) {
      case po::validation_error::multiple_values_not_allowed: return refusal("expected one argument");
      case po::validation_error::at_least_one_value_required: return refusal("expected at least one argument");
      default: break;
    }
  }
  if (dynamic_cast<const po::required_option*>(&e))
    return UsageError("the following arguments are required: " + flag, {flag});
  return UsageError(e.what(), {flag});
}

namespace {

// split_args without the translation of Boost's errors.
SplitArgs split_own_options(const std::vector<std::string>& args, int first_index, const po::options_description& desc,
                            bool allow_unregistered) {
  auto origin = [&](size_t i) {
    return Provenance{Provenance::Kind::Cli, "argv[" + std::to_string(first_index + static_cast<int>(i)) + "]"};
  };
  // Words from the first "--" on are never ours; they go to the Megatron parser untouched.
  size_t dd = args.size();
  for (size_t i = 0; i < args.size(); ++i)
    if (args[i] == "--") {
      dd = i;
      break;
    }
  // Only our own options (and the word after one that takes a value) go to Boost.Program_options: its parser
  // erases consumed words from the front of its list, which is quadratic in the number of words, and a Megatron
  // command line may have 100k of them. A word is ours when it is `--name` or `--name=value` for an option of
  // `desc` (exact names: no guessing, no short options), as Boost would decide.
  // An option given again overrides the earlier one, as argparse does (torchrun's and Megatron's parsers), in
  // either of torchrun's spellings (--nproc-per-node and --nproc_per_node are one option): the earlier words are
  // ours and dropped. Options that collect every value (--config) keep them all. Like argparse, which converts
  // every occurrence, an earlier value is still checked (its conversion and its option's own check): an invalid
  // one is refused as it would be alone, even when a later one overrides it.
  std::vector<std::string> head;
  std::vector<size_t> head_index;  // argv position of each word given to Boost
  std::vector<bool> to_boost(dd, false), overridden(dd, false), empty_value(dd, false);
  std::map<std::string, std::pair<size_t, size_t>> last;  // option (dashes) -> its latest words [first, end)
  std::vector<std::pair<size_t, size_t>> earlier;          // the overridden occurrences' words, in order
  for (size_t i = 0; i < dd; ++i) {
    const std::string& w = args[i];
    if (w.size() < 3 || w[0] != '-' || w[1] != '-') continue;
    size_t eq = w.find('=');
    std::string name = w.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    const po::option_description* od = desc.find_nothrow(name, /*approx=*/false, false, false);
    if (!od) continue;
    if (eq != std::string::npos && od->semantic()->max_tokens() == 0)  // `--dry-run=x`, `--quiet=`: refused
      throw launch::ignored_explicit_argument(argparse_name("--" + name, &desc), w.substr(eq + 1), w.substr(0, eq));
    if (eq != std::string::npos && eq + 1 == w.size()) empty_value[i] = true;  // `--name=`: argparse's '' (below)
    const size_t first = i;
    to_boost[i] = true;
    if (eq == std::string::npos && od->semantic()->max_tokens() > 0 && i + 1 < dd) {
      // As argparse reads a command line (Boost would take any next word): a word that looks like an option (one
      // of ours, `--config=a b` too, or any other '-' word but a negative number) is not this option's value.
      // But --explain's value is a Megatron flag's name (`--explain --num-layers`), which looks like one by design;
      // one of megatron-run's own options after it (`--explain --format json`) is still not its value.
      const std::string& next = args[i + 1];
      const size_t next_eq = next.find('=');
      const bool ours = next.size() > 2 && next.rfind("--", 0) == 0 &&
                        desc.find_nothrow(next.substr(2, next_eq == std::string::npos ? next_eq : next_eq - 2),
                                          /*approx=*/false, false, false);
      if (ours || (argparse_reads_as_option(next) && od->long_name() != "explain"))
        throw UsageError("argument " + argparse_name("--" + name, &desc) + ": expected one argument" +
                             (ours && od->long_name() == "explain"
                                  ? " (" + echo_word(next.substr(0, next_eq)) + " is one of megatron-run's own "
                                    "options, not a Megatron argument --explain can explain)"
                                  : std::string()),
                         {w});
      to_boost[++i] = true;
    }
    if (od->semantic()->is_composing()) continue;
    std::replace(name.begin(), name.end(), '_', '-');
    auto [at, fresh] = last.try_emplace(name, first, i + 1);
    if (fresh) continue;
    for (size_t k = at->second.first; k < at->second.second; ++k) to_boost[k] = false, overridden[k] = true;
    earlier.push_back(at->second);
    at->second = {first, i + 1};
  }
  // A word as Boost gets it: `--name=` (an empty value, which argparse takes as '') as `--name` and '' (Boost refuses
  // an empty adjacent value outright), so a string option gets '' and a number's conversion refuses it.
  auto boost_words = [&](size_t i, std::vector<std::string>& to, std::vector<size_t>* index) {
    const std::string& w = args[i];
    for (std::string word : empty_value[i] ? std::vector<std::string>{w.substr(0, w.size() - 1), ""}
                                           : std::vector<std::string>{w}) {
      to.push_back(std::move(word));
      if (index) index->push_back(i);
    }
  };
  for (size_t i = 0; i < dd; ++i)
    if (to_boost[i]) boost_words(i, head, &head_index);
  namespace cls = po::command_line_style;
  int style = cls::allow_long | cls::long_allow_adjacent | cls::long_allow_next;  // no guessing, no short options
  // Each overridden occurrence alone, converted and its notifier run, before the words that count: what it sets
  // is set again by the occurrence that overrides it (the same option, either spelling, notified below).
  std::sort(earlier.begin(), earlier.end());  // the first invalid word on the command line is the one named
  for (const auto& [from, to] : earlier) {
    std::vector<std::string> words;
    for (size_t k = from; k < to; ++k) boost_words(k, words, nullptr);
    po::command_line_parser one(words);
    one.options(desc).style(style);
    one.allow_unregistered();
    po::variables_map checked;
    po::store(one.run(), checked);
    po::notify(checked);
  }
  po::command_line_parser parser(head);
  parser.options(desc).style(style);
  parser.allow_unregistered();
  po::parsed_options parsed = parser.run();
  SplitArgs out;
  po::store(parsed, out.vm);
  po::notify(out.vm);
  // Words given to Boost that it did not take for an option (a value it saw as the next option's name cannot
  // happen: it throws) stay Megatron's.
  std::vector<bool> ours = overridden;
  size_t pos = 0;
  for (const auto& opt : parsed.options) {
    if (opt.unregistered || opt.position_key >= 0) {
      pos += opt.original_tokens.size();
      continue;
    }
    for (size_t k = 0; k < opt.original_tokens.size() && pos < head.size(); ++k) ours[head_index[pos++]] = true;
  }
  out.rest.reserve(args.size());
  std::vector<std::string> stray;  // a command that takes no other words: every one is listed, as argparse does
  bool positional = false;
  for (size_t i = 0; i < dd; ++i)
    if (!ours[i]) {
      if (!allow_unregistered) {
        stray.push_back(args[i]);
        positional = positional || !argparse_reads_as_option(args[i]);
        continue;
      }
      out.rest.push_back(Token{args[i], origin(i)});
    }
  if (!stray.empty()) throw unrecognized_words(stray, positional ? " (this command takes no positional words)" : "");
  for (size_t i = dd; i < args.size(); ++i) out.rest.push_back(Token{args[i], origin(i)});
  return out;
}

}  // namespace

SplitArgs split_args(const std::vector<std::string>& args, int first_index, const po::options_description& desc,
                     bool allow_unregistered) {
  try {
    return split_own_options(args, first_index, desc, allow_unregistered);
  } catch (const po::error& e) {
    throw own_option_error(e, args, &desc);
  }
}

}  // namespace mr::app
