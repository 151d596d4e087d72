// Printable output: every message megatron-run writes for people (usage errors, diagnostics, `check` lines, log
// records, the dry-run table) escapes control characters and bytes that are not UTF-8 (util/text.h), and every
// JSON output stays valid, printable JSON whatever bytes a value, a file name or a config file held.
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "binary.h"
#include "config/print.h"
#include "config/value.h"
#include "util/log.h"
#include "util/text.h"

using mr::printable;
using namespace std::string_literals;

TEST_CASE("printable: control characters and invalid UTF-8 escaped, text kept", "[printable]") {
  CHECK(printable("plain text, é, 日本, 🙂") == "plain text, é, 日本, 🙂");
  CHECK(printable("a\0b"s) == "a\\x00b");
  CHECK(printable("bell\a") == "bell\\x07");
  CHECK(printable("\x1b[31mred") == "\\x1b[31mred");
  CHECK(printable("tab\tand\nnewline") == "tab\tand\nnewline");
  CHECK(printable("tab\tand\nnewline", /*keep_newlines=*/false) == "tab\\x09and\\x0anewline");
  CHECK(printable("cr\r") == "cr\\x0d");
  CHECK(printable("del\x7f") == "del\\x7f");
  CHECK(printable("\xff\xfe") == "\\xff\\xfe");                  // not UTF-8 at all
  CHECK(printable("trunc\xc3") == "trunc\\xc3");                // a truncated sequence
  CHECK(printable("\xc3(") == "\\xc3(");                         // a lead byte without its continuation
  CHECK(printable("\xc0\xaf") == "\\xc0\\xaf");                  // overlong '/'
  CHECK(printable("\xed\xa0\x80") == "\\xed\\xa0\\x80");         // a UTF-16 surrogate
  CHECK(printable("\xf4\x90\x80\x80") == "\\xf4\\x90\\x80\\x80");  // beyond U+10FFFF
  CHECK(printable("\xc2\x85") == "\\u0085");                     // C1 control NEL
  CHECK(printable("\xe2\x80\xae") == "\\u202e");                 // RIGHT-TO-LEFT OVERRIDE
  CHECK(printable("\xe2\x80\xa8") == "\\u2028");                 // LINE SEPARATOR
  CHECK(mr::is_printable("ok é"));
  CHECK_FALSE(mr::is_printable("\x01"));
  CHECK_FALSE(mr::is_printable("a\nb", false));
  // Every escaped output is printable.
  std::string all;
  for (int c = 0; c < 256; ++c) all += static_cast<char>(c);
  CHECK(mrtest::printable_output(printable(all)));
  CHECK(mrtest::printable_output(printable(all, false)));
}

TEST_CASE("abbreviate: long text cut at a character boundary", "[printable]") {
  CHECK(mr::abbreviate("short") == "short");
  CHECK(mr::abbreviate(std::string(300, 'x'), 10) == "xxxxxxxxxx... (300 bytes)");
  // "é" is two bytes: the cut never splits it.
  std::string s = "abcdefghi" + std::string("é") + std::string(100, 'z');
  CHECK(mr::abbreviate(s, 10) == "abcdefghi... (111 bytes)");
}

TEST_CASE("json_quote: valid, printable JSON for any bytes", "[printable]") {
  CHECK(mr::json_quote("a\0b"s) == "\"a\\u0000b\"");
  CHECK(mr::json_quote("\x7f") == "\"\\u007f\"");
  CHECK(mr::json_quote("\xc2\x85") == "\"\\u0085\"");
  CHECK(mr::json_quote("\xe2\x80\xae") == "\"\\u202e\"");
  CHECK(mr::json_quote("é") == "\"é\"");
  // A byte that is not UTF-8: Python's surrogateescape spelling, which json.loads accepts.
  CHECK(mr::json_quote("a\xff") == "\"a\\udcff\"");
  std::string all;
  for (int c = 0; c < 256; ++c) all += static_cast<char>(c);
  const std::string q = mr::json_quote(all);
  CHECK(mrtest::printable_output(q));
  CHECK_NOTHROW(mr::Value::parse_json(q));
}

TEST_CASE("abbreviate_inside: a long message keeps its start and its end (the reason), cut in the middle",
          "[printable]") {
  CHECK(mr::abbreviate_inside("short", 10, 4) == "short");
  const std::string msg = "--save /" + std::string(5000, 'd') + " cannot be written: File name too long";
  const std::string cut = mr::abbreviate_inside(msg, 400, 100);
  CHECK(cut.size() < 450);
  CHECK(cut.rfind("--save /ddd", 0) == 0);
  CHECK(cut.find("bytes cut] ... ") != std::string::npos);
  CHECK_THAT(cut, Catch::EndsWith("d cannot be written: File name too long"));
  // The cut counts the bytes left out; it never splits a character.
  std::string wide;
  for (int i = 0; i < 300; ++i) wide += "\xc3\xa9";  // é, 2 bytes each
  const std::string w = mr::abbreviate_inside(wide, 101, 51);
  CHECK(mr::is_printable(w));
  CHECK(w == std::string(wide.substr(0, 50)) + " ... [" + std::to_string(600 - 50 - 50) + " bytes cut] ... " +
                 wide.substr(550));
}

