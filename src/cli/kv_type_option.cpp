#include "cli/kv_type_option.h"

namespace specula::cli {

CLI::Option* add_kv_type_option(CLI::App* cmd, std::string& value) {
  return cmd
      ->add_option("--kv-type", value,
                   "KV cache element type: f32, bf16 (keys and values rounded once when written: half the KV "
                   "memory and half the bytes attention reads per cached token) or q8 (int8 with a bf16 scale per "
                   "32 elements: about a quarter of f32; head dims must be multiples of 32)")
      ->check(CLI::IsMember({"f32", "bf16", "q8"}))
      ->capture_default_str();
}

}  // namespace specula::cli
