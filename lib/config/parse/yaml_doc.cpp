#include "config/parse/yaml_doc.h"

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/exceptions.h>
#include <yaml-cpp/mark.h>
#include <yaml-cpp/parser.h>

#include <algorithm>
#include <cstdio>
#include <istream>
#include <streambuf>

#include "config/limits.h"
#include "config/parse/read_file.h"
#include "util/rule_id.h"

namespace mr::yaml {

struct DocData {
  struct N {
    Node::Type type = Node::Type::Null;
    bool open = false;
    std::uint32_t tag = 0;   // index into tags
    std::uint32_t text = 0;  // index into texts (scalars)
    std::uint32_t line = 0;  // 0-based
    std::uint32_t height = 0;  // levels of collections at and below this node, aliases expanded
    std::uint32_t swallowed = 0;  // 1-based line, see Node::swallowed_line
    std::uint64_t nodes = 1;  // expanded size
    std::uint64_t bytes = 0;
    std::vector<std::uint32_t> kids;  // items, or key, value, key, value, ...
  };
  std::string path;
  std::vector<N> nodes;
  std::vector<std::string> texts{std::string()};
  std::vector<std::string> tags{"?", "!"};
  std::uint32_t root = 0;
  bool has_root = false;
  std::vector<std::pair<std::uint32_t, std::string>> swallowed_keys;  // node -> the key its quote swallowed

  const N& n(std::uint32_t i) const { return nodes[i]; }
};

namespace {

const std::string kEmpty;
const char* const kStdPrefix = "tag:yaml.org,2002:";

UsageError error_at(const std::string& path, std::size_t line0, const std::string& msg, const char* id,
                    const std::vector<std::string>& flags) {
  std::string where = path + ":" + std::to_string(line0 + 1);
  return UsageError(where + ": " + msg, flags, where, id);
}

// A read-only stream over the file's bytes (no copy).
struct ViewBuf : std::streambuf {
  ViewBuf(const char* b, std::size_t n) {
    char* p = const_cast<char*>(b);
    setg(p, p, p + n);
  }
};

// `value` printed with the printf format `fmt` ("U+%04X", "0x%02x").
std::string formatted(const char* fmt, std::uint32_t value) {
  char b[16];
  std::snprintf(b, sizeof b, fmt, static_cast<unsigned>(value));
  return b;
}

// A file Python's yaml Reader refuses too: `found` is what the file holds and where, `must` what a YAML file is.
[[noreturn]] void refuse_text(const std::string& path, std::size_t line, const std::string& found, const char* must,
                              const std::vector<std::string>& flags) {
  throw error_at(path, line, "the file " + found + "; a YAML file " + must + " (Python's yaml loader refuses it too)",
                 "input.not-text", flags);
}

// Python's yaml Reader accepts UTF-8 text of printable characters only: tab, LF, CR, U+0020-U+007E, U+0085,
// U+00A0-U+D7FF, U+E000-U+FFFD, U+10000-U+10FFFF. Anything else would be an error in Megatron's loader too
// (and would reach our messages unescaped).
void check_text(const std::string& t, const std::string& path, const std::vector<std::string>& flags) {
  std::size_t line = 0, line_start = 0;
  for (std::size_t i = 0; i < t.size();) {
    unsigned char c = static_cast<unsigned char>(t[i]);
    auto column = [&] { return std::to_string(i - line_start + 1); };
    if (c < 0x80) {
      if (c == '\n') {
        ++line;
        line_start = i + 1;
      } else if ((c < 0x20 && c != '\t' && c != '\r') || c == 0x7f) {
        refuse_text(path, line, "holds the control character " + formatted("U+%04X", c) + " (column " + column() + ")",
                    "is printable text", flags);
      }
      ++i;
      continue;
    }
    std::size_t len = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 0;
    std::uint32_t cp = len == 4 ? (c & 0x07u) : len == 3 ? (c & 0x0fu) : (c & 0x1fu);
    bool ok = len != 0 && c < 0xf5 && i + len <= t.size();
    for (std::size_t k = 1; ok && k < len; ++k) {
      unsigned char d = static_cast<unsigned char>(t[i + k]);
      ok = (d & 0xc0) == 0x80;
      cp = (cp << 6) | (d & 0x3fu);
    }
    static const std::uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
    ok = ok && cp >= kMin[len] && cp <= 0x10ffff && !(cp >= 0xd800 && cp <= 0xdfff);
    if (!ok)
      refuse_text(path, line, "is not UTF-8 text (byte " + formatted("0x%02x", c) + " at column " + column() + ")",
                  "must be UTF-8", flags);
    bool printable = cp == 0x85 || (cp >= 0xa0 && cp <= 0xd7ff) || (cp >= 0xe000 && cp <= 0xfffd) || cp >= 0x10000;
    if (!printable)
      refuse_text(path, line,
                  "holds the non-printable character " + formatted("U+%04X", cp) + " (column " + column() + ")",
                  "is printable text", flags);
    i += len;
  }
}

bool key_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
         c == '.' || c == '/';
}

// The key a line starts with when it looks like a `key: value` entry (optionally a `- key:` item); "" if not.
std::string key_like(std::string_view line) {
  std::size_t i = 0;
  while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
  if (i + 1 < line.size() && line[i] == '-' && line[i + 1] == ' ') {
    i += 2;
    while (i < line.size() && line[i] == ' ') ++i;
  }
  std::size_t start = i;
  while (i < line.size() && key_char(line[i])) ++i;
  if (i == start || i >= line.size() || line[i] != ':') return {};
  if (i + 1 < line.size() && line[i + 1] != ' ' && line[i + 1] != '\t' && line[i + 1] != '\r') return {};
  std::string k(line.substr(start, i - start));
  // A word of only dashes/dots ("---", "...") is no key.
  if (k.find_first_not_of("-.") == std::string::npos) return {};
  return k;
}

class Builder : public YAML::EventHandler {
 public:
  Builder(DocData& d, const std::string& text, const std::vector<std::string>& flags)
      : d_(d), text_(text), flags_(flags) {}

