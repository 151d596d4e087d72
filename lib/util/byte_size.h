// Sizes of memory written by people: "80GiB", "141 GB", "512MiB", "1.5TiB", "1073741824".
#pragma once

#include <optional>
#include <string_view>

namespace mr {

// The number of bytes `s` names: a non-negative decimal number, optionally followed (spaces allowed) by a unit:
// B, KiB, MiB, GiB, TiB (powers of 1024) or KB, MB, GB, TB (powers of 1000); units are case-insensitive
// ("80gib"). A bare number is bytes. nullopt for anything else (no number, an unknown unit, a negative or
// non-finite value, more than 2^60 bytes).
std::optional<double> parse_byte_size(std::string_view s);

}  // namespace mr
