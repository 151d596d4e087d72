// What shell completion offers for megatron-run's own surface: each command and its options, read from the very
// option descriptions the commands parse with (their *Options::add_to), so a new option completes without being
// listed here. The values of --format come from its description, which names the choices as "a|b|c".
#include <boost/algorithm/string.hpp>

#include <algorithm>

#include "cli.h"
#include "config/rule.h"
#include "launch.h"

namespace mr::app {

namespace {

// "text|json|svg" (a description that is nothing but choices, or starts with them and a colon).
std::vector<std::string> choices_of(const std::string& description) {
  std::string head = description.substr(0, description.find(':'));
  // Or a list in parentheses at its end, "(int|cpu|gpu|auto)": its words (a kind of value, "int", is typed).
  if (!description.empty() && description.back() == ')' && description.find(':') == std::string::npos) {
    const size_t open = description.rfind('(');
    if (open != std::string::npos && description.find('|', open) != std::string::npos) {
      std::vector<std::string> words = choices_of(description.substr(open + 1, description.size() - open - 2));
      words.erase(std::remove(words.begin(), words.end(), "int"), words.end());
      return words;
    }
  }
  if (head.find('|') == std::string::npos) return {};
  for (char c : head)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '|' || c == '-' || c == '_')) return {};
  std::vector<std::string> out;
  boost::split(out, head, boost::is_any_of("|"));
  return out;
}

std::vector<CompletionOption> options_of(const po::options_description& desc) {
  std::vector<CompletionOption> out;
  for (const auto& od : desc.options()) {
    const std::string& d = od->description();
    if (d == "not supported yet") continue;  // torchrun's options megatron-run refuses (launch.cpp)
    CompletionOption o{"--" + od->long_name(), od->semantic()->max_tokens() > 0, d, choices_of(d), false};
    o.files = o.flag == "--config" || o.flag == "--target-env";
    out.push_back(std::move(o));
  }
  // torchrun's spelling of an option offers what the option does.
  for (CompletionOption& o : out)
    if (o.help.rfind("torchrun's spelling of ", 0) == 0)
      for (const CompletionOption& of : out)
        if (of.flag == o.help.substr(std::string("torchrun's spelling of ").size())) o.choices = of.choices;
  return out;
}

template <class Options>
CompletionCommand command(const char* name, const char* help, bool megatron_flags, bool files = false) {
  Options opts;
  po::options_description desc(name);
  opts.add_to(desc);
  return CompletionCommand{name, help, options_of(desc), megatron_flags, files};
}

}  // namespace

CompletionSpec completion_spec() {
  CompletionSpec s;
  s.run = command<RunOptions>("", "validate, then start or join the job", true);
  for (CompletionOption& o : s.run.options)  // RunOptions has --help: its words here, and it is listed once
    if (o.flag == "--help") o.help = "every Megatron flag, grouped";
  s.commands = {
      command<CheckOptions>("check", "lint many configs in one process", false, true),
      command<SchemaOptions>("schema", "the argument table (JSON, text, JSON Schema, completion)", false),
      command<RulesOptions>("rules", "every validation rule id", false),  // and the ids as its words (below)
      command<TopologyOptions>("topology", "the process groups of a job (text, JSON, SVG, DOT)", true),
      command<ParamsOptions>("params", "parameters and their memory per rank (text, JSON, SVG)", true),
      command<ScheduleOptions>("schedule", "learning rate and weight decay over the run (text, CSV, JSON, SVG)",
                               true),
      // a new command goes here, anywhere in the list; `help` is not listed: it is appended below
  };
  for (CompletionCommand& c : s.commands)
    if (c.name == "rules")
      for (const Rule* r : all_rules()) c.words.push_back(r->id);
  // `help`, always last: its words are every command above.
  CompletionCommand help{"help", "megatron-run's usage", {}, false, false};
  for (const CompletionCommand& c : s.commands) help.words.push_back(c.name);
  s.commands.push_back(std::move(help));
  return s;
}

}  // namespace mr::app
