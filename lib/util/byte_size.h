// Sizes of memory written by people ("80GiB", "141 GB", "512MiB", "1.5TiB", "1073741824"), and as megatron-run
// prints them ("12.34 GiB", "3.6 MiB").
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace mr {

// The number of bytes `s` names: a non-negative decimal number, optionally followed (spaces allowed) by a unit:
// B, KiB, MiB, GiB, TiB (powers of 1024) or KB, MB, GB, TB (powers of 1000); units are case-insensitive
// ("80gib"). A bare number is bytes. nullopt for anything else (no number, an unknown unit, a negative or
// non-finite value, more than 2^60 bytes).
std::optional<double> parse_byte_size(std::string_view s);

inline constexpr double kMiB = 1024.0 * 1024.0;
inline constexpr double kGiB = 1024.0 * kMiB;

// Bytes in GiB with two decimals: "12.34 GiB" ("12.34" without the unit, for tables with the unit in the header).
std::string format_gib(double bytes, bool unit = true);
// Bytes in MiB with one decimal: "3.6 MiB".
std::string format_mib(double bytes);

}  // namespace mr
