// The documented bounds on what megatron-run reads (docs/config-files.md, "Limits"). Inputs past a bound are
// refused with a usage error (exit 2) that names the bound and the file (and line, where there is one).
#pragma once

#include <cstddef>
#include <cstdint>

namespace mr::limits {

// Any file megatron-run reads: config files, --yaml-cfg, --target-env, --heterogeneous-layers-config-path,
// --result-rejected-tracker-filename, `check` arguments. Megatron's configs are a few KiB.
inline constexpr std::size_t kMaxInputFileBytes = std::size_t{64} << 20;  // 64 MiB

// A YAML document after alias expansion: the number of nodes (scalars, sequences, mappings) and the bytes of
// its scalars, counted as if every alias were a copy of what it names. Without aliases a document stays far
// below both (a 64 MiB file has fewer nodes and bytes); with them, a few hundred bytes could otherwise stand
// for gigabytes ("billion laughs").
inline constexpr std::uint64_t kMaxYamlNodes = 1'000'000;
inline constexpr std::uint64_t kMaxYamlExpandedBytes = kMaxInputFileBytes;

// Values (objects, lists, strings, numbers) of a JSON file read whole into a tree: the tokenizer files behind
// --tokenizer-model (tokenizer.json and its directory's other files), the --heterogeneous-layers-config-path file,
// a checkpoint's safetensors headers and metadata files (run/checkpoint_format.h); the default bound of every
// Value::parse_json, which counts values as it builds the tree and stops at the one past the bound. Parsed, a value
// takes 16 bytes (a number, bool or null) to about 64 (a string, list or object: its 48-byte box, plus the
// characters of a longer string), so a 64 MiB file of 20 million tiny values would take over a gigabyte. At the
// bound, measured with mr-peak-rss: 8 million numbers peak at 154 MB, 8 million empty strings or lists at 530 MB
// (text included). The largest real tokenizer.json files (a 262k vocabulary and its merges) hold about 3 million.
inline constexpr std::uint64_t kMaxJsonValues = 8'000'000;

// Nesting of YAML sequences and mappings (after alias expansion). Megatron's configs nest 3 levels deep.
inline constexpr int kMaxYamlDepth = 64;

// Warnings of one kind (a repeated key, ...) shown per file; the rest are counted in one line.
inline constexpr std::size_t kMaxWarningsPerKind = 10;

// Unknown flags of one command line (or MODEL_ARGS) given "did you mean" suggestions, and words listed in its
// "unrecognized arguments" message; the rest are counted.
inline constexpr std::size_t kMaxSuggestedFlags = 10;
inline constexpr std::size_t kMaxListedArguments = 100;

// A line of the --result-rejected-tracker-filename file (Megatron writes ~200-byte lines); a longer line ends
// reading with the tracker's warning (std::regex, which matches the lines, recurses once per character).
inline constexpr std::size_t kMaxTrackerLineBytes = 4096;

}  // namespace mr::limits
