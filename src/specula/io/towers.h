#pragma once
// The multimodal towers of Gemma 4 checkpoints (docs/gemma4.md §3.4): E2B/E4B carry a vision and an
// audio encoder, 26B-A4B and 31B a vision encoder, each with a projection into the text width.
// Text generation never reads their tensors; `inspect` counts them apart from the text model.
#include <string>

namespace specula {

// "vision" for `vision_tower.*`, `embed_vision.*`, `multi_modal_projector.*`; "audio" for
// `audio_tower.*`, `embed_audio.*` (each with or without a leading `model.`); "" for a text tensor.
std::string tower_of(const std::string& tensor_name);

}  // namespace specula