  int documents = 0;

  void OnDocumentStart(const YAML::Mark& mark) override {
    if (++documents > 1)
      throw error_at(d_.path, static_cast<std::size_t>(mark.line),
                     "a second YAML document starts here; the file must hold exactly one (Python's yaml.safe_load, "
                     "which Megatron's loaders use, refuses it too)",
                     "input.yaml-multiple-documents", flags_);
  }
  void OnDocumentEnd() override {}

  void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    std::uint32_t i = add(mark, Node::Type::Null, 1, anchor);
    const std::string spelt = null_spelling(mark);
    if (!spelt.empty()) {
      d_.nodes[i].text = static_cast<std::uint32_t>(d_.texts.size());
      d_.texts.push_back(spelt);
    }
  }
  void OnScalar(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor,
                const std::string& value) override {
    std::uint32_t i = add(mark, Node::Type::Scalar, intern(tag), anchor);
    DocData::N& n = d_.nodes[i];
    n.text = static_cast<std::uint32_t>(d_.texts.size());
    d_.texts.push_back(value);
    n.bytes = value.size();
    bytes_ += value.size();
    if (bytes_ > limits::kMaxYamlExpandedBytes) expansion_error(mark, "");
    {  // a quoted scalar: never closed (an error), or running over lines that look like keys
      std::string key;
      n.swallowed = swallowed(mark, key);
      if (n.swallowed) d_.swallowed_keys.emplace_back(i, key);
    }
  }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    if (anchor >= anchors_.size() || anchors_[anchor] == kNone)
      throw error_at(d_.path, static_cast<std::size_t>(mark.line), "unknown YAML alias", "input.yaml-syntax", flags_);
    std::uint32_t target = anchors_[anchor];
    const DocData::N& t = d_.nodes[target];
    std::string name = word_at(mark, '*');
    if (t.open)
      throw error_at(d_.path, static_cast<std::size_t>(mark.line),
                     "the alias *" + name + " is inside the node it names (anchored at line " +
                         std::to_string(t.line + 1) + "): a recursive YAML structure has no value in a config",
                     "input.yaml-recursive-alias", flags_);
    if (stack_.size() + t.height > static_cast<std::size_t>(limits::kMaxYamlDepth))
      depth_error(mark, " (counting what the alias *" + name + " stands for)");
    nodes_ += t.nodes;
    bytes_ += t.bytes;
    if (nodes_ > limits::kMaxYamlNodes || bytes_ > limits::kMaxYamlExpandedBytes) expansion_error(mark, name);
    attach(target);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value) override {
    open(mark, Node::Type::Sequence, tag, anchor);
  }
  void OnSequenceEnd() override { close(); }
  void OnMapStart(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value) override {
    open(mark, Node::Type::Map, tag, anchor);
  }
  void OnMapEnd() override { close(); }

 private:
  static constexpr std::uint32_t kNone = 0xffffffffu;
  DocData& d_;
  const std::string& text_;
  const std::vector<std::string>& flags_;
  std::vector<std::uint32_t> stack_;
  std::vector<std::uint32_t> anchors_;
  std::uint64_t nodes_ = 0, bytes_ = 0;

  std::uint32_t intern(const std::string& tag) {
    if (tag == "?") return 0;
    if (tag == "!") return 1;
    for (std::size_t i = 2; i < d_.tags.size(); ++i)
      if (d_.tags[i] == tag) return static_cast<std::uint32_t>(i);
    d_.tags.push_back(tag);
    return static_cast<std::uint32_t>(d_.tags.size() - 1);
  }

  void attach(std::uint32_t i) {
    if (stack_.empty()) {
      d_.root = i;
      d_.has_root = true;
    } else {
      d_.nodes[stack_.back()].kids.push_back(i);
    }
  }

  std::uint32_t add(const YAML::Mark& mark, Node::Type type, std::uint32_t tag, YAML::anchor_t anchor) {
    if (++nodes_ > limits::kMaxYamlNodes) expansion_error(mark, "");
    std::uint32_t i = static_cast<std::uint32_t>(d_.nodes.size());
    d_.nodes.emplace_back();
    DocData::N& n = d_.nodes.back();
    n.type = type;
    n.tag = tag;
    n.line = static_cast<std::uint32_t>(std::max(0, mark.line));
    attach(i);
    if (anchor) {
      if (anchor >= anchors_.size()) anchors_.resize(anchor + 1, kNone);
      anchors_[anchor] = i;
    }
    return i;
  }

  void open(const YAML::Mark& mark, Node::Type type, const std::string& tag, YAML::anchor_t anchor) {
    if (stack_.size() + 1 > static_cast<std::size_t>(limits::kMaxYamlDepth)) depth_error(mark, "");
    std::uint32_t i = add(mark, type, intern(tag), anchor);
    d_.nodes[i].open = true;
    stack_.push_back(i);
  }
  void close() {
    if (stack_.empty()) return;
    std::uint32_t i = stack_.back();
    stack_.pop_back();
    DocData::N& n = d_.nodes[i];
    n.open = false;
    std::uint64_t nodes = 1, bytes = 0;
    std::uint32_t height = 0;
    for (std::uint32_t k : n.kids) {
      const DocData::N& c = d_.nodes[k];
      nodes += c.nodes;
      bytes += c.bytes;
      height = std::max(height, c.height);
    }
    n.nodes = nodes;
    n.bytes = bytes;
    n.height = height + 1;
  }

  // The anchor or alias name written at `mark` (`*name`), for messages.
  std::string word_at(const YAML::Mark& mark, char sigil) const {
    std::size_t p = mark.pos < 0 ? text_.size() : static_cast<std::size_t>(mark.pos);
    if (p >= text_.size() || text_[p] != sigil) return "?";
    std::size_t e = p + 1;
    while (e < text_.size() && e - p < 64 && !std::isspace(static_cast<unsigned char>(text_[e])) && text_[e] != ',' &&
           text_[e] != ']' && text_[e] != '}')
      ++e;
    return text_.substr(p + 1, e - p - 1);
  }

  [[noreturn]] void depth_error(const YAML::Mark& mark, const std::string& extra) const {
    throw error_at(d_.path, static_cast<std::size_t>(std::max(0, mark.line)),
                   "YAML sequences and mappings nested deeper than " + std::to_string(limits::kMaxYamlDepth) +
                       " levels" + extra + " (the limit, limits::kMaxYamlDepth)",
                   "input.yaml-nesting-limit", flags_);
  }
  [[noreturn]] void expansion_error(const YAML::Mark& mark, const std::string& alias) const {
    std::string what = nodes_ > limits::kMaxYamlNodes
                           ? "more than " + std::to_string(limits::kMaxYamlNodes) +
                                 " nodes (the limit, limits::kMaxYamlNodes)"
                           : "more than " + describe_bytes(limits::kMaxYamlExpandedBytes) +
                                 " of scalars (the limit, limits::kMaxYamlExpandedBytes)";
    throw error_at(d_.path, static_cast<std::size_t>(std::max(0, mark.line)),
                   "the YAML document grows to " + what +
                       (alias.empty() ? std::string() : " here, where the alias *" + alias + " is expanded"),
                   "input.yaml-expansion-limit", flags_);
  }

  // A quoted scalar starting at `mark`: the first continuation line that looks like `key:` (1-based), or 0.
  // How a plain null is written where yaml-cpp reports it: "null", "Null", "NULL" or "~"; "" for an empty value
  // (yaml-cpp's mark is then the next token's: a key named null on the next line is no null's spelling).
  std::string null_spelling(const YAML::Mark& mark) const {
    if (mark.pos < 0) return {};
    std::size_t p = static_cast<std::size_t>(mark.pos);
    if (p < text_.size() && text_[p] == '&') {  // an anchor before it
      while (p < text_.size() && !std::isspace(static_cast<unsigned char>(text_[p]))) ++p;
      while (p < text_.size() && (text_[p] == ' ' || text_[p] == '\t')) ++p;
    }
    for (const char* w : {"null", "Null", "NULL", "~"}) {
      const std::size_t n = std::char_traits<char>::length(w);
      if (text_.compare(p, n, w) != 0) continue;
      std::size_t e = p + n;
      if (e < text_.size() && !std::isspace(static_cast<unsigned char>(text_[e])) && text_[e] != ',' &&
          text_[e] != ']' && text_[e] != '}')
        return {};  // a longer word
      while (e < text_.size() && (text_[e] == ' ' || text_[e] == '\t')) ++e;
      if (e < text_.size() && text_[e] == ':' &&
          (e + 1 == text_.size() || std::isspace(static_cast<unsigned char>(text_[e + 1]))))
        return {};  // a key spelt null
      return w;
    }
    return {};
  }

  std::uint32_t swallowed(const YAML::Mark& mark, std::string& key) const {
    if (mark.pos < 0) return 0;
    std::size_t p = static_cast<std::size_t>(mark.pos);
    // Skip node properties (&anchor, !tag) before the quote.
    for (int k = 0; k < 2 && p < text_.size() && (text_[p] == '&' || text_[p] == '!'); ++k) {
      while (p < text_.size() && !std::isspace(static_cast<unsigned char>(text_[p]))) ++p;
      while (p < text_.size() && (text_[p] == ' ' || text_[p] == '\t')) ++p;
    }
    if (p >= text_.size() || (text_[p] != '"' && text_[p] != '\'')) return 0;
    char q = text_[p];
    std::uint32_t line = static_cast<std::uint32_t>(mark.line);
    std::string first_key;  // the first continuation line that looks like `key:`
    std::uint32_t first_line = 0;
    for (std::size_t i = p + 1; i < text_.size(); ++i) {
      char c = text_[i];
      if (q == '"' && c == '\\') {
        ++i;
        if (i < text_.size() && text_[i] == '\n') ++line;  // an escaped line break
        continue;
      }
      if (c == q) {
        if (q == '\'' && i + 1 < text_.size() && text_[i + 1] == '\'') {
          ++i;
          continue;
        }
        key = first_key;
        return first_key.empty() ? 0 : first_line;
      }
      if (c == '\n') {
        ++line;
        std::size_t e = text_.find('\n', i + 1);
        std::string_view next(text_.data() + i + 1, (e == std::string::npos ? text_.size() : e) - i - 1);
        if (first_key.empty()) {
          first_key = key_like(next);
          if (!first_key.empty()) first_line = line + 1;
        }
      }
    }
    // yaml-cpp takes the rest of the file for a quote that is never closed; Python's yaml loader refuses it.
    throw error_at(d_.path, static_cast<std::size_t>(mark.line),
                   "the quoted value starting here is never closed (the file ends inside it)" +
                       (first_key.empty() ? std::string()
                                          : ", taking in what looks like the key '" + first_key + "' at line " +
                                                std::to_string(first_line)),
                   "input.yaml-syntax", flags_);
  }
};

}  // namespace

