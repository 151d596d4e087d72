// The functional-test corpus parses exactly as Megatron's parser did, and parsed JSON round-trips.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

#include "config/print.h"
#include "config/parse/invocation.h"
#include "corpus.h"

namespace fs = std::filesystem;

namespace {
mr::Value load_json(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return mr::Value::parse_json(ss.str());
}
const mr::Value& field(const mr::Value& obj, const std::string& k) {
  for (const auto& [key, v] : obj.as_object())
    if (key == k) return v;
  static mr::Value none;
  return none;
}

// As the reference was run: WORLD_SIZE=8, RANK=0, ${VAR} -> /placeholder/VAR.
mr::Invocation corpus_invocation(const std::string& file) { return mrtest::reference_invocation(file); }

using mrtest::corpus_files;
}  // namespace

TEST_CASE("corpus: exit 2 for exactly the files Megatron's parser rejected; same argv", "[corpus][parse]") {
  auto files = corpus_files();
  REQUIRE(files.size() == 167);
  int usage_errors = 0;
  for (const auto& f : files) {
    INFO(f.filename().string());
    mr::Value ref = load_json(fs::path(MR_DATA_DIR) / "corpus/reference" / (f.stem().string() + ".json"));
    const mr::Value& va = field(ref, "validate_args");
    bool ref_usage = !field(va, "ok").truthy() && field(va, "exit").as_int() == 2;
    bool ours_usage = false;
    std::vector<std::string> argv;
    try {
      mr::Parsed p = mr::parse_invocation(mr::Schema::megatron(), corpus_invocation(f.string()));
      for (const auto& t : p.argv) argv.push_back(t.text);
    } catch (const mr::UsageError& e) {
      ours_usage = true;
      UNSCOPED_INFO("ours: " << e.what());
    }
    CHECK(ours_usage == ref_usage);
    usage_errors += ours_usage;
    if (!ours_usage) {
      std::vector<std::string> ref_argv;
      for (const auto& w : field(ref, "argv").as_list()) ref_argv.push_back(w.as_str());
      CHECK(argv == ref_argv);
    }
  }
  CHECK(usage_errors == 39);
}

TEST_CASE("corpus: parsed JSON fed back as --config gives identical JSON", "[corpus][config]") {
  fs::path dir = fs::temp_directory_path() / ("mr-roundtrip-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  int checked = 0;
  for (const auto& f : corpus_files()) {
    INFO(f.filename().string());
    std::string first;
    mr::Invocation inv = corpus_invocation(f.string());
    try {
      first = mr::namespace_json(mr::parse_invocation(mr::Schema::megatron(), inv).ns);
    } catch (const mr::UsageError&) {
      continue;
    }
    fs::path json = dir / (f.stem().string() + ".json");
    std::ofstream(json) << first;
    inv.config_files = {json.string()};
    std::string second = mr::namespace_json(mr::parse_invocation(mr::Schema::megatron(), inv).ns);
    CHECK(second == first);
    ++checked;
  }
  CHECK(checked == 128);
  fs::remove_all(dir);
}
