#pragma once
// Stop strings (OpenAI `stop`) matched on the streamed text across token boundaries. Text that
// could be the beginning of a stop string is held back until it is resolved; when a stop string
// appears, the output is cut just before it and the stream is over.
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace specula::text {

class StopStringMatcher {
 public:
  // Empty strings are ignored.
  explicit StopStringMatcher(std::vector<std::string> stops);

  struct Step {
    std::string text;      // safe to emit now
    bool stopped = false;  // a stop string was found; nothing more will be emitted
  };
  // Feeds newly decoded text. After a stop, returns empty steps with stopped = true.
  Step push(std::string_view text);
  // End of generation without a stop: releases the held-back text.
  std::string finish();

  bool stopped() const { return stopped_; }
  // Index into the constructor's list of the stop string that matched (-1 if none).
  int matched_index() const { return matched_; }
  // Bytes currently held back.
  size_t held() const { return pending_.size(); }

 private:
  std::vector<std::string> stops_;
  std::vector<int> original_index_;
  std::string pending_;
  bool stopped_ = false;
  int matched_ = -1;
};

}  // namespace specula::text
