#!/usr/bin/env bash
# Builds .device/: what a GPU machine without our Debian libraries needs beyond the source tree to build
# megatron-run (see docs/device.md). Run on this (Debian 12) machine; then carry .device/ along with the working
# tree and run scripts/device-build.sh there.
#
#   scripts/device-bundle.sh [OUT_DIR]        (default .device/)
#
# Contents:
#   lib/      the static Boost libraries our link line uses (program_options, log, log_setup and log's
#             dependencies thread, filesystem, regex, chrono, atomic) and libyaml-cpp.a;
#   include/  the Boost headers our translation units actually include, transitively (found with g++ -M over
#             every .cpp/.cu under lib/ apps/ bench/ tests/, with and without the CUDA/runtime defines), plus
#             all of boost/config/ (compiler-dependent); all of yaml-cpp/ and catch2/ (both small);
#   MANIFEST  package versions, the header list, the sizes.
# The CMake side is -DMEGATRON_RUN_DEPS_DIR=<this folder> (top-level CMakeLists.txt).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
out="${1:-.device}"
sysinc="${MR_SYSTEM_INCLUDE:-/usr/include}"
syslib="${MR_SYSTEM_LIBDIR:-/usr/lib/$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)}"
limit_mib=64
boost_libs=(program_options log log_setup thread filesystem regex chrono atomic)

for f in "$sysinc/boost/version.hpp" "$sysinc/yaml-cpp/yaml.h" "$sysinc/catch2/catch.hpp" "$syslib/libyaml-cpp.a"; do
  [[ -f "$f" ]] || { echo "device-bundle: $f missing (run scripts/setup.sh first)" >&2; exit 1; }
done
for l in "${boost_libs[@]}"; do
  [[ -f "$syslib/libboost_$l.a" ]] || { echo "device-bundle: $syslib/libboost_$l.a missing" >&2; exit 1; }
done

rm -rf "$out"
mkdir -p "$out/lib" "$out/include"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# ---- the static libraries
for l in "${boost_libs[@]}"; do cp "$syslib/libboost_$l.a" "$out/lib/"; done
cp "$syslib/libyaml-cpp.a" "$out/lib/"

# ---- the Boost headers, transitively included by our sources
# -M lists system headers too (-MM would drop exactly the ones we want); -MG lets a TU whose other headers
# (LibTorch, CUDA, NCCL) are absent here still be scanned. Two define sets: the CPU-only build and the
# CUDA + LibTorch one (the GPU machine compiles the #if'd code too).
mapfile -t tus < <(find lib apps bench tests -type f \( -name '*.cpp' -o -name '*.cu' \) | sort)
scan_one() {  # define set (0: none, 1: CUDA + runtime), TU
  local defs name
  if [[ $1 == 0 ]]; then defs=(); else defs=(-DMR_HAVE_CUDA -DMR_HAVE_DIST_RUNTIME -DMR_OPTIM_HAVE_CUDA=1 -DMR_OPTIM_HAVE_CBLAS=1); fi
  name="$1.${2//\//_}"
  g++ -std=c++20 -x c++ -I"$root/lib" -DBOOST_ALL_NO_LIB -DNDEBUG "${defs[@]}" -M -MG "$2" -MF "$tmp/$name.d" \
    -o /dev/null 2>"$tmp/$name.err" || { echo "device-bundle: g++ -M failed on $2:" >&2; cat "$tmp/$name.err" >&2; exit 1; }
}
export -f scan_one
export root tmp
for set in 0 1; do
  # shellcheck disable=SC2016
  printf '%s\n' "${tus[@]}" | xargs -d '\n' -P "$(nproc)" -I{} bash -c 'scan_one "$1" "$2"' _ "$set" {}
done
cat "$tmp"/*.d | tr ' \\' '\n\n' | grep -E '^/' | sort -u | xargs -d '\n' realpath -m | sort -u >"$tmp/deps"
grep -E "^$sysinc/boost/" "$tmp/deps" | sed "s|^$sysinc/||" >"$tmp/boost-headers"
[[ -s "$tmp/boost-headers" ]] || { echo "device-bundle: the scan found no Boost header" >&2; exit 1; }
# boost/config/ whole: its compiler/stdlib/platform selection differs between GCC versions and nvcc hosts.
(cd "$sysinc" && find boost/config -type f) >>"$tmp/boost-headers"
sort -u -o "$tmp/boost-headers" "$tmp/boost-headers"
(cd "$sysinc" && xargs -d '\n' cp --parents -t "$root/$out/include" <"$tmp/boost-headers")
cp -r "$sysinc/yaml-cpp" "$sysinc/catch2" "$out/include/"

# ---- manifest and size
bytes=$(du -sb "$out" | cut -f1)
mib=$(awk -v b="$bytes" 'BEGIN { printf "%.1f", b / 1048576 }')
{
  echo "# Made by scripts/device-bundle.sh on $(hostname) ($(. /etc/os-release && echo "$PRETTY_NAME"), $(g++ --version | head -1))"
  echo "# Packages:"
  for pkg in libboost-program-options1.74-dev libboost-log1.74-dev libboost1.74-dev libyaml-cpp-dev catch2; do
    dpkg-query -W -f='#   ${Package} ${Version}\n' "$pkg" 2>/dev/null || echo "#   $pkg (not a dpkg package here)"
  done
  echo "# Total: $bytes bytes ($mib MiB)"
  echo "# Libraries:"
  (cd "$out/lib" && ls -l -- *.a | awk '{ printf "#   %s %s\n", $9, $5 }')
  echo "# Boost headers ($(wc -l <"$tmp/boost-headers")):"
  cat "$tmp/boost-headers"
} >"$out/MANIFEST"

echo "device-bundle: $out/  libraries $(du -sh "$out/lib" | cut -f1), headers $(du -sh "$out/include" | cut -f1)" \
     "($(wc -l <"$tmp/boost-headers") Boost headers), total $mib MiB (limit $limit_mib MiB)"
if (( bytes > 48 * 1048576 )); then
  echo "device-bundle: $mib MiB leaves too little of the $limit_mib MiB carry limit" >&2
  exit 1
fi
