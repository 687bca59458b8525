#pragma once
// The Gemma 4 test tokenizer (tests/data/tokenizer-gemma4), loaded once per process: parsing the
// 16 MB file for every test would dominate the suite's run time, especially under ASan (so the
// suites that use it run as one process each: tests/CMakeLists.txt).
#include <string>

#include "specula/text/tokenizer.h"

namespace specula::test {

inline std::string gemma_tokenizer_dir() { return std::string(SPECULA_TEST_DATA) + "/tokenizer-gemma4"; }

inline const text::Tokenizer& gemma_tokenizer() {
  static const text::Tokenizer tokenizer = text::Tokenizer::load(gemma_tokenizer_dir() + "/tokenizer.json");
  return tokenizer;
}

}  // namespace specula::test
