// Prompt-lookup drafting: the continuation of the most recent earlier match of the longest
// trailing n-gram.
#include <vector>

#include <gtest/gtest.h>

#include "specula/speculative/prompt_lookup.h"

namespace specula {
namespace {

TEST(SpecPromptLookup, ProposesTheContinuationOfTheLongestRecentMatch) {
  //                              0  1  2  3  4  5  6  7  8  9
  const std::vector<int32_t> ctx{2, 5, 6, 7, 8, 9, 5, 6, 7, 1, 3, 6, 7};
  // Trailing 3-gram [3,6,7] never occurred; trailing 2-gram [6,7] last occurred at 7..8 -> 1, 3, 6.
  EXPECT_EQ(prompt_lookup_drafts(ctx, 3), (std::vector<int32_t>{1, 3, 6}));
  // The continuation is cut at the end of the context.
  EXPECT_EQ(prompt_lookup_drafts(ctx, 10), (std::vector<int32_t>{1, 3, 6, 7}));
  PromptLookupOptions three;
  three.min_ngram = 3;
  EXPECT_TRUE(prompt_lookup_drafts(ctx, 3, three).empty());
}

TEST(SpecPromptLookup, PrefersTheLongerNgramOverTheMoreRecentShortOne) {
  //                              0  1  2  3  4  5  6  7  8
  const std::vector<int32_t> ctx{4, 1, 2, 9, 3, 2, 8, 1, 2};
  // [1,2] matches at 1..2 (-> 9); [2] alone would match more recently at 5 (-> 8).
  EXPECT_EQ(prompt_lookup_drafts(ctx, 1), (std::vector<int32_t>{9}));
}

TEST(SpecPromptLookup, NothingToProposeOnFreshOrTinyContexts) {
  EXPECT_TRUE(prompt_lookup_drafts(std::vector<int32_t>{2}, 4).empty());
  EXPECT_TRUE(prompt_lookup_drafts(std::vector<int32_t>{2, 3, 4, 5}, 4).empty());
  EXPECT_TRUE(prompt_lookup_drafts(std::vector<int32_t>{2, 3, 2, 3}, 0).empty());
}

}  // namespace
}  // namespace specula
