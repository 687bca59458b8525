#include "specula/text/stop_strings.h"

#include <algorithm>

namespace specula::text {

StopStringMatcher::StopStringMatcher(std::vector<std::string> stops) {
  for (size_t i = 0; i < stops.size(); ++i) {
    if (stops[i].empty()) continue;
    stops_.push_back(std::move(stops[i]));
    original_index_.push_back(static_cast<int>(i));
  }
}

StopStringMatcher::Step StopStringMatcher::push(std::string_view text) {
  Step step;
  if (stopped_) {
    step.stopped = true;
    return step;
  }
  pending_.append(text);
  // The earliest occurrence of any stop string ends the stream (the longest one on a tie).
  size_t best = std::string::npos;
  for (size_t i = 0; i < stops_.size(); ++i) {
    const size_t at = pending_.find(stops_[i]);
    if (at == std::string::npos) continue;
    if (best == std::string::npos || at < best ||
        (at == best && stops_[i].size() > stops_[static_cast<size_t>(matched_)].size())) {
      best = at;
      matched_ = static_cast<int>(i);
    }
  }
  if (best != std::string::npos) {
    step.text = pending_.substr(0, best);
    step.stopped = stopped_ = true;
    matched_ = original_index_[static_cast<size_t>(matched_)];
    pending_.clear();
    return step;
  }
  // Hold back the longest suffix that is a proper prefix of some stop string.
  size_t hold = 0;
  for (const std::string& s : stops_) {
    for (size_t len = std::min(s.size() - 1, pending_.size()); len > hold; --len) {
      if (pending_.compare(pending_.size() - len, len, s, 0, len) == 0) {
        hold = len;
        break;
      }
    }
  }
  step.text = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return step;
}

std::string StopStringMatcher::finish() {
  std::string rest = stopped_ ? std::string() : std::move(pending_);
  pending_.clear();
  return rest;
}

}  // namespace specula::text
