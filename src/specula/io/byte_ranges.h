#pragma once
// The overlap check of a weights file's tensor data ranges (the safetensors and GGUF readers).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace specula {

// The bytes [begin, end) of one tensor; `index` names the tensor for the caller.
struct ByteRange {
  uint64_t begin, end;
  size_t index;
};

// The first two ranges, in order of start, that overlap (the one reaching furthest so far, then
// the one starting inside it), or nullopt. Sorts `ranges`.
inline std::optional<std::pair<ByteRange, ByteRange>> first_overlap(std::vector<ByteRange>& ranges) {
  std::sort(ranges.begin(), ranges.end(), [](const ByteRange& a, const ByteRange& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  const ByteRange* furthest = nullptr;
  for (const ByteRange& r : ranges) {
    if (furthest && r.begin < furthest->end) return std::pair{*furthest, r};
    if (!furthest || r.end > furthest->end) furthest = &r;
  }
  return std::nullopt;
}

}  // namespace specula
