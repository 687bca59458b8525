#pragma once
// Rounding sizes and offsets up to an alignment, and the huge-page size the mappings align to.
#include <cstdint>

namespace specula {

inline constexpr uint64_t kHugePage = uint64_t{2} << 20;  // x86-64's 2 MiB transparent huge pages

// `n` rounded up to a multiple of `to` (> 0).
constexpr uint64_t round_up(uint64_t n, uint64_t to) { return (n + to - 1) / to * to; }

}  // namespace specula
