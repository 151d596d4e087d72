// config/command_line.h and util/shell.h: the Megatron command line a parse stands for (`--format argv`),
// checked on every corpus file: the words parse back to the same namespace, a plain config file and its
// functional-test (MODEL_ARGS) twin give the same words, and the shell-quoted line evals to the same words.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "binary.h"
#include "config/parse/command_line.h"
#include "config/parse/invocation.h"
#include "util/shell.h"
#include "corpus.h"

namespace fs = std::filesystem;

namespace {

using mrtest::corpus_files;

mr::Parsed parse_file(const std::string& file) {
  mr::Invocation inv = mrtest::placeholder_invocation();
  inv.config_files = {file};
  return mr::parse_invocation(mr::Schema::megatron(), inv);
}

mr::Parsed parse_words(const std::vector<std::string>& words) {
  mr::Invocation inv = mrtest::placeholder_invocation();
  inv.cli = mr::argv_tokens(words);
  return mr::parse_invocation(mr::Schema::megatron(), inv);
}

// The dests that differ between two namespaces (value or kind), "" when none.
std::string first_difference(const mr::Namespace& a, const mr::Namespace& b) {
  for (const auto& e : a.entries()) {
    if (!b.has(e.dest)) return e.dest + " (missing)";
    const mr::Value& o = b[e.dest];
    if (!(o == e.value) || o.kind() != e.value.kind()) return e.dest + ": " + e.value.py_repr() + " vs " + o.py_repr();
  }
  return a.size() == b.size() ? "" : "sizes differ";
}

// The plain-layout twin of a parse: `dest: <JSON value>` for every argument a file or the command line set.
std::string plain_twin(const mr::Namespace& ns) {
  std::string text;
  for (const auto& e : ns.entries()) {
    auto k = e.prov.kind;
    if (k == mr::Provenance::Kind::Config || k == mr::Provenance::Kind::Cli) text += e.dest + ": " + e.value.json() + "\n";
  }
  return text;
}

// Calls f(file, parse) for every corpus file that Megatron's parser accepts (the reference says which do not;
// they have nothing to print) and that is not a --yaml-cfg run; returns how many.
template <class F>
size_t for_each_parsed_corpus_file(F f) {
  size_t n = 0;
  for (const fs::path& file : corpus_files()) {
    mr::Parsed p;
    try {
      p = parse_file(file.string());
    } catch (const mr::UsageError&) {
      continue;
    }
    if (p.yaml_cfg) continue;
    f(file, p);
    ++n;
  }
  return n;
}

}  // namespace

TEST_CASE("every corpus file: --format argv's words parse back to the same namespace", "[command-line]") {
  size_t n = for_each_parsed_corpus_file([](const fs::path& f, const mr::Parsed& p) {
    INFO(f.filename().string());
    mr::MegatronArgv a = mr::megatron_argv(mr::Schema::megatron(), p.ns);
    CHECK(a.unrepresentable.empty());
    mr::Parsed back = parse_words(a.words);
    CHECK(first_difference(p.ns, back.ns) == "");
    CHECK(first_difference(back.ns, p.ns) == "");
    // The words again give the same words (a fixed point).
    CHECK(mr::megatron_argv(mr::Schema::megatron(), back.ns).words == a.words);
  });
  CHECK(n > 100);
}

TEST_CASE("every corpus file: the plain-layout twin gives the same words as the MODEL_ARGS file", "[command-line]") {
  size_t n = for_each_parsed_corpus_file([](const fs::path& f, const mr::Parsed& p) {
    INFO(f.filename().string());
    std::string twin = mrtest::write_file("twin.yaml", plain_twin(p.ns), "command-line");
    mr::Parsed q = parse_file(twin);
    CHECK(mr::megatron_argv(mr::Schema::megatron(), q.ns).words == mr::megatron_argv(mr::Schema::megatron(), p.ns).words);
  });
  CHECK(n > 100);
}

