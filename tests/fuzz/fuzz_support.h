// Shared by the libFuzzer targets (scripts/fuzz.sh): a bad input may only end in a UsageError (exit 2) or a
// diagnostic (exit 1); any other exception is what `megatron-run` would report as an internal error (exit 3),
// so the target aborts and libFuzzer records the input as a crash.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <string>

#include "config/parse/argparse.h"
#include "config/converters.h"

namespace mr::fuzz {

// The input as a file of its own (the loaders take paths): one per process, rewritten for every input.
inline const std::string& scratch_file(const char* ext) {
  static const std::string path = [&] {
    const char* dir = std::getenv("TMPDIR");
    return std::string(dir && *dir ? dir : "/tmp") + "/mr-fuzz-" + std::to_string(::getpid()) + ext;
  }();
  return path;
}

inline const std::string& write_scratch(const uint8_t* data, size_t size, const char* ext) {
  const std::string& path = scratch_file(ext);
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data),
                                                                 static_cast<std::streamsize>(size));
  return path;
}

// Runs `f`; UsageError is the expected refusal (and, from a bare converter, ConvError: the parser turns it
// into a UsageError naming the flag); anything else aborts with its message.
template <class F>
void expect_no_internal_error(F&& f) {
  try {
    f();
  } catch (const UsageError&) {
  } catch (const ConvError&) {
  } catch (const std::exception& e) {
    std::fprintf(stderr, "internal error (exit 3 in megatron-run): %s\n", e.what());
    std::abort();
  }
}

}  // namespace mr::fuzz