// ---- Node ---------------------------------------------------------------------------------------------------

Node::Type Node::type() const { return doc_ ? doc_->n(i_).type : Type::Undefined; }

const char* Node::kind_name() const {
  switch (type()) {
    case Type::Undefined: return "absent";
    case Type::Null: return "null";
    case Type::Scalar: return "a scalar";
    case Type::Sequence: return "a sequence";
    case Type::Map: return "a mapping";
  }
  return "?";
}

const std::string& Node::scalar() const {
  if (!doc_ || doc_->n(i_).type != Type::Scalar) return kEmpty;
  return doc_->texts[doc_->n(i_).text];
}
const std::string& Node::null_text() const {
  if (!doc_ || doc_->n(i_).type != Type::Null) return kEmpty;
  return doc_->texts[doc_->n(i_).text];
}
const std::string& Node::tag() const {
  static const std::string q = "?";
  return doc_ ? doc_->tags[doc_->n(i_).tag] : q;
}
int Node::line() const { return doc_ ? static_cast<int>(doc_->n(i_).line) + 1 : 0; }
std::string Node::where() const { return doc_ ? doc_->path + ":" + std::to_string(line()) : std::string(); }
std::size_t Node::size() const {
  if (!doc_) return 0;
  const auto& n = doc_->n(i_);
  if (n.type == Type::Sequence) return n.kids.size();
  if (n.type == Type::Map) return n.kids.size() / 2;
  return 0;
}
Node Node::item(std::size_t i) const { return Node(doc_, doc_->n(i_).kids[i]); }
Node Node::key(std::size_t i) const { return Node(doc_, doc_->n(i_).kids[2 * i]); }
Node Node::value(std::size_t i) const { return Node(doc_, doc_->n(i_).kids[2 * i + 1]); }
Node Node::get(std::string_view k) const {
  Node found;
  if (!is_map()) return found;
  for (std::size_t i = 0, n = size(); i < n; ++i) {
    Node kn = key(i);
    if (kn.is_scalar() && kn.scalar() == k) found = value(i);
  }
  return found;
}
int Node::swallowed_line() const { return doc_ ? static_cast<int>(doc_->n(i_).swallowed) : 0; }
std::string Node::swallowed_key() const {
  if (!swallowed_line()) return {};
  for (const auto& [i, k] : doc_->swallowed_keys)
    if (i == i_) return k;
  return {};
}

