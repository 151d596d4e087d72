// The sections of the validation chain, one file per concern (lib/config/validate/*.cpp), run in order.
#pragma once

#include <vector>

#include "config/validate/context.h"

namespace mr {

struct Section {
  const char* name;
  void (*run)(Context&);
};

// In the order validate_args() runs them.
const std::vector<Section>& validation_sections();

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
