// The token mask: the trie walk agrees with testing every token on its own, on the real Gemma 4
// vocabulary (multi-byte characters, byte-fallback tokens that end inside a character), and end
// tokens follow the grammar's completion.
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gemma_tokenizer.h"
#include "grammar_walk.h"
#include "specula/grammar/gbnf_parser.h"
#include "specula/grammar/json_schema.h"
#include "specula/grammar/token_mask.h"

namespace specula::grammar {
namespace {

std::shared_ptr<const TokenTrie> gemma_trie() {
  static const auto trie = [] {
    const text::Tokenizer& tok = test::gemma_tokenizer();
    std::vector<std::string> bytes(tok.vocab_size());
    for (size_t id = 0; id < bytes.size(); ++id) bytes[id] = tok.token_bytes(static_cast<int32_t>(id));
    return std::make_shared<const TokenTrie>(std::move(bytes));
  }();
  return trie;
}

bool bit(std::span<const uint64_t> mask, size_t t) { return (mask[t >> 6] >> (t & 63)) & 1; }

// Every token tested alone: the reference the trie walk must equal.
void expect_mask_equals_brute_force(TokenMasker& masker, const TokenTrie& trie, const GrammarMatcher& state) {
  const auto mask = masker.mask(state);
  size_t allowed = 0, mismatches = 0;
  for (size_t t = 0; t < trie.vocab_size(); ++t) {
    GrammarMatcher probe = state;
    const bool expect =
        !trie.bytes_of(static_cast<int32_t>(t)).empty() && probe.accept_bytes(trie.bytes_of(static_cast<int32_t>(t)));
    allowed += expect;
    if (expect != bit(mask, t) && ++mismatches < 5) ADD_FAILURE() << "token " << t << " expected " << expect;
  }
  EXPECT_EQ(mismatches, 0u);
  EXPECT_GT(allowed, 0u);
}

TEST(TokenMask, GemmaTokenBytesIncludeSpacesAndByteFallback) {
  const text::Tokenizer& tok = test::gemma_tokenizer();
  const auto byte_e4 = tok.token_to_id("<0xE4>");
  ASSERT_TRUE(byte_e4.has_value());
  EXPECT_EQ(tok.token_bytes(*byte_e4), "\xe4");
  const auto space_the = tok.token_to_id("\xe2\x96\x81the");  // "▁the"
  ASSERT_TRUE(space_the.has_value());
  EXPECT_EQ(tok.token_bytes(*space_the), " the");
  EXPECT_EQ(tok.token_bytes(1), "");  // <eos> is special
}

TEST(TokenMask, TrieWalkEqualsTestingEveryGemmaToken) {
  const auto trie = gemma_trie();
  const auto g = std::make_shared<const Grammar>(parse_gbnf(json_object_gbnf()));
  TokenMasker masker(g, trie, trie->vocab_size(), {1});
  GrammarMatcher state(g);
  expect_mask_equals_brute_force(masker, *trie, state);
  ASSERT_TRUE(state.accept_bytes("{\"k"));  // inside a string: most of the vocabulary
  expect_mask_equals_brute_force(masker, *trie, state);
  ASSERT_TRUE(state.accept_bytes("\xe4"));  // inside a multi-byte character
  expect_mask_equals_brute_force(masker, *trie, state);
}

// Inside a multi-byte character the automaton merges the prefixes whose every completion the
// grammar accepts, and keeps apart those it accepts only some completions of.
TEST(TokenMask, PartialCharactersAreMergedOnlyWhenEveryCompletionIsAllowed) {
  const auto small = std::make_shared<const TokenTrie>(test::walk_vocabulary());
  for (const char* text : {R"(root ::= "\"" [\u4e00-\u4e2f]* "\"")", R"(root ::= "\"" [^"]* "\"")"}) {
    const auto g = std::make_shared<const Grammar>(parse_gbnf(text));
    TokenMasker masker(g, small, small->vocab_size(), {});
    for (const char* prefix : {"\"", "\"\xe4", "\"\xe4\xb8", "\"\xe4\xb8\xad\xe4"}) {
      GrammarMatcher state(g);
      ASSERT_TRUE(state.accept_bytes(prefix)) << text << " " << prefix;
      expect_mask_equals_brute_force(masker, *small, state);
    }
  }
  const auto trie = gemma_trie();
  const auto g = std::make_shared<const Grammar>(parse_gbnf(json_object_gbnf()));
  TokenMasker masker(g, trie, trie->vocab_size(), {1});
  GrammarMatcher state(g);
  ASSERT_TRUE(state.accept_bytes("{\"k"));
  (void)masker.mask(state);
  // One state per continuation count, not one per prefix of the vocabulary's ~970 partial characters.
  EXPECT_LT(masker.automaton_states(), 100u);
}

TEST(TokenMask, MultiByteCharactersAndPartialTokens) {
  const auto trie = gemma_trie();
  const text::Tokenizer& tok = test::gemma_tokenizer();
  const auto g = std::make_shared<const Grammar>(parse_gbnf(R"(root ::= "中文" | "é")"));
  TokenMasker masker(g, trie, trie->vocab_size(), {1});
  GrammarMatcher state(g);
  const auto mask = masker.mask(state);
  EXPECT_TRUE(bit(mask, static_cast<size_t>(*tok.token_to_id("<0xE4>"))));  // 中 starts E4 B8 AD
  EXPECT_TRUE(bit(mask, static_cast<size_t>(*tok.token_to_id("<0xC3>"))));  // é is C3 A9
  EXPECT_FALSE(bit(mask, static_cast<size_t>(*tok.token_to_id("<0xE5>"))));
  EXPECT_FALSE(bit(mask, 1));  // <eos>: the grammar cannot end yet
  for (const int32_t id : tok.encode("中文", false)) {
    EXPECT_TRUE(bit(masker.mask(state), static_cast<size_t>(id)));
    ASSERT_TRUE(masker.accept_token(state, id));
  }
  EXPECT_TRUE(state.finished());
  const auto end_mask = masker.mask(state);
  size_t allowed = 0;
  for (size_t t = 0; t < trie->vocab_size(); ++t) allowed += bit(end_mask, t);
  EXPECT_EQ(allowed, 1u);
  EXPECT_TRUE(bit(end_mask, 1));
}

TEST(TokenMask, RepeatedStatesReuseTheirMask) {
  const auto trie = std::make_shared<const TokenTrie>(test::walk_vocabulary());
  const auto g = std::make_shared<const Grammar>(parse_gbnf(R"(root ::= "\"" [a-z]* "\"")"));
  TokenMasker masker(g, trie, trie->vocab_size() + 10, {});
  GrammarMatcher state(g);
  ASSERT_TRUE(state.accept_bytes("\"ab"));
  const std::vector<uint64_t> first(masker.mask(state).begin(), masker.mask(state).end());
  ASSERT_TRUE(state.accept_bytes("c"));  // the same grammar state again
  const auto again = masker.mask(state);
  EXPECT_EQ(std::vector<uint64_t>(again.begin(), again.end()), first);
  EXPECT_EQ(again.size(), (trie->vocab_size() + 10 + 63) / 64);  // sized for the model's vocabulary
}

}  // namespace
}  // namespace specula::grammar