// ---- Document -----------------------------------------------------------------------------------------------

Document::Document() : d_(std::make_shared<DocData>()) {}
Node Document::root() const {
  if (!d_->has_root) {
    if (d_->nodes.empty()) {
      d_->nodes.emplace_back();  // a Null root for an empty file
      d_->nodes.back().nodes = 1;
    }
    d_->root = 0;
    d_->has_root = true;
  }
  return Node(d_.get(), d_->root);
}
const std::string& Document::path() const { return d_->path; }
std::uint64_t Document::expanded_nodes() const { return d_->has_root ? d_->n(d_->root).nodes : 0; }

// Flow collections ([...], {...}) are counted before yaml-cpp sees the text: in a flow collection that may be a
// simple key (one nested in another flow collection: `[[...]]`, `{"k": [...]}`), yaml-cpp's scanner keeps every
// token until the collection closes, before any event reaches the Builder and its node limit (2 million items
// took 550 MB, a 50 MB file ran out of memory). Each ',' and each opening bracket in flow context starts a node,
// so more than limits::kMaxYamlNodes of them is past the node limit anyway: refused here, at the line where the
// count passes it. Quoted scalars, block scalars (| and >) and comments are skipped; a '[' or '{' opens a
// collection only where a node may begin (not inside a plain scalar such as `a[1,2]`).
// Returns the line (0-based) where the innermost collection left open at the end of the text began, or -1 when
// every one is closed: yaml-cpp reports an unclosed one at the end of the file, past its last line.
long check_flow_items(const std::string& t, const std::string& path, const std::vector<std::string>& flags) {
  std::uint64_t items = 0;
  std::size_t line = 0, depth = 0;
  // The lines of the open collections, outermost first, while they are few (more is refused for its depth).
  std::vector<std::size_t> open_lines;
  constexpr std::size_t kOpenLinesKept = 256;
  char prev = '\n';  // the last character that is not a blank, on this line or an earlier one
  for (std::size_t i = 0; i < t.size(); ++i) {
    const char c = t[i];
    if (c == '\n') ++line;
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
      if (c == '\n' && depth == 0) prev = '\n';
      continue;
    }
    const bool node_start = prev == '\n' || prev == ':' || prev == '-' || prev == ',' || prev == '[' || prev == '{' ||
                            prev == '?';
    const bool after_blank = i == 0 || t[i - 1] == ' ' || t[i - 1] == '\t' || t[i - 1] == '\n' || t[i - 1] == '\r';
    if (c == '#' && after_blank) {  // a comment, to the end of the line
      while (i + 1 < t.size() && t[i + 1] != '\n') ++i;
      continue;
    }
    if ((c == '"' || c == '\'') && node_start) {  // a quoted scalar (its own line breaks counted)
      for (++i; i < t.size(); ++i) {
        if (t[i] == '\n') ++line;
        if (c == '"' && t[i] == '\\') {
          if (i + 1 < t.size() && t[i + 1] == '\n') ++line;
          ++i;
        } else if (t[i] == c) {
          if (c == '\'' && i + 1 < t.size() && t[i + 1] == '\'') ++i;  // '' inside single quotes
          else break;
        }
      }
      prev = 'x';
      continue;
    }
    if ((c == '|' || c == '>') && node_start && depth == 0) {  // a block scalar's header?
      std::size_t j = i + 1;
      while (j < t.size() && (t[j] == '+' || t[j] == '-' || (t[j] >= '0' && t[j] <= '9'))) ++j;
      while (j < t.size() && (t[j] == ' ' || t[j] == '\t' || t[j] == '\r')) ++j;
      if (j < t.size() && t[j] == '#' && (t[j - 1] == ' ' || t[j - 1] == '\t'))
        while (j < t.size() && t[j] != '\n') ++j;
      if (j >= t.size() || t[j] == '\n') {
        // Its text (the lines below indented more than the header's line, and blank ones) holds no flow items.
        std::size_t start = t.rfind('\n', i);
        start = start == std::string::npos ? 0 : start + 1;
        std::size_t indent = 0;
        while (start + indent < t.size() && t[start + indent] == ' ') ++indent;
        i = j;  // at the header's line break (or the end)
        while (i < t.size()) {  // t[i] == '\n': look at the next line
          std::size_t k = i + 1, spaces = 0;
          while (k < t.size() && t[k] == ' ') ++k, ++spaces;
          const bool blank = k >= t.size() || t[k] == '\n' || t[k] == '\r';
          if (!blank && spaces <= indent) break;  // the block ends before this line
          ++line;
          i = t.find('\n', i + 1);
          if (i == std::string::npos) i = t.size();
        }
        // i: the line break before the block's next line (counted there) or the end.
        if (i < t.size()) --i, prev = '\n';
        continue;
      }
    }
    if ((c == '[' || c == '{') && (node_start || depth > 0)) {
      if (open_lines.size() == depth && depth < kOpenLinesKept) open_lines.push_back(line);
      ++depth;
      ++items;
    } else if ((c == ']' || c == '}') && depth > 0) {
      if (open_lines.size() == depth) open_lines.pop_back();
      --depth;
    } else if (c == ',' && depth > 0) {
      ++items;
    }
    if (items > limits::kMaxYamlNodes)
      throw error_at(path, line,
                     "the YAML document grows to more than " + std::to_string(limits::kMaxYamlNodes) +
                         " nodes (the limit, limits::kMaxYamlNodes) in flow collections ([...], {...})",
                     "input.yaml-expansion-limit", flags);
    prev = c;
  }
  return depth > 0 && !open_lines.empty() ? static_cast<long>(open_lines.back()) : -1;
}

