#pragma once
// Random constrained "generation" without a model, for the grammar tests: at each step a token is
// drawn among those the mask allows (half the time the first of a preferred order that closes
// structures, so walks end), until an end token is drawn or the grammar is finished.
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "specula/grammar/token_mask.h"

namespace specula::test {

// A small vocabulary shaped like a real one: every single byte (ids 0-255: printable ASCII and
// byte-fallback-like high bytes), JSON-ish multi-byte pieces, whole and split UTF-8 characters;
// the last id is the end token (no bytes).
inline std::vector<std::string> walk_vocabulary() {
  std::vector<std::string> v;
  for (int b = 0; b < 256; ++b) v.push_back(std::string(1, static_cast<char>(b)));
  for (const char* s : {"{\"",
                        "\":",
                        "\": ",
                        "\", \"",
                        "\"}",
                        "]}",
                        "}]",
                        ", ",
                        "true",
                        "false",
                        "null",
                        "celsius",
                        "fahrenheit",
                        "\xe4\xb8\xad",
                        "\xc3\xa9",
                        "\xe4\xb8",
                        "\xad\xe6\x96\x87",
                        "12",
                        "-3",
                        ".5",
                        "abc",
                        "\\u00e9",
                        "\\n",
                        " \"",
                        "\"a\"",
                        "[\"",
                        "\"]",
                        "0",
                        "100",
                        "{}",
                        "[]"})
    v.push_back(s);
  v.push_back("");  // end token
  return v;
}

struct WalkResult {
  std::string text;
  bool ended = false;  // drew the end token or reached a finished grammar
};

inline WalkResult random_walk(const std::shared_ptr<const grammar::Grammar>& g,
                              const std::shared_ptr<const grammar::TokenTrie>& trie, uint32_t seed,
                              size_t max_steps = 4000) {
  const int32_t end = static_cast<int32_t>(trie->vocab_size()) - 1;
  grammar::TokenMasker masker(g, trie, trie->vocab_size(), {end});
  grammar::GrammarMatcher state(g);
  std::mt19937 rng(seed);
  const std::vector<int32_t> preferred = {end, '"', '}', ']', '0', '1', 'a', 't', 'n'};
  WalkResult out;
  for (size_t step = 0; step < max_steps; ++step) {
    const auto mask = masker.mask(state);
    std::vector<int32_t> allowed;
    for (size_t t = 0; t < trie->vocab_size(); ++t)
      if ((mask[t >> 6] >> (t & 63)) & 1) allowed.push_back(static_cast<int32_t>(t));
    if (allowed.empty()) return out;
    int32_t pick = allowed[rng() % allowed.size()];
    if (rng() % 2 == 0)
      for (const int32_t p : preferred)
        if ((mask[static_cast<size_t>(p) >> 6] >> (p & 63)) & 1) {
          pick = p;
          break;
        }
    if (pick == end) {
      out.ended = true;
      return out;
    }
    if (!masker.accept_token(state, pick)) return out;  // the mask allowed it: must not happen
    out.text += trie->bytes_of(pick);
    if (state.finished()) {
      out.ended = true;
      return out;
    }
  }
  return out;
}

}  // namespace specula::test
