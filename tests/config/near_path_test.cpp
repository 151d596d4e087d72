// util/near_path.h: the existing file a mistyped path most likely meant.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "config/parse/read_file.h"
#include "scratch.h"
#include "util/near_path.h"

namespace fs = std::filesystem;

namespace {
// A fresh tree in the scratch folder: configs/{default.yaml, gpt-tiny.yaml, examples/moe.yaml}, a.py, b.sh.
std::string tree() {
  const std::string root =
      mrtest::fake_root("near", {"configs/default.yaml", "configs/gpt-tiny.yaml", "configs/examples/moe.yaml",
                                 "a.py", "b.sh"},
                        "near-path");
  return root;
}
}  // namespace

TEST_CASE("near_path: a typo in the file name or a directory name is corrected", "[near-path]") {
  const std::string r = tree();
  CHECK(mr::near_path(r + "/configs/gpt-tny.yaml") == r + "/configs/gpt-tiny.yaml");
  CHECK(mr::near_path(r + "/configs/defualt.yaml") == r + "/configs/default.yaml");
  CHECK(mr::near_path(r + "/configs/Default.yaml") == r + "/configs/default.yaml");
  CHECK(mr::near_path(r + "/confgs/default.yaml") == r + "/configs/default.yaml");
  CHECK(mr::near_path(r + "/confgs/exmples/mo.yaml") == r + "/configs/examples/moe.yaml");
  // Repeated and trailing slashes are walked over.
  CHECK(mr::near_path(r + "//configs///gpt-tny.yaml") == r + "/configs/gpt-tiny.yaml");
}

TEST_CASE("near_path: relative paths are corrected relative to the working directory", "[near-path]") {
  const std::string r = tree();
  const fs::path was = fs::current_path();
  fs::current_path(r);
  const std::string rel = mr::near_path("configs/gpt-tny.yaml");
  const std::string dot = mr::near_path("./confgs/default.yaml");
  fs::current_path(was);
  CHECK(rel == "configs/gpt-tiny.yaml");
  CHECK(dot == "./configs/default.yaml");
}

TEST_CASE("near_path: nothing is suggested far from any name, for the wrong kind, or for an existing path",
          "[near-path]") {
  const std::string r = tree();
  CHECK(mr::near_path(r + "/configs/llama3-70b.yaml").empty());  // nothing near
  CHECK(mr::near_path(r + "/zz.py").empty());   // short names: one edit only (zz.py is two from a.py)
  CHECK(mr::near_path(r + "/c.py") == r + "/a.py");
  CHECK(mr::near_path(r + "/configs/default.yaml").empty());      // it exists: no typo
  CHECK(mr::near_path(r + "/configs/exampels/moe.yaml") == r + "/configs/examples/moe.yaml");
  CHECK(mr::near_path(r + "/configs/exampels").empty());  // a directory is not a file...
  CHECK(mr::near_path(r + "/configs/exampels", true) == r + "/configs/examples");  // ...unless one is asked for
  CHECK(mr::near_path(r + "/configs/default.yaml/x").empty());  // through a file
  CHECK(mr::near_path(r + "/../nonexistent-dir-xyz/default.yaml").empty());
  CHECK(mr::near_path("").empty());
}

TEST_CASE("near_path: of names equally near, the first by name (review diff37 #6)", "[near-path]") {
  const std::string r = mrtest::fake_root("near-tie", {"d/model_b.yaml", "d/model_a.yaml", "d/model_d.yaml"}, "near-path");
  CHECK(mr::near_path(r + "/d/model_c.yaml") == r + "/d/model_a.yaml");
}

TEST_CASE("read_input_file: a missing file's message names the file a typo away", "[near-path][read-file]") {
  const std::string r = tree();
  try {
    mr::read_input_file(r + "/configs/gpt-tny.yaml", "config file", {"--config"});
    FAIL("no refusal");
  } catch (const mr::UsageError& e) {
    CHECK(e.id == "input.unreadable");
    CHECK(std::string(e.what()) == r + "/configs/gpt-tny.yaml: cannot read config file: No such file or directory "
                                       "(did you mean " + r + "/configs/gpt-tiny.yaml?)");
  }
  try {
    mr::read_input_file(r + "/configs/llama.yaml", "config file", {"--config"});
    FAIL("no refusal");
  } catch (const mr::UsageError& e) {
    CHECK(std::string(e.what()) == r + "/configs/llama.yaml: cannot read config file: No such file or directory");
  }
}
