#pragma once
// Token bytes for the golden models' 512-token vocabulary (tests/data/goldens), which has no
// tokenizer: printable ASCII, JSON pieces, whole and split UTF-8 characters, then short letter
// strings; ids 0-2 and the EOS ids have none. Shared by the constrained decoding tests and the
// constrained acceptance benchmark.
#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "specula/model/target_model.h"

namespace specula::test {

inline std::vector<std::string> golden_vocabulary(const TargetModel& model) {
  std::vector<std::string> pieces;
  for (char c = 0x20; c < 0x7f; ++c) pieces.push_back(std::string(1, c));
  for (const char* s :
       {"\n",   "{\"",          "\": ", "\", \"",   "true", "false", "null", "bb", "ccc", ", ",  "\xc3\xa9", "\xc3",
        "\xa9", "\xe4\xb8\xad", "\xe4", "\xb8\xad", "12",   "-1",    "\"}",  "]}", "[\"", "\"]", "}}"})
    pieces.push_back(s);
  std::mt19937 rng(11);
  while (pieces.size() < 600)
    pieces.push_back(std::string(1, static_cast<char>('a' + rng() % 26)) + static_cast<char>('a' + rng() % 26));
  std::vector<std::string> vocab(static_cast<size_t>(model.vocab_size()));
  const std::vector<int32_t> eos = model.eos_token_ids();
  size_t next = 0;
  for (size_t id = 3; id < vocab.size(); ++id)
    if (std::find(eos.begin(), eos.end(), static_cast<int32_t>(id)) == eos.end()) vocab[id] = pieces[next++];
  return vocab;
}

}  // namespace specula::test
