// The values of torchrun's launcher options that need more than a number: --nnodes (N or MIN:MAX), --rdzv-conf
// (KEY=VALUE,...: what megatron-run acts on, and what it names as not used), --signals-to-handle and the
// duplicate-filter lists. Torch-free.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace mr::launch {

// torchrun's --nnodes: N (min = max = N), or MIN:MAX of an elastic job (1 <= MIN <= MAX). `flag` names the
// source in messages ("--nnodes", "PET_NNODES (...)"). Throws UsageError naming --nnodes.
struct NodeCount {
  int min = 1, max = 1;
  bool elastic() const { return min < max; }
};
NodeCount parse_nnodes(const std::string& value, const std::string& flag);

// --rdzv-conf, interpreted. join_timeout (whole seconds, as torchrun's get_as_int) and is_host (torchrun's
// boolean spellings: 1/0, true/false, t/f, yes/no, y/n, any case) act; every other key (the c10d rendezvous'
// settings megatron-run has no use for, and unknown keys) becomes a notice saying why it is not used.
struct RdzvConf {
  std::optional<double> join_timeout_s;
  std::optional<double> last_call_timeout_s;  // acts only for an elastic --nnodes MIN:MAX (`elastic`)
  std::optional<bool> is_host;
  std::vector<std::string> notices;
};
// `backend`: --rdzv-backend (is_host acts on c10d only; with static it is named as not used). Throws UsageError
// naming the option for a malformed string (torchrun's KEY1=VALUE1,...: keys and values trimmed, neither empty)
// or a bad value: "argument NAME: ...", `name` as the caller's command line names it (every option string,
// "--rdzv-conf/--rdzv_conf"); the error's flag is --rdzv-conf.
RdzvConf parse_rdzv_conf(const std::string& conf, const std::string& backend, bool elastic = false,
                         const std::string& name = "--rdzv-conf");

// torchrun 2.x's --signals-to-handle: comma-separated signal names (SIGTERM, or TERM; any case), each one the
// launcher catches and stops the workers with. Throws UsageError naming `flag` (the option as the command line
// names it, "--signals-to-handle/--signals_to_handle", or the variable its value came from) for an unknown name,
// an empty list, SIGKILL/SIGSTOP (which no process can catch) or SIGCHLD (a worker's exit).
std::vector<int> parse_signals_to_handle(const std::string& value, const std::string& flag);

// The name of a signal ("SIGUSR1"), or "signal N".
std::string signal_name_of(int sig);

// torchrun's comma_separated_list (--duplicate-stdout-filters): split at commas, ",," is a literal comma. As in
// torchrun an empty item (an empty value, a trailing comma) is a filter that every line matches.
std::vector<std::string> parse_filter_list(const std::string& value);

}  // namespace mr::launch
