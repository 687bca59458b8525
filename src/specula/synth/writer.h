#pragma once
// Writes a CheckpointPlan as a checkpoint directory: config.json, generation_config.json and the
// tensors, streamed in row chunks (never the whole checkpoint in RAM). Above `max_shard_bytes` the
// tensors are split into `model-0000N-of-0000M.safetensors` shards plus
// `model.safetensors.index.json`, as Hugging Face does.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "specula/synth/plan.h"

namespace specula::synth {

struct WriteCheckpointOptions {
  uint64_t max_shard_bytes = 5'000'000'000ull;  // tensor bytes per shard file
  bool progress = false;                        // draw a progress bar on stderr (if it is a TTY)
  bool force_progress = false;                  // draw it even when stderr is not a TTY
  std::string progress_label = "writing";
};

struct WrittenCheckpoint {
  std::string dir;
  std::vector<std::string> weight_files;  // file names inside dir
  uint64_t tensor_bytes = 0;
  size_t tensor_count = 0;
};

// Creates `dir` if needed. Replaces earlier weight files of the same naming scheme in it
// (model.safetensors, model-*-of-*.safetensors, model.safetensors.index.json) so a re-run never
// leaves a mix of old and new shards. Throws specula::Error naming the path on I/O failure.
WrittenCheckpoint write_checkpoint(const CheckpointPlan& plan, const std::string& dir,
                                   const WriteCheckpointOptions& options = {});

// The shard assignment write_checkpoint uses: consecutive runs of the (sorted) tensors, each run
// at most max_shard_bytes unless one tensor alone is larger. Exposed for tests.
std::vector<std::vector<size_t>> shard_tensors(const std::vector<TensorSpec>& tensors, uint64_t max_shard_bytes);

}  // namespace specula::synth