// The last line (0-based) that has any text: yaml-cpp's marks may point one past it.
std::size_t last_line(const std::string& t) {
  std::size_t end = t.size();
  while (end > 0 && (t[end - 1] == '\n' || t[end - 1] == '\r')) --end;
  return static_cast<std::size_t>(std::count(t.begin(), t.begin() + static_cast<std::ptrdiff_t>(end), '\n'));
}

// The last line at or before `upto` (0-based) whose indentation holds a tab, or -1. YAML forbids tabs there, and
// yaml-cpp's message for one ("illegal map value", ...) does not say so.
long tab_indented_line(const std::string& t, std::size_t upto) {
  long found = -1;
  std::size_t line = 0;
  for (std::size_t i = 0; i < t.size() && line <= upto; ++line) {
    std::size_t j = i;
    while (j < t.size() && (t[j] == ' ' || t[j] == '\t')) ++j;
    const bool has_text = j < t.size() && t[j] != '\n' && t[j] != '\r' && t[j] != '#';
    if (has_text && std::find(t.begin() + static_cast<std::ptrdiff_t>(i), t.begin() + static_cast<std::ptrdiff_t>(j),
                              '\t') != t.begin() + static_cast<std::ptrdiff_t>(j))
      found = static_cast<long>(line);
    const std::size_t nl = t.find('\n', i);
    if (nl == std::string::npos) break;
    i = nl + 1;
  }
  return found;
}

