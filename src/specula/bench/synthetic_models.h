#pragma once
// The synthetic full-size checkpoints `specula bench` measures when no --model is given (random
// weights, real geometry: E2B and E4B at MLX affine 4-bit group 64, the E4B-assistant drafter in
// bf16), written on demand into a cache directory and reused while they are present and valid.
//
// Each checkpoint is written into a temporary sibling directory and renamed into place when
// complete, so an interrupted write never looks valid; a marker file records what was written
// (preset, quantization, seed, every file's size) and is compared on reuse.
#include <cstdint>
#include <functional>
#include <string>

namespace specula::bench {

struct SyntheticModelSpec {
  std::string preset = "e4b";  // a synth preset name (synth/presets.h)
  int bits = 4;
  int group_size = 64;
  bool with_drafter = false;  // also the matching -assistant drafter (bf16)
  uint64_t seed = 0;

  std::string name() const;  // "e4b-q4g64"
};

struct SyntheticModel {
  std::string model_dir;
  std::string drafter_dir;  // empty without a drafter
  bool written = false;     // false: reused from the cache
};

// $XDG_CACHE_HOME/specula/bench, else $HOME/.cache/specula/bench; throws if neither is set.
std::string default_bench_cache_dir();

// Returns the checkpoint of `spec` under `cache_dir`, writing it first unless a valid one is there.
// `log` receives one-line progress messages. Throws specula::Error naming the directory on I/O
// failure or when the disk lacks the space the checkpoint needs (both sizes in the message).
SyntheticModel ensure_synthetic_model(const std::string& cache_dir, const SyntheticModelSpec& spec,
                                      const std::function<void(const std::string&)>& log);

// Whether `dir` holds a complete checkpoint of `spec` as written by ensure_synthetic_model (the
// marker matches and every recorded file has its recorded size). Explains a failed check in *why.
bool synthetic_model_valid(const std::string& dir, const SyntheticModelSpec& spec, std::string* why = nullptr);

}  // namespace specula::bench
