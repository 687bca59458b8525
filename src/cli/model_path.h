#pragma once
// --model and --draft values that name a model another tool installed: `ollama:NAME[:TAG]` is
// replaced at parse time by the GGUF blob in Ollama's store (io/ollama_models.h). A name that does
// not resolve is a runtime error (exit 1) listing the installed models.
#include <CLI/CLI.hpp>

namespace specula::cli {

CLI::Validator model_path();

}  // namespace specula::cli
