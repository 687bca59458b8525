// The tokenizer and chat template of a GGUF file: the Gemma 4 test tokenizer written as llama.cpp's
// converter writes it (synth/gguf_tokenizer_export.h) and read back (text/gguf_tokenizer.h) encodes
// and decodes the golden corpus exactly like tokenizer.json, has the same added and special
// tokens, renders the same chat prompt; metadata specula cannot use is refused by name.
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "gemma_tokenizer.h"
#include "specula/io/gguf.h"
#include "specula/io/gguf_writer.h"
#include "specula/synth/gguf_tokenizer_export.h"
#include "specula/text/chat_template.h"
#include "specula/text/gguf_tokenizer.h"
#include "specula/text/tokenizer.h"
#include "specula/text/tokenizer_json.h"
#include "specula/util/error.h"

namespace specula {
namespace {

using test::gemma_tokenizer_dir;

// Both tokenizers from one parse of tokenizer.json (the 16 MB parse dominates the suite).
struct Tokenizers {
  std::vector<std::byte> gguf_bytes;
  std::unique_ptr<GgufFile> gguf;
  std::unique_ptr<text::Tokenizer> from_json;
  std::unique_ptr<text::Tokenizer> from_gguf;
};

const Tokenizers& tokenizers() {
  static const Tokenizers t = [] {
    Tokenizers out;
    text::TokenizerFile file = text::load_tokenizer_json(gemma_tokenizer_dir() + "/tokenizer.json");
    GgufWriter w;
    w.set_string("general.architecture", "gemma4");
    synth::add_gguf_tokenizer(w, file, gemma_tokenizer_dir());
    out.gguf_bytes = w.bytes();
    out.gguf = std::make_unique<GgufFile>(GgufFile::from_bytes(out.gguf_bytes, "gemma4-vocab.gguf"));
    out.from_json = std::make_unique<text::Tokenizer>(text::Tokenizer::from_file(std::move(file)));
    out.from_gguf = std::make_unique<text::Tokenizer>(text::gguf_tokenizer(*out.gguf));
    return out;
  }();
  return t;
}

TEST(GgufTokenizer, WritesWhatTheConverterWrites) {
  const GgufFile& f = *tokenizers().gguf;
  EXPECT_EQ(f.get_string("tokenizer.ggml.model"), "gemma4");
  const auto tokens = f.get_string_array("tokenizer.ggml.tokens");
  ASSERT_EQ(tokens.size(), 262145u);  // 262 144 BPE tokens and <image_soft_token>
  EXPECT_EQ(tokens[105], "<|turn>");
  EXPECT_EQ(tokens[0x0A + 238], "<0x0A>");
  const std::vector<int32_t> types = f.get_i32_array("tokenizer.ggml.token_type");
  EXPECT_EQ(types[2], static_cast<int32_t>(text::GgufTokenType::Control));       // <bos>
  EXPECT_EQ(types[105], static_cast<int32_t>(text::GgufTokenType::Control));     // <|turn>
  EXPECT_EQ(types[48], static_cast<int32_t>(text::GgufTokenType::UserDefined));  // <|tool_call>, kept visible
  EXPECT_EQ(types[0x0A + 238], static_cast<int32_t>(text::GgufTokenType::Byte));
  EXPECT_EQ(types[107], static_cast<int32_t>(text::GgufTokenType::Normal));  // "\n", an added token
  EXPECT_EQ(f.get_string_array("tokenizer.ggml.merges").size(), 514906u);
  EXPECT_EQ(f.get_int("tokenizer.ggml.bos_token_id"), 2);
  EXPECT_TRUE(f.get_bool("tokenizer.ggml.add_bos_token"));
}

TEST(GgufTokenizer, SameVocabularyAddedAndSpecialTokensAsTokenizerJson) {
  const text::Tokenizer& a = *tokenizers().from_json;
  const text::Tokenizer& b = *tokenizers().from_gguf;
  ASSERT_EQ(a.vocab_size(), b.vocab_size());
  auto added = [](const text::Tokenizer& t) {
    std::map<int32_t, std::pair<std::string, bool>> m;
    for (const text::AddedToken& x : t.added_tokens()) m[x.id] = {x.content, x.special};
    return m;
  };
  EXPECT_EQ(added(a), added(b));  // 6 415 tokens matched whole, 24 of them special
  for (int32_t id = 0; id < static_cast<int32_t>(a.vocab_size()); ++id) {
    ASSERT_EQ(a.id_to_token(id), b.id_to_token(id)) << id;
    ASSERT_EQ(a.is_special(id), b.is_special(id)) << id;
  }
}

TEST(GgufTokenizer, EncodesAndDecodesTheGoldenCorpusLikeTokenizerJson) {
  const text::Tokenizer& a = *tokenizers().from_json;
  const text::Tokenizer& b = *tokenizers().from_gguf;
  std::ifstream in(gemma_tokenizer_dir() + "/encode-goldens.jsonl");
  ASSERT_TRUE(in);
  std::string line;
  int cases = 0;
  while (std::getline(in, line)) {
    const nlohmann::json g = nlohmann::json::parse(line);
    const std::string text = g.at("text");
    const std::vector<int32_t> ids = b.encode(text, /*add_special_tokens=*/false);
    ASSERT_EQ(ids, g.at("ids").get<std::vector<int32_t>>()) << text;
    ASSERT_EQ(ids, a.encode(text, false)) << text;
    ASSERT_EQ(b.encode(text, true), a.encode(text, true)) << text;  // one <bos> in front
    ASSERT_EQ(b.decode(ids, false), g.at("decoded").get<std::string>()) << text;
    ASSERT_EQ(b.decode(ids, true), a.decode(ids, true)) << text;
    ++cases;
  }
  EXPECT_EQ(cases, 248);
}

TEST(GgufTokenizer, ControlTokensWhitespaceRunsAndUnusedTokensAreMatchedWhole) {
  const text::Tokenizer& a = *tokenizers().from_json;
  const text::Tokenizer& b = *tokenizers().from_gguf;
  for (const std::string text :
       {"<|turn>user\nhi<turn|>\n<|turn>model\n", "a\n\n\n\nb\t\t\tc", "<unused5>x<mask>",
        "<|tool_call>call:f{a:<|\"|>x<|\"|>}<tool_call|>", "▁▁literal▁markers", "<table><tr>"}) {
    EXPECT_EQ(b.encode(text, false), a.encode(text, false)) << text;
  }
  EXPECT_EQ(b.encode("<|turn>", false), std::vector<int32_t>{105});
}

TEST(GgufTokenizer, ChatTemplateRendersLikeTheModelDirectory) {
  const GgufFile& f = *tokenizers().gguf;
  std::ifstream in(gemma_tokenizer_dir() + "/chat_template.jinja");
  std::stringstream jinja;
  jinja << in.rdbuf();
  const std::optional<std::string> text = text::gguf_chat_template(f);
  ASSERT_TRUE(text.has_value());
  EXPECT_EQ(*text, jinja.str());
  EXPECT_FALSE(text::gguf_chat_template(f, "tool_use").has_value());

  const nlohmann::ordered_json special = text::gguf_special_tokens(f);
  EXPECT_EQ(special.at("bos_token"), "<bos>");
  EXPECT_EQ(special.at("eos_token"), "<eos>");
  const ChatTemplate from_gguf(*text, "gemma4-vocab.gguf (tokenizer.chat_template)", special);
  const ChatTemplate from_dir = ChatTemplate::from_model_dir(gemma_tokenizer_dir());
  const nlohmann::ordered_json messages = nlohmann::ordered_json::parse(
      R"([{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"},
          {"role":"assistant","content":"Hello."},{"role":"user","content":"Sum 2+2"}])");
  const std::string rendered = from_gguf.render(messages);
  EXPECT_EQ(rendered, from_dir.render(messages));
  EXPECT_EQ(rendered.rfind("<bos><|turn>system\n", 0), 0u) << rendered;
}

