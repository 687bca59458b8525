// Ollama names and stores (io/ollama_models.h): name parsing and its refusals, manifest reading,
// resolution to the blob, and the errors that list what is installed.
#include "specula/io/ollama_models.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "error_of.h"
#include "specula/model/gguf_target.h"
#include "temp_dir.h"

namespace specula {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using test::error_of;

const std::string kDigest = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

json manifest_with(const std::string& digest) {
  return {{"schemaVersion", 2},
          {"layers",
           {{{"mediaType", "application/vnd.ollama.image.template"}, {"digest", "sha256:" + std::string(64, 'f')}},
            {{"mediaType", "application/vnd.ollama.image.model"}, {"digest", digest}, {"size", 4}}}}};
}

// A store holding `name` (host/namespace/model/tag) with a GGUF-magic blob.
void install(const fs::path& store, const std::string& name, const json& manifest) {
  fs::create_directories((store / "manifests" / name).parent_path());
  std::ofstream(store / "manifests" / name) << manifest.dump();
  fs::create_directories(store / "blobs");
  std::ofstream(store / "blobs" / ("sha256-" + kDigest), std::ios::binary) << "GGUF";
}

TEST(OllamaNames, DefaultsAndLongerForms) {
  const OllamaName a = parse_ollama_name("gemma4:e4b");
  EXPECT_EQ(a.host, "registry.ollama.ai");
  EXPECT_EQ(a.space, "library");
  EXPECT_EQ(a.model, "gemma4");
  EXPECT_EQ(a.tag, "e4b");
  EXPECT_EQ(a.display(), "gemma4:e4b");
  EXPECT_EQ(parse_ollama_name("gemma4").tag, "latest");
  const OllamaName b = parse_ollama_name("someone/gemma4-tuned:q8_0");
  EXPECT_EQ(b.space, "someone");
  EXPECT_EQ(b.display(), "someone/gemma4-tuned:q8_0");
  const OllamaName c = parse_ollama_name("hf.co/org/gemma-4-E4B-it-GGUF:Q4_K_M");
  EXPECT_EQ(c.host, "hf.co");
  EXPECT_EQ(c.display(), "hf.co/org/gemma-4-E4B-it-GGUF:Q4_K_M");
  EXPECT_TRUE(is_ollama_model("ollama:gemma4"));
  EXPECT_FALSE(is_ollama_model("/models/ollama:x"));
}

TEST(OllamaNames, NamesThatCouldLeaveTheStoreAreRefused) {
  for (const char* bad : {"", ":e4b", "gemma4:", "../x", "a/../b", "a/b/c/d", ".hidden", "gem ma", "x:../../etc"}) {
    EXPECT_NE(error_of([&] { parse_ollama_name(bad); }).find("ollama:"), std::string::npos) << bad;
  }
  EXPECT_NE(error_of([&] { parse_ollama_name(std::string(129, 'a')); }).find("1-128 characters"), std::string::npos);
}

TEST(OllamaStore, ANameResolvesToItsBlobWhichLoadsAsGguf) {
  const test::ScopedTempDir store("specula-ollama");
  install(store.path(), "registry.ollama.ai/library/gemma4/e4b", manifest_with("sha256:" + kDigest));
  const std::string blob = resolve_ollama_model("ollama:gemma4:e4b", store.path().string());
  EXPECT_EQ(blob, (store.path() / "blobs" / ("sha256-" + kDigest)).string());
  EXPECT_EQ(gguf_file_of(blob), blob);  // recognized by its magic, not its name
}

TEST(OllamaStore, MissingModelsListWhatIsInstalled) {
  const test::ScopedTempDir store("specula-ollama");
  const std::string dir = store.path().string();
  EXPECT_NE(error_of([&] { resolve_ollama_model("ollama:gemma4", dir + "/none"); }).find("does not exist"),
            std::string::npos);
  EXPECT_NE(error_of([&] { resolve_ollama_model("ollama:gemma4", dir); }).find("no models are installed"),
            std::string::npos);
  install(store.path(), "registry.ollama.ai/library/gemma4/e4b", manifest_with("sha256:" + kDigest));
  install(store.path(), "registry.ollama.ai/someone/tuned/latest", manifest_with("sha256:" + kDigest));
  EXPECT_NE(error_of([&] {
              resolve_ollama_model("ollama:gemma4:e2b", dir);
            }).find("gemma4:e2b is not installed in " + dir + " (installed: gemma4:e4b, someone/tuned:latest)"),
            std::string::npos);
  fs::remove(store.path() / "blobs" / ("sha256-" + kDigest));
  EXPECT_NE(error_of([&] { resolve_ollama_model("ollama:gemma4:e4b", dir); }).find("ollama pull gemma4:e4b"),
            std::string::npos);
}

TEST(OllamaStore, BadManifestsNameTheProblem) {
  const std::string src = "m";
  EXPECT_NE(error_of([&] { ollama_model_digest(json::array(), src); }).find("no \"layers\" array"), std::string::npos);
  EXPECT_NE(error_of([&] {
              ollama_model_digest(json{{"layers", {1}}}, src);
            }).find("not an object"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              ollama_model_digest(json{{"layers", json::array()}}, src);
            }).find("no application"),
            std::string::npos);
  for (const std::string& digest : {"md5:" + kDigest, "sha256:" + kDigest.substr(1), "sha256:../../" + kDigest}) {
    EXPECT_NE(error_of([&] { ollama_model_digest(manifest_with(digest), src); }).find("64 lowercase hex"),
              std::string::npos)
        << digest;
  }
  json twice = manifest_with("sha256:" + kDigest);
  twice["layers"].push_back(twice["layers"][1]);
  EXPECT_NE(error_of([&] { ollama_model_digest(twice, src); }).find("more than one"), std::string::npos);
  EXPECT_EQ(ollama_model_digest(manifest_with("sha256:" + kDigest), src), kDigest);
}

TEST(OllamaStore, TheStoreIsOllamaModelsWhenSet) {
  const char* old = std::getenv("OLLAMA_MODELS");
  const std::string saved = old ? old : "";
  setenv("OLLAMA_MODELS", "/srv/ollama-models", 1);
  EXPECT_EQ(ollama_models_dir(), "/srv/ollama-models");
  if (old) {
    setenv("OLLAMA_MODELS", saved.c_str(), 1);
  } else {
    unsetenv("OLLAMA_MODELS");
  }
}

}  // namespace
}  // namespace specula
