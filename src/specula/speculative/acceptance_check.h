#pragma once
// A drafter made for another model of the same width passes every shape check of
// io/checkpoint.h, and then its drafts are almost never accepted: speculation only costs time.
// After enough drafts with none accepted, the programs say so.
#include <cstdint>
#include <string>

namespace specula {

// With a drafter of the right model even a weak acceptance of 10 % rejects this many drafts in a
// row less than once in 29 generations; a mismatched one rejects them all.
inline constexpr int64_t kNoAcceptanceWarnDrafts = 32;

// The warning when `drafted` >= kNoAcceptanceWarnDrafts and none was accepted; else empty.
std::string no_acceptance_warning(int64_t drafted, int64_t accepted, const std::string& draft_source);

}  // namespace specula