Document parse(std::string text, const std::string& path, const std::vector<std::string>& flags) {
  Document doc;
  DocData& d = *doc.d_;
  d.path = path;
  if (text.size() >= 3 && text.compare(0, 3, "\xEF\xBB\xBF") == 0) text.erase(0, 3);  // a UTF-8 byte order mark
  check_text(text, path, flags);
  const long unclosed = check_flow_items(text, path, flags);
  ViewBuf buf(text.data(), text.size());
  std::istream in(&buf);
  Builder b(d, text, flags);
  try {
    YAML::Parser parser(in);
    if (parser.HandleNextDocument(b)) parser.HandleNextDocument(b);  // a second one throws in OnDocumentStart
  } catch (const YAML::DeepRecursion& e) {
    throw error_at(path, static_cast<std::size_t>(std::max(0, e.mark.line)),
                   "YAML sequences and mappings nested deeper than " + std::to_string(limits::kMaxYamlDepth) +
                       " levels (the limit, limits::kMaxYamlDepth)",
                   "input.yaml-nesting-limit", flags);
  } catch (const YAML::Exception& e) {
    // yaml-cpp reports a collection never closed where the text ends (a line past the last one): name the line
    // it opened on instead. Any other mark is kept within the file's lines.
    std::size_t line = std::min(static_cast<std::size_t>(std::max(0, e.mark.line)), last_line(text));
    std::string msg = "invalid YAML: " + e.msg;
    const bool flow_end = e.msg.find("flow not found") != std::string::npos;
    if (flow_end && unclosed >= 0) {
      line = static_cast<std::size_t>(unclosed);
      const bool seq = e.msg.find("sequence") != std::string::npos;
      msg += std::string(" (the '") + (seq ? "[" : "{") + "' opened on this line is never closed)";
    } else if (const long tab = tab_indented_line(text, line); tab >= 0 && !flow_end && tab + 1 >= static_cast<long>(line)) {
      line = static_cast<std::size_t>(tab);
      msg = "invalid YAML: tabs are not allowed for indentation in YAML (this line is indented with a tab; use "
            "spaces) [yaml-cpp: " + e.msg + "]";
    }
    throw error_at(path, line, msg, "input.yaml-syntax", flags);
  }
  return doc;
}

