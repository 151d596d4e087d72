// megatron-run: parse, validate and launch Megatron-LM training jobs.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <iterator>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#include "cli.h"
#include "commands.h"
#include "error_record.h"
#include "config/parse/argparse.h"
#include "config/print.h"
#include "launch/program.h"
#include "util/exit_signal.h"
#include "util/std_fds.h"
#include "util/text.h"

namespace {

// The commands are the table of commands.h (commands.cpp): one row each, with its function, options, usage texts and
// completion. Dispatch, `COMMAND --help`, `help COMMAND`, the near-miss suggestions and the list in help's refusal
// all read it here; `help` and the default command (no command word) are rows too, answered below. A new command is
// one row there (with its cmd_<name>.cpp and <Name>Options): nothing here names it. (`check` alone is special-cased
// below by name: its words are moved, not copied, and its usage errors read its own words.)

// The row of a command word that runs a function of its own (not `help`, not the default command), or nullptr.
const mr::app::Command* command_of(const std::string& w) {
  const mr::app::Command* c = w.empty() ? nullptr : mr::app::find_command(w);
  return c && c->run ? c : nullptr;
}

// Every command word, `help` included.
std::vector<std::string> command_words() {
  std::vector<std::string> words;
  for (const mr::app::Command& c : mr::app::commands())
    if (*c.name) words.emplace_back(c.name);
  return words;
}

// "check, schema, ...": the commands `help` takes.
std::string command_list() {
  std::string s;
  for (const mr::app::Command& c : mr::app::commands())
    if (c.run && *c.name) s += (s.empty() ? "" : ", ") + std::string(c.name);
  return s;
}

// " (did you mean check?)" for a near miss of a command name, else "".
std::string suggestion(const std::string& w) {
  const std::vector<std::string> near = mr::closest_words(w, command_words(), w.size() <= 4 ? 1 : 2);
  return near.empty() ? "" : " (did you mean " + near.front() + "?)";
}

// Whether `w` is something megatron-run could launch: an existing path, or a command on PATH.
bool names_a_program(const std::string& w) {
  std::error_code ec;
  if (std::filesystem::exists(w, ec)) return true;  // a script or a path, whatever it turns out to be
  try {
    mr::launch::resolve_command(w);  // the launcher's own PATH search
    return true;
  } catch (const mr::launch::LaunchError&) {
    return false;
  }
}

// Whose words `args` (the whole command line) are: the run command's when no command word (nor help) comes first.
mr::app::CommandWords whose_words(const std::vector<std::string>& args) {
  const bool run = !args.empty() && !command_of(args.front()) && args.front() != "help";
  return run ? mr::app::CommandWords::Run : mr::app::CommandWords::Command;
}

// -h or --help among a command's own words (before any "--").
bool asks_help(const std::vector<std::string>& words) {
  for (const std::string& w : words) {
    if (w == "--") return false;
    if (w == "-h" || w == "--help") return true;
  }
  return false;
}

// The command's exit code, or 1 when its output could not be written (a full disk, a closed stdout): a CI step
// that keeps `megatron-run --dry-run --format json > resolved.json` must not pass with an empty file.
int with_output_written(int code) {
  std::cout.flush();
  const bool lost = std::cout.fail() || std::fflush(stdout) != 0 || std::ferror(stdout);
  if (!lost) return code;
  // The failed write's errno is long gone: a closed stdout is known from the start (util/std_fds.h).
  mr::print_error(std::cerr, "cannot write the output: " + mr::util::stdout_write_failure(0));
  return code != 0 ? code : 1;
}

int run(std::vector<std::string>& args) {
  try {
    if (args.empty()) {  // nothing asked: a usage error (exit 2), with what megatron-run does and how to ask it
      std::cerr << "megatron-run: no command or flags given; say what to do (`megatron-run help` prints this on "
                   "stdout)\n";
      mr::app::print_usage(std::cerr);
      return 2;
    }
    {  // a command word, or Megatron flags for the default command
      const std::string cmd = args.front();
      const mr::app::Command* command = command_of(cmd);
      if (command && asks_help(std::vector<std::string>(args.begin() + 1, args.end()))) {
        mr::app::print_command_usage(std::cout, cmd);
        return 0;
      }
      if (command && cmd == "check") {
        // Moved, not copied: `check` may be given tens of thousands of files.
        std::vector<std::string> rest(std::make_move_iterator(args.begin() + 1), std::make_move_iterator(args.end()));
        std::vector<std::string>().swap(args);
        try {  // here, where the words still are: --format json asks for the failure as a JSON document too
          return command->run(rest);
        } catch (const mr::UsageError& e) {
          return mr::app::report_usage_error(rest, mr::app::with_own_option_hint(e, cmd),
                                             mr::app::CommandWords::Check);
        } catch (const boost::program_options::error& e) {
          return mr::app::report_usage_error(rest, mr::app::with_own_option_hint(mr::app::own_option_error(e, rest), cmd),
                                             mr::app::CommandWords::Check);
        }
      }
      std::vector<std::string> rest(args.begin() + 1, args.end());
      for (std::string& w : rest) {  // -h is --help for every command (words after "--" are a program's)
        if (w == "--") break;
        if (w == "-h") w = "--help";
      }
      if (command) {
        try {  // a near miss of one of the command's own options is named, as for the run command
          return command->run(rest);
        } catch (const mr::UsageError& e) {
          mr::UsageError named = mr::app::with_own_option_hint(e, cmd);
          if (std::string_view(named.what()) == e.what()) throw;
          throw named;
        } catch (const boost::program_options::error& e) {
          throw mr::app::with_own_option_hint(mr::app::own_option_error(e, rest), cmd);
        }
      }
      if (cmd == "help") {
        if (rest.size() > 1) {  // one command at most: argparse's words for the rest
          std::vector<std::string> extra;
          for (size_t k = 1; k < rest.size(); ++k) extra.push_back(mr::echo_word(rest[k], 100));
          throw mr::UsageError("help: unrecognized arguments: " + mr::join(extra, " ") + " (`megatron-run help " +
                               mr::echo_word(rest.front(), 100) + "` shows one command's usage)");
        }
        if (rest.empty() || rest.front() == "help" || rest.front() == "--help") {
          mr::app::print_usage(std::cout);
          return 0;
        }
        if (command_of(rest.front())) {
          mr::app::print_command_usage(std::cout, rest.front());
          return 0;
        }
        throw mr::UsageError("help: unknown command '" + mr::abbreviate(rest.front()) + "'" + suggestion(rest.front()) +
                             " (commands: " + command_list() + ")");
      }
      // A word that is a near miss of a command, or a command megatron-run does not have (launch, run), and
      // names no file or program: a typo or a guess, not a script to launch.
      if (!cmd.empty() && cmd[0] != '-' && !mr::app::command_word_hint(cmd).empty() && !names_a_program(cmd))
        throw mr::UsageError("unknown command '" + mr::abbreviate(cmd) + "'" + mr::app::command_word_hint(cmd) +
                             "; a program to launch would be a file or a command on PATH, and there is none of that "
                             "name");
    }
    return mr::app::find_command("")->run(args);  // the default command
  } catch (const mr::UsageError& e) {
    return mr::app::report_usage_error(args, e, whose_words(args));
  } catch (const boost::program_options::error& e) {  // split_args translates these; one that got past it too
    return mr::app::report_usage_error(args, mr::app::own_option_error(e, args), whose_words(args));
  } catch (const std::bad_alloc&) {
    mr::print_error(std::cerr, "out of memory: an allocation failed (the input asks for more than this process may "
                               "have: its address-space limit, ulimit -v, or the machine's memory)");
    return 1;
  } catch (const std::exception& e) {
    mr::print_internal_error(std::cerr, e.what());
    return 3;
  }
}

}  // namespace

