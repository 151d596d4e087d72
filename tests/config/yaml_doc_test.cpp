// config/parse/yaml_doc.h: one YAML document, checked while it is built (aliases, expansion, depth, documents, text).
#include <catch2/catch.hpp>

#include <string>

#include "config/limits.h"
#include "config/parse/yaml_doc.h"

namespace y = mr::yaml;

namespace {
// The refusal parse() throws for `text` (id and message), or empty ones when it parses.
mr::UsageError refusal(const std::string& text) {
  try {
    y::parse(text, "f.yaml");
  } catch (const mr::UsageError& e) {
    return e;
  }
  return mr::UsageError("");
}
// The root of a parsed document kept alive for the test (a Node is valid while its Document lives).
y::Node root_of(const std::string& text, const std::string& path = "f.yaml") {
  static std::vector<y::Document> keep;
  keep.push_back(y::parse(text, path));
  return keep.back().root();
}
bool has(const mr::UsageError& e, const std::string& s) { return std::string(e.what()).find(s) != std::string::npos; }

// Nine times nine ... anchors: `levels` levels of 9 aliases each ("billion laughs").
std::string laughs(int levels, const std::string& leaf, const std::string& use_key) {
  std::string s = "a: &a [" + leaf + "]\n";
  std::string prev = "a";
  for (int i = 0; i < levels; ++i) {
    std::string n = "l" + std::to_string(i);
    s += n + ": &" + n + " [";
    for (int k = 0; k < 9; ++k) s += (k ? ", *" : "*") + prev;
    s += "]\n";
    prev = n;
  }
  return s + use_key + ": *" + prev + "\n";
}
}  // namespace

TEST_CASE("yaml_doc: the tree, tags, lines, aliases shared", "[yaml-doc]") {
  y::Document d = y::parse("a: 1\nb: 'q'\nc: &x [1, ~, {k: v}]\nd: *x\n!!str e: !!int 5\n", "f.yaml");
  y::Node r = d.root();
  REQUIRE(r.is_map());
  REQUIRE(r.size() == 5);
  CHECK(r.key(0).scalar() == "a");
  CHECK(r.value(0).plain());
  CHECK(r.value(1).tag() == "!");
  CHECK(r.value(2).is_sequence());
  CHECK(r.value(2).item(1).is_null());
  CHECK(r.value(2).item(2).get("k").scalar() == "v");
  CHECK(r.value(3).same(r.value(2)));  // an alias is the node it names
  CHECK(r.value(3).line() == 3);
  CHECK(r.key(4).where() == "f.yaml:5");
  CHECK(y::display_tag(r.value(4).tag()) == "!!int");
  CHECK(y::standard_tag(r.value(4).tag(), "int"));
  CHECK(!r.get("zzz").defined());
  CHECK(d.expanded_nodes() == 21);  // the alias counts its 6 nodes again
  CHECK(root_of("", "e.yaml").is_null());
  CHECK(root_of("# only a comment\n", "e.yaml").is_null());
  CHECK(root_of("\xEF\xBB\xBF" "a: 1\n", "bom.yaml").get("a").scalar() == "1");  // a UTF-8 BOM is fine
  CHECK(root_of("a: 1\n...\n", "end.yaml").is_map());  // an explicit end of the one document
}

TEST_CASE("yaml_doc: recursive aliases are refused naming file:line", "[yaml-doc]") {
  for (const char* text : {"--data-path: &a [*a]\n", "a: &a {b: *a}\n", "a: &a\n  b:\n    - c: *a\n",
                           "x: &a\n  <<: *a\n", "x: &a [1, [2, [3, *a]]]\n", "&r [*r]\n", "x: &a {<<: [*a]}\n",
                           "a: &a [&b [*b]]\n"}) {
    INFO(text);
    auto e = refusal(text);
    CHECK(e.id == "input.yaml-recursive-alias");
    CHECK(has(e, "f.yaml:"));
    CHECK(has(e, "is inside the node it names"));
  }
  auto e = refusal("a: 1\nb: &b\n  - x\n  - *b\n");
  CHECK(std::string(e.what()).find("f.yaml:4: the alias *b is inside the node it names (anchored at line 2)") == 0);
  CHECK(e.where == "f.yaml:4");
  // An alias to a finished node is fine, even several levels deep.
  CHECK(y::parse("a: &a [1]\nb: &b [*a, *a]\nc: [*b, *a]\n", "f.yaml").expanded_nodes() == 19);
}