TEST_CASE("join: words with the separator between them, none at the ends", "[printable]") {
  CHECK(mr::join({}, ", ").empty());
  CHECK(mr::join({"a"}, ", ") == "a");
  CHECK(mr::join({"a", "b", "c"}, ", ") == "a, b, c");
  CHECK(mr::join({"--tp", "--tensor-model-parallel-size"}, "/") == "--tp/--tensor-model-parallel-size");
  CHECK(mr::join({"", "x", ""}, "|") == "|x|");  // empty words keep their place
  CHECK(mr::join({"a", "b"}, "") == "ab");
}

TEST_CASE("messages: the one formatting place escapes every diagnostic and usage message", "[printable]") {
  std::ostringstream os;
  mr::print_error(os, "bad \x01 value \xff");
  CHECK(os.str() == "megatron-run: error: bad \\x01 value \\xff\n");
  os.str("");
  mr::Diagnostic d;
  d.rule = "sanity.num-layers-positive";
  d.message = "value '\x1b[2J'";
  d.stage = mr::kStageSanity;
  mr::print_diagnostic(os, d);
  CHECK(os.str() == "megatron-run: error[sanity.num-layers-positive]: value '\\x1b[2J'\n");
  // With the config file's line (as `check` prints it); escaped too.
  os.str("");
  mr::Diagnostic w = d;
  w.where = "job\x07.yaml:25";
  w.level = mr::Diagnostic::Level::Warning;
  mr::print_diagnostic(os, w);
  CHECK(os.str() == "megatron-run: job\\x07.yaml:25: warning[sanity.num-layers-positive]: value '\\x1b[2J'\n");
  const std::string j = mr::diagnostic_json(d);
  CHECK(j.find("\"stage\": \"sanity\"") != std::string::npos);
  CHECK(mrtest::printable_output(j));
  CHECK(mr::Value::parse_json(mr::failure_json(1, {d})).is_object());
}

TEST_CASE("messages: a usage error shows its rule id as any refusal with an id, the generic one argparse's words",
          "[printable][usage-ids]") {
  std::ostringstream os;
  // With an id and a place: the place first, the id in the heading, the message without the place (escaped).
  const mr::UsageError placed("c\x07.yaml:3: a quote never \x01 closed", {"--config"}, "c\x07.yaml:3", "input.yaml-syntax");
  mr::print_usage_error(os, placed);
  CHECK(os.str() == "megatron-run: c\\x07.yaml:3: error[input.yaml-syntax]: a quote never \\x01 closed\n");
  const mr::Diagnostic d = mr::usage_diagnostic(placed);
  CHECK(d.rule == "input.yaml-syntax");
  CHECK(d.stage == mr::kStageInput);
  CHECK(d.message == "a quote never \x01 closed");
  CHECK(d.where == "c\x07.yaml:3");
  CHECK(d.flags == std::vector<std::string>{"--config"});
  // With an id, no place.
  os.str("");
  mr::print_usage_error(os, mr::UsageError("cannot read x.yaml: No such file", {}, {}, "input.unreadable"));
  CHECK(os.str() == "megatron-run: error[input.unreadable]: cannot read x.yaml: No such file\n");
  // Without an id: argparse's line, the place (if any) left in the message; its diagnostic's rule is "usage".
  os.str("");
  const mr::UsageError generic("c.yaml:1: unknown argument 'x'", {}, "c.yaml:1");
  mr::print_usage_error(os, generic);
  CHECK(os.str() == "megatron-run: error: c.yaml:1: unknown argument 'x'\n");
  CHECK(mr::usage_diagnostic(generic).rule == "usage");
  CHECK(mr::usage_diagnostic(generic).stage == mr::kStageParse);
  CHECK(mr::usage_diagnostic(generic).message == "unknown argument 'x'");
  // A newline in the file name is escaped in the place (one line's prefix), with and without an id, as `check`
  // prints it; a newline of the message itself stays a line break.
  os.str("");
  mr::print_usage_error(os, mr::UsageError("names/e\nrr.yaml:1: argument --num-layers: invalid int value: 'x'\nmore",
                                           {"--num-layers"}, "names/e\nrr.yaml:1"));
  CHECK(os.str() == "megatron-run: error: names/e\\x0arr.yaml:1: argument --num-layers: invalid int value: 'x'\nmore\n");
  os.str("");
  mr::print_usage_error(os, mr::UsageError("e\n.yaml:2: a quote never closed", {}, "e\n.yaml:2", "input.yaml-syntax"));
  CHECK(os.str() == "megatron-run: e\\x0a.yaml:2: error[input.yaml-syntax]: a quote never closed\n");
}

