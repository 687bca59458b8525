#include "specula/io/eos_set.h"

#include <algorithm>

namespace specula {

std::vector<int32_t> eos_token_set(const std::vector<int>& config_ids, const GenerationConfig* generation,
                                   const std::vector<int32_t>& tokenizer_ids) {
  std::vector<int32_t> ids(config_ids.begin(), config_ids.end());
  if (generation) ids.insert(ids.end(), generation->eos_token_ids.begin(), generation->eos_token_ids.end());
  ids.insert(ids.end(), tokenizer_ids.begin(), tokenizer_ids.end());
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

}  // namespace specula
