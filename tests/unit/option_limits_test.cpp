// The shared option ranges (engine/option_limits.h): how a range reads, what it holds (NaN and
// infinities never), and the messages the CLI's validators give for a flag's text.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "specula/engine/option_limits.h"
#include "specula/util/error.h"

namespace {

namespace limits = specula::limits;

TEST(OptionLimits, RangesReadAsIntervals) {
  EXPECT_EQ(limits::describe(limits::kGamma), "[0, 64]");
  EXPECT_EQ(limits::describe(limits::kTopP), "(0, 1]");
  EXPECT_EQ(limits::describe(limits::kPresencePenalty), "[-2, 2]");
}

TEST(OptionLimits, ContainsHonoursOpenEndsAndRefusesNonFiniteValues) {
  EXPECT_TRUE(limits::contains(limits::kGamma, 0));
  EXPECT_TRUE(limits::contains(limits::kGamma, 64));
  EXPECT_FALSE(limits::contains(limits::kGamma, 65));
  EXPECT_FALSE(limits::contains(limits::kGamma, -1));
  EXPECT_FALSE(limits::contains(limits::kTopP, 0.0));
  EXPECT_TRUE(limits::contains(limits::kTopP, 1e-9));
  EXPECT_TRUE(limits::contains(limits::kTopP, 1.0));
  EXPECT_TRUE(limits::contains(limits::kMinP, 0.0));
  EXPECT_FALSE(limits::contains(limits::kTemperature, std::nan("")));
  EXPECT_FALSE(limits::contains(limits::kTemperature, std::numeric_limits<double>::infinity()));
  EXPECT_FALSE(limits::contains(limits::kRepetitionPenalty, 0.0));
}

TEST(OptionLimits, IntegerTextErrorsNameTheValueAndTheRange) {
  EXPECT_EQ(limits::int_text_error("8", limits::kGamma), "");
  EXPECT_EQ(limits::int_text_error("9999", limits::kGamma), "9999 is not in [0, 64]");
  EXPECT_EQ(limits::int_text_error("-5", limits::kContext), "-5 is not in [0, 16777216]");
  EXPECT_EQ(limits::int_text_error("99999999999999999999", limits::kThreads),
            "99999999999999999999 is not in [0, 1024]");
  EXPECT_EQ(limits::int_text_error("4x", limits::kThreads), "'4x' is not an integer (allowed: [0, 1024])");
  EXPECT_EQ(limits::int_text_error("", limits::kThreads), "'' is not an integer (allowed: [0, 1024])");
  EXPECT_EQ(limits::int_text_error("0", limits::kMaxTokens), "0 is not in [1, 1073741824]");
}

TEST(OptionLimits, RealTextErrorsNameTheValueAndTheRange) {
  EXPECT_EQ(limits::real_text_error("0.5", limits::kTopP), "");
  EXPECT_EQ(limits::real_text_error("0", limits::kTopP), "0 is not in (0, 1]");
  EXPECT_EQ(limits::real_text_error("3", limits::kFrequencyPenalty), "3 is not in [-2, 2]");
  EXPECT_EQ(limits::real_text_error("nan", limits::kTemperature), "nan is not in [0, 100]");
  EXPECT_EQ(limits::real_text_error("1e999", limits::kTemperature), "1e999 is not in [0, 100]");
  EXPECT_EQ(limits::real_text_error("warm", limits::kTemperature), "'warm' is not a number (allowed: [0, 100])");
}

TEST(OptionLimits, GammaIsAutoOrADraftLengthWithinTheReserveBound) {
  EXPECT_EQ(limits::gamma_text_error("auto"), "");
  EXPECT_EQ(limits::gamma_text_error("0"), "");
  EXPECT_EQ(limits::gamma_text_error("64"), "");
  EXPECT_EQ(limits::gamma_text_error("9999"), "'9999' is neither 'auto' nor a draft length in [0, 64]");
  EXPECT_EQ(limits::gamma_text_error("Auto"), "'Auto' is neither 'auto' nor a draft length in [0, 64]");
  EXPECT_EQ(limits::gamma_text_error("-1"), "'-1' is neither 'auto' nor a draft length in [0, 64]");
}

TEST(OptionLimits, RequireInThrowsNamingTheOption) {
  EXPECT_NO_THROW(limits::require_in("engine: threads", 4, limits::kThreads));
  try {
    limits::require_in("engine: prefill chunk", 100000, limits::kPrefillChunk);
    FAIL() << "no error";
  } catch (const specula::Error& e) {
    EXPECT_STREQ(e.what(), "engine: prefill chunk 100000 is not in [1, 4096]");
  }
}

}  // namespace
