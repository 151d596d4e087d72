// What shell completion offers for megatron-run's own surface: each command of the command table (commands.h) and
// its options, read from the very option descriptions the commands parse with (their *Options::add_to), so a new
// command or option completes without being listed here. The values of --format come from its description, which
// names the choices as "a|b|c".
#include <boost/algorithm/string.hpp>

#include <algorithm>

#include "commands.h"

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

// A command's completion, from its row of the command table.
CompletionCommand command(const Command& c) {
  po::options_description desc(c.name);
  if (c.add_options) c.add_options(desc);
  CompletionCommand out{c.name, c.summary, options_of(desc), c.megatron_flags, c.files};
  if (c.words) out.words = c.words();
  out.one_word = c.one_word;
  return out;
}

}  // namespace

CompletionSpec completion_spec() {
  CompletionSpec s;
  for (const Command& c : commands()) {  // the default command, then every command word (help last)
    if (*c.name)
      s.commands.push_back(command(c));
    else
      s.run = command(c);
  }
  for (CompletionOption& o : s.run.options)  // RunOptions has --help: its words here, and it is listed once
    if (o.flag == "--help") o.help = "every Megatron flag, grouped";
  return s;
}

}  // namespace mr::app
