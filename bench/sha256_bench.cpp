// SHA-256 benchmark (util/sha256.h, docs/performance.md): the digest --verify-integrity computes for every file
// of a checkpoint (docs/checkpoints.md).
//   cpu.sha256  util::Sha256 over 256 MiB in memory (--quick: 64 MiB), fed 1 MiB at a time as
//               sha256_file_hex reads a file, with the compression function chosen for this CPU (SHA-NI where it
//               has the SHA extensions) vs the same with the portable one; ratio = portable time / ours (about 1
//               on a CPU without SHA-NI, or with MR_SHA256_PORTABLE=1)
#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench.h"
#include "util/sha256.h"
#include "util/sha256_blocks.h"

namespace mr::bench {
namespace {

std::string hash(util::Sha256Blocks f, const std::vector<unsigned char>& bytes) {
  util::Sha256 h(f);
  constexpr size_t kPiece = size_t{1} << 20;
  for (size_t at = 0; at < bytes.size(); at += kPiece)
    h.update(bytes.data() + at, std::min(kPiece, bytes.size() - at));
  return h.hex();
}

Result sha256(const Options& o) {
  std::vector<unsigned char> bytes((o.quick ? 64 : 256) << 20);
  uint32_t x = 12345;  // any bytes: the work does not depend on them
  for (unsigned char& b : bytes) {
    x = x * 1664525u + 1013904223u;
    b = static_cast<unsigned char>(x >> 24);
  }
  const util::Sha256Blocks chosen = util::sha256_blocks_chosen();
  std::string ours_hex, portable_hex;
  const int reps = o.quick ? 1 : 3;
  const double ours = best_of(reps, [&] { ours_hex = hash(chosen, bytes); });
  const double portable = best_of(reps, [&] { portable_hex = hash(&util::sha256_blocks_portable, bytes); });
  if (ours_hex != portable_hex)
    throw std::runtime_error("cpu.sha256: the " + std::string(util::sha256_blocks_chosen_name()) +
                             " digest differs from the portable one");
  const double gb = static_cast<double>(bytes.size()) / 1e9;
  std::fprintf(stderr, "cpu.sha256: %.3f GB; %s %.3f s, portable %.3f s\n", gb, util::sha256_blocks_chosen_name(),
               ours, portable);
  Result r{"cpu.sha256", gb / ours, "GB/s", "the portable compression function, same bytes", gb / portable,
           portable / ours};
  if (std::string(util::sha256_blocks_chosen_name()) == "sha-ni") r.target = ratio_at_least(3);  // none without it
  return r;
}

MR_BENCHMARK("cpu.sha256", sha256);

}  // namespace
}  // namespace mr::bench
