// The target environment validation looks at: environment variables, GPU architecture and library versions.
//
// Taken from the running process by default; for a dry run on a CPU-only machine it can describe the cluster
// the job will run on (--target-gpu-arch sm_90, --target-te-version ..., --target-env FILE.yaml).
#pragma once

#include <map>
#include <optional>
#include <string>

namespace mr {

struct TargetEnv {
  std::map<std::string, std::string> vars;  // environment variables as the job will see them
  // "file.yaml:12" of the variables a file set (ENV_VARS of a --config file, env: of --target-env), for messages.
  std::map<std::string, std::string> var_where;
  // What gave a variable the launcher sets for its workers, when no environment did (WORLD_SIZE from --world-size or
  // --nnodes x --nproc-per-node): --explain and --provenance say it instead of "environment WORLD_SIZE".
  std::map<std::string, std::string> var_source;
  std::string gpu_arch = "sm_90";           // compute capability, "sm_XY"; "none": no GPU (this CPU machine)
  std::string te_version = "2.20.2";        // Transformer Engine
  std::string torch_version = "2.15.0";
  std::string flashinfer_version = "0.6.4";

  // The process environment with the documented defaults for hardware and versions.
  static TargetEnv from_process();

  std::optional<std::string> var(const std::string& name) const;
  // Python's int(os.getenv(name, fallback)); throws UsageError when the variable is not an integer (naming the
  // file:line that set it, if a file did).
  long long int_var(const std::string& name, long long fallback) const;
  // Where the value of `name` comes from, in words: "environment WORLD_SIZE" (with the file:line of a file that set
  // it), var_source's text, or "default: WORLD_SIZE not set".
  std::string source_of(const std::string& name) const;
  // A target without a GPU: the CUDA-only rules do not apply (megatron-run launching on a CPU machine).
  bool no_gpu() const { return gpu_arch == "none"; }
  // Whether its Transformer Engine's FusedAdam stores the fp32 masters of bf16 params as 16-bit remainders (2.1
  // and newer; Megatron drops store_param_remainders below): the optimizer config and the memory estimate ask this.
  bool te_stores_param_remainders() const;
  // Device capability (major, minor) from gpu_arch (0, 0 for "none").
  int arch_major() const;
  int arch_minor() const;

  // Loads --target-env FILE.yaml: keys gpu_arch, te_version, torch_version, flashinfer_version and a mapping
  // `env` of variables (other top-level scalar keys are taken as variables too). Read with the checks of
  // config/parse/yaml_doc.h; a key given twice, a non-scalar key or value, or a tag other than !!str is a UsageError
  // naming file:line.
  void load_file(const std::string& path);
};

// The GPU architecture of this machine, for a launch: "none" when no NVIDIA GPU is visible (no driver, or
// CUDA_VISIBLE_DEVICES hides them all), "sm_XY" of the first visible GPU as nvidia-smi reports it, nullopt when
// it cannot be told (the default target stays).
std::optional<std::string> machine_gpu_arch();
// Compares two versions as Python's packaging does (PEP 440, what Megatron's is_te_min_version uses): "2.20.2" >
// "2.9", "v2.9.0" == "2.9", "2.9.0rc1" < "2.9.0" < "2.9.0.post1", "2.9.0.dev0" < "2.9.0a1". Throws UsageError for a
// text that is not a version, or a part too large to compare. "", "none" and "None" say the package is not
// installed: before every version.
int compare_versions(const std::string& a, const std::string& b);
// A version as Python's packaging.version reads it (PEP 440, as Megatron's is_te_min_version compares them):
// "2.9.0", "v2.9.0", "2.9.0rc1", "2.9.0.dev0+cu12", "1!2.0"; or "", "none", "None" (not installed). Throws
// UsageError saying what is wrong otherwise.
void check_version(const std::string& v);

}  // namespace mr
