#pragma once
// Writes a Hugging Face tokenizer (tokenizer.json, tokenizer_config.json, the chat template) into
// GGUF metadata the way llama.cpp's converter writes Gemma 4's (text/gguf_tokenizer.h reads it
// back): `tokenizer.ggml.model` "gemma4", the token strings by id, their ggml types, placeholder
// scores, the merges as "left right", the special token ids, add_bos_token / add_space_prefix, and
// `tokenizer.chat_template`.
#include <string>

#include "specula/io/gguf_writer.h"
#include "specula/text/tokenizer_json.h"

namespace specula::synth {

// `tokenizer_dir` holds tokenizer.json (a byte-fallback BPE, as Gemma's). Throws specula::Error
// naming the file for a tokenizer the gemma4 layout cannot hold.
void add_gguf_tokenizer(GgufWriter& w, const std::string& tokenizer_dir);
// The same with tokenizer.json already parsed (`tokenizer_dir` gives the config and template).
void add_gguf_tokenizer(GgufWriter& w, const text::TokenizerFile& file, const std::string& tokenizer_dir);

}  // namespace specula::synth
