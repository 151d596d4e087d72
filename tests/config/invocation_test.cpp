// config/parse/invocation.h and argparse.h's parse_known_args: the program's own arguments (the words after it,
// torchrun's form) are read first, their Megatron flags kept and the rest handed back; the config files and the
// command line come after them and win, as the flags megatron-run appends win in the program's argparse.
#include <catch2/catch.hpp>

#include <set>

#include "config/parse/argparse.h"
#include "config/parse/command_line.h"
#include "config/parse/invocation.h"
#include "corpus.h"

namespace {

std::vector<std::string> texts(const std::vector<mr::Token>& tokens) {
  std::vector<std::string> out;
  for (const mr::Token& t : tokens) out.push_back(t.text);
  return out;
}

}  // namespace

TEST_CASE("parse_known_args: the words argparse would refuse are handed back, in order", "[invocation]") {
  const mr::Schema& schema = mr::Schema::megatron();
  mr::Namespace ns = mr::default_namespace(schema);
  std::vector<mr::Token> rest;
  mr::parse_tokens(schema,
                   mr::argv_tokens({"--num-layers", "4", "--language-model-type", "mistral_7b", "--use-te",
                                    "--bf16", "--data-path", "a", "b", "--own=1", "--", "--hidden-size", "8"}),
                   ns, &rest);
  CHECK(ns["num_layers"].as_int() == 4);
  CHECK(ns["bf16"].truthy());
  CHECK(ns["data_path"].py_repr() == "['a', 'b']");
  CHECK(ns["hidden_size"].is_none());  // after "--": argparse's positionals, none of them Megatron's
  CHECK(texts(rest) == std::vector<std::string>{"--language-model-type", "mistral_7b", "--use-te", "--own=1", "--",
                                                "--hidden-size", "8"});
  // A bad value of a known flag is still refused.
  mr::Namespace bad = mr::default_namespace(schema);
  std::vector<mr::Token> ignored;
  CHECK_THROWS_WITH(mr::parse_tokens(schema, mr::argv_tokens({"--num-layers", "x", "--own"}), bad, &ignored),
                    Catch::Contains("argument --num-layers: invalid int value: 'x'"));
  // Without the out parameter, the same words are refused.
  mr::Namespace strict = mr::default_namespace(schema);
  CHECK_THROWS_WITH(mr::parse_tokens(schema, mr::argv_tokens({"--num-layers", "4", "--own"}), strict),
                    Catch::Contains("unrecognized arguments: --own"));
}

TEST_CASE("program arguments: read first, the config files and the command line win, the rest is the program's",
          "[invocation]") {
  mr::Invocation inv = mrtest::placeholder_invocation();
  inv.program_cli = mr::argv_tokens({"--num-layers", "8", "--hidden-size", "64", "--extra", "x"}, 5);
  inv.cli = mr::argv_tokens({"--num-layers", "2"});
  const mr::Parsed p = mr::parse_invocation(mr::Schema::megatron(), inv);
  CHECK(p.ns["num_layers"].as_int() == 2);  // appended after the program's own: wins
  CHECK(p.ns["hidden_size"].as_int() == 64);
  CHECK(p.ns.provenance("hidden_size").where == "argv[7]");  // its place on megatron-run's command line
  CHECK(texts(p.program_own) == std::vector<std::string>{"--extra", "x"});
  CHECK(texts(p.argv) == std::vector<std::string>{"--num-layers", "2"});  // what megatron-run would append
}

