#pragma once
// The EOS set (docs/gemma4.md §2.5): the ids that end a generation.
#include <cstdint>
#include <vector>

#include "specula/io/config.h"

namespace specula {

// config.json's eos_token_id (text config ∪ top level, TargetConfig::eos_token_ids) ∪
// generation_config.json's ∪ `tokenizer_ids` (the tokenizer's eos token and the chat template's
// end-of-turn token, engine/eos_tokens.h), sorted and unique. `generation` may be null.
std::vector<int32_t> eos_token_set(const std::vector<int>& config_ids, const GenerationConfig* generation,
                                   const std::vector<int32_t>& tokenizer_ids = {});

}  // namespace specula
