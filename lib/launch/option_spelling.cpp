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
  auto prefix_of = [&](const std::string& o) { return o.size() > name.size() && o.compare(0, name.size(), name) == 0; };
  std::vector<std::string> matches;
  for (const std::string& o : long_options)
    if (prefix_of(o)) matches.push_back(o);
  if (matches.empty()) return word;  // no option of ours: Megatron's parser names it
  // Also the start of a Megatron flag (--local-ran: --local-rank and --local-ranks-filter): the user may have cut
  // that flag short, which Megatron's parser does not allow, so it is not silently taken as ours; refused as
  // ambiguous, naming the Megatron flags too.
  std::vector<std::string> megatron;
  for (const Arg& a : schema.args())
    for (const std::string& f : a.flags)
      if (prefix_of(f) && std::find(megatron.begin(), megatron.end(), f) == megatron.end()) megatron.push_back(f);
  if (matches.size() == 1 && megatron.empty()) return matches.front() + tail;
  std::string listed;
  for (const std::string& m : matches) listed += (listed.empty() ? "" : ", ") + m;
  if (matches.size() == 1) {  // ours alone, but a Megatron flag starts so too (ambiguous among ours: argparse's list)
    const size_t shown = std::min<size_t>(megatron.size(), 5);
    for (size_t i = 0; i < shown; ++i) listed += ", " + megatron[i];
    if (megatron.size() > shown) listed += " and " + std::to_string(megatron.size() - shown) + " more Megatron flags";
    listed += " (Megatron's flags are never abbreviated: write the one you mean in full)";
  }
  throw UsageError("ambiguous option: " + abbreviate(word) + " could match " + listed, {name});
}

}  // namespace mr::launch
