// megatron-run: parse, validate and launch Megatron-LM training jobs.
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "cli.h"
#include "config/parse/argparse.h"
#include "config/print.h"

namespace {

// -h or --help among a command's own words (before any "--").
bool asks_help(const std::vector<std::string>& words) {
  for (const std::string& w : words) {
    if (w == "--") return false;
    if (w == "-h" || w == "--help") return true;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  try {
    if (args.empty()) {  // no arguments: what megatron-run does and how to ask it
      mr::app::print_usage(std::cout);
      return 0;
    }
    {  // a command word, or Megatron flags for the default command
      const std::string cmd = args.front();
      if ((cmd == "check" || cmd == "schema" || cmd == "rules" || cmd == "topology" || cmd == "params" ||
           cmd == "schedule") &&
          asks_help(std::vector<std::string>(args.begin() + 1, args.end()))) {
        mr::app::print_command_usage(std::cout, cmd);
        return 0;
      }
      if (cmd == "check") {
        // Moved, not copied: `check` may be given tens of thousands of files.
        std::vector<std::string> rest(std::make_move_iterator(args.begin() + 1), std::make_move_iterator(args.end()));
        std::vector<std::string>().swap(args);
        return mr::app::cmd_check(rest);
      }
      std::vector<std::string> rest(args.begin() + 1, args.end());
      for (std::string& w : rest) {  // -h is --help for every command (words after "--" are a program's)
        if (w == "--") break;
        if (w == "-h") w = "--help";
      }
      if (cmd == "schema") return mr::app::cmd_schema(rest);
      if (cmd == "rules") return mr::app::cmd_rules(rest);
      if (cmd == "topology") return mr::app::cmd_topology(rest);
      if (cmd == "params") return mr::app::cmd_params(rest);
      if (cmd == "schedule") return mr::app::cmd_schedule(rest);
      if (cmd == "help") {
        mr::app::print_usage(std::cout);
        return 0;
      }
    }
    return mr::app::cmd_run(args);
  } catch (const mr::UsageError& e) {
    return mr::app::report_usage_error(args, e.what(), e.flags, e.where, e.rule());
  } catch (const boost::program_options::error& e) {
    return mr::app::report_usage_error(args, e.what());
  } catch (const std::exception& e) {
    mr::print_internal_error(std::cerr, e.what());
    return 3;
  }
}
