// The validation chain as one ordered table: Megatron's validate_args() sections in the order it runs them (the
// seed's order: an earlier section's derived values are what a later one reads), then the OptimizerConfig checks.
// The comment on each line is the seed lines it ports (seed = ../shared/spec/arguments.py); the section functions
// are declared by subject in section_functions.h.
#include "config/validate/sections.h"

#include "config/validate/init.h"
#include "config/validate/sanity.h"
#include "config/validate/section_functions.h"

namespace mr {

const std::vector<Section>& validation_sections() {
  using namespace section;
  // validate_args() opens at seed 419 and closes at 1931 with _print_args("arguments", args), which prints and
  // changes nothing (the caller prints the resolved arguments).
  static const std::vector<Section> sections = {
      {"checkpoint-args", &checkpoint_args_asserts},                  // seed 101-112 (parse_and_validate_args)
      {"ckpt-conversion-prep", &ckpt_conversion_prep},                // seed 421-436
      {"heterogeneous-config", &heterogeneous_config},                // seed 438-439 (195-267)
      {"use-dist-ckpt", &update_use_dist_ckpt},                       // seed 441
      {"model-parallel-sizes", &model_parallel_sizes},                // seed 443-522
      {"deprecated-flags", &deprecated_flags},                        // seed 524-575
      {"cuda-graph-normalize", &cuda_graph_normalize},                // seed 577-588 (286-325)
      {"input-defaults", &input_defaults},                            // seed 590-625
      {"batch-size", &batch_size},                                    // seed 626-653
      {"hybrid-pattern", &hybrid_pattern},                            // seed 655-812
      {"virtual-pipeline", &virtual_pipeline},                        // seed 814-909
      {"torch-fsdp2", &torch_fsdp2},                                  // seed 911-956
      {"dtype-strings", &dtype_strings},                              // seed 957-969
      {"low-precision-formats", &low_precision_formats},              // seed 971-995
      {"megatron-fsdp", &megatron_fsdp},                              // seed 996-1078
      {"params-dtype", &params_dtype},                                // seed 1080-1124
      {"inference-graph-precision", &inference_graph_precision},      // seed 1126-1137
      {"dataloader-defaults", &dataloader_defaults},                  // seed 1139-1143
      {"model-dimensions", &model_dimensions},                        // seed 1145-1180
      {"dataloader-document-masking", &dataloader_document_masking},  // seed 1182-1186
      {"sequence-lengths", &sequence_lengths},                        // seed 1188-1200
      {"save-schedule", &save_schedule},                              // seed 1201-1208
      {"mixed-precision-checks", &mixed_precision_checks},            // seed 1209-1224
      {"activation-recompute", &activation_recompute},                // seed 1227-1246
      {"sequence-parallel", &sequence_parallel},                      // seed 1248-1260
      {"dynamic-context-parallel", &dynamic_context_parallel},        // seed 1262-1294
      {"variable-seq-lengths", &variable_seq_lengths},                // seed 1296-1312
      {"cuda-max-connections", &cuda_max_connections},                // seed 1313-1341
      {"fsdp-high-priority-streams", &fsdp_high_priority_streams},    // seed 1343-1350
      {"expert-gtp-weight-shards", &expert_gtp_weight_shards},        // seed 1353-1362
      {"gtp-remat-checks", &gtp_remat_checks},                        // seed 1364-1451
      {"bias-fusion", &bias_fusion},                                  // seed 1453-1459
      {"qk-clip", &qk_clip},                                          // seed 1461-1472
      {"position-embedding", &position_embedding},                    // seed 1474-1494
      {"moe-spec", &moe_spec},                                        // seed 1496-1501
      {"expert-parallel", &expert_parallel},                          // seed 1503-1507
      {"moe-router", &moe_router},                                    // seed 1509-1513
      {"ckpt-format-dcp-dtensor", &dcp_dtensor_formats},              // seed 1515-1525
      {"varlen-dataset", &varlen_dataset},                            // seed 1527-1555
      {"sequence-packing", &sequence_packing},                        // seed 1557-1595
      {"data-blend", &data_blend},                                    // seed 1597-1625
      {"determinism", &determinism},                                  // seed 1627-1632
      {"qk-layer-scaling", &qk_layer_scaling},                        // seed 1634-1636
      {"rerun-tracker", &rerun_tracker},                              // seed 1638-1643
      {"emerging-optimizer", &emerging_optimizer},                    // seed 1645-1648
      {"gloo-process-groups", &gloo_process_groups},                  // seed 1651-1661
      {"fake-process-group", &fake_process_group},                    // seed 1663-1670
      {"checkpoint-save-load", &checkpoint_save_load},                // seed 1672-1784
      {"pp-inference", &pp_inference},                                // seed 1786-1794
      {"moe-upcycling", &moe_upcycling},                              // seed 1796-1802
      {"skip-train-rl", &skip_train_rl},                              // seed 1804-1820
      {"local-checkpointing", &local_checkpointing},                  // seed 1822-1830
      {"delay-wgrad", &delay_wgrad},                                  // seed 1832-1860
      {"fine-grained-offloading", &fine_grained_offloading},          // seed 1862-1867
      {"mtp-position-embedding", &mtp_position_embedding},            // seed 1869-1875
      {"cpu-offloading", &cpu_offloading},                            // seed 1877-1879
      {"cuda-graph-runtime", &cuda_graph_runtime},                    // seed 1881-1910
      {"latent-projections", &latent_projections},                    // seed 1912-1925
      // The OptimizerConfig Megatron builds from the resolved arguments, checked after validate_args().
      {"optimizer.validate", &optimizer_validate},              // optimizer_config.py:448 validate
      {"optimizer.finalize", &optimizer_finalize},              // optimizer_config.py:667 finalize_optimizer_config
      {"optimizer.validate-run", &optimizer_validate_run},      // optimizer_config.py:587 validate_run
      {"optimizer.validate-model", &optimizer_validate_model},  // optimizer_config.py:628 validate_model
  };
  return sections;
}

const std::vector<Stage>& validation_stages() {
  static const std::vector<Stage> stages = {
      {kStageValidateArgs, "Megatron's validate_args() and OptimizerConfig checks, ported section by section",
       validation_sections()},
      {kStageSanity,
       "megatron-run's own checks: values Megatron accepts but no job can run with, or that can only be typos (a "
       "negative interval or length), after Megatron's chain passed",
       sanity::sections()},
      {kStageInit,
       "what Megatron would refuse at initialisation, after validate_args passed: its model construction "
       "(TransformerConfig, the layers per pipeline stage), its optimizer factory (an emerging optimizer with fp16), "
       "its dataset build (--phase-transition-iterations without --train-samples) and what its training loop fails on (its intervals, the fault injector it sets up; not under --skip-train, where it never trains); the process-group layout follows (init.process-groups), then what the training run cannot run (init.training-run) and its learning-rate schedule (init.lr-schedule)",
       init::sections()},
  };
  return stages;
}

}  // namespace mr
