#pragma once
// The streamed text of one generation: ids -> final UTF-8 text (text/detokenizer.h) -> stop-string
// hold-back and cut (text/stop_strings.h). Without a tokenizer there is no text, and stop strings
// are rejected by the engine before generation.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "specula/text/detokenizer.h"
#include "specula/text/stop_strings.h"

namespace specula {

class GenerationTextStream {
 public:
  GenerationTextStream(const text::Tokenizer* tokenizer, bool skip_special_tokens, std::vector<std::string> stops);

  // Adds one generated id; returns the text that became final. After a stop string matched,
  // returns nothing more.
  std::string push(int32_t id);
  // End of generation: releases everything still held (unless a stop string matched).
  std::string finish();

  bool stopped() const { return matcher_.stopped(); }
  int stop_index() const { return matcher_.matched_index(); }

 private:
  std::unique_ptr<text::StreamingDetokenizer> detokenizer_;  // null without a tokenizer
  text::StopStringMatcher matcher_;
};

}  // namespace specula
