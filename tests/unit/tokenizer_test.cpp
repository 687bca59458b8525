// Tokenizer: the Gemma 4 goldens (encode-goldens.jsonl, plus known encodings and chat-prompt ids),
// add_special_tokens, the generic components on tiny hand-written tokenizer.json files, and
// load-time errors.
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "gemma_tokenizer.h"
#include "specula/text/tokenizer.h"
#include "specula/text/tokenizer_pre_tokenizers.h"
#include "specula/util/error.h"

namespace specula::text {
namespace {

using Ids = std::vector<int32_t>;
using specula::test::gemma_tokenizer;

TEST(GemmaTokenizer, EncodeGoldensRoundTrip) {
  const Tokenizer& tok = gemma_tokenizer();
  std::ifstream in(specula::test::gemma_tokenizer_dir() + "/encode-goldens.jsonl");
  ASSERT_TRUE(in) << "missing encode-goldens.jsonl";
  std::string line;
  int count = 0;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    ++count;
    const auto j = nlohmann::json::parse(line);
    const std::string text = j.at("text");
    const Ids want = j.at("ids");
    SCOPED_TRACE("line " + std::to_string(count) + ": " + text.substr(0, 60));
    EXPECT_EQ(tok.encode(text, false), want);
    EXPECT_EQ(tok.decode(want, false), j.at("decoded").get<std::string>());
  }
  EXPECT_EQ(count, 248);
}

TEST(GemmaTokenizer, SpecEncodings) {
  const Tokenizer& tok = gemma_tokenizer();
  const std::vector<std::pair<std::string, Ids>> cases = {
      {"hello", {23391}},
      {"hello world", {23391, 1902}},
      {"Hello, World!", {9259, 236764, 4109, 236888}},
      {"Hello, world!", {9259, 236764, 1902, 236888}},
      {" hello", {29104}},
      {"  hello", {138, 23391}},
      {"   ", {139}},
      {"12345", {236770, 236778, 236800, 236812, 236810}},
      {"  leading and trailing spaces  ", {138, 26016, 532, 45330, 9952, 138}},
      {"<|turn>user\nWhat is 2+2?<turn|>\n<|turn>model\n",
       {105, 2364, 107, 3689, 563, 236743, 236778, 236862, 236778, 236881, 106, 107, 105, 4368, 107}},
      {"<|tool_call>call:bash{command:<|\"|>ls -la<|\"|>}<tool_call|>",
       {48, 6639, 236787, 42422, 236782, 7674, 236787, 52, 5629, 753, 2149, 52, 236783, 49}},
      {"The quick brown fox jumps over the lazy dog.", {818, 3823, 8864, 37423, 38167, 1024, 506, 31770, 4799, 236761}},
      {"The capital of France is", {818, 5279, 529, 7001, 563}},
      {"", {}},
  };
  for (const auto& [text, ids] : cases) {
    EXPECT_EQ(tok.encode(text, false), ids) << text;
    EXPECT_EQ(tok.decode(ids, false), text);
  }
}

TEST(GemmaTokenizer, ChatPromptGoldens) {
  const Tokenizer& tok = gemma_tokenizer();
  const std::string prompt =
      "<bos><|turn>system\nYou are terse.<turn|>\n<|turn>user\nHi<turn|>\n<|turn>model\nHello.<turn|>\n"
      "<|turn>user\nBye<turn|>\n<|turn>model\n<|channel>thought\n<channel|>";
  const Ids want = {2,    105,   9731,  107, 3048, 659,  17514, 236761, 106,    107,   105, 2364,
                    107,  10979, 106,   107, 105,  4368, 107,   9259,   236761, 106,   107, 105,
                    2364, 107,   98874, 106, 107,  105,  4368,  107,    100,    45518, 107, 101};
  EXPECT_EQ(tok.encode(prompt, false), want);
  // Gemma 3 turn markers are plain text in Gemma 4.
  EXPECT_EQ(tok.encode("<start_of_turn>user\nWhat is 2+2?<end_of_turn>\n<start_of_turn>model\n", false).size(), 32u);
}

TEST(GemmaTokenizer, AddSpecialTokensPrependsOneBos) {
  const Tokenizer& tok = gemma_tokenizer();
  EXPECT_EQ(tok.encode("hello", true), (Ids{2, 23391}));
  EXPECT_EQ(tok.encode("", true), (Ids{2}));
  // A <bos> written in the text is matched as a token; the post-processor still adds its own.
  EXPECT_EQ(tok.encode("<bos>hello", false), (Ids{2, 23391}));
  EXPECT_EQ(tok.encode("<bos>hello", true), (Ids{2, 2, 23391}));
}

TEST(GemmaTokenizer, SpecialIdsAndLookups) {
  const Tokenizer& tok = gemma_tokenizer();
  EXPECT_EQ(tok.vocab_size(), 262145u);  // 262 144 + <image_soft_token> as an added token
  const std::vector<std::pair<std::string, int32_t>> ids = {{"<pad>", 0},
                                                            {"<eos>", 1},
                                                            {"<bos>", 2},
                                                            {"<unk>", 3},
                                                            {"<mask>", 4},
                                                            {"<|tool>", 46},
                                                            {"<tool|>", 47},
                                                            {"<|tool_call>", 48},
                                                            {"<tool_call|>", 49},
                                                            {"<|tool_response>", 50},
                                                            {"<tool_response|>", 51},
                                                            {"<|\"|>", 52},
                                                            {"<|think|>", 98},
                                                            {"<|channel>", 100},
                                                            {"<channel|>", 101},
                                                            {"<|turn>", 105},
                                                            {"<turn|>", 106},
                                                            {"\n", 107},
                                                            {"<|image>", 255999},
                                                            {"<|audio>", 256000},
                                                            {"<|image|>", 258880},
                                                            {"<audio|>", 258883},
                                                            {"<|video|>", 258884},
                                                            {"user", 2364},
                                                            {"model", 4368},
                                                            {"system", 9731},
                                                            {"thought", 45518}};
  for (const auto& [token, id] : ids) {
    EXPECT_EQ(tok.token_to_id(token), id) << token;
    EXPECT_EQ(tok.id_to_token(id), token) << id;
  }
  EXPECT_EQ(tok.token_to_id("no-such-token-xyz"), std::nullopt);
  EXPECT_EQ(tok.id_to_token(-1), std::nullopt);
  EXPECT_EQ(tok.id_to_token(262145), std::nullopt);
  EXPECT_TRUE(tok.is_special(106));
  EXPECT_FALSE(tok.is_special(107));
  EXPECT_FALSE(tok.is_special(4));  // <mask> is an added token but not special
}

TEST(GemmaTokenizer, DecodeSkipsSpecialTokensOnRequest) {
  const Tokenizer& tok = gemma_tokenizer();
  const Ids ids = {2, 105, 2364, 107, 23391, 106};
  EXPECT_EQ(tok.decode(ids, false), "<bos><|turn>user\nhello<turn|>");
  EXPECT_EQ(tok.decode(ids, true), "user\nhello");
  EXPECT_THROW(tok.decode(Ids{262145}, false), Error);
  EXPECT_THROW(tok.decode(Ids{-5}, false), Error);
}

TEST(GemmaTokenizer, ByteFallbackForCharactersOutsideTheVocabulary) {
  const Tokenizer& tok = gemma_tokenizer();
  // U+10FFFD (private use, plane 16) is not a token: it falls back to its four UTF-8 bytes.
  const std::string ch = "\xF4\x8F\xBF\xBD";
  const Ids ids = tok.encode(ch, false);
  ASSERT_EQ(ids.size(), 4u);
  const char* bytes[] = {"<0xF4>", "<0x8F>", "<0xBF>", "<0xBD>"};
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(tok.id_to_token(ids[i]), bytes[i]);
  EXPECT_EQ(tok.decode(ids, false), ch);
  // An incomplete byte run decodes to one U+FFFD per byte.
  EXPECT_EQ(tok.decode(Ids(ids.begin(), ids.begin() + 2), false), "\xEF\xBF\xBD\xEF\xBF\xBD");
}

TEST(GemmaTokenizer, InvalidUtf8InputFallsBackToBytes) {
  const Tokenizer& tok = gemma_tokenizer();
  // Truncated, overlong and stray bytes are not characters: each byte becomes its <0xNN> token.
  for (const std::string& bad : {std::string("\xE4\xB8"), std::string("\xC0\x80"), std::string("\xFF"),
                                 std::string("\xED\xA0\x80"), std::string("\xE4\xB8\xFF")}) {
    const Ids ids = tok.encode(bad, false);
    ASSERT_EQ(ids.size(), bad.size()) << bad;
    for (size_t i = 0; i < bad.size(); ++i) {
      EXPECT_EQ(tok.id_to_token(ids[i]), fmt::format("<0x{:02X}>", static_cast<unsigned char>(bad[i])));
    }
  }
  // A bad continuation byte ends the broken character; the next character encodes normally.
  const Ids ids = tok.encode(
      "\xE4"
      "a",
      false);
  ASSERT_EQ(ids.size(), 2u);
  EXPECT_EQ(tok.id_to_token(ids[0]), "<0xE4>");
  EXPECT_EQ(ids[1], tok.encode("a", false)[0]);
}

TEST(GemmaTokenizer, CacheDoesNotChangeResults) {
  const Tokenizer& tok = gemma_tokenizer();
  const std::string text = "Caching words must not change what they encode to: word word word.";
  const Ids first = tok.encode(text, false);
  EXPECT_EQ(tok.encode(text, false), first);
  EXPECT_EQ(tok.decode(first, false), text);
}

// ---- generic components on tiny tokenizer.json files ----

nlohmann::json tiny_tokenizer() {
  return nlohmann::json::parse(R"({
    "version": "1.0",
    "added_tokens": [
      {"id": 0, "content": "<s>", "special": true, "single_word": false, "lstrip": false, "rstrip": false, "normalized": false},
      {"id": 1, "content": "<x>", "special": false, "single_word": false, "lstrip": true, "rstrip": true, "normalized": false},
      {"id": 9, "content": "cab", "special": false, "single_word": true, "lstrip": false, "rstrip": false, "normalized": false}
    ],
    "normalizer": null,
    "pre_tokenizer": {"type": "Split", "pattern": {"String": " "}, "behavior": "Removed", "invert": false},
    "post_processor": {"type": "TemplateProcessing",
      "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                 {"SpecialToken": {"id": "<s>", "type_id": 0}}],
      "pair": [], "special_tokens": {"<s>": {"id": "<s>", "ids": [0], "tokens": ["<s>"]}}},
    "decoder": null,
    "model": {"type": "BPE", "dropout": null, "unk_token": "<unk>", "fuse_unk": true, "byte_fallback": false,
      "vocab": {"<s>": 0, "<x>": 1, "a": 2, "b": 3, "ab": 4, "c": 5, "abc": 6, "<unk>": 7, "bc": 8, "cab": 9},
      "merges": ["a b", ["ab", "c"], ["b", "c"]]}
  })");
}