TEST_CASE("yaml_doc: alias expansion is bounded (nodes and bytes), naming the limit and the line", "[yaml-doc]") {
  auto e = refusal(laughs(9, "\"lol\"", "--data-path"));  // 9^10 nodes in ~400 bytes
  CHECK(e.id == "input.yaml-expansion-limit");
  CHECK(has(e, "more than 1000000 nodes (the limit, limits::kMaxYamlNodes)"));
  CHECK(has(e, "where the alias *l"));
  // Switches and ENV_VARS keys expand too: the document is checked before anything reads it.
  CHECK(refusal(laughs(9, "1", "--use-mcore-models")).id == "input.yaml-expansion-limit");
  // Few nodes, many bytes: a 1 MiB scalar used 100 times.
  std::string big = "a: &a \"" + std::string(1 << 20, 'x') + "\"\nb: [";
  for (int i = 0; i < 100; ++i) big += (i ? ", *a" : "*a");
  auto b = refusal(big + "]\n");
  CHECK(b.id == "input.yaml-expansion-limit");
  CHECK(has(b, "more than 64 MiB of scalars (the limit, limits::kMaxYamlExpandedBytes)"));
  // Just under the node limit without aliases parses (a long list is fine).
  std::string list = "l:\n";
  for (int i = 0; i < 100000; ++i) list += "- " + std::to_string(i) + "\n";
  CHECK(root_of(list, "f.yaml").get("l").size() == 100000);
}

TEST_CASE("yaml_doc: nesting deeper than the limit is refused naming it and the line", "[yaml-doc]") {
  const int lim = mr::limits::kMaxYamlDepth;
  auto flow = [](int n) { return "a: " + std::string(static_cast<size_t>(n), '[') + std::string(static_cast<size_t>(n), ']') + "\n"; };
  CHECK_NOTHROW(y::parse(flow(lim - 1), "f.yaml"));  // the root mapping is one level
  for (int n : {lim, 1000, 100000}) {
    auto e = refusal(flow(n));
    CHECK(e.id == "input.yaml-nesting-limit");
    CHECK(has(e, "f.yaml:1: YAML sequences and mappings nested deeper than 64 levels (the limit, limits::kMaxYamlDepth)"));
  }
  std::string block;
  for (int i = 0; i < 100; ++i) block += std::string(2 * static_cast<size_t>(i), ' ') + "k" + std::to_string(i) + ":\n";
  auto b = refusal(block);
  CHECK(b.id == "input.yaml-nesting-limit");
  CHECK(has(b, "f.yaml:65:"));
  // Through an alias: a deep node used deep down.
  std::string deep = "a: &a " + std::string(40, '[') + std::string(40, ']') + "\nb: " + std::string(30, '[') + "*a" +
                     std::string(30, ']') + "\n";
  auto a = refusal(deep);
  CHECK(a.id == "input.yaml-nesting-limit");
  CHECK(has(a, "counting what the alias *a stands for"));
}

TEST_CASE("yaml_doc: a second document is refused naming its line", "[yaml-doc]") {
  auto e = refusal("a: 1\n---\nb: 2\n");
  CHECK(e.id == "input.yaml-multiple-documents");
  CHECK(std::string(e.what()).find("f.yaml:2: a second YAML document starts here") == 0);
  CHECK(refusal("---\na: 1\n---\n").id == "input.yaml-multiple-documents");
  CHECK(refusal("a: 1\n...\n---\nb: 2\n").id == "input.yaml-multiple-documents");
}

