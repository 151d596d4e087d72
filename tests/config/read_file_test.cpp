// config/parse/read_file.h: the one bounded reader of the files megatron-run is given.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "config/parse/read_file.h"
#include "scratch.h"

namespace fs = std::filesystem;

namespace {
fs::path scratch() { return mrtest::scratch_dir("read-file"); }
std::string write(const std::string& name, const std::string& text) {
  return mrtest::write_file(name, text, "read-file");
}
// The refusal read_input_file throws for `path` ("" when it reads it).
mr::UsageError refusal(const std::string& path, std::size_t max = mr::limits::kMaxInputFileBytes) {
  try {
    mr::read_input_file(path, "config file", {"--config"}, max);
  } catch (const mr::UsageError& e) {
    return e;
  }
  return mr::UsageError("");
}
}  // namespace

TEST_CASE("read_input_file reads a regular file whole, bytes as they are", "[read-file]") {
  std::string text("a: 1\n\0b\xff\n", 9);
  CHECK(mr::read_input_file(write("r.yaml", text), "config file") == text);
  CHECK(mr::read_input_file(write("empty.yaml", ""), "config file").empty());
  // A symbolic link to a regular file is that file.
  fs::path link = scratch() / "link.yaml";
  fs::remove(link);
  fs::create_symlink(scratch() / "r.yaml", link);
  CHECK(mr::read_input_file(link.string(), "config file") == text);
}

TEST_CASE("read_input_file: a missing or unreadable file is input.unreadable naming the path", "[read-file]") {
  auto e = refusal("/nonexistent/dir/x.yaml");
  CHECK(e.id == "input.unreadable");
  CHECK(std::string(e.what()) == "/nonexistent/dir/x.yaml: cannot read config file: No such file or directory");
  CHECK(e.flags == std::vector<std::string>{"--config"});
  CHECK(refusal("").id == "input.unreadable");
  // /proc/self/mem is a "regular" file whose read fails: an input error, not an internal one.
  auto mem = refusal("/proc/self/mem");
  CHECK(mem.id == "input.unreadable");
  CHECK(std::string(mem.what()).find("/proc/self/mem: cannot read config file: ") == 0);
}

TEST_CASE("read_input_file refuses what is not a regular file, without blocking", "[read-file]") {
  auto dir = refusal(scratch().string());
  CHECK(dir.id == "input.not-regular-file");
  CHECK(std::string(dir.what()).find("is not a regular file (it is a directory)") != std::string::npos);

  fs::path fifo = scratch() / "fifo";
  fs::remove(fifo);
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  auto t0 = std::chrono::steady_clock::now();
  auto f = refusal(fifo.string());  // a blocking open would wait for a writer forever
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
  CHECK(f.id == "input.not-regular-file");
  CHECK(std::string(f.what()).find("(it is a named pipe)") != std::string::npos);

  // A link to a FIFO is a FIFO.
  fs::path link = scratch() / "fifo-link";
  fs::remove(link);
  fs::create_symlink(fifo, link);
  CHECK(refusal(link.string()).id == "input.not-regular-file");

  auto zero = refusal("/dev/zero");  // would be read without end
  CHECK(zero.id == "input.not-regular-file");
  CHECK(std::string(zero.what()).find("(it is a character device)") != std::string::npos);
  CHECK(refusal("/dev/null").id == "input.not-regular-file");
}

TEST_CASE("read_input_file refuses a file past the size limit, by its size or while reading", "[read-file]") {
  std::string p = write("big.yaml", std::string(2048, 'x'));
  CHECK(mr::read_input_file(p, "config file", {}, 2048).size() == 2048);
  auto e = refusal(p, 2047);
  CHECK(e.id == "input.file-too-large");
  CHECK(std::string(e.what()) == p + ": the config file is 2048 bytes, more than the limit of 2047 bytes for an input "
                                    "file (limits::kMaxInputFileBytes)");
  // /proc files report size 0: the bound holds while reading.
  CHECK(!mr::read_input_file("/proc/self/status", "config file").empty());
  auto proc = refusal("/proc/self/status", 16);
  CHECK(proc.id == "input.file-too-large");
  CHECK(std::string(proc.what()).find("more than 16 bytes") != std::string::npos);
  // The documented default names the limit.
  CHECK(mr::describe_bytes(mr::limits::kMaxInputFileBytes) == "64 MiB");
  CHECK(mr::describe_bytes(4096) == "4 KiB");
  CHECK(mr::describe_bytes(100) == "100 bytes");
}

TEST_CASE("read_input_file: a sparse file larger than the limit is refused before it is read", "[read-file]") {
  fs::path p = scratch() / "sparse.yaml";
  { std::ofstream(p) << ""; }
  fs::resize_file(p, mr::limits::kMaxInputFileBytes + 1);
  auto t0 = std::chrono::steady_clock::now();
  auto e = refusal(p.string());
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(2));
  CHECK(e.id == "input.file-too-large");
  CHECK(std::string(e.what()).find("more than the limit of 64 MiB") != std::string::npos);
  fs::remove(p);
}
