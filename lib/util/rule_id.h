// Messages that carry a rule id. A refusal with a stable id travels as "[id] text" (the id first, no blank inside
// the brackets) from wherever it is raised: a validation rule, a worker, the runtime, the checkpoint code. Every
// place that prints one for people turns it into the same heading, "error[id]: text" or "warning[id]: text", so
// a diagnostic reads alike whichever layer raised it, and `megatron-run rules ID` finds the id it shows.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace mr {

// "[id] text": how a message carries its rule id.
std::string with_rule_id(std::string_view id, std::string_view text);

// A message that starts with its rule id, "[id] text" (an id as rules spell them: "stage.name", of lower-case
// letters, digits, '.', '-', '_'): {id, text}; nullopt otherwise ("[rank 3] ..." is no id).
std::optional<std::pair<std::string, std::string>> split_rule_id(std::string_view message);

// The message without its leading "[id] " (the message itself when it has none).
std::string without_rule_id(std::string_view message);

// The heading of a message at `level` ("error", "warning", ...): "LEVEL[id]: text" for "[id] text", else
// "LEVEL: message". Not escaped: the printers escape the whole line (util/text.h's printable).
std::string rule_heading(std::string_view level, std::string_view message);
// The same for an id given apart: "LEVEL[id]: text", or "LEVEL: text" for an empty id.
std::string rule_heading(std::string_view level, std::string_view id, std::string_view text);

}  // namespace mr
