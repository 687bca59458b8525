#pragma once
// The tokenizer side of the EOS set (docs/gemma4.md §2.5): the tokenizer's own eos token and the
// chat template's end-of-turn token. A chat turn ends with the end-of-turn marker, and some
// configs (the 12B's) do not list it, so generation must stop there whatever config.json says.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace specula {

class ChatTemplate;
class TargetModel;
struct TargetOptions;
namespace text {
class Tokenizer;
}

// The ids of tokenizer_config.json's `eos_token` (from `special_tokens`, e.g.
// tokenizer_special_tokens(dir)) and of the end-of-turn marker the chat template writes
// (`<turn|>` for Gemma 4, `<end_of_turn>` for Gemma 2/3), each when the tokenizer knows it.
// `chat_template` may be null. Sorted, unique.
std::vector<int32_t> tokenizer_eos_ids(const text::Tokenizer& tokenizer, const nlohmann::ordered_json& special_tokens,
                                       const ChatTemplate* chat_template);

// Loads the target at `path` (a directory or one .safetensors file) with `tokenizer_ids` joined
// to its checkpoint's EOS ids, so that TargetModel::eos_token_ids() is the whole EOS set.
std::unique_ptr<TargetModel> load_target_with_eos(const std::string& path, const TargetOptions& options,
                                                  const std::vector<int32_t>& tokenizer_ids);

}  // namespace specula