// ---- refusals: a small hand-made vocabulary, one fault at a time ----

GgufWriter toy_writer() {
  GgufWriter w;
  w.set_string("tokenizer.ggml.model", "gemma4");
  w.set_string_array("tokenizer.ggml.tokens", {"<pad>", "<eos>", "<bos>", "a", "b", "ab"});
  w.set_array("tokenizer.ggml.token_type", std::vector<int32_t>{3, 3, 3, 1, 1, 1});
  w.set_array("tokenizer.ggml.scores", std::vector<float>(6, -1000.0f));
  w.set_string_array("tokenizer.ggml.merges", {"a b"});
  w.set_u32("tokenizer.ggml.bos_token_id", 2);
  return w;
}

std::string refusal(const std::function<void(GgufWriter&)>& change) {
  GgufWriter w = toy_writer();
  change(w);
  const std::vector<std::byte> bytes = w.bytes();
  try {
    text::gguf_tokenizer(GgufFile::from_bytes(bytes, "toy.gguf"));
  } catch (const Error& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(GgufTokenizer, AToyGemma4VocabularyWorks) {
  const std::vector<std::byte> bytes = toy_writer().bytes();
  const text::Tokenizer t = text::gguf_tokenizer(GgufFile::from_bytes(bytes, "toy.gguf"));
  EXPECT_EQ(t.encode("ab<eos>", true), (std::vector<int32_t>{2, 5, 1}));
  EXPECT_EQ(t.decode(std::vector<int32_t>{2, 5, 3}, true), "aba");
}

TEST(GgufTokenizer, RefusesMetadataItCannotUseNamingFileAndKey) {
  auto has = [](const std::string& msg, const std::string& part) {
    return msg.find(part) != std::string::npos && msg.find("toy.gguf") != std::string::npos;
  };
  std::string m = refusal([](GgufWriter& w) { w.set_string("tokenizer.ggml.model", "llama"); });
  EXPECT_TRUE(has(m, "tokenizer.ggml.model is \"llama\"")) << m;
  m = refusal([](GgufWriter& w) { w.remove_key("tokenizer.ggml.model"); });
  EXPECT_TRUE(has(m, "'tokenizer.ggml.model' is missing")) << m;
  m = refusal([](GgufWriter& w) { w.remove_key("tokenizer.ggml.merges"); });
  EXPECT_TRUE(has(m, "'tokenizer.ggml.merges' is missing")) << m;
  m = refusal([](GgufWriter& w) { w.remove_key("tokenizer.ggml.tokens"); });
  EXPECT_TRUE(has(m, "'tokenizer.ggml.tokens' is missing")) << m;
  m = refusal([](GgufWriter& w) { w.set_array("tokenizer.ggml.token_type", std::vector<int32_t>{3, 3, 3, 1}); });
  EXPECT_TRUE(has(m, "'tokenizer.ggml.token_type' has 4 entries but 'tokenizer.ggml.tokens' has 6")) << m;
  m = refusal([](GgufWriter& w) { w.set_array("tokenizer.ggml.scores", std::vector<float>(7, 0.0f)); });
  EXPECT_TRUE(has(m, "'tokenizer.ggml.scores' has 7 entries")) << m;
  m = refusal([](GgufWriter& w) { w.set_array("tokenizer.ggml.token_type", std::vector<int32_t>{3, 3, 3, 1, 9, 1}); });
  EXPECT_TRUE(has(m, "'tokenizer.ggml.token_type'[4] = 9")) << m;
  m = refusal([](GgufWriter& w) { w.set_u32("tokenizer.ggml.bos_token_id", 6); });
  EXPECT_TRUE(has(m, "'tokenizer.ggml.bos_token_id' = 6 is outside the 6 tokens")) << m;
  m = refusal([](GgufWriter& w) { w.remove_key("tokenizer.ggml.bos_token_id"); });
  EXPECT_TRUE(has(m, "'tokenizer.ggml.bos_token_id' is missing")) << m;
  m = refusal([](GgufWriter& w) { w.set_string_array("tokenizer.ggml.merges", {"a c"}); });
  EXPECT_TRUE(has(m, "'tokenizer.ggml.merges'[0] (\"a c\") makes a token outside")) << m;
  m = refusal([](GgufWriter& w) { w.set_string_array("tokenizer.ggml.merges", {"ab"}); });
  EXPECT_TRUE(has(m, "'tokenizer.ggml.merges'[0] (\"ab\") is not \"left right\"")) << m;
  m = refusal([](GgufWriter& w) {
    w.set_string_array("tokenizer.ggml.tokens", {"<pad>", "", "<bos>", "a", "b", "ab"});
  });
  EXPECT_TRUE(has(m, "'tokenizer.ggml.tokens'[1] is empty")) << m;
  m = refusal([](GgufWriter& w) { w.set_string_array("tokenizer.ggml.tokens", {"x"}); });
  EXPECT_TRUE(has(m, "has 6 entries but 'tokenizer.ggml.tokens' has 1")) << m;
  m = refusal([](GgufWriter& w) { w.set_u32("tokenizer.ggml.tokens", 3); });
  EXPECT_TRUE(has(m, "'tokenizer.ggml.tokens' is u32")) << m;
}

}  // namespace
}  // namespace specula
