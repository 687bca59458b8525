// ToolCallStream (server/tool_call_stream.h) on the Gemma 4 test tokenizer: the tokens of model
// output holding tool-call blocks, fed in pieces, give the content outside the blocks (never the
// call text) and the parsed calls; malformed or unterminated blocks come back as content; stop
// strings cut the content.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gemma_tokenizer.h"
#include "specula/server/tool_call_stream.h"

namespace {

using specula::server::ToolCallStream;
using specula::test::gemma_tokenizer;

// Feeds the encoding of `text` `step` tokens at a time.
std::string feed(ToolCallStream& s, const std::string& text, size_t step, std::vector<std::string>* pieces = nullptr) {
  const auto ids = gemma_tokenizer().encode(text, /*add_special_tokens=*/false);
  std::string out;
  for (size_t i = 0; i < ids.size(); i += step) {
    const std::vector<int32_t> chunk(ids.begin() + static_cast<long>(i),
                                     ids.begin() + static_cast<long>(std::min(ids.size(), i + step)));
    const std::string piece = s.push(chunk);
    if (pieces) pieces->push_back(piece);
    out += piece;
  }
  return out + s.finish();
}

ToolCallStream make(std::vector<std::string> stops = {}) {
  const auto& tok = gemma_tokenizer();
  return ToolCallStream(tok, *tok.token_to_id("<|tool_call>"), *tok.token_to_id("<tool_call|>"), std::move(stops));
}

TEST(ServerToolCallStream, CallsAreParsedAndNeverStreamedAsContent) {
  for (size_t step : {1u, 3u, 100u}) {
    ToolCallStream s = make();
    std::vector<std::string> pieces;
    const std::string content =
        feed(s,
             "Let me check.<|tool_call>call:get_weather{city:<|\"|>Paris<|\"|>,days:3}<tool_call|>"
             "<|tool_call>call:now{}<tool_call|>",
             step, &pieces);
    EXPECT_EQ(content, "Let me check.") << step;
    for (const auto& p : pieces) EXPECT_EQ(p.find("call:"), std::string::npos) << p;
    ASSERT_EQ(s.calls().size(), 2u);
    EXPECT_EQ(s.calls()[0].name, "get_weather");
    EXPECT_EQ(s.calls()[0].arguments["city"], "Paris");
    EXPECT_EQ(s.calls()[0].arguments["days"], 3);
    EXPECT_EQ(s.calls()[1].name, "now");
    EXPECT_TRUE(s.calls()[1].arguments.empty());
  }
}

TEST(ServerToolCallStream, MalformedAndUnterminatedBlocksBecomeContent) {
  ToolCallStream bad = make();
  const std::string content = feed(bad, "a<|tool_call>no call here<tool_call|>b", 2);
  EXPECT_TRUE(bad.calls().empty());
  EXPECT_EQ(content, "a<|tool_call>no call here<tool_call|>b");

  ToolCallStream open = make();
  EXPECT_EQ(feed(open, "x<|tool_call>call:f{a:1", 1), "x<|tool_call>call:f{a:1");
  EXPECT_TRUE(open.calls().empty());
}

TEST(ServerToolCallStream, StopStringsCutTheContentOnly) {
  ToolCallStream s = make({"END"});
  const std::string content = feed(s, "<|tool_call>call:f{s:<|\"|>END<|\"|>}<tool_call|>before END after", 1);
  EXPECT_EQ(content, "before ");
  EXPECT_TRUE(s.stopped());
  ASSERT_EQ(s.calls().size(), 1u);  // "END" inside the call's arguments did not stop anything
  EXPECT_EQ(s.calls()[0].arguments["s"], "END");
}

}  // namespace
