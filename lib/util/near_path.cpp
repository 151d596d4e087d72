#include "util/near_path.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "util/text.h"

namespace mr {

namespace {

// The names in directory `dir` ("" is the working directory), "." and ".." left out, at most kMaxEntries.
std::vector<std::string> entries(const std::string& dir) {
  std::vector<std::string> out;
  std::unique_ptr<DIR, int (*)(DIR*)> d(::opendir(dir.empty() ? "." : dir.c_str()), ::closedir);
  if (!d) return out;
  while (out.size() < near_path_limits::kMaxEntries) {
    const dirent* e = ::readdir(d.get());
    if (!e) break;
    const std::string name = e->d_name;
    if (name != "." && name != "..") out.push_back(name);
  }
  std::sort(out.begin(), out.end());  // of names equally near, the first by name: not the file system's order
  return out;
}

// `dir` and `name` joined ("" + "a" is "a", "/" + "a" is "/a", "d" + "a" is "d/a").
std::string child(const std::string& dir, const std::string& name) {
  if (dir.empty()) return name;
  return dir.back() == '/' ? dir + name : dir + "/" + name;
}

// Edits a name of `n` bytes may be off by and still be suggested: one for short names, where two edits reach
// too much ("zz.py" and "a.py"), two from 6 bytes, three from 12.
size_t edit_limit(size_t n) { return n < 6 ? 1 : n < 12 ? 2 : 3; }

}  // namespace

std::string near_path(const std::string& path, bool want_dir) {
  if (path.empty()) return {};
  std::string at = path[0] == '/' ? "/" : "";  // the existing path walked so far
  size_t fixes = 0;
  for (const std::string& part : split(path, '/')) {
    if (part.empty()) continue;  // "a//b", a leading or trailing '/'
    struct stat st {};
    if (::stat(child(at, part).c_str(), &st) == 0) {
      at = child(at, part);
      continue;
    }
    if (part == "." || part == ".." || ++fixes > near_path_limits::kMaxFixes) return {};
    const std::vector<std::string> near = closest_words(part, entries(at), edit_limit(part.size()));
    if (near.empty()) return {};
    at = child(at, near.front());
  }
  struct stat st {};
  if (fixes == 0 || ::stat(at.c_str(), &st) != 0) return {};
  return (want_dir ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode)) ? at : std::string();
}

}  // namespace mr