Tokenizer tiny(const nlohmann::json& j) { return Tokenizer::from_json(j.dump(), "tiny.json"); }

TEST(TokenizerComponents, BpeAppliesMergesByRank) {
  const Tokenizer tok = tiny(tiny_tokenizer());
  EXPECT_EQ(tok.encode("abc", false), (Ids{6}));  // (a,b) rank 0 first, then (ab,c)
  EXPECT_EQ(tok.encode("bc", false), (Ids{8}));
  EXPECT_EQ(tok.encode("cba", false), (Ids{5, 3, 2}));
  EXPECT_EQ(tok.encode("a b", false), (Ids{2, 3}));    // Split/Removed drops the spaces
  EXPECT_EQ(tok.encode("abc", true), (Ids{0, 6, 0}));  // TemplateProcessing around the sequence
}

TEST(TokenizerComponents, UnknownCharactersFuseIntoOneUnk) {
  nlohmann::json j = tiny_tokenizer();
  EXPECT_EQ(tiny(j).encode("xyab", false), (Ids{7, 4}));
  j["model"]["fuse_unk"] = false;
  EXPECT_EQ(tiny(j).encode("xyab", false), (Ids{7, 7, 4}));
  j["model"]["unk_token"] = nullptr;  // no unknown token: such characters are dropped
  EXPECT_EQ(tiny(j).encode("xyab", false), (Ids{4}));
}

