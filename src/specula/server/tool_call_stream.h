#pragma once
// Splits a generation's token stream into assistant content and Gemma 4 tool-call blocks
// (<|tool_call>call:NAME{...}<tool_call|>, text/tool_calls.h). Content tokens are detokenized
// incrementally (special tokens skipped) and matched against the request's stop strings; the tokens
// of a block are held back and parsed when the block closes, so a stream never shows tool-call text
// as content. A block that does not parse, or is still open at the end, is returned as content
// (its text with the special tokens written out), so nothing the model wrote is lost silently.
#include <cstdint>
#include <string>
#include <vector>

#include "specula/text/detokenizer.h"
#include "specula/text/stop_strings.h"
#include "specula/text/tool_calls.h"

namespace specula::server {

class ToolCallStream {
 public:
  ToolCallStream(const text::Tokenizer& tokenizer, int32_t begin_id, int32_t end_id, std::vector<std::string> stops);

  // Feeds emitted tokens; returns the content text that became final.
  std::string push(const std::vector<int32_t>& tokens);
  // End of generation: the remaining content.
  std::string finish();

  // Tool calls completed so far, in order.
  const std::vector<text::ToolCall>& calls() const { return calls_; }
  // A stop string matched in the content: the caller ends the generation.
  bool stopped() const { return stops_.stopped(); }
  int stop_index() const { return stops_.matched_index(); }

 private:
  std::string emit(const std::string& text);
  std::string close_block(bool terminated);

  const text::Tokenizer& tokenizer_;
  int32_t begin_id_;
  int32_t end_id_;
  text::StreamingDetokenizer content_;
  text::StopStringMatcher stops_;
  bool in_block_ = false;
  std::vector<int32_t> block_;
  std::vector<text::ToolCall> calls_;
};

}  // namespace specula::server
