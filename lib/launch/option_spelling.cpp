#include "launch/option_spelling.h"

#include <algorithm>

#include "config/diagnostic.h"
#include "util/text.h"

namespace mr::launch {

UsageError ignored_explicit_argument(const std::string& names, const std::string& value, const std::string& flag) {
  return UsageError("argument " + names + ": ignored explicit argument '" + abbreviate(value) + "'", {flag});
}

namespace {

// The option strings of the switch `name` is one of, or nullptr.
const std::vector<std::string>* switch_of(const std::vector<std::vector<std::string>>& switches, const std::string& name) {
  for (const auto& names : switches)
    if (std::find(names.begin(), names.end(), name) != names.end()) return &names;
  return nullptr;
}

// Every spelling of one flag: "--a/--b".
std::string joined(const std::vector<std::string>& names) { return join(names, "/"); }

}  // namespace

std::string OptionSpelling::spell(const std::string& word, const Schema& schema) const {
  if (word.size() < 2 || word[0] != '-' || word == "--") return word;
  const std::string name = word.substr(0, word.find('='));
  const std::string tail = word.substr(name.size());  // "=VALUE" or ""
  // `option` as given, `option` written out: a switch refuses a value, as argparse refuses one.
  auto written = [&](const std::string& option, const std::string& value_part) {
    if (!value_part.empty() && !lenient)
      if (const std::vector<std::string>* names = switch_of(switches, option))
        throw ignored_explicit_argument(joined(*names), value_part.substr(1), option);
    return option + value_part;
  };
  // An exact name: Megatron's flag, or one of ours (a short option is written out in full).
  if (schema.find_flag(name)) return word;
  if (std::find(long_options.begin(), long_options.end(), name) != long_options.end()) return written(name, tail);
  if (word[1] != '-') {
    for (const auto& [short_name, long_name] : short_options) {
      if (word == short_name) return long_name;
      if (word.rfind(short_name, 0) != 0) continue;
      std::string value = word.substr(short_name.size());
      if (value[0] == '=') value.erase(0, 1);  // -r=3: argparse splits at the '=' after an exact option string
      return long_name + "=" + value;
    }
    // A short switch with something attached: -m=x (argparse splits at the '='), or -mx where x is no short
    // option (argparse would read -m -x then; a chain of our short options, -mr3, is left to the parsers).
    for (const auto& names : switches) {
      const std::string& s = names.front();
      if (s.size() != 2 || s[1] == '-' || word.size() <= 2 || word.compare(0, 2, s) != 0) continue;
      const bool chained = word[2] != '=' && std::any_of(switches.begin(), switches.end(), [&](const auto& n) {
                             return n.front().size() == 2 && n.front()[1] == word[2];
                           });
      const bool chained_value = std::any_of(short_options.begin(), short_options.end(),
                                             [&](const auto& o) { return o.first[1] == word[2]; });
      if (lenient || chained || chained_value) return word;
      throw ignored_explicit_argument(joined(names), word.substr(word[2] == '=' ? 3 : 2), s);
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
  // ambiguous, naming the Megatron flags too. '_' and '-' are alike here: Megatron's flags are spelt with '-' only,
  // and a word with '_' may be one of them in an older spelling (--local_rank, which Megatron wrote until it was
  // renamed and torch.distributed.launch still passes: torchrun reads it as --local_ranks_filter).
  auto dashed = [](std::string s) {  // (an option word: two characters at least)
    std::replace(s.begin() + 2, s.end(), '_', '-');
    return s;
  };
  const std::string name_dashed = dashed(name);
  std::vector<std::string> megatron;
  std::string same_flag;  // the Megatron flag `name` is, but for '_' written for '-' (--local_rank: --local-rank)
  for (const Arg& a : schema.args())
    for (const std::string& f : a.flags) {
      if (f.size() < name.size() || dashed(f).compare(0, name.size(), name_dashed) != 0) continue;
      if (std::find(megatron.begin(), megatron.end(), f) == megatron.end()) megatron.push_back(f);
      if (f.size() == name.size()) same_flag = f;
    }
  if (matches.size() == 1 && megatron.empty()) return written(matches.front(), tail);
  if (lenient) return word;
  std::string listed = join(matches, ", ");
  if (matches.size() == 1) {  // ours alone, but a Megatron flag starts so too (ambiguous among ours: argparse's list)
    if (!same_flag.empty()) {  // that flag first: the likeliest meaning
      megatron.erase(std::find(megatron.begin(), megatron.end(), same_flag));
      megatron.insert(megatron.begin(), same_flag);
    }
    const size_t shown = std::min<size_t>(megatron.size(), 5);
    for (size_t i = 0; i < shown; ++i) listed += ", " + megatron[i];
    if (megatron.size() > shown) listed += " and " + std::to_string(megatron.size() - shown) + " more Megatron flags";
    if (!same_flag.empty())
      listed += " (" + name + " is Megatron's " + same_flag + " spelt with '_', which Megatron's parser does not "
                "take; torchrun would read it as " + matches.front() + ": write the one you mean in full)";
    else
      listed += " (Megatron's flags are never abbreviated: write the one you mean in full)";
  }
  throw UsageError("ambiguous option: " + abbreviate(word) + " could match " + listed, {name});
}

}  // namespace mr::launch
