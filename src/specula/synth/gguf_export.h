#pragma once
// Writes a validated target checkpoint as a `gemma4` GGUF file (a drafter as `gemma4-assistant`) in llama.cpp's layout
// (docs/gguf.md): the metadata keys and tensor names gguf_target_config / load_gguf_target read,
// with matrices stored in one chosen ggml type. Used by `specula synth --format gguf` and by the
// tests that run every golden case from GGUF.
#include <string>

#include "specula/io/checkpoint.h"
#include "specula/io/gguf_writer.h"

namespace specula::synth {

// The K-quants need rows of a multiple of 256 elements; shorter rows are written as f32. Q4_K_M and
// Q5_K_M are llama.cpp's mixtures of those names (synth/gguf_quant_mix.h), with their fallbacks for
// short rows.
enum class GgufMatrixType { F32, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, Q4_K_M, Q5_K_M };

// ggml spelling in lower case: "f32", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q4_k", "q5_k", "q6_k",
// "q4_k_m", "q5_k_m" (throws naming the value for anything else).
GgufMatrixType parse_gguf_matrix_type(const std::string& name);
const char* gguf_matrix_type_name(GgufMatrixType t);

struct GgufExportOptions {
  GgufMatrixType matrices = GgufMatrixType::F32;  // 2-D and expert matrices; vectors are always f32
  // Keep MLX 4-bit modules with group 32 or 64 as Q4_1 when their scales and biases are exact in
  // f16 (then Q4_1 holds the very same values: a group of 64 is two Q4_1 blocks with its scale
  // and bias). Other quantized modules are dequantized and stored as `matrices`.
  bool affine4_as_q4_1 = false;
  std::string name;  // general.name (default: the checkpoint directory's name)
  // A directory with tokenizer.json (and tokenizer_config.json, the chat template) to write as
  // the file's tokenizer metadata (synth/gguf_tokenizer_export.h); empty: none.
  std::string tokenizer_dir;
};

// The file's metadata and tensors (data produced while writing). Throws for configs the GGUF
// layout cannot express (e.g. a non-default sliding-window RoPE).
GgufWriter target_gguf_writer(const TargetCheckpoint& ck, const GgufExportOptions& options);

// target_gguf_writer(ck, options).write(path).
void write_target_gguf(const TargetCheckpoint& ck, const std::string& path, const GgufExportOptions& options);

// A drafter checkpoint as a `gemma4-assistant` GGUF in llama.cpp's layout (docs/gguf.md §8): the
// target's keys under the drafter's prefix plus `embedding_length_out` and `nextn_predict_layers`,
// the projections as `nextn.pre_projection` / `nextn.post_projection`, and no centroid head (the
// converter drops it: such a file runs the dense tied head).
GgufWriter drafter_gguf_writer(const DrafterCheckpoint& ck, const GgufExportOptions& options);
void write_drafter_gguf(const DrafterCheckpoint& ck, const std::string& path, const GgufExportOptions& options);

}  // namespace specula::synth
