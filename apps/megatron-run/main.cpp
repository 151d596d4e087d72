// megatron-run: parse, validate and launch Megatron-LM training jobs.
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "cli.h"
#include "config/parse.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  try {
    if (!args.empty()) {
      const std::string cmd = args.front();
      if (cmd == "check") {
        // Moved, not copied: `check` may be given tens of thousands of files.
        std::vector<std::string> rest(std::make_move_iterator(args.begin() + 1), std::make_move_iterator(args.end()));
        std::vector<std::string>().swap(args);
        return mr::app::cmd_check(rest);
      }
      std::vector<std::string> rest(args.begin() + 1, args.end());
      if (cmd == "schema") return mr::app::cmd_schema(rest);
      if (cmd == "rules") return mr::app::cmd_rules(rest);
      if (cmd == "topology") return mr::app::cmd_topology(rest);
      if (cmd == "params") return mr::app::cmd_params(rest);
      if (cmd == "help") {
        mr::app::print_usage(std::cout);
        return 0;
      }
    }
    return mr::app::cmd_run(args);
  } catch (const mr::UsageError& e) {
    std::cerr << "megatron-run: error: " << e.what() << "\n";
    return 2;
  } catch (const boost::program_options::error& e) {
    std::cerr << "megatron-run: error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "megatron-run: internal error: " << e.what() << "\n";
    return 3;
  }
}
