// libFuzzer: the checkpoint reader (lib/run/checkpoint_format.h). The first byte picks what the rest is: a
// safetensors file (its header parsed, then every tensor read back from the file), a rank's metadata JSON, or a
// tracker file. A bad input may only end in a CheckpointError (exit 1 in the run, naming the file); anything
// else aborts and libFuzzer records the input.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string_view>
#include <vector>

#include "fuzz_support.h"
#include "run/checkpoint_format.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    switch (data[0] % 3) {
      case 0: {
        const std::string& path = mr::fuzz::write_scratch(data + 1, size - 1, ".safetensors");
        const mr::run::SafetensorsHeader h = mr::run::read_safetensors_header(path);
        mr::run::InFile f(path);
        std::vector<char> buf;
        for (const mr::run::TensorEntry& e : h.entries) {
          buf.resize(static_cast<size_t>(e.end - e.begin));
          f.read(h.data_start + e.begin, buf.data(), buf.size());
        }
        (void)mr::run::parse_safetensors(body, body.size(), "input");
        break;
      }
      case 1: {
        const mr::run::RankMeta m = mr::run::parse_rank_meta(body, "input.json");
        (void)mr::run::to_json(m);
        break;
      }
      default: (void)mr::run::parse_tracker(body);
    }
  } catch (const mr::run::CheckpointError&) {
  } catch (const std::exception& e) {
    std::fprintf(stderr, "internal error (not a CheckpointError): %s\n", e.what());
    std::abort();
  }
  return 0;
}