TEST_CASE("log records are escaped too", "[printable]") {
  std::stringstream captured;
  std::streambuf* old = std::clog.rdbuf(captured.rdbuf());
  mr::log::init(mr::log::Level::warning);
  mr::log::emit(mr::log::Level::warning, "a \x07 bell and \xfe");
  std::clog.rdbuf(old);
  CHECK(captured.str().find("a \\x07 bell and \\xfe") != std::string::npos);
  CHECK(mrtest::printable_output(captured.str()));
}

TEST_CASE("megatron-run prints only printable text for unprintable inputs", "[printable][cli]") {
  // Bytes on the command line (argv cannot carry NUL; config files can).
  auto value = mrtest::megatron_run("--dry-run --num-layers \"$(printf 'a\\001\\033[31m\\377')\"");
  CHECK(value.exit == 2);
  CHECK(value.err.find("invalid int value: 'a\\x01\\x1b[31m\\xff'") != std::string::npos);
  CHECK(mrtest::printable_output(value.all()));
  auto flag = mrtest::megatron_run("--dry-run \"--$(printf '\\033')x\"");
  CHECK(flag.exit == 2);
  CHECK(flag.err.find("--\\x1bx") != std::string::npos);
  CHECK(mrtest::printable_output(flag.all()));
  auto file = mrtest::megatron_run("--dry-run --config \"$(printf '/nonexistent/a\\001\\302\\205b')\"");
  CHECK(file.exit == 2);
  CHECK(file.err.find("/nonexistent/a\\x01\\u0085b") != std::string::npos);
  CHECK(mrtest::printable_output(file.all()));
  // NUL and binary garbage in a config file.
  auto nul = mrtest::megatron_run("--dry-run --config " + mrtest::write_file("nul.yaml", "num_layers: \"a\0b\"\n"s));
  CHECK(nul.exit == 2);
  CHECK(nul.err.find("nul.yaml:1: error[input.not-text]: the file holds the control character U+0000") != std::string::npos);
  CHECK(mrtest::printable_output(nul.all()));
  std::string garbage;
  for (int i = 0; i < 512; ++i) garbage += static_cast<char>((i * 131 + 7) % 256);
  auto bin = mrtest::megatron_run("--dry-run --config " + mrtest::write_file("garbage.yaml", garbage));
  CHECK(bin.exit == 2);
  CHECK(mrtest::printable_output(bin.all()));
  // A value with control characters and invalid UTF-8 in the dry-run table and in --explain: escaped.
  const std::string cfg = std::string(MR_SOURCE_DIR) + "/configs/default.yaml";
  auto table = mrtest::megatron_run("--dry-run --config " + cfg + " --data-cache-path \"$(printf 'x\\001\\377y')\"");
  CHECK(table.exit == 0);
  CHECK(table.out.find("x\\x01\\xffy") != std::string::npos);
  CHECK(mrtest::printable_output(table.all()));
  auto explain = mrtest::megatron_run("--dry-run --config " + cfg +
                                      " --data-cache-path \"$(printf 'x\\001')\" --explain --data-cache-path");
  CHECK(explain.out.find("data_cache_path = x\\x01") != std::string::npos);
  // JSON: valid and printable, the bytes escaped.
  auto json = mrtest::megatron_run("--dry-run --format json --config " + cfg +
                                   " --data-cache-path \"$(printf 'x\\001\\377y')\"");
  CHECK(json.exit == 0);
  CHECK(json.out.find("\"x\\u0001\\udcffy\"") != std::string::npos);
  CHECK(mrtest::printable_output(json.out));
  CHECK_NOTHROW(mr::Value::parse_json(json.out));
  // `check`: a file name with control characters, in text and JSON.
  const std::string odd = mrtest::write_file("odd\x01name\xff.yaml", "num_layers: \"\x1b\"\n");
  auto check = mrtest::megatron_run("check --world-size 1 '" + odd + "'");
  CHECK(check.exit == 2);
  CHECK(check.out.find("odd\\x01name\\xff.yaml:1: error[input.not-text]") != std::string::npos);
  CHECK(mrtest::printable_output(check.all()));
  auto check_json = mrtest::megatron_run("check --format json --world-size 1 '" + odd + "'");
  CHECK(mrtest::printable_output(check_json.out));
  mr::Value list = mr::Value::parse_json(check_json.out);
  REQUIRE(list.as_list().size() == 1);
}
