// A JSON Schema (draft 2020-12) for `--config` files, generated from the argument schema (schema.h), for editors
// (yaml-language-server: `# yaml-language-server: $schema=megatron-run.schema.json`) and for validators.
//
// It describes both layouts megatron-run reads (docs/config-files.md):
//   - the plain layout: a mapping of arguments in either spelling, `--flag:` or `dest:` (also `dest-with-dashes:`),
//     each with its type, its choices as an enum, nargs as an array (a single value too), its help as the
//     description, its default, and `deprecated: true` where using it warns; unknown keys are rejected;
//   - Megatron CI's functional-test layout: `MODEL_ARGS` (flags only, each value one command-line word, a list,
//     a "[a b c]" string of words, `true` for a bare switch, "" to drop it), `ENV_VARS` (scalars), other keys free.
// A value given as a string is accepted where megatron-run would convert it (an int flag takes 12 and "12"), and
// every typed value may be a string holding `${VAR}` (expanded before conversion).
#pragma once

#include <string>

#include "config/schema.h"

namespace mr {

// The schema as one JSON document (pretty-printed, two-space indent).
std::string config_json_schema(const Schema& schema);

}  // namespace mr
