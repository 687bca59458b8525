#pragma once
// Streaming detokenization: ids arrive one at a time during generation and text is released as soon
// as it is final. Byte-fallback tokens (<0xNN>) can split one character over several tokens, so
// text that does not yet decode to complete UTF-8 is held until the character is complete.
// Works for any decoder chain: the text is the difference between decoding a short window of ids
// with and without the newest id (the approach of Hugging Face's DecodeStream).
#include <cstdint>
#include <string>
#include <unordered_set>
#include <vector>

namespace specula::text {

class Tokenizer;

struct DetokenizerOptions {
  // Special tokens (control tokens such as <|turn>, <eos>) produce no text.
  bool skip_special_tokens = true;
  // Ids that never produce text (e.g. the EOS set when special tokens are otherwise kept, as for
  // tool-call extraction).
  std::vector<int32_t> hidden_ids;
};

class StreamingDetokenizer {
 public:
  explicit StreamingDetokenizer(const Tokenizer& tokenizer, DetokenizerOptions options = {});

  // Adds one id; returns the text that became final (often empty while a character is incomplete).
  std::string push(int32_t id);
  // End of the stream: returns whatever is still held (incomplete bytes decode to U+FFFD).
  std::string finish();
  // Forgets all state (a new, unrelated stream).
  void reset();

  // All text returned so far.
  const std::string& text() const { return all_; }

 private:
  const Tokenizer& tokenizer_;
  DetokenizerOptions options_;
  std::unordered_set<int32_t> hidden_;
  std::vector<int32_t> window_;  // ids whose text is partly or wholly released
  std::string window_text_;      // the released text of window_
  std::string all_;
};

}  // namespace specula::text
