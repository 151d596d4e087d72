#include "launch/option_spelling.h"

#include <algorithm>

#include "config/diagnostic.h"
#include "util/text.h"

namespace mr::launch {

std::string OptionSpelling::spell(const std::string& word, const Schema& schema) const {
  if (word.size() < 2 || word[0] != '-' || word == "--") return word;
  const std::string name = word.substr(0, word.find('='));
  const std::string tail = word.substr(name.size());  // "=VALUE" or ""
  // An exact name: Megatron's flag, or one of ours (a short option is written out in full).
  if (schema.find_flag(name) || std::find(long_options.begin(), long_options.end(), name) != long_options.end())
    return word;
  if (word[1] != '-') {
    for (const auto& [short_name, long_name] : short_options) {
      if (word == short_name) return long_name;
      if (word.rfind(short_name, 0) != 0) continue;
      std::string value = word.substr(short_name.size());
      if (value[0] == '=') value.erase(0, 1);  // -r=3: argparse splits at the '=' after an exact option string
      return long_name + "=" + value;
    }
    return word;
  }
  std::vector<std::string> matches;
  for (const std::string& o : long_options)
    if (o.size() > name.size() && o.compare(0, name.size(), name) == 0) matches.push_back(o);
  if (matches.empty()) return word;  // no option of ours: Megatron's parser names it
  if (matches.size() == 1) return matches.front() + tail;
  std::string listed;
  for (const std::string& m : matches) listed += (listed.empty() ? "" : ", ") + m;
  throw UsageError("ambiguous option: " + abbreviate(word) + " could match " + listed, {name});
}

}  // namespace mr::launch
