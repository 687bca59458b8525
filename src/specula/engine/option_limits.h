#pragma once
// The allowed range of every number a user sets: the CLI flags and the server's request fields
// read the same bounds from here, so `run --top-k` and a request's `top_k` agree, and a value out
// of range is refused before any work with a message naming the value and the range.
#include <cstdint>
#include <string>
#include <string_view>

namespace specula::limits {

struct IntRange {
  int64_t lo;
  int64_t hi;
};

struct RealRange {
  double lo;
  double hi;
  bool lo_open = false;  // (lo, hi] instead of [lo, hi]
};

// Draft tokens per speculative round. Each sliding-window cache keeps this many extra positions
// to roll rejected drafts back and a verify step has gamma + 1 rows, so the bound keeps both
// small; past a handful of drafts acceptance makes longer rounds pointless anyway.
inline constexpr IntRange kGamma{0, 64};
// Tokens to generate. OpenAI and vLLM refuse 0, and so do `run`, `chat` and the server.
inline constexpr IntRange kMaxTokens{1, int64_t{1} << 30};
// A context limit in tokens (0 = the model's max_position_embeddings; larger than the model's
// own limit is refused once its config is read).
inline constexpr IntRange kContext{0, int64_t{1} << 24};
inline constexpr IntRange kThreads{0, 1024};  // 0 = one per hardware thread
// Rows of one prefill forward. Scratch buffers and the sliding-window rings grow with it.
inline constexpr IntRange kPrefillChunk{1, 4096};
// Rows of a batched scheduler step while sequences decode (0 = the scheduler's default).
inline constexpr IntRange kStepRows{0, 16384};

inline constexpr RealRange kTemperature{0.0, 100.0};
inline constexpr IntRange kTopK{0, int64_t{1} << 30};  // 0 = off; a request may also send -1 (vLLM's off)
inline constexpr RealRange kTopP{0.0, 1.0, /*lo_open=*/true};
inline constexpr RealRange kMinP{0.0, 1.0};
inline constexpr RealRange kRepetitionPenalty{0.0, 100.0, /*lo_open=*/true};
inline constexpr RealRange kPresencePenalty{-2.0, 2.0};
inline constexpr RealRange kFrequencyPenalty{-2.0, 2.0};
inline constexpr RealRange kLogitBias{-100.0, 100.0};
inline constexpr IntRange kTopLogprobs{0, 20};

// Server.
inline constexpr IntRange kPort{0, 65535};  // 0 = any free port
inline constexpr IntRange kParallel{1, 256};
inline constexpr IntRange kMaxQueue{0, 4096};
inline constexpr IntRange kMaxConnections{1, 4096};  // one thread each
inline constexpr IntRange kReadTimeoutSeconds{1, 3600};
inline constexpr IntRange kMaxBodyBytes{1024, int64_t{1} << 30};
inline constexpr IntRange kKvBudgetMb{0, int64_t{1} << 30};

// "[0, 64]", "(0, 1]".
std::string describe(const IntRange& range);
std::string describe(const RealRange& range);

bool contains(const IntRange& range, int64_t value);
bool contains(const RealRange& range, double value);  // false for NaN and infinities

// Throws specula::Error "WHAT VALUE is not in [lo, hi]" when `value` is outside `range`: the
// library's own check of options that arrive without passing the CLI or the request parser.
void require_in(std::string_view what, int64_t value, const IntRange& range);

// Empty when `text` is an integer inside `range`; else why not ("9999 is not in [0, 64]",
// "'abc' is not an integer"). For the CLI's validators, which see the flag's text.
std::string int_text_error(std::string_view text, const IntRange& range);
std::string real_text_error(std::string_view text, const RealRange& range);

// Empty when `text` is "auto" or a draft length in kGamma; else why not.
std::string gamma_text_error(std::string_view text);

}  // namespace specula::limits