TEST(TokenizerComponents, IgnoreMergesTakesWholeWordsFromTheVocabulary) {
  nlohmann::json j = tiny_tokenizer();
  j["model"]["vocab"]["bca"] = 10;
  EXPECT_EQ(tiny(j).encode("bca", false), (Ids{8, 2}));
  j["model"]["ignore_merges"] = true;
  EXPECT_EQ(tiny(j).encode("bca", false), (Ids{10}));
}

TEST(TokenizerComponents, AddedTokenFlags) {
  const Tokenizer tok = tiny(tiny_tokenizer());
  // lstrip/rstrip: the whitespace around <x> belongs to the token.
  EXPECT_EQ(tok.encode("ab\t <x>  c", false), (Ids{4, 1, 5}));
  // single_word: "cab" matches only when not inside a word.
  EXPECT_EQ(tok.encode("cab", false), (Ids{9}));
  EXPECT_EQ(tok.encode("a cab", false), (Ids{2, 9}));
  EXPECT_EQ(tok.encode("acab", false), (Ids{2, 5, 4}));
  // Special tokens are matched verbatim and can be skipped when decoding.
  EXPECT_EQ(tok.encode("<s>ab", false), (Ids{0, 4}));
  EXPECT_EQ(tok.decode(Ids{0, 4, 1}, true), "ab<x>");
}

