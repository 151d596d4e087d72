// Reading a whole file that megatron-run is given, safely: no input can make it hang (a named pipe is never opened for
// a blocking read), read without end (/dev/zero) or exhaust memory (a file past `max_bytes` is refused before it is
// read, and a file that grows while it is read stops at the bound). The refusal says what is wrong; each layer words
// it its own way (config/parse/read_file.h: a UsageError with a rule id; run/tokenizer_vocab.h: a RunError).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string>

namespace mr {

struct FileRefusal {
  enum class Kind { EmptyPath, Unreadable, NotRegular, TooLarge };
  Kind kind;
  int err = 0;       // Unreadable: the system's error number
  mode_t mode = 0;   // NotRegular: what the path is
  std::string size;  // TooLarge: "123 bytes", or "more than 64 MiB" where stat could not tell
};

// What stat tells about `path` (empty, unreadable, not a regular file, larger than max_bytes), without opening it.
// Throws FileRefusal.
void check_bounded_file(const std::string& path, std::size_t max_bytes);
// The whole content of the regular file `path`, at most max_bytes. Throws FileRefusal.
std::string read_bounded_file(const std::string& path, std::size_t max_bytes);

// A refusal in the words every reader of an input file says it (config/parse/read_file.h adds the rule id; the
// worker's --input says it as is), `what` naming the file ("config file", "--input file"): "PATH: cannot read WHAT:
// No such file or directory (did you mean P?)" (util/near_path.h), "PATH: the WHAT is not a regular file (it is a
// directory); PROGRAM reads only regular files", "PATH: the WHAT is N bytes, more than the limit of ...", "WHAT: the
// path is empty". `program` names the program that reads it (megatron-run, megatron-run-worker).
std::string file_refusal_text(const FileRefusal& r, const std::string& path, const std::string& what,
                              std::size_t max_bytes, const std::string& program = "megatron-run");

// "a directory", "a named pipe", ...: what a path that is not a regular file is.
const char* file_kind(mode_t m);
// "64 MiB", "512 KiB", "100 bytes": a limit for messages.
std::string describe_bytes(std::size_t n);

}  // namespace mr
