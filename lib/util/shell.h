// POSIX shell quoting: a word list printed so that `eval` (or pasting it into sh/bash/zsh) gives back exactly
// those words, whatever bytes they hold (spaces, quotes, $, backslashes, newlines, an empty word).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace mr {

// `word` as one shell word: unchanged when it holds only characters no shell treats specially
// ([A-Za-z0-9_@%+=:,./-], not empty, not starting with '='), else in single quotes, each ' written as '\''.
std::string shell_quote(std::string_view word);

// The words quoted and separated by single spaces.
std::string shell_join(const std::vector<std::string>& words);

}  // namespace mr
