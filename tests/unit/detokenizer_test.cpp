// Streaming detokenization with the Gemma 4 tokenizer: text appears as soon as it is valid UTF-8,
// characters split over byte-fallback tokens are held until complete, special tokens per option.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gemma_tokenizer.h"
#include "specula/text/detokenizer.h"

namespace specula::text {
namespace {

using Ids = std::vector<int32_t>;
using specula::test::gemma_tokenizer;

int32_t id_of(const std::string& token) { return gemma_tokenizer().token_to_id(token).value(); }

TEST(StreamingDetokenizer, MatchesBatchDecodeTokenByToken) {
  const Tokenizer& tok = gemma_tokenizer();
  const std::string text = "Hello, world! Ünïcödé — 日本語のテキスト 🙂 and\ttabs\n\nnew  lines.";
  const Ids ids = tok.encode(text, false);
  StreamingDetokenizer detok(tok, {.skip_special_tokens = false, .hidden_ids = {}});
  std::string streamed;
  for (int32_t id : ids) streamed += detok.push(id);
  streamed += detok.finish();
  EXPECT_EQ(streamed, text);
  EXPECT_EQ(detok.text(), text);
}

TEST(StreamingDetokenizer, HoldsMultiByteCharacterSplitOverByteTokens) {
  const Tokenizer& tok = gemma_tokenizer();
  // U+10FFFD is not in the vocabulary: four byte tokens spell it.
  const std::string ch = "\xF4\x8F\xBF\xBD";
  const Ids bytes = {id_of("<0xF4>"), id_of("<0x8F>"), id_of("<0xBF>"), id_of("<0xBD>")};
  ASSERT_EQ(tok.encode(ch, false), bytes);
  StreamingDetokenizer detok(tok);
  EXPECT_EQ(detok.push(tok.encode("a", false)[0]), "a");
  EXPECT_EQ(detok.push(bytes[0]), "");
  EXPECT_EQ(detok.push(bytes[1]), "");
  EXPECT_EQ(detok.push(bytes[2]), "");
  EXPECT_EQ(detok.push(bytes[3]), ch);  // released only when the character is complete
  // Two characters back to back, the second right after the first completes.
  for (int32_t b : bytes) detok.push(b);
  EXPECT_EQ(detok.push(bytes[0]), "");
  EXPECT_EQ(detok.push(bytes[1]), "");
  EXPECT_EQ(detok.push(bytes[2]), "");
  EXPECT_EQ(detok.push(bytes[3]), ch);
  EXPECT_EQ(detok.finish(), "");
  EXPECT_EQ(detok.text(), "a" + ch + ch + ch);
}

TEST(StreamingDetokenizer, InvalidBytesBecomeReplacementCharacters) {
  const Tokenizer& tok = gemma_tokenizer();
  StreamingDetokenizer detok(tok);
  EXPECT_EQ(detok.push(id_of("<0xFF>")), "");  // could still be the start of something
  EXPECT_EQ(detok.push(tok.encode("x", false)[0]), "\xEF\xBF\xBDx");
  EXPECT_EQ(detok.push(id_of("<0xE6>")), "");
  EXPECT_EQ(detok.finish(), "\xEF\xBF\xBD");  // the stream ended inside a character
}

TEST(StreamingDetokenizer, SpecialTokensPerOption) {
  const Tokenizer& tok = gemma_tokenizer();
  const Ids ids = tok.encode("<|turn>model\nHi<turn|>", false);
  {
    StreamingDetokenizer detok(tok);  // default: special tokens produce no text
    for (int32_t id : ids) detok.push(id);
    detok.finish();
    EXPECT_EQ(detok.text(), "model\nHi");
  }
  {
    // Keep control tokens (tool calls need them) but hide the EOS set.
    StreamingDetokenizer detok(tok, {.skip_special_tokens = false, .hidden_ids = {1, 106, 50}});
    for (int32_t id : ids) detok.push(id);
    EXPECT_EQ(detok.push(1), "");
    detok.finish();
    EXPECT_EQ(detok.text(), "<|turn>model\nHi");
  }
}

TEST(StreamingDetokenizer, ResetStartsANewStream) {
  const Tokenizer& tok = gemma_tokenizer();
  StreamingDetokenizer detok(tok);
  detok.push(id_of("<0xE6>"));
  detok.reset();
  EXPECT_EQ(detok.push(tok.encode("ok", false)[0]), "ok");
  EXPECT_EQ(detok.text(), "ok");
}

}  // namespace
}  // namespace specula::text
