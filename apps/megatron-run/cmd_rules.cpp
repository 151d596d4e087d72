// `megatron-run rules [ID...]`: every rule (or the named ones) with its id, level, stage and description
// (docs/validation.md), as text, markdown or JSON: validation's, and those of the parser's warnings, the launcher
// and the training run's workers (stages parse, plan, launch, run; config/rule.h).
#include <algorithm>
#include <iostream>
#include <string_view>
#include <unordered_map>

#include "cli.h"
#include "config/parse/argparse.h"
#include "config/rule.h"
#include "config/validate/sections.h"
#include "util/text.h"

namespace mr::app {

namespace {

const char* level_name(const Rule& r) { return r.level == Rule::Level::Error ? "error" : "warning"; }

// Where the rule is declared, from the source tree's root: __FILE__ is absolute, or relative to the build folder
// (ccache's CCACHE_BASEDIR rewrites it to "../lib/..."); the last "lib/" or "apps/" component starts the tree's path.
std::string source_of(const Rule& r) {
  const std::string file = r.file;
  size_t best = std::string::npos;
  for (const char* top : {"lib/", "apps/"}) {
    if (file.rfind(top, 0) == 0 && best == std::string::npos) best = 0;
    const size_t slash = file.rfind(std::string("/") + top);
    if (slash != std::string::npos && (best == std::string::npos || slash + 1 > best)) best = slash + 1;
  }
  return best == std::string::npos ? file : file.substr(best);
}

std::string markdown_header() { return "| rule | level | stage | what it checks | source |\n|---|---|---|---|---|\n"; }

std::string markdown_row(const Rule& r) {
  std::string desc = r.description;
  for (size_t p = 0; (p = desc.find('|', p)) != std::string::npos; p += 2) desc.replace(p, 1, "\\|");
  return std::string("| `") + r.id + "` | " + level_name(r) + " | " + r.stage + " | " + desc + " | " + source_of(r) +
         " |\n";
}

std::string text_line(const Rule& r) {
  return std::string(r.id) + "  [" + level_name(r) + "]  " +
         (std::string(r.stage) == kStageValidateArgs ? "" : std::string("(") + r.stage + ") ") + r.description + "\n";
}

std::string json_object(const Rule& r) {
  return "{\"id\": " + json_quote(r.id) + ", \"level\": " + json_quote(level_name(r)) + ", \"stage\": " +
         json_quote(r.stage) + ", \"description\": " + json_quote(r.description) + ", \"source\": " +
         json_quote(source_of(r) + ":" + std::to_string(r.line)) + "}";
}

// The rules `ids` name, in that order (each once). An id may be a family, the part before the dot ("batch-size"
// or "batch-size."): every rule of it. An id no rule has is a usage error with the closest ids (those that start
// with it first).
std::vector<const Rule*> named_rules(const std::vector<std::string>& ids) {
  const std::vector<const Rule*> all = all_rules();
  std::unordered_map<std::string_view, const Rule*> by_id;
  std::vector<std::string> known;
  for (const Rule* r : all) by_id.emplace(r->id, r), known.push_back(r->id);
  std::vector<const Rule*> out;
  auto add = [&out](const Rule* r) {
    if (std::find(out.begin(), out.end(), r) == out.end()) out.push_back(r);
  };
  std::string unknown;  // ids no rule has
  size_t unknown_count = 0;
  for (const std::string& id : ids) {
    if (auto it = by_id.find(id); it != by_id.end()) {
      add(it->second);
      continue;
    }
    const std::string family = !id.empty() && id.back() == '.' ? id : id + ".";
    bool any = false;
    if (family.size() > 1)
      for (const Rule* r : all)
        if (std::string_view(r->id).rfind(family, 0) == 0) add(r), any = true;
    if (any) continue;
    if (++unknown_count > 10) continue;  // a few are enough to see the mistake
    std::string line = "'" + id + "'";
    std::vector<std::string> near;
    for (const std::string& k : known)  // the ids that start with it ("batch-siz")
      if (!id.empty() && k.rfind(id, 0) == 0) near.push_back(k);
    if (near.empty()) near = closest_words(id, known, 3);
    if (near.empty() && !id.empty())  // an id without its section ("world-size-divisible"): the ids ending so
      for (const std::string& k : known)
        if (k.size() > id.size() && k.compare(k.size() - id.size(), id.size(), id) == 0 && k[k.size() - id.size() - 1] == '.')
          near.push_back(k);
    if (near.size() > 3) near.resize(3);
    for (size_t k = 0; k < near.size(); ++k) line += (k ? ", " : " (did you mean ") + near[k];
    if (!near.empty()) line += "?)";
    unknown += (unknown.empty() ? "" : "; ") + line;
  }
  if (unknown_count > 10) unknown += "; ... (" + std::to_string(unknown_count - 10) + " more)";
  if (!unknown.empty())
    throw UsageError("rules: unknown rule id " + unknown +
                     "; `megatron-run rules` lists every rule: validation's, the parser's warnings and refusals (parse.*, usage), the "
                     "launcher's (launch.*) and the workers' (checkpoint.*, dist.*, run.*); `rules FAMILY`, e.g. "
                     "`rules batch-size` or `rules checkpoint`, lists a family's");
  return out;
}

}  // namespace

std::string rules_markdown() {
  std::string out =
      "# Validation rules\n\n"
      "Generated by `megatron-run rules --format markdown` from the rule declarations (`MR_RULE` and its kin:\n"
      "validate_args, sanity and init rules in `lib/config/validate/`, OptimizerConfig's in\n"
      "`lib/config/optimizer_config_rules.cpp`, bad input in `lib/config/input_rules.cpp`, the launcher's checks\n"
      "before a launch in `apps/megatron-run/job_layout.cpp`; each row names its file); do not edit by hand.\n"
      "Errors end validation with exit status 1; warnings are printed and validation goes on.\n\n"
      "Validation runs in stages, in this order; every diagnostic carries its stage (`stage` in\n"
      "`check --format json` and `--dry-run --format json`), so Megatron's own verdict (`validate_args`) can be told\n"
      "from megatron-run's (`sanity`, `init`). The sanity stage runs only once Megatron's chain has passed; the one\n"
      "sanity rule that can fire inside Megatron's chain is `sanity.integer-overflow` (a size computed there that\n"
      "does not fit in 64 bits, where Python would carry on). The init stage holds what Megatron would refuse only\n"
      "at initialisation, once its ranks have started (model construction: TransformerConfig, MoE, layers per\n"
      "pipeline stage); it runs in `--dry-run`, `check` and before every launch, and the process-group layout\n"
      "(`init.process-groups`, checked by the launcher) follows it. Before a launch of megatron-run's own worker,\n"
      "`init.training-run` (what that run cannot run) and `init.lr-schedule` (the learning-rate scheduler a training\n"
      "run builds after its model) follow; for the user's program and in `--dry-run` the schedule is a warning (the\n"
      "program may not train), and neither runs in `check`.\n\n";
  int i = 0;
  for (const Stage& st : validation_stages()) {
    out += std::string("Stage `") + st.name + "`: " + st.description + ".\n\n";
    for (const Section& s : st.sections) out += std::to_string(++i) + ". " + s.name + "\n";
    out += "\n";
  }
  out +=
      "The table also lists the rules of what megatron-run says outside validation, each declared where it is raised\n"
      "(or, for the workers', in the torch-free library of their layer): stage `parse` (the argument parser's\n"
      "warnings and refusals, `usage` for a usage error without an id of its own, and the launcher's warnings about\n"
      "the program's words), `plan` (the schedule command), `launch` (the\n"
      "launcher's refusals and notices: docs/launch.md) and `run` (the training run's workers: `run.*`, `checkpoint.*`,\n"
      "`dist.*`; docs/run.md, docs/checkpoints.md, docs/distributed.md). Their tests run processes or need LibTorch:\n"
      "the CTest `runtime_rules_tested` checks that a test names each of them.\n\n";
  out += markdown_header();
  for (const Rule* r : all_rules()) out += markdown_row(*r);
  out += "\n" + std::to_string(all_rules().size()) + " rules.\n";
  return out;
}

void RulesOptions::add_to(po::options_description& desc) {
  desc.add_options()("format", po::value(&format), "text|markdown|json");
}

int cmd_rules(const std::vector<std::string>& args) {
  po::options_description desc("rules");
  RulesOptions opts;
  opts.add_to(desc);
  const std::string& format = opts.format;
  std::vector<std::string> ids;
  SplitArgs split = split_args(args, 2, desc, /*allow_unregistered=*/true);
  std::vector<std::string> stray;
  for (Token& t : split.rest) (argparse_reads_as_option(t.text) ? stray : ids).push_back(std::move(t.text));
  if (!stray.empty()) throw unrecognized_words(stray);
  if (format != "text" && format != "markdown" && format != "json") throw invalid_choice("--format", format, "text|markdown|json");
  const std::vector<const Rule*> rules = ids.empty() ? all_rules() : named_rules(ids);
  if (format == "markdown") {
    if (ids.empty()) {
      std::cout << rules_markdown();
    } else {  // the table's rows of the named rules
      std::cout << markdown_header();
      for (const Rule* r : rules) std::cout << markdown_row(*r);
    }
  } else if (format == "json") {
    std::cout << "[";
    for (size_t i = 0; i < rules.size(); ++i) std::cout << (i ? ",\n " : "\n ") << json_object(*rules[i]);
    std::cout << "\n]\n";
  } else {
    for (const Rule* r : rules) std::cout << text_line(*r);
  }
  return 0;
}

}  // namespace mr::app