Document load_file(const std::string& path, const std::string& what, const std::vector<std::string>& flags) {
  return parse(read_input_file(path, what, flags), path, flags);
}

// ---- helpers --------------------------------------------------------------------------------------------------

std::string display_tag(const std::string& tag) {
  std::string p = kStdPrefix;
  if (tag.rfind(p, 0) == 0) return "!!" + tag.substr(p.size());
  return tag;
}

bool standard_tag(const std::string& tag, std::string_view name) {
  std::string_view t = tag, p = kStdPrefix;
  return t.size() == p.size() + name.size() && t.substr(0, p.size()) == p && t.substr(p.size()) == name;
}

namespace {
bool merge_key(const Node& k) {
  return k.is_scalar() && (k.plain() || standard_tag(k.tag(), "merge")) && k.scalar() == "<<";
}
void flatten(const Node& map, std::vector<std::pair<Node, Node>>& out, std::size_t* own_from,
             const std::vector<std::string>& flags) {
  std::vector<std::pair<Node, Node>> merged;
  std::vector<std::pair<Node, Node>> own;
  for (std::size_t i = 0, n = map.size(); i < n; ++i) {
    Node k = map.key(i), v = map.value(i);
    if (!merge_key(k)) {
      own.emplace_back(k, v);
      continue;
    }
    if (v.is_map()) {
      flatten(v, merged, nullptr, flags);
    } else if (v.is_sequence()) {
      std::vector<std::vector<std::pair<Node, Node>>> sub;
      for (std::size_t j = 0; j < v.size(); ++j) {
        Node m = v.item(j);
        if (!m.is_map())
          throw UsageError(m.where() + ": expected a mapping for merging (<<), got " + m.kind_name(), flags,
                           m.where(), "input.yaml-bad-merge");
        sub.emplace_back();
        flatten(m, sub.back(), nullptr, flags);
      }
      for (auto it = sub.rbegin(); it != sub.rend(); ++it) merged.insert(merged.end(), it->begin(), it->end());
    } else {
      throw UsageError(v.where() + ": expected a mapping or list of mappings for merging (<<), got " + v.kind_name(),
                       flags, v.where(), "input.yaml-bad-merge");
    }
  }
  out.insert(out.end(), merged.begin(), merged.end());
  if (own_from) *own_from = out.size();
  out.insert(out.end(), own.begin(), own.end());
}
}  // namespace

