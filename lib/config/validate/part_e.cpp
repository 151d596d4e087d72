// Part E of the validation chain: seed arguments.py 1597-1931 of validate_args, in seed order. The closing
// _print_args("arguments", args) prints and changes nothing; the caller prints the resolved arguments.
#include "config/validate/part_e_sections.h"
#include "config/validate/sections.h"

namespace mr {

std::vector<Section> sections_part_e() {
  using namespace part_e;
  return {
      {"data-blend", &data_blend},                            // 1597-1625
      {"determinism", &determinism},                          // 1627-1632
      {"qk-layer-scaling", &qk_layer_scaling},                // 1634-1636
      {"rerun-tracker", &rerun_tracker},                      // 1638-1643
      {"emerging-optimizer", &emerging_optimizer},            // 1645-1648
      {"gloo-process-groups", &gloo_process_groups},          // 1651-1661
      {"fake-process-group", &fake_process_group},            // 1663-1670
      {"checkpoint-save-load", &checkpoint_save_load},        // 1672-1784
      {"pp-inference", &pp_inference},                        // 1786-1794
      {"moe-upcycling", &moe_upcycling},                      // 1796-1802
      {"skip-train-rl", &skip_train_rl},                      // 1804-1820
      {"local-checkpointing", &local_checkpointing},          // 1822-1830
      {"delay-wgrad", &delay_wgrad},                          // 1832-1860
      {"fine-grained-offloading", &fine_grained_offloading},  // 1862-1867
      {"mtp-position-embedding", &mtp_position_embedding},    // 1869-1875
      {"cpu-offloading", &cpu_offloading},                    // 1877-1879
      {"cuda-graph-runtime", &cuda_graph_runtime},            // 1881-1910
      {"latent-projections", &latent_projections},            // 1912-1925
  };
}

}  // namespace mr