TEST_CASE("argv: switches, negations, lists, enums, signals, patterns and dash-leading values", "[command-line]") {
  std::vector<std::string> in = {"--no-masked-softmax-fusion", "--exit-signal", "SIGUSR1", "--moe-layer-freq",
                                 "([1]*2+[0])*2", "--attention-backend", "flash", "--data-path", "a", "b",
                                 "--lr", "1e-05", "--tokenizer-model=-odd", "--num-layers", "4",
                                 "--untie-embeddings-and-output-weights", "--seed", "-3"};
  mr::Parsed p = parse_words(in);
  mr::MegatronArgv a = mr::megatron_argv(mr::Schema::megatron(), p.ns);
  REQUIRE(a.unrepresentable.empty());
  auto has = [&](std::vector<std::string> seq) {
    return std::search(a.words.begin(), a.words.end(), seq.begin(), seq.end()) != a.words.end();
  };
  CHECK(has({"--no-masked-softmax-fusion"}));
  CHECK(has({"--exit-signal", "SIGUSR1"}));
  CHECK(has({"--moe-layer-freq", "[1,1,0,1,1,0]"}));
  CHECK(has({"--attention-backend", "flash"}));
  CHECK(has({"--data-path", "a", "b"}));
  CHECK(has({"--lr", "1e-05"}));
  CHECK(has({"--tokenizer-model=-odd"}));
  CHECK(has({"--seed", "-3"}));
  CHECK(first_difference(p.ns, parse_words(a.words).ns) == "");
}

TEST_CASE("argv: a value no command line can carry is named", "[command-line]") {
  std::string f = mrtest::write_file("null-seq.yaml", "seq_length: 8\nseed: null\n", "command-line");
  mr::Parsed p = parse_file(f);
  mr::MegatronArgv a = mr::megatron_argv(mr::Schema::megatron(), p.ns);
  REQUIRE(a.unrepresentable.size() == 1);
  CHECK(a.unrepresentable[0] == "--seed (None)");
  try {
    mr::resolved_argv(p);
    FAIL("no error");
  } catch (const mr::UsageError& e) {
    CHECK(e.id == "input.unrepresentable-value");
    CHECK(std::string(e.what()).find("--seed (None)") != std::string::npos);
  }
}

TEST_CASE("shell_join: eval gives back every word exactly", "[command-line][shell]") {
  std::vector<std::string> words = {"plain", "with space", "it's", "\"dq\"", "$HOME", "`x`", "a\nb", "", "\\",
                                    "tab\there", "=x", "*", "~", "--flag=va lue", "\x01\x7f", "é"};
  std::string line = mr::shell_join(words);
  // printf '%s\0' under sh: NUL-separated words as the shell sees them after eval.
  std::string script = mrtest::write_file("eval.sh", "eval \"set -- " + std::string() + "\"\n", "command-line");
  std::ofstream(script, std::ios::binary) << "eval \"set -- $(cat <<'MR_EOF'\n" << line << "\nMR_EOF\n)\"\nprintf '%s\\0' \"$@\"\n";
  mrtest::Proc r = mrtest::run_shell("sh '" + script + "'");
  REQUIRE(r.exit == 0);
  std::vector<std::string> back;
  size_t start = 0;
  for (size_t i = 0; i < r.out.size(); ++i)
    if (r.out[i] == '\0') {
      back.push_back(r.out.substr(start, i - start));
      start = i + 1;
    }
  CHECK(back == words);
  CHECK(mr::shell_quote("--num-layers") == "--num-layers");
  CHECK(mr::shell_quote("it's") == "'it'\\''s'");
  CHECK(mr::shell_quote("") == "''");
}

TEST_CASE("megatron-run --format argv and argv0 on a plain config file", "[command-line][cli]") {
  std::string f = mrtest::write_file("plain.yaml", "num_layers: 4\ndata_path: [\"a b\", \"c'd\"]\nlr: 0.001\n", "command-line");
  mrtest::Proc r = mrtest::megatron_run("--dry-run --format argv --config '" + f + "' --seed 7");
  CHECK(r.exit == 0);
  CHECK(r.out == "--num-layers 4 --seed 7 --lr 0.001 --data-path 'a b' 'c'\\''d'\n");
  mrtest::Proc z = mrtest::megatron_run("--dry-run --format argv0 --config '" + f + "'");
  CHECK(z.exit == 0);
  static const char kWords[] = "--num-layers\0" "4\0" "--lr\0" "0.001\0" "--data-path\0" "a b\0" "c'd\0";
  CHECK(z.out == std::string(kWords, sizeof kWords - 1));
}

TEST_CASE("megatron-run --format argv warns on stderr of what the file hides (a duplicate key)", "[command-line][cli]") {
  // The line people paste into a launcher: stdout is exactly it; the key written twice is named on stderr, as the
  // text and JSON outputs name it.
  std::string f = mrtest::write_file("dup.yaml", "MODEL_ARGS:\n  --num-layers: 2\n  --num-layers: 4\n", "command-line");
  mrtest::Proc r = mrtest::megatron_run("--dry-run --format argv --config '" + f + "'");
  CHECK(r.exit == 0);
  CHECK(r.out == "--num-layers 4\n");
  CHECK_THAT(r.err, Catch::Contains("dup.yaml:3: warning[input.yaml-duplicate-key]: duplicate key "
                                    "'--num-layers' (also at"));
}