std::vector<std::pair<Node, Node>> merged_pairs(const Node& map, const std::vector<std::string>& flags,
                                                std::size_t* own_from) {
  std::vector<std::pair<Node, Node>> out;
  out.reserve(map.size());
  flatten(map, out, own_from, flags);
  return out;
}

void cap_warnings(std::vector<std::string>& warnings, std::size_t from, const std::string& path) {
  std::vector<std::pair<std::string, std::size_t>> kinds;  // "input.x" -> how many seen
  std::vector<std::string> kept(warnings.begin(), warnings.begin() + static_cast<std::ptrdiff_t>(std::min(from, warnings.size())));
  for (std::size_t i = from; i < warnings.size(); ++i) {
    const std::string& w = warnings[i];
    const auto id = split_rule_id(w);  // "[input.x] text" (util/rule_id.h)
    if (!id || id->first.rfind("input.", 0) != 0) {
      kept.push_back(w);
      continue;
    }
    const std::string& kind = id->first;
    auto it = std::find_if(kinds.begin(), kinds.end(), [&](const auto& k) { return k.first == kind; });
    if (it == kinds.end()) it = kinds.insert(kinds.end(), {kind, 0});
    if (++it->second <= limits::kMaxWarningsPerKind) kept.push_back(w);
  }
  for (const auto& [kind, n] : kinds)
    if (n > limits::kMaxWarningsPerKind)
      kept.push_back(with_rule_id(kind, path + ": ... and " + std::to_string(n - limits::kMaxWarningsPerKind) +
                                            " more like these (only the first " +
                                            std::to_string(limits::kMaxWarningsPerKind) +
                                            " are shown, limits::kMaxWarningsPerKind)"));
  warnings = std::move(kept);
}

void non_scalar_key(const Node& key, const std::vector<std::string>& flags) {
  throw UsageError(key.where() + ": the key at " + key.where() + " is not a scalar (it is " + key.kind_name() +
                       "); keys must be plain names",
                   flags, key.where(), "input.yaml-non-scalar-key");
}

void unsupported_tag(const Node& n, const std::vector<std::string>& flags) {
  throw UsageError(n.where() + ": unsupported YAML tag " + display_tag(n.tag()) +
                       " (Python's yaml.safe_load, which Megatron's loaders use, cannot construct it either)",
                   flags, n.where(), "input.yaml-tag");
}

}  // namespace mr::yaml