TEST_CASE("yaml_doc: text that is not printable UTF-8 is refused naming the line", "[yaml-doc]") {
  auto nul = refusal(std::string("a: 1\nb: x\0y\n", 12));
  CHECK(nul.id == "input.not-text");
  CHECK(has(nul, "f.yaml:2: the file holds the control character U+0000 (column 5)"));
  CHECK(refusal("a: \x01\n").id == "input.not-text");
  CHECK(refusal("a: \x7f\n").id == "input.not-text");
  CHECK(refusal("a: \xc2\x80\n").id == "input.not-text");  // U+0080, a C1 control
  auto bad = refusal("a: 1\n\n--save: /x\xff\n");
  CHECK(bad.id == "input.not-text");
  CHECK(has(bad, "f.yaml:3: the file is not UTF-8 text (byte 0xff at column 11)"));
  CHECK(refusal("a: \xc0\xaf\n").id == "input.not-text");          // overlong
  CHECK(refusal("a: \xed\xa0\x80\n").id == "input.not-text");      // a surrogate
  CHECK(refusal("\xff\xfe" "a\0:\0").id == "input.not-text");      // UTF-16
  CHECK(refusal("a: \xe2\x82").id == "input.not-text");            // cut short
  // Tabs, CRLF, non-ASCII letters and emoji are text.
  CHECK(root_of("a:\t\"caf\xc3\xa9 \xf0\x9f\x98\x80\"\r\nb: 2\r\n", "f.yaml").get("b").scalar() == "2");
}

TEST_CASE("yaml_doc: quoted values that swallow key lines, and quotes never closed", "[yaml-doc]") {
  y::Node r = root_of("--save: \"/x\n--num-layers: 4\n--hidden-size: 9999\"\n--lr: 1\n", "f.yaml");
  REQUIRE(r.size() == 2);  // yaml-cpp (and PyYAML) fold the lines into one value
  CHECK(r.value(0).scalar() == "/x --num-layers: 4 --hidden-size: 9999");
  CHECK(r.value(0).swallowed_line() == 2);
  CHECK(r.value(0).swallowed_key() == "--num-layers");
  CHECK(r.value(1).swallowed_line() == 0);
  // Single quotes with '' inside, escapes in double quotes, `- key:` items.
  CHECK(root_of("a: 'it''s\n  b: 1'\n", "f.yaml").value(0).swallowed_key() == "b");
  CHECK(root_of("a: \"x\\\"\n- b: 1\"\n", "f.yaml").value(0).swallowed_key() == "b");
  // A multi-line quoted value whose lines are not keys is plain YAML folding.
  CHECK(root_of("a: \"one\n  two: three\"\n", "f.yaml").value(0).swallowed_line() == 2);
  CHECK(root_of("a: \"one\n  two three\"\n", "f.yaml").value(0).swallowed_line() == 0);
  CHECK(root_of("a: \"one\n  http://x\"\n", "f.yaml").value(0).swallowed_line() == 0);
  // yaml-cpp takes the rest of the file for a quote that is never closed; Python's loader refuses it, so do we.
  auto e = refusal("--save: \"/x\n--num-layers: 4\n");
  CHECK(e.id == "input.yaml-syntax");
  CHECK(has(e, "f.yaml:1: the quoted value starting here is never closed"));
  CHECK(has(e, "the key '--num-layers' at line 2"));
  CHECK(refusal("a: 'x\n").id == "input.yaml-syntax");
  CHECK(refusal("a: !!str \"x\n").id == "input.yaml-syntax");
}

