// A word like `false` right after a switch (a flag that takes no value) is not the switch's value: the launcher
// reads it as the PROGRAM. When that program cannot be found, the refusal says why the word was read so.
#pragma once

#include <string>
#include <vector>

namespace mr::app {

// `words`: megatron-run's command line; `program_start`: the index of the program's first word (a script named
// without `--`). " (FLAG takes no value ...)" when the word before it is a Megatron switch or one of `own_switches`
// (megatron-run's, "--dry-run") and the program's word reads as a boolean (true/false, yes/no, on/off, 1/0, y/n,
// any case); else "".
std::string switch_value_hint(const std::vector<std::string>& words, size_t program_start,
                              const std::vector<std::string>& own_switches);

// `words`, `program_start` as above: "; FLAG takes one value ('V'), so 'W' after it was read as the PROGRAM (a
// value with blanks ... quoted ...)" when the words before the program are a Megatron flag that takes exactly one
// value and that value (`--flag V W` or `--flag=V W`: an unquoted "0:16 2.4B:320" split by the shell), the flag's
// value is text (a string, a path, JSON: one that could hold blanks) and W does not look like a program (no '/',
// no .py ending: a misspelled script is not a split value); else "".
std::string split_value_hint(const std::vector<std::string>& words, size_t program_start);

}  // namespace mr::app
