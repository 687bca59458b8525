#pragma once
// A drafter made for another model of the same width passes every shape check of
// io/checkpoint.h, and then its drafts are almost never accepted: speculation only costs time.
// After enough drafts with none accepted, the programs say so.
#include <cstdint>
#include <mutex>
#include <string>

namespace specula {

// With a drafter of the right model even a weak acceptance of 10 % rejects this many drafts in a
// row less than once in 29 generations; a mismatched one rejects them all.
inline constexpr int64_t kNoAcceptanceWarnDrafts = 32;

// The warning when `drafted` >= kNoAcceptanceWarnDrafts and none was accepted; else empty.
std::string no_acceptance_warning(int64_t drafted, int64_t accepted, const std::string& draft_source);

// The drafts of many generations (of a chat, or of a server's requests on several threads)
// counted together, so that the warning is given once, when their total first calls for it.
class NoAcceptanceWatch {
 public:
  // Counts one generation's drafts: the warning if it is due now and was not given yet; else empty.
  std::string add(int64_t drafted, int64_t accepted, const std::string& draft_source);

 private:
  std::mutex mutex_;
  int64_t drafted_ = 0;
  int64_t accepted_ = 0;
  bool warned_ = false;
};

}  // namespace specula
