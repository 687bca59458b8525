#pragma once
// Gemma 4 tensor names in GGUF files (llama.cpp's `gemma4` layout) and their safetensors
// equivalents under the `model.` prefix (docs/gguf.md §3).
#include <optional>
#include <string>

namespace specula {

// The safetensors name of a GGUF tensor (`blk.3.attn_q.weight` -> `model.layers.3.self_attn.q_proj.weight`);
// nullopt for names the mapping does not know (they are ignored, as unknown safetensors tensors are).
// `fused_experts` says whether the file stores gate and up experts fused (`ffn_gate_up_exps`),
// which decides the name of `ffn_down_exps`.
std::optional<std::string> gguf_to_hf_name(const std::string& gguf_name, bool fused_experts);

// The inverse, for messages and for writing GGUF files; nullopt for names without a GGUF form.
// Module paths (no `.weight`) map to module paths.
std::optional<std::string> hf_to_gguf_name(const std::string& hf_name);

// Replaces every safetensors tensor or module name in `message` by its GGUF name, so errors
// raised by the shared checkpoint validation name what the GGUF file calls the tensor.
std::string with_gguf_names(const std::string& message);

}  // namespace specula
