// Loading one YAML file safely: the bounded reader (read_file.h), then yaml-cpp's event parser building a compact
// tree of our own, checked while it is built. Every YAML input (--config files and `check` arguments,
// --yaml-cfg, --target-env) goes through load_file(), so none can crash, hang or exhaust memory:
//
//   input.not-text                  not UTF-8, or a control character (Python's yaml loader refuses both)
//   input.yaml-syntax               a syntax error (yaml-cpp's message)
//   input.yaml-multiple-documents   a second document (`---`): Python's yaml.safe_load refuses it too
//   input.yaml-recursive-alias      an alias inside the node it names (`&a [*a]`, `&m {<<: *m}`)
//   input.yaml-expansion-limit      more than limits::kMaxYamlNodes nodes or kMaxYamlExpandedBytes scalar bytes
//                                   once aliases are expanded ("billion laughs")
//   input.yaml-nesting-limit        sequences and mappings nested deeper than limits::kMaxYamlDepth
//
// Each is a UsageError (exit 2) whose message starts with file:line. Aliases stay shared in the tree (an alias
// is the node it names), so what the converters walk is bounded by the expansion limits.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "config/parse/argparse.h"

namespace mr::yaml {

struct DocData;

// A node of a Document; valid while that Document (or a copy of it) lives.
class Node {
 public:
  enum class Type : std::uint8_t { Undefined, Null, Scalar, Sequence, Map };

  Node() = default;
  Type type() const;
  bool defined() const { return doc_ != nullptr; }
  bool is_null() const { return type() == Type::Null; }
  bool is_scalar() const { return type() == Type::Scalar; }
  bool is_sequence() const { return type() == Type::Sequence; }
  bool is_map() const { return type() == Type::Map; }
  // "a mapping", "a sequence", "null", "a scalar".
  const char* kind_name() const;

  const std::string& scalar() const;  // a scalar's text; "" for anything else
  // A null's spelling as written ("null", "Null", "NULL", "~"); "" for an empty value or anything else.
  const std::string& null_text() const;
  // "?" for a plain scalar or an untagged collection, "!" for a quoted or block scalar (or the non-specific
  // tag), else the resolved tag ("tag:yaml.org,2002:int", "!local").
  const std::string& tag() const;
  bool plain() const { return tag() == "?"; }
  int line() const;          // 1-based; 0 when undefined
  std::string where() const;  // "path:line"

  std::size_t size() const;  // items of a sequence, pairs of a mapping, else 0
  Node item(std::size_t i) const;
  Node key(std::size_t i) const;
  Node value(std::size_t i) const;
  // The value of the last pair whose key is the scalar `key` (undefined when there is none).
  Node get(std::string_view key) const;

  // For a quoted scalar that spans lines: the first continuation line that looks like a `key:` entry (a
  // missing closing quote swallowing the lines after it). 0 when there is none.
  int swallowed_line() const;
  std::string swallowed_key() const;  // the key that line starts with

  bool same(const Node& o) const { return doc_ == o.doc_ && i_ == o.i_; }

 private:
  friend struct DocData;
  friend class Document;
  Node(const DocData* d, std::uint32_t i) : doc_(d), i_(i) {}
  const DocData* doc_ = nullptr;
  std::uint32_t i_ = 0;
};

class Document {
 public:
  Document();
  Node root() const;  // Null for a file without a document (empty, only comments)
  const std::string& path() const;
  std::uint64_t expanded_nodes() const;  // the tree's size with aliases expanded

 private:
  friend Document parse(std::string text, const std::string& path, const std::vector<std::string>& flags);
  std::shared_ptr<DocData> d_;
};

// Reads `path` (read_input_file: `what` names it, e.g. "config file") and parses it as one YAML document.
Document load_file(const std::string& path, const std::string& what, const std::vector<std::string>& flags = {});
// Parses `text` as one YAML document; `path` names it in messages.
Document parse(std::string text, const std::string& path, const std::vector<std::string>& flags = {});

// "!!int" for "tag:yaml.org,2002:int"; other tags as they are.
std::string display_tag(const std::string& tag);
bool standard_tag(const std::string& tag, std::string_view name);  // tag == "tag:yaml.org,2002:" + name

// The pairs of a mapping in PyYAML's order (flatten_mapping): what `<<` merge keys bring in first (a mapping, or
// a list of mappings: the first one's keys win), then the mapping's own pairs. `own_from` receives the index of
// the first own pair. Throws UsageError (input.yaml-bad-merge) for a merge value that is not a mapping.
std::vector<std::pair<Node, Node>> merged_pairs(const Node& map, const std::vector<std::string>& flags = {},
                                                std::size_t* own_from = nullptr);

// Keeps the first limits::kMaxWarningsPerKind warnings of each "[input.*]" kind from `from` on and replaces
// the rest by one "... and N more" line naming `path`: a file repeating a key 100k times warns a few times.
void cap_warnings(std::vector<std::string>& warnings, std::size_t from, const std::string& path);

// The refusals the converters share.
[[noreturn]] void non_scalar_key(const Node& key, const std::vector<std::string>& flags = {});
// A tag a converter cannot construct: "path:line: unsupported YAML tag !!python/name:x (...)".
[[noreturn]] void unsupported_tag(const Node& n, const std::vector<std::string>& flags = {});

}  // namespace mr::yaml
