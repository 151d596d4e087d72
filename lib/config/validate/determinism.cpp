// Deterministic mode (seed arguments.py 1627-1632), as megatron/training/determinism.py applies it to args:
// options that must hold fixed values, then the determinism environment variables. Megatron also fills unset
// variables with their deterministic defaults (NCCL_ALGO=Ring, NVTE_ALLOW_NONDETERMINISTIC_ALGO=0,
// CUBLAS_WORKSPACE_CONFIG=:4096:8) and turns on torch's deterministic algorithms; both happen in the training
// process itself and change no argument, so there is nothing to resolve for them here.
#include <algorithm>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "config/validate/section_functions.h"
#include "util/text.h"

namespace mr::section {

MR_RULE(kDeterminismArgs, "determinism.incompatible-options",
        "--deterministic-mode needs --cross-entropy-loss-fusion and --tp-comm-overlap off.");
MR_RULE(kDeterminismNcclAlgo, "determinism.nccl-algo",
        "Under --deterministic-mode every NCCL_ALGO token must be Ring, CollnetDirect, CollnetChain or ^NVLS.");
MR_RULE(kDeterminismEnvValue, "determinism.env-value",
        "Under --deterministic-mode NVTE_ALLOW_NONDETERMINISTIC_ALGO must be 0 and CUBLAS_WORKSPACE_CONFIG "
        ":4096:8 or :16:8 when set.");
MR_RULE(kDeterminismSsmEnv, "determinism.ssm-env",
        "Under --deterministic-mode MAMBA_DETERMINISTIC / CAUSAL_CONV1D_DETERMINISTIC must be unset or start "
        "with 1.");

namespace {

// Python's str.strip() for the whitespace NCCL_ALGO tokens may carry.
std::string strip(const std::string& s) {
  const char* ws = " \t\n\r\f\v";
  size_t b = s.find_first_not_of(ws);
  if (b == std::string::npos) return {};
  size_t e = s.find_last_not_of(ws);
  return s.substr(b, e - b + 1);
}

// Python's repr() of a str, for messages.
std::string quoted(const std::string& s) { return Value(abbreviate(s)).py_repr(); }

}  // namespace

void determinism(Context& ctx) {
  if (!ctx.on("deterministic_mode")) return;

  // Options that must hold a value (never flipped: the user has to change them).
  const std::pair<const char*, bool> required[] = {{"cross_entropy_loss_fusion", false}, {"tp_comm_overlap", false}};
  std::string mismatched;
  for (const auto& [dest, want] : required) {
    const Value& got = ctx[dest];
    if (!(got == Value(want))) {
      if (!mismatched.empty()) mismatched += ", ";
      mismatched += std::string(dest) + "=" + Value(want).py_repr() + " (got " + got.py_repr() + ")";
    }
  }
  ctx.require(mismatched.empty(), kDeterminismArgs,
              "--deterministic-mode needs these options at the given value: " + mismatched +
                  "; turn them off to continue (drop --cross-entropy-loss-fusion / --tp-comm-overlap)",
              {"deterministic_mode", "cross_entropy_loss_fusion", "tp_comm_overlap"});

  // NCCL_ALGO: a comma-separated list whose every token is one of the verified algorithms.
  if (auto algo = ctx.env_var("NCCL_ALGO")) {
    static const std::set<std::string> accepted = {"Ring", "CollnetDirect", "CollnetChain", "^NVLS"};
    std::vector<std::string> tokens;
    for (const std::string& piece : split(*algo, ','))
      if (std::string t = strip(piece); !t.empty()) tokens.push_back(t);
    bool ok = !tokens.empty() &&
              std::all_of(tokens.begin(), tokens.end(), [](const std::string& t) { return accepted.count(t) > 0; });
    ctx.require(ok, kDeterminismNcclAlgo,
                "--deterministic-mode with NCCL_ALGO=" + quoted(*algo) +
                    ": every comma-separated token must be one of '^NVLS', 'CollnetChain', 'CollnetDirect', "
                    "'Ring' (other algorithms, Tree included, are not verified bit-exact)",
                {"deterministic_mode"});
  }

  // Variables with a fixed set of deterministic values (unset is fine).
  const std::pair<const char*, std::vector<std::string>> exact[] = {
      {"NVTE_ALLOW_NONDETERMINISTIC_ALGO", {"0"}},
      {"CUBLAS_WORKSPACE_CONFIG", {":16:8", ":4096:8"}},
  };
  for (const auto& [name, values] : exact) {
    auto v = ctx.env_var(name);
    if (!v) continue;
    std::string list;
    for (const auto& a : values) list += (list.empty() ? "" : ", ") + quoted(a);
    ctx.require(std::find(values.begin(), values.end(), *v) != values.end(), kDeterminismEnvValue,
                "--deterministic-mode with " + std::string(name) + "=" + quoted(*v) +
                    ", which is not deterministic: set it to one of " + list + " or leave it unset",
                {"deterministic_mode"});
  }

  // Mamba SSM / causal-conv1d follow torch's setting when unset; an explicit value must enable determinism.
  for (const char* name : {"MAMBA_DETERMINISTIC", "CAUSAL_CONV1D_DETERMINISTIC"}) {
    auto v = ctx.env_var(name);
    if (!v || v->empty()) continue;
    ctx.require((*v)[0] == '1', kDeterminismSsmEnv,
                "--deterministic-mode with " + std::string(name) + "=" + quoted(*v) +
                    " turns SSM determinism off: unset it or set it to 1",
                {"deterministic_mode"});
  }
}

}  // namespace mr::section
