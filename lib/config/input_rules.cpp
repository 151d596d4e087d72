// The refusals of bad input (exit 2, a UsageError carrying the id): registered as rules of the `input` stage so
// that `megatron-run rules` and docs/validation.md list them beside the validation rules, and rules_all_tested
// proves each has a test that fires it (UsageError's constructor records the hit). docs/config-files.md says
// what each one refuses.
#include "config/input_rules.h"

namespace mr {

#define MR_INPUT_RULE(var, id, desc) \
  const ::mr::Rule var{id, ::mr::Rule::Level::Error, desc, __FILE__, __LINE__, ::mr::kStageInput}

// Those named elsewhere (config/input_rules.h): external.
MR_INPUT_RULE(kInputUnreadableRule, "input.unreadable",
              "A file that cannot be opened or read (the system's reason), or an empty path. A missing file is "
              "followed by the existing file a typo away, if any: `(did you mean configs/default.yaml?)`. For "
              "`check DIR`: a folder under DIR that cannot be listed.");
MR_INPUT_RULE(kInputNotRegularFileRule, "input.not-regular-file",
              "A directory, named pipe, socket or device given as a file: never opened for reading.");
MR_INPUT_RULE(kInputNoConfigFilesRule, "input.no-config-files",
              "check DIR: a directory with no `*.yaml` or `*.yml` file (the extension in any case) in it or below it "
              "(hidden files and folders and links to folders left out), so that an empty tree never passes in "
              "silence.");
MR_INPUT_RULE(kInputFileTooLargeRule, "input.file-too-large", "A file larger than kMaxInputFileBytes.");

namespace {

MR_INPUT_RULE(kNotText, "input.not-text", "A file that is not UTF-8 text, or holds a control character.");
MR_INPUT_RULE(kYamlSyntax, "input.yaml-syntax", "A YAML syntax error, an unknown alias, or a quote never closed.");
MR_INPUT_RULE(kYamlDocuments, "input.yaml-multiple-documents", "A second YAML document (---) in a config file.");
MR_INPUT_RULE(kYamlRecursive, "input.yaml-recursive-alias", "A YAML alias inside the node it names.");
MR_INPUT_RULE(kYamlExpansion, "input.yaml-expansion-limit",
              "YAML aliases that expand past kMaxYamlNodes / kMaxYamlExpandedBytes (billion laughs).");
MR_INPUT_RULE(kYamlNesting, "input.yaml-nesting-limit", "YAML nesting deeper than kMaxYamlDepth.");
MR_INPUT_RULE(kYamlKey, "input.yaml-non-scalar-key", "A YAML key that is a sequence, a mapping or null.");
MR_INPUT_RULE(kYamlDuplicate, "input.yaml-duplicate-key",
              "A key written twice in one mapping of a plain-layout or --target-env file.");
MR_INPUT_RULE(kTargetEnvKey, "input.target-env-key",
              "A --target-env file's top-level key that is neither a target key (gpu_arch, te_version, "
              "torch_version, flashinfer_version, env) nor spelled like an environment variable.");
MR_INPUT_RULE(kMutuallyExclusive, "input.mutually-exclusive",
              "Two arguments of one of Megatron's argparse mutually exclusive groups (--kitchen-config-file and "
              "--kitchen-recipe-number): argparse's \"not allowed with argument\".");
MR_INPUT_RULE(kEnumPrefix, "input.enum-prefix-on-command-line",
              "An enum value written with its class on the command line (--exit-signal Signals.SIGTERM, "
              "--attention-backend AttnBackend.flash, --cuda-graph-modules CudaGraphModule.attn): Megatron's "
              "parser looks the name up as Enum[word] and fails (a KeyError); config files take that spelling.");
MR_INPUT_RULE(kEnvNotInteger, "input.env-not-integer",
              "An environment variable that Megatron reads with int() (RANK, WORLD_SIZE, LOCAL_RANK, ...) and whose "
              "value Python's int() refuses.");
MR_INPUT_RULE(kYamlTag, "input.yaml-tag", "A YAML tag other than the standard ones, or one that does not fit the value.");
MR_INPUT_RULE(kYamlMultiline, "input.yaml-multiline-quoted",
              "A quoted value running over lines that look like key: entries (a missing closing quote).");
MR_INPUT_RULE(kYamlMerge, "input.yaml-bad-merge", "A << merge value that is not a mapping or a list of mappings.");
MR_INPUT_RULE(kEnvVarName, "input.env-var-name",
              "A config file's ENV_VARS key that no environment variable can have: empty, or holding '=' or a NUL byte.");
MR_INPUT_RULE(kUnrepresentable, "input.unrepresentable-value",
              "A value --format argv cannot write as a Megatron command-line word, or a config file's value holding a "
              "NUL byte (no command-line word or environment variable can).");
MR_INPUT_RULE(kScheduleSteps, "input.schedule-steps", "schedule: --points, --every or --at out of range or malformed.");
MR_INPUT_RULE(kScheduleRows, "input.schedule-rows", "schedule: more rows than the output allows.");
MR_INPUT_RULE(kPictureTooLarge, "input.picture-too-large",
              "topology --format svg|dot, params --format svg: more ranks than a picture shows.");
MR_INPUT_RULE(kGpusPerNode, "input.gpus-per-node", "topology: --gpus-per-node is not a positive count.");
MR_INPUT_RULE(kWorldSize, "input.world-size", "--world-size (check, --dry-run, topology, params, schedule) below 1.");
MR_INPUT_RULE(kLayoutRanks, "input.layout-ranks",
              "A world size beyond the 1048576 ranks megatron-run lays out (its limit, not Megatron's).");
MR_INPUT_RULE(kNotThisMachine, "input.address-not-this-machine",
              "A one-node job's --master-addr or --local-addr (its workers' master), or a c10d launcher's "
              "--local-addr (what it publishes as a round's node 0), that is not an address of this machine, or does "
              "not resolve.");
MR_INPUT_RULE(kDeviceMemory, "input.device-memory", "params: --device-memory is not a size (80GiB, 141 GB).");

}  // namespace

// Referenced from rule.cpp so that the linker keeps this file's rules (nothing else refers to them).
void link_input_rules() {}

}  // namespace mr
