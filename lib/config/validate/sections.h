// The sections of the validation chain, one file per concern (lib/config/validate/*.cpp), run in order.
#pragma once

#include <vector>

#include "config/validate/context.h"

namespace mr {

struct Section {
  const char* name;
  void (*run)(Context&);
};

// Megatron's chain: in the order validate_args() runs them (the OptimizerConfig checks last).
const std::vector<Section>& validation_sections();

// The stages of validation, in the order they run; a failed rule ends validation (later stages do not run).
//   validate_args  Megatron's validate_args() and OptimizerConfig checks (validation_sections()).
//   sanity         megatron-run's own checks of values Megatron accepts but no job can run with (sanity.h);
//                  runs only once Megatron's chain has passed, so it never changes Megatron's verdict.
//   init           what Megatron would refuse at initialisation: its model construction (init.h); runs only once
//                  the stages before it passed.
// A further stage is one more entry here with its rules declared for that stage (Rule::stage); diagnostics, the
// JSON outputs and `megatron-run rules` pick it up from this list.
struct Stage {
  const char* name;         // kStageValidateArgs, kStageSanity, kStageInit (rule.h)
  const char* description;  // one line, for docs/validation.md
  std::vector<Section> sections;
};
const std::vector<Stage>& validation_stages();

// The chain in parts, each listing its sections in seed order (seed = ../shared/spec/arguments.py):
std::vector<Section> sections_part_a();  // seed 419-625: conversion, heterogeneous config, parallel sizes,
                                         // deprecated flags, CUDA-graph module normalisation, input defaults
std::vector<Section> sections_part_b();  // seed 626-956: batch sizes, hybrid/MTP layer patterns, pipeline layout
std::vector<Section> sections_part_c();  // seed 957-1226: dtypes, FP8/FP4, data, required args, mixed precision
std::vector<Section> sections_part_d();  // seed 1227-1596: recompute, sequence parallel, RoPE, MoE, ckpt formats
std::vector<Section> sections_part_e();  // seed 1597-1931: data blend, determinism, Gloo, checkpointing, inference,
                                         // upcycling, CUDA graphs, latent MoE
std::vector<Section> sections_optimizer();  // OptimizerConfig: validate, finalize, validate_run, validate_model

}  // namespace mr
