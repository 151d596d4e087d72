// The rules of the `input` stage (config/input_rules.cpp) that code outside that file names: a refusal made with
// their id (UsageError(..., rule.id)) rather than a string literal, so a misspelt id does not compile.
#pragma once

#include "config/rule.h"

namespace mr {

extern const Rule kInputUnreadableRule;       // input.unreadable
extern const Rule kInputNotRegularFileRule;   // input.not-regular-file
extern const Rule kInputNoConfigFilesRule;    // input.no-config-files
extern const Rule kInputFileTooLargeRule;     // input.file-too-large

}  // namespace mr