TEST_CASE("yaml_doc: syntax errors name file:line", "[yaml-doc]") {
  auto e = refusal("a: 1\nb: [1, 2\n");
  CHECK(e.id == "input.yaml-syntax");
  CHECK(has(e, "f.yaml:"));
  CHECK(has(e, "invalid YAML"));
  CHECK(refusal("a: *nope\n").id == "input.yaml-syntax");
  // A collection never closed: yaml-cpp stops at the end of the text, a line past the last; the message names
  // the line the '[' or '{' opened on, with or without a final line break.
  auto open_seq = refusal("--num-layers: 2\n--hidden-size: [256\n");
  CHECK(has(open_seq, "f.yaml:2: invalid YAML: end of sequence flow not found (the '[' opened on this line is "
                      "never closed)"));
  CHECK(has(refusal("--num-layers: 2\n--hidden-size: [256"), "f.yaml:2: invalid YAML"));
  CHECK(has(refusal("a: {x: [1, 2],\n  y: 3\n\n"), "f.yaml:1: invalid YAML: end of map flow not found (the '{'"));
  CHECK(has(refusal("a: [1,\n  [2, 3],\n  [4\n"), "f.yaml:3:"));  // the innermost one left open
  // A tab in the indentation is named as the cause.
  auto tab = refusal("\t--num-layers: 2\n");
  CHECK(tab.id == "input.yaml-syntax");
  CHECK(has(tab, "f.yaml:1: invalid YAML: tabs are not allowed for indentation in YAML"));
  CHECK(has(refusal("a:\n  b: 1\n\tc: 2\n"), "f.yaml:3: invalid YAML: tabs are not allowed for indentation"));
  // Other errors keep yaml-cpp's wording and stay within the file's lines.
  auto other = refusal("a: b: c\n");
  CHECK(has(other, "invalid YAML"));
  CHECK_FALSE(has(other, "tabs"));
}

TEST_CASE("yaml_doc: merge keys in PyYAML's order; bad merges and non-scalar keys refused", "[yaml-doc]") {
  y::Node r = root_of("b1: &b1 {x: 1, y: 1}\nb2: &b2 {y: 2, z: 2}\nm:\n  <<: [*b1, *b2]\n  z: 3\n", "f.yaml");
  size_t own = 0;
  auto pairs = y::merged_pairs(r.get("m"), {}, &own);
  // merged (the first listed wins, so it comes last), then the mapping's own
  REQUIRE(pairs.size() == 5);
  CHECK(own == 4);
  CHECK(pairs[0].first.scalar() == "y");
  CHECK(pairs[0].second.scalar() == "2");
  CHECK(pairs[2].first.scalar() == "x");
  CHECK(pairs[4].first.scalar() == "z");
  try {
    y::merged_pairs(root_of("m:\n  <<: 1\n", "f.yaml").get("m"));
    FAIL("no error");
  } catch (const mr::UsageError& e) {
    CHECK(e.id == "input.yaml-bad-merge");
    CHECK(std::string(e.what()).find("f.yaml:2:") == 0);
  }
  y::Node k = root_of("[a, b]: 1\n", "f.yaml").key(0);
  try {
    y::non_scalar_key(k);
    FAIL("no error");
  } catch (const mr::UsageError& e) {
    CHECK(e.id == "input.yaml-non-scalar-key");
    CHECK(std::string(e.what()) == "f.yaml:1: the key at f.yaml:1 is not a scalar (it is a sequence); keys must be plain names");
  }
}

TEST_CASE("yaml_doc: cap_warnings keeps a few of each kind and counts the rest", "[yaml-doc]") {
  std::vector<std::string> w = {"before"};
  for (int i = 0; i < 25; ++i) w.push_back("[input.yaml-duplicate-key] f.yaml:" + std::to_string(i) + ": dup");
  w.push_back("[input.yaml-multiline-quoted] f.yaml:9: q");
  w.push_back("other");
  y::cap_warnings(w, 1, "f.yaml");
  REQUIRE(w.size() == 1 + mr::limits::kMaxWarningsPerKind + 3);
  CHECK(w.front() == "before");
  CHECK(w.back() == "[input.yaml-duplicate-key] f.yaml: ... and 15 more like these (only the first 10 are shown, "
                    "limits::kMaxWarningsPerKind)");
}
