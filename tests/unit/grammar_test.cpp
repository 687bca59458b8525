// The GBNF parser (errors with line and column) and the byte-level matcher (multi-byte UTF-8,
// partial characters, completion, left-recursion refusal).
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "error_of.h"
#include "specula/grammar/gbnf_parser.h"
#include "specula/grammar/grammar_matcher.h"

namespace specula::grammar {
namespace {

GrammarMatcher matcher(const std::string& gbnf) {
  return GrammarMatcher(std::make_shared<const Grammar>(parse_gbnf(gbnf)));
}

// Whether `text` is a complete sentence of the grammar.
bool matches(const std::string& gbnf, const std::string& text) {
  GrammarMatcher m = matcher(gbnf);
  return m.accept_bytes(text) && m.can_end();
}

TEST(GbnfParser, ParsesRulesAcrossLinesWithComments) {
  const std::string g = R"(# a greeting
root ::= greeting " " name   # then a name
greeting ::= "hi"
  | "hello"
name ::= [A-Z] [a-z]*
)";
  EXPECT_TRUE(matches(g, "hi Bob"));
  EXPECT_TRUE(matches(g, "hello Al"));
  EXPECT_FALSE(matches(g, "hey Bob"));
  EXPECT_FALSE(matches(g, "hi bob"));
}

TEST(GbnfParser, Repetitions) {
  EXPECT_TRUE(matches(R"(root ::= "a"{2,3})", "aa"));
  EXPECT_TRUE(matches(R"(root ::= "a"{2,3})", "aaa"));
  EXPECT_FALSE(matches(R"(root ::= "a"{2,3})", "a"));
  EXPECT_FALSE(matches(R"(root ::= "a"{2,3})", "aaaa"));
  EXPECT_TRUE(matches(R"(root ::= "ab"{2,})", "ababab"));
  EXPECT_FALSE(matches(R"(root ::= "ab"{2,})", "ab"));
  EXPECT_TRUE(matches(R"(root ::= ("x" | "y")+ "!"?)", "xyx!"));
  EXPECT_FALSE(matches(R"(root ::= ("x" | "y")+)", ""));
  EXPECT_TRUE(matches(R"(root ::= [^"]{3})", "a\xc3\xa9z"));  // é is one character
}

TEST(GbnfParser, EscapesAndClasses) {
  EXPECT_TRUE(matches(R"(root ::= "\x41\u00e9\n" [\]\-a])", "A\xc3\xa9\n]"));
  EXPECT_TRUE(matches(R"(root ::= "\x41\u00e9\n" [\]\-a])", "A\xc3\xa9\n-"));
  EXPECT_TRUE(matches(R"(root ::= . .)", "\xf0\x9f\x98\x80x"));  // an emoji and x
}

TEST(GbnfParser, ErrorsNameLineAndColumn) {
  EXPECT_EQ(test::error_of([] { parse_gbnf("root ::= \"a\"\nfoo ::= (\"b\"\n"); }),
            "grammar line 3, column 1: expected ')' to close the group, found the end of the grammar");
  EXPECT_EQ(test::error_of([] { parse_gbnf("root ::= \"a\" ]"); }),
            "grammar line 1, column 14: expected a literal, a character class, '.', '(', a token <[id]> or a rule "
            "name, found ']'");
  EXPECT_EQ(test::error_of([] { parse_gbnf("root ::= \"\\q\""); }), "grammar line 1, column 11: unknown escape '\\q'");
  EXPECT_EQ(test::error_of([] { parse_gbnf("root ::= [z-a]"); }),
            "grammar line 1, column 13: class range U+007A-U+0061 is reversed");
  EXPECT_EQ(test::error_of([] { parse_gbnf("root ::= \"a\"{5000}"); }),
            "grammar line 1, column 14: repetition count exceeds the limit 1000");
  EXPECT_EQ(test::error_of([] { parse_gbnf("root ::= x"); }), "grammar: rule 'x' is used but never defined");
  EXPECT_EQ(test::error_of([] { parse_gbnf("start ::= \"a\""); }), "grammar: no rule named 'root' (the start rule)");
  EXPECT_EQ(test::error_of([] { parse_gbnf("root ::= \"a\"\nroot ::= \"b\""); }),
            "grammar line 2, column 1: rule 'root' is defined twice");
  EXPECT_EQ(test::error_of([] { parse_gbnf("  # nothing\n"); }),
            "grammar line 2, column 1: the grammar is empty (it needs at least a 'root ::= ...' rule)");
  EXPECT_EQ(test::error_of([] { parse_gbnf("root ::= \"abc"); }),
            "grammar line 1, column 14: unterminated string literal (missing '\"')");
}

TEST(GbnfParser, RefusesLeftRecursionAlsoThroughEmptyRules) {
  EXPECT_EQ(test::error_of([] { parse_gbnf("root ::= root \"a\" | \"b\""); }),
            "grammar: rule 'root' is left-recursive (it can reach itself without consuming a character)");
  // (x?)* can loop forever on nothing: x? is nullable.
  EXPECT_NE(test::error_of([] { parse_gbnf("root ::= (\"x\"?)*"); }).find("left-recursive"), std::string::npos);
  EXPECT_NO_THROW(parse_gbnf("root ::= \"a\" root | \"\""));  // right recursion is fine
}

TEST(GrammarMatcher, RejectedBytesLeaveTheStateUnchanged) {
  GrammarMatcher m = matcher(R"(root ::= "ab" | "ac")");
  ASSERT_TRUE(m.accept_byte('a'));
  EXPECT_FALSE(m.accept_byte('d'));
  EXPECT_FALSE(m.accept_bytes("cx"));
  EXPECT_TRUE(m.accept_byte('c'));
  EXPECT_TRUE(m.finished());
}

TEST(GrammarMatcher, PartialUtf8KeepsOnlyReachableCharacters) {
  // é is C3 A9, ü is C3 BC, 中 is E4 B8 AD.
  GrammarMatcher m = matcher(R"(root ::= [é] | "中")");
  GrammarMatcher c3 = m;
  ASSERT_TRUE(c3.accept_byte(0xC3));  // could become é
  EXPECT_FALSE(c3.can_end());
  EXPECT_FALSE(GrammarMatcher(c3).accept_byte(0xBC));  // ü: not in the grammar
  EXPECT_TRUE(GrammarMatcher(c3).accept_byte(0xA9));
  EXPECT_FALSE(GrammarMatcher(m).accept_byte(0xC4));  // no character starting C4 is allowed
  EXPECT_FALSE(GrammarMatcher(m).accept_byte(0x80));  // a continuation byte cannot start
  EXPECT_FALSE(GrammarMatcher(m).accept_byte(0xC0));  // overlong lead
  GrammarMatcher e4 = m;
  ASSERT_TRUE(e4.accept_byte(0xE4));
  ASSERT_TRUE(e4.accept_byte(0xB8));
  EXPECT_FALSE(GrammarMatcher(e4).accept_byte(0xAE));
  ASSERT_TRUE(e4.accept_byte(0xAD));
  EXPECT_TRUE(e4.finished());
}

TEST(GrammarMatcher, RefusesSurrogatesAndOverlongEncodings) {
  GrammarMatcher any = matcher("root ::= .*");
  EXPECT_FALSE(GrammarMatcher(any).accept_bytes("\xed\xa0\x80"));      // U+D800
  EXPECT_FALSE(GrammarMatcher(any).accept_bytes("\xe0\x80\xaf"));      // overlong '/'
  EXPECT_FALSE(GrammarMatcher(any).accept_bytes("\xf4\x90\x80\x80"));  // beyond U+10FFFF
  EXPECT_TRUE(GrammarMatcher(any).accept_bytes("\xf4\x8f\xbf\xbf"));
}

TEST(GrammarMatcher, CanEndAndFinished) {
  GrammarMatcher m = matcher(R"(root ::= "a" "b"?)");
  EXPECT_FALSE(m.can_end());
  ASSERT_TRUE(m.accept_byte('a'));
  EXPECT_TRUE(m.can_end());
  EXPECT_FALSE(m.finished());
  ASSERT_TRUE(m.accept_byte('b'));
  EXPECT_TRUE(m.finished());
  EXPECT_FALSE(m.accept_byte('b'));
}

TEST(GrammarMatcher, DeepRightRecursionStaysShallow) {
  GrammarMatcher m = matcher(R"g(root ::= "(" root ")" | "x")g");
  const std::string open(200, '(');
  ASSERT_TRUE(m.accept_bytes(open + "x"));
  EXPECT_FALSE(m.can_end());
  ASSERT_TRUE(m.accept_bytes(std::string(200, ')')));
  EXPECT_TRUE(m.finished());
}

}  // namespace
}  // namespace specula::grammar
