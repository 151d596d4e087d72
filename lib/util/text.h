// Printable text: what megatron-run writes for people (diagnostics, usage errors, log records) never carries raw
// control characters or bytes that are not UTF-8, whatever a flag value, file name, config file or environment
// variable held.
#pragma once

#include <cstdint>
#include <chrono>
#include <string>
#include <string_view>
#include <vector>

namespace mr {

// `s` with everything a terminal would not show as text escaped, and everything else (valid UTF-8, tabs and
// newlines) unchanged:
//   C0 control bytes other than \t and \n, and DEL   \x00 ... \x1f, \x7f  (a carriage return too: \x0d)
//   C1 controls U+0080-U+009F, the Unicode line/paragraph separators and the bidirectional-text controls
//   (U+200E/F, U+2028/9, U+202A-E, U+2066-9)          \u0085, \u202e ...
//   a byte that does not begin or continue valid UTF-8 (bad lead, truncated or overlong sequence, a surrogate,
//   a code point beyond U+10FFFF)                     \xff ...
// With `keep_newlines` false, \n and \t are escaped too (\x0a, \x09): for values quoted inside one line.
std::string printable(std::string_view s, bool keep_newlines = true);

// `s` as XML 1.0 character data (`attribute`: inside a double-quoted attribute value): printable() first (no C0/C1
// control character, no invalid UTF-8 reaches the document: XML 1.0 forbids most of them outright), then &, <, >,
// " and ' as entities, and in an attribute also tab and newline as character references (&#9;, &#10;) so that
// attribute-value normalisation keeps them; U+FFFE and U+FFFF (no XML characters) as the text \ufffe, \uffff.
std::string xml_escape(std::string_view s, bool attribute);

// The length of the valid UTF-8 sequence starting at s[i] (1-4), with its code point in `cp`; 0 when the bytes
// there are not one (a bad lead byte, a truncated or overlong sequence, a surrogate, beyond U+10FFFF).
size_t utf8_char(std::string_view s, size_t i, uint32_t& cp);
// Whether printable() escapes this (valid, non-ASCII) code point: C1 controls, line/paragraph separators and the
// bidirectional-text controls.
bool escaped_code_point(uint32_t cp);

// Whether printable(s, keep_newlines) would return `s` unchanged.
bool is_printable(std::string_view s, bool keep_newlines = true);

// The first `max` bytes of `s` (cut at a UTF-8 character boundary) and "... (N bytes)" when it is longer.
std::string abbreviate(std::string_view s, size_t max = 200);
// A word a message echoes inside its line (a program's name, an unknown argument): abbreviate(s, max), then
// printable(..., false), so a newline in it prints as \x0a and a 5 KB word as its first `max` bytes and its length.
std::string echo_word(std::string_view s, size_t max = 200);
// `s` when it has at most `max` bytes; else its start, " ... [N bytes cut] ... " and its last `tail` bytes (tail < max),
// at most about `max` bytes in all, cut at UTF-8 character boundaries: for a whole message, whose end (the reason)
// must survive a long value echoed inside it.
std::string abbreviate_inside(std::string_view s, size_t max, size_t tail);

// A number as people write it in messages: printf's %g ("600", "1.5", "0.25").
std::string format_number(double x);
// A duration as messages print a timeout or a bound: "600 s", "0.7 s", "1.25 s", "3.001 s" (exact to the
// millisecond, no trailing zeros, no exponent however long). The one way launch and distributed print one.
std::string seconds_text(std::chrono::milliseconds duration);

// The words of `parts` with `sep` between them ("a, b, c" for sep ", "; "" for none).
std::string join(const std::vector<std::string>& parts, std::string_view sep);

// Python's s.split(sep) for one character: every piece, the empty ones too ("" is one empty piece, "a,,b" three).
std::vector<std::string> split(std::string_view s, char sep);

// `s` without the white space at either end (space, tab, CR, LF, VT, FF: what Python's strip() takes in ASCII).
std::string trim(std::string_view s);

// Levenshtein distance of a and b, or limit + 1 once it is known to exceed `limit` (and for b of 128 bytes or more).
size_t edit_distance(std::string_view a, std::string_view b, size_t limit);
// The words of `known` within `limit` edits of `word` (not `word` itself), closest first: "did you mean" candidates.
std::vector<std::string> closest_words(std::string_view word, const std::vector<std::string>& known, size_t limit = 2);

}  // namespace mr
