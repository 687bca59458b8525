#include "cli/model_path.h"

#include "specula/io/ollama_models.h"

namespace specula::cli {

CLI::Validator model_path() {
  return CLI::Validator(
      [](std::string& value) {
        if (is_ollama_model(value)) value = resolve_ollama_model(value, ollama_models_dir());
        return std::string();
      },
      "", "model path");
}

}  // namespace specula::cli
