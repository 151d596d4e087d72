// A boolean word read as the PROGRAM after a switch (switch_value_hint.h).
#include "switch_value_hint.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <string_view>

#include "config/schema.h"

namespace mr::app {

namespace {

bool boolean_word(std::string w) {
  std::transform(w.begin(), w.end(), w.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  static constexpr std::array<std::string_view, 10> kWords = {"true", "false", "yes", "no", "on",
                                                             "off",  "1",     "0",   "y",  "n"};
  return std::find(kWords.begin(), kWords.end(), w) != kWords.end();
}

bool falsy(std::string w) {
  std::transform(w.begin(), w.end(), w.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return w == "false" || w == "no" || w == "off" || w == "0" || w == "n";
}

// The switch of the same argument that does the opposite (--no-X for --X, --X for --no-X), if the schema has one.
std::string opposite(const Schema& schema, const Arg& a, const std::string& flag) {
  const std::string body = flag.substr(2);
  const std::string other = body.rfind("no-", 0) == 0 ? "--" + body.substr(3) : "--no-" + body;
  const Arg* o = schema.find_flag(other);
  return o && o != &a && std::string_view(o->dest()) == a.dest() && o->is_switch() ? other : "";
}

}  // namespace

std::string switch_value_hint(const std::vector<std::string>& words, size_t program_start,
                              const std::vector<std::string>& own_switches) {
  if (program_start == 0 || program_start >= words.size()) return "";
  const std::string& prev = words[program_start - 1];
  const std::string& word = words[program_start];
  if (prev.size() < 3 || prev.rfind("--", 0) != 0 || prev.find('=') != std::string::npos || !boolean_word(word))
    return "";
  const std::string read_as = "; " + prev + " takes no value, so '" + word + "' was read as the PROGRAM to launch";
  if (std::find(own_switches.begin(), own_switches.end(), prev) != own_switches.end())
    return read_as + " (megatron-run's option " + prev + " is on when given, off when left out)";
  const Schema& schema = Schema::megatron();
  const Arg* a = schema.find_flag(prev);
  if (!a || !a->is_switch()) return "";
  if (!falsy(word)) return read_as + " (give " + prev + " alone to turn it on)";
  const std::string other = opposite(schema, *a, prev);
  if (!other.empty()) return read_as + " (use " + other + " to turn it off)";
  return read_as + " (Megatron has no --no- form of it: to turn it off, leave " + prev +
         " out of the command line; a config file turns it off with `" + prev.substr(2) + ": false`)";
}

std::string split_value_hint(const std::vector<std::string>& words, size_t program_start) {
  if (program_start == 0 || program_start >= words.size()) return "";
  const std::string& word = words[program_start];
  const std::string& prev = words[program_start - 1];
  // `--flag=value word` or `--flag value word`: the flag before the program took one value already.
  std::string flag, value;
  if (prev.rfind("--", 0) == 0 && prev.find('=') != std::string::npos) {
    flag = prev.substr(0, prev.find('='));
    value = prev.substr(prev.find('=') + 1);
  } else if (program_start >= 2 && words[program_start - 2].rfind("--", 0) == 0 && prev.rfind("-", 0) != 0) {
    flag = words[program_start - 2];
    value = prev;
  } else {
    return "";
  }
  // A word that looks like a program (a path, a .py file) is one the user meant as such, misspelled or missing;
  // and only a text value (a string, a path, JSON) can hold blanks at all.
  if (word.find('/') != std::string::npos || (word.size() > 3 && word.compare(word.size() - 3, 3, ".py") == 0))
    return "";
  const Arg* a = Schema::megatron().find_flag(flag);
  if (!a || a->is_switch() || a->nargs_kind != 0) return "";
  if (a->spec->type != ArgType::Str && a->spec->type != ArgType::Json && a->spec->type != ArgType::Path) return "";
  return "; " + flag + " takes one value ('" + value + "'), so '" + word + "' after it was read as the PROGRAM (a " +
         "value with blanks in it is split into words unless it is quoted: " + flag + " '" + value + " " + word +
         " ...')";
}

}  // namespace mr::app
