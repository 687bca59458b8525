// Stop strings over a token stream: matches across pieces, hold-back of possible beginnings, a stop
// at the very first piece, and the detokenizer feeding the matcher.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gemma_tokenizer.h"
#include "specula/text/detokenizer.h"
#include "specula/text/stop_strings.h"

namespace specula::text {
namespace {

TEST(StopStrings, MatchSplitAcrossPiecesIsHeldThenCut) {
  StopStringMatcher m({"END"});
  auto s = m.push("hello E");
  EXPECT_EQ(s.text, "hello ");  // "E" could begin the stop string
  EXPECT_FALSE(s.stopped);
  EXPECT_EQ(m.held(), 1u);
  s = m.push("N");
  EXPECT_EQ(s.text, "");
  EXPECT_EQ(m.held(), 2u);
  s = m.push("D and more");
  EXPECT_EQ(s.text, "");
  EXPECT_TRUE(s.stopped);
  EXPECT_EQ(m.matched_index(), 0);
  EXPECT_TRUE(m.push("later").stopped);
  EXPECT_EQ(m.push("later").text, "");
}

TEST(StopStrings, FalseStartIsReleased) {
  StopStringMatcher m({"END"});
  EXPECT_EQ(m.push("EN").text, "");
  EXPECT_EQ(m.push("x").text, "ENx");
  EXPECT_EQ(m.push("EEN").text, "E");  // "EN" may still begin "END"
  EXPECT_EQ(m.finish(), "EN");         // generation ended: nothing is lost
  EXPECT_FALSE(m.stopped());
}

TEST(StopStrings, StopAtTheVeryFirstPiece) {
  StopStringMatcher m({"\n\n", "###"});
  const auto s = m.push("###tail");
  EXPECT_TRUE(s.stopped);
  EXPECT_EQ(s.text, "");
  EXPECT_EQ(m.matched_index(), 1);
  EXPECT_EQ(m.finish(), "");
}

TEST(StopStrings, EarliestMatchWinsAmongSeveral) {
  StopStringMatcher m({"", "world", "lo w"});  // empty strings are ignored
  const auto s = m.push("hello world");
  EXPECT_TRUE(s.stopped);
  EXPECT_EQ(s.text, "hel");
  EXPECT_EQ(m.matched_index(), 2);
}

TEST(StopStrings, MultiByteStopStringSplitAcrossTokens) {
  const Tokenizer& tok = specula::test::gemma_tokenizer();
  const std::string stop = "\xF4\x8F\xBF\xBD!";  // U+10FFFD: four byte-fallback tokens, then "!"
  const std::vector<int32_t> ids = tok.encode("Answer: 42" + stop + " ignored", false);
  StreamingDetokenizer detok(tok);
  StopStringMatcher m({stop});
  std::string out;
  size_t consumed = 0;
  for (int32_t id : ids) {
    ++consumed;
    const auto s = m.push(detok.push(id));
    out += s.text;
    if (s.stopped) break;
  }
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(out, "Answer: 42");
  EXPECT_LT(consumed, ids.size());  // generation stops before " ignored"
}

TEST(StopStrings, NoStopReleasesEverything) {
  StopStringMatcher m({"zzz"});
  std::string out;
  for (const char* piece : {"a", "z", "z", "b"}) out += m.push(piece).text;
  out += m.finish();
  EXPECT_EQ(out, "azzb");
}

}  // namespace
}  // namespace specula::text
