#include "specula/io/towers.h"

#include <string_view>

namespace specula {

std::string tower_of(const std::string& tensor_name) {
  std::string_view n(tensor_name);
  if (n.starts_with("model.")) n.remove_prefix(6);
  for (const char* p : {"vision_tower.", "embed_vision.", "multi_modal_projector."})
    if (n.starts_with(p)) return "vision";
  for (const char* p : {"audio_tower.", "embed_audio."})
    if (n.starts_with(p)) return "audio";
  return {};
}

}  // namespace specula
