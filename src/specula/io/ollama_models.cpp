#include "specula/io/ollama_models.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include <fmt/format.h>

#include "specula/io/config.h"
#include "specula/util/error.h"

namespace specula {

namespace fs = std::filesystem;

namespace {

constexpr size_t kMaxNamePart = 128;
constexpr uintmax_t kMaxManifestBytes = 1 << 20;
constexpr std::string_view kModelLayer = "application/vnd.ollama.image.model";
constexpr std::string_view kDefaultHost = "registry.ollama.ai";
constexpr std::string_view kDefaultSpace = "library";

bool valid_part(std::string_view part) {
  if (part.empty() || part.size() > kMaxNamePart || part.front() == '.') return false;
  return std::all_of(part.begin(), part.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
           c == '-';
  });
}

std::string_view checked_part(std::string_view part, std::string_view what, std::string_view text) {
  if (!valid_part(part)) {
    fail("ollama:{}: the {} '{}' is not 1-{} characters of letters, digits, '.', '_' and '-' (not starting with '.')",
         text, what, part, kMaxNamePart);
  }
  return part;
}

bool is_hex_digest(std::string_view hex) {
  return hex.size() == 64 &&
         std::all_of(hex.begin(), hex.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

fs::path manifest_path(const std::string& models_dir, const OllamaName& n) {
  return fs::path(models_dir) / "manifests" / n.host / n.space / n.model / n.tag;
}

}  // namespace

std::string OllamaName::display() const {
  const std::string base =
      host == kDefaultHost ? (space == kDefaultSpace ? model : space + "/" + model) : host + "/" + space + "/" + model;
  return base + ":" + tag;
}

bool is_ollama_model(std::string_view value) { return value.substr(0, kOllamaPrefix.size()) == kOllamaPrefix; }

OllamaName parse_ollama_name(std::string_view text) {
  OllamaName n;
  std::string_view path = text;
  if (const size_t colon = text.rfind(':'); colon != std::string_view::npos) {
    n.tag = checked_part(text.substr(colon + 1), "tag", text);
    path = text.substr(0, colon);
  }
  std::vector<std::string_view> parts;
  for (size_t start = 0;;) {
    const size_t slash = path.find('/', start);
    parts.push_back(path.substr(start, slash == std::string_view::npos ? std::string_view::npos : slash - start));
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  if (parts.size() > 3) fail("ollama:{}: a name is [HOST/][NAMESPACE/]MODEL[:TAG]", text);
  n.model = checked_part(parts.back(), "model name", text);
  if (parts.size() >= 2) n.space = checked_part(parts[parts.size() - 2], "namespace", text);
  if (parts.size() == 3) n.host = checked_part(parts[0], "host", text);
  return n;
}

std::string ollama_models_dir() {
  if (const char* dir = std::getenv("OLLAMA_MODELS"); dir != nullptr && *dir != '\0') return dir;
  std::vector<std::string> candidates;
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    candidates.push_back((fs::path(home) / ".ollama" / "models").string());
  }
  candidates.push_back("/usr/share/ollama/.ollama/models");
  for (const std::string& dir : candidates) {
    std::error_code ec;
    if (fs::is_directory(dir, ec)) return dir;
  }
  return candidates.front();
}

std::string ollama_model_digest(const nlohmann::json& manifest, const std::string& source) {
  if (!manifest.is_object() || !manifest.contains("layers") || !manifest["layers"].is_array()) {
    fail("{}: not an Ollama manifest (no \"layers\" array)", source);
  }
  std::string digest;
  for (const nlohmann::json& layer : manifest["layers"]) {
    if (!layer.is_object()) fail("{}: a layer is not an object", source);
    const auto type = layer.find("mediaType");
    if (type == layer.end() || !type->is_string() || type->get_ref<const std::string&>() != kModelLayer) continue;
    if (!digest.empty()) fail("{}: more than one {} layer", source, kModelLayer);
    const auto d = layer.find("digest");
    const std::string value = d != layer.end() && d->is_string() ? d->get<std::string>() : std::string();
    if (value.rfind("sha256:", 0) != 0 || !is_hex_digest(std::string_view(value).substr(7))) {
      fail("{}: the model layer's digest is not \"sha256:\" and 64 lowercase hex digits", source);
    }
    digest = value.substr(7);
  }
  if (digest.empty()) fail("{}: no {} layer (not a model Ollama can run?)", source, kModelLayer);
  return digest;
}

std::vector<std::string> installed_ollama_models(const std::string& models_dir) {
  std::vector<std::string> names;
  const fs::path root = fs::path(models_dir) / "manifests";
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (it.depth() != 3 || !it->is_regular_file(ec)) continue;
    const fs::path rel = it->path().lexically_relative(root);
    auto part = rel.begin();
    OllamaName n;
    n.host = (part++)->string();
    n.space = (part++)->string();
    n.model = (part++)->string();
    n.tag = part->string();
    names.push_back(n.display());
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string resolve_ollama_model(std::string_view value, const std::string& models_dir) {
  const std::string_view text = value.substr(kOllamaPrefix.size());
  const OllamaName name = parse_ollama_name(text);
  std::error_code ec;
  if (!fs::is_directory(models_dir, ec)) {
    fail("{}: Ollama's model store {} does not exist (set OLLAMA_MODELS to its directory)", value, models_dir);
  }
  const fs::path manifest = manifest_path(models_dir, name);
  if (!fs::is_regular_file(manifest, ec)) {
    const std::vector<std::string> installed = installed_ollama_models(models_dir);
    fail("{}: {} is not installed in {} ({})", value, name.display(), models_dir,
         installed.empty() ? std::string("no models are installed")
                           : fmt::format("installed: {}", fmt::join(installed, ", ")));
  }
  const uintmax_t bytes = fs::file_size(manifest, ec);
  if (ec || bytes > kMaxManifestBytes) {
    fail("{}: manifest {} is not a readable file of at most {} bytes", value, manifest.string(), kMaxManifestBytes);
  }
  const std::string digest = ollama_model_digest(read_json_file(manifest.string()), manifest.string());
  const fs::path blob = fs::path(models_dir) / "blobs" / ("sha256-" + digest);
  if (!fs::is_regular_file(blob, ec)) {
    fail("{}: the model blob {} named by {} is missing (re-pull the model with `ollama pull {}`)", value, blob.string(),
         manifest.string(), name.display());
  }
  return blob.string();
}

}  // namespace specula
