// Writes the seed corpus of the checkpoint_dir fuzz target (fuzz/targets/checkpoint_dir.cpp) from
// the synth plans of the tiny presets: each seed is a whole checkpoint in the target's input
// format, so the fuzzer starts from directories that load and mutates them from there.
// Usage: checkpoint_dir_seeds OUT_DIR
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "specula/synth/plan.h"
#include "specula/util/error.h"

namespace {

using specula::synth::CheckpointPlan;
using specula::synth::Naming;
using specula::synth::SynthOptions;

// Tensor lines "NAME DTYPE DIMS [SHARD]"; `shards` > 1 spreads the tensors round-robin.
std::string tensor_lines(const CheckpointPlan& plan, int shards) {
  std::string out;
  for (size_t i = 0; i < plan.tensors.size(); ++i) {
    const specula::TensorSpec& t = plan.tensors[i];
    std::string dims = t.shape.empty() ? "-" : fmt::format("{}", fmt::join(t.shape, ","));
    out += fmt::format("{} {} {}", t.name, specula::dtype_name(t.dtype), dims);
    if (shards > 1) out += fmt::format(" {}", i % static_cast<size_t>(shards));
    out += '\n';
  }
  return out;
}

void write_seed(const std::filesystem::path& path, uint8_t flags, const std::string& config, const std::string& tensors,
                const std::string& index, const std::string& extra) {
  std::string bytes(1, static_cast<char>(flags));
  bytes += config + '\0' + tensors + '\0' + index + '\0' + extra;
  std::ofstream(path, std::ios::binary) << bytes;
  std::printf("%s: %zu bytes\n", path.string().c_str(), bytes.size());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
    return 2;
  }
  const std::filesystem::path out = argv[1];
  std::filesystem::create_directories(out);
  try {
    for (const char* preset : {"tiny-dense", "tiny-e4b", "tiny-kveq", "tiny-moe"}) {
      SynthOptions bf16;
      bf16.preset = preset;
      bf16.vocab = 256;  // smaller tables: faster executions, same structure
      const CheckpointPlan target = specula::synth::plan_target(bf16);
      write_seed(out / fmt::format("{}-bf16-hf", preset), 0, target.config.dump(), tensor_lines(target, 1), "",
                 target.generation_config.dump());

      SynthOptions q4 = bf16;
      q4.quant = specula::QuantSpec{4, 32, "affine"};
      const CheckpointPlan quant = specula::synth::plan_target(q4);
      write_seed(out / fmt::format("{}-q4-mlx", preset), 0, quant.config.dump(), tensor_lines(quant, 1), "", "");

      const CheckpointPlan drafter = specula::synth::plan_drafter(bf16);
      write_seed(out / fmt::format("{}-drafter", preset), 1, drafter.config.dump(), tensor_lines(drafter, 1), "",
                 target.config.dump());
    }
    // Shards with a generated index (empty section) and with a written one; F32 MLX naming.
    SynthOptions f32;
    f32.preset = "tiny-dense";
    f32.vocab = 256;
    f32.dtype = specula::DType::F32;
    f32.naming = Naming::Mlx;
    const CheckpointPlan plan = specula::synth::plan_target(f32);
    write_seed(out / "tiny-dense-f32-mlx-3-shards", 0, plan.config.dump(), tensor_lines(plan, 3), "", "");
    nlohmann::json map = nlohmann::json::object();
    for (size_t i = 0; i < plan.tensors.size(); ++i)
      map[plan.tensors[i].name] = fmt::format("model-{:05d}-of-00002.safetensors", i % 2 + 1);
    write_seed(out / "tiny-dense-f32-mlx-index", 0, plan.config.dump(), tensor_lines(plan, 2),
               nlohmann::json{{"metadata", {{"total_size", plan.data_bytes()}}}, {"weight_map", map}}.dump(), "");
  } catch (const specula::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
