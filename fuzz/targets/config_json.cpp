// Fuzz entry: the config parsers (target, drafter, generation, quantization) on any JSON, the
// drafter compatibility check when both parses succeed, and the Ollama manifest and name parsers.
#include <nlohmann/json.hpp>

#include "fuzz_entries.h"
#include "specula/io/checkpoint.h"
#include "specula/io/config.h"
#include "specula/io/ollama_models.h"
#include "specula/util/error.h"

namespace specula::fuzz {

int fuzz_config_json(const uint8_t* data, size_t size) {
  try {
    (void)parse_ollama_name(std::string_view(reinterpret_cast<const char*>(data), size));
  } catch (const specula::Error&) {
  }
  const nlohmann::json raw = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (raw.is_discarded()) return 0;
  const std::string source = "fuzz/config.json";

  try {
    (void)ollama_model_digest(raw, source);
  } catch (const specula::Error&) {
  }
  std::optional<TargetConfig> target;
  std::optional<DrafterConfig> drafter;
  try {
    target = parse_target_config(raw, source);
    update_target_geometry(*target);
  } catch (const specula::Error&) {
  }
  try {
    drafter = parse_drafter_config(raw, source);
  } catch (const specula::Error&) {
  }
  if (target && drafter) (void)check_drafter_compat(*target, *drafter);
  try {
    (void)parse_generation_config(raw, source);
  } catch (const specula::Error&) {
  }
  try {
    const QuantizationConfig q = parse_quantization(raw, source);
    for (const auto& [module, spec] : q.overrides) {
      try {
        (void)q.spec_for(module);
      } catch (const specula::Error&) {
      }
    }
    (void)q.spec_for("model.layers.0.self_attn.q_proj");
  } catch (const specula::Error&) {
  }
  return 0;
}

}  // namespace specula::fuzz
