#include "specula/synth/writer.h"

#include <filesystem>
#include <fstream>
#include <regex>

#include <fmt/format.h>

#include "specula/util/error.h"
#include "specula/util/progress.h"

namespace specula::synth {

namespace fs = std::filesystem;

namespace {

// Row chunks of 16 MB keep the scales/biases cache of quantized tensors small (plan.cpp).
constexpr size_t kChunkBytes = 16u << 20;

void write_text_file(const fs::path& path, const std::string& text) {
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) fail("cannot create '{}'", tmp.string());
    f << text;
    f.flush();
    if (!f) fail("cannot write '{}'", tmp.string());
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) fail("cannot rename '{}' to '{}': {}", tmp.string(), path.string(), ec.message());
}

// Removes weight files an earlier run may have left (a sharded run followed by a single-file one
// would otherwise leave a directory with both layouts).
void remove_stale_weights(const fs::path& dir) {
  static const std::regex shard(R"(model-\d{5}-of-\d{5}\.safetensors)");
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name == "model.safetensors" || name == "model.safetensors.index.json" || std::regex_match(name, shard)) {
      std::error_code rm;
      fs::remove(entry.path(), rm);
      if (rm) fail("cannot remove stale '{}': {}", entry.path().string(), rm.message());
    }
  }
  if (ec) fail("cannot list '{}': {}", dir.string(), ec.message());
}

}  // namespace

std::vector<std::vector<size_t>> shard_tensors(const std::vector<TensorSpec>& tensors, uint64_t max_shard_bytes) {
  std::vector<std::vector<size_t>> shards;
  uint64_t current = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const uint64_t bytes = tensor_bytes(tensors[i].dtype, tensors[i].shape);
    if (shards.empty() || (current > 0 && current + bytes > max_shard_bytes)) {
      shards.emplace_back();
      current = 0;
    }
    shards.back().push_back(i);
    current += bytes;
  }
  if (shards.empty()) shards.emplace_back();
  return shards;
}

WrittenCheckpoint write_checkpoint(const CheckpointPlan& plan, const std::string& dir,
                                   const WriteCheckpointOptions& options) {
  const fs::path root(dir);
  std::error_code ec;
  fs::create_directories(root, ec);
  if (ec) fail("cannot create directory '{}': {}", dir, ec.message());
  if (!fs::is_directory(root)) fail("'{}' is not a directory", dir);
  remove_stale_weights(root);

  write_text_file(root / "config.json", plan.config.dump(2) + "\n");
  write_text_file(root / "generation_config.json", plan.generation_config.dump(2) + "\n");
  if (!plan.processor_config.is_null()) {
    write_text_file(root / "processor_config.json", plan.processor_config.dump(2) + "\n");
  } else {
    fs::remove(root / "processor_config.json", ec);  // a text-only rewrite of a multimodal directory
  }

  WrittenCheckpoint out;
  out.dir = dir;
  out.tensor_bytes = plan.data_bytes();
  out.tensor_count = plan.tensors.size();

  const auto shards = shard_tensors(plan.tensors, options.max_shard_bytes);
  ProgressBar bar(options.progress_label, out.tensor_bytes,
                  options.force_progress ? ProgressBar::Mode::Always
                                         : (options.progress ? ProgressBar::Mode::Auto : ProgressBar::Mode::Never));
  uint64_t before = 0;  // bytes of the shards already written
  nlohmann::json weight_map = nlohmann::json::object();
  for (size_t s = 0; s < shards.size(); ++s) {
    const std::string name = shards.size() == 1
                                 ? std::string("model.safetensors")
                                 : fmt::format("model-{:05d}-of-{:05d}.safetensors", s + 1, shards.size());
    std::vector<TensorSpec> specs;
    uint64_t shard_bytes = 0;
    for (size_t i : shards[s]) {
      specs.push_back(plan.tensors[i]);
      shard_bytes += tensor_bytes(plan.tensors[i].dtype, plan.tensors[i].shape);
      weight_map[plan.tensors[i].name] = name;
    }
    WriteOptions wo;
    wo.chunk_bytes = kChunkBytes;
    if (bar.enabled()) {
      wo.progress = [&bar, before](uint64_t done, uint64_t) { bar.update(before + done); };
    }
    write_safetensors((root / name).string(), specs, wo);
    before += shard_bytes;
    out.weight_files.push_back(name);
  }
  bar.finish();

  if (shards.size() > 1) {
    const nlohmann::json index = {{"metadata", {{"total_size", out.tensor_bytes}}}, {"weight_map", weight_map}};
    write_text_file(root / "model.safetensors.index.json", index.dump(2) + "\n");
  }
  return out;
}

}  // namespace specula::synth