namespace mr::app {

std::string command_word_hint(const std::string& word) {
  if (word == "launch" || word == "run")  // what other tools call their launch command
    return " (megatron-run launches without a command word: megatron-run [launch options] [--config FILE]... "
           "[MEGATRON FLAGS] [PROGRAM]; its commands are " + command_list() + ")";
  if (word == "version")  // helm's, kubectl's, docker's spelling
    return " (its version and build: megatron-run --version)";
  return suggestion(word);
}

}  // namespace mr::app

int main(int argc, char** argv) {
  // Before anything opens a descriptor: a closed stdout or stderr must not become a socket or a pipe of ours.
  mr::util::open_closed_std_fds();
  // A worker of megatron-run's spawner with --exit-signal-handler latches the signal from here on (launch.cpp).
  if (std::getenv("MR_SPAWNER")) mr::util::install_exit_signal_from_env();
  std::vector<std::string> args(argv + 1, argv + argc);
  // Under torchrun (or megatron-run's spawner) a refusal goes to TORCHELASTIC_ERROR_FILE too, as @record writes a
  // Python program's exception there (error_record.h).
  mr::app::ErrorCapture errors(std::cerr);
  const int code = with_output_written(run(args));
  mr::app::write_refusal_record(code, errors.text());
  return code;
}