TEST_CASE("program arguments: the parse keeps both sides, the given arguments' words and the dests they carry",
          "[invocation]") {
  mr::Invocation inv = mrtest::placeholder_invocation();
  inv.program_cli = mr::argv_tokens({"--num-layers", "8", "--hidden-size", "64", "--extra", "x"}, 5);
  inv.cli = mr::argv_tokens({"--num-layers", "2", "--enable-msc", "--disable-msc"});
  const mr::Parsed p = mr::parse_arguments(mr::Schema::megatron(), inv);
  REQUIRE(p.program);
  CHECK(p.program->own["num_layers"].as_int() == 8);  // the program's words alone
  CHECK(p.program->own.provenance("hidden_size").kind == mr::Provenance::Kind::Cli);
  CHECK(p.program->given["num_layers"].as_int() == 2);  // the given arguments alone
  CHECK(p.program->given.provenance("hidden_size").kind == mr::Provenance::Kind::Default);
  // As parse_args() leaves them: --disable-msc turned --enable-msc off, so it is not appended.
  CHECK(p.program->appended.words == std::vector<std::string>{"--num-layers", "2", "--disable-msc"});
  CHECK(p.program->carried == std::set<std::string, std::less<>>{"num_layers", "disable_msc_deprecated"});
  CHECK(mr::appended_argv(p) == p.program->appended.words);

  inv.append_to_program = false;
  CHECK(mr::parse_arguments(mr::Schema::megatron(), inv).program->carried.empty());  // nothing appended
  inv.program_cli.clear();
  CHECK_FALSE(mr::parse_arguments(mr::Schema::megatron(), inv).program);
  inv.program_named = true;  // a program without words: what is appended to it is kept all the same
  inv.append_to_program = true;
  CHECK(mr::appended_argv(mr::parse_arguments(mr::Schema::megatron(), inv)) ==
        std::vector<std::string>{"--num-layers", "2", "--disable-msc"});
}

TEST_CASE("env defaults: a WORLD_SIZE that is no integer is input.env-not-integer, named by the variable or its line",
          "[invocation]") {
  mr::Invocation inv = mrtest::placeholder_invocation();
  inv.env.vars["WORLD_SIZE"] = "two";  // --inprocess-active-world-size defaults to it, as Megatron's parser does
  try {
    (void)mr::parse_arguments(mr::Schema::megatron(), inv);
    FAIL("WORLD_SIZE=two was accepted");
  } catch (const mr::UsageError& e) {
    CHECK(e.id == "input.env-not-integer");
    CHECK(e.where == "WORLD_SIZE");  // not a config file: the process environment
    CHECK(std::string(e.what()).find("WORLD_SIZE (default of --inprocess-active-world-size): invalid int value: "
                                     "'two'") != std::string::npos);
  }
  inv.env.var_where["WORLD_SIZE"] = "ev.yaml:3";  // set by a config file's ENV_VARS
  try {
    (void)mr::parse_arguments(mr::Schema::megatron(), inv);
    FAIL("WORLD_SIZE=two was accepted");
  } catch (const mr::UsageError& e) {
    CHECK(e.id == "input.env-not-integer");
    CHECK(e.where == "ev.yaml:3");
  }
}

TEST_CASE("--disable-msc: deprecated in its schema entry, warned once, and still turns --enable-msc off",
          "[invocation]") {
  const mr::Arg* a = mr::Schema::megatron().find_flag("--disable-msc");
  REQUIRE(a);
  CHECK(std::string(a->spec->deprecated) == "MSC is off unless --enable-msc is given");
  mr::Invocation inv = mrtest::placeholder_invocation();
  inv.cli = mr::argv_tokens({"--enable-msc", "--disable-msc"});
  const mr::Parsed p = mr::parse_arguments(mr::Schema::megatron(), inv);
  CHECK_FALSE(p.ns["enable_msc"].truthy());
  int said = 0;
  for (const std::string& w : p.warnings) said += w.find("--disable-msc is deprecated") != std::string::npos;
  CHECK(said == 1);
  // With a program whose own words hold it too: once for the program's words, none for what is appended.
  inv.cli = mr::argv_tokens({"--num-layers", "2"});
  inv.program_cli = mr::argv_tokens({"--disable-msc"}, 5);
  said = 0;
  for (const std::string& w : mr::parse_arguments(mr::Schema::megatron(), inv).warnings)
    said += w.find("--disable-msc is deprecated") != std::string::npos;
  CHECK(said == 1);
}