TEST(TokenizerComponents, SplitBehaviors) {
  auto run = [](SplitBehavior b, bool invert = false) {
    std::vector<std::string> out;
    split_on_literal("a--b----c--", "--", b, invert, out);
    return out;
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(run(SplitBehavior::Removed), (V{"a", "b", "c"}));
  EXPECT_EQ(run(SplitBehavior::Isolated), (V{"a", "--", "b", "--", "--", "c", "--"}));
  EXPECT_EQ(run(SplitBehavior::MergedWithPrevious), (V{"a--", "b--", "--", "c--"}));
  EXPECT_EQ(run(SplitBehavior::MergedWithNext), (V{"a", "--b", "--", "--c", "--"}));
  EXPECT_EQ(run(SplitBehavior::Contiguous), (V{"a", "--", "b", "----", "c", "--"}));
  EXPECT_EQ(run(SplitBehavior::Removed, true), (V{"--", "--", "--", "--"}));
}

TEST(TokenizerComponents, NormalizerAndDecoderSequences) {
  nlohmann::json j = tiny_tokenizer();
  j["normalizer"] = {{"type", "Sequence"},
                     {"normalizers",
                      {{{"type", "Strip"}, {"strip_left", true}, {"strip_right", true}},
                       {{"type", "Replace"}, {"pattern", {{"String", "c"}}}, {"content", "b"}},
                       {{"type", "Prepend"}, {"prepend", "a"}}}}};
  j["decoder"] = {{"type", "Sequence"},
                  {"decoders",
                   {{{"type", "Replace"}, {"pattern", {{"String", "ab"}}}, {"content", "X"}},
                    {{"type", "Fuse"}},
                    {{"type", "Strip"}, {"content", "X"}, {"start", 1}, {"stop", 0}}}}};
  const Tokenizer tok = tiny(j);
  EXPECT_EQ(tok.encode("  c ", false), (Ids{4}));  // strip -> "c" -> "b" -> "ab"
  EXPECT_EQ(tok.decode(Ids{4, 4, 5}, false), "Xc");
}

TEST(TokenizerErrors, UnsupportedComponentNamesTypeAndPath) {
  nlohmann::json j = tiny_tokenizer();
  j["normalizer"] = {{"type", "Sequence"},
                     {"normalizers", {{{"type", "Prepend"}, {"prepend", "x"}}, {{"type", "NFKC"}}}}};
  try {
    tiny(j);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("NFKC"), std::string::npos) << msg;
    EXPECT_NE(msg.find("$.normalizer.normalizers[1]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("tiny.json"), std::string::npos) << msg;
  }
  j = tiny_tokenizer();
  j["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}};
  EXPECT_THROW(tiny(j), Error);
  j = tiny_tokenizer();
  j["pre_tokenizer"]["pattern"] = {{"Regex", "\\s+"}};
  try {
    tiny(j);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("$.pre_tokenizer.pattern"), std::string::npos) << e.what();
  }
  j = tiny_tokenizer();
  j["model"]["type"] = "Unigram";
  EXPECT_THROW(tiny(j), Error);
  j = tiny_tokenizer();
  j["decoder"] = {{"type", "WordPiece"}};
  EXPECT_THROW(tiny(j), Error);
  j = tiny_tokenizer();
  j["post_processor"] = {{"type", "RobertaProcessing"}};
  EXPECT_THROW(tiny(j), Error);
}

TEST(TokenizerErrors, MalformedFiles) {
  EXPECT_THROW(Tokenizer::from_json("{\"model\": ", "cut.json"), Error);
  EXPECT_THROW(Tokenizer::from_json("[1, 2]", "array.json"), Error);
  nlohmann::json j = tiny_tokenizer();
  j["model"]["merges"].push_back("a zz");  // merge of a token that is not in the vocabulary
  try {
    tiny(j);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("$.model.merges[3]"), std::string::npos) << e.what();
  }
  j = tiny_tokenizer();
  j["model"]["vocab"]["zz"] = -3;
  EXPECT_THROW(tiny(j), Error);
  j = tiny_tokenizer();
  j["model"]["merges"] = {{"a", "b", "c"}};
  EXPECT_THROW(tiny(j), Error);
  j = tiny_tokenizer();
  j["model"]["vocab"]["dup"] = 2;  // id 2 already belongs to "a"
  EXPECT_THROW(tiny(j), Error);
  EXPECT_THROW(Tokenizer::load("/nonexistent/dir/tokenizer.json"), Error);
}

}  // namespace
}  // namespace specula::text
