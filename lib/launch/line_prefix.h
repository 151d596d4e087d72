// torchrun's --log-line-prefix-template: the text before each console line of a worker, with the macros
// ${role_name}, ${rank}, ${local_rank} and ${hostname} (torchrun substitutes them with Python's
// string.Template.safe_substitute: `$name` and `${name}` both work, `$$` is one `$`, and an unknown macro stays as
// written). Without a template megatron-run writes "[rank R] ". Torch-free.
#pragma once

#include <string>
#include <vector>

namespace mr::launch {

struct PrefixFields {
  std::string role_name = "default";
  int rank = 0;
  int local_rank = 0;
  std::string hostname;
};

// The template with the fields substituted.
std::string expand_line_prefix(const std::string& tmpl, const PrefixFields& f);

// The macros of `tmpl` that are not one of the four (kept as written by expand_line_prefix), e.g. {"${rnak}"}:
// named in a notice, since a typo otherwise shows up only in the output.
std::vector<std::string> unknown_prefix_macros(const std::string& tmpl);

// This machine's host name (gethostname), for ${hostname}.
std::string local_hostname();

}  // namespace mr::launch
