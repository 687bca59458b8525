#pragma once
// Models installed by Ollama, used in place (docs/gguf.md §7): `--model ollama:NAME[:TAG]` names a
// model the way `ollama run` does and resolves to the GGUF file Ollama downloaded.
//
// Ollama's store (`$OLLAMA_MODELS`, else `~/.ollama/models`, else the Linux service's
// `/usr/share/ollama/.ollama/models`) holds one JSON manifest per model and tag,
// `manifests/HOST/NAMESPACE/MODEL/TAG`, whose layer of media type
// `application/vnd.ollama.image.model` names the weights by digest; the bytes are the blob
// `blobs/sha256-HEX`. A name is `[HOST/][NAMESPACE/]MODEL[:TAG]`, defaulting to
// `registry.ollama.ai`, `library` and `latest`.
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace specula {

inline constexpr std::string_view kOllamaPrefix = "ollama:";

struct OllamaName {
  std::string host = "registry.ollama.ai";
  std::string space = "library";  // the namespace
  std::string model;
  std::string tag = "latest";

  // As `ollama list` shows it: MODEL:TAG for the library, the longer forms otherwise.
  std::string display() const;
};

// Whether a --model value is an Ollama name (it starts with "ollama:").
bool is_ollama_model(std::string_view value);

// Parses NAME[:TAG] (without the prefix). Every part is 1-128 characters of [A-Za-z0-9._-], not
// starting with '.', so a name never leaves the store. Throws specula::Error naming the problem.
OllamaName parse_ollama_name(std::string_view text);

// The store: $OLLAMA_MODELS if set, else the first of ~/.ollama/models and
// /usr/share/ollama/.ollama/models that exists (else the former, for the error message).
std::string ollama_models_dir();

// The digest's hex of the manifest's one model layer. `source` names the manifest in errors.
std::string ollama_model_digest(const nlohmann::json& manifest, const std::string& source);

// The installed models of a store as display names, sorted (empty when there are none).
std::vector<std::string> installed_ollama_models(const std::string& models_dir);

// The GGUF blob of `ollama:NAME[:TAG]` in `models_dir`. Errors name the model, the store and,
// when the model is not installed, what is.
std::string resolve_ollama_model(std::string_view value, const std::string& models_dir);

}  // namespace specula
