// Renderings of a resolved namespace and of the schema.
#pragma once

#include <ostream>
#include <string>

#include "config/namespace.h"
#include "config/schema.h"

namespace mr {

// Megatron's _print_args table: "  name ..... value" lines sorted case-insensitively, between header/footer.
void print_megatron_table(std::ostream& os, const Namespace& ns, const std::string& title = "arguments");
// One JSON object, dest -> value, keys sorted; with `with_provenance`, each value becomes
// {"value": v, "source": "..."}.
std::string namespace_json(const Namespace& ns, bool with_provenance = false);
// The schema as a JSON list, one object per argument.
std::string schema_json(const Schema& schema);
// argparse-style --help text, grouped as Megatron's parser groups them.
void print_help(std::ostream& os, const Schema& schema, const std::string& prog);
// Bash completion script for every flag.
std::string bash_completion(const Schema& schema, const std::string& prog);

}  // namespace mr
