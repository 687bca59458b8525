#pragma once
// The tokenizer and chat template a GGUF file carries, read back as the tokenizer.json they were
// converted from (docs/gguf.md §6).
//
// llama.cpp's converter writes a Gemma 4 tokenizer as `tokenizer.ggml.model` = "gemma4": every
// token string by id (`tokens`), ggml token types (`token_type`), the ranked merges as "left
// right" strings (`merges`), placeholder `scores`, the bos/eos/unk/padding ids, `add_bos_token`,
// and the template as `tokenizer.chat_template`. That is a byte-fallback BPE over text whose
// spaces become "▁" — the tokenizer.json pipeline — except that the added tokens (matched whole
// before BPE) are only partly marked: control tokens are CONTROL, the control tokens llama.cpp
// keeps visible are USER_DEFINED, and the rest (Gemma's <unusedN>, HTML tags, whitespace runs) are
// NORMAL. Those are recognised by what tokenizer.json's added tokens have and its BPE tokens do
// not: no merge produces them, or they are runs of newlines, tabs or "▁".
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "specula/text/tokenizer.h"
#include "specula/text/tokenizer_json.h"

namespace specula {
class GgufFile;
}

namespace specula::text {

// ggml token types (llama.cpp's llama_token_type).
enum class GgufTokenType : int32_t {
  Undefined = 0,
  Normal = 1,
  Unknown = 2,
  Control = 3,
  UserDefined = 4,
  Unused = 5,
  Byte = 6,
};

// Bounds on tokenizer metadata (hostile files are refused before anything large is built).
inline constexpr size_t kGgufMaxTokenBytes = 4096;
inline constexpr uint64_t kGgufMaxTokenizerBytes = uint64_t{1} << 30;  // tokens and merges together

// The tokenizer.json content of `f`'s tokenizer metadata. Throws specula::Error naming the file
// and the tokenizer model type, or the key (and index) at fault.
TokenizerFile gguf_tokenizer_file(const GgufFile& f);
Tokenizer gguf_tokenizer(const GgufFile& f);

// `tokenizer.chat_template` (or `tokenizer.chat_template.NAME` for a named one); nullopt when
// absent. Throws when the key has another type.
std::optional<std::string> gguf_chat_template(const GgufFile& f, const std::string& name = "");

// The template variables tokenizer_config.json would give (bos_token, eos_token, unk_token,
// pad_token) from the ids in the metadata; ids outside the token list are left out.
nlohmann::ordered_json gguf_special_tokens(const GgufFile& f);

}  // namespace specula::text
